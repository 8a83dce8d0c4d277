//! The real binary against a damaged or hostile file system (#21 items 10–12): a segment file
//! gone from the index, a home it may not write, FIFOs where files belong. Every run has a
//! time limit, so a regression that hangs fails its test instead of stalling CI.

use skillsearch_testkit::Env;
use skillsearch_testkit::sys::{self, ReadOnly};
use std::path::Path;
use std::process::Output;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(20);

/// `skillsearch <args> --skills <root>` in `e`, within [`LIMIT`].
fn run(e: &Env, args: &[&str]) -> Output {
    run_as(e, args, None)
}

fn run_as(e: &Env, args: &[&str], ro: Option<ReadOnly>) -> Output {
    let mut c = e.command(env!("CARGO_BIN_EXE_skillsearch"));
    c.args(args).arg("--skills").arg(&e.root);
    if let Some(ro) = ro {
        ro.apply(&mut c);
    }
    sys::output_within(&mut c, b"", LIMIT)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The exit code, with the output in the message when it is not `want`.
fn expect_code(out: &Output, want: i32) {
    assert_eq!(
        out.status.code(),
        Some(want),
        "stdout: {}\nstderr: {}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

fn corpus(e: &Env) {
    e.skill(
        "pdf",
        "pdf-tables",
        "Extract tables from PDF files",
        "Use pdftk.",
    );
    e.skill(
        "git",
        "git-bisect",
        "Find the commit that broke a test",
        "git bisect run",
    );
}

/// The one index directory under the home.
fn index_dir(e: &Env) -> std::path::PathBuf {
    let dirs: Vec<_> = std::fs::read_dir(e.home.join("indexes"))
        .unwrap()
        .map(|d| d.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

/// Removes every `.pos` segment file of the index; returns how many there were.
fn remove_positions(dir: &Path) -> usize {
    let mut n = 0;
    for f in std::fs::read_dir(dir.join("tantivy")).unwrap() {
        let p = f.unwrap().path();
        if p.extension().is_some_and(|x| x == "pos") {
            std::fs::remove_file(&p).unwrap();
            n += 1;
        }
    }
    n
}

#[test]
fn a_missing_segment_file_is_rebuilt_by_search_and_by_index() {
    let e = Env::new();
    corpus(&e);
    expect_code(&run(&e, &["index"]), 0);
    let dir = index_dir(&e);
    assert!(remove_positions(&dir) > 0);
    // `search` finds the damage, says so, rebuilds, and answers.
    let out = run(&e, &["search", "pdf tables", "--refresh", "never"]);
    expect_code(&out, 0);
    assert!(text(&out.stdout).contains("pdf-tables"));
    let err = text(&out.stderr);
    assert!(
        err.contains(&dir.display().to_string()) && err.contains("rebuil"),
        "{err}"
    );
    // `index` repairs it too.
    assert!(remove_positions(&dir) > 0);
    let out = run(&e, &["index"]);
    expect_code(&out, 0);
    assert!(
        text(&out.stdout).contains("rebuilt"),
        "{}",
        text(&out.stdout)
    );
    let out = run(&e, &["search", "git bisect", "--refresh", "never"]);
    expect_code(&out, 0);
    assert!(text(&out.stdout).contains("git-bisect"));
}

#[test]
fn search_over_an_unchanged_corpus_writes_nothing_in_the_home() {
    let e = Env::new();
    corpus(&e);
    expect_code(&run(&e, &["index"]), 0);
    let before = sys::stamps(&e.home);
    for args in [
        &["search", "pdf tables", "--refresh", "always"][..],
        &["search", "pdf tables"],
        &["search", "pdf tables", "--refresh", "always", "--json"],
    ] {
        expect_code(&run(&e, args), 0);
        assert_eq!(sys::stamps(&e.home), before, "`{}` wrote", args.join(" "));
    }
}

#[test]
fn a_read_only_home_with_a_valid_index_still_answers() {
    let e = Env::new();
    corpus(&e);
    expect_code(&run(&e, &["index"]), 0);
    let tmp = e.home.parent().unwrap().to_path_buf();
    let Some(ro) = sys::make_read_only(&e.home, &tmp) else {
        sys::make_writable(&e.home);
        return;
    };
    let before = sys::stamps(&e.home);
    // Nothing changed: nothing to write, and the answer is the usual one.
    let out = run_as(
        &e,
        &["search", "pdf tables", "--refresh", "always"],
        Some(ro),
    );
    expect_code(&out, 0);
    assert!(text(&out.stdout).contains("pdf-tables"));
    // A skill changed: the index cannot take it, says where and what to do, and still answers
    // from what it holds.
    e.skill(
        "pdf",
        "pdf-tables",
        "Extract tables from PDF files, now with OCR",
        "Use pdftk.",
    );
    e.skill("csv", "csv-clean", "Clean comma separated files", "x");
    let out = run_as(
        &e,
        &["search", "pdf tables", "--refresh", "always"],
        Some(ro),
    );
    expect_code(&out, 0);
    assert!(text(&out.stdout).contains("pdf-tables"));
    let err = text(&out.stderr);
    let dir = index_dir(&e);
    assert!(
        err.contains(&dir.display().to_string()) && err.contains("writable"),
        "{err}"
    );
    // The rendered turn too.
    let out = run_as(&e, &["search", "pdf tables", "--render"], Some(ro));
    expect_code(&out, 0);
    assert!(text(&out.stdout).contains("pdf-tables"));
    // The hook injects the skills; only its decision log is lost.
    let mut c = e.command(env!("CARGO_BIN_EXE_skillsearch"));
    c.arg("hook")
        .env("SKILLSEARCH_SKILLS_DIRS", &e.root)
        .env("SKILLSEARCH_MODE", "auto");
    ro.apply(&mut c);
    let input = serde_json::json!({"session_id": "s", "cwd": "/", "hook_event_name": "UserPromptSubmit", "prompt": "extract pdf tables"});
    let out = sys::output_within(&mut c, &serde_json::to_vec(&input).unwrap(), LIMIT);
    expect_code(&out, 0);
    assert!(
        text(&out.stdout).contains("pdf-tables"),
        "{}",
        text(&out.stderr)
    );
    // `index`, whose job is to write, fails naming the directory.
    let out = run_as(&e, &["index"], Some(ro));
    expect_code(&out, 2);
    assert!(
        text(&out.stderr).contains(&dir.display().to_string()),
        "{}",
        text(&out.stderr)
    );
    // Another set of roots has no index here, and none can be built: an error naming the
    // home, and nothing left behind.
    let other = e.home.parent().unwrap().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let out = run_as(
        &e,
        &["search", "pdf", "--skills", other.to_str().unwrap()],
        Some(ro),
    );
    expect_code(&out, 2);
    assert!(
        text(&out.stderr).contains(&e.home.display().to_string()),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(sys::stamps(&e.home), before, "nothing was written");
    sys::make_writable(&e.home);
    // Writable again: the changes land.
    let out = run(&e, &["search", "comma separated", "--refresh", "always"]);
    expect_code(&out, 0);
    assert!(text(&out.stdout).contains("csv-clean"));
}

#[test]
fn a_fifo_skill_file_is_a_diagnostic_and_the_rest_is_indexed() {
    let e = Env::new();
    corpus(&e);
    sys::mkfifo(&e.root.join("pipe/SKILL.md"));
    let out = run(&e, &["index", "--json"]);
    expect_code(&out, 0);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["skills"], 2, "{v}");
    let diags = v["diagnostics"].as_array().unwrap();
    assert!(
        diags
            .iter()
            .any(|d| d["code"] == "not-a-file"
                && d["path"].as_str().unwrap().ends_with("pipe/SKILL.md")),
        "{diags:?}"
    );
}

#[test]
fn a_fifo_config_file_is_an_error_naming_it_and_never_a_hang() {
    let e = Env::new();
    corpus(&e);
    let config = e.home.join("config.toml");
    sys::mkfifo(&config);
    let out = run(&e, &["search", "pdf tables"]);
    expect_code(&out, 2);
    let err = text(&out.stderr);
    assert!(
        err.contains(&config.display().to_string()) && err.contains("FIFO"),
        "{err}"
    );
    // Named by `--config` too.
    let other = e.root.join("elsewhere.toml");
    sys::mkfifo(&other);
    let out = run(
        &e,
        &["--config", other.to_str().unwrap(), "search", "pdf tables"],
    );
    expect_code(&out, 2);
    assert!(
        text(&out.stderr).contains(&other.display().to_string()),
        "{}",
        text(&out.stderr)
    );
    // The hook treats it as any broken config: no skills, exit 0, the reason on stderr.
    let mut c = e.command(env!("CARGO_BIN_EXE_skillsearch"));
    c.arg("hook").env("SKILLSEARCH_SKILLS_DIRS", &e.root);
    let input = serde_json::json!({"session_id": "s", "cwd": "/", "hook_event_name": "UserPromptSubmit", "prompt": "extract pdf tables"});
    let out = sys::output_within(&mut c, &serde_json::to_vec(&input).unwrap(), LIMIT);
    expect_code(&out, 0);
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains(&config.display().to_string()),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_fifo_swapped_in_for_an_indexed_skill_never_hangs_a_rendered_search() {
    let e = Env::new();
    corpus(&e);
    expect_code(&run(&e, &["index"]), 0);
    // The index still holds the skill; rendering reads its body from the disk.
    sys::mkfifo(&e.root.join("pdf/SKILL.md"));
    let out = run(
        &e,
        &["search", "pdf tables", "--refresh", "never", "--render"],
    );
    assert!(out.status.code().is_some(), "{}", text(&out.stderr));
    // Refreshed, the FIFO is a diagnostic and the other skill still answers.
    let out = run(&e, &["search", "git bisect", "--refresh", "always"]);
    expect_code(&out, 0);
    assert!(text(&out.stdout).contains("git-bisect"));
    assert!(
        text(&out.stderr).contains("not-a-file"),
        "{}",
        text(&out.stderr)
    );
}
