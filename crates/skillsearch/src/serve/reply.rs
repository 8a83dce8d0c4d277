//! The daemon's retrieve reply, written straight from the answer it shares with the answer
//! cache. Its `text` is the rendered block, tens of kilobytes in auto mode: putting it in a
//! `json!` tree copied it once more per request, and axum's `Json` wrote it into a buffer that
//! started at 128 bytes and was copied each time it grew. Here it is written once, into a
//! buffer sized for it. The bytes are what serde_json writes for the whole reply (a test
//! compares them). (Escaping the block eight bytes at a time was tried: a newline every ~30
//! bytes keeps it per-run bound, and it was only ~17% faster than serde_json's.)

use crate::serve::Answer;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};

/// The rendered block: an answer's own (shared with the cache) or a fixed reply.
pub enum Text {
    Shared(Answer),
    Own(String),
}

impl Text {
    pub fn as_str(&self) -> &str {
        match self {
            Text::Shared(a) => &a.0,
            Text::Own(s) => s,
        }
    }
}

/// `{"mode": …, "text": …, …rest}`, in that order.
pub struct RetrieveReply {
    mode: &'static str,
    text: Text,
    /// The other members, after `mode` and `text`.
    rest: Map<String, Value>,
}

impl RetrieveReply {
    /// `rest` is an object of the other members (anything else stands for none).
    pub fn new(mode: &'static str, text: Text, rest: Value) -> RetrieveReply {
        let rest = match rest {
            Value::Object(rest) => rest,
            _ => Map::new(),
        };
        RetrieveReply { mode, text, rest }
    }

    /// The whole reply as one JSON value (for the stdio protocol and tests).
    pub fn into_value(self) -> Value {
        let mut all = Map::with_capacity(self.rest.len() + 2);
        all.insert("mode".into(), self.mode.into());
        all.insert("text".into(), self.text.as_str().into());
        all.extend(self.rest);
        Value::Object(all)
    }

    /// The reply's compact JSON, byte for byte what `serde_json::to_vec(&self.into_value())`
    /// writes.
    pub fn to_json(&self) -> Vec<u8> {
        let text = self.text.as_str();
        let mut out = Vec::with_capacity(text.len() + text.len() / 8 + 4096);
        let json = "strings and maps of JSON values always serialise";
        out.extend_from_slice(b"{\"mode\":");
        serde_json::to_writer(&mut out, self.mode).expect(json);
        out.extend_from_slice(b",\"text\":");
        serde_json::to_writer(&mut out, text).expect(json);
        let at = out.len();
        // Writing the rest as an object and turning its `{` into a comma joins the two.
        serde_json::to_writer(&mut out, &self.rest).expect(json);
        if self.rest.is_empty() {
            out.truncate(at);
            out.push(b'}');
        } else {
            out[at] = b',';
        }
        out
    }
}

impl IntoResponse for RetrieveReply {
    fn into_response(self) -> Response {
        ([(header::CONTENT_TYPE, "application/json")], self.to_json()).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_reply_is_the_json_serde_json_writes_for_it() {
        let rest =
            json!({"hits": [{"id": "local/a", "score": 1.5}], "chars": 5, "diagnostics": []});
        for (text, rest) in [("a \"block\"\n", rest), ("", json!({}))] {
            let reply = RetrieveReply::new("auto", Text::Own(text.into()), rest);
            let bytes = reply.to_json();
            let want = serde_json::to_vec(&reply.into_value()).unwrap();
            assert_eq!(
                String::from_utf8(bytes).unwrap(),
                String::from_utf8(want).unwrap()
            );
        }
    }
}
