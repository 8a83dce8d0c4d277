//! The daemon's request bodies: a `serve --stdio` line (`stdio_request`) and the HTTP bodies
//! of `/v1/retrieve` (and `/v1/search`), `/v1/read`, `/v1/plan` and `/v1/warm`, read by axum's
//! `Json` extractor into the same types, then the checks that need no index (host sources,
//! tool lists); and the retrieve reply the daemon writes by hand.
//!
//! Properties: nothing panics; a stdio reply carries the request's `id` (null when the line is
//! not JSON) and exactly one of `result` / `error`; an unknown method is a 404, bad params or
//! a line that is not JSON a 400; a rejected HTTP body is a 4xx; both transports accept the
//! same params; accepted host sources keep their limits (at most 8, 20 hits each, unique
//! names of [A-Za-z0-9_-], weights 0-10, hit ids under the source's name); the hand-written
//! retrieve reply is byte for byte serde_json's.
#![no_main]

use axum::Json;
use axum::http::StatusCode;
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use skillsearch::fuzzing::serve::{
    ApiError, MAX_HOST_HITS, MAX_HOST_SOURCES, PlanReq, ReadReq, RetrieveReply, RetrieveReq,
    StdioRequest, Text, WarmReq, host_sources, stdio_reply, stdio_request,
};
use skillsearch_core::plan::parse_tools;
use std::path::Path;

fn check_sources(req: RetrieveReq) {
    match host_sources(req.sources) {
        Ok(sources) => {
            assert!(sources.len() <= MAX_HOST_SOURCES);
            let mut names = std::collections::HashSet::new();
            for s in &sources {
                assert!(names.insert(s.name.clone()), "unique names");
                assert!(!s.name.is_empty() && s.name.len() <= 40);
                assert!(
                    s.name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c))
                );
                assert!(s.name != "local" && s.name != "hub");
                assert!(s.weight.is_finite() && (0.0..=10.0).contains(&s.weight));
                assert!(s.hits.len() <= MAX_HOST_HITS);
                for h in &s.hits {
                    assert!(h.qualified_id.starts_with(&format!("{}/", s.name)));
                    assert!(h.body.is_some());
                }
            }
        }
        Err(ApiError(status, message)) => {
            assert_eq!(status, StatusCode::BAD_REQUEST);
            assert!(message.starts_with("sources"));
        }
    }
}

fn check_tools(req: &PlanReq) {
    if !req.tools.is_null() {
        let (tools, _) = parse_tools(&req.tools, Path::new("request.tools"));
        assert!(tools.iter().all(|t| !t.name.is_empty()));
    }
}

/// An HTTP body as the router reads it; a rejection is a client error.
fn http<T: serde::de::DeserializeOwned>(body: &[u8]) -> Option<T> {
    match Json::<T>::from_bytes(body) {
        Ok(Json(t)) => Some(t),
        Err(rejection) => {
            let ApiError(status, message) = ApiError::from(rejection);
            assert!(status.is_client_error(), "{status}");
            assert!(message.starts_with("bad request body"));
            None
        }
    }
}

fuzz_target!(|data: &[u8]| {
    // The stdio protocol reads a line as UTF-8, bad bytes replaced.
    let line = String::from_utf8_lossy(data);
    let parsed = serde_json::from_str::<Value>(&line).ok();
    let (id, request) = stdio_request(&line);
    assert_eq!(
        id,
        parsed
            .as_ref()
            .and_then(|v| v.get("id"))
            .cloned()
            .unwrap_or(Value::Null)
    );
    let method = parsed
        .as_ref()
        .and_then(|v| v.get("method"))
        .and_then(Value::as_str);
    let result = match request {
        Ok(r) => {
            let name = match r {
                StdioRequest::Retrieve(p) => {
                    check_sources(p);
                    "retrieve"
                }
                StdioRequest::Search(p) => {
                    check_sources(p);
                    "search"
                }
                StdioRequest::Read(_) => "read",
                StdioRequest::Plan(p) => {
                    check_tools(&p);
                    "plan"
                }
                StdioRequest::Warm(_) => "warm",
                StdioRequest::Tools => "tools",
                StdioRequest::Health => "health",
            };
            assert_eq!(method, Some(name));
            Ok(json!({}))
        }
        Err(e) => {
            let ApiError(status, message) = &e;
            match (&parsed, method) {
                (None, _) => {
                    assert_eq!(*status, StatusCode::BAD_REQUEST);
                    assert!(message.starts_with("request is not JSON"));
                }
                (Some(_), Some("retrieve" | "search" | "read" | "plan" | "warm")) => {
                    assert_eq!(*status, StatusCode::BAD_REQUEST);
                    assert!(message.starts_with("bad params"));
                }
                (Some(_), _) => assert_eq!(*status, StatusCode::NOT_FOUND),
            }
            Err(e)
        }
    };
    let is_error = result.is_err();
    let reply = stdio_reply(id.clone(), result);
    let bytes = serde_json::to_vec(&reply).unwrap();
    assert!(!bytes.contains(&b'\n'), "one line");
    let back: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(back["id"], id);
    assert_eq!(back.get("error").is_some(), is_error);
    assert_eq!(back.get("result").is_some(), !is_error);

    // The HTTP bodies, as axum's `Json` reads them.
    if let Some(p) = http::<RetrieveReq>(data) {
        check_sources(p);
    }
    if let Some(p) = http::<PlanReq>(data) {
        check_tools(&p);
    }
    let _ = http::<ReadReq>(data);
    let _ = http::<WarmReq>(data);
    // Both transports accept the same params.
    if let Some(params) = parsed.as_ref().and_then(|v| v.get("params")) {
        let body = serde_json::to_vec(params).unwrap();
        let same = |stdio: bool, http: bool| assert_eq!(stdio, http, "{params}");
        same(
            serde_json::from_value::<RetrieveReq>(params.clone()).is_ok(),
            Json::<RetrieveReq>::from_bytes(&body).is_ok(),
        );
        same(
            serde_json::from_value::<ReadReq>(params.clone()).is_ok(),
            Json::<ReadReq>::from_bytes(&body).is_ok(),
        );
        same(
            serde_json::from_value::<PlanReq>(params.clone()).is_ok(),
            Json::<PlanReq>::from_bytes(&body).is_ok(),
        );
        same(
            serde_json::from_value::<WarmReq>(params.clone()).is_ok(),
            Json::<WarmReq>::from_bytes(&body).is_ok(),
        );
    }

    // The retrieve reply, written by hand, is what serde_json writes for it.
    let mut rest = match parsed {
        Some(Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    rest.remove("mode");
    rest.remove("text");
    let reply = RetrieveReply::new("auto", Text::Own(line.into_owned()), Value::Object(rest));
    let fast = reply.to_json();
    assert_eq!(fast, serde_json::to_vec(&reply.into_value()).unwrap());
});
