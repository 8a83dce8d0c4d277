//! The model and embeddings clients against a fake OpenAI-compatible server on 127.0.0.1: every
//! fault (down, slow, HTTP 500, garbage, wrong shapes) ends in a fail-open result and an error
//! that says what failed, within the deadline. Also the rewrite and gate prompts' golden files.
//! `UPDATE_GOLDEN=1 cargo test` rewrites the golden files after a deliberate change.

use serde_json::{Value, json};
use skillsearch_core::Embedder;
use skillsearch_core::config::{EmbeddingSettings, ModelSettings, Secret};
use skillsearch_core::remote::llm::{self, ChatClient, GateCandidate, GateOptions, RemoteEmbedder};
use std::io::Write;
use std::net::TcpListener;
use std::time::{Duration, Instant};

use skillsearch_testkit::{
    Fake, Reply, Req, Responder, chat_reply as chat, dead_openai_base, golden, vectors,
};

const KEY: &str = "sk-test-0123456789";

fn client(base: &str) -> ChatClient {
    ChatClient::from_config(&ModelSettings {
        model: "test-model".into(),
        base_url: base.into(),
        api_key: Secret::new(KEY),
        timeout: Duration::from_secs(30),
    })
    .unwrap()
}

fn embedder(base: &str, dim: Option<usize>, batch: usize, timeout: Duration) -> RemoteEmbedder {
    RemoteEmbedder::new(&EmbeddingSettings {
        base_url: base.into(),
        model: "emb".into(),
        api_key: Secret::new(KEY),
        dim,
        batch,
        timeout,
    })
    .unwrap()
}

fn cands() -> Vec<GateCandidate> {
    ["pdf/extract-tables", "git/rebase", "k8s/deploy"]
        .iter()
        .map(|id| GateCandidate {
            qualified_id: (*id).into(),
            description: format!("About {id}"),
            body: format!("Steps for {id}."),
        })
        .collect()
}

fn gate_opts(deadline: Duration) -> GateOptions {
    GateOptions {
        max_select: 2,
        deadline,
        log_path: None,
    }
}

/// The call took at least `min` and returned within `deadline` plus a small margin.
fn within(start: Instant, deadline: Duration) -> Duration {
    let took = start.elapsed();
    assert!(
        took < deadline + Duration::from_millis(400),
        "took {took:?}, deadline {deadline:?}"
    );
    took
}

// ---------------------------------------------------------------- embeddings

#[test]
fn embeddings_are_ordered_by_index_normalised_batched_and_authorised() {
    let fake = Fake::openai(|r| {
        vectors(r, |i| {
            json!([3.0 * (i as f64 + 1.0), 4.0 * (i as f64 + 1.0), 0.0])
        })
    });
    let e = embedder(&fake.base, None, 2, Duration::from_secs(5));
    assert_eq!((e.id(), e.dim()), ("remote:emb", 0));
    let texts = ["a", "b", "c", "d", "e"];
    let v = e.embed(&texts).unwrap();
    assert_eq!(v.len(), 5);
    for x in &v {
        assert_eq!(x, &[0.6, 0.8, 0.0]);
    }
    assert_eq!(e.dim(), 3);
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 3, "5 texts in batches of 2");
    assert_eq!(reqs[0].path, "/v1/embeddings");
    assert_eq!(reqs[0].body, json!({"model": "emb", "input": ["a", "b"]}));
    assert_eq!(reqs[2].body["input"], json!(["e"]));
    assert_eq!(
        reqs[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert!(!format!("{e:?}").contains(KEY), "{e:?}");
    // Order: the vector for input i is the one the server sent with index i.
    let fake = Fake::openai(|r| {
        vectors(r, |i| {
            if i == 0 {
                json!([1.0, 0.0])
            } else {
                json!([0.0, 2.0])
            }
        })
    });
    let v = embedder(&fake.base, Some(2), 64, Duration::from_secs(5))
        .embed(&["x", "y"])
        .unwrap();
    assert_eq!(v, [vec![1.0, 0.0], vec![0.0, 1.0]]);
}

#[test]
fn embeddings_endpoint_down_is_a_connection_error() {
    let base = dead_openai_base();
    let start = Instant::now();
    let err = embedder(&base, None, 64, Duration::from_secs(2))
        .embed(&["x"])
        .unwrap_err()
        .to_string();
    within(start, Duration::from_secs(2));
    assert!(err.contains(&format!("{base}/embeddings")), "{err}");
    assert!(
        err.to_lowercase().contains("refused") || err.contains("connect"),
        "{err}"
    );
}

#[test]
fn embeddings_slow_past_the_deadline_return_at_the_deadline() {
    let fake = Fake::openai(|r| {
        Reply::Late(
            Duration::from_secs(5),
            Box::new(vectors(r, |_| json!([1.0]))),
        )
    });
    let deadline = Duration::from_millis(600);
    let start = Instant::now();
    let err = embedder(&fake.base, None, 64, deadline)
        .embed(&["x"])
        .unwrap_err()
        .to_string();
    let took = within(start, deadline);
    assert!(took >= deadline - Duration::from_millis(50), "{took:?}");
    assert!(err.contains("no complete reply within 600 ms"), "{err}");
    // Headers arrive, then the body stalls: the deadline still holds.
    let fake = Fake::openai(|_| Reply::Stall(Duration::from_secs(5)));
    let start = Instant::now();
    let err = embedder(&fake.base, None, 64, deadline)
        .embed(&["x"])
        .unwrap_err()
        .to_string();
    within(start, deadline);
    assert!(err.contains("no complete reply within 600 ms"), "{err}");
}

#[test]
fn embeddings_with_wrong_shapes_or_values_are_named_errors() {
    let case = |handler: fn(&Req) -> Reply, dim: Option<usize>, texts: &[&str]| -> String {
        let fake = Fake::openai(handler);
        embedder(&fake.base, dim, 64, Duration::from_secs(5))
            .embed(texts)
            .unwrap_err()
            .to_string()
    };
    // Configured dimension 4, the server sends 3.
    let e = case(|r| vectors(r, |_| json!([1.0, 2.0, 3.0])), Some(4), &["x"]);
    assert!(e.contains("dimension 3, expected 4"), "{e}");
    // Learned from the first vector, then a different one.
    let e = case(
        |r| {
            vectors(r, |i| {
                if i == 0 {
                    json!([1.0, 2.0])
                } else {
                    json!([1.0, 2.0, 3.0])
                }
            })
        },
        None,
        &["x", "y"],
    );
    assert!(
        e.contains("dimension 2, expected 3") || e.contains("dimension 3, expected 2"),
        "{e}"
    );
    // NaN: as a JSON string, as null, and as a bare token (which is not JSON at all).
    let e = case(|r| vectors(r, |_| json!([1.0, "NaN"])), None, &["x"]);
    assert!(e.contains("value 1 is \"NaN\", not a finite number"), "{e}");
    let e = case(|r| vectors(r, |_| json!([null, 1.0])), None, &["x"]);
    assert!(e.contains("value 0 is null, not a finite number"), "{e}");
    let e = case(
        |_| {
            Reply::Body(
                200,
                r#"{"data": [{"index": 0, "embedding": [NaN, 1.0]}]}"#.into(),
            )
        },
        None,
        &["x"],
    );
    assert!(e.contains("bad reply: not JSON"), "{e}");
    // Wrong count.
    let e = case(
        |_| {
            Reply::Body(
                200,
                json!({"data": [{"index": 0, "embedding": [1.0]}]}).to_string(),
            )
        },
        None,
        &["x", "y"],
    );
    assert!(e.contains("1 embeddings for 2 texts"), "{e}");
    // Not JSON; no `data`; an HTTP error; a zero vector; a repeated index.
    let e = case(
        |_| Reply::Body(200, "<html>gateway</html>".into()),
        None,
        &["x"],
    );
    assert!(
        e.contains("not JSON") && e.contains("<html>gateway</html>"),
        "{e}"
    );
    let e = case(|_| Reply::Body(200, "{}".into()), None, &["x"]);
    assert!(e.contains("no `data` list"), "{e}");
    let e = case(|_| Reply::Body(503, "overloaded".into()), None, &["x"]);
    assert!(e.contains("HTTP 503: overloaded"), "{e}");
    let e = case(|r| vectors(r, |_| json!([0.0, 0.0])), None, &["x"]);
    assert!(e.contains("zero vector"), "{e}");
    let e = case(
        |_| {
            Reply::Body(200, json!({"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}]}).to_string())
        },
        None,
        &["x", "y"],
    );
    assert!(e.contains("index 0 appears twice"), "{e}");
}

#[test]
fn https_works_offline_and_a_non_tls_server_is_a_handshake_error() {
    // The rustls provider and the bundled roots need nothing from the network or the system.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\n\r\nnot tls at all");
        }
    });
    let start = Instant::now();
    let err = embedder(
        &format!("https://{addr}/v1"),
        None,
        64,
        Duration::from_secs(3),
    )
    .embed(&["x"])
    .unwrap_err()
    .to_string();
    within(start, Duration::from_secs(3));
    assert!(
        err.starts_with(&format!("https://{addr}/v1/embeddings: ")),
        "{err}"
    );
    assert!(!err.contains("no complete reply"), "{err}");
}

#[test]
fn an_empty_text_list_makes_no_request() {
    let fake = Fake::openai(|r| vectors(r, |_| json!([1.0])));
    let v = embedder(&fake.base, None, 64, Duration::from_secs(5))
        .embed(&[])
        .unwrap();
    assert!(v.is_empty());
    assert!(fake.requests().is_empty());
}

// ---------------------------------------------------------------- rewrite

#[test]
fn rewrite_uses_the_models_query_and_ignores_need_retrieval() {
    let fake = Fake::openai(|_| {
        chat(
            "Thinking about it.\n```json\n{\"rewritten_query\": \" pdf table extraction \", \"need_retrieval\": false}\n```",
        )
    });
    let c = client(&fake.base);
    let out = llm::rewrite(
        &c,
        "  please help me get the tables out of /tmp/x.pdf  ",
        Duration::from_secs(5),
    );
    assert_eq!(out.query, "pdf table extraction");
    assert_eq!(out.rewritten.as_deref(), Some("pdf table extraction"));
    assert_eq!(out.error, None);
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].path, "/v1/chat/completions");
    assert_eq!(
        reqs[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    let body = &reqs[0].body;
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["temperature"], json!(0.3f32));
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": llm::rewrite_prompt("please help me get the tables out of /tmp/x.pdf")}])
    );
}

#[test]
fn rewrite_cuts_long_queries_and_skips_empty_ones() {
    let fake = Fake::openai(|_| chat(r#"{"rewritten_query": null}"#));
    let c = client(&fake.base);
    let out = llm::rewrite(&c, " \n\t ", Duration::from_secs(5));
    assert!(!out.called && out.error.is_none() && out.query.is_empty());
    assert!(fake.requests().is_empty(), "an empty query makes no call");
    let long = "é".repeat(2500);
    let out = llm::rewrite(&c, &long, Duration::from_secs(5));
    assert_eq!(
        (
            out.query.as_str(),
            out.rewritten.as_deref(),
            out.error.as_deref()
        ),
        (long.as_str(), None, None)
    );
    let sent = fake.requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(sent, llm::rewrite_prompt(&"é".repeat(2000)));
}

#[test]
fn rewrite_fails_open_with_the_reason() {
    let q = "find the flaky test";
    let cases: Vec<(Responder, &str)> = vec![
        (
            |_| Reply::Body(200, "garbage".into()),
            "bad reply: not JSON",
        ),
        (|_| chat("I cannot help with that."), "holds no JSON object"),
        (|_| chat("   "), "empty reply"),
        (
            |_| Reply::Body(500, "internal error".into()),
            "HTTP 500: internal error",
        ),
        (
            |_| {
                Reply::Body(200, json!({"choices": [{"message": {"content": "{\"rewritten_query\": \"x\"}"}, "finish_reason": "error"}]}).to_string())
            },
            "finish_reason `error`",
        ),
        (
            |_| {
                Reply::Body(
                    200,
                    json!({"error": {"message": "model not found"}}).to_string(),
                )
            },
            "provider error: model not found",
        ),
        (
            |_| Reply::Body(200, json!({"choices": []}).to_string()),
            "no `choices[0]`",
        ),
    ];
    for (handler, want) in cases {
        let fake = Fake::openai(handler);
        let out = llm::rewrite(&client(&fake.base), q, Duration::from_secs(5));
        assert_eq!(
            (out.query.as_str(), out.rewritten.as_deref()),
            (q, None),
            "{want}"
        );
        let err = out.error.unwrap_or_default();
        assert!(
            err.starts_with("rewrite failed") || err.starts_with("rewrite reply"),
            "{err}"
        );
        assert!(err.contains(want), "{err} lacks {want}");
    }
    // Down, and slow past the deadline.
    let out = llm::rewrite(&client(&dead_openai_base()), q, Duration::from_secs(5));
    assert_eq!(out.query, q);
    assert!(out.error.unwrap().contains("/v1/chat/completions"));
    let fake = Fake::openai(|_| {
        Reply::Late(
            Duration::from_secs(5),
            Box::new(chat(r#"{"rewritten_query": "late"}"#)),
        )
    });
    let deadline = Duration::from_millis(500);
    let start = Instant::now();
    let out = llm::rewrite(&client(&fake.base), q, deadline);
    within(start, deadline);
    assert_eq!(out.query, q);
    assert!(
        out.error
            .unwrap()
            .contains("no complete reply within 500 ms")
    );
    assert!(out.elapsed_ms >= 450, "{}", out.elapsed_ms);
}

#[test]
fn the_client_ceiling_caps_a_longer_step_deadline() {
    let fake = Fake::openai(|_| Reply::Late(Duration::from_secs(5), Box::new(chat("{}"))));
    let c = ChatClient::from_config(&ModelSettings {
        model: "m".into(),
        base_url: fake.base.clone(),
        api_key: Secret::default(),
        timeout: Duration::from_millis(300),
    })
    .unwrap();
    let start = Instant::now();
    let out = llm::rewrite(&c, "q", Duration::from_secs(5));
    within(start, Duration::from_millis(300));
    assert!(out.error.unwrap().contains("within 300 ms"));
    assert_eq!(
        fake.requests()[0].header("authorization"),
        None,
        "no key, no header"
    );
}

#[test]
fn the_api_key_never_shows_in_debug_output() {
    let c = client("http://127.0.0.1:9/v1");
    let shown = format!("{c:?} {c:#?}");
    assert!(!shown.contains(KEY), "{shown}");
    assert!(shown.contains("<redacted>"), "{shown}");
    let s = ModelSettings {
        model: "m".into(),
        base_url: "u".into(),
        api_key: Secret::new(KEY),
        timeout: Duration::from_secs(1),
    };
    assert!(!format!("{s:?}").contains(KEY));
    assert!(!serde_json::to_string(&s).unwrap().contains(KEY));
    assert!(
        ChatClient::from_config(&ModelSettings {
            model: String::new(),
            ..s.clone()
        })
        .unwrap_err()
        .to_string()
        .contains("`model` is empty")
    );
    assert!(
        ChatClient::from_config(&ModelSettings {
            base_url: " ".into(),
            ..s
        })
        .unwrap_err()
        .to_string()
        .contains("`model_base_url` is empty")
    );
}

// ---------------------------------------------------------------- gate

#[test]
fn gate_selects_in_the_models_order_from_a_fenced_reply_with_a_preamble_and_logs_it() {
    let fake = Fake::openai(|_| {
        chat(
            "Let me plan. The task needs {tables}.\n\n```json\n{\"plan\": \"Extract the tables.\", \"skills\": [\"k8s/deploy\", \"pdf/extract-tables\"]}\n```",
        )
    });
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("sub/gate.jsonl");
    let opts = GateOptions {
        log_path: Some(log.clone()),
        ..gate_opts(Duration::from_secs(5))
    };
    let tools = vec!["write".to_owned(), "bash".into(), "bash".into()];
    let out = llm::gate(
        &client(&fake.base),
        "get the tables out of x.pdf",
        &cands(),
        Some(&tools),
        &opts,
    );
    assert_eq!(out.error, None);
    assert!(!out.fell_back);
    assert_eq!(out.selected, [2, 0]);
    assert_eq!(out.selected_ids, ["k8s/deploy", "pdf/extract-tables"]);
    assert_eq!(out.plan.as_deref(), Some("Extract the tables."));
    let req = &fake.requests()[0];
    assert_eq!(req.body["temperature"], json!(0.0));
    let prompt = req.body["messages"][0]["content"].as_str().unwrap();
    assert!(
        prompt.contains("The agent's ONLY available tools are: bash, write.\n"),
        "{prompt}"
    );
    let lines = std::fs::read_to_string(&log).unwrap();
    assert_eq!(lines.lines().count(), 1);
    let rec: Value = serde_json::from_str(lines.trim()).unwrap();
    assert!(rec["ts"].as_f64().unwrap() > 1.7e9);
    assert_eq!(rec["task"], "get the tables out of x.pdf");
    assert_eq!(
        rec["candidates"],
        json!(["pdf/extract-tables", "git/rebase", "k8s/deploy"])
    );
    assert_eq!(rec["selected"], json!(["k8s/deploy", "pdf/extract-tables"]));
    assert_eq!(rec["rejected"], json!(["git/rebase"]));
    assert_eq!(rec["plan"], "Extract the tables.");
    assert!(
        rec["raw_response"]
            .as_str()
            .unwrap()
            .starts_with("Let me plan.")
    );
}

#[test]
fn gate_ignores_unknown_ids_caps_and_accepts_an_empty_choice() {
    let fake =
        Fake::openai(|_| chat(r#"{"plan": "p", "skills": ["nope/x", "git/rebase", "other"]}"#));
    let out = llm::gate(
        &client(&fake.base),
        "t",
        &cands(),
        None,
        &gate_opts(Duration::from_secs(5)),
    );
    assert_eq!(
        (out.selected_ids.clone(), out.error.clone()),
        (vec!["git/rebase".to_owned()], None)
    );
    assert_eq!(out.unknown_ids, ["nope/x", "other"]);
    let fake = Fake::openai(|_| {
        chat(r#"{"plan": "p", "skills": ["k8s/deploy", "git/rebase", "pdf/extract-tables"]}"#)
    });
    let opts = GateOptions {
        max_select: 1,
        ..gate_opts(Duration::from_secs(5))
    };
    let out = llm::gate(&client(&fake.base), "t", &cands(), None, &opts);
    assert_eq!(out.selected_ids, ["k8s/deploy"]);
    let fake = Fake::openai(|_| chat(r#"{"plan": "Nothing fits.", "skills": []}"#));
    let out = llm::gate(
        &client(&fake.base),
        "t",
        &cands(),
        None,
        &gate_opts(Duration::from_secs(5)),
    );
    assert!(out.selected.is_empty() && !out.fell_back && out.error.is_none());
    // No candidates: no call.
    let out = llm::gate(
        &client(&fake.base),
        "t",
        &[],
        None,
        &gate_opts(Duration::from_secs(5)),
    );
    assert!(!out.called && out.selected.is_empty());
    assert_eq!(fake.requests().len(), 1);
}

#[test]
fn gate_fails_open_to_the_first_candidates_with_the_reason() {
    let cases: Vec<(Responder, &str)> = vec![
        (|_| Reply::Body(200, "garbage".into()), "not JSON"),
        (|_| chat("no idea"), "holds no JSON object"),
        (|_| chat(""), "empty reply"),
        (|_| Reply::Body(500, "boom".into()), "HTTP 500: boom"),
        (
            |_| {
                Reply::Body(200, json!({"choices": [{"message": {"content": "{\"skills\": []}"}, "finish_reason": "error"}]}).to_string())
            },
            "finish_reason `error`",
        ),
        (|_| chat(r#"{"plan": "p"}"#), "no `skills` key"),
        (
            |_| chat(r#"{"plan": "p", "skills": "git/rebase"}"#),
            "`skills` is not a list",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("gate.jsonl");
    for (handler, want) in cases {
        let fake = Fake::openai(handler);
        let opts = GateOptions {
            log_path: Some(log.clone()),
            ..gate_opts(Duration::from_secs(5))
        };
        let out = llm::gate(&client(&fake.base), "t", &cands(), None, &opts);
        assert!(out.fell_back, "{want}");
        assert_eq!(
            out.selected_ids,
            ["pdf/extract-tables", "git/rebase"],
            "{want}"
        );
        let err = out.error.unwrap_or_default();
        assert!(err.contains(want), "{err} lacks {want}");
    }
    assert!(!log.exists(), "a fallback writes no decision line");
    // Down, and slow past the deadline.
    let out = llm::gate(
        &client(&dead_openai_base()),
        "t",
        &cands(),
        None,
        &gate_opts(Duration::from_secs(5)),
    );
    assert!(out.fell_back && out.error.unwrap().contains("chat/completions"));
    let fake =
        Fake::openai(|_| Reply::Late(Duration::from_secs(5), Box::new(chat(r#"{"skills": []}"#))));
    let deadline = Duration::from_millis(700);
    let start = Instant::now();
    let out = llm::gate(
        &client(&fake.base),
        "t",
        &cands(),
        None,
        &gate_opts(deadline),
    );
    within(start, deadline);
    assert_eq!(out.selected, [0, 1]);
    assert!(
        out.error
            .unwrap()
            .contains("no complete reply within 700 ms")
    );
}

#[test]
fn a_gate_log_that_cannot_be_written_is_reported_and_the_decision_stands() {
    let fake = Fake::openai(|_| chat(r#"{"plan": "p", "skills": ["git/rebase"]}"#));
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, "").unwrap();
    let opts = GateOptions {
        log_path: Some(blocker.join("gate.jsonl")),
        ..gate_opts(Duration::from_secs(5))
    };
    let out = llm::gate(&client(&fake.base), "t", &cands(), None, &opts);
    assert_eq!(out.selected_ids, ["git/rebase"]);
    assert!(out.error.is_none());
    assert!(out.log_error.unwrap().contains("gate.jsonl"));
}

// ---------------------------------------------------------------- golden prompts

#[test]
fn prompts_match_their_golden_files() {
    // `$&` and friends are inserted literally.
    golden(
        "rewrite_prompt.txt",
        &llm::rewrite_prompt("QUERY $& $' $` {x}"),
    );
    let mut c = cands();
    c[0].description = format!("Line one\nline two {}", "d".repeat(300));
    c[1].description = String::new();
    c[1].body = " \n ".into();
    c[2].body = format!("# Title\n\n  spaced   out\n{}", "b".repeat(400));
    let tools = vec!["read".to_owned(), "bash".into(), "read".into()];
    golden(
        "gate_prompt.txt",
        &llm::gate_prompt("Get the tables out of report.pdf", &c, Some(&tools), 2),
    );
    golden(
        "gate_prompt.no_tools.txt",
        &llm::gate_prompt("Rebase my branch", &cands()[..1], None, 3),
    );
}

#[test]
fn a_model_endpoint_that_keeps_failing_is_not_called_for_a_while() {
    let fake = Fake::openai(|_| Reply::Body(503, r#"{"error": "overloaded"}"#.into()));
    let c = client(&fake.base);
    for _ in 0..3 {
        let e = c.chat("hi", 0.0, Duration::from_secs(5)).unwrap_err();
        assert!(e.to_string().contains("HTTP 503"), "{e}");
    }
    // Clones share the breaker: the rewrite and the gate see the same endpoint.
    let clone = c.clone();
    let e = clone.chat("hi", 0.0, Duration::from_secs(5)).unwrap_err();
    assert!(
        e.to_string()
            .contains("not called: its last 3 calls failed (the last: "),
        "{e}"
    );
    assert_eq!(fake.requests().len(), 3);
    // The rewrite falls back to the query as written, and says why.
    let out = llm::rewrite(&c, "extract pdf tables", Duration::from_secs(5));
    assert_eq!(fake.requests().len(), 3);
    assert!(
        out.error
            .as_deref()
            .is_some_and(|e| e.contains("not called")),
        "{:?}",
        out.error
    );
}
