//! `skillsearch mcp`: the MCP stdio server, on the official Rust SDK (rmcp), which speaks every
//! protocol version from 2024-11-05 to the stateless 2026-07-28. In `on_demand` mode it offers
//! `skill_search` and `skill_read`; in `auto` mode it offers no tools (a host's per-turn hook
//! injects instead) and stays up. In both modes it serves the MCP Skills extension
//! (`skills/list`, `skills/get`, the files through `resources/read` and
//! `resources/directory/read`; see `mcp_skills`) over the same index: a catalogue the client
//! pulls, not a tool the model calls. stdout carries JSON-RPC only; logs go to stderr. Every
//! line is checked before the SDK sees it (`transport`): a line that is not JSON, is over the
//! 1 MiB cap `serve --stdio` has, or reuses the id of a request in flight gets a JSON-RPC error.
//!
//! One warm index per process: it is opened on a background thread at start, re-checked
//! against the disk when the last check is older than `refresh_ms`, and every call has the
//! whole-turn deadline. A slow or broken index costs a call its skills (a fixed reply), never
//! a protocol error.

mod skills;
pub(crate) mod transport;

use crate::context::{open_index_held, process_paths, roots_of};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorCode,
    GetSkillRequestParams, GetSkillResult, Implementation, ListResourcesResult, ListSkillsResult,
    ListToolsResult, PaginatedRequestParams, ReadResourceDirectoryRequestParams,
    ReadResourceDirectoryResult, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;
use skills::Catalogue;
use skillsearch_core::config::{Mode, Settings};
use skillsearch_core::index::{Refresh, SkillIndex};
use skillsearch_core::turn::decision_log::Decision;
use skillsearch_core::turn::{self, tools};
use skillsearch_core::{Engine, Turn};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Characters of a query used; longer arguments are cut.
const MAX_QUERY_CHARS: usize = 2000;

/// What every call of one server process shares: the turn engine, the warm index, the
/// embedder filling its vectors, and the Skills extension's catalogue.
struct McpState {
    engine: Engine,
    home: PathBuf,
    index: Mutex<Option<(Arc<SkillIndex>, Instant)>>,
    /// A check of the skill files runs beside the calls (see `with_index`).
    checking: Arc<AtomicBool>,
    embedding: Arc<crate::embedding::Background>,
    /// The Skills extension's catalogue and the index generation it was built from.
    catalogue: Mutex<Option<(u64, Arc<Catalogue>)>>,
    /// The hook's warm socket, once the index is open (see `warm`).
    warm: Mutex<Option<crate::warm::Bound>>,
}

impl McpState {
    /// Opens (or refreshes, when the last check is old) the index, then runs `f` on it.
    fn with_index<T>(&self, f: impl FnOnce(&SkillIndex) -> T) -> anyhow::Result<T> {
        let mut slot = self
            .index
            .lock()
            .map_err(|_| anyhow::anyhow!("index lock poisoned"))?;
        let refresh_every = Duration::from_millis(self.engine.settings().refresh_ms);
        // A costly check runs at most a tenth of the time (every ~5 s at 64K skills).
        let recheck = |idx: &SkillIndex| {
            refresh_every.max(Duration::from_millis(
                idx.check_ms().unwrap_or(0).saturating_mul(10),
            ))
        };
        match slot.as_mut() {
            Some((idx, checked)) if checked.elapsed() > recheck(idx) => {
                *checked = Instant::now();
                // A check that costs more than a turn runs beside the calls, not in one
                // (~0.4 s at 64K skills; see `freshness`); one at a time.
                let costly = crate::freshness::costly(idx).is_some();
                if !costly {
                    if let Err(e) = idx.refresh(&|_| {}) {
                        tracing::warn!(target: "mcp", error = %e, "refresh failed; answering from the index as it is");
                    }
                } else if !self.checking.swap(true, Ordering::AcqRel) {
                    let (idx, checking) = (idx.clone(), self.checking.clone());
                    let spawned = std::thread::Builder::new()
                        .name("index-check".into())
                        .spawn(move || {
                            crate::freshness::yield_to_turns();
                            if let Err(e) = idx.refresh(&|_| {}) {
                                tracing::warn!(target: "mcp", error = %e, "refresh failed; answering from the index as it is");
                            }
                            checking.store(false, Ordering::Release);
                        });
                    if let Err(e) = spawned {
                        tracing::warn!(target: "mcp", error = %e, "cannot start the index check; answering from the index as it is");
                        self.checking.store(false, Ordering::Release);
                    }
                }
            }
            Some(_) => {}
            None => {
                let roots = roots_of(self.engine.settings())?;
                let refresh = Refresh::IfOlderThan(refresh_every);
                let idx = Arc::new(open_index_held(&self.home, &roots, refresh)?);
                self.embedding.register(&idx);
                *slot = Some((idx, Instant::now()));
            }
        }
        let idx = slot
            .as_ref()
            .map(|(idx, _)| idx.clone())
            .ok_or_else(|| anyhow::anyhow!("index not open"))?;
        // Not under the lock: a turn with remote steps may take seconds.
        drop(slot);
        Ok(f(&idx))
    }

    /// The hook's turn, answered here when this server ranks it exactly as the hook would: the
    /// same roots and settings (see `warm`).
    fn warm_turn(&self, req: crate::warm::Request) -> crate::warm::Reply {
        use crate::warm::Reply;
        let s = self.engine.settings();
        match roots_of(s) {
            Ok(roots) if roots == req.roots => {}
            Ok(_) => return Reply::Refused("this MCP server serves other skill roots".into()),
            Err(e) => return Reply::Refused(format!("{e:#}")),
        }
        if crate::warm::fingerprint(s) != req.settings {
            return Reply::Refused("this MCP server runs with other settings".into());
        }
        let started = Instant::now();
        let deadline = started + Duration::from_millis(req.deadline_ms.min(s.deadline_ms));
        let query: String = req.query.chars().take(MAX_QUERY_CHARS).collect();
        match self.with_index(|idx| {
            self.engine.retrieve(
                idx,
                &query,
                &Turn {
                    paths: req.paths,
                    ..Turn::until(deadline)
                },
            )
        }) {
            Ok(Ok(r)) => {
                let mut d = Decision::new("hook", &req.host, "auto", &query).with_retrieval(&r);
                d.elapsed_ms.insert("total".into(), turn::ms_since(started));
                Reply::Answer {
                    context: turn::injected_context(&r.text),
                    decision: Box::new(d),
                }
            }
            Ok(Err(e)) => Reply::Refused(format!("{e:#}")),
            Err(e) => Reply::Refused(format!("{e:#}")),
        }
    }

    /// The Skills extension's catalogue of the index as it is now (rebuilt after a commit).
    fn catalogue(&self) -> anyhow::Result<Arc<Catalogue>> {
        self.with_index(|idx| {
            let generation = idx.generation();
            let mut slot = self
                .catalogue
                .lock()
                .map_err(|_| anyhow::anyhow!("catalogue lock poisoned"))?;
            if let Some((g, cat)) = slot.as_ref()
                && *g == generation
            {
                return Ok(cat.clone());
            }
            let cat = Arc::new(Catalogue::build(idx, self.engine.eligibility())?);
            *slot = Some((generation, cat.clone()));
            Ok(cat)
        })?
    }

    fn log(&self, d: &Decision) {
        if let Err(e) = self.engine.record(d) {
            let path = self.engine.log_path().unwrap_or(std::path::Path::new(""));
            tracing::warn!(target: "mcp", path = %path.display(), error = %e, "cannot write the decision log");
        }
    }
}

#[derive(Clone)]
struct SkillServer {
    state: Arc<McpState>,
}

fn schema_object(v: Value) -> Arc<serde_json::Map<String, Value>> {
    Arc::new(match v {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    })
}

/// The tools this mode offers.
fn tool_list(mode: Mode) -> Vec<Tool> {
    match mode {
        Mode::Auto => Vec::new(),
        Mode::OnDemand => vec![
            Tool::new(
                tools::SKILL_SEARCH,
                tools::SKILL_SEARCH_DESCRIPTION,
                schema_object(tools::skill_search_schema()),
            ),
            Tool::new(
                tools::SKILL_READ,
                tools::SKILL_READ_DESCRIPTION,
                schema_object(tools::skill_read_schema()),
            ),
        ],
    }
}

fn text_arg(args: &Option<serde_json::Map<String, Value>>, key: &str) -> String {
    args.as_ref()
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
        .map(|s| s.chars().take(MAX_QUERY_CHARS).collect())
        .unwrap_or_default()
}

/// `skill_read`'s `offset`: a whole number, or one written as a string (some models quote
/// numbers); anything else reads from the start.
fn offset_arg(args: &Option<serde_json::Map<String, Value>>) -> usize {
    match args.as_ref().and_then(|a| a.get("offset")) {
        Some(Value::Number(n)) => n.as_u64().map_or(0, |n| n as usize),
        Some(Value::String(s)) => s.trim().parse().unwrap_or(0),
        _ => 0,
    }
}

impl SkillServer {
    /// Runs a Skills-extension request on a blocking thread with the current catalogue.
    async fn with_catalogue<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Catalogue) -> Result<T, McpError> + Send + 'static,
    ) -> Result<T, McpError> {
        let state = self.state.clone();
        tokio::task::spawn_blocking(move || {
            let cat = state.catalogue().map_err(|e| {
                tracing::warn!(target: "mcp", error = %format!("{e:#}"), "skills: the index is unavailable");
                McpError::internal_error(format!("the skill index is unavailable: {e:#}"), None)
            })?;
            f(&cat)
        })
        .await
        .map_err(|e| McpError::internal_error(format!("skills request failed: {e}"), None))?
    }

    /// Runs one tool call on a blocking thread, bounded by the deadline.
    async fn call(&self, name: &str, args: Option<serde_json::Map<String, Value>>) -> String {
        let state = self.state.clone();
        let started = Instant::now();
        let name_owned = name.to_owned();
        let deadline = Duration::from_millis(state.engine.settings().deadline_ms);
        let work = tokio::task::spawn_blocking(move || {
            let engine = &state.engine;
            let detail = text_arg(&args, "detail");
            let turn = Turn {
                paths: process_paths(),
                detail: skillsearch_core::config::Detail::parse(&detail),
                ..Turn::until(started + deadline)
            };
            let mut decision;
            let reply =
                if name_owned == tools::SKILL_SEARCH && !detail.is_empty() && turn.detail.is_none()
                {
                    decision = Decision::new("mcp", "", tools::SKILL_SEARCH, &detail);
                    tools::bad_detail_reply(&detail)
                } else if name_owned == tools::SKILL_SEARCH {
                    let query = text_arg(&args, "query");
                    decision = Decision::new("mcp", "", tools::SKILL_SEARCH, &query);
                    match state.with_index(|idx| engine.skill_search(idx, &query, &turn)) {
                        Ok((text, retrieval)) => {
                            if let Some(r) = &retrieval {
                                decision = decision.with_retrieval(r);
                                decision.tokens_exact =
                                    r.tokens.is_some() && engine.counter().is_exact();
                            }
                            text
                        }
                        Err(e) => {
                            decision.error = Some(format!("{e:#}"));
                            tools::UNAVAILABLE_REPLY.to_owned()
                        }
                    }
                } else {
                    let id = text_arg(&args, "id");
                    let path = text_arg(&args, "path");
                    decision = Decision::new("mcp", "", tools::SKILL_READ, &format!("{id} {path}"));
                    let path = Some(path.as_str()).filter(|p| !p.is_empty());
                    let offset = offset_arg(&args);
                    match state.with_index(|idx| engine.skill_read(idx, &id, path, offset, &turn)) {
                        Ok(text) => {
                            decision.injected_chars = skillsearch_core::tokens::js_len(&text);
                            decision.injected_tokens = text.len().div_ceil(4);
                            text
                        }
                        Err(e) => {
                            decision.error = Some(format!("{e:#}"));
                            tools::UNAVAILABLE_REPLY.to_owned()
                        }
                    }
                };
            decision
                .elapsed_ms
                .insert("total".into(), turn::ms_since(started));
            state.log(&decision);
            reply
        });
        match tokio::time::timeout(deadline, work).await {
            Ok(Ok(text)) => text,
            Ok(Err(e)) => {
                tracing::warn!(target: "mcp", error = %e, "tool call panicked");
                tools::UNAVAILABLE_REPLY.to_owned()
            }
            Err(_) => {
                tracing::warn!(target: "mcp", deadline_ms = deadline.as_millis() as u64, "tool call passed its deadline");
                tools::UNAVAILABLE_REPLY.to_owned()
            }
        }
    }
}

impl ServerHandler for SkillServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_skills_with_directory_read()
                .build(),
        )
        .with_server_info(Implementation::new(
            "skillsearch",
            env!("CARGO_PKG_VERSION"),
        ))
    }

    async fn list_skills(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, McpError> {
        let cursor = request.and_then(|r| r.cursor);
        self.with_catalogue(move |cat| {
            let (page, next) = cat.page(cursor.as_deref())?;
            let mut result = ListSkillsResult::with_all_items(skills::skills(page));
            result.next_cursor = next;
            Ok(result)
        })
        .await
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, McpError> {
        let uri = request.uri;
        self.with_catalogue(move |cat| {
            let unknown = || McpError::invalid_params(format!("unknown skill {uri}"), None);
            let target = skills::parse_uri(&uri)?.ok_or_else(unknown)?;
            let entry = cat
                .get(&target.name)
                .filter(|e| e.uri == uri)
                .ok_or_else(unknown)?;
            let skill = skills::skill(entry).map_err(|why| {
                McpError::invalid_params(format!("skill {uri} cannot be served: {why}"), None)
            })?;
            Ok(GetSkillResult::new(skill))
        })
        .await
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let cursor = request.and_then(|r| r.cursor);
        self.with_catalogue(move |cat| {
            let (page, next) = cat.page(cursor.as_deref())?;
            let mut result = ListResourcesResult::with_all_items(skills::skill_md_resources(page));
            result.next_cursor = next;
            Ok(result)
        })
        .await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let uri = request.uri;
        self.with_catalogue(move |cat| {
            let contents = skills::read(cat, &uri)?;
            Ok(ReadResourceResult::new(vec![contents]).into())
        })
        .await
    }

    async fn read_resource_directory(
        &self,
        request: ReadResourceDirectoryRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceDirectoryResult, McpError> {
        let uri = request.uri;
        self.with_catalogue(move |cat| {
            Ok(ReadResourceDirectoryResult::with_all_items(
                skills::read_directory(cat, &uri)?,
            ))
        })
        .await
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(tool_list(
            self.state.engine.settings().mode,
        )))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tool_list(self.state.engine.settings().mode)
            .into_iter()
            .find(|t| t.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.as_ref();
        if self.state.engine.settings().mode == Mode::Auto
            && (name == tools::SKILL_SEARCH || name == tools::SKILL_READ)
        {
            return Err(McpError::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!("{name} is not offered in auto mode (skills are injected every turn)"),
                None,
            ));
        }
        if name != tools::SKILL_SEARCH && name != tools::SKILL_READ {
            return Err(McpError::invalid_params(
                format!("unknown tool `{name}`; this server offers skill_search and skill_read"),
                None,
            ));
        }
        let text = self.call(name, request.arguments).await;
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

/// Serves MCP on stdin/stdout until the client closes the connection.
pub fn run(home: PathBuf, settings: Settings) -> anyhow::Result<u8> {
    let engine = Engine::new(&settings, &home);
    let state = Arc::new(McpState {
        embedding: crate::embedding::Background::start(&home, &settings, engine.semantic().clone()),
        engine,
        home,
        index: Mutex::new(None),
        checking: Arc::default(),
        catalogue: Mutex::new(None),
        warm: Mutex::new(None),
    });
    // Warm the index while the client initialises; then answer the hook's turns (a hook that
    // came earlier would only wait for the index to open, so it answers itself until then).
    {
        let state = state.clone();
        std::thread::spawn(move || {
            if let Err(e) = state.with_index(|_| ()) {
                tracing::warn!(target: "mcp", error = %format!("{e:#}"), "cannot open the skill index yet");
            }
            let handler = state.clone();
            let bound =
                crate::warm::listen(&state.home, Arc::new(move |req| handler.warm_turn(req)));
            if let Ok(mut slot) = state.warm.lock() {
                *slot = bound;
            }
        });
    }
    let state_for_exit = state.clone();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()?;
    let served = rt.block_on(async move {
        let (stdin, stdout) = rmcp::transport::stdio();
        let server = SkillServer { state }
            .serve(transport::CheckedLines::new(stdin, stdout))
            .await?;
        server.waiting().await?;
        anyhow::Ok(())
    });
    // The socket goes with the server (its handler holds the state, which is never dropped).
    if let Ok(mut slot) = state_for_exit.warm.lock() {
        slot.take();
    }
    served?;
    Ok(0)
}
