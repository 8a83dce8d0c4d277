//! Hybrid retrieval with the remote embedder against a fake OpenAI-compatible `/v1/embeddings`
//! server on 127.0.0.1: deterministic vectors (hashed bag of words) make the semantic retriever
//! run; every fault of the query's embedding (endpoint down, slow past the query deadline, wrong
//! dimension, NaN, garbage) still answers lexically, and the notes say what failed.

use serde_json::json;
use skillsearch_core::config::{EmbeddingSettings, Secret};
use skillsearch_core::index::{IndexConfig, Refresh, SkillIndex};
use skillsearch_core::remote::llm::RemoteEmbedder;
use skillsearch_core::retrieve::embed::Embedder;
use skillsearch_core::retrieve::semantic::{Semantic, SemanticSlot};
use skillsearch_core::retrieve::{Retriever, SearchResult};
use skillsearch_core::{EligibilityEnv, Roots, SearchOptions};
use skillsearch_testkit::{
    BOW_DIM, Fake, Reply, Responder, bow_reply, dead_openai_base, vectors, write_titled_skill,
};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

const QUERY: &str = "transcribe a voice recording into a written transcript";

struct Corpus {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    idx: SkillIndex,
    /// The process's semantic retriever, as an engine holds it.
    slot: SemanticSlot,
}

fn corpus() -> Corpus {
    let tmp = tempfile::tempdir().unwrap();
    let (home, root) = (tmp.path().join("home"), tmp.path().join("skills"));
    write_titled_skill(
        &root,
        "transcribe",
        "transcriber",
        "Transcribe a voice recording into a written transcript",
    );
    write_titled_skill(
        &root,
        "invoices",
        "invoice-maker",
        "Create an invoice or bill for a client",
    );
    write_titled_skill(
        &root,
        "calendar",
        "meeting-planner",
        "Schedule a meeting on the calendar",
    );
    write_titled_skill(
        &root,
        "sql",
        "sql-helper",
        "Write a SQL query for a database table",
    );
    let (idx, _) = SkillIndex::open(
        &Roots::explicit([&root]),
        &IndexConfig::new(&home),
        Refresh::Always,
        &|_| {},
    )
    .unwrap();
    Corpus {
        _tmp: tmp,
        home,
        idx,
        slot: SemanticSlot::default(),
    }
}

fn remote(base: &str, dim: Option<usize>, timeout: Duration) -> RemoteEmbedder {
    RemoteEmbedder::new(&EmbeddingSettings {
        base_url: base.into(),
        model: "emb".into(),
        api_key: Secret::new(""),
        dim,
        batch: 2,
        timeout,
    })
    .unwrap()
}

fn search(c: &Corpus, q: &str, r: Retriever) -> SearchResult {
    let opts = SearchOptions {
        top_k: 3,
        retriever: r,
        ..SearchOptions::default()
    };
    c.idx
        .search_with(q, &opts, &EligibilityEnv::allow_all(), Some(&c.slot))
        .unwrap()
}

/// Embeds the corpus through a well-behaved fake endpoint (the vectors land in the store under
/// `home`, where any later embedder of the same id and dimension finds them).
fn embed_corpus(c: &Corpus) {
    let good = Fake::openai(bow_reply);
    let emb = remote(&good.base, None, Duration::from_secs(5));
    assert_eq!(emb.probe().unwrap(), BOW_DIM);
    let sem = Semantic::new(&c.home, Arc::new(emb)).unwrap();
    let n = sem
        .embed_pending(&c.idx, 16, &AtomicBool::new(false), &|_, _| {})
        .unwrap();
    assert_eq!(n, 4);
}

#[test]
fn remote_embed_happy_path_runs_hybrid_retrieval() {
    let c = corpus();
    let fake = Fake::openai(bow_reply);
    let emb = remote(&fake.base, None, Duration::from_secs(5));
    assert_eq!(emb.probe().unwrap(), BOW_DIM);
    let sem = Arc::new(Semantic::new(&c.home, Arc::new(emb)).unwrap());
    assert_eq!(sem.model(), "remote:emb");
    c.slot.attach(sem.clone());
    // Attached, nothing embedded yet: lexical, and the note gives the coverage.
    let r = search(&c, QUERY, Retriever::Hybrid);
    assert_eq!(r.retrievers, ["lexical"]);
    assert!(
        r.notes[0].contains("0 of 4 skills embedded"),
        "{:?}",
        r.notes
    );

    let n = sem
        .embed_pending(&c.idx, 2, &AtomicBool::new(false), &|_, _| {})
        .unwrap();
    assert_eq!(n, 4);
    let r = search(&c, QUERY, Retriever::Hybrid);
    assert_eq!(r.retrievers, ["lexical", "semantic"], "{:?}", r.notes);
    assert!(r.notes.is_empty(), "{:?}", r.notes);
    assert_eq!(r.hits[0].id, "transcribe");
    let r = search(&c, QUERY, Retriever::Semantic);
    assert_eq!(r.retrievers, ["semantic"]);
    assert_eq!(r.hits[0].id, "transcribe");
    // The query went to the endpoint once (the second search used the remembered vector):
    // probe, 2 batches of 2 skills, the query.
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 4, "{reqs:?}");
    assert!(reqs.iter().all(|r| r.path == "/v1/embeddings"));
    assert_eq!(reqs[3].body, json!({"model": "emb", "input": [QUERY]}));
}

/// Searches with an embedder of the corpus's id and dimension whose endpoint answers `reply`
/// (or `base` when given), with query deadline `query_timeout`; returns the result, the notes
/// joined, and how long the search took.
fn faulty_search(
    base: &str,
    query_timeout: Duration,
    retriever: Retriever,
) -> (SearchResult, String, Duration) {
    let c = corpus();
    embed_corpus(&c);
    let emb =
        remote(base, Some(BOW_DIM), Duration::from_secs(10)).with_query_timeout(query_timeout);
    let sem = Semantic::new(&c.home, Arc::new(emb)).unwrap();
    assert!(sem.coverage(&c.idx).unwrap().complete());
    c.slot.attach(Arc::new(sem));
    let started = Instant::now();
    let r = search(&c, QUERY, retriever);
    let took = started.elapsed();
    // The search answered, lexically.
    assert_eq!(r.retrievers, ["lexical"], "{:?}", r.notes);
    assert_eq!(r.hits[0].id, "transcribe", "{:?}", r.hits);
    let notes = r.notes.join(" | ");
    assert!(
        notes.contains("semantic retrieval failed: embedding the query with `remote:emb` failed:"),
        "{notes}"
    );
    assert!(notes.contains(&format!("{base}/embeddings")), "{notes}");
    (r, notes, took)
}

#[test]
fn remote_embed_query_endpoint_down_answers_lexically_and_says_so() {
    let base = dead_openai_base();
    for retriever in [Retriever::Hybrid, Retriever::Semantic] {
        let (_, notes, _) = faulty_search(&base, Duration::from_secs(5), retriever);
        let lower = notes.to_lowercase();
        assert!(
            lower.contains("refused") || lower.contains("connect"),
            "{notes}"
        );
    }
}

#[test]
fn remote_embed_query_slow_past_its_deadline_answers_lexically_at_the_deadline() {
    let fake = Fake::openai(|r| {
        Reply::Late(
            Duration::from_secs(5),
            Box::new(vectors(r, |_| json!(vec![1.0; BOW_DIM]))),
        )
    });
    let deadline = Duration::from_millis(400);
    // The embedder's own timeout is 10 s: the query deadline is the one that holds.
    let (_, notes, took) = faulty_search(&fake.base, deadline, Retriever::Hybrid);
    assert!(notes.contains("no complete reply within 400 ms"), "{notes}");
    assert!(took >= deadline - Duration::from_millis(50), "{took:?}");
    assert!(took < deadline + Duration::from_millis(1500), "{took:?}");
    // Headers, then a stalled body: the same.
    let fake = Fake::openai(|_| Reply::Stall(Duration::from_secs(5)));
    let (_, notes, took) = faulty_search(&fake.base, deadline, Retriever::Semantic);
    assert!(notes.contains("no complete reply within 400 ms"), "{notes}");
    assert!(took < deadline + Duration::from_millis(1500), "{took:?}");
}

#[test]
fn remote_embed_query_deadline_never_exceeds_the_embedding_timeout() {
    let fake = Fake::openai(|r| {
        Reply::Late(
            Duration::from_secs(5),
            Box::new(vectors(r, |_| json!([1.0]))),
        )
    });
    let e = remote(&fake.base, Some(1), Duration::from_millis(300))
        .with_query_timeout(Duration::from_secs(30));
    let started = Instant::now();
    let err = e.embed_query("x").unwrap_err().to_string();
    assert!(err.contains("no complete reply within 300 ms"), "{err}");
    assert!(started.elapsed() < Duration::from_millis(1500));
}

#[test]
fn remote_embed_query_bad_replies_answer_lexically_and_name_the_fault() {
    let cases: Vec<(Responder, String)> = vec![
        // Wrong dimension.
        (
            |r| vectors(r, |_| json!([0.1, 0.2, 0.3])),
            format!("dimension 3, expected {BOW_DIM}"),
        ),
        // NaN as a string, and as Python's json.dumps writes it (not JSON at all).
        (
            |r| vectors(r, |_| json!(["NaN", 0.5])),
            "value 0 is \"NaN\", not a finite number".into(),
        ),
        (
            |_| {
                Reply::Body(
                    200,
                    r#"{"data": [{"index": 0, "embedding": [NaN, 0.5]}]}"#.into(),
                )
            },
            "not JSON".into(),
        ),
        // Garbage.
        (
            |_| Reply::Body(200, "<html>502 Bad Gateway</html>".into()),
            "not JSON".into(),
        ),
        (
            |_| Reply::Body(200, r#"{"object": "list"}"#.into()),
            "no `data` list".into(),
        ),
        // An HTTP error.
        (
            |_| Reply::Body(500, r#"{"error": "overloaded"}"#.into()),
            "HTTP 500".into(),
        ),
    ];
    for (handler, expect) in cases {
        let fake = Fake::openai(handler);
        let (_, notes, _) = faulty_search(&fake.base, Duration::from_secs(5), Retriever::Hybrid);
        assert!(notes.contains(&expect), "expected {expect:?} in {notes}");
    }
}

#[test]
fn remote_embed_failed_query_is_not_remembered() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let c = corpus();
    embed_corpus(&c);
    // Fails the first query request, then answers.
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let fake = Fake::openai(move |r| {
        if seen.fetch_add(1, Ordering::SeqCst) == 0 {
            Reply::Body(503, "busy".into())
        } else {
            bow_reply(r)
        }
    });
    let emb = remote(&fake.base, Some(BOW_DIM), Duration::from_secs(5));
    assert_eq!(emb.dim(), BOW_DIM);
    c.slot
        .attach(Arc::new(Semantic::new(&c.home, Arc::new(emb)).unwrap()));
    let r = search(&c, QUERY, Retriever::Hybrid);
    assert_eq!(r.retrievers, ["lexical"]);
    assert!(r.notes[0].contains("HTTP 503"), "{:?}", r.notes);
    let r = search(&c, QUERY, Retriever::Hybrid);
    assert_eq!(r.retrievers, ["lexical", "semantic"], "{:?}", r.notes);
    assert!(r.notes.is_empty());
}

#[test]
fn remote_embed_off_reason_is_the_note_until_a_retriever_is_attached() {
    let c = corpus();
    c.slot.set_off(Some(
        "embeddings endpoint http://x/v1/embeddings failed: boom".into(),
    ));
    let r = search(&c, QUERY, Retriever::Hybrid);
    assert_eq!(r.retrievers, ["lexical"]);
    assert_eq!(
        r.notes,
        ["semantic retrieval is off: embeddings endpoint http://x/v1/embeddings failed: boom"]
    );
    embed_corpus(&c);
    let good = Fake::openai(bow_reply);
    let emb = remote(&good.base, Some(BOW_DIM), Duration::from_secs(5));
    c.slot
        .attach(Arc::new(Semantic::new(&c.home, Arc::new(emb)).unwrap()));
    assert_eq!(c.slot.off(), None);
    let r = search(&c, QUERY, Retriever::Hybrid);
    assert_eq!(r.retrievers, ["lexical", "semantic"]);
}

#[test]
fn remote_embed_an_endpoint_that_keeps_hanging_is_skipped_for_a_while() {
    let fake = Fake::openai(|r| {
        Reply::Late(
            Duration::from_secs(5),
            Box::new(vectors(r, |_| json!(vec![1.0; BOW_DIM]))),
        )
    });
    let c = corpus();
    embed_corpus(&c);
    let emb = remote(&fake.base, Some(BOW_DIM), Duration::from_secs(10))
        .with_query_timeout(Duration::from_millis(200));
    c.slot
        .attach(Arc::new(Semantic::new(&c.home, Arc::new(emb)).unwrap()));
    for _ in 0..3 {
        let r = search(&c, QUERY, Retriever::Hybrid);
        assert_eq!(r.retrievers, ["lexical"]);
        assert!(
            r.notes[0].contains("no complete reply within 200 ms"),
            "{:?}",
            r.notes
        );
    }
    // Three in a row: the next turn answers lexically at once, without asking, and says why.
    let asked = fake.requests().len();
    let t = Instant::now();
    let r = search(&c, QUERY, Retriever::Hybrid);
    assert!(
        t.elapsed() < Duration::from_millis(100),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(fake.requests().len(), asked);
    assert_eq!(r.retrievers, ["lexical"]);
    assert_eq!(r.hits[0].id, "transcribe");
    assert!(
        r.notes[0].contains("not called: its last 3 calls failed (the last: ")
            && r.notes[0].contains("no complete reply within 200 ms); trying again in 5 s"),
        "{:?}",
        r.notes
    );
}
