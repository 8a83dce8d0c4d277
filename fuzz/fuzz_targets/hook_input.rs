//! The hook's input (`skillsearch hook` reads the host's JSON on stdin) and its one-line reply.
//!
//! The first byte picks the `--host` flag (none, or one of the three), the rest is stdin.
//! Properties: reading never panics; JSON input is read as that JSON and anything else is an
//! error naming it; the query is the prompt's start, at most `MAX_QUERY_CHARS` characters;
//! the host is the flag's, else the one the input's fields show; the reply is none, or exactly
//! one line of JSON carrying the context unchanged (CodeBuddy always answers, with
//! `continue: true`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use skillsearch::fuzzing::hook::{HookHost, MAX_QUERY_CHARS, read_input, reply_line};
use skillsearch_core::turn::injected_context;

fn check_reply(host: HookHost, context: &str) {
    let line = reply_line(host.reply(context));
    let codebuddy = matches!(host, HookHost::Codebuddy | HookHost::Workbuddy);
    let Some(line) = line else {
        assert!(
            context.is_empty() && !codebuddy,
            "only an empty context goes unanswered"
        );
        return;
    };
    assert_eq!(line.last(), Some(&b'\n'));
    assert_eq!(
        line.iter().filter(|&&b| b == b'\n').count(),
        1,
        "the reply is one line"
    );
    let v: Value = serde_json::from_slice(&line).expect("the reply is JSON");
    assert_eq!(v.get("continue").is_some(), codebuddy);
    if codebuddy {
        assert_eq!(v["continue"], Value::Bool(true));
    }
    if context.is_empty() {
        assert!(v.get("hookSpecificOutput").is_none());
    } else {
        let out = &v["hookSpecificOutput"];
        assert_eq!(out["hookEventName"], "UserPromptSubmit");
        assert_eq!(out["additionalContext"].as_str(), Some(context));
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, raw)) = data.split_first() else {
        return;
    };
    let flag = match pick % 5 {
        0 => None,
        1 => Some(HookHost::ClaudeCode),
        2 => Some(HookHost::Codex),
        3 => Some(HookHost::Workbuddy),
        _ => Some(HookHost::Codebuddy),
    };
    let input = read_input(Ok(raw), flag);
    let json = serde_json::from_slice::<Value>(raw).ok();
    match (&input.input, &json) {
        (Ok(v), Some(j)) => assert_eq!(v, j),
        (Err(e), None) => assert!(e.starts_with("hook input is not JSON")),
        _ => panic!("read as JSON exactly when it is JSON"),
    }
    let field = |name: &str| json.as_ref().and_then(|j| j.get(name));
    let prompt = field("prompt").and_then(Value::as_str).unwrap_or("");
    assert!(prompt.starts_with(&input.query));
    assert_eq!(
        input.query.chars().count(),
        prompt.chars().count().min(MAX_QUERY_CHARS)
    );
    assert_eq!(
        input.cwd.as_deref().and_then(|p| p.to_str()),
        field("cwd").and_then(Value::as_str)
    );
    let shown = if field("client").and_then(Value::as_str) == Some("WorkBuddy") {
        HookHost::Workbuddy
    } else if field("client").is_some() || field("generation_id").is_some() {
        HookHost::Codebuddy
    } else if field("turn_id").is_some() {
        HookHost::Codex
    } else {
        HookHost::ClaudeCode
    };
    assert_eq!(input.host, flag.unwrap_or(shown));
    check_reply(input.host, "");
    check_reply(input.host, &injected_context(&input.query));
    check_reply(input.host, &String::from_utf8_lossy(raw));
    let _ = read_input(Err(std::io::Error::other("closed")), flag);
});
