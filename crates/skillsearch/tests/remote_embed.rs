//! End-to-end: the real binary with `SKILLSEARCH_EMBEDDING_BASE_URL` pointing at a fake
//! OpenAI-compatible embeddings server on 127.0.0.1. With deterministic vectors `search` runs
//! hybrid; with the endpoint down, slow or answering garbage it answers lexically and its notes
//! say what failed.

use serde_json::Value;
use skillsearch_testkit::{
    Env, Fake, Reply, Responder, bow_reply, dead_openai_base, vectors, write_titled_skill,
};
use std::process::Output;
use std::time::{Duration, Instant};

const QUERY: &str = "transcribe a voice recording into text";

/// A library of three skills: a transcriber, an invoice maker and a SQL helper.
fn corpus() -> Env {
    let e = Env::new();
    for (rel, name, desc) in [
        (
            "transcribe",
            "transcriber",
            "Transcribe a voice recording into a written transcript",
        ),
        (
            "invoices",
            "invoice-maker",
            "Create an invoice for a client",
        ),
        (
            "sql",
            "sql-helper",
            "Write a SQL query for a database table",
        ),
    ] {
        write_titled_skill(&e.root, rel, name, desc);
    }
    e
}

/// The binary run in an [`Env`] against an embeddings endpoint.
trait Run {
    /// Runs the binary with the embeddings endpoint `base` and extra `SKILLSEARCH_*` variables.
    fn run(&self, base: &str, vars: &[(&str, &str)], args: &[&str]) -> Output;
    /// `search --json QUERY` over the library; asserts it exits 0.
    fn search(&self, base: &str, vars: &[(&str, &str)]) -> Value;
}

impl Run for Env {
    fn run(&self, base: &str, vars: &[(&str, &str)], args: &[&str]) -> Output {
        let mut cmd = self.command(env!("CARGO_BIN_EXE_skillsearch"));
        cmd.args(args);
        cmd.env("SKILLSEARCH_EMBEDDING_BASE_URL", base)
            .env("SKILLSEARCH_EMBEDDING_MODEL", "emb")
            .envs(vars.iter().copied());
        cmd.output().unwrap()
    }

    fn search(&self, base: &str, vars: &[(&str, &str)]) -> Value {
        let root = self.root.to_str().unwrap();
        let out = self.run(base, vars, &["search", "--json", QUERY, "--skills", root]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "stdout: {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str(&stdout).unwrap()
    }
}

fn notes(v: &Value) -> String {
    v["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_owned())
        .collect::<Vec<_>>()
        .join(" | ")
}

/// Answered lexically, with the skill that shares the query's words first.
fn assert_lexical(v: &Value) {
    assert_eq!(v["retrievers"], serde_json::json!(["lexical"]), "{v}");
    assert_eq!(v["hits"][0]["id"], "transcribe", "{v}");
}

#[test]
fn remote_embed_search_runs_hybrid_and_models_show_names_the_endpoint() {
    let e = corpus();
    let fake = Fake::openai(bow_reply);
    let v = e.search(&fake.base, &[]);
    assert_eq!(
        v["retrievers"],
        serde_json::json!(["lexical", "semantic"]),
        "{v}"
    );
    assert_eq!(v["hits"][0]["id"], "transcribe", "{v}");
    assert_eq!(v["notes"], serde_json::json!([]), "{v}");
    let reqs = fake.requests();
    assert!(reqs.iter().all(|r| r.path == "/v1/embeddings"));
    // Probe, the three skills (one batch), the query.
    assert_eq!(reqs.len(), 3, "{reqs:?}");
    assert_eq!(reqs[2].inputs(), [QUERY]);
    assert!(e.home.join("vectors/remote_emb-64.bin").is_file());
    // A second process embeds no skill again: probe and query only.
    e.search(&fake.base, &[]);
    assert_eq!(fake.requests().len(), 5);

    let out = e.run(&fake.base, &[], &["models", "show"]);
    assert_eq!(out.status.code(), Some(0));
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.starts_with(&format!(
            "remote: {}/embeddings model `emb` (dimension learned",
            fake.base
        )),
        "{shown}"
    );
}

#[test]
fn remote_embed_search_with_the_endpoint_down_is_lexical_and_says_why() {
    let e = corpus();
    let base = dead_openai_base();
    let v = e.search(&base, &[]);
    assert_lexical(&v);
    let n = notes(&v);
    assert!(
        n.contains(&format!(
            "semantic retrieval is off: embeddings endpoint {base}/embeddings (model `emb`) failed: "
        )),
        "{n}"
    );
    let lower = n.to_lowercase();
    assert!(
        lower.contains("refused") || lower.contains("connect"),
        "{n}"
    );
}

#[test]
fn remote_embed_query_faults_answer_lexically_and_say_what_failed() {
    let e = corpus();
    // Fill the vector store first, so later runs (dimension configured: no probe) go straight
    // to embedding the query.
    let good = Fake::openai(bow_reply);
    e.search(&good.base, &[]);
    let dim = [("SKILLSEARCH_EMBEDDING_DIM", "64")];

    // Slow past the deadline: the search answers after about embedding_timeout_s.
    let slow = Fake::openai(|r| Reply::Late(Duration::from_secs(10), Box::new(bow_reply(r))));
    let started = Instant::now();
    let v = e.search(
        &slow.base,
        &[dim[0], ("SKILLSEARCH_EMBEDDING_TIMEOUT_S", "0.5")],
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_lexical(&v);
    let n = notes(&v);
    assert!(
        n.contains("semantic retrieval failed: embedding the query with `remote:emb` failed: "),
        "{n}"
    );
    assert!(
        n.contains(&format!(
            "{}/embeddings: no complete reply within 500 ms",
            slow.base
        )),
        "{n}"
    );

    // Garbage, NaN, a wrong dimension.
    let cases: [(Responder, &str); 3] = [
        (|_| Reply::Body(200, "upstream error".into()), "not JSON"),
        (
            |r| vectors(r, |_| serde_json::json!(["NaN", 1.0])),
            "not a finite number",
        ),
        (
            |r| vectors(r, |_| serde_json::json!([1.0, 2.0])),
            "dimension 2, expected 64",
        ),
    ];
    for (handler, expect) in cases {
        let bad = Fake::openai(handler);
        let v = e.search(&bad.base, &dim);
        assert_lexical(&v);
        let n = notes(&v);
        assert!(n.contains(&format!("{}/embeddings", bad.base)), "{n}");
        assert!(n.contains(expect), "expected {expect:?} in {n}");
    }
}
