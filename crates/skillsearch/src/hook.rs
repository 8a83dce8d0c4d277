//! `skillsearch hook`: the per-turn `UserPromptSubmit` command hook of Claude Code, Codex and
//! CodeBuddy/WorkBuddy. It reads the host's JSON on stdin and, in `auto` mode, answers with the
//! skills block as `additionalContext`. It always exits 0 and never blocks the turn: bad input,
//! a broken config, a slow index or a missed deadline all cost the turn its skills, nothing more.
//! When a warm skillsearch process (the MCP server, the daemon) answers on the home's socket,
//! the turn is its full answer, hybrid included (see `warm`); otherwise the hook ranks itself.

use crate::context::{Flags, host_paths, roots_of, settings};
use crate::{freshness, warm};
use serde_json::{Value, json};
use skillsearch_core::config::{Mode, Settings};
use skillsearch_core::tokens::TokenCounter;
use skillsearch_core::turn::decision_log::{Decision, DecisionLog};
use skillsearch_core::turn::{self, Retrieval};
use skillsearch_core::{Engine, Turn};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

/// Most bytes of hook input read; the rest is ignored.
const MAX_INPUT: u64 = 8 * 1024 * 1024;
/// Characters of the prompt used as the query.
pub const MAX_QUERY_CHARS: usize = 2000;

/// Time kept back from the deadline for writing the reply.
const MARGIN: Duration = Duration::from_millis(50);

/// Which host's dialect to answer in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum HookHost {
    ClaudeCode,
    Codex,
    Codebuddy,
    /// WorkBuddy desktop: CodeBuddy's dialect, its own directories.
    Workbuddy,
}

impl HookHost {
    fn name(self) -> &'static str {
        match self {
            HookHost::ClaudeCode => "claude-code",
            HookHost::Codex => "codex",
            HookHost::Codebuddy => "codebuddy",
            HookHost::Workbuddy => "workbuddy",
        }
    }

    /// Recognises the host from fields only it sends.
    fn detect(input: &Value) -> HookHost {
        if input.get("client").and_then(Value::as_str) == Some("WorkBuddy") {
            HookHost::Workbuddy
        } else if input.get("client").is_some() || input.get("generation_id").is_some() {
            HookHost::Codebuddy
        } else if input.get("turn_id").is_some() {
            HookHost::Codex
        } else {
            HookHost::ClaudeCode
        }
    }

    /// The reply: `additionalContext` when there is something to inject, otherwise nothing
    /// (CodeBuddy wants `{"continue":true}`).
    pub fn reply(self, context: &str) -> Option<Value> {
        let cont = matches!(self, HookHost::Codebuddy | HookHost::Workbuddy);
        if context.is_empty() {
            return cont.then(|| json!({"continue": true}));
        }
        let mut v = json!({"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": context}});
        if cont {
            v["continue"] = Value::Bool(true);
        }
        Some(v)
    }
}

/// What the hook takes from its input.
#[derive(Debug)]
pub struct Input {
    /// The input as JSON, or why there is none.
    pub input: Result<Value, String>,
    /// The dialect to answer in: the one given, else the one the input shows.
    pub host: HookHost,
    /// The query: the start of `prompt`, at most [`MAX_QUERY_CHARS`] characters.
    pub query: String,
    /// `cwd`, the workspace when no skill roots are configured.
    pub cwd: Option<PathBuf>,
}

/// Reads the host's input (the bytes read from stdin, or the read's error).
pub fn read_input(raw: std::io::Result<&[u8]>, host: Option<HookHost>) -> Input {
    let input: Result<Value, String> = match raw {
        Ok(raw) => serde_json::from_slice(raw).map_err(|e| format!("hook input is not JSON ({e})")),
        Err(e) => Err(format!("cannot read hook input ({e})")),
    };
    let host = host.unwrap_or_else(|| {
        input
            .as_ref()
            .map(HookHost::detect)
            .unwrap_or(HookHost::ClaudeCode)
    });
    let field = |name: &str| {
        input
            .as_ref()
            .ok()
            .and_then(|v| v.get(name))
            .and_then(Value::as_str)
    };
    let query: String = field("prompt")
        .unwrap_or("")
        .chars()
        .take(MAX_QUERY_CHARS)
        .collect();
    let cwd = field("cwd").map(PathBuf::from);
    Input {
        input,
        host,
        query,
        cwd,
    }
}

/// Runs one turn. Returns the process exit code: always 0.
pub fn run(home: &Path, config: Option<PathBuf>, host: Option<HookHost>, flags: Flags) -> u8 {
    let started = Instant::now();
    let mut raw = Vec::new();
    let read = std::io::stdin().take(MAX_INPUT).read_to_end(&mut raw);
    let Input {
        input,
        host,
        query,
        cwd,
    } = read_input(read.map(|_| raw.as_slice()), host);

    let s = match settings(home, config, flags) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("skillsearch hook: {e:#}; the turn goes on without skills");
            emit(host.reply(""));
            return 0;
        }
    };
    let mut decision = Decision::new("hook", host.name(), s.mode.as_str(), &query);
    // A check of the skill files left for after the answer (see `freshness`).
    let mut stale = None;
    let context = match (&input, s.mode) {
        (Err(e), _) => {
            decision.error = Some(e.clone());
            String::new()
        }
        (Ok(_), Mode::OnDemand) => String::new(),
        (Ok(_), Mode::Auto) if query.trim().is_empty() => String::new(),
        (Ok(_), Mode::Auto) => match ask_warm(home, &s, host, cwd.clone(), &query, &mut decision) {
            Some(context) => context,
            None => {
                // Only a turn that retrieves builds the engine (its remote clients, the plugin
                // inventory). Estimated token counts: loading the BPE tables costs more than
                // the whole turn may.
                let engine =
                    Arc::new(Engine::new(&s, home).with_counter(TokenCounter::estimating()));
                retrieve_within_deadline(
                    home,
                    &engine,
                    (host, cwd, &query),
                    &mut decision,
                    &mut stale,
                    started,
                )
            }
        },
    };
    emit(host.reply(&context));
    if let Some(check) = stale {
        decision.diagnostics.push(check.start());
    }
    decision
        .elapsed_ms
        .insert("total".into(), turn::ms_since(started));
    if let Some(log) = DecisionLog::from_settings(&s)
        && let Err(e) = log.append(&decision)
    {
        eprintln!(
            "skillsearch hook: cannot write the decision log {}: {e}",
            log.path().display()
        );
    }
    0
}

/// The turn's context from a warm process on `<home>/warm.sock` (see `warm`), given at most
/// half the deadline; `None` when none answers it, and the hook answers itself.
fn ask_warm(
    home: &Path,
    s: &Settings,
    host: HookHost,
    cwd: Option<PathBuf>,
    query: &str,
    decision: &mut Decision,
) -> Option<String> {
    let started = Instant::now();
    let mut scoped = s.clone();
    if scoped.skills.is_empty() && scoped.workspace.is_none() {
        scoped.workspace = cwd.clone();
    }
    let roots = roots_of(&scoped).ok()?;
    let budget = Duration::from_millis(s.deadline_ms / 2);
    let req = warm::Request {
        v: 1,
        query: query.to_owned(),
        roots,
        settings: warm::fingerprint(s),
        deadline_ms: budget.as_millis() as u64,
        host: host.name().to_owned(),
        paths: host_paths(host.name(), cwd.as_deref()),
    };
    let why = match warm::ask(home, &req, budget) {
        Ok(warm::Reply::Answer {
            context,
            decision: d,
        }) => {
            let d = *d;
            decision.hits = d.hits;
            decision.retrievers = d.retrievers;
            decision.dropped = d.dropped;
            decision.injected_chars = d.injected_chars;
            decision.injected_tokens = d.injected_tokens;
            decision.tokens_exact = d.tokens_exact;
            decision.rewritten_query = d.rewritten_query;
            decision.gate = d.gate;
            decision.diagnostics = d.diagnostics;
            decision.error = d.error;
            decision.elapsed_ms = d.elapsed_ms;
            decision
                .elapsed_ms
                .insert("warm".into(), turn::ms_since(started));
            return Some(context);
        }
        Ok(warm::Reply::Refused(why)) => format!("the warm process refused the turn: {why}"),
        Err(why) => why,
    };
    // No socket is the usual case without a warm process: not worth a line per turn.
    if !why.contains("no socket") {
        decision
            .diagnostics
            .push(format!("warm path: {why}; answered here"));
    }
    None
}

/// Searches on a worker thread and gives up at the deadline (the worker is abandoned; the
/// process exits right after the reply). A check of the skill files too costly for the turn
/// is put in `stale`, to start after the answer.
fn retrieve_within_deadline(
    home: &Path,
    engine: &Arc<Engine>,
    (host, cwd, query): (HookHost, Option<PathBuf>, &str),
    decision: &mut Decision,
    stale: &mut Option<freshness::Stale>,
    started: Instant,
) -> String {
    let s = engine.settings();
    let (tx, rx) = mpsc::channel();
    let (home, engine2, query) = (home.to_path_buf(), engine.clone(), query.to_owned());
    let mut s2 = s.clone();
    let paths = host_paths(host.name(), cwd.as_deref());
    if s2.skills.is_empty() && s2.workspace.is_none() {
        s2.workspace = cwd;
    }
    // Leave the reply time to be written before the host's own deadline.
    let turn_deadline = started + Duration::from_millis(s.deadline_ms).saturating_sub(MARGIN);
    std::thread::spawn(move || {
        let work = || -> anyhow::Result<(Retrieval, f64, Option<freshness::Stale>)> {
            let t = Instant::now();
            let (idx, check) = freshness::open_for_turn(
                &home,
                &roots_of(&s2)?,
                Duration::from_millis(s2.refresh_ms),
            )?;
            let open_ms = turn::ms_since(t);
            let turn = Turn {
                paths,
                ..Turn::until(turn_deadline)
            };
            let r = engine2.retrieve(&idx, &query, &turn)?;
            Ok((r, open_ms, check))
        };
        let _ = tx.send(work());
    });
    let deadline = Duration::from_millis(s.deadline_ms).saturating_sub(started.elapsed());
    match rx.recv_timeout(deadline) {
        Ok(Ok((r, open_ms, check))) => {
            *decision = std::mem::take(decision).with_retrieval(&r);
            decision.elapsed_ms.insert("open".into(), open_ms);
            *stale = check;
            turn::injected_context(&r.text)
        }
        Ok(Err(e)) => {
            decision.error = Some(format!("{e:#}"));
            eprintln!("skillsearch hook: {e:#}; the turn goes on without skills");
            String::new()
        }
        Err(_) => {
            decision.error = Some(format!(
                "deadline of {} ms passed; nothing injected",
                s.deadline_ms
            ));
            String::new()
        }
    }
}

/// Writes the whole reply and flushes it before returning; a closed stdout is not an error.
fn emit(reply: Option<Value>) {
    let Some(bytes) = reply_line(reply) else {
        return;
    };
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(&bytes).and_then(|()| out.flush());
}

/// The reply as the one line the hook writes.
pub fn reply_line(reply: Option<Value>) -> Option<Vec<u8>> {
    let mut bytes = serde_json::to_vec(&reply?).unwrap_or_default();
    bytes.push(b'\n');
    Some(bytes)
}
