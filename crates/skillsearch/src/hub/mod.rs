//! `skillsearch hub serve`: the SkillHub API (reference §1.3d) over this engine, so that a
//! team's `hub_endpoint` points at skills it keeps itself. It serves the skills published to its
//! store (`--store`, an embedded store under the home by default: no other process) and those of
//! the configured skill roots, all in one index; ranking is the engine's, as in local search
//! (hybrid where a sentence model is installed); records, scores and bundles come from
//! [`skillsearch_core::registry`]. Publishing is in [`publish`]; the client commands (`hub
//! publish`, `yank`, `delete`, `versions`, `token create`) in [`client`].
//!
//! Routes (every JSON answer in the envelope `{error, requestId, status, result}`, success being
//! `status` 0 with `error` "ok"; `X-Request-ID` echoed):
//! - `GET /openapi/v1/skills?q=&limit=` — discover, `limit` 1–50 (default 8);
//! - `GET /openapi/v1/skills/search?q&tags&category&min_score&page&limit` — filtered, paged;
//! - `GET /openapi/v1/skills/{id}` — the record (`id`: the UUID or the `skill_id`);
//! - `GET /openapi/v1/skills/{id}/download?source=` — the raw zip, `source` one of raven, everme,
//!   cli, web;
//! - `GET /openapi/v1/vectors?model=&dim=&after=&limit=` — the hub's embedder id, dimension and
//!   a page of its skills' vectors (see [`vectors`]);
//! - `GET /health` — `{"status":"ok"}`;
//! - publishing (a token with the publish scope): `POST /openapi/v1/skills` (the zip),
//!   `GET /openapi/v1/skills/{name}/versions`, `POST /openapi/v1/skills/{name}/versions/{v}/yank`,
//!   `DELETE /openapi/v1/skills/{name}` (see [`publish`]).
//!
//! Errors: 60001 (404), 60002 (400, a bad parameter; 401, a missing or unknown token; a bad
//! `source` is 422), 60003 (503, the bundle could not be built), 60005 (429 with `Retry-After`),
//! 60006 (403, the token's scope does not allow the call), 60007 (409, the version exists with
//! other content), 60008 (422 or 413, the published archive is refused; the message says why),
//! 60009 (503, the store's database cannot be reached, or a write waited 30 s for the one
//! before it), 60010 (409, vectors asked for another model), 60011 (503, the model still
//! loading), 60012 (507, the store's disk, or its database's, is full: nothing was written),
//! 20001 (500). Rate limits per client address and minute: discover, search and read share one
//! budget (120), downloads have their own (30), and so do publishes, yanks and deletes (30).
//!
//! Reads are open unless the server runs with `--require-token` (or `--token-file`): then every
//! call carries a token of the store (`hub token create`) or the file's. Writes always need the
//! publish scope.

mod client;
mod publish;
mod store;
mod vectors;

pub(crate) use client::{HubClientCommand, run_client};
use store::HubStore;
pub(crate) use store::store_arg;

use crate::serve::Limits;
use crate::serve::watch::{Current, Reopen, watch};
use anyhow::{Context, Result, bail};
use axum::Router;
use axum::extract::{ConnectInfo, Path as UrlPath, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};
use skillsearch_core::config::Settings;
use skillsearch_core::corpus::bundle::random_hex;
use skillsearch_core::index::Refresh;
use skillsearch_core::registry::store::Scope;
use skillsearch_core::registry::{self, Record, Registry};
use skillsearch_core::{EligibilityEnv, Engine, Error as CoreError};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The `source` values a download accepts (the reference service's fixed set).
pub(crate) const DOWNLOAD_SOURCES: &[&str] = &["raven", "everme", "cli", "web"];
/// Most candidates a filtered search ranks before filtering and paging.
const SEARCH_POOL: usize = 500;

/// How one hub server listens and limits its clients.
#[derive(Debug, Clone)]
pub(crate) struct HubOptions {
    pub addr: SocketAddr,
    /// The store published skills go to: a directory (created when missing) or a PostgreSQL
    /// URI.
    pub store: String,
    /// A token with the publish scope besides the store's own (`--token-file`).
    pub token: Option<String>,
    /// Reads need a token too (always so with `token`).
    pub require_token: bool,
    pub limits: Limits,
    /// Discover, search and read calls per client address and minute.
    pub read_per_minute: u32,
    /// Downloads per client address and minute.
    pub download_per_minute: u32,
    /// Publishes, yanks and deletes per client address and minute.
    pub publish_per_minute: u32,
    /// How often the index looks for changed skills where a root cannot be watched.
    pub refresh_every: Duration,
    /// A peer hub whose skill vectors are taken before embedding (`--vectors-from`).
    pub vectors_from: Option<String>,
}

struct App {
    engine: Engine,
    /// The index answering now; the watcher swaps in a rebuilt one when it must.
    current: Arc<Current>,
    registry: Registry,
    store: HubStore,
    /// The store's tree, as the index's first root names it.
    live_root: PathBuf,
    /// See [`HubOptions::token`].
    token: Option<String>,
    require_token: bool,
    /// Retrieval is lexical by configuration: no sentence model will load.
    lexical: bool,
    rate: RateLimiter,
    eligibility: EligibilityEnv,
    /// One permit per core: searches beyond that wait their turn in arrival order instead of
    /// running all at once (which only adds memory and stretches every answer).
    runners: tokio::sync::Semaphore,
    /// Writes (publish, yank, delete) run one at a time on a permit of their own: a store that
    /// hangs (a frozen database) holds up the writes, never the searches.
    writers: tokio::sync::Semaphore,
}

/// Runs the hub server until SIGINT/SIGTERM.
pub(crate) fn run(home: PathBuf, settings: Settings, opts: HubOptions) -> Result<u8> {
    let store = HubStore::open(&home, &opts.store)?;
    // Published skills first: a configured skill of the same name is shadowed by the published
    // one, as the first root wins a collision.
    let roots = skillsearch_core::corpus::Roots::explicit(
        std::iter::once(store.live()).chain(settings.skills.iter().cloned()),
    );
    let live = store.live();
    // The store's tree as the index names it (made absolute).
    let live_root = roots.0[0].path.clone();
    if roots.0.iter().skip(1).any(|r| live.starts_with(&r.path)) {
        bail!(
            "the hub store's tree {} is inside a skill root; give --store a directory outside every --skills root",
            live.display()
        );
    }
    let index = Arc::new(crate::context::open_index_held(
        &home,
        &roots,
        Refresh::Always,
    )?);
    let require_token = opts.require_token || opts.token.is_some();
    if !opts.addr.ip().is_loopback() && !require_token {
        tracing::warn!(target: "hub", addr = %opts.addr, "serving off loopback with open reads: anyone who reaches this address can read every skill (--require-token closes them)");
    }
    if opts.token.is_none() && !store.has_tokens() {
        tracing::info!(target: "hub", store = %store.shown(), "no publish token yet: `skillsearch hub token create --scope publish` makes one");
    }
    let engine = Engine::new(&settings, &home);
    // Skills' vectors are taken, before embedding, from the database's shared table (every
    // replica of a PostgreSQL store writes what it embeds there) and from a peer hub.
    let mut shared = Vec::from_iter(store.shared_vectors());
    if let Some(url) = &opts.vectors_from {
        let mut hs =
            skillsearch_core::HubSettings::new(url.as_str(), home.join("cache").join("hub"));
        hs.api_key = settings.hub_api_key.clone();
        let peer = skillsearch_core::PeerVectors::new(&hs)
            .with_context(|| format!("--vectors-from {url}"))?;
        shared.push(Arc::new(peer));
    }
    let embedding = crate::embedding::Background::start_sharing(
        &home,
        &settings,
        engine.semantic().clone(),
        shared,
    );
    // The index gets its vectors in the background (and any index the watcher rebuilds).
    embedding.register(&index);
    let current = Current::new(index);
    {
        // Skills added, changed or removed under the roots show once the watcher sees them
        // (inotify; every `refresh_every` where a root cannot be watched; a catch-up every
        // minute); an index deleted or broken under the server is rebuilt.
        let (home, roots, embedding) = (home.clone(), roots.clone(), embedding.clone());
        let reopen: Reopen = Box::new(move || {
            let idx = Arc::new(crate::context::open_index_held(
                &home,
                &roots,
                Refresh::Always,
            )?);
            embedding.register(&idx);
            Ok(idx)
        });
        // The store's tree changes only through the store, which says what it changed: the
        // write routes and the follower refresh those skill directories, so the watcher leaves
        // it to them (and to its catch-up).
        watch(
            &current,
            opts.refresh_every.as_millis() as u64,
            reopen,
            std::slice::from_ref(&live_root),
        );
    }
    {
        // A database store: what other replicas publish reaches this one's tree on their
        // notification (or the catch-up); the changed skills are refreshed in the index at once.
        let weak = Arc::downgrade(&current);
        let live = live_root.clone();
        store.follow(
            opts.refresh_every.max(Duration::from_secs(1)),
            move |names: &[String]| {
                let dirs: Vec<PathBuf> = names.iter().map(|n| live.join(n)).collect();
                if let Some(c) = weak.upgrade() {
                    refresh_skills(&c, &dirs);
                }
            },
        );
    }
    let app = Arc::new(App {
        engine,
        current,
        registry: Registry::new(),
        store,
        live_root,
        token: opts.token.clone(),
        require_token,
        lexical: settings.retriever == skillsearch_core::retrieve::Retriever::Lexical,
        rate: RateLimiter::new(
            opts.read_per_minute,
            opts.download_per_minute,
            opts.publish_per_minute,
        ),
        eligibility: EligibilityEnv::allow_all(),
        writers: tokio::sync::Semaphore::new(1),
        runners: tokio::sync::Semaphore::new(
            std::thread::available_parallelism().map_or(2, |n| n.get()),
        ),
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        crate::serve::listen_and_serve(opts.addr, router(app), opts.limits, "hub").await
    })?;
    Ok(0)
}

/// Refreshes the skill directories `dirs` of the store's tree in `current`'s index
/// ([`SkillIndex::refresh_dirs`](skillsearch_core::SkillIndex::refresh_dirs)): what a write
/// changed, and nothing else. When the watcher holds the index's writer at that moment (its
/// first look, or its catch-up), this waits for it and tries again, for up to 10 s: the watcher
/// does not watch the store's tree, so the change would otherwise wait for the next catch-up.
/// A failure is logged and left to that catch-up.
fn refresh_skills(current: &Current, dirs: &[PathBuf]) {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        match current.get().refresh_dirs(dirs, &|_| {}) {
            Ok(r) if r.locked && Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(r) if r.locked => {
                tracing::warn!(target: "hub", "index busy for 10 s after a write; the watcher's catch-up will index it");
                return;
            }
            Ok(_) => return,
            Err(e) => {
                tracing::warn!(target: "hub", error = %e, "index not refreshed after a write; the watcher's catch-up will retry");
                return;
            }
        }
    }
}

fn router(app: Arc<App>) -> Router {
    use axum::routing::post;
    Router::new()
        .route(
            "/openapi/v1/skills",
            get(h_discover).post(publish::h_publish),
        )
        .route("/openapi/v1/skills/search", get(h_search))
        .route(
            "/openapi/v1/skills/{id}",
            get(h_read).delete(publish::h_delete),
        )
        .route("/openapi/v1/skills/{id}/download", get(h_download))
        .route("/openapi/v1/skills/{id}/versions", get(publish::h_versions))
        .route(
            "/openapi/v1/skills/{id}/versions/{version}/yank",
            post(publish::h_yank),
        )
        .route("/openapi/v1/vectors", get(vectors::h_vectors))
        .route("/health", get(h_health))
        .fallback(h_fallback)
        .method_not_allowed_fallback(h_method)
        .with_state(app)
}

// ------------------------------------------------------------------ envelope

/// The request id to answer with: the client's `X-Request-ID` when it is a sane token,
/// otherwise a new one.
fn request_id(headers: &HeaderMap) -> String {
    headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| {
            !v.is_empty()
                && v.len() <= 128
                && v.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        })
        .map_or_else(|| random_hex(32), str::to_owned)
}

/// One failed call: its HTTP status, the service code and the message.
#[derive(Debug)]
struct Fail {
    http: StatusCode,
    code: u32,
    message: String,
    retry_after: Option<u64>,
}

impl Fail {
    fn not_found(what: String) -> Fail {
        Fail {
            http: StatusCode::NOT_FOUND,
            code: 60001,
            message: what,
            retry_after: None,
        }
    }
    fn bad(message: String) -> Fail {
        Fail {
            http: StatusCode::BAD_REQUEST,
            code: 60002,
            message,
            retry_after: None,
        }
    }
    fn internal(e: impl std::fmt::Display) -> Fail {
        tracing::warn!(target: "hub", error = %e, "internal error");
        Fail {
            http: StatusCode::INTERNAL_SERVER_ERROR,
            code: 20001,
            message: "internal error; the server log has the cause".into(),
            retry_after: None,
        }
    }
}

fn with_id(mut r: Response, rid: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(rid) {
        r.headers_mut().insert("x-request-id", v);
    }
    r
}

fn ok(rid: &str, result: Value) -> Response {
    let body = json!({"error": "ok", "requestId": rid, "status": 0, "result": result});
    with_id(axum::Json(body).into_response(), rid)
}

fn answer(rid: &str, res: Result<Value, Fail>) -> Response {
    match res {
        Ok(v) => ok(rid, v),
        Err(f) => fail(rid, f),
    }
}

fn fail(rid: &str, f: Fail) -> Response {
    let body = json!({"error": f.message, "requestId": rid, "status": f.code, "result": null});
    let mut r = (f.http, axum::Json(body)).into_response();
    if let Some(s) = f.retry_after
        && let Ok(v) = HeaderValue::from_str(&s.to_string())
    {
        r.headers_mut().insert(header::RETRY_AFTER, v);
    }
    with_id(r, rid)
}

// ------------------------------------------------------------------ rate limits

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Bucket {
    Read,
    Download,
    Publish,
}

/// Fixed one-minute windows per client address and bucket.
struct RateLimiter {
    read: u32,
    download: u32,
    publish: u32,
    windows: Mutex<HashMap<(IpAddr, Bucket), (Instant, u32)>>,
}

const WINDOW: Duration = Duration::from_secs(60);

impl RateLimiter {
    fn new(read: u32, download: u32, publish: u32) -> RateLimiter {
        RateLimiter {
            read,
            download,
            publish,
            windows: Mutex::new(HashMap::new()),
        }
    }

    /// `Ok` when the call is within budget, else the seconds until the window turns.
    fn take(&self, ip: IpAddr, bucket: Bucket) -> Result<(), u64> {
        let limit = match bucket {
            Bucket::Read => self.read,
            Bucket::Download => self.download,
            Bucket::Publish => self.publish,
        };
        if limit == 0 {
            return Ok(());
        }
        let now = Instant::now();
        let mut w = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        if w.len() > 100_000 {
            w.retain(|_, (start, _)| now.duration_since(*start) < WINDOW);
        }
        let entry = w.entry((ip, bucket)).or_insert((now, 0));
        if now.duration_since(entry.0) >= WINDOW {
            *entry = (now, 0);
        }
        if entry.1 >= limit {
            let left = WINDOW.saturating_sub(now.duration_since(entry.0));
            return Err(left.as_secs().max(1));
        }
        entry.1 += 1;
        Ok(())
    }
}

/// The scope of the call's bearer token: `None` without one; 401 for a token this hub does not
/// know.
fn caller(app: &App, headers: &HeaderMap) -> Result<Option<Scope>, Fail> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Ok(None);
    };
    let unknown = || Fail {
        http: StatusCode::UNAUTHORIZED,
        code: 60002,
        message: "missing or wrong bearer token".into(),
        retry_after: None,
    };
    let got = value
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(unknown)?;
    if let Some(want) = &app.token
        && crate::serve::constant_time_eq(got.as_bytes(), want.as_bytes())
    {
        return Ok(Some(Scope::Publish));
    }
    app.store.token_scope(got).map(Some).ok_or_else(unknown)
}

/// Checks the token (reads: only with `--require-token`; writes: always, with the publish
/// scope) and the rate limit of one API call.
fn admit(
    app: &App,
    headers: &HeaderMap,
    peer: SocketAddr,
    bucket: Bucket,
    need: Scope,
) -> Result<(), Fail> {
    if need == Scope::Publish || app.require_token {
        match caller(app, headers)? {
            None => {
                return Err(Fail {
                    http: StatusCode::UNAUTHORIZED,
                    code: 60002,
                    message: if need == Scope::Publish {
                        "missing or wrong bearer token: publishing needs a token with the publish scope (`skillsearch hub token create --scope publish` on the hub's machine)".into()
                    } else {
                        "missing or wrong bearer token".into()
                    },
                    retry_after: None,
                });
            }
            Some(scope) if !scope.allows(need) => {
                return Err(Fail {
                    http: StatusCode::FORBIDDEN,
                    code: 60006,
                    message: "this token has the read scope; publishing, yanking and deleting need a token created with --scope publish".into(),
                    retry_after: None,
                });
            }
            Some(_) => {}
        }
    }
    app.rate.take(peer.ip(), bucket).map_err(|secs| Fail {
        http: StatusCode::TOO_MANY_REQUESTS,
        code: 60005,
        message: format!("rate limit reached; retry in {secs} s"),
        retry_after: Some(secs),
    })
}

// ------------------------------------------------------------------ handlers

/// The query string's parameters (the last of a repeated one wins).
fn query_map(raw: Option<&str>) -> HashMap<String, String> {
    form_urlencoded::parse(raw.unwrap_or_default().as_bytes())
        .into_owned()
        .collect()
}

fn param<'a>(q: &'a HashMap<String, String>, k: &str) -> Option<&'a str> {
    q.get(k).map(|s| s.trim()).filter(|s| !s.is_empty())
}

fn int_param(
    q: &HashMap<String, String>,
    k: &str,
    default: usize,
    min: usize,
    max: usize,
) -> Result<usize, Fail> {
    match param(q, k) {
        None => Ok(default),
        Some(v) => match v.parse::<usize>() {
            Ok(n) if (min..=max).contains(&n) => Ok(n),
            _ => Err(Fail::bad(format!(
                "`{k}` must be an integer from {min} to {max}, not `{v}`"
            ))),
        },
    }
}

/// The records of the `n` best skills for `q`, in rank order.
fn ranked(app: &App, q: &str, n: usize) -> Result<Vec<Arc<Record>>, Fail> {
    let index = app.current.get();
    let opts = app.engine.search_options(Some(n));
    let result = index
        .search_with(q, &opts, &app.eligibility, Some(app.engine.semantic()))
        .map_err(Fail::internal)?;
    let mut out = Vec::with_capacity(result.hits.len());
    for h in &result.hits {
        if let Some(r) = app.registry.find(&index, &h.id).map_err(Fail::internal)? {
            out.push(r);
        }
    }
    Ok(out)
}

/// The record `id` names (its UUID or `skill_id`), or 404.
fn record(app: &App, id: &str) -> Result<Arc<Record>, Fail> {
    app.registry
        .find(&app.current.get(), id)
        .map_err(Fail::internal)?
        .ok_or_else(|| Fail::not_found(format!("no skill `{id}`")))
}

/// How long a write waits for the one before it before it is answered "busy".
const WRITE_WAIT: Duration = Duration::from_secs(30);

/// Runs the write `f` on the blocking pool once the writer permit is free (at most
/// [`WRITE_WAIT`]; then 503 60009).
async fn blocking_write<T: Send + 'static>(
    app: &App,
    f: impl FnOnce() -> Result<T, Fail> + Send + 'static,
) -> Result<T, Fail> {
    let _permit = match tokio::time::timeout(WRITE_WAIT, app.writers.acquire()).await {
        Ok(p) => p.map_err(Fail::internal)?,
        Err(_) => {
            return Err(Fail {
                http: StatusCode::SERVICE_UNAVAILABLE,
                code: 60009,
                message: format!(
                    "the write before this one has not finished in {} s (is the store's database answering?); retry shortly",
                    WRITE_WAIT.as_secs()
                ),
                retry_after: Some(5),
            });
        }
    };
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(Fail::internal(e)))
}

/// Runs `f` on the blocking pool once one of `app`'s runners is free.
async fn blocking<T: Send + 'static>(
    app: &App,
    f: impl FnOnce() -> Result<T, Fail> + Send + 'static,
) -> Result<T, Fail> {
    let _permit = app.runners.acquire().await.map_err(Fail::internal)?;
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(Fail::internal(e)))
}

async fn h_discover(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    let q = query_map(raw.as_deref());
    let rid = request_id(&headers);
    let run = || -> Result<Value, Fail> {
        admit(&app, &headers, peer, Bucket::Read, Scope::Read)?;
        let query = param(&q, "q")
            .ok_or_else(|| Fail::bad("`q` is required".into()))?
            .to_owned();
        let limit = int_param(&q, "limit", 8, 1, 50)?;
        Ok(json!({"query": query, "limit": limit}))
    };
    let args = match run() {
        Ok(a) => a,
        Err(f) => return fail(&rid, f),
    };
    let a = app.clone();
    let runners = app.clone();
    let res = blocking(&runners, move || {
        let query = args["query"].as_str().unwrap_or_default().to_owned();
        let limit = args["limit"].as_u64().unwrap_or(8) as usize;
        let items: Vec<Value> = ranked(&a, &query, limit)?
            .iter()
            .map(|r| r.item())
            .collect();
        Ok(json!({"items": items, "total": items.len()}))
    })
    .await;
    answer(&rid, res)
}

async fn h_search(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    let q = query_map(raw.as_deref());
    let rid = request_id(&headers);
    if let Err(f) = admit(&app, &headers, peer, Bucket::Read, Scope::Read) {
        return fail(&rid, f);
    }
    let parsed = (|| -> Result<_, Fail> {
        let limit = int_param(&q, "limit", 20, 1, 50)?;
        let page = int_param(&q, "page", 1, 1, 10_000)?;
        let min_score = match param(&q, "min_score") {
            None => None,
            Some(v) => match v.parse::<f64>() {
                Ok(x) if (0.0..=1.0).contains(&x) => Some(x),
                _ => {
                    return Err(Fail::bad(format!(
                        "`min_score` must be a number from 0 to 1, not `{v}`"
                    )));
                }
            },
        };
        let tags: Vec<String> = param(&q, "tags")
            .map(|t| {
                t.split(',')
                    .map(|x| x.trim().to_lowercase())
                    .filter(|x| !x.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        let category = param(&q, "category").map(str::to_lowercase);
        let query = param(&q, "q").map(str::to_owned);
        Ok((query, tags, category, min_score, page, limit))
    })();
    let (query, tags, category, min_score, page, limit) = match parsed {
        Ok(p) => p,
        Err(f) => return fail(&rid, f),
    };
    let runners = app.clone();
    let res = blocking(&runners, move || {
        let candidates = match &query {
            Some(q) => ranked(&app, q, SEARCH_POOL)?,
            None => app
                .registry
                .all(&app.current.get())
                .map_err(Fail::internal)?,
        };
        let kept: Vec<&Arc<Record>> = candidates
            .iter()
            .filter(|r| {
                let have: Vec<String> = r.tags.iter().map(|t| t.to_lowercase()).collect();
                tags.iter().all(|t| have.contains(t))
                    && category.as_ref().is_none_or(|c| {
                        r.category.as_deref().map(str::to_lowercase).as_ref() == Some(c)
                    })
                    && min_score.is_none_or(|m| r.scan.quality_score >= m)
            })
            .collect();
        let items: Vec<Value> = kept
            .iter()
            .skip((page - 1) * limit)
            .take(limit)
            .map(|r| r.item())
            .collect();
        Ok(json!({"items": items, "total": kept.len(), "page": page, "limit": limit}))
    })
    .await;
    answer(&rid, res)
}

/// One JSON call: admitted (token `need`, `bucket`'s rate limit), then `f` on a runner, its
/// result in the envelope.
async fn guarded(
    app: Arc<App>,
    headers: &HeaderMap,
    peer: SocketAddr,
    bucket: Bucket,
    need: Scope,
    f: impl FnOnce(&App) -> Result<Value, Fail> + Send + 'static,
) -> Response {
    let rid = request_id(headers);
    if let Err(e) = admit(&app, headers, peer, bucket, need) {
        return fail(&rid, e);
    }
    let a = app.clone();
    let res = if need == Scope::Publish {
        blocking_write(&app, move || f(&a)).await
    } else {
        blocking(&app, move || f(&a)).await
    };
    answer(&rid, res)
}

async fn h_read(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    UrlPath(id): UrlPath<String>,
) -> Response {
    guarded(app, &headers, peer, Bucket::Read, Scope::Read, move |app| {
        Ok(record(app, &id)?.full())
    })
    .await
}

async fn h_download(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    UrlPath(id): UrlPath<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    let q = query_map(raw.as_deref());
    let rid = request_id(&headers);
    if let Err(f) = admit(&app, &headers, peer, Bucket::Download, Scope::Read) {
        return fail(&rid, f);
    }
    let source = param(&q, "source").unwrap_or_default().to_owned();
    if !DOWNLOAD_SOURCES.contains(&source.as_str()) {
        return fail(
            &rid,
            Fail {
                http: StatusCode::UNPROCESSABLE_ENTITY,
                code: 60002,
                message: format!(
                    "`source` must be one of {}, not `{source}`",
                    DOWNLOAD_SOURCES.join(", ")
                ),
                retry_after: None,
            },
        );
    }
    let runners = app.clone();
    let res = blocking(&runners, move || {
        let r = record(&app, &id)?;
        let bytes = registry::pack(&r).map_err(|e| {
            tracing::warn!(target: "hub", skill = %r.skill_id, error = %e, "bundle not built");
            Fail {
                http: StatusCode::SERVICE_UNAVAILABLE,
                code: 60003,
                message: match e {
                    CoreError::Io { .. } => "the skill's files could not be read".to_owned(),
                    other => other.to_string(),
                },
                retry_after: None,
            }
        })?;
        Ok((r.skill_id.clone(), r.version.clone(), bytes))
    })
    .await;
    match res {
        Ok((skill_id, version, bytes)) => {
            let name = skill_id.rsplit('/').next().unwrap_or("skill").to_owned();
            let mut r = (
                [
                    (header::CONTENT_TYPE, "application/zip".to_owned()),
                    (
                        header::CONTENT_DISPOSITION,
                        format!(
                            "attachment; filename=\"{}-{version}.zip\"",
                            name.replace('"', "_")
                        ),
                    ),
                ],
                bytes,
            )
                .into_response();
            if let Ok(v) = HeaderValue::from_str(&version) {
                r.headers_mut().insert("x-skill-version", v);
            }
            with_id(r, &rid)
        }
        Err(f) => fail(&rid, f),
    }
}

async fn h_health() -> Response {
    axum::Json(json!({"status": "ok"})).into_response()
}

async fn h_method(headers: HeaderMap) -> Response {
    fail(
        &request_id(&headers),
        Fail {
            http: StatusCode::METHOD_NOT_ALLOWED,
            code: 60002,
            message: "this route does not take that method".into(),
            retry_after: None,
        },
    )
}

async fn h_fallback(headers: HeaderMap) -> Response {
    fail(
        &request_id(&headers),
        Fail::not_found("no such route".into()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_client_gets_its_own_budget_per_bucket() {
        let r = RateLimiter::new(2, 1, 1);
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let b: IpAddr = "127.0.0.2".parse().unwrap();
        assert!(r.take(a, Bucket::Read).is_ok() && r.take(a, Bucket::Read).is_ok());
        let wait = r.take(a, Bucket::Read).unwrap_err();
        assert!((1..=60).contains(&wait), "{wait}");
        assert!(
            r.take(b, Bucket::Read).is_ok(),
            "another client is not limited"
        );
        assert!(r.take(a, Bucket::Download).is_ok());
        assert!(r.take(a, Bucket::Download).is_err());
        assert!(
            RateLimiter::new(0, 0, 0).take(a, Bucket::Read).is_ok(),
            "0: no limit"
        );
    }

    #[test]
    fn request_ids_are_echoed_only_when_sane() {
        let mut h = HeaderMap::new();
        h.insert("x-request-id", HeaderValue::from_static("abc-123"));
        assert_eq!(request_id(&h), "abc-123");
        h.insert("x-request-id", HeaderValue::from_static("bad id\""));
        assert_eq!(request_id(&h).len(), 32);
    }
}
