//! Calls to an OpenAI-compatible model server: the chat client behind the query rewrite
//! ([`rewrite()`]) and the skill gate ([`gate()`]), and the remote embedder
//! ([`RemoteEmbedder`]).
//!
//! Everything here is synchronous (`ureq`, no async runtime) and every call has a hard deadline
//! covering connect, send and read. The rewrite and the gate fail open: any error or timeout
//! yields the raw query or the first candidates, with the error recorded in the outcome. API keys
//! travel only in the `Authorization: Bearer` header and are redacted from `Debug` output.

mod extract;
mod gate;
mod remote_embed;
mod rewrite;

pub use extract::extract_json_object;
pub use gate::{GateCandidate, GateOptions, GateOutcome, gate, gate_prompt};
pub use remote_embed::RemoteEmbedder;
pub use rewrite::{REWRITE_MAX_CHARS, RewriteOutcome, rewrite, rewrite_prompt};

use crate::config::{ModelSettings, Secret};
use crate::error::{Error, Result};
use crate::remote::breaker::Breaker;
use serde_json::{Value, json};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Most bytes read from one reply (an embeddings batch of 4096 × 4096 floats fits).
const MAX_REPLY_BYTES: u64 = 256 << 20;

/// Most tokens a chat reply may take (reasoning models spend many before the JSON).
pub const MAX_TOKENS: u32 = 8192;

/// One reusable HTTP agent; the deadline is set per request.
pub(crate) fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .user_agent(concat!("skillsearch/", env!("CARGO_PKG_VERSION")))
        .build()
        .new_agent()
}

/// `<base>/<path>` with exactly one slash between.
pub(crate) fn endpoint(base: &str, path: &str) -> String {
    format!("{}/{path}", base.trim_end_matches('/'))
}

/// POSTs `body` as JSON and returns the JSON reply, all within `deadline`.
pub(crate) fn post_json(
    agent: &ureq::Agent,
    breaker: &Breaker,
    url: &str,
    key: &Secret,
    body: &Value,
    deadline: Duration,
) -> Result<Value> {
    breaker.check().map_err(|why| Error::Http {
        url: url.to_owned(),
        message: why,
    })?;
    let r = post_json_unguarded(agent, url, key, body, deadline);
    // Only an endpoint that cannot be reached, hangs, or answers with an HTTP error counts
    // against it; a reply that is not what was asked for is no reason to stop asking.
    match &r {
        Err(e @ (Error::Http { .. } | Error::Timeout { .. })) => breaker.failure(&e.to_string()),
        _ => breaker.success(),
    }
    r
}

fn post_json_unguarded(
    agent: &ureq::Agent,
    url: &str,
    key: &Secret,
    body: &Value,
    deadline: Duration,
) -> Result<Value> {
    let ms = deadline.as_millis() as u64;
    let timeout = |e: &ureq::Error| matches!(e, ureq::Error::Timeout(_));
    let fail = |e: ureq::Error| {
        if timeout(&e) {
            Error::Timeout {
                url: url.to_owned(),
                ms,
            }
        } else {
            Error::Http {
                url: url.to_owned(),
                message: e.to_string(),
            }
        }
    };
    let mut req = agent
        .post(url)
        .config()
        .timeout_global(Some(deadline))
        .build()
        .header("Content-Type", "application/json")
        .header("Accept", "application/json");
    if !key.is_empty() {
        req = req.header("Authorization", format!("Bearer {}", key.expose()));
    }
    let mut resp = req.send(body.to_string()).map_err(fail)?;
    let status = resp.status();
    let text = resp
        .body_mut()
        .with_config()
        .limit(MAX_REPLY_BYTES)
        .read_to_string()
        .map_err(fail)?;
    if !status.is_success() {
        return Err(Error::Http {
            url: url.to_owned(),
            message: format!(
                "HTTP {}: {}",
                status.as_u16(),
                crate::tokens::prefix_chars(text.trim(), 300)
            ),
        });
    }
    serde_json::from_str(&text).map_err(|e| Error::Reply {
        url: url.to_owned(),
        message: format!(
            "not JSON ({e}): {:?}",
            crate::tokens::prefix_chars(text.trim(), 200)
        ),
    })
}

/// What a chat completion returned.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatReply {
    /// The assistant message's text.
    pub content: String,
    pub finish_reason: Option<String>,
}

/// A client of one OpenAI-compatible chat model (`POST <base>/chat/completions`).
#[derive(Clone)]
pub struct ChatClient {
    agent: ureq::Agent,
    /// Shared by the clones of this client.
    breaker: Arc<Breaker>,
    base_url: String,
    model: String,
    api_key: Secret,
    timeout: Duration,
}

impl fmt::Debug for ChatClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChatClient")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl ChatClient {
    /// A client for the configured model; an error names the missing key.
    pub fn from_config(s: &ModelSettings) -> Result<Self> {
        if s.model.trim().is_empty() {
            return Err(Error::Invalid(
                "no chat model: config key `model` is empty".into(),
            ));
        }
        if s.base_url.trim().is_empty() {
            return Err(Error::Invalid(format!(
                "model `{}` has no endpoint: config key `model_base_url` is empty",
                s.model
            )));
        }
        let base = s.base_url.trim();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(Error::Invalid(format!(
                "config key `model_base_url` = `{base}` is not an http:// or https:// URL"
            )));
        }
        Ok(Self::new(
            &s.base_url,
            &s.model,
            s.api_key.clone(),
            s.timeout,
        ))
    }

    /// `base_url` such as `http://127.0.0.1:8000/v1`; `timeout` caps every call.
    pub fn new(base_url: &str, model: &str, api_key: Secret, timeout: Duration) -> Self {
        ChatClient {
            agent: agent(),
            breaker: Arc::new(Breaker::new()),
            base_url: base_url.trim().to_owned(),
            model: model.trim().to_owned(),
            api_key,
            timeout,
        }
    }

    pub fn model(&self) -> &str {
        &self.model
    }

    /// The chat completions URL.
    pub fn url(&self) -> String {
        endpoint(&self.base_url, "chat/completions")
    }

    /// One user message in, the first choice out, within `deadline` (or the client's own
    /// ceiling, whichever is shorter). `finish_reason: "error"` and an empty reply are errors.
    pub fn chat(&self, prompt: &str, temperature: f32, deadline: Duration) -> Result<ChatReply> {
        let url = self.url();
        let body = json!({
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": temperature,
            "max_tokens": MAX_TOKENS,
            "stream": false,
        });
        let reply = post_json(
            &self.agent,
            &self.breaker,
            &url,
            &self.api_key,
            &body,
            deadline.min(self.timeout),
        )?;
        let bad = |message: String| Error::Reply {
            url: url.clone(),
            message,
        };
        if let Some(e) = reply.get("error").filter(|e| !e.is_null()) {
            let msg = e
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| e.to_string(), str::to_owned);
            return Err(bad(format!(
                "provider error: {}",
                crate::tokens::prefix_chars(&msg, 300)
            )));
        }
        let choice = reply
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
            .ok_or_else(|| bad("no `choices[0]` in the reply".into()))?;
        let finish_reason = choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if finish_reason.as_deref() == Some("error") {
            return Err(bad(
                "the provider ended the reply with finish_reason `error`".into(),
            ));
        }
        let content = match choice.pointer("/message/content") {
            Some(Value::String(s)) => s.clone(),
            // Some servers send content parts: [{"type": "text", "text": ...}].
            Some(Value::Array(parts)) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect(),
            _ => String::new(),
        };
        if content.trim().is_empty() {
            return Err(bad(format!(
                "empty reply (finish_reason {})",
                finish_reason.as_deref().unwrap_or("missing")
            )));
        }
        Ok(ChatReply {
            content,
            finish_reason,
        })
    }
}
