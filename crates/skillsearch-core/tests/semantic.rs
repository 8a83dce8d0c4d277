//! The semantic retriever and hybrid fusion against real indexes, with a small deterministic
//! embedder (concept buckets: words of one meaning share a dimension), and against the real
//! all-MiniLM-L6-v2 when `MINILM_TEST_MODEL_DIR` names it.

use skillsearch_core::index::{IndexConfig, Refresh, SkillIndex};
use skillsearch_core::retrieve::Retriever;
use skillsearch_core::retrieve::embed::{Embedder, LocalEmbedder};
use skillsearch_core::retrieve::semantic::{Semantic, SemanticSlot};
use skillsearch_core::{EligibilityEnv, Roots, SearchOptions};
use skillsearch_testkit::{write_file, write_titled_skill};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Maps words to concepts, so "voice" and "speech" land on one axis while sharing no letters.
struct ConceptEmbedder {
    calls: AtomicUsize,
    texts: AtomicUsize,
    /// Words of the longest text it was given.
    longest: AtomicUsize,
}

const CONCEPTS: &[&[&str]] = &[
    &[
        "voice",
        "speech",
        "audio",
        "recording",
        "spoken",
        "transcribe",
        "dictation",
    ],
    &["text", "words", "written", "transcript"],
    &["invoice", "bill", "receipt", "payment"],
    &["calendar", "meeting", "schedule", "appointment"],
    &["database", "sql", "query", "table"],
];

impl ConceptEmbedder {
    fn new() -> Self {
        ConceptEmbedder {
            calls: AtomicUsize::new(0),
            texts: AtomicUsize::new(0),
            longest: AtomicUsize::new(0),
        }
    }
}

impl Embedder for ConceptEmbedder {
    fn id(&self) -> &str {
        "concepts"
    }
    fn dim(&self) -> usize {
        CONCEPTS.len() + 1
    }
    fn embed(&self, texts: &[&str]) -> skillsearch_core::Result<Vec<Vec<f32>>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.texts.fetch_add(texts.len(), Ordering::SeqCst);
        for t in texts {
            self.longest
                .fetch_max(t.split_whitespace().count(), Ordering::SeqCst);
        }
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0f32; self.dim()];
                v[CONCEPTS.len()] = 0.05;
                for w in t.to_lowercase().split(|c: char| !c.is_alphanumeric()) {
                    for (i, words) in CONCEPTS.iter().enumerate() {
                        if words.contains(&w) {
                            v[i] += 1.0;
                        }
                    }
                }
                let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                v.iter().map(|x| x / n).collect()
            })
            .collect())
    }
}

fn corpus(root: &Path) {
    write_titled_skill(
        root,
        "transcribe",
        "transcriber",
        "Transcribe spoken recordings into a written transcript",
    );
    // Shares the query's words, not its meaning.
    write_titled_skill(
        root,
        "voice-of-customer",
        "customer-notes",
        "Notes on the voice of the customer to turn into product ideas",
    );
    write_titled_skill(
        root,
        "invoices",
        "invoice-maker",
        "Create an invoice or bill for a client",
    );
    write_titled_skill(
        root,
        "calendar",
        "meeting-planner",
        "Schedule a meeting on the calendar",
    );
    write_titled_skill(
        root,
        "sql",
        "sql-helper",
        "Write a SQL query for a database table",
    );
}

fn opts(retriever: Retriever) -> SearchOptions {
    SearchOptions {
        top_k: 3,
        retriever,
        ..SearchOptions::default()
    }
}

fn top(
    idx: &SkillIndex,
    slot: &SemanticSlot,
    q: &str,
    r: Retriever,
) -> (Vec<String>, Vec<&'static str>, Vec<String>) {
    let res = idx
        .search_with(q, &opts(r), &EligibilityEnv::allow_all(), Some(slot))
        .unwrap();
    (
        res.hits.into_iter().map(|h| h.id).collect(),
        res.retrievers,
        res.notes,
    )
}

#[test]
fn hybrid_finds_by_meaning_once_vectors_are_complete_and_says_why_when_not() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, root) = (tmp.path().join("home"), tmp.path().join("skills"));
    corpus(&root);
    let roots = Roots::explicit([&root]);
    let (idx, _) =
        SkillIndex::open(&roots, &IndexConfig::new(&home), Refresh::Always, &|_| {}).unwrap();
    let slot = SemanticSlot::default();
    let q = "turn my voice memo into text";

    // No model attached: lexical, and the result says so.
    let (ids, ran, notes) = top(&idx, &slot, q, Retriever::Hybrid);
    assert_eq!(ids[0], "voice-of-customer");
    assert_eq!(ran, ["lexical"]);
    assert!(notes[0].contains("no sentence model"), "{notes:?}");

    // Attached but nothing embedded yet: still lexical, with the coverage in the note.
    let emb = Arc::new(ConceptEmbedder::new());
    let sem = Arc::new(Semantic::new(&home, emb.clone()).unwrap());
    slot.attach(sem.clone());
    let (_, ran, notes) = top(&idx, &slot, q, Retriever::Hybrid);
    assert_eq!(ran, ["lexical"]);
    assert!(notes[0].contains("0 of 5 skills embedded"), "{notes:?}");

    let stop = AtomicBool::new(false);
    let n = sem.embed_pending(&idx, 2, &stop, &|_, _| {}).unwrap();
    assert_eq!(n, 5);
    assert_eq!(emb.calls.load(Ordering::SeqCst), 3, "batches of 2");

    let (ids, ran, notes) = top(&idx, &slot, q, Retriever::Semantic);
    assert_eq!(ids[0], "transcribe", "{ids:?}");
    assert_eq!(ran, ["semantic"]);
    assert!(notes.is_empty(), "{notes:?}");
    // Fused: the word match (lexical 1st, semantic 2nd) and the meaning match (semantic 1st)
    // lead, in that order, ahead of everything else.
    let (ids, ran, _) = top(&idx, &slot, q, Retriever::Hybrid);
    assert_eq!(ran, ["lexical", "semantic"]);
    assert_eq!(ids[..2], ["voice-of-customer", "transcribe"], "{ids:?}");
    let (ids, ran, _) = top(&idx, &slot, q, Retriever::Lexical);
    assert_eq!(
        (ids[0].as_str(), ran),
        ("voice-of-customer", vec!["lexical"])
    );

    // An all-stopword or wordless query still has a meaning to search by; an empty one not.
    assert!(top(&idx, &slot, "   ", Retriever::Hybrid).0.is_empty());

    // A second process (a new store over the same file) embeds nothing again.
    let emb2 = Arc::new(ConceptEmbedder::new());
    let sem2 = Semantic::new(&home, emb2.clone()).unwrap();
    assert_eq!(sem2.embed_pending(&idx, 8, &stop, &|_, _| {}).unwrap(), 0);

    // Editing one skill re-embeds that one only; until then hybrid is lexical again.
    write_titled_skill(
        &root,
        "sql",
        "sql-helper",
        "Write a SQL query for a database table, fast",
    );
    idx.refresh(&|_| {}).unwrap();
    let (_, ran, notes) = top(&idx, &slot, q, Retriever::Hybrid);
    assert_eq!(ran, ["lexical"]);
    assert!(notes[0].contains("4 of 5"), "{notes:?}");
    let before = emb.texts.load(Ordering::SeqCst);
    assert_eq!(sem.embed_pending(&idx, 8, &stop, &|_, _| {}).unwrap(), 1);
    assert_eq!(emb.texts.load(Ordering::SeqCst) - before, 1);
    assert_eq!(
        top(&idx, &slot, q, Retriever::Hybrid).1,
        ["lexical", "semantic"]
    );
}

/// A long prompt is embedded as passages and a skill scored by its nearest one: what one
/// sentence asks for is not drowned by what the rest says at length.
#[test]
fn a_long_prompt_is_searched_by_its_passages() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, root) = (tmp.path().join("home"), tmp.path().join("skills"));
    corpus(&root);
    let roots = Roots::explicit([&root]);
    let (idx, _) =
        SkillIndex::open(&roots, &IndexConfig::new(&home), Refresh::Always, &|_| {}).unwrap();
    let emb = Arc::new(ConceptEmbedder::new());
    let sem = Arc::new(Semantic::new(&home, emb.clone()).unwrap());
    sem.embed_pending(&idx, 8, &AtomicBool::new(false), &|_, _| {})
        .unwrap();
    let slot = SemanticSlot::default();
    slot.attach(sem);
    let filler = "so that everyone on the team knows where to be and when";
    let prompt = format!(
        "Schedule the weekly meeting on the calendar, move every appointment in the schedule, \
         book a meeting room for each appointment, keep the calendar and the schedule in step \
         {filler}. Our rooms are listed in one database table. Then send the invoice, and do it \
         {filler}."
    );
    assert!(prompt.split_whitespace().count() > 60);
    let ranked = |passage_words| {
        let o = SearchOptions {
            passage_words,
            ..opts(Retriever::Semantic)
        };
        let res = idx
            .search_with(&prompt, &o, &EligibilityEnv::allow_all(), Some(&slot))
            .unwrap();
        res.hits.into_iter().map(|h| h.id).collect::<Vec<_>>()
    };
    // Whole, the prompt is mostly about meetings and tables; the invoice comes third.
    assert_eq!(ranked(0)[..3], ["calendar", "sql", "invoices"]);
    // As passages, the last sentence's invoice is found as well as the first's meeting.
    let texts = emb.texts.load(Ordering::SeqCst);
    assert_eq!(ranked(60)[..2], ["invoices", "calendar"]);
    assert_eq!(
        emb.texts.load(Ordering::SeqCst) - texts,
        2,
        "two passages, embedded once"
    );
    ranked(60);
    assert_eq!(emb.texts.load(Ordering::SeqCst) - texts, 2, "remembered");

    // A 100,000-word prompt costs at most MAX_PASSAGES passages of at most 60 words.
    let huge = "book the meeting. ".repeat(33_334);
    let texts = emb.texts.load(Ordering::SeqCst);
    emb.longest.store(0, Ordering::SeqCst);
    let res = idx
        .search_with(
            &huge,
            &opts(Retriever::Hybrid),
            &EligibilityEnv::allow_all(),
            Some(&slot),
        )
        .unwrap();
    assert_eq!(res.hits[0].id, "calendar");
    assert_eq!(res.retrievers, ["lexical", "semantic"]);
    assert_eq!(
        emb.texts.load(Ordering::SeqCst) - texts,
        skillsearch_core::retrieve::passage::MAX_PASSAGES
    );
    assert!(emb.longest.load(Ordering::SeqCst) <= 60);
}

#[test]
fn gating_and_shadowing_apply_to_semantic_hits_too() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    write_titled_skill(
        &a,
        "billing",
        "invoice-maker",
        "Create an invoice for a client",
    );
    write_titled_skill(
        &b,
        "billing2",
        "invoice-maker",
        "Create a bill for a client",
    );
    write_file(
        &b.join("receipts/SKILL.md"),
        "---\nname: receipts\ndescription: File a payment receipt\nmetadata: {\"openclaw\":{\"requires\":{\"bins\":[\"no-such-binary-xyz\"]}}}\n---\nbody\n",
    );
    let roots = Roots::explicit([&a, &b]);
    let (idx, _) =
        SkillIndex::open(&roots, &IndexConfig::new(&home), Refresh::Always, &|_| {}).unwrap();
    let slot = SemanticSlot::default();
    let sem = Arc::new(Semantic::new(&home, Arc::new(ConceptEmbedder::new())).unwrap());
    sem.embed_pending(&idx, 8, &AtomicBool::new(false), &|_, _| {})
        .unwrap();
    slot.attach(sem);
    let r = idx
        .search_with(
            "payment",
            &opts(Retriever::Semantic),
            &EligibilityEnv::from_process(),
            Some(&slot),
        )
        .unwrap();
    let ids: Vec<&str> = r.hits.iter().map(|h| h.id.as_str()).collect();
    assert_eq!(ids, ["billing"], "{:?}", r.dropped);
    let dropped: Vec<(&str, &str)> = r
        .dropped
        .iter()
        .map(|d| (d.id.as_str(), d.exclusion.code.as_str()))
        .collect();
    assert!(dropped.contains(&("billing2", "shadowed")), "{dropped:?}");
    assert!(
        dropped.iter().any(|(id, _)| *id == "receipts"),
        "{dropped:?}"
    );
}

/// The real model: a query that shares no word with the right skill.
#[test]
#[cfg_attr(
    not(has_minilm),
    ignore = "set MINILM_TEST_MODEL_DIR to a sentence-model dir (see .ci/run)"
)]
fn minilm_hybrid_finds_a_paraphrase() {
    let dir = std::env::var_os("MINILM_TEST_MODEL_DIR").expect("MINILM_TEST_MODEL_DIR");
    let tmp = tempfile::tempdir().unwrap();
    let (home, root) = (tmp.path().join("home"), tmp.path().join("skills"));
    corpus(&root);
    write_titled_skill(
        &root,
        "k8s",
        "cluster-deploy",
        "Deploy a Kubernetes cluster on AWS",
    );
    let roots = Roots::explicit([&root]);
    let (idx, _) =
        SkillIndex::open(&roots, &IndexConfig::new(&home), Refresh::Always, &|_| {}).unwrap();
    let slot = SemanticSlot::default();
    let model = LocalEmbedder::load(Path::new(&dir)).unwrap();
    let sem = Arc::new(Semantic::new(&home, Arc::new(model)).unwrap());
    sem.embed_pending(&idx, 16, &AtomicBool::new(false), &|_, _| {})
        .unwrap();
    slot.attach(sem);
    let q = "I need the dictated memo from my phone as a document";
    let (ids, _, _) = top(&idx, &slot, q, Retriever::Hybrid);
    assert_eq!(ids[0], "transcribe", "{ids:?}");
    assert_eq!(top(&idx, &slot, q, Retriever::Lexical).0.first(), None);
    let (ids, _, _) = top(
        &idx,
        &slot,
        "spin up containers in the cloud",
        Retriever::Hybrid,
    );
    assert_eq!(ids[0], "k8s", "{ids:?}");
}
