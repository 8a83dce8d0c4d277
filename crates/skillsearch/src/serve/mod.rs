//! `skillsearch serve`: the daemon for in-process host plugins that must not spawn a process per
//! turn. A local HTTP JSON API (loopback by default; any other address needs `--token`, and then
//! every request must carry it), or the same requests as newline-delimited JSON on stdin/stdout
//! (`--stdio`) for plugins that own a child process.
//!
//! One warm index per set of roots (a workspace), opened on first use and refreshed by a file
//! watcher (or, where watching is impossible, every `refresh_ms`). Every request has the
//! whole-turn deadline and a failure is an empty, well-formed answer with a diagnostic.

mod conn;
pub(crate) mod reply;
mod run_queue;
pub(crate) mod watch;
mod workspaces;

use crate::context::{host_paths, open_index_held, roots_of};
use crate::warm;
use anyhow::{Context, bail};
use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
pub(crate) use conn::Limits;
use reply::{RetrieveReply, Text};
use run_queue::RunQueue;
use serde::Deserialize;
use serde_json::{Value, json};
use skillsearch_core::config::PathFacts;
use skillsearch_core::config::{Mode, Settings};
use skillsearch_core::index::{Refresh, SkillIndex};
use skillsearch_core::turn::decision_log::{Decision, LoggedHit};
use skillsearch_core::turn::{self, HostSource, PlanFrom, Retrieval, ms_since as ms, tools};
use skillsearch_core::{Engine, Remote, RemoteHit, Roots, Turn};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
pub(crate) use workspaces::RootPolicy;
use workspaces::{Warm, Workspaces};

/// Largest request body accepted: the line cap of the stdio protocols.
pub const MAX_BODY_BYTES: usize = crate::lines::MAX_LINE_BYTES;
/// Characters of a query used.
const MAX_QUERY_CHARS: usize = 2000;

/// One warm index and its watcher.
struct Workspace {
    index: tokio::sync::OnceCell<Arc<watch::Current>>,
    roots: Roots,
}

impl Warm for Workspace {
    fn new(roots: Roots) -> Self {
        Workspace {
            index: tokio::sync::OnceCell::new(),
            roots,
        }
    }
}

/// Recent answers, by (roots, query, mode, top_k, tool?, index generation). The same turn often
/// reaches the daemon more than once (context engine, hook and tool), and retries repeat it; an
/// answer is reused only while the index generation it was computed on is current.
type AnswerCache = skillsearch_core::index::fifo::FifoCache<CacheKey, Answer>;

/// Roots, query, mode, top_k, search tool, index generation, semantic ready, agent tools, the
/// host's directories (when placeholders are resolved).
type CacheKey = (
    Vec<PathBuf>,
    String,
    &'static str,
    usize,
    bool,
    u64,
    bool,
    Option<Vec<String>>,
    Option<PathFacts>,
    u64,
);
pub(crate) type Answer = Arc<(String, Option<Retrieval>)>;

/// Answers kept at most.
const CACHE_ENTRIES: usize = 2048;
/// Bytes of answers kept at most: an auto-mode answer carries whole skill bodies (~30 KB at the
/// default budget), so 2,048 of them could hold over 100 MB.
const CACHE_BYTES: usize = 32 << 20;

/// The daemon's answer cache, empty.
fn answer_cache() -> AnswerCache {
    AnswerCache::new(CACHE_ENTRIES, CACHE_BYTES)
}

/// Roughly what an answer holds: its texts, and its hits and notes.
fn answer_bytes(a: &Answer) -> usize {
    let retrieval = a.1.as_ref().map_or(0, |r| {
        r.text.len()
            + r.hits
                .iter()
                .map(|h| 256 + h.description.len())
                .sum::<usize>()
            + r.notes.iter().map(String::len).sum::<usize>()
    });
    256 + a.0.len() + retrieval
}

struct App {
    /// The turn engine every request runs on.
    engine: Engine,
    cache: Mutex<AnswerCache>,
    home: PathBuf,
    workspaces: Workspaces<Workspace>,
    /// The roots a request may name besides the configured ones.
    policy: RootPolicy,
    /// The configured roots (always served, never closed).
    default_roots: Vec<PathBuf>,
    token: Option<String>,
    embedding: Arc<crate::embedding::Background>,
    /// Fresh retrievals run on the runtime's own threads (see [`runs_inline`]).
    inline: bool,
    /// Where they wait for one, in the order their requests were read.
    queue: Arc<RunQueue>,
}

/// Whether a fresh retrieval runs on the async runtime's own threads, rather than being handed
/// to the blocking pool: when a retrieval is all local computation (well under a millisecond at
/// 64K skills, a few with a local sentence model). It waits in the daemon's [`RunQueue`] for one
/// of the runners, one per worker (so one per core), in the order the requests were read, and no
/// request pays for a hand-off between threads, which cost a daemon under load about as much
/// CPU as the retrieval itself (docs/performance.md, "Daemon under load"). A retrieval that
/// can wait on the network (hub, rewrite, gate, remote query embeddings) goes to the blocking
/// pool, so a slow endpoint never holds a worker.
fn runs_inline(settings: &Settings, remote: &Remote) -> bool {
    !remote.is_active() && settings.embedding.base_url.trim().is_empty()
}

/// A problem with a request, answered as `{"error": …}` with an HTTP status.
pub struct ApiError(pub StatusCode, pub String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(json!({"error": self.1}))).into_response()
    }
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> Self {
        ApiError(r.status(), format!("bad request body: {}", r.body_text()))
    }
}

/// Where the skills of a request come from.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetrieveReq {
    pub query: String,
    #[serde(default)]
    pub workspace: Option<PathBuf>,
    #[serde(default)]
    pub skills: Option<Vec<PathBuf>>,
    /// The agent's tools this turn: the gate rejects skills that need others.
    #[serde(default)]
    pub available_tools: Option<Vec<String>>,
    #[serde(default)]
    pub mode: Option<String>,
    #[serde(default)]
    pub top_k: Option<usize>,
    #[serde(default)]
    pub host: Option<String>,
    /// `skill_search`'s answer shape (`full` or `catalog`; default: `search_answer`).
    #[serde(default)]
    pub detail: Option<String>,
    /// Why the host sends no `available_tools` (for the decision log, when the gate runs).
    #[serde(default)]
    pub tools_unknown: Option<String>,
    /// Skills the host found itself, fused with the local and hub hits.
    #[serde(default)]
    pub sources: Vec<SourceReq>,
    /// Set for the hook's turns over the warm socket: the hook logs them itself.
    #[serde(skip)]
    unlogged: bool,
    /// The hook's own [`host_paths`] (warm socket), used instead of `host` and `workspace`.
    #[serde(skip)]
    paths: Option<PathFacts>,
}

/// A host-supplied source: a name, a fusion weight and its hits, best first.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceReq {
    pub name: String,
    #[serde(default = "default_source_weight")]
    /// Read as f64 so that an out-of-range number is the same "not from 0 to 10" error over
    /// both transports (as f32, serde_json read `1.3e99` from a `Value` but refused it from
    /// bytes; found by fuzz/serve_request).
    pub weight: f64,
    pub hits: Vec<SourceHitReq>,
}

fn default_source_weight() -> f64 {
    1.0
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceHitReq {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub body: String,
    #[serde(default)]
    pub skill_dir: Option<PathBuf>,
    /// The host vouches for this skill's paths: its PathGuard placeholders may be resolved
    /// (`resolve_placeholders`; a host's skills are otherwise left as written).
    #[serde(default)]
    pub pathguard_processed: bool,
}

/// Most host sources per request, and hits read from each.
pub const MAX_HOST_SOURCES: usize = 8;
pub const MAX_HOST_HITS: usize = 20;

/// Checks and converts the host's sources; the error names the field at fault.
pub fn host_sources(reqs: Vec<SourceReq>) -> Result<Vec<HostSource>, ApiError> {
    let bad = |m: String| ApiError(StatusCode::BAD_REQUEST, m);
    if reqs.len() > MAX_HOST_SOURCES {
        return Err(bad(format!(
            "sources: {} given, at most {MAX_HOST_SOURCES}",
            reqs.len()
        )));
    }
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(reqs.len());
    for src in reqs {
        let name = src.name.trim().to_owned();
        let valid = !name.is_empty()
            && name.len() <= 40
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !valid || name == "local" || name == "hub" || !seen.insert(name.clone()) {
            return Err(bad(format!(
                "sources: name `{}` must be 1-40 of [A-Za-z0-9_-], unique, and not `local` or `hub`",
                src.name
            )));
        }
        if !(src.weight.is_finite() && (0.0..=10.0).contains(&src.weight)) {
            return Err(bad(format!(
                "sources.{name}.weight {} is not a number from 0 to 10",
                src.weight
            )));
        }
        let hits = src
            .hits
            .into_iter()
            .take(MAX_HOST_HITS)
            .map(|h| {
                let mut meta = json!({"source": name});
                if let Some(d) = h.skill_dir.filter(|d| d.is_absolute() && d.is_dir()) {
                    meta["skill_dir"] = json!(d);
                }
                if h.pathguard_processed {
                    meta["pathguard_processed"] = json!(true);
                }
                RemoteHit {
                    qualified_id: format!("{name}/{}", h.id.trim()),
                    name: h.name,
                    description: h.description,
                    body: Some(h.body),
                    score: 0.0,
                    meta,
                }
            })
            .collect();
        out.push(HostSource {
            name,
            weight: src.weight as f32,
            hits,
        });
    }
    Ok(out)
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanReq {
    #[serde(default)]
    pub query: String,
    /// Skills already matched this session (ids from earlier results, e.g. `local/pdf` or
    /// `pdf`). When given, these are the matched skills and `query` is not searched: on_demand
    /// hosts activate plugins from what `skill_search` / `skill_read` returned.
    #[serde(default)]
    pub matched: Option<Vec<String>>,
    /// The host's tools this turn: names, or OpenAI-style function schemas.
    #[serde(default)]
    pub tools: Value,
    #[serde(default)]
    pub workspace: Option<PathBuf>,
    #[serde(default)]
    pub skills: Option<Vec<PathBuf>>,
    #[serde(default)]
    pub top_k: Option<usize>,
    #[serde(default)]
    pub host: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadReq {
    pub id: String,
    #[serde(default)]
    pub path: Option<String>,
    /// Where to read on in a long text (characters), as a previous part named it.
    #[serde(default)]
    pub offset: usize,
    #[serde(default)]
    pub workspace: Option<PathBuf>,
    #[serde(default)]
    pub skills: Option<Vec<PathBuf>>,
    #[serde(default)]
    pub host: Option<String>,
}

/// Opens (or builds) a workspace's index ahead of its first turn.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WarmReq {
    #[serde(default)]
    pub workspace: Option<PathBuf>,
    #[serde(default)]
    pub skills: Option<Vec<PathBuf>>,
}

impl App {
    /// The kept answer for `key`, if the turn's answer may come from the cache at all.
    fn cached(&self, cacheable: bool, key: &CacheKey) -> Option<Answer> {
        if !cacheable {
            return None;
        }
        self.cache.lock().ok().and_then(|c| c.get(key))
    }

    fn roots(
        &self,
        workspace: &Option<PathBuf>,
        skills: &Option<Vec<PathBuf>>,
    ) -> Result<Roots, ApiError> {
        let refused = |why: String| ApiError(StatusCode::FORBIDDEN, why);
        if let Some(s) = skills.as_ref().filter(|s| !s.is_empty()) {
            for r in s.iter().filter(|r| !self.default_roots.contains(r)) {
                self.policy.check(r, "root").map_err(refused)?;
            }
            return Ok(Roots::explicit(s.iter().cloned()));
        }
        let Some(w) = workspace else {
            return roots_of(self.engine.settings())
                .map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, format!("{e:#}")));
        };
        if !w.is_absolute() {
            return Err(ApiError(
                StatusCode::BAD_REQUEST,
                format!("workspace `{}` must be an absolute path", w.display()),
            ));
        }
        self.policy.check(w, "workspace").map_err(refused)?;
        // Only a request naming a workspace needs settings of its own (a copy per request was
        // ~1% of a daemon's CPU under load).
        let mut s = self.engine.settings().clone();
        s.skills.clear();
        s.workspace = Some(w.clone());
        roots_of(&s).map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, format!("{e:#}")))
    }

    /// The workspace of `roots`; the configured roots' is never closed.
    fn workspace(self: &Arc<Self>, roots: Roots) -> Arc<Workspace> {
        let pinned = roots
            .0
            .iter()
            .map(|r| &r.path)
            .eq(self.default_roots.iter());
        self.workspaces.get(roots, pinned)
    }

    /// The warm index for `ws`, opened (and its watcher started) on first use.
    async fn index(self: &Arc<Self>, ws: &Arc<Workspace>) -> anyhow::Result<Arc<SkillIndex>> {
        let current = ws
            .index
            .get_or_try_init(|| {
                let (app, ws) = (self.clone(), ws.clone());
                async move {
                    let current = tokio::task::spawn_blocking(move || {
                        let refresh_ms = app.engine.settings().refresh_ms;
                        let refresh = Refresh::IfOlderThan(Duration::from_millis(refresh_ms));
                        let (home, roots) = (app.home.clone(), ws.roots.clone());
                        let (embedding, split) = (app.embedding.clone(), !app.inline);
                        let open = move |refresh| {
                            let idx = open_index_held(&home, &roots, refresh)?;
                            // One retrieval per worker thread already uses every core.
                            idx.set_split(split);
                            let idx = Arc::new(idx);
                            embedding.register(&idx);
                            anyhow::Ok(idx)
                        };
                        let current = watch::Current::new(open(refresh)?);
                        watch::watch(
                            &current,
                            refresh_ms,
                            Box::new(move || open(Refresh::Always)),
                            &[],
                        );
                        anyhow::Ok(current)
                    })
                    .await??;
                    anyhow::Ok(current)
                }
            })
            .await?;
        Ok(current.get())
    }

    /// One warm index per plugin in `managed` that bundles skills, keyed by plugin id, opened
    /// on first use. A plugin whose skills cannot be indexed is left out (its skills are not
    /// offered), with a warning.
    async fn bundled_indexes<V>(
        self: &Arc<Self>,
        managed: &std::collections::BTreeMap<String, V>,
    ) -> Vec<(String, Arc<SkillIndex>)> {
        let mut out = Vec::new();
        for p in self
            .engine
            .inventory()
            .plugins
            .values()
            .filter(|p| !p.skills.is_empty() && managed.contains_key(&p.id))
        {
            let ws = self
                .workspaces
                .get(Roots::explicit(p.skills.iter().cloned()), true);
            match self.index(&ws).await {
                Ok(idx) => out.push((p.id.clone(), idx)),
                Err(e) => {
                    tracing::warn!(target: "serve", plugin = %p.id, error = %format!("{e:#}"), "cannot index the plugin's bundled skills")
                }
            }
        }
        out
    }

    fn log(&self, d: &Decision) {
        if let Err(e) = self.engine.record(d) {
            tracing::warn!(target: "serve", error = %e, "cannot write the decision log");
        }
    }

    fn deadline(&self) -> Duration {
        Duration::from_millis(self.engine.settings().deadline_ms)
    }

    async fn retrieve(
        self: &Arc<Self>,
        req: RetrieveReq,
        search_tool: bool,
    ) -> Result<RetrieveReply, ApiError> {
        let started = Instant::now();
        let mode = match req.mode.as_deref() {
            None => self.engine.settings().mode,
            Some("auto") => Mode::Auto,
            Some("on_demand") => Mode::OnDemand,
            Some(other) => {
                return Err(ApiError(
                    StatusCode::BAD_REQUEST,
                    format!("mode `{other}` is not one of `on_demand`, `auto`"),
                ));
            }
        };
        if let Some(d) = req
            .detail
            .as_deref()
            .filter(|d| skillsearch_core::config::Detail::parse(d).is_none())
        {
            return Err(ApiError(
                StatusCode::BAD_REQUEST,
                format!("detail `{d}` is not one of `full`, `catalog`"),
            ));
        }
        let top_k = req.top_k.unwrap_or(self.engine.settings().top_k);
        if !(1..=50).contains(&top_k) {
            return Err(ApiError(
                StatusCode::BAD_REQUEST,
                format!("top_k {top_k} is not a whole number from 1 to 50"),
            ));
        }
        let roots = self.roots(&req.workspace, &req.skills)?;
        self.retrieve_in(req, roots, mode, top_k, search_tool, started)
            .await
    }

    /// [`App::retrieve`] over `roots`, once the request is checked.
    async fn retrieve_in(
        self: &Arc<Self>,
        req: RetrieveReq,
        roots: Roots,
        mode: Mode,
        top_k: usize,
        search_tool: bool,
        started: Instant,
    ) -> Result<RetrieveReply, ApiError> {
        let logged = !req.unlogged;
        let query: String = req.query.chars().take(MAX_QUERY_CHARS).collect();
        let surface_mode = if search_tool {
            tools::SKILL_SEARCH
        } else {
            mode.as_str()
        };
        let mut decision = Decision::new(
            "serve",
            req.host.as_deref().unwrap_or(""),
            surface_mode,
            &query,
        );
        if !search_tool && (mode == Mode::OnDemand || query.trim().is_empty()) {
            decision.elapsed_ms.insert("total".into(), ms(started));
            if logged {
                self.log(&decision);
            }
            return Ok(RetrieveReply::new(
                mode.as_str(),
                Text::Own(String::new()),
                json!({"hits": [], "dropped": [], "chars": 0, "tokens": 0, "diagnostics": []}),
            ));
        }
        let roots_key: Vec<PathBuf> = roots.0.iter().map(|r| r.path.clone()).collect();
        let agent_tools = req.available_tools.clone().map(|mut t| {
            t.sort_unstable();
            t.dedup();
            t
        });
        let turn = Turn {
            top_k: Some(top_k),
            tools: agent_tools.clone(),
            deadline: Some(started + self.deadline()),
            sources: host_sources(req.sources)?,
            paths: req.paths.clone().unwrap_or_else(|| {
                host_paths(req.host.as_deref().unwrap_or(""), req.workspace.as_deref())
            }),
            detail: req
                .detail
                .as_deref()
                .and_then(skillsearch_core::config::Detail::parse),
            tools_unknown: req.tools_unknown.as_deref().map(|why| {
                skillsearch_core::turn::render::one_line(why)
                    .chars()
                    .take(300)
                    .collect()
            }),
        };
        let detail = turn.detail.unwrap_or(self.engine.settings().search_answer);
        // Host-supplied skills differ turn by turn: such answers are not cached.
        let cacheable = turn.sources.is_empty();
        let ws = self.workspace(roots);
        let app = self.clone();
        let work = async move {
            let idx = app.index(&ws).await?;
            let bundled = if search_tool {
                Vec::new()
            } else {
                // Only plugins some eligible skill activates can be activated this turn.
                let managed = idx
                    .managed_plugins(app.engine.eligibility())
                    .unwrap_or_default();
                app.bundled_indexes(&managed).await
            };
            let key: CacheKey = (
                roots_key,
                query.clone(),
                if search_tool && detail == skillsearch_core::config::Detail::Catalog {
                    "catalog"
                } else {
                    mode.as_str()
                },
                top_k,
                search_tool,
                idx.generation(),
                // Answers given lexically while vectors were pending are not reused after.
                app.engine
                    .semantic()
                    .get()
                    .is_some_and(|s| s.coverage(&idx).is_ok_and(|c| c.complete())),
                // The gate judges skills against the agent's tools.
                agent_tools.filter(|_| app.engine.remote().gate_on()),
                // Placeholders resolve to the host's directories.
                app.engine
                    .settings()
                    .placeholders
                    .as_ref()
                    .map(|_| turn.paths.clone()),
                // Eligibility is judged against this read of the host config (re-read first:
                // a plugin enabled since the last turn must not get the old answer).
                {
                    let _ = app.engine.eligibility().refresh();
                    app.engine.eligibility().generation()
                },
            );
            if let Some(hit) = app.cached(cacheable, &key) {
                return anyhow::Ok(hit);
            }
            let app2 = app.clone();
            let q = query.clone();
            let job = move || {
                let engine = &app2.engine;
                if search_tool {
                    let (text, r) = engine.skill_search(&idx, &q, &turn);
                    anyhow::Ok(Arc::new((text, r)))
                } else {
                    // Skills bundled by the plugins this turn's hits activate join the block.
                    let r = engine.retrieve_bundled(&idx, &q, &turn, &bundled)?;
                    anyhow::Ok(Arc::new((turn::injected_context(&r.text), Some(r))))
                }
            };
            let answer = if app.inline {
                // Looked up again when its turn comes: a burst of clients asking one new
                // question queues it once per client, and computes it about once per core.
                let app3 = app.clone();
                let key2 = key.clone();
                app.queue
                    .run(move || match app3.cached(cacheable, &key2) {
                        Some(hit) => Ok(hit),
                        None => job(),
                    })
                    .await??
            } else {
                tokio::task::spawn_blocking(job).await??
            };
            // An answer a failed remote part made poorer is not kept.
            let degraded = answer.1.as_ref().is_some_and(|r| r.stages.degraded);
            if cacheable
                && !degraded
                && let Ok(mut c) = app.cache.lock()
            {
                c.put(key, answer.clone(), answer_bytes(&answer));
            }
            anyhow::Ok(answer)
        };
        let fixed = || {
            if search_tool {
                tools::UNAVAILABLE_REPLY.to_owned()
            } else {
                String::new()
            }
        };
        let (answer, fallback, mut diagnostics): (Option<Answer>, String, Vec<String>) =
            match tokio::time::timeout(self.deadline(), work).await {
                Ok(Ok(a)) => (Some(a), String::new(), Vec::new()),
                Ok(Err(e)) => {
                    decision.error = Some(format!("{e:#}"));
                    (None, fixed(), vec![format!("retrieval failed: {e:#}")])
                }
                Err(_) => {
                    let msg = format!(
                        "deadline of {} ms passed (the index may still be building)",
                        self.engine.settings().deadline_ms
                    );
                    decision.error = Some(msg.clone());
                    (None, fixed(), vec![msg])
                }
            };
        let text: &str = answer.as_ref().map_or(fallback.as_str(), |a| a.0.as_str());
        let chars = skillsearch_core::tokens::js_len(text);
        let retrieval = answer.as_ref().and_then(|a| a.1.as_ref());
        if let Some(r) = retrieval {
            diagnostics.extend(r.notes.iter().cloned());
        }
        let tokens = retrieval
            .and_then(|r| r.tokens)
            .unwrap_or_else(|| self.engine.counter().count(text));
        // The decision's copy of the hits is only made for a log that keeps it.
        if self.engine.logs() {
            if let Some(r) = retrieval {
                decision = decision.with_retrieval(r);
            }
            decision.injected_tokens = tokens;
            decision.tokens_exact = self.engine.counter().is_exact();
            decision.elapsed_ms.insert("total".into(), ms(started));
            if logged {
                self.log(&decision);
            }
        }
        let hits: Vec<Value> = retrieval
            .map(|r| {
                r.hits
                    .iter()
                    .map(|h| json!({"id": h.qualified_id, "name": h.name, "description": h.description, "source": h.source(), "score": h.score, "skill_dir": h.skill_dir}))
                    .collect()
            })
            .unwrap_or_default();
        let dropped = retrieval
            .map(|r| serde_json::to_value(&r.dropped).unwrap_or_default())
            .unwrap_or(json!([]));
        let rest = json!({
            "hits": hits,
            "dropped": dropped,
            "chars": chars,
            "tokens": tokens,
            "retrievers": retrieval.map(|r| r.retrievers.clone()).unwrap_or_default(),
            "stages": retrieval.map(|r| serde_json::to_value(&r.stages).unwrap_or_default()).unwrap_or(json!({})),
            "diagnostics": diagnostics,
            "available_tools": req.available_tools.map(|t| t.len()),
            "elapsed_ms": ms(started),
        });
        let text = match answer {
            Some(a) => Text::Shared(a),
            None => Text::Own(fallback),
        };
        Ok(RetrieveReply::new(mode.as_str(), text, rest))
    }

    /// The hook's turn over the warm socket (see `warm`): answered when the daemon may serve
    /// its roots (configured, or allowed by `--allow-roots`) and runs with its settings.
    fn warm_turn(self: &Arc<Self>, rt: &tokio::runtime::Handle, req: warm::Request) -> warm::Reply {
        use warm::Reply;
        if warm::fingerprint(self.engine.settings()) != req.settings {
            return Reply::Refused("the daemon runs with other settings".into());
        }
        for r in req
            .roots
            .0
            .iter()
            .filter(|r| !self.default_roots.contains(&r.path))
        {
            if let Err(why) = self.policy.check(&r.path, "root") {
                return Reply::Refused(why);
            }
        }
        let started = Instant::now();
        let top_k = self.engine.settings().top_k;
        let host = req.host.clone();
        let q = RetrieveReq {
            query: req.query,
            host: Some(host.clone()),
            paths: Some(req.paths),
            unlogged: true,
            ..RetrieveReq::default()
        };
        let answered =
            rt.block_on(self.retrieve_in(q, req.roots, Mode::Auto, top_k, false, started));
        match answered {
            Ok(reply) => {
                let v = reply.into_value();
                let mut d = Decision::new("hook", &host, "auto", "");
                d.retrievers = serde_json::from_value(v["retrievers"].clone()).unwrap_or_default();
                d.hits = v["hits"]
                    .as_array()
                    .map(|hits| {
                        hits.iter()
                            .map(|h| LoggedHit {
                                id: h["id"].as_str().unwrap_or_default().to_owned(),
                                name: h["name"].as_str().unwrap_or_default().to_owned(),
                                source: h["source"].as_str().unwrap_or_default().to_owned(),
                                score: h["score"].as_f64().unwrap_or_default() as f32,
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                d.injected_chars = v["chars"].as_u64().unwrap_or_default() as usize;
                d.injected_tokens = v["tokens"].as_u64().unwrap_or_default() as usize;
                d.diagnostics =
                    serde_json::from_value(v["diagnostics"].clone()).unwrap_or_default();
                d.elapsed_ms.insert("total".into(), ms(started));
                Reply::Answer {
                    context: v["text"].as_str().unwrap_or_default().to_owned(),
                    decision: Box::new(d),
                }
            }
            Err(ApiError(_, why)) => Reply::Refused(why),
        }
    }

    async fn read(self: &Arc<Self>, req: ReadReq) -> Result<Value, ApiError> {
        let started = Instant::now();
        let roots = self.roots(&req.workspace, &req.skills)?;
        let ws = self.workspace(roots);
        let app = self.clone();
        let (id, path, offset) = (req.id.clone(), req.path.clone(), req.offset);
        let (req_host, req_workspace) = (req.host.clone(), req.workspace.clone());
        let work = async move {
            let idx = app.index(&ws).await?;
            let turn = Turn {
                paths: host_paths(req_host.as_deref().unwrap_or(""), req_workspace.as_deref()),
                ..Turn::until(started + app.deadline())
            };
            anyhow::Ok(
                tokio::task::spawn_blocking(move || {
                    app.engine
                        .skill_read(&idx, &id, path.as_deref(), offset, &turn)
                })
                .await?,
            )
        };
        let mut decision = Decision::new(
            "serve",
            req.host.as_deref().unwrap_or(""),
            tools::SKILL_READ,
            &req.id,
        );
        let text = match tokio::time::timeout(self.deadline(), work).await {
            Ok(Ok(t)) => t,
            Ok(Err(e)) => {
                decision.error = Some(format!("{e:#}"));
                tools::UNAVAILABLE_REPLY.to_owned()
            }
            Err(_) => {
                decision.error = Some("deadline passed".into());
                tools::UNAVAILABLE_REPLY.to_owned()
            }
        };
        decision.injected_chars = skillsearch_core::tokens::js_len(&text);
        decision.elapsed_ms.insert("total".into(), ms(started));
        self.log(&decision);
        Ok(json!({"text": text}))
    }

    /// Which tools this turn shows, from the skills its query matches.
    async fn plan(self: &Arc<Self>, req: PlanReq) -> Result<Value, ApiError> {
        use skillsearch_core::plan;
        let started = Instant::now();
        let roots = self.roots(&req.workspace, &req.skills)?;
        let top_k = req
            .top_k
            .unwrap_or(self.engine.settings().top_k)
            .clamp(1, 50);
        let query: String = req.query.chars().take(MAX_QUERY_CHARS).collect();
        let (tools, tool_diags) = if req.tools.is_null() {
            (Vec::new(), Vec::new())
        } else {
            plan::parse_tools(&req.tools, std::path::Path::new("request.tools"))
        };
        let ws = self.workspace(roots);
        let app = self.clone();
        let q = query.clone();
        let given = req.matched.clone();
        let work = async move {
            let idx = app.index(&ws).await?;
            tokio::task::spawn_blocking(move || {
                let from = match &given {
                    Some(given) => PlanFrom::Given(given),
                    None => PlanFrom::Prompt { query: &q, top_k },
                };
                let answer = app.engine.plan(&idx, from, &tools)?;
                anyhow::Ok((answer.plan, answer.matched))
            })
            .await?
        };
        let mut decision =
            Decision::new("serve", req.host.as_deref().unwrap_or(""), "plan", &query);
        let (mut p, matched) = match tokio::time::timeout(self.deadline(), work).await {
            Ok(Ok(v)) => v,
            Ok(Err(e)) => {
                decision.error = Some(format!("{e:#}"));
                self.log(&decision);
                // When unsure, show every tool: an empty plan hides nothing.
                return Ok(
                    json!({"visible_tools": null, "hidden_tools": [], "diagnostics": [format!("planning failed: {e:#}; show every tool")]}),
                );
            }
            Err(_) => {
                decision.error = Some("deadline passed".into());
                self.log(&decision);
                return Ok(
                    json!({"visible_tools": null, "hidden_tools": [], "diagnostics": ["deadline passed; show every tool"]}),
                );
            }
        };
        p.diagnostics.extend(tool_diags);
        decision.tools = Some(skillsearch_core::turn::decision_log::LoggedTools {
            visible: p.visible_tools.clone(),
            hidden: p.hidden_tools.clone(),
            activated_plugins: p.activated_plugins.clone(),
            tokens_shown: p.tokens.shown,
            tokens_hidden: p.tokens.hidden,
        });
        decision.elapsed_ms.insert("total".into(), ms(started));
        self.log(&decision);
        let ids: Vec<&str> = matched.iter().map(String::as_str).collect();
        let mut v = p.report(&ids);
        v["elapsed_ms"] = ms(started).into();
        Ok(v)
    }

    /// Opens the workspace's index now (building it if needed) so the first turn finds it warm.
    /// Not a turn: nothing is logged. `ready` is false when the deadline passed first; the
    /// build goes on and a later request finds it.
    async fn warm(self: &Arc<Self>, req: WarmReq) -> Result<Value, ApiError> {
        let started = Instant::now();
        let roots = self.roots(&req.workspace, &req.skills)?;
        let ws = self.workspace(roots);
        let ready = match tokio::time::timeout(self.deadline(), self.index(&ws)).await {
            Ok(Ok(_)) => true,
            Ok(Err(e)) => {
                return Err(ApiError(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("cannot open the index: {e:#}"),
                ));
            }
            Err(_) => false,
        };
        Ok(json!({"ready": ready, "elapsed_ms": ms(started)}))
    }

    /// The tools a host plugin offers in `on_demand` mode (none in `auto`), with the exact
    /// names, descriptions and schemas every other surface uses.
    fn tools(&self) -> Value {
        let mode = self.engine.settings().mode;
        let tools = match mode {
            Mode::OnDemand => tools::function_schemas(),
            Mode::Auto => Vec::new(),
        };
        json!({"mode": mode.as_str(), "tools": tools})
    }

    fn health(&self) -> Value {
        let n = self.workspaces.len();
        let s = self.engine.settings();
        // What went wrong with each warm index's last refresh (a full disk, a rebuild that
        // failed); the indexes answer meanwhile, as last saved.
        let problems: Vec<String> = self
            .workspaces
            .all()
            .iter()
            .filter_map(|ws| ws.index.get().and_then(|c| c.problem()))
            .collect();
        json!({"status": "ok", "name": "skillsearch", "version": env!("CARGO_PKG_VERSION"), "workspaces": n, "mode": s.mode.as_str(), "retriever": s.retriever.as_str(), "semantic": self.embedding.status(), "remote": self.engine.remote().summary(), "problems": problems})
    }

    fn authorised(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        let Some(token) = &self.token else {
            return Ok(());
        };
        let given = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if given.is_some_and(|g| constant_time_eq(g.as_bytes(), token.as_bytes())) {
            Ok(())
        } else {
            Err(ApiError(
                StatusCode::UNAUTHORIZED,
                "missing or wrong bearer token".into(),
            ))
        }
    }
}

pub(crate) use skillsearch_core::secrets::constant_time_eq;

async fn h_retrieve(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Result<Json<RetrieveReq>, JsonRejection>,
) -> Result<RetrieveReply, ApiError> {
    app.authorised(&headers)?;
    app.retrieve(body?.0, false).await
}

async fn h_search(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Result<Json<RetrieveReq>, JsonRejection>,
) -> Result<RetrieveReply, ApiError> {
    app.authorised(&headers)?;
    app.retrieve(body?.0, true).await
}

async fn h_read(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Result<Json<ReadReq>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    app.authorised(&headers)?;
    Ok(Json(app.read(body?.0).await?))
}

async fn h_plan(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Result<Json<PlanReq>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    app.authorised(&headers)?;
    Ok(Json(app.plan(body?.0).await?))
}

async fn h_health(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    app.authorised(&headers)?;
    Ok(Json(app.health()))
}

async fn h_warm(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Result<Json<WarmReq>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    app.authorised(&headers)?;
    Ok(Json(app.warm(body?.0).await?))
}

async fn h_tools(State(app): State<Arc<App>>, headers: HeaderMap) -> Result<Json<Value>, ApiError> {
    app.authorised(&headers)?;
    Ok(Json(app.tools()))
}

async fn h_fallback() -> ApiError {
    ApiError(
        StatusCode::NOT_FOUND,
        "no such endpoint; see POST /v1/retrieve, /v1/search, /v1/read, /v1/plan, /v1/warm and GET /v1/tools, /v1/health".into(),
    )
}

/// Whether `host` (a `Host` header: a name or address, maybe with a port) names this machine's
/// loopback: `localhost` (or a name under it), `127.x.x.x` or `[::1]`.
pub(crate) fn is_loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or_default()
    } else {
        host.rsplit_once(':').map_or(host, |(h, port)| {
            if port.chars().all(|c| c.is_ascii_digit()) {
                h
            } else {
                host
            }
        })
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost"
        || name.ends_with(".localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Every request: without a token, only loopback `Host` names are answered (a web page that
/// rebinds its own name to 127.0.0.1 cannot read skills); and the whole request, body included,
/// has the turn's deadline plus a margin.
async fn guard(
    State(app): State<Arc<App>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if app.token.is_none()
        && let Some(host) = req.headers().get(axum::http::header::HOST)
    {
        let host = String::from_utf8_lossy(host.as_bytes()).into_owned();
        if !is_loopback_host(&host) {
            return ApiError(
                StatusCode::FORBIDDEN,
                format!(
                    "Host `{host}` is refused: without --token the daemon answers only loopback host names (localhost, 127.0.0.1, [::1])"
                ),
            )
            .into_response();
        }
    }
    let limit = app.deadline() + REQUEST_MARGIN;
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(r) => r,
        Err(_) => ApiError(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the request was not complete within {} ms (a body sent too slowly?)",
                limit.as_millis()
            ),
        )
        .into_response(),
    }
}

/// What a request may take beyond the turn's deadline: reading its body, writing its answer.
const REQUEST_MARGIN: Duration = Duration::from_secs(5);

fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/v1/retrieve", post(h_retrieve))
        .route("/v1/search", post(h_search))
        .route("/v1/read", post(h_read))
        .route("/v1/plan", post(h_plan))
        .route("/v1/warm", post(h_warm))
        .route("/v1/tools", get(h_tools))
        .route("/v1/health", get(h_health))
        .fallback(h_fallback)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn_with_state(app.clone(), guard))
        .with_state(app)
}

/// Answers newline-delimited JSON requests `{"id", "method": retrieve|search|read|plan|warm|tools|health,
/// "params"}` on stdin with `{"id", "result"}` or `{"id", "error"}` lines on stdout.
/// A stdio request's `params` as the method's request type; a mismatch is a 400-style error.
fn params_of<T: serde::de::DeserializeOwned>(params: Value) -> Result<T, ApiError> {
    serde_json::from_value(params)
        .map_err(|e| ApiError(StatusCode::BAD_REQUEST, format!("bad params: {e}")))
}

/// What a `serve --stdio` request line asks for, its params read as the method's request type.
#[derive(Debug)]
pub enum StdioRequest {
    Retrieve(RetrieveReq),
    Search(RetrieveReq),
    Read(ReadReq),
    Plan(PlanReq),
    Warm(WarmReq),
    Tools,
    Health,
}

/// Reads one `serve --stdio` request line: its `id` (null when there is none, or the line is not
/// JSON) and the request, or the error to answer it with.
pub fn stdio_request(line: &str) -> (Value, Result<StdioRequest, ApiError>) {
    let req = match serde_json::from_str::<Value>(line) {
        Ok(req) => req,
        Err(e) => {
            return (
                Value::Null,
                Err(ApiError(
                    StatusCode::BAD_REQUEST,
                    format!("request is not JSON: {e}"),
                )),
            );
        }
    };
    let id = req.get("id").cloned().unwrap_or(Value::Null);
    let params = req.get("params").cloned().unwrap_or(json!({}));
    let request = match req.get("method").and_then(Value::as_str) {
        Some("retrieve") => params_of(params).map(StdioRequest::Retrieve),
        Some("search") => params_of(params).map(StdioRequest::Search),
        Some("read") => params_of(params).map(StdioRequest::Read),
        Some("plan") => params_of(params).map(StdioRequest::Plan),
        Some("warm") => params_of(params).map(StdioRequest::Warm),
        Some("tools") => Ok(StdioRequest::Tools),
        Some("health") => Ok(StdioRequest::Health),
        other => Err(ApiError(
            StatusCode::NOT_FOUND,
            format!(
                "unknown method {other:?}; use retrieve, search, read, plan, warm, tools or health"
            ),
        )),
    };
    (id, request)
}

/// The reply line's value for request `id`: `{"id", "result"}` or `{"id", "error": {"message"}}`.
pub fn stdio_reply(id: Value, result: Result<Value, ApiError>) -> Value {
    match result {
        Ok(v) => json!({"id": id, "result": v}),
        Err(ApiError(_, m)) => json!({"id": id, "error": {"message": m}}),
    }
}

async fn serve_stdio(app: Arc<App>) -> anyhow::Result<()> {
    use crate::lines::{MAX_LINE_BYTES, read_line_capped};
    use tokio::io::{AsyncWriteExt, BufReader};
    let mut input = BufReader::new(tokio::io::stdin());
    let mut out = tokio::io::stdout();
    while let Some(line) = read_line_capped(&mut input, MAX_LINE_BYTES).await? {
        let line = match line {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(n) => {
                let reply = json!({"id": null, "error": {"message": format!("request line of {n} bytes is over the {MAX_LINE_BYTES}-byte limit; skipped")}});
                let mut bytes = serde_json::to_vec(&reply)?;
                bytes.push(b'\n');
                out.write_all(&bytes).await?;
                out.flush().await?;
                continue;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let (id, request) = stdio_request(&line);
        let result = match request {
            Ok(StdioRequest::Retrieve(p)) => {
                app.retrieve(p, false).await.map(RetrieveReply::into_value)
            }
            Ok(StdioRequest::Search(p)) => {
                app.retrieve(p, true).await.map(RetrieveReply::into_value)
            }
            Ok(StdioRequest::Read(p)) => app.read(p).await,
            Ok(StdioRequest::Plan(p)) => app.plan(p).await,
            Ok(StdioRequest::Warm(p)) => app.warm(p).await,
            Ok(StdioRequest::Tools) => Ok(app.tools()),
            Ok(StdioRequest::Health) => Ok(app.health()),
            Err(e) => Err(e),
        };
        let reply = stdio_reply(id, result);
        let mut bytes = serde_json::to_vec(&reply)?;
        bytes.push(b'\n');
        out.write_all(&bytes).await?;
        out.flush().await?;
    }
    Ok(())
}

pub(crate) async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
    tracing::info!(target: "serve", "shutting down");
}

/// How one daemon listens.
#[derive(Debug, Clone)]
pub(crate) struct Listen {
    pub addr: SocketAddr,
    /// Roots a request may name besides the configured ones (`--allow-roots`).
    pub allow_roots: Vec<String>,
    /// Warm workspaces kept at most besides the pinned ones.
    pub max_workspaces: usize,
    /// The bearer token every request must carry (required off loopback).
    pub token: Option<String>,
    /// JSON lines on stdin/stdout instead of HTTP.
    pub stdio: bool,
    pub limits: Limits,
}

/// Runs the daemon until SIGINT/SIGTERM (HTTP) or the end of stdin (`--stdio`).
pub(crate) fn run(home: PathBuf, settings: Settings, listen: Listen) -> anyhow::Result<u8> {
    let Listen {
        addr: listen,
        allow_roots,
        max_workspaces,
        token,
        stdio,
        limits,
    } = listen;
    // Over stdio the one client is the parent that started the daemon.
    let policy = if stdio {
        RootPolicy::any()
    } else {
        RootPolicy::from_patterns(&allow_roots, &std::env::current_dir().unwrap_or_default())
    };
    let default_roots: Vec<PathBuf> = roots_of(&settings)
        .map(|r| r.0.into_iter().map(|r| r.path).collect())
        .unwrap_or_default();
    if !stdio && !listen.ip().is_loopback() && token.as_deref().is_none_or(str::is_empty) {
        bail!(
            "refusing to listen on {listen} without --token: only loopback addresses may be served without one"
        );
    }
    let engine = Engine::new(&settings, &home);
    let embedding =
        crate::embedding::Background::start(&home, &settings, engine.semantic().clone());
    let inline = runs_inline(&settings, engine.remote());
    for d in &engine.inventory().diagnostics {
        tracing::warn!(target: "serve", "{d}");
    }
    let app = Arc::new(App {
        engine,
        cache: Mutex::new(answer_cache()),
        home,
        workspaces: Workspaces::new(max_workspaces),
        policy,
        default_roots,
        token,
        embedding,
        inline,
        queue: Arc::default(),
    });
    {
        // Load the BPE tables in the background so the first request does not pay for them.
        let app = app.clone();
        std::thread::spawn(move || app.engine.counter().count("warm up"));
    }
    let warm_slot: Arc<Mutex<Option<warm::Bound>>> = Arc::default();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let bound = warm_slot.clone();
    let served = rt.block_on(async move {
        // One runner per worker: at most one retrieval per core, the rest queued in order.
        app.queue
            .start(tokio::runtime::Handle::current().metrics().num_workers());
        // The hook's turns over the home's socket, once the configured roots' index is open
        // (a hook that came earlier would only wait for it, so it answers itself until then).
        {
            let (app, rt, slot) = (
                app.clone(),
                tokio::runtime::Handle::current(),
                warm_slot.clone(),
            );
            std::thread::spawn(move || {
                if let Ok(roots) = app.roots(&None, &None) {
                    let ws = app.workspace(roots);
                    if let Err(e) = rt.block_on(app.index(&ws)) {
                        tracing::warn!(target: "serve", error = %format!("{e:#}"), "cannot open the skill index yet");
                    }
                }
                let handler = app.clone();
                let bound = warm::listen(
                    &app.home,
                    Arc::new(move |req| handler.warm_turn(&rt, req)),
                );
                if let Ok(mut slot) = slot.lock() {
                    *slot = bound;
                }
            });
        }
        if stdio {
            return serve_stdio(app).await;
        }
        listen_and_serve(listen, router(app), limits, "serve").await
    });
    // The socket goes with the daemon.
    if let Ok(mut slot) = bound.lock() {
        slot.take();
    }
    served?;
    Ok(0)
}

/// Binds `addr`, writes the one line on stdout saying where to connect (`{"listening": URL}`;
/// port 0 picks a free port, which scripts and tests read), and serves `router` on the shared
/// accept loop until SIGINT/SIGTERM. `what` names the server in the log. `serve`, `hub serve`
/// and `ui` all start this way.
pub(crate) async fn listen_and_serve(
    addr: std::net::SocketAddr,
    router: Router,
    limits: conn::Limits,
    what: &'static str,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let local = listener.local_addr()?;
    crate::output::Out::stdout().json(&json!({"listening": format!("http://{local}")}))?;
    tracing::info!(server = what, %local, "serving");
    conn::serve(listener, router, limits, shutdown_signal()).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{
        Answer, AnswerCache, CACHE_BYTES, CACHE_ENTRIES, CacheKey, answer_bytes, answer_cache,
    };
    use std::sync::Arc;

    fn key(q: &str) -> CacheKey {
        (
            Vec::new(),
            q.to_owned(),
            "auto",
            3,
            false,
            1,
            false,
            None,
            None,
            0,
        )
    }

    #[test]
    fn the_answer_cache_keeps_to_its_byte_budget_and_evicts_the_oldest_first() {
        let mut cache = answer_cache();
        let put = |c: &mut AnswerCache, k: CacheKey, a: Answer| {
            let size = answer_bytes(&a);
            c.put(k, a, size)
        };
        let big = |c: char| Arc::new((c.to_string().repeat(1 << 20), None));
        let big_bytes = answer_bytes(&big('x'));
        // 1 MiB answers: the budget holds fewer of them than the entry limit.
        let fit = CACHE_BYTES / big_bytes;
        assert!(fit < CACHE_ENTRIES);
        for i in 0..fit + 5 {
            put(&mut cache, key(&format!("q{i}")), big('x'));
            assert!(
                cache.bytes() <= CACHE_BYTES,
                "{} bytes after {i}",
                cache.bytes()
            );
        }
        assert_eq!(cache.len(), fit);
        assert!(cache.get(&key("q0")).is_none(), "the oldest went first");
        assert!(cache.get(&key(&format!("q{}", fit + 4))).is_some());
        assert_eq!(cache.bytes(), fit * big_bytes);
        // Replacing an answer re-counts it; one bigger than the whole budget is not kept.
        let small: Answer = Arc::new(("small".into(), None));
        put(&mut cache, key(&format!("q{}", fit + 4)), small.clone());
        assert_eq!(cache.bytes(), (fit - 1) * big_bytes + answer_bytes(&small));
        put(
            &mut cache,
            key("huge"),
            Arc::new(("y".repeat(CACHE_BYTES + 1), None)),
        );
        assert!(cache.get(&key("huge")).is_none());
        // Small answers stop at the entry limit.
        let mut cache = answer_cache();
        for i in 0..CACHE_ENTRIES + 10 {
            put(
                &mut cache,
                key(&format!("s{i}")),
                Arc::new(("a".into(), None)),
            );
        }
        assert_eq!(cache.len(), CACHE_ENTRIES);
    }
}

#[cfg(test)]
mod stdio_tests {
    use super::{StdioRequest, stdio_reply, stdio_request};
    use axum::http::StatusCode;
    use serde_json::{Value, json};

    #[test]
    fn a_stdio_line_is_read_as_its_id_and_a_checked_request() {
        let (id, r) = stdio_request(r#"{"id": 7, "method": "search", "params": {"query": "pdf"}}"#);
        assert_eq!(id, json!(7));
        assert!(matches!(r, Ok(StdioRequest::Search(p)) if p.query == "pdf"));
        let (id, r) = stdio_request(r#"{"id": "h", "method": "health"}"#);
        assert_eq!(id, json!("h"));
        assert!(matches!(r, Ok(StdioRequest::Health)));
        for (line, id, status, message) in [
            (
                "{not json",
                Value::Null,
                StatusCode::BAD_REQUEST,
                "request is not JSON",
            ),
            (
                r#"{"id": 2, "method": "explode"}"#,
                json!(2),
                StatusCode::NOT_FOUND,
                "unknown method",
            ),
            (
                r#"{"id": 3, "method": "read", "params": {"nope": 1}}"#,
                json!(3),
                StatusCode::BAD_REQUEST,
                "bad params",
            ),
        ] {
            let (got, r) = stdio_request(line);
            assert_eq!(got, id, "{line}");
            let e = r.expect_err(line);
            assert_eq!(e.0, status, "{line}");
            assert!(e.1.starts_with(message), "{line}: {}", e.1);
            let reply = stdio_reply(got, Err(e));
            assert_eq!(reply["id"], id);
            assert!(
                reply["error"]["message"]
                    .as_str()
                    .unwrap()
                    .starts_with(message)
            );
        }
        assert_eq!(
            stdio_reply(json!(1), Ok(json!({"ok": true}))),
            json!({"id": 1, "result": {"ok": true}})
        );
    }

    /// Found by the `serve_request` fuzz target: serde_json's default float parsing is not
    /// correctly rounded, so the reply named the request's id by text that reads back as
    /// another number than the id the client sent (`float_roundtrip` fixes it).
    #[test]
    fn a_reply_names_the_very_id_its_request_had() {
        for id in [
            "444444444444444.4444440444",
            "0.1",
            "1e-7",
            "123456789.987654321",
            "7",
        ] {
            let client: f64 = id.parse().unwrap();
            let (got, _) = stdio_request(&format!(r#"{{"id": {id}, "method": "health"}}"#));
            let line = serde_json::to_string(&stdio_reply(got, Ok(json!({})))).unwrap();
            let back: Value = serde_json::from_str(&line).unwrap();
            assert_eq!(
                back["id"].as_f64(),
                Some(client),
                "{id} came back as {line}"
            );
        }
    }
}
