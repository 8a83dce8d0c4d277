//! `skillsearch hook` end to end: the real binary, fed the hosts' UserPromptSubmit JSON.

use serde_json::{Value, json};
use skillsearch_testkit::Env;
use std::fs;
use std::io::Write;
use std::process::{Command, Output, Stdio};

/// `skillsearch hook` run in an [`Env`], its library in `SKILLSEARCH_SKILLS_DIRS`.
trait Hook {
    fn hook(&self, input: &[u8], env: &[(&str, &str)], args: &[&str]) -> Output;
    /// The decision log's records.
    fn log(&self) -> Vec<Value>;
}

impl Hook for Env {
    fn hook(&self, input: &[u8], env: &[(&str, &str)], args: &[&str]) -> Output {
        let mut c = self.command(env!("CARGO_BIN_EXE_skillsearch"));
        c.arg("hook").args(args);
        c.env("SKILLSEARCH_SKILLS_DIRS", &self.root);
        for (k, v) in env {
            c.env(k, v);
        }
        let mut child = c
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let input = input.to_vec();
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(&input);
        });
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap();
        out
    }

    fn log(&self) -> Vec<Value> {
        let text = fs::read_to_string(self.home.join("logs/decisions.jsonl")).unwrap_or_default();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

fn claude(prompt: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({"session_id": "s", "cwd": "/tmp", "hook_event_name": "UserPromptSubmit", "prompt": prompt, "new_field": {"x": 1}})).unwrap()
}

const AUTO: &[(&str, &str)] = &[("SKILLSEARCH_MODE", "auto")];

#[test]
fn auto_mode_injects_the_block_as_reference_data() {
    let e = Env::new();
    e.skill(
        "pdf-tables",
        "pdf-tables",
        "Extract tables from scanned PDF files",
        "The secret word is PARSNIP.",
    );
    let out = e.hook(
        &claude("extract the tables from this scanned PDF"),
        AUTO,
        &[],
    );
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["hookSpecificOutput"]["hookEventName"], "UserPromptSubmit");
    let ctx = v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap();
    assert!(
        ctx.starts_with(skillsearch_core::turn::CONTEXT_PREAMBLE),
        "{ctx}"
    );
    assert!(
        ctx.contains("### Skill: pdf-tables  [local/pdf-tables]") && ctx.contains("PARSNIP"),
        "{ctx}"
    );
    assert!(
        v.get("continue").is_none(),
        "Claude Code gets no continue field"
    );
    let log = e.log();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0]["surface"], "hook");
    assert_eq!(log[0]["host"], "claude-code");
    assert_eq!(log[0]["mode"], "auto");
    assert_eq!(log[0]["hits"][0]["id"], "local/pdf-tables");
    assert!(log[0]["injected_chars"].as_u64().unwrap() > 50);
    let tail = Command::new(env!("CARGO_BIN_EXE_skillsearch"))
        .arg("--home")
        .arg(&e.home)
        .args(["log", "tail", "-n", "5"])
        .env_remove("SKILLSEARCH_HOME")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&tail.stdout);
    assert!(
        text.contains("hook")
            && text.contains("local/pdf-tables")
            && text.contains("extract the tables"),
        "{text}"
    );
}

#[test]
fn on_demand_mode_injects_nothing_and_codebuddy_gets_continue() {
    let e = Env::new();
    e.skill(
        "pdf-tables",
        "pdf-tables",
        "Extract tables from scanned PDF files",
        "x",
    );
    let out = e.hook(&claude("extract tables from a PDF"), &[], &[]);
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty());
    let cb = serde_json::to_vec(
        &json!({"prompt": "extract tables from a PDF", "client": "CLI", "generation_id": "g"}),
    )
    .unwrap();
    let out = e.hook(&cb, &[], &[]);
    assert_eq!(
        serde_json::from_slice::<Value>(&out.stdout).unwrap(),
        json!({"continue": true})
    );
    let out = e.hook(&cb, AUTO, &[]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["continue"], true);
    assert!(
        v["hookSpecificOutput"]["additionalContext"]
            .as_str()
            .unwrap()
            .contains("pdf-tables")
    );
}

#[test]
fn bad_input_never_blocks_the_turn() {
    let e = Env::new();
    e.skill(
        "pdf-tables",
        "pdf-tables",
        "Extract tables from scanned PDF files",
        "x",
    );
    for input in [
        b"{not json".to_vec(),
        b"".to_vec(),
        claude(""),
        claude("   "),
        serde_json::to_vec(&json!({"prompt": 42})).unwrap(),
    ] {
        let out = e.hook(&input, AUTO, &[]);
        assert_eq!(out.status.code(), Some(0));
        assert!(
            out.stdout.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    assert!(
        e.log()
            .iter()
            .any(|d| d["error"].as_str().unwrap_or("").contains("not JSON"))
    );
    // A 1 MB prompt is searched by its first 2,000 characters.
    let big = format!(
        "extract tables from a pdf {}",
        "lorem ipsum ".repeat(90_000)
    );
    let out = e.hook(&claude(&big), AUTO, &[]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("pdf-tables"));
    // A broken config costs the turn its skills, not the turn.
    let out = e.hook(
        &claude("extract tables"),
        &[("SKILLSEARCH_MODE", "atuo")],
        &[],
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("`atuo`"));
}

#[test]
fn a_block_over_64_kib_arrives_whole() {
    let e = Env::new();
    let body = "Step: run the converter with care and check every page.\n".repeat(2000);
    e.skill(
        "huge",
        "huge-skill",
        "Convert documents to zeppelin format",
        &body,
    );
    let out = e.hook(
        &claude("convert to zeppelin format"),
        &[
            ("SKILLSEARCH_MODE", "auto"),
            ("SKILLSEARCH_TOKEN_BUDGET", "0"),
        ],
        &[],
    );
    assert!(out.stdout.len() > 100 * 1024, "{}", out.stdout.len());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ctx = v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap();
    assert_eq!(ctx.matches("Step: run the converter").count(), 2000);
}

#[test]
fn closed_stdout_and_a_missed_deadline_still_exit_0() {
    let e = Env::new();
    for i in 0..3000 {
        e.skill(
            &format!("s{i:04}"),
            &format!("skill-{i}"),
            "audio transcription helper",
            &"words ".repeat(100),
        );
    }
    // No index yet and a 50 ms deadline: the first build cannot finish in time.
    let out = e.hook(
        &claude("transcribe audio"),
        &[
            ("SKILLSEARCH_MODE", "auto"),
            ("SKILLSEARCH_DEADLINE_MS", "50"),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty());
    assert!(
        e.log().last().unwrap()["error"]
            .as_str()
            .unwrap()
            .contains("deadline")
    );
    // The reader goes away before the reply is written.
    let mut child = Command::new(env!("CARGO_BIN_EXE_skillsearch"))
        .arg("--home")
        .arg(&e.home)
        .arg("hook")
        .env("SKILLSEARCH_SKILLS_DIRS", &e.root)
        .env("SKILLSEARCH_MODE", "auto")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&claude("transcribe audio"))
        .unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

#[test]
fn mode_and_roots_flags_override_the_environment() {
    // What `skillsearch setup` writes into the hosts' hook commands.
    let e = Env::new();
    e.skill(
        "pdf-tables",
        "pdf-tables",
        "Extract tables from scanned PDF files",
        "The secret word is PARSNIP.",
    );
    let other = tempfile::tempdir().unwrap();
    let input = claude("extract the tables from this scanned PDF");
    let root = e.root.to_string_lossy().into_owned();
    let env = &[
        ("SKILLSEARCH_MODE", "on_demand"),
        ("SKILLSEARCH_SKILLS_DIRS", other.path().to_str().unwrap()),
    ];
    let out = e.hook(&input, env, &["--mode", "auto", "--skills", &root]);
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["hookSpecificOutput"]["additionalContext"]
            .as_str()
            .unwrap()
            .contains("PARSNIP")
    );
    // A misspelled mode costs the turn its skills, never the turn, and names the key.
    let out = e.hook(&input, &[], &["--mode", "atuo"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("mode") && err.contains("atuo"), "{err}");
}

/// A hook turn with a chat model that hangs and a hub that is down: the local skill is still
/// injected within the deadline, and the decision log says what failed.
#[test]
fn a_hanging_model_and_a_dead_hub_cost_the_deadline_not_the_turn() {
    use skillsearch_testkit::{Fake, Reply, dead_base};
    let e = Env::new();
    e.skill(
        "pdf-tables",
        "pdf-tables",
        "Extract tables from scanned PDF files",
        "The secret word is PARSNIP.",
    );
    let model = Fake::start(|_| Reply::Hang(std::time::Duration::from_secs(30)));
    let base = format!("{}/v1", model.base);
    let hub = dead_base();
    let started = std::time::Instant::now();
    let out = e.hook(
        &claude("extract the tables from this scanned PDF"),
        &[
            ("SKILLSEARCH_MODE", "auto"),
            ("SKILLSEARCH_MODEL", "m"),
            ("SKILLSEARCH_MODEL_BASE_URL", &base),
            ("SKILLSEARCH_HUB_ENDPOINT", &hub),
            ("SKILLSEARCH_DEADLINE_MS", "3000"),
        ],
        &[],
    );
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(0));
    assert!(took < std::time::Duration::from_secs(6), "took {took:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ctx = v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap();
    assert!(ctx.contains("PARSNIP"), "{ctx}");
    let log = e.log();
    let diags = log[0]["diagnostics"].to_string();
    assert!(diags.contains("rewrite failed"), "{diags}");
    assert!(diags.contains(&format!("hub {hub} failed")), "{diags}");
    assert!(diags.contains("kept the first 1 candidates"), "{diags}");
    assert_eq!(log[0]["gate"]["fell_back"], true, "{}", log[0]);
}

/// A running `skillsearch mcp` in `e`, its stdin held open; it leaves (closing stdin) on drop.
struct Mcp(std::process::Child);

impl Mcp {
    fn start(e: &Env, env: &[(&str, &str)]) -> Mcp {
        let mut c = e.command(env!("CARGO_BIN_EXE_skillsearch"));
        c.arg("mcp").env("SKILLSEARCH_SKILLS_DIRS", &e.root);
        for (k, v) in env {
            c.env(k, v);
        }
        let child = c
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let socket = e.home.join("warm.sock");
        let t = std::time::Instant::now();
        while !socket.exists() {
            assert!(
                t.elapsed().as_secs() < 20,
                "the MCP server never bound {socket:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Mcp(child)
    }

    fn stop(mut self) {
        drop(self.0.stdin.take());
        let t = std::time::Instant::now();
        while self.0.try_wait().unwrap().is_none() {
            assert!(t.elapsed().as_secs() < 10, "the MCP server did not leave");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The injected context; none when the hook printed nothing (Claude Code's empty reply).
fn context_of(out: &Output) -> String {
    if out.stdout.is_empty() {
        return String::new();
    }
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// With an MCP server of the same home, roots and settings running, the hook's turn is the
/// server's answer (the log's `warm` stage); other roots are refused and answered by the hook
/// itself, as is every turn once the server has left (and its socket with it).
#[test]
fn a_warm_mcp_server_answers_the_hooks_turns() {
    let e = Env::new();
    e.skill(
        "pdf-tables",
        "pdf-tables",
        "Extract tables from scanned PDF files",
        "Use camelot.",
    );
    e.skill(
        "git-bisect",
        "git-bisect",
        "Find a bad commit with git bisect",
        "x",
    );
    let prompt = claude("extract the tables from this scanned pdf");
    let alone = e.hook(&prompt, AUTO, &[]);
    assert!(context_of(&alone).contains("pdf-tables"));

    let server = Mcp::start(&e, &[]);
    let warm = e.hook(&prompt, AUTO, &[]);
    assert_eq!(context_of(&warm), context_of(&alone));
    let last = e.log().pop().unwrap();
    assert!(last["elapsed_ms"].get("warm").is_some(), "{last}");
    assert_eq!(last["surface"], "hook");
    assert_eq!(last["hits"][0]["name"], "pdf-tables", "{last}");

    // Other roots: refused, and the hook answers itself.
    let other = e.root.parent().unwrap().join("other");
    testkit_skill(&other, "pdf-tables");
    let out = e.hook(&prompt, AUTO, &["--skills", other.to_str().unwrap()]);
    assert!(context_of(&out).contains("pdf-tables"));
    let last = e.log().pop().unwrap();
    assert!(last["elapsed_ms"].get("warm").is_none(), "{last}");
    assert!(
        last["diagnostics"][0]
            .as_str()
            .unwrap()
            .contains("other skill roots"),
        "{last}"
    );

    server.stop();
    assert!(!e.home.join("warm.sock").exists());
    let after = e.hook(&prompt, AUTO, &[]);
    assert_eq!(context_of(&after), context_of(&alone));
    let last = e.log().pop().unwrap();
    assert!(last["elapsed_ms"].get("warm").is_none(), "{last}");
    assert!(!last.to_string().contains("warm path"), "{last}");
}

fn testkit_skill(root: &std::path::Path, name: &str) {
    skillsearch_testkit::write_skill(
        root,
        name,
        name,
        "Extract tables from scanned PDF files",
        "x",
    );
}

/// A socket nobody answers on (a warm process killed with -9) costs the hook nothing but a
/// diagnostic: the turn is answered, well within the deadline.
#[test]
fn a_stale_socket_is_answered_lexically() {
    let e = Env::new();
    e.skill(
        "pdf-tables",
        "pdf-tables",
        "Extract tables from scanned PDF files",
        "x",
    );
    fs::create_dir_all(&e.home).unwrap();
    drop(std::os::unix::net::UnixListener::bind(e.home.join("warm.sock")).unwrap());
    let out = e.hook(
        &claude("extract the tables from this scanned pdf"),
        AUTO,
        &[],
    );
    assert!(context_of(&out).contains("pdf-tables"));
    let last = e.log().pop().unwrap();
    assert!(
        last["diagnostics"][0]
            .as_str()
            .unwrap()
            .contains("stale socket"),
        "{last}"
    );
}

/// The point of the warm path: with a sentence model loaded in the MCP server, the hook's turn
/// is ranked by both retrievers, which a fresh hook process does not do.
#[test]
#[cfg_attr(
    not(has_minilm),
    ignore = "set MINILM_TEST_MODEL_DIR to a sentence-model dir (see .ci/run)"
)]
fn the_warm_path_brings_hybrid_ranking_to_the_hook() {
    let model = std::env::var("MINILM_TEST_MODEL_DIR").expect("MINILM_TEST_MODEL_DIR");
    let e = Env::new();
    e.skill(
        "pdf-tables",
        "pdf-tables",
        "Extract tables from scanned PDF files",
        "x",
    );
    e.skill(
        "git-bisect",
        "git-bisect",
        "Find a bad commit with git bisect",
        "x",
    );
    let with_model: &[(&str, &str)] = &[
        ("SKILLSEARCH_MODEL_DIR", &model),
        ("SKILLSEARCH_MODE", "auto"),
    ];
    let prompt = claude("pull the tables out of this scanned pdf");
    e.hook(&prompt, with_model, &[]);
    let alone = e.log().pop().unwrap();
    assert_eq!(alone["retrievers"], json!(["lexical"]), "{alone}");

    let _server = Mcp::start(&e, &[("SKILLSEARCH_MODEL_DIR", &model)]);
    let t = std::time::Instant::now();
    loop {
        e.hook(&prompt, with_model, &[]);
        let last = e.log().pop().unwrap();
        if last["retrievers"] == json!(["lexical", "semantic"]) {
            assert!(last["elapsed_ms"].get("warm").is_some(), "{last}");
            assert_eq!(last["hits"][0]["name"], "pdf-tables", "{last}");
            break;
        }
        assert!(t.elapsed().as_secs() < 60, "never hybrid: {last}");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// `resolve_placeholders`: off by default (bodies as written); on, the hook resolves the PathGuard
/// placeholders to the host's directories (the prompt's `cwd`, `$HOME`, Claude Code's config
/// directory), leaves unsafe and unknown ones as written with a diagnostic, and the warm path
/// answers the same.
#[test]
fn placeholders_resolve_to_the_hosts_directories_when_asked() {
    let e = Env::new();
    e.skill(
        "pdf-tables",
        "pdf-tables",
        "Extract tables from scanned PDF files",
        "Run {{SKILL_DIR}}/run.sh after {{SKILL_DIR:ocr}}/SKILL.md; write {{OUTPUT_DIR}}/out.csv; \
         notes in {{AGENT_STATE_DIR}}/n and {{HOME}}/h. Not {{SKILL_DIR:../etc}} nor {{TOKEN}}.",
    );
    let prompt = serde_json::to_vec(&json!({"session_id": "s", "cwd": "/work/proj",
        "hook_event_name": "UserPromptSubmit", "prompt": "extract the tables from this scanned PDF"}))
    .unwrap();
    let off = context_of(&e.hook(&prompt, AUTO, &[]));
    assert!(off.contains("Run {{SKILL_DIR}}/run.sh"), "{off}");

    let on: &[(&str, &str)] = &[
        ("SKILLSEARCH_MODE", "auto"),
        ("SKILLSEARCH_RESOLVE_PLACEHOLDERS", "true"),
        ("HOME", "/home/u"),
        ("CLAUDE_CONFIG_DIR", "/home/u/.claude-alt"),
    ];
    let dir = e.root.join("pdf-tables");
    let want = format!(
        "Run {}/run.sh after {}/SKILL.md; write /work/proj/out.csv; notes in /home/u/.claude-alt/n \
         and /home/u/h. Not {{{{SKILL_DIR:../etc}}}} nor {{{{TOKEN}}}}.",
        dir.display(),
        e.root.join("ocr").display()
    );
    let cold = context_of(&e.hook(&prompt, on, &[]));
    assert!(cold.contains(&want), "{cold}");
    let diags = e.log().pop().unwrap()["diagnostics"].to_string();
    assert!(
        diags.contains("{{SKILL_DIR:../etc}} in local/pdf-tables left as written")
            && diags.contains("{{TOKEN}} in local/pdf-tables left as written: unknown placeholder"),
        "{diags}"
    );

    let server = Mcp::start(&e, &on[1..]);
    let warm = context_of(&e.hook(&prompt, on, &[]));
    assert!(
        e.log().pop().unwrap()["elapsed_ms"].get("warm").is_some(),
        "the warm process answered"
    );
    assert_eq!(warm, cold);
    // Another workspace, another output directory (not a cached answer).
    let elsewhere = serde_json::to_vec(&json!({"session_id": "s", "cwd": "/work/other",
        "hook_event_name": "UserPromptSubmit", "prompt": "extract the tables from this scanned PDF"}))
    .unwrap();
    let other = context_of(&e.hook(&elsewhere, on, &[]));
    assert!(other.contains("write /work/other/out.csv"), "{other}");
    server.stop();
}

/// The index's saved state (`<home>/indexes/*/state.json`): its path and contents.
fn index_state(e: &Env) -> (std::path::PathBuf, Value) {
    let dir = fs::read_dir(e.home.join("indexes"))
        .unwrap()
        .map(|d| d.unwrap().path())
        .find(|p| p.join("state.json").exists())
        .expect("an index");
    let path = dir.join("state.json");
    let v = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    (path, v)
}

/// Makes the index look checked `age_ms` ago by a check that took `cost_ms`.
fn age_index(e: &Env, age_ms: u64, cost_ms: u64) -> u64 {
    let (path, mut v) = index_state(e);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    v["verified_at_ms"] = json!(now - age_ms);
    v["check_ms"] = json!(cost_ms);
    fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
    now - age_ms
}

/// A library of 1,000 skills (the least that is ever checked in the background), one of them
/// about PDF tables.
fn large_library(e: &Env) {
    testkit_skill(&e.root, "pdf-tables");
    for i in 0..999 {
        let name = format!("filler-{i}");
        skillsearch_testkit::write_skill(&e.root, &name, &name, "Water the office plants", "x");
    }
}

/// A library whose check costs more than a turn (tens of thousands of skills) is checked after
/// the turn, by a detached process: the turn answers from the index as saved and says so, and
/// the next turns find what changed.
#[test]
fn a_costly_check_of_the_skill_files_runs_after_the_turn() {
    let e = Env::new();
    large_library(&e);
    let first = e.hook(
        &claude("extract the tables from this scanned pdf"),
        AUTO,
        &[],
    );
    assert!(context_of(&first).contains("pdf-tables"));
    let (_, state) = index_state(&e);
    assert!(state["check_ms"].as_u64().is_some(), "{state}");
    let checked = age_index(&e, 60_000, 60_000);
    e.skill(
        "zebra-ledger",
        "zebra-ledger",
        "Reconcile zebra ledgers line by line",
        "x",
    );
    let stale = e.hook(&claude("reconcile the zebra ledger"), AUTO, &[]);
    assert_eq!(stale.status.code(), Some(0));
    assert!(!context_of(&stale).contains("zebra-ledger"));
    let last = e.log().pop().unwrap();
    let diags = last["diagnostics"].to_string();
    assert!(
        diags.contains("skill files last checked 60.")
            && diags.contains("a check runs in the background (the last took 60000 ms"),
        "{last}"
    );
    // The detached check saves its time, and its real cost, once done.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let state = loop {
        let (_, v) = index_state(&e);
        if v["verified_at_ms"].as_u64().unwrap() > checked {
            break v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no background check: {v}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(state["check_ms"].as_u64().unwrap() < 60_000, "{state}");
    let next = e.hook(&claude("reconcile the zebra ledger"), AUTO, &[]);
    assert!(context_of(&next).contains("zebra-ledger"));
    let last = e.log().pop().unwrap();
    assert!(!last.to_string().contains("background"), "{last}");
}

/// While a check holds the index's check lock, a turn starts no other one.
#[test]
fn a_running_check_is_not_started_twice() {
    let e = Env::new();
    large_library(&e);
    e.hook(
        &claude("extract the tables from this scanned pdf"),
        AUTO,
        &[],
    );
    let checked = age_index(&e, 60_000, 60_000);
    let (state_path, _) = index_state(&e);
    let lock = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(state_path.with_file_name("check.lock"))
        .unwrap();
    lock.try_lock().unwrap();
    let out = e.hook(
        &claude("extract the tables from this scanned pdf"),
        AUTO,
        &[],
    );
    assert!(context_of(&out).contains("pdf-tables"));
    let last = e.log().pop().unwrap();
    assert!(
        last["diagnostics"]
            .to_string()
            .contains("while a check runs in the background"),
        "{last}"
    );
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (_, v) = index_state(&e);
    assert_eq!(v["verified_at_ms"].as_u64(), Some(checked), "{v}");
    drop(lock);
}

/// A small library whose last check was slow (a loaded machine) is still checked in the turn:
/// a skill added just before it is found.
#[test]
fn a_small_library_is_checked_in_the_turn_however_slow_its_last_check() {
    let e = Env::new();
    testkit_skill(&e.root, "pdf-tables");
    e.hook(
        &claude("extract the tables from this scanned pdf"),
        AUTO,
        &[],
    );
    age_index(&e, 60_000, 60_000);
    e.skill(
        "zebra-ledger",
        "zebra-ledger",
        "Reconcile zebra ledgers line by line",
        "x",
    );
    let out = e.hook(&claude("reconcile the zebra ledger"), AUTO, &[]);
    assert!(context_of(&out).contains("zebra-ledger"));
    let last = e.log().pop().unwrap();
    assert!(!last.to_string().contains("background"), "{last}");
}
