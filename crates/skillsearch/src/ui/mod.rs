//! `skillsearch ui`: a local web page that shows what skillsearch decided. One page (HTML, JS
//! and CSS embedded in the binary, nothing fetched from elsewhere, plots drawn as inline SVG)
//! and the JSON routes it reads:
//! - `GET /api/search?q=&top_k=` — the engine's [`Explanation`] of the query over the
//!   configured roots, and its text form (as `explain` prints it);
//! - `GET /api/turns?host=&mode=&surface=&since=&until=&page=&per_page=` — the decision log,
//!   newest first, a page at a time ([`turns`]); `host`, `mode` and `surface` (`hook`, `mcp`,
//!   `serve`: the surface the turn came in through) each keep the turns that recorded that
//!   value, `-` those that recorded none; `since` and `until` are dates or UTC times;
//! - `GET /api/funnel?host=&mode=&surface=&since=&until=&points=` — tokens per turn against
//!   OpenClaw's catalogue of the same library, and tool-schema tokens shown and hidden;
//! - `GET /api/library?recent=` — skills per root, held back with reasons, shadowed copies,
//!   diagnostics, skills no turn of the last `recent` found ([`library`]);
//! - `GET /api/evals` — the runs `eval --save` stored, per set.
//!
//! Errors are `{"error": …, "code": …}` with an HTTP status. As `serve`: loopback unless a
//! token is given; with one, every `/api/` call carries `Authorization: Bearer <token>` (the
//! page takes it from `#token=…` in its address, or asks); without one, only loopback `Host`
//! names are answered. The index is kept current by the daemon's watcher.

mod library;
pub(crate) mod turns;

use crate::context::open_index_held;
use crate::serve::watch::{Current, Reopen, watch};
use crate::serve::{Limits, is_loopback_host};
use anyhow::{Context, bail};
use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Serialize;
use serde_json::json;
use skillsearch_core::config::Settings;
use skillsearch_core::index::Refresh;
use skillsearch_core::retrieve::explain::Explanation;
use skillsearch_core::tokens::CatalogCost;
use skillsearch_core::turn::decision_log::DecisionLog;
use skillsearch_core::{Engine, Roots, Turn};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use turns::{Filter, PageError, Turns};

const PAGE_HTML: &str = include_str!("page.html");
const PAGE_JS: &str = include_str!("page.js");
const PAGE_CSS: &str = include_str!("page.css");

/// Characters of a query searched.
const MAX_QUERY_CHARS: usize = 2000;
/// Turns a page shows unless asked: default and most.
const PER_PAGE: usize = 50;
const MAX_PER_PAGE: usize = 500;
/// Points of the funnel plot unless asked, and most.
const POINTS: usize = 120;
const MAX_POINTS: usize = 1000;
/// Recent turns whose hits count as "found" in the library, unless asked; and most.
const RECENT: usize = 1000;
const MAX_RECENT: usize = 100_000;

/// How the page is served.
#[derive(Debug, Clone)]
pub(crate) struct UiOptions {
    pub addr: SocketAddr,
    /// The bearer token every API call must carry (required off loopback).
    pub token: Option<String>,
    pub limits: Limits,
}

struct App {
    engine: Engine,
    current: Arc<Current>,
    roots: Roots,
    home: PathBuf,
    token: Option<String>,
    /// The decision log's index; `None` when the log is off.
    turns: Option<Mutex<Turns>>,
    /// OpenClaw's catalogue of the library, by index generation.
    catalogue: Mutex<Option<(u64, CatalogCost)>>,
    embedding: Arc<crate::embedding::Background>,
}

/// A request the API cannot answer, as `{"error", "code"}` with its HTTP status.
#[derive(Debug)]
enum ApiError {
    /// A query parameter is unknown or its value is unusable.
    BadParam {
        name: String,
        why: String,
    },
    Unauthorized,
    HostRefused(String),
    NotFound(String),
    /// The decision log is off (`log_path = "off"`).
    LogOff,
    /// Reading the index, the log or the eval store failed.
    Failed(anyhow::Error),
}

impl ApiError {
    fn bad(name: &str, why: impl Into<String>) -> ApiError {
        ApiError::BadParam {
            name: name.to_owned(),
            why: why.into(),
        }
    }

    fn parts(&self) -> (StatusCode, &'static str, String) {
        match self {
            ApiError::BadParam { name, why } => (
                StatusCode::BAD_REQUEST,
                "bad-param",
                format!("parameter `{name}`: {why}"),
            ),
            ApiError::Unauthorized => (
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "missing or wrong bearer token (open the page as /#token=<token>)".into(),
            ),
            ApiError::HostRefused(host) => (
                StatusCode::FORBIDDEN,
                "host-refused",
                format!(
                    "Host `{host}` is refused: without --token the page answers only loopback host names (localhost, 127.0.0.1, [::1])"
                ),
            ),
            ApiError::NotFound(path) => (
                StatusCode::NOT_FOUND,
                "not-found",
                format!(
                    "no such route `{path}`; see / and GET /api/search, /api/turns, /api/funnel, /api/library, /api/evals"
                ),
            ),
            ApiError::LogOff => (
                StatusCode::CONFLICT,
                "log-off",
                "the decision log is off (log_path = \"off\"): no turns are recorded".into(),
            ),
            ApiError::Failed(e) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "failed",
                format!("{e:#}"),
            ),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code, message) = self.parts();
        if status.is_server_error() {
            tracing::warn!(target: "ui", %message, "request failed");
        }
        (status, axum::Json(json!({"error": message, "code": code}))).into_response()
    }
}

impl From<anyhow::Error> for ApiError {
    fn from(e: anyhow::Error) -> Self {
        ApiError::Failed(e)
    }
}

/// A request's query parameters, each known to the route.
struct Params(Vec<(String, String)>);

impl Params {
    fn parse(raw: Option<String>, known: &[&str]) -> Result<Params, ApiError> {
        let pairs: Vec<(String, String)> =
            form_urlencoded::parse(raw.unwrap_or_default().as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect();
        if let Some((k, _)) = pairs.iter().find(|(k, _)| !known.contains(&k.as_str())) {
            return Err(ApiError::bad(
                k,
                format!("not known here; known: {}", known.join(", ")),
            ));
        }
        Ok(Params(pairs))
    }

    /// The value of `name`, when given and not blank.
    fn text(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.trim())
            .filter(|v| !v.is_empty())
    }

    /// A whole number from `min` to `max`, `default` when not given.
    fn number(
        &self,
        name: &str,
        default: usize,
        min: usize,
        max: usize,
    ) -> Result<usize, ApiError> {
        let Some(v) = self.text(name) else {
            return Ok(default);
        };
        match v.parse::<usize>() {
            Ok(n) if (min..=max).contains(&n) => Ok(n),
            _ => Err(ApiError::bad(
                name,
                format!("`{v}` is not a whole number from {min} to {max}"),
            )),
        }
    }

    /// An RFC 3339 date or time prefix (`2026-12-06`, `2026-12-06T10:00`).
    fn time(&self, name: &str) -> Result<Option<String>, ApiError> {
        let Some(v) = self.text(name) else {
            return Ok(None);
        };
        let b = v.as_bytes();
        let digits =
            |r: std::ops::Range<usize>| r.clone().all(|i| b.get(i).is_some_and(u8::is_ascii_digit));
        let date = b.len() >= 10
            && digits(0..4)
            && b[4] == b'-'
            && digits(5..7)
            && b[7] == b'-'
            && digits(8..10);
        // Only looked at once the first ten bytes are a date (ASCII).
        let time_ok = || {
            b.len() == 10
                || (b[10] == b'T'
                    && v[11..]
                        .chars()
                        .all(|c| c.is_ascii_digit() || matches!(c, ':' | '.' | 'Z')))
        };
        if date && time_ok() {
            Ok(Some(v.to_owned()))
        } else {
            Err(ApiError::bad(
                name,
                format!("`{v}` is not a date (YYYY-MM-DD) or a UTC time (YYYY-MM-DDTHH:MM…)"),
            ))
        }
    }

    /// A value a turn's field must equal; `-` stands for none recorded (an MCP tool call names
    /// no host).
    fn field(&self, name: &str) -> Option<String> {
        self.text(name)
            .map(|v| if v == "-" { "" } else { v }.to_owned())
    }

    fn filter(&self) -> Result<Filter, ApiError> {
        let f = Filter {
            host: self.field("host"),
            mode: self.field("mode"),
            surface: self.field("surface"),
            since: self.time("since")?,
            until: self.time("until")?,
        };
        if let (Some(s), Some(u)) = (&f.since, &f.until)
            && s.get(..u.len().min(s.len())) > Some(u.as_str())
        {
            return Err(ApiError::bad(
                "since",
                format!("`{s}` is after until `{u}`"),
            ));
        }
        Ok(f)
    }
}

const FILTER_PARAMS: &[&str] = &["host", "mode", "surface", "since", "until"];

impl App {
    fn authorised(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        let Some(token) = &self.token else {
            return Ok(());
        };
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if given.is_some_and(|g| crate::serve::constant_time_eq(g.as_bytes(), token.as_bytes())) {
            Ok(())
        } else {
            Err(ApiError::Unauthorized)
        }
    }

    fn turns(&self) -> Result<std::sync::MutexGuard<'_, Turns>, ApiError> {
        let turns = self.turns.as_ref().ok_or(ApiError::LogOff)?;
        let mut t = turns.lock().unwrap_or_else(|e| e.into_inner());
        let path = t.path().to_path_buf();
        t.update()
            .with_context(|| format!("cannot read the decision log {}", path.display()))?;
        Ok(t)
    }

    /// OpenClaw's catalogue of the library as the index holds it now.
    fn catalogue(&self) -> anyhow::Result<CatalogCost> {
        let idx = self.current.get();
        let generation = idx.generation();
        if let Some((g, c)) = *self.catalogue.lock().unwrap_or_else(|e| e.into_inner())
            && g == generation
        {
            return Ok(c);
        }
        let c = library::catalogue(&idx, self.engine.eligibility(), self.engine.counter())?;
        *self.catalogue.lock().unwrap_or_else(|e| e.into_inner()) = Some((generation, c));
        Ok(c)
    }
}

/// What `/api/search` answers.
#[derive(Serialize)]
struct SearchAnswer {
    query: String,
    explanation: Explanation,
    /// The explanation as `explain` prints it, one line per string.
    text: Vec<String>,
    elapsed_ms: f64,
}

/// What `/api/funnel` answers.
#[derive(Serialize)]
struct FunnelAnswer {
    /// OpenClaw's catalogue of the library's eligible skills: what every turn would carry
    /// without skillsearch.
    catalogue: CatalogCost,
    #[serde(flatten)]
    spent: turns::Spent,
    /// What the catalogue would have cost over the same turns.
    catalogue_tokens: f64,
    /// 1 − spent / catalogue over those turns (0 when there were none).
    saved_share: f64,
    log: PathBuf,
}

/// What `/api/evals` answers.
#[derive(Serialize)]
struct EvalsAnswer {
    path: PathBuf,
    sets: Vec<EvalSet>,
}

#[derive(Serialize)]
struct EvalSet {
    set: String,
    runs: Vec<crate::evals::SavedRun>,
}

/// Runs blocking work off the async workers.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError::Failed(anyhow::anyhow!("the request's work failed: {e}")))?
}

async fn h_search(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    app.authorised(&headers)?;
    let p = Params::parse(raw, &["q", "top_k"])?;
    let query: String = p
        .text("q")
        .ok_or_else(|| ApiError::bad("q", "empty: type what the agent is asked to do"))?
        .chars()
        .take(MAX_QUERY_CHARS)
        .collect();
    let top_k = p.number("top_k", app.engine.settings().top_k, 1, 50)?;
    let answer = blocking(move || {
        let started = Instant::now();
        let idx = app.current.get();
        let turn = Turn {
            top_k: Some(top_k),
            paths: crate::context::process_paths(),
            ..Turn::until(app.engine.deadline(started))
        };
        let explanation = app
            .engine
            .explain(&idx, &query, &turn, &[])
            .with_context(|| format!("cannot search the index {}", idx.dir().display()))?;
        Ok(SearchAnswer {
            text: crate::explain::text(&explanation),
            query,
            explanation,
            elapsed_ms: started.elapsed().as_secs_f64() * 1e3,
        })
    })
    .await?;
    Ok(axum::Json(answer).into_response())
}

async fn h_turns(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    app.authorised(&headers)?;
    let p = Params::parse(raw, &[FILTER_PARAMS, &["page", "per_page"][..]].concat())?;
    let filter = p.filter()?;
    let page = p.number("page", 1, 1, usize::MAX)?;
    let per_page = p.number("per_page", PER_PAGE, 1, MAX_PER_PAGE)?;
    let answer = blocking(move || {
        let started = Instant::now();
        let t = app.turns()?;
        t.page(&filter, page, per_page, started)
            .map_err(|e| match e {
                PageError::PastTheEnd(e) => ApiError::bad(
                    "page",
                    format!("page {} is past the last page ({})", e.page, e.pages),
                ),
                PageError::Read(e) => ApiError::Failed(anyhow::Error::new(e).context(format!(
                    "cannot read the decision log {}",
                    t.path().display()
                ))),
            })
    })
    .await?;
    Ok(axum::Json(answer).into_response())
}

async fn h_funnel(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    app.authorised(&headers)?;
    let p = Params::parse(raw, &[FILTER_PARAMS, &["points"][..]].concat())?;
    let filter = p.filter()?;
    let points = p.number("points", POINTS, 1, MAX_POINTS)?;
    let answer = blocking(move || {
        let catalogue = app.catalogue()?;
        let t = app.turns()?;
        let spent = t.spent(&filter, points);
        let catalogue_tokens = catalogue.tokens * spent.turns as f64;
        let saved_share = if catalogue_tokens > 0.0 {
            1.0 - spent.tokens as f64 / catalogue_tokens
        } else {
            0.0
        };
        Ok(FunnelAnswer {
            catalogue,
            spent,
            catalogue_tokens,
            saved_share,
            log: t.path().to_path_buf(),
        })
    })
    .await?;
    Ok(axum::Json(answer).into_response())
}

async fn h_library(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    app.authorised(&headers)?;
    let p = Params::parse(raw, &["recent"])?;
    let recent = p.number("recent", RECENT, 1, MAX_RECENT)?;
    let answer = blocking(move || {
        let found = match app.turns() {
            Ok(t) => Some(t.recently_found(recent)),
            Err(ApiError::LogOff) => None,
            Err(e) => return Err(e),
        };
        let catalogue = app.catalogue()?;
        let idx = app.current.get();
        Ok(library::report(
            &idx,
            &app.roots,
            app.engine.eligibility(),
            found,
            catalogue,
            app.current.problem(),
        )
        .with_context(|| format!("cannot read the skill index {}", idx.dir().display()))?)
    })
    .await?;
    Ok(axum::Json(answer).into_response())
}

async fn h_evals(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    app.authorised(&headers)?;
    Params::parse(raw, &[])?;
    let answer = blocking(move || {
        let runs = crate::evals::load(&app.home)?;
        let mut sets: Vec<EvalSet> = Vec::new();
        for run in runs {
            match sets.iter_mut().find(|s| s.set == run.set) {
                Some(s) => s.runs.push(run),
                None => sets.push(EvalSet {
                    set: run.set.clone(),
                    runs: vec![run],
                }),
            }
        }
        for s in &mut sets {
            s.runs.sort_by(|a, b| a.ts.cmp(&b.ts));
        }
        sets.sort_by(|a, b| a.set.cmp(&b.set));
        Ok(EvalsAnswer {
            path: crate::evals::runs_path(&app.home),
            sets,
        })
    })
    .await?;
    Ok(axum::Json(answer).into_response())
}

async fn h_status(State(app): State<Arc<App>>, headers: HeaderMap) -> Result<Response, ApiError> {
    app.authorised(&headers)?;
    let s = app.engine.settings();
    Ok(axum::Json(json!({
        "name": "skillsearch",
        "version": env!("CARGO_PKG_VERSION"),
        "roots": app.roots.0.iter().map(|r| &r.path).collect::<Vec<_>>(),
        "index": app.current.get().dir(),
        "log": app.turns.as_ref().map(|t| t.lock().unwrap_or_else(|e| e.into_inner()).path().to_path_buf()),
        "mode": s.mode.as_str(),
        "retriever": s.retriever.as_str(),
        "semantic": app.embedding.status(),
    }))
    .into_response())
}

/// One embedded file, never cached (the binary may change under the same address), with a
/// policy that lets the page load nothing but itself.
fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut r = body.into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
        ),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    r
}

async fn h_fallback(uri: axum::http::Uri) -> ApiError {
    ApiError::NotFound(uri.path().to_owned())
}

/// Without a token, only loopback `Host` names are answered (a page elsewhere that rebinds its
/// name to 127.0.0.1 cannot read the log), as `serve` does.
async fn guard(
    State(app): State<Arc<App>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if app.token.is_none()
        && let Some(host) = req.headers().get(header::HOST)
    {
        let host = String::from_utf8_lossy(host.as_bytes()).into_owned();
        if !is_loopback_host(&host) {
            return ApiError::HostRefused(host).into_response();
        }
    }
    next.run(req).await
}

fn router(app: Arc<App>) -> Router {
    Router::new()
        .route(
            "/",
            get(|| async { asset("text/html; charset=utf-8", PAGE_HTML) }),
        )
        .route(
            "/page.js",
            get(|| async { asset("text/javascript; charset=utf-8", PAGE_JS) }),
        )
        .route(
            "/page.css",
            get(|| async { asset("text/css; charset=utf-8", PAGE_CSS) }),
        )
        .route("/api/status", get(h_status))
        .route("/api/search", get(h_search))
        .route("/api/turns", get(h_turns))
        .route("/api/funnel", get(h_funnel))
        .route("/api/library", get(h_library))
        .route("/api/evals", get(h_evals))
        .fallback(h_fallback)
        .layer(axum::middleware::from_fn_with_state(app.clone(), guard))
        .with_state(app)
}

/// Serves the page until SIGINT/SIGTERM.
pub(crate) fn run(home: PathBuf, settings: Settings, opts: UiOptions) -> anyhow::Result<u8> {
    if !opts.addr.ip().is_loopback() && opts.token.as_deref().is_none_or(str::is_empty) {
        bail!(
            "refusing to listen on {} without --token: only loopback addresses may be served without one",
            opts.addr
        );
    }
    let roots = crate::context::roots_of(&settings)?;
    let engine = Engine::new(&settings, &home);
    let embedding =
        crate::embedding::Background::start(&home, &settings, engine.semantic().clone());
    let open = {
        let (home, roots, embedding) = (home.clone(), roots.clone(), embedding.clone());
        move |refresh| -> anyhow::Result<Arc<skillsearch_core::SkillIndex>> {
            let idx = Arc::new(open_index_held(&home, &roots, refresh)?);
            embedding.register(&idx);
            Ok(idx)
        }
    };
    let refresh = Refresh::IfOlderThan(Duration::from_millis(settings.refresh_ms));
    let current = Current::new(open(refresh)?);
    let reopen: Reopen = Box::new(move || open(Refresh::Always));
    watch(&current, settings.refresh_ms, reopen, &[]);
    let turns = DecisionLog::from_settings(&settings).map(|l| Mutex::new(Turns::new(l)));
    let app = Arc::new(App {
        engine,
        current,
        roots,
        home,
        token: opts.token,
        turns,
        catalogue: Mutex::new(None),
        embedding,
    });
    {
        // The log's index and the BPE tables before the first request asks for them.
        let app = app.clone();
        std::thread::spawn(move || {
            if let Ok(t) = app.turns() {
                drop(t);
            }
            if let Err(e) = app.catalogue() {
                tracing::warn!(target: "ui", error = %format!("{e:#}"), "cannot count the catalogue yet");
            }
        });
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        crate::serve::listen_and_serve(opts.addr, router(app), opts.limits, "ui").await
    })?;
    Ok(0)
}
