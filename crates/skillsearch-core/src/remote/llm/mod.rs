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

use crate::config::ModelSettings;
use crate::error::{Error, Result};
use crate::remote::http::{Endpoint, Failure, Request};
use serde_json::{Value, json};
use std::fmt;
use std::time::Duration;

/// Most bytes read from one reply (an embeddings batch of 4096 × 4096 floats fits).
const MAX_REPLY_BYTES: u64 = 256 << 20;

/// The chat completions path under the model's base URL.
const CHAT_PATH: &str = "chat/completions";

/// Most tokens a chat reply may take (reasoning models spend many before the JSON).
pub const MAX_TOKENS: u32 = 8192;

/// POSTs `body` as JSON to `<endpoint>/<path>` and returns the JSON reply, all within
/// `deadline`. Only an endpoint that cannot be reached, hangs, or answers with an HTTP error
/// counts against its breaker; a reply that is not what was asked for is no reason to stop
/// asking.
pub(crate) fn post_json(
    endpoint: &Endpoint,
    path: &str,
    body: &Value,
    deadline: Duration,
) -> Result<Value> {
    let url = endpoint.url(path);
    let http = |message: String| Error::Http {
        url: url.clone(),
        message,
    };
    let answer = match endpoint.send(
        path,
        Request::PostJson(body),
        &[],
        deadline,
        MAX_REPLY_BYTES,
    ) {
        Err(Failure::Refused(why)) => return Err(http(why)),
        Err(Failure::Timeout) => Err(Error::Timeout {
            url: url.clone(),
            ms: deadline.as_millis() as u64,
        }),
        Err(Failure::Transport(message)) => Err(http(message)),
        Ok(a) if !(200..300).contains(&a.status) => Err(http(format!(
            "HTTP {}: {}",
            a.status,
            crate::tokens::prefix_chars(String::from_utf8_lossy(&a.body).trim(), 300)
        ))),
        Ok(a) => Ok(a),
    };
    let answer = match answer {
        Ok(a) => {
            endpoint.succeeded();
            a
        }
        Err(e) => {
            endpoint.failed(&e.to_string());
            return Err(e);
        }
    };
    let text = String::from_utf8_lossy(&answer.body);
    serde_json::from_str(&text).map_err(|e| Error::Reply {
        url,
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
    /// Shared breaker and pool across the clones of this client.
    endpoint: Endpoint,
    model: String,
    timeout: Duration,
}

impl fmt::Debug for ChatClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChatClient")
            .field("endpoint", &self.endpoint)
            .field("model", &self.model)
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
        let endpoint = Endpoint::new(&s.base_url, s.api_key.clone())
            .map_err(|why| Error::Invalid(format!("config key `model_base_url` = {why}")))?;
        Ok(ChatClient {
            endpoint,
            model: s.model.trim().to_owned(),
            timeout: s.timeout,
        })
    }

    pub fn model(&self) -> &str {
        &self.model
    }

    /// The chat completions URL.
    pub fn url(&self) -> String {
        self.endpoint.url(CHAT_PATH)
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
        let reply = post_json(&self.endpoint, CHAT_PATH, &body, deadline.min(self.timeout))?;
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
