//! Pulling the one JSON object out of a model's reply, whatever the model wrapped it in.

use serde_json::{Map, Value};

/// Finds the JSON object in a model reply. Accepts, in this order:
/// a fenced block (```` ```json ```` or bare ```` ``` ````) anywhere, the last that holds an object;
/// the whole reply; otherwise the last top-level `{…}` in the prose (so a reasoning preamble,
/// even one with braces in it, is skipped). `<think>…</think>` sections are dropped first.
pub fn extract_json_object(reply: &str) -> Option<Map<String, Value>> {
    let text = strip_think(reply);
    let fenced = fenced_blocks(&text)
        .into_iter()
        .rev()
        .find_map(|b| as_object(b.trim()));
    if fenced.is_some() {
        return fenced;
    }
    if let Some(o) = as_object(text.trim()) {
        return Some(o);
    }
    let mut last = None;
    let mut at = 0;
    while let Some(off) = text[at..].find('{') {
        let start = at + off;
        let mut it = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
        match it.next() {
            Some(Ok(Value::Object(o))) => {
                last = Some(o);
                at = start + it.byte_offset();
            }
            _ => at = start + 1,
        }
    }
    last
}

fn as_object(s: &str) -> Option<Map<String, Value>> {
    match serde_json::from_str(s) {
        Ok(Value::Object(o)) => Some(o),
        _ => None,
    }
}

/// The reply without `<think>…</think>` sections (an unclosed one runs to the end).
fn strip_think(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("<think>") {
        out.push_str(&rest[..i]);
        match rest[i..].find("</think>") {
            Some(j) => rest = &rest[i + j + "</think>".len()..],
            None => {
                rest = "";
                break;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Contents of the ``` fences, in order (an info string such as `json` is skipped).
fn fenced_blocks(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        let body_start = after.find('\n').map_or(after.len(), |n| n + 1);
        let info = &after[..body_start];
        // `{` right after the fence: a one-line block with no info string.
        let (body, skip) = if info.trim_start().starts_with('{') {
            (after, 0)
        } else {
            (&after[body_start..], body_start)
        };
        match body.find("```") {
            Some(close) => {
                out.push(&body[..close]);
                rest = &after[skip + close + 3..];
            }
            None => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn get(s: &str) -> Option<Value> {
        extract_json_object(s).map(Value::Object)
    }

    #[test]
    fn plain_fenced_preamble_and_prose() {
        assert_eq!(get(r#"{"a": 1}"#), Some(json!({"a": 1})));
        assert_eq!(
            get("Let me think {briefly} about it.\n```json\n{\"skills\": [\"x\"]}\n```\nDone."),
            Some(json!({"skills": ["x"]}))
        );
        assert_eq!(get("```{\"a\": 2}```"), Some(json!({"a": 2})));
        assert_eq!(
            get("The answer is {\"rewritten_query\": \"pdf tables\"} as asked."),
            Some(json!({"rewritten_query": "pdf tables"}))
        );
        // A reasoning preamble that shows an example object: the last object wins.
        assert_eq!(
            get("I could answer {\"skills\": []} but better:\n{\"skills\": [\"b\"]}"),
            Some(json!({"skills": ["b"]}))
        );
        assert_eq!(
            get("<think>maybe {\"skills\": [\"a\"]}</think>{\"skills\": [\"c\"]}"),
            Some(json!({"skills": ["c"]}))
        );
        // Nested objects are not mistaken for the answer.
        assert_eq!(
            get("so: {\"plan\": {\"x\": 1}, \"skills\": []} end"),
            Some(json!({"plan": {"x": 1}, "skills": []}))
        );
    }

    #[test]
    fn nothing_to_find() {
        assert_eq!(get(""), None);
        assert_eq!(get("no json here"), None);
        assert_eq!(get("[1, 2]"), None);
        assert_eq!(get("{broken"), None);
        assert_eq!(get("```json\n[1]\n```"), None);
    }
}
