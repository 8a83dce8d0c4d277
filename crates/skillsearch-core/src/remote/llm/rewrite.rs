//! The query rewrite: the model turns a chatty user message into a retrieval query. It never
//! vetoes retrieval and never fails the turn: any problem means "search the raw query".

use super::{ChatClient, extract_json_object};
use crate::tokens::prefix_chars;
use std::time::{Duration, Instant};

/// Most characters of the (trimmed) query sent to the model.
pub const REWRITE_MAX_CHARS: usize = 2000;

const TEMPERATURE: f32 = 0.3;

/// The rewrite prompt for `query` (already trimmed and cut), inserted literally.
pub fn rewrite_prompt(query: &str) -> String {
    let mut p = String::from(
        "Rewrite the user request below as a short search query for finding agent skills \
         (reusable procedures) that would help with it. Drop noise such as file paths, IDs, \
         timestamps and boilerplate; keep the kind of task, its domain, the capabilities it \
         needs and the key technical details. Do not answer or carry out the request.\n\
         Return JSON: {\"rewritten_query\": \"...\" or null}\n\n",
    );
    p.push_str(query);
    p
}

/// What the rewrite did, for the caller's diagnostics.
#[derive(Debug, Clone, PartialEq)]
pub struct RewriteOutcome {
    /// What to search: the rewritten query, or the raw (trimmed) query.
    pub query: String,
    /// The model's rewrite, when it gave a usable one.
    pub rewritten: Option<String>,
    /// Whether the model was called (not for an empty query).
    pub called: bool,
    pub elapsed_ms: u64,
    /// Why the raw query is searched, when the call failed.
    pub error: Option<String>,
}

/// Rewrites `query` for retrieval within `deadline`; fails open to the raw query.
/// `need_retrieval` in a reply is ignored: the rewrite never vetoes a search.
pub fn rewrite(client: &ChatClient, query: &str, deadline: Duration) -> RewriteOutcome {
    let start = Instant::now();
    let raw = query.trim();
    let mut out = RewriteOutcome {
        query: raw.to_owned(),
        rewritten: None,
        called: false,
        elapsed_ms: 0,
        error: None,
    };
    let input = prefix_chars(raw, REWRITE_MAX_CHARS);
    if input.is_empty() {
        return out;
    }
    out.called = true;
    match client.chat(&rewrite_prompt(input), TEMPERATURE, deadline) {
        Ok(reply) => match extract_json_object(&reply.content) {
            Some(obj) => {
                if let Some(q) = obj
                    .get("rewritten_query")
                    .and_then(|v| v.as_str())
                    .map(str::trim)
                    .filter(|q| !q.is_empty())
                {
                    out.rewritten = Some(q.to_owned());
                    out.query = q.to_owned();
                }
            }
            None => {
                out.error = Some(format!(
                    "rewrite reply holds no JSON object: {:?}",
                    prefix_chars(reply.content.trim(), 200)
                ))
            }
        },
        Err(e) => out.error = Some(format!("rewrite failed: {e}")),
    }
    out.elapsed_ms = start.elapsed().as_millis() as u64;
    if let Some(e) = &out.error {
        tracing::warn!(error = %e, elapsed_ms = out.elapsed_ms, "query rewrite failed; searching the raw query");
    } else {
        tracing::debug!(rewritten = ?out.rewritten, elapsed_ms = out.elapsed_ms, "query rewrite");
    }
    out
}
