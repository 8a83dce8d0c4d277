//! The real daemon (and CLI) through faults that happen while it runs (#21, the standing
//! suite): SIGKILL under load, a full disk during a refresh, the index directory deleted, a
//! segment file truncated or garbled, FIFOs where files are written. The rule each test pins:
//! an index that was valid keeps answering, every fault is reported, and nothing hangs. Every
//! request and run has a time limit.

use serde_json::json;
use skillsearch_testkit::daemon::{Daemon, request};
use skillsearch_testkit::sys::{self, Tmpfs};
use skillsearch_testkit::{Env, write_skill};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_skillsearch");
const LIMIT: Duration = Duration::from_secs(20);
/// How long a change on disk may take to show in the daemon's answers.
const PICKUP: Duration = Duration::from_secs(15);

/// Two skills the tests ask for, among `filler` others.
fn corpus(e: &Env, filler: usize) {
    e.skill(
        "pdf-tables",
        "pdf-tables",
        "Extract tables from scanned PDF files",
        "The secret word is PARSNIP.",
    );
    e.skill(
        "git-bisect",
        "git-bisect",
        "Find the commit that broke a test",
        "Run git bisect run. The word is TURNIP.",
    );
    for i in 0..filler {
        e.skill(
            &format!("filler/topic-{i}"),
            &format!("topic-{i}"),
            &format!("Handle chores of kind {i} for the office"),
            &"Some steps for the chore, one after another.\n".repeat(20),
        );
    }
}

/// A word made of letters only that names `i` (digits would be split off by the analyzer).
fn word(i: usize) -> String {
    let w: String = i
        .to_string()
        .bytes()
        .map(|d| (b'a' + d - b'0') as char)
        .collect();
    format!("zq{w}")
}

fn start(e: &Env, extra: &[&str]) -> Daemon {
    Daemon::start(BIN, &e.home, &e.root, extra, &[])
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `skillsearch <args> --skills <root>` in `e`, within [`LIMIT`].
fn run(e: &Env, args: &[&str]) -> Output {
    let mut c = e.command(BIN);
    c.args(args).arg("--skills").arg(&e.root);
    sys::output_within(&mut c, b"", LIMIT)
}

/// The one index directory under the home.
fn index_dir(home: &Path) -> PathBuf {
    let dirs: Vec<_> = std::fs::read_dir(home.join("indexes"))
        .unwrap()
        .map(|d| d.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "one index and nothing else: {dirs:?}");
    dirs[0].clone()
}

/// Every file under `dir` with its size (directories left out: their times change when a
/// file is made and removed again, which is no debris).
fn files(dir: &Path) -> BTreeMap<PathBuf, u64> {
    sys::stamps(dir)
        .into_iter()
        .filter(|(p, _)| p.is_file())
        .map(|(p, (len, _))| (p, len))
        .collect()
}

/// The segment files of the index (not the meta or lock files).
fn segment_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir.join("tantivy"))
        .unwrap()
        .map(|f| f.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            !name.starts_with('.')
                && !name.ends_with(".json")
                && std::fs::metadata(p).unwrap().len() > 0
        })
        .collect()
}

/// The problems `/v1/health` reports, as one string.
fn problems(d: &Daemon) -> String {
    d.health()["problems"].to_string()
}

/// Waits until `cond` holds, for at most [`PICKUP`].
fn wait_for(what: &str, d: &Daemon, mut cond: impl FnMut() -> bool) {
    let started = Instant::now();
    while !cond() {
        assert!(
            started.elapsed() < PICKUP,
            "{what} did not happen within {PICKUP:?}; health {}\nstderr: {}",
            d.health(),
            d.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn kill_9_under_load_clients_get_errors_not_hangs_and_the_next_start_serves() {
    let e = Env::new();
    corpus(&e, 300);
    let mut d = start(&e, &["--mode", "auto"]);
    d.search_until("scanned pdf tables", "PARSNIP", LIMIT);
    let stop = Arc::new(AtomicBool::new(false));
    // A writer keeps the watcher refreshing, so a commit is likely under way at the kill.
    let writer = {
        let (stop, root) = (stop.clone(), e.root.clone());
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                write_skill(
                    &root,
                    &format!("new/zeppelin-{i}"),
                    &format!("zeppelin-{i}"),
                    &format!("Moor a zeppelin to the mast {}", word(i)),
                    &format!("Mast number {i}."),
                );
                i += 1;
                std::thread::sleep(Duration::from_millis(30));
            }
            i
        })
    };
    let clients: Vec<_> = (0..4)
        .map(|c| {
            let (stop, addr) = (stop.clone(), d.addr.clone());
            std::thread::spawn(move || {
                let (mut ok, mut failed, mut slowest) = (0, 0, Duration::ZERO);
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    let (path, body) = match i % 3 {
                        0 => (
                            "/v1/search",
                            json!({"query": format!("scanned pdf tables {c} {i}")}),
                        ),
                        1 => (
                            "/v1/retrieve",
                            json!({"query": "extract tables from a scanned pdf", "mode": "auto"}),
                        ),
                        _ => ("/v1/read", json!({"id": "local/pdf-tables"})),
                    };
                    let t = Instant::now();
                    let r = request(
                        &addr,
                        "POST",
                        path,
                        &serde_json::to_vec(&body).unwrap(),
                        Duration::from_secs(5),
                    );
                    slowest = slowest.max(t.elapsed());
                    match r {
                        Ok((200, v))
                            if v["text"].as_str().is_some_and(|t| t.contains("PARSNIP")) =>
                        {
                            ok += 1
                        }
                        Ok((st, v)) => panic!("client {c}: a live daemon answered {st} {v}"),
                        Err(_) => {
                            failed += 1;
                            std::thread::sleep(Duration::from_millis(20));
                        }
                    }
                    i += 1;
                }
                (ok, failed, slowest)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    d.kill9();
    let killed = Instant::now();
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        let (ok, failed, slowest) = c.join().unwrap();
        assert!(ok > 0, "answers before the kill");
        assert!(failed > 0, "errors after the kill");
        assert!(
            slowest < Duration::from_secs(4),
            "a request hung for {slowest:?}"
        );
    }
    assert!(
        killed.elapsed() < Duration::from_secs(5),
        "clients took {:?} to notice",
        killed.elapsed()
    );
    let written = writer.join().unwrap();
    // A fresh daemon on the same home: no stale lock, no debris, and every skill written is
    // found (the killed refresh left the previous commit, and the new one catches up).
    let d = start(&e, &["--mode", "auto"]);
    d.search_until("scanned pdf tables", "PARSNIP", LIMIT);
    let last = format!("Mast number {}.", written - 1);
    d.search_until(&word(written - 1), &last, PICKUP);
    index_dir(&e.home);
    drop(d);
    let out = run(&e, &["index", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["skills"], 302 + written, "{v}");
    assert!(v["rebuilt"].is_null(), "the index needed no rebuild: {v}");
}

#[test]
fn a_full_disk_during_a_refresh_keeps_the_last_index_answering_and_is_reported() {
    let e = Env::new();
    let disk = match Tmpfs::mount(&e.home, 8 << 20) {
        Ok(t) => t,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    corpus(&e, 100);
    let d = start(&e, &[]);
    d.search_until("scanned pdf tables", "PARSNIP", LIMIT);
    assert_eq!(problems(&d), "[]");
    let dir = index_dir(&e.home);
    let filler = disk.fill();
    let before = files(&dir);
    // Skills change while the disk is full: the refresh cannot save them.
    for i in 0..20 {
        write_skill(
            &e.root,
            &format!("new/zeppelin-{i}"),
            &format!("zeppelin-{i}"),
            "Moor a zeppelin to its mast",
            &"Tie the ropes to the mast, one after another.\n".repeat(50),
        );
    }
    wait_for("a reported refresh failure", &d, || {
        problems(&d).contains("No space left")
    });
    // The last saved index answers, and the failed refresh left nothing behind.
    assert!(d.search("scanned pdf tables").contains("PARSNIP"));
    assert!(
        d.search("find the commit that broke a test")
            .contains("TURNIP")
    );
    assert_eq!(
        files(&dir),
        before,
        "a failed refresh left files behind or changed some"
    );
    assert!(d.stderr().contains("No space left"), "{}", d.stderr());
    // Space freed: the next refresh saves the changes and the problem goes.
    std::fs::remove_file(&filler).unwrap();
    write_skill(&e.root, "new/last", "last", "The last one", "x");
    d.search_until("moor a zeppelin mast", "Tie the ropes", PICKUP);
    wait_for("the problem cleared", &d, || problems(&d) == "[]");
    drop(d);
    drop(disk);
}

#[test]
fn the_index_directory_deleted_under_a_running_daemon_is_recreated() {
    let e = Env::new();
    corpus(&e, 50);
    let mut d = start(&e, &[]);
    d.search_until("scanned pdf tables", "PARSNIP", LIMIT);
    std::fs::remove_dir_all(e.home.join("indexes")).unwrap();
    // Still answering from what it holds...
    for _ in 0..20 {
        assert!(d.search("scanned pdf tables").contains("PARSNIP"));
    }
    // ...and a change on disk is indexed again, into a recreated index.
    write_skill(
        &e.root,
        "zeppelin",
        "zeppelin",
        "Moor a zeppelin safely",
        "Use the mast.",
    );
    d.search_until("zeppelin mooring", "Use the mast", PICKUP);
    assert!(
        d.search("find the commit that broke a test")
            .contains("TURNIP")
    );
    assert!(d.alive());
    wait_for("the index saved again", &d, || {
        e.home.join("indexes").is_dir() && index_dir(&e.home).join("state.json").is_file()
    });
    // What it saved is a valid index: a fresh process answers from it without a rebuild.
    drop(d);
    let out = run(&e, &["search", "zeppelin mooring", "--refresh", "never"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("zeppelin"),
        "{}",
        text(&out.stdout)
    );
    assert!(
        !text(&out.stderr).contains("rebuil"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn segment_files_truncated_under_a_running_daemon_neither_crash_it_nor_change_its_answers() {
    let e = Env::new();
    corpus(&e, 50);
    let mut d = start(&e, &[]);
    d.search_until("scanned pdf tables", "PARSNIP", LIMIT);
    let dir = index_dir(&e.home);
    let segments = segment_files(&dir);
    assert!(!segments.is_empty());
    for p in &segments {
        let f = std::fs::OpenOptions::new().write(true).open(p).unwrap();
        f.set_len(f.metadata().unwrap().len() / 2).unwrap();
    }
    for i in 0..10 {
        assert!(
            d.search(&format!("scanned pdf tables {i}"))
                .contains("PARSNIP")
        );
        assert!(
            d.search(&format!("find the commit that broke a test {i}"))
                .contains("TURNIP")
        );
        let (_, v) = d.post("/v1/read", &json!({"id": "local/git-bisect"}));
        assert!(v["text"].as_str().unwrap().contains("TURNIP"), "{v}");
    }
    // A refresh over the damaged files still works, and the answers stay right.
    write_skill(
        &e.root,
        "zeppelin",
        "zeppelin",
        "Moor a zeppelin safely",
        "Use the mast.",
    );
    d.search_until("zeppelin mooring", "Use the mast", PICKUP);
    assert!(d.search("scanned pdf tables").contains("PARSNIP"));
    assert!(d.alive(), "the daemon died: {}", d.stderr());
    // The next process finds the damage, says so, rebuilds, and answers.
    drop(d);
    let out = run(&e, &["search", "scanned pdf tables", "--refresh", "never"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("pdf-tables"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn a_garbled_segment_file_is_detected_and_rebuilt_by_the_next_process() {
    let e = Env::new();
    corpus(&e, 50);
    assert_eq!(run(&e, &["index"]).status.code(), Some(0));
    let dir = index_dir(&e.home);
    // Same size, other bytes: nothing a length check sees.
    for p in segment_files(&dir) {
        let mut bytes = std::fs::read(&p).unwrap();
        let n = bytes.len();
        // The middle of the bigger files only: tantivy's own checks of each file's footer
        // (its last ~100 bytes) would catch the rest.
        if n < 1024 {
            continue;
        }
        for b in &mut bytes[n / 8..n / 2] {
            *b = b.wrapping_mul(31).wrapping_add(7);
        }
        std::fs::write(&p, bytes).unwrap();
    }
    // The damage is found (the files differ from what their commit recorded, and their
    // checksums fail), said, and the index rebuilt.
    let out = run(&e, &["search", "scanned pdf tables", "--refresh", "never"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("rebuil"), "{err}");
    for (query, want) in [
        ("scanned pdf tables", "pdf-tables"),
        ("find the commit that broke a test", "git-bisect"),
    ] {
        let out = run(&e, &["search", query, "--refresh", "never"]);
        assert_eq!(out.status.code(), Some(0), "{query}: {}", text(&out.stderr));
        let first = text(&out.stdout);
        assert!(
            first.lines().next().unwrap_or("").contains(want),
            "{query}: {first}"
        );
    }
    // The daemon too, after a rebuild the CLI did not get to: garble again.
    for p in segment_files(&index_dir(&e.home)) {
        let mut bytes = std::fs::read(&p).unwrap();
        let n = bytes.len();
        if n < 1024 {
            continue;
        }
        for b in &mut bytes[n / 8..n / 2] {
            *b ^= 0xa5;
        }
        std::fs::write(&p, bytes).unwrap();
    }
    let d = start(&e, &[]);
    assert!(d.search("scanned pdf tables").contains("PARSNIP"));
    assert!(
        d.search("find the commit that broke a test")
            .contains("TURNIP")
    );
    assert!(d.stderr().contains("rebuilding"), "{}", d.stderr());
}

#[test]
fn a_fifo_where_the_decision_log_is_written_never_hangs_the_daemon_or_the_hook() {
    let e = Env::new();
    corpus(&e, 10);
    let log = e.home.join("logs/decisions.jsonl");
    sys::mkfifo(&log);
    let d = start(&e, &["--mode", "auto"]);
    let started = Instant::now();
    let (st, v) = request(
        &d.addr,
        "POST",
        "/v1/retrieve",
        br#"{"query": "extract tables from a scanned pdf", "mode": "auto"}"#,
        Duration::from_secs(10),
    )
    .expect("the daemon answers although its log is a FIFO");
    assert_eq!(st, 200);
    assert!(v["text"].as_str().unwrap().contains("PARSNIP"), "{v}");
    assert!(started.elapsed() < Duration::from_secs(5));
    // And keeps answering (no runner is stuck on the log).
    for i in 0..6 {
        assert!(
            d.search(&format!("scanned pdf tables {i}"))
                .contains("PARSNIP")
        );
    }
    assert!(
        d.stderr().contains("decision log") && d.stderr().contains("FIFO"),
        "{}",
        d.stderr()
    );
    drop(d);
    // The hook injects the skills; only its log line is lost.
    let mut c = e.command(BIN);
    c.arg("hook")
        .env("SKILLSEARCH_SKILLS_DIRS", &e.root)
        .env("SKILLSEARCH_MODE", "auto");
    let input = json!({"session_id": "s", "cwd": "/", "hook_event_name": "UserPromptSubmit", "prompt": "extract tables from a scanned pdf"});
    let out = sys::output_within(&mut c, &serde_json::to_vec(&input).unwrap(), LIMIT);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text(&out.stdout).contains("PARSNIP"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn fifos_where_the_index_writes_never_hang_and_are_named() {
    let e = Env::new();
    corpus(&e, 10);
    assert_eq!(run(&e, &["index"]).status.code(), Some(0));
    let dir = index_dir(&e.home);
    let tantivy = dir.join("tantivy");
    // The writer's lock file: a refresh with changes must not block on it.
    sys::mkfifo(&tantivy.join(".tantivy-writer.lock"));
    write_skill(
        &e.root,
        "zeppelin",
        "zeppelin",
        "Moor a zeppelin safely",
        "Use the mast.",
    );
    let out = run(&e, &["search", "scanned pdf tables", "--refresh", "always"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("pdf-tables"));
    assert!(text(&out.stderr).contains("FIFO"), "{}", text(&out.stderr));
    let out = run(&e, &["index"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains(".tantivy-writer.lock"),
        "{}",
        text(&out.stderr)
    );
    std::fs::remove_file(tantivy.join(".tantivy-writer.lock")).unwrap();
    // The readers' lock file, and the index's meta file: opening must not block either.
    for name in [".tantivy-meta.lock", "meta.json", "state.json"] {
        let at = if name == "state.json" {
            dir.join(name)
        } else {
            tantivy.join(name)
        };
        sys::mkfifo(&at);
        let out = run(&e, &["search", "zeppelin mooring"]);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", text(&out.stderr));
        assert!(
            text(&out.stdout).contains("zeppelin"),
            "{name}: {}",
            text(&out.stdout)
        );
        let dir = index_dir(&e.home);
        let fifo_left = [dir.join("state.json"), dir.join("tantivy").join(name)]
            .iter()
            .any(|p| std::fs::symlink_metadata(p).is_ok_and(|m| !m.is_file()));
        assert!(!fifo_left, "{name}: the FIFO is still there");
    }
}
