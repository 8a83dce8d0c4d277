//! `skillsearch explain`: the same ranks and scores as `search --json`, the reasons a skill is
//! held back or missing, terminal-safe text, and the golden text and JSON forms.

use serde_json::Value;
use skillsearch_testkit::{Env, golden};
use std::path::Path;
use std::process::Output;

fn run(e: &Env, args: &[&str]) -> Output {
    e.command(env!("CARGO_BIN_EXE_skillsearch"))
        .args(args)
        .output()
        .unwrap()
}

fn json(o: &Output) -> Value {
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        text.lines().count(),
        1,
        "one JSON line expected:\n{text}\nstderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_str(&text).unwrap()
}

/// A small fixed corpus: two PDF skills, one needing a binary no machine has, one about
/// invoices with a control character in its name, one about nothing the queries say.
fn corpus(e: &Env) {
    e.skill(
        "pdf-tables",
        "pdf-tables",
        "Extract tables from PDF files into CSV",
        "Use pdfplumber to read each page and write the tables out.",
    );
    e.skill(
        "pdf-ocr",
        "pdf-ocr",
        "Read scanned PDF pages with OCR",
        "Run tesseract on every page of a scanned document.",
    );
    e.file(
        "pdf-cloud/SKILL.md",
        "---\nname: pdf-cloud\ndescription: Extract tables from PDF files in the cloud\nmetadata: {\"openclaw\":{\"requires\":{\"bins\":[\"no-such-binary-xyz\"]}}}\n---\nUpload the PDF.",
    );
    e.file(
        "invoices/SKILL.md",
        "---\nname: \"invoice\\u001b[2Jmaker\"\ndescription: Make invoices and tables of charges\n---\nBill a customer.",
    );
    e.skill(
        "weather",
        "weather",
        "Tell the weather forecast",
        "Ask a weather service.",
    );
}

fn explain(e: &Env, query: &str, extra: &[&str]) -> Output {
    let root = e.root.to_str().unwrap();
    let mut args = vec!["explain", query, "--skills", root, "--retriever", "lexical"];
    args.extend_from_slice(extra);
    run(e, &args)
}

#[test]
fn the_text_and_json_forms_are_pinned_by_golden_files() {
    let e = Env::new();
    corpus(&e);
    let q = "extract tables from a scanned PDF";
    let ids = ["--skill", "weather", "--skill", "local/nope", "-k", "3"];
    let out = explain(&e, q, &ids);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    golden("explain.txt", &String::from_utf8(out.stdout).unwrap());
    let mut args = ids.to_vec();
    args.push("--json");
    let v = json(&explain(&e, q, &args));
    golden(
        "explain.json",
        &format!("{}\n", serde_json::to_string_pretty(&v).unwrap()),
    );
}

fn skill<'a>(v: &'a Value, id: &str) -> &'a Value {
    v["skills"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id)
        .unwrap_or_else(|| panic!("{id} not explained: {v}"))
}

#[test]
fn a_held_back_skill_says_why_and_so_do_missing_ones() {
    let e = Env::new();
    corpus(&e);
    let v = json(&explain(
        &e,
        "extract tables from PDF files",
        &[
            "--skill",
            "pdf-cloud",
            "--skill",
            "weather",
            "--skill",
            "no/such-skill",
            "-k",
            "1",
            "--json",
        ],
    ));
    let cloud = skill(&v, "pdf-cloud");
    assert!(
        ["held_back", "not_reached"].contains(&cloud["status"].as_str().unwrap()),
        "{cloud}"
    );
    assert_eq!(cloud["held_back"]["code"], "bins", "{cloud}");
    assert!(
        cloud["held_back"]["reason"]
            .as_str()
            .unwrap()
            .contains("no-such-binary-xyz")
    );
    let weather = skill(&v, "weather");
    assert_eq!(weather["status"], "no_match");
    assert!(weather["lexical"]["matches"].as_array().unwrap().is_empty());
    let missing = skill(&v, "no/such-skill");
    assert_eq!(missing["status"], "not_in_index");
    // The text says the same in words.
    let out = explain(
        &e,
        "extract tables from PDF files",
        &[
            "--skill",
            "pdf-cloud",
            "--skill",
            "weather",
            "--skill",
            "no/such-skill",
        ],
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("held back: bins:"), "{text}");
    assert!(text.contains("matched nothing"), "{text}");
    assert!(text.contains("not in the index"), "{text}");
    // A budget nothing fits in leaves every hit out of the injected turn, and says so.
    let v = json(&explain(
        &e,
        "extract tables from PDF files",
        &["--budget", "1", "--json"],
    ));
    let first = &v["skills"][0];
    assert_eq!(first["status"], "hit");
    assert_eq!(first["turn"]["over_budget"], true, "{first}");
    assert!(v["turn"]["injected"].as_array().unwrap().is_empty());
}

#[test]
fn a_skill_reached_below_the_hits_gets_its_whole_index_rank() {
    let e = Env::new();
    corpus(&e);
    let v = json(&explain(
        &e,
        "tables",
        &["--skill", "invoices", "-k", "1", "--json"],
    ));
    let hits: Vec<&Value> = v["skills"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["status"] == "hit")
        .collect();
    assert_eq!(hits.len(), 1);
    let inv = skill(&v, "invoices");
    assert!(
        ["not_reached", "held_back"].contains(&inv["status"].as_str().unwrap()),
        "{inv}"
    );
    let lex = &inv["lexical"];
    assert!(lex["rank"].as_u64().unwrap() > 1, "{inv}");
    let sum: f64 = lex["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["score"].as_f64().unwrap())
        .sum();
    assert!((sum - lex["score"].as_f64().unwrap()).abs() < 1e-3, "{inv}");
}

#[test]
fn control_characters_in_names_are_shown_safely() {
    let e = Env::new();
    corpus(&e);
    let out = explain(&e, "invoices and charges", &["--skill", "invoices"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("invoice [2Jmaker"), "{text}");
    assert!(!text.contains('\x1b'), "{text:?}");
}

/// The eval data beside the repository (`shared/eval`, or `EVAL_DIR`), when it is there.
fn eval_dir() -> Option<std::path::PathBuf> {
    let candidates = [
        std::env::var_os("EVAL_DIR").map(Into::into),
        Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/eval")),
        Some("/var/tmp/shared/eval".into()),
        Some("/work/shared/eval".into()),
    ];
    candidates
        .into_iter()
        .flatten()
        .find(|d: &std::path::PathBuf| d.join("queries/metatool-dev.jsonl").is_file())
}

/// Every rank `explain` shows agrees with `search --json`: same ids, same order, same
/// scores, over a third of the metatool dev queries (every third, so the test stays quick).
#[test]
fn explain_agrees_with_search_on_the_metatool_dev_queries() {
    let Some(eval) = eval_dir() else {
        eprintln!(
            "skipped: the eval data (shared/eval with queries/metatool-dev.jsonl) is not beside the repository; set EVAL_DIR"
        );
        return;
    };
    let compared = explain_agrees_with_search(&Env::new(), &eval, "lexical", 3);
    assert!(compared >= 500, "{compared}");
}

/// The same with the sentence model: the fused ranks and scores `explain` shows are those
/// `search --json` returns (every tenth query: each command loads the model).
#[test]
#[cfg_attr(
    not(has_minilm),
    ignore = "set MINILM_TEST_MODEL_DIR to a sentence-model dir (see .ci/run)"
)]
fn hybrid_explain_agrees_with_search_on_the_metatool_dev_queries() {
    let Some(eval) = eval_dir() else {
        eprintln!(
            "skipped: the eval data (shared/eval with queries/metatool-dev.jsonl) is not beside the repository; set EVAL_DIR"
        );
        return;
    };
    let e = Env::new();
    let model = std::env::var_os("MINILM_TEST_MODEL_DIR").expect("MINILM_TEST_MODEL_DIR");
    let added = run(
        &e,
        &["models", "add", model.to_str().unwrap(), "--name", "minilm"],
    );
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    let compared = explain_agrees_with_search(&e, &eval, "hybrid", 10);
    assert!(compared >= 150, "{compared}");
}

/// Runs `search --json` and `explain --json` with `retriever` on every `step`-th metatool dev
/// query and asserts they agree on the hits (ids, order, scores) and on how many were held
/// back; returns how many queries were compared.
fn explain_agrees_with_search(e: &Env, eval: &Path, retriever: &str, step: usize) -> usize {
    let corpus = eval.join("corpora/metatool");
    let corpus = corpus.to_str().unwrap();
    let queries = std::fs::read_to_string(eval.join("queries/metatool-dev.jsonl")).unwrap();
    let (mut compared, mut fused) = (0, 0);
    for line in queries.lines().step_by(step) {
        let q: Value = serde_json::from_str(line).unwrap();
        let query = q["query"].as_str().unwrap();
        let answer = |command: &str| {
            let args = [
                command,
                query,
                "--skills",
                corpus,
                "--retriever",
                retriever,
                "-k",
                "5",
                "--json",
            ];
            json(&run(e, &args))
        };
        let searched = answer("search");
        let explained = answer("explain");
        if retriever == "hybrid" {
            // The model ran: the semantic retriever ranked some hit, and when the lexical one
            // matched too, every hit was fused.
            let hits = || {
                explained["skills"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|s| s["status"] == "hit")
            };
            assert!(
                hits().any(|s| !s["semantic"].is_null()),
                "query {query}: {explained}"
            );
            if explained["retrievers"].as_array().unwrap().len() == 2 {
                assert!(
                    hits().all(|s| !s["fusion"].is_null()),
                    "query {query}: {explained}"
                );
                fused += 1;
            }
        }
        let want: Vec<(String, f32)> = searched["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| {
                (
                    h["id"].as_str().unwrap().to_owned(),
                    h["score"].as_f64().unwrap() as f32,
                )
            })
            .collect();
        let got: Vec<(String, f32)> = explained["skills"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["status"] == "hit")
            .map(|s| {
                (
                    s["id"].as_str().unwrap().to_owned(),
                    s["score"].as_f64().unwrap() as f32,
                )
            })
            .collect();
        assert_eq!(got, want, "query {query}");
        // What search holds back, explain holds back for the same reason.
        let held: Vec<&Value> = explained["skills"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["status"] == "held_back")
            .collect();
        assert_eq!(
            held.len(),
            searched["dropped"].as_array().unwrap().len(),
            "query {query}"
        );
        compared += 1;
    }
    if retriever == "hybrid" {
        assert!(
            fused * 2 > compared,
            "only {fused} of {compared} queries were fused"
        );
    }
    compared
}
