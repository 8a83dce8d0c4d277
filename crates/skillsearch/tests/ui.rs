//! `skillsearch ui` end to end: the real binary on a loopback port the OS picks, its JSON routes
//! read over plain HTTP/1.1, and the page itself in a real browser (headless Chromium from
//! Debian's `chromium` package, driven over the DevTools protocol: [`Page`]) asserting on what a
//! person sees: search hits with their explanation, the turns table, the empty-log message, a
//! 100,000-turn log paged, the ClawHub corpus with a 200-turn log made by real turns, and a
//! person's clicks and keys: a prompt typed and sent, the turns filtered by host, date, surface
//! and mode, the pages turned, the sections brought up from the header.
//!
//! Without `chromium` on PATH the browser tests print `skipped: chromium not installed` and
//! return, unless `UI_BROWSER_TESTS=1` (CI), where a missing browser fails them.

use serde_json::{Value, json};
use skillsearch_core::turn::decision_log::{Decision, DecisionLog, LoggedHit, LoggedTools};
use skillsearch_testkit::browser::{self, Browser};
use skillsearch_testkit::daemon::{Daemon, http};
use skillsearch_testkit::{Env, write_file, write_skill};
use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_skillsearch");

/// `ui --listen 127.0.0.1:0 --skills <root>…` with `extra` arguments and `env`.
fn ui(home: &Path, roots: &[&Path], extra: &[&str], env: &[(&str, &OsStr)]) -> Daemon {
    let mut args: Vec<&OsStr> = ["ui", "--listen", "127.0.0.1:0"]
        .iter()
        .map(OsStr::new)
        .collect();
    for r in roots {
        args.push(OsStr::new("--skills"));
        args.push(r.as_os_str());
    }
    args.extend(extra.iter().map(OsStr::new));
    Daemon::spawn(BIN, home, &args, env)
}

/// `GET path` with extra headers: (status, body as JSON, body bytes).
fn get_with(d: &Daemon, path: &str, headers: &[&str]) -> (u16, Value, usize) {
    let a = http(&d.addr, "GET", path, headers, b"", Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("GET {path}: {e}; stderr: {}", d.stderr()));
    (a.status, a.json(), a.body.len())
}

fn get(d: &Daemon, path: &str) -> Value {
    let (status, v, _) = get_with(d, path, &[]);
    assert_eq!(status, 200, "GET {path}: {v}; stderr: {}", d.stderr());
    v
}

/// A turn as the hook logs it.
fn turn(i: usize, host: &str, mode: &str, query: &str, hits: &[&str], tokens: usize) -> Decision {
    let mut d = Decision::new("hook", host, mode, query);
    d.ts = format!(
        "2026-11-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        1 + (i / 86_400) % 28,
        (i / 3600) % 24,
        (i / 60) % 60,
        i % 60,
        i % 1000
    );
    d.hits = hits
        .iter()
        .map(|id| LoggedHit {
            id: format!("local/{id}"),
            name: id.to_string(),
            source: "local".into(),
            score: 1.5,
        })
        .collect();
    d.injected_tokens = tokens;
    d.injected_chars = tokens * 4;
    d.retrievers = vec!["lexical".into()];
    d.elapsed_ms.insert("total".into(), 3.25);
    d
}

/// A library of two skills, `pdf-tables` and `slack-post`.
fn two_skills() -> Env {
    let e = Env::new();
    e.skill(
        "pdf-tables",
        "pdf-tables",
        "Extract tables from PDF files",
        "Body.",
    );
    e.skill(
        "slack-post",
        "slack-post",
        "Post a message to Slack",
        "Body.",
    );
    e
}

/// A small library over two roots: a shadowed copy, a skill this machine cannot run, and a
/// broken file (read as body only, with a diagnostic).
fn library(e: &Env) -> PathBuf {
    e.skill(
        "pdf-tables",
        "pdf-tables",
        "Extract tables from scanned PDF files into CSV",
        "Use pdfplumber to read each page's tables.",
    );
    e.skill(
        "slack-post",
        "slack-post",
        "Post a message to a Slack channel",
        "Call chat.postMessage with the channel id.",
    );
    e.file(
        "needs-tool/SKILL.md",
        "---\nname: needs-tool\ndescription: Render diagrams with a missing tool\nmetadata: {\"openclaw\":{\"requires\":{\"bins\":[\"definitely-not-installed-tool-xyz\"]}}}\n---\nRun the tool.\n",
    );
    e.file("broken/SKILL.md", "---\nname: [unclosed\n");
    let second = e.root.parent().unwrap().join("team-skills");
    write_skill(
        &second,
        "pdf-tables",
        "pdf-tables",
        "A team copy of the PDF table extractor",
        "Older copy.",
    );
    second
}

#[test]
fn the_api_answers_search_turns_funnel_library_and_evals() {
    let e = Env::new();
    let second = library(&e);
    let log = DecisionLog::new(e.home.join("logs/decisions.jsonl"), 1 << 30);
    for i in 0..30 {
        let (host, mode) = match i % 3 {
            0 => ("codex", "auto"),
            1 => ("claude-code", "auto"),
            _ => ("claude-code", "on_demand"),
        };
        let mut d = turn(
            i,
            host,
            mode,
            &format!("extract tables from pdf {i}"),
            &["pdf-tables"],
            400 + i,
        );
        if i == 7 {
            d.error = Some("deadline passed".into());
        }
        log.append(&d).unwrap();
    }
    let mut planned = turn(30, "openclaw", "plan", "chart the sales", &[], 0);
    planned.surface = "serve".into();
    planned.tools = Some(LoggedTools {
        visible: vec!["read".into()],
        hidden: vec!["chart_make".into()],
        activated_plugins: vec![],
        tokens_shown: 120,
        tokens_hidden: 880,
    });
    log.append(&planned).unwrap();
    // A line written by something that did not redact: the page redacts it.
    let mut raw = turn(31, "codex", "auto", "", &[], 0);
    raw.query = "use key sk-abcdefghijklmnop1234 for the api".into();
    let mut line = serde_json::to_vec(&raw).unwrap();
    line.push(b'\n');
    std::fs::OpenOptions::new()
        .append(true)
        .open(log.path())
        .and_then(|mut f| f.write_all(&line))
        .unwrap();
    // A stored eval run, through the CLI.
    let queries = e.root.parent().unwrap().join("mine.jsonl");
    std::fs::write(
        &queries,
        "{\"id\":\"q1\",\"query\":\"extract tables from a scanned pdf\",\"relevant\":{\"pdf-tables\":1}}\n",
    )
    .unwrap();
    for _ in 0..2 {
        let out = e
            .command(BIN)
            .args(["eval", "--skills"])
            .arg(&e.root)
            .arg("--queries")
            .arg(&queries)
            .args(["--save", "--json"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    let d = ui(&e.home, &[&e.root, &second], &[], &[]);
    // The page and its files, embedded, loading nothing from elsewhere.
    let page = http(&d.addr, "GET", "/", &[], b"", Duration::from_secs(20)).unwrap();
    assert_eq!(page.status, 200);
    let html = String::from_utf8_lossy(&page.body);
    assert!(html.contains("<script src=\"/page.js\""), "{html}");
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "{html}"
    );
    assert!(
        page.header("content-security-policy")
            .unwrap()
            .contains("default-src 'none'")
    );
    let js = http(
        &d.addr,
        "GET",
        "/page.js",
        &[],
        b"",
        Duration::from_secs(20),
    )
    .unwrap();
    assert_eq!(js.status, 200);
    assert!(
        js.header("content-type")
            .unwrap()
            .starts_with("text/javascript")
    );
    let js = String::from_utf8_lossy(&js.body);
    assert!(
        !js.contains("https://") && !js.contains("innerHTML"),
        "the page fetches nothing from elsewhere and inserts no markup"
    );
    assert!(
        !js.contains("style:"),
        "inline styles are blocked by the page's own policy"
    );

    // Search: the engine's explanation and its text form.
    let s = get(&d, "/api/search?q=extract+tables+from+a+scanned+pdf");
    let hits: Vec<&str> = s["explanation"]["skills"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["status"] == "hit")
        .map(|s| s["qualified_id"].as_str().unwrap())
        .collect();
    assert_eq!(hits.first(), Some(&"local/pdf-tables"), "{s}");
    let text = s["text"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        text.contains("query: extract tables from a scanned pdf"),
        "{text}"
    );
    assert!(text.contains("local/pdf-tables"), "{text}");

    // Turns: newest first, filtered, paged.
    let t = get(&d, "/api/turns?per_page=10");
    assert_eq!(
        (t["all"].as_u64(), t["total"].as_u64(), t["pages"].as_u64()),
        (Some(32), Some(32), Some(4))
    );
    assert_eq!(t["turns"][0]["query"], "use key [redacted] for the api");
    assert_eq!(t["turns"][1]["mode"], "plan");
    assert_eq!(t["turns"][1]["n"], 31);
    assert_eq!(t["turns"][2]["query"], "extract tables from pdf 29");
    let t = get(&d, "/api/turns?host=codex&mode=auto");
    assert_eq!(t["total"], 11);
    assert!(
        t["turns"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["host"] == "codex")
    );
    let t = get(
        &d,
        "/api/turns?since=2026-11-01T00:00:10&until=2026-11-01T00:00:19.999Z",
    );
    assert_eq!(t["total"], 10, "{t}");
    let hosts: Vec<(&str, u64)> = t["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["name"].as_str().unwrap(), f["turns"].as_u64().unwrap()))
        .collect();
    assert_eq!(hosts, [("claude-code", 20), ("codex", 11), ("openclaw", 1)]);
    // By surface: the planned turn came through `serve`; no turn lacks a host.
    let t = get(&d, "/api/turns?surface=serve");
    assert_eq!(
        (t["total"].as_u64(), t["turns"][0]["mode"].as_str()),
        (Some(1), Some("plan"))
    );
    let surfaces: Vec<(&str, u64)> = t["surfaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["name"].as_str().unwrap(), f["turns"].as_u64().unwrap()))
        .collect();
    assert_eq!(surfaces, [("hook", 31), ("serve", 1)]);
    assert_eq!(get(&d, "/api/turns?surface=serve&mode=auto")["total"], 0);
    assert_eq!(get(&d, "/api/turns?host=-")["total"], 0);
    let failed = get(&d, "/api/turns?page=3&per_page=10");
    assert_eq!(failed["turns"][4]["error"], "deadline passed", "{failed}");

    // Funnel: the log's tokens against the catalogue counted from the index.
    let f = get(&d, "/api/funnel?points=3&until=2026-11-01T00:00:29.999");
    assert_eq!(f["turns"], 30);
    assert_eq!(f["tokens"], (0..30).map(|i| 400 + i).sum::<u64>());
    assert_eq!(f["points"].as_array().unwrap().len(), 3);
    assert_eq!(f["points"][2]["max"], 429);
    assert_eq!(
        f["catalogue"]["skills"], 3,
        "pdf-tables, slack-post and broken (read as body only) are offered: {f}"
    );
    assert!(f["catalogue"]["exact"].as_bool().unwrap());
    let cat = f["catalogue"]["tokens"].as_f64().unwrap();
    assert!(cat > 100.0 && cat < 1000.0, "{cat}");
    assert!((f["catalogue_tokens"].as_f64().unwrap() - 30.0 * cat).abs() < 1e-6);
    assert_eq!(f["tool_turns"], 0);
    let f = get(&d, "/api/funnel");
    assert_eq!(
        (f["turns"].as_u64(), f["tool_turns"].as_u64()),
        (Some(31), Some(1))
    );
    assert_eq!(
        (f["tools_shown"].as_u64(), f["tools_hidden"].as_u64()),
        (Some(120), Some(880))
    );
    assert_eq!(f["failed"], 1);

    // Library.
    let l = get(&d, "/api/library?recent=100");
    assert_eq!(l["roots"][0]["skills"], 4);
    assert_eq!(l["roots"][1]["skills"], 1);
    assert_eq!(l["roots"][1]["shadowed"], 1);
    assert_eq!(l["held_back"][0]["id"], "needs-tool");
    assert_eq!(l["held_back"][0]["code"], "bins");
    assert_eq!(l["shadowed"][0]["name"], "pdf-tables");
    let codes: Vec<&str> = l["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap())
        .collect();
    assert!(codes.contains(&"name-collision"), "{codes:?}");
    assert!(
        codes
            .iter()
            .any(|c| c.starts_with("frontmatter") || c.starts_with("yaml")),
        "{codes:?}"
    );
    assert_eq!(
        l["never_found"]["skills"],
        json!(["broken", "slack-post"]),
        "{l}"
    );
    assert_eq!(l["never_found"]["recent_turns"], 32);

    // Eval runs, per set.
    let ev = get(&d, "/api/evals");
    assert_eq!(ev["sets"][0]["set"], "mine");
    assert_eq!(ev["sets"][0]["runs"].as_array().unwrap().len(), 2);
    assert_eq!(ev["sets"][0]["runs"][0]["metrics"]["hit@1"], 1.0);
}

#[test]
fn bad_requests_get_clear_json_errors() {
    let e = two_skills();
    let d = ui(&e.home, &[&e.root], &[], &[]);
    let err = |path: &str, headers: &[&str], status: u16, code: &str, says: &str| {
        let (st, v, _) = get_with(&d, path, headers);
        assert_eq!(st, status, "{path}: {v}");
        assert_eq!(v["code"], code, "{path}: {v}");
        let msg = v["error"].as_str().unwrap();
        assert!(msg.contains(says), "{path}: {msg}");
    };
    err(
        "/api/turns?colour=red",
        &[],
        400,
        "bad-param",
        "parameter `colour`: not known here",
    );
    err(
        "/api/turns?page=0",
        &[],
        400,
        "bad-param",
        "parameter `page`: `0` is not a whole number",
    );
    err(
        "/api/turns?page=2",
        &[],
        400,
        "bad-param",
        "page 2 is past the last page (1)",
    );
    err(
        "/api/turns?since=yesterday",
        &[],
        400,
        "bad-param",
        "parameter `since`: `yesterday` is not a date",
    );
    err(
        "/api/turns?since=2026-12-02&until=2026-12-01",
        &[],
        400,
        "bad-param",
        "is after until",
    );
    err(
        "/api/search?q=+",
        &[],
        400,
        "bad-param",
        "parameter `q`: empty",
    );
    err(
        "/api/search?q=x&top_k=1000",
        &[],
        400,
        "bad-param",
        "from 1 to 50",
    );
    err(
        "/api/nothing",
        &[],
        404,
        "not-found",
        "no such route `/api/nothing`",
    );
    // A page elsewhere that rebinds its name to 127.0.0.1 gets nothing.
    let (st, v, _) = get_with(&d, "/api/turns", &[]);
    assert_eq!(st, 200, "{v}");
    let mut s = std::net::TcpStream::connect(&d.addr).unwrap();
    s.write_all(b"GET /api/library HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut resp = String::new();
    std::io::Read::read_to_string(&mut s, &mut resp).unwrap();
    assert!(resp.starts_with("HTTP/1.1 403"), "{resp}");
    assert!(resp.contains("host-refused"), "{resp}");
    drop(d);

    // A log that is off.
    let d = ui(
        &e.home,
        &[&e.root],
        &[],
        &[("SKILLSEARCH_LOG_PATH", OsStr::new("off"))],
    );
    let (st, v, _) = get_with(&d, "/api/turns", &[]);
    assert_eq!((st, v["code"].as_str()), (409, Some("log-off")), "{v}");
    let l = get(&d, "/api/library");
    assert!(l["never_found"].is_null(), "{l}");
}

#[test]
fn off_loopback_needs_a_token_and_a_token_guards_every_api_call() {
    let e = two_skills();
    let out = e
        .command(BIN)
        .args(["ui", "--listen", "0.0.0.0:0", "--skills"])
        .arg(&e.root)
        .env_remove("SKILLSEARCH_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refusing to listen on 0.0.0.0:0 without --token"),
        "{err}"
    );

    let d = ui(
        &e.home,
        &[&e.root],
        &[],
        &[("SKILLSEARCH_TOKEN", OsStr::new("s3cret-token"))],
    );
    let (st, v, _) = get_with(&d, "/api/turns", &[]);
    assert_eq!((st, v["code"].as_str()), (401, Some("unauthorized")), "{v}");
    let (st, _, _) = get_with(&d, "/api/turns", &["Authorization: Bearer wrong"]);
    assert_eq!(st, 401);
    let (st, v, _) = get_with(&d, "/api/turns", &["Authorization: Bearer s3cret-token"]);
    assert_eq!(st, 200, "{v}");
    // The page itself holds no data: it loads, then asks for the token.
    let page = http(&d.addr, "GET", "/", &[], b"", Duration::from_secs(20)).unwrap();
    assert_eq!(page.status, 200);
}

/// Writes `n` turns in the decision log's own format (as `DecisionLog::append` writes them).
fn write_log(path: &Path, n: usize) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let hosts = ["claude-code", "codex", "codebuddy", "openclaw"];
    for i in 0..n {
        let d = turn(
            i,
            hosts[i % 4],
            if i % 5 == 0 { "on_demand" } else { "auto" },
            &format!("turn {i}: extract the tables from report-{i}.pdf and chart them"),
            if i % 5 == 0 {
                &[]
            } else {
                &["pdf-tables", "slack-post"]
            },
            if i % 5 == 0 { 0 } else { 1500 + i % 700 },
        );
        serde_json::to_writer(&mut f, &d).unwrap();
        f.write_all(b"\n").unwrap();
    }
    f.flush().unwrap();
}

#[test]
fn a_100000_turn_log_is_paged_and_a_page_is_small_and_fast() {
    let e = two_skills();
    write_log(&e.home.join("logs/decisions.jsonl"), 100_000);
    let d = ui(&e.home, &[&e.root], &[], &[]);
    let started = Instant::now();
    let first = get(&d, "/api/turns");
    let first_ms = started.elapsed().as_millis();
    assert_eq!(first["all"], 100_000);
    assert_eq!(first["pages"], 2000);
    assert_eq!(first["turns"].as_array().unwrap().len(), 50);
    assert_eq!(first["turns"][0]["n"], 100_000);
    // Once indexed, any page of any filter answers fast and small.
    let mut worst = Duration::ZERO;
    for path in [
        "/api/turns?page=1000",
        "/api/turns?host=codex&page=500",
        "/api/turns?mode=on_demand&since=2026-11-01&until=2026-11-01",
        "/api/funnel",
    ] {
        let t = Instant::now();
        let (st, v, bytes) = get_with(&d, path, &[]);
        worst = worst.max(t.elapsed());
        assert_eq!(st, 200, "{path}: {v}");
        assert!(bytes < 64 * 1024, "{path}: {bytes} bytes");
    }
    assert!(
        worst < Duration::from_millis(1500),
        "slowest answer after indexing: {worst:?}"
    );
    assert!(
        first_ms < 20_000,
        "first answer (indexing 100,000 turns): {first_ms} ms"
    );
    let p = get(&d, "/api/turns?page=2000");
    assert_eq!(p["turns"].as_array().unwrap().len(), 50);
    assert_eq!(p["turns"][49]["n"], 1);
    let p = get(&d, "/api/turns?host=codex&page=500");
    assert_eq!(p["total"], 25_000);
    assert!(
        p["turns"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["host"] == "codex")
    );
    let f = get(&d, "/api/funnel");
    assert_eq!(f["points"].as_array().unwrap().len(), 120);
    assert_eq!(f["turns"], 100_000);
    // Appended turns show without a restart.
    let log = DecisionLog::new(e.home.join("logs/decisions.jsonl"), 1 << 40);
    log.append(&turn(100_000, "hermes", "auto", "one more", &[], 10))
        .unwrap();
    let p = get(&d, "/api/turns?per_page=1");
    assert_eq!(p["all"], 100_001);
    assert_eq!(p["turns"][0]["host"], "hermes");
}

// ------------------------------------------------------------------ the page in a browser

/// The page as a person has it: one headless Chromium tab (`skillsearch_testkit::browser`,
/// driven over the DevTools protocol) that a browser test opens `ui`'s page in, clicks and
/// types into, and reads. Every browser test starts here.
struct Page {
    browser: Browser,
}

impl Page {
    /// A browser, or `None` (after saying so) when `chromium` is missing and
    /// `UI_BROWSER_TESTS` is unset; with `UI_BROWSER_TESTS=1` a missing browser fails the test.
    fn start() -> Option<Page> {
        let Some(chromium) = browser::chromium() else {
            assert!(
                std::env::var_os("UI_BROWSER_TESTS").is_none(),
                "UI_BROWSER_TESTS is set but chromium is not installed (apt-get install chromium)"
            );
            eprintln!("skipped: chromium not installed");
            return None;
        };
        Some(Page {
            browser: Browser::launch(&chromium),
        })
    }

    /// Opens `path` of the page `d` serves and waits until its scripts have drawn everything,
    /// with no script error or blocked resource on the way.
    fn open(&mut self, d: &Daemon, path: &str) {
        let url = format!("http://{}{path}", d.addr);
        // Marks the document being left, so the wait below sees only the new one.
        self.eval("window.leaving = true");
        self.navigate(&url);
        self.wait_for(
            "!window.leaving && document.body && document.body.dataset.ready === '1'",
            &format!("{url} to finish loading"),
        );
        self.assert_fine();
    }

    /// No script error, blocked resource or policy violation so far.
    fn assert_fine(&mut self) {
        let problems = self.problems();
        assert!(problems.is_empty(), "the page had problems: {problems:#?}");
    }

    /// The text of `#id` as a person reads it.
    fn text(&mut self, id: &str) -> String {
        self.browser
            .text(&format!("#{id}"))
            .unwrap_or_else(|| panic!("no #{id} on the page"))
    }

    /// Rows of the turns table.
    fn rows(&mut self) -> usize {
        self.count("#turns-body tr.turn")
    }

    /// The texts of one column of the turns table (1: `#`, 2: time, 3: host, 4: surface, 5:
    /// mode), top to bottom.
    fn column(&mut self, n: usize) -> Vec<String> {
        let v = self.eval(&format!(
            "[...document.querySelectorAll('#turns-body tr.turn td:nth-child({n})')].map((td) => td.innerText)"
        ));
        serde_json::from_value(v).unwrap()
    }

    /// Whether a person sees the element `selector` matches: its top edge inside the window
    /// and nothing (the sticky header) drawn over it there.
    fn seen(&mut self, selector: &str) -> bool {
        let js = format!(
            "(() => {{ const e = document.querySelector({}); const r = e.getBoundingClientRect(); \
             if (r.top < 0 || r.top + 4 > innerHeight) return false; \
             const at = document.elementFromPoint(r.left + 4, r.top + 4); \
             return !!at && (at === e || e.contains(at)); }})()",
            json!(selector)
        );
        self.eval(&js) == Value::Bool(true)
    }

    /// Waits until `#id`'s text starts with `prefix`.
    fn wait_text(&mut self, id: &str, prefix: &str) {
        let js = format!(
            "(() => {{ const e = document.getElementById({}); return !!e && e.innerText.replace(/\\s+/g, ' ').trim().startsWith({}); }})()",
            json!(id),
            json!(prefix)
        );
        self.wait_for(&js, &format!("#{id} to read {prefix:?}"));
    }

    /// Chooses the option of the list `#id` whose text starts with `text`, as a person does
    /// with the keyboard: a click gives the list the focus, typing picks the option, Enter
    /// takes it.
    fn choose(&mut self, id: &str, text: &str) {
        self.click(&format!("#{id}"));
        self.type_text(text);
        self.press("Enter");
        let js = format!(
            "(() => {{ const s = document.getElementById({}); return s.selectedIndex >= 0 && s.options[s.selectedIndex].text.startsWith({}); }})()",
            json!(id),
            json!(text)
        );
        self.wait_for(&js, &format!("#{id} to show {text:?}"));
    }
}

impl std::ops::Deref for Page {
    type Target = Browser;
    fn deref(&self) -> &Browser {
        &self.browser
    }
}

impl std::ops::DerefMut for Page {
    fn deref_mut(&mut self) -> &mut Browser {
        &mut self.browser
    }
}

#[test]
fn in_a_browser_search_explains_and_an_empty_log_says_so() {
    let Some(mut page) = Page::start() else {
        return;
    };
    let e = Env::new();
    let second = library(&e);
    let d = ui(&e.home, &[&e.root, &second], &[], &[]);
    page.open(&d, "/?q=extract+tables+from+a+scanned+pdf");
    let hits = page.text("search-hits");
    assert!(
        hits.starts_with("rank skill score turn 1 pdf-tables local/pdf-tables"),
        "{hits}"
    );
    let why = page.text("explain-text");
    assert!(
        why.contains("query: extract tables from a scanned pdf"),
        "{why}"
    );
    assert!(why.contains("hits (top"), "{why}");
    assert!(why.contains("local/pdf-tables"), "{why}");
    // No turns yet: said in words, in the table's place and the funnel's.
    let empty = page.text("turns-empty");
    assert!(empty.starts_with("No turns logged yet in "), "{empty}");
    assert_eq!(page.rows(), 0);
    assert!(page.text("page-label").contains("page 1 of 1"));
    let funnel = page.text("funnel-empty");
    assert!(
        funnel.starts_with("No turns to plot yet. Listing all 3 eligible skills"),
        "{funnel}"
    );
    // The library says what is held back, shadowed and broken.
    let lib = page.text("library-summary");
    assert!(
        lib.contains("1 held back") && lib.contains("1 shadowed copies"),
        "{lib}"
    );
    assert!(page.text("library-held").contains("needs-tool"));
    assert!(page.text("library-shadowed").contains("pdf-tables"));
    assert!(page.text("evals-empty").starts_with("No stored runs in "));
}

#[test]
fn in_a_browser_a_100000_turn_log_shows_page_1_of_2000_and_filters() {
    let Some(mut page) = Page::start() else {
        return;
    };
    let e = two_skills();
    write_log(&e.home.join("logs/decisions.jsonl"), 100_000);
    let d = ui(&e.home, &[&e.root], &[], &[]);
    // Indexed once before the browser looks (the first request pays for it).
    get(&d, "/api/turns?per_page=1");
    let started = Instant::now();
    page.open(&d, "/");
    let took = started.elapsed();
    let label = page.text("page-label");
    assert!(label.contains("page 1 of 2,000"), "{label}");
    assert_eq!(page.rows(), 50);
    assert!(page.text("turns-summary").starts_with("100,000 turns"));
    assert!(
        page.text("turns-body")
            .contains("turn 99999: extract the tables from report-99999.pdf")
    );
    assert!(
        page.text("funnel-text")
            .starts_with("Over 100,000 turns skillsearch injected or returned")
    );
    assert!(
        page.count("#funnel-plot polyline") > 0,
        "the funnel is drawn"
    );
    assert!(took < Duration::from_secs(30), "the page took {took:?}");
    // Filters and pages live in the address.
    page.open(&d, "/?host=codex&page=3");
    assert!(page.text("page-label").contains("page 3 of 500"));
    assert!(
        page.text("turns-summary")
            .starts_with("25,000 turns of 100,000")
    );
    let hosts = page.column(3);
    assert!(
        hosts.len() == 50 && hosts.iter().all(|h| h == "codex"),
        "{hosts:?}"
    );
}

/// A log a person can filter every way: a turn every half hour over five days (2026-11-01 to
/// 2026-11-05), the hook's turns of three hosts in both modes, and every eighth an MCP tool call
/// (no host). Returns (host, surface, day, query) per turn, oldest first.
fn filterable_log(home: &Path) -> Vec<(&'static str, &'static str, String, String)> {
    let log = DecisionLog::new(home.join("logs/decisions.jsonl"), 1 << 30);
    let hosts = ["claude-code", "codex", "codebuddy"];
    let mut turns = Vec::new();
    for i in 0..240 {
        let query = format!("turn {i}: extract the tables from report-{i}.pdf");
        let d = if i % 8 == 7 {
            let mut d = turn(i * 1800, "", "skill_search", &query, &["pdf-tables"], 300);
            d.surface = "mcp".into();
            d
        } else {
            let mode = if i % 5 == 0 { "on_demand" } else { "auto" };
            turn(i * 1800, hosts[i % 3], mode, &query, &["pdf-tables"], 1500)
        };
        log.append(&d).unwrap();
        let day = d.ts[..10].to_owned();
        turns.push((
            if d.host.is_empty() { "" } else { hosts[i % 3] },
            if d.surface == "mcp" { "mcp" } else { "hook" },
            day,
            query,
        ));
    }
    turns
}

#[test]
fn in_a_browser_a_person_searches_filters_pages_and_moves_between_sections() {
    let Some(mut page) = Page::start() else {
        return;
    };
    let e = two_skills();
    let log = filterable_log(&e.home);
    let d = ui(&e.home, &[&e.root], &[], &[]);
    page.open(&d, "/");
    assert!(page.text("turns-summary").starts_with("240 turns"));
    assert_eq!(page.text("page-label"), "page 1 of 5");
    assert_eq!(page.rows(), 50);
    assert_eq!(page.text("search-out"), "");
    let surfaces = page.text("f-surface");
    assert_eq!(surfaces, "all hook (210) mcp (30)");

    // The sections: a click on one in the header brings it up, its heading not under the
    // header.
    assert!(
        !page.seen("#library h2"),
        "the library starts below the fold"
    );
    page.click("header nav a[href='#library']");
    page.wait_for(
        "location.hash === '#library'",
        "the address to name #library",
    );
    page.wait_for(
        "document.scrollingElement.scrollTop > 0",
        "the page to scroll",
    );
    assert!(page.seen("#library h2"), "the Library heading is in view");
    assert!(
        page.text("library-summary")
            .starts_with("2 skills in 2 files")
    );
    page.click("header nav a[href='#search']");
    page.wait_for("location.hash === '#search'", "the address to name #search");
    assert!(page.seen("#search h2"));
    assert!(!page.seen("#library h2"));

    // Search: type a prompt and press Enter; the hits and why appear, and the address keeps it.
    page.click("#q");
    page.type_text("extract tables from a scanned pdf");
    page.press("Enter");
    page.wait_for("document.getElementById('search-hits')", "the search hits");
    let hits = page.text("search-hits");
    assert!(
        hits.starts_with("rank skill score turn 1 pdf-tables local/pdf-tables"),
        "{hits}"
    );
    let why = page.text("explain-text");
    assert!(
        why.contains("query: extract tables from a scanned pdf") && why.contains("hits (top"),
        "{why}"
    );
    assert!(
        page.url().contains("?q=extract+tables+from+a+scanned+pdf"),
        "{}",
        page.url()
    );
    // Another prompt over the first, sent with the button.
    page.click("#q");
    page.press("ctrl+a");
    page.type_text("post a message to a slack channel");
    page.click("#search-form button");
    page.wait_text(
        "search-hits",
        "rank skill score turn 1 slack-post local/slack-post",
    );
    assert!(
        page.text("explain-text")
            .contains("query: post a message to a slack channel")
    );

    // Filter by host: the list, the count and the funnel follow.
    let codex: Vec<_> = log.iter().filter(|t| t.0 == "codex").collect();
    page.choose("f-host", "codex");
    page.click("#turns-form button[type=submit]");
    page.wait_text("turns-summary", &format!("{} turns of 240", codex.len()));
    let hosts = page.column(3);
    assert!(
        hosts.len() == 50 && hosts.iter().all(|h| h == "codex"),
        "{hosts:?}"
    );
    assert_eq!(page.text("page-label"), "page 1 of 2");
    assert!(page.url().contains("host=codex"), "{}", page.url());
    page.wait_text("funnel-text", &format!("Over {} turns", codex.len()));

    // The next page, and back.
    let first = page.column(1);
    page.click("#older");
    page.wait_text("page-label", "page 2 of 2");
    let second = page.column(1);
    assert_eq!(second.len(), codex.len() - 50);
    assert!(second[0].parse::<usize>().unwrap() < first[49].parse::<usize>().unwrap());
    assert!(page.column(3).iter().all(|h| h == "codex"));
    assert!(page.url().contains("page=2"), "{}", page.url());
    assert_eq!(
        page.eval("document.getElementById('older').disabled"),
        Value::Bool(true)
    );
    page.click("#newer");
    page.wait_text("page-label", "page 1 of 2");
    assert_eq!(page.column(1), first);

    // Filter by date: one day typed into both date fields (month first: the browser speaks
    // US English here), each clicked on its month.
    let day3: Vec<_> = codex.iter().filter(|t| t.2 == "2026-11-03").collect();
    for field in ["#f-since", "#f-until"] {
        page.click_at(field, 0.12);
        page.type_text("11032026");
    }
    page.click("#turns-form button[type=submit]");
    page.wait_text("turns-summary", &format!("{} turns of 240", day3.len()));
    let times = page.column(2);
    assert!(
        times.len() == day3.len() && times.iter().all(|t| t.starts_with("2026-11-03 ")),
        "{times:?}"
    );
    assert_eq!(page.text("page-label"), "page 1 of 1");
    assert!(
        page.url().contains("since=2026-11-03") && page.url().contains("until=2026-11-03"),
        "{}",
        page.url()
    );

    // Filter by surface, every host: the hook's turns of that day; then "(none)" for the host:
    // a hook turn always names one.
    let day: Vec<_> = log.iter().filter(|t| t.2 == "2026-11-03").collect();
    let hook = day.iter().filter(|t| t.1 == "hook").count();
    page.choose("f-host", "all");
    page.choose("f-surface", "hook");
    page.click("#turns-form button[type=submit]");
    page.wait_text("turns-summary", &format!("{hook} turns of 240"));
    assert!(page.column(4).iter().all(|s| s == "hook"));
    assert!(page.column(3).iter().all(|h| h != "—"));
    assert!(page.url().contains("surface=hook"), "{}", page.url());
    page.choose("f-host", "(none)");
    page.click("#turns-form button[type=submit]");
    page.wait_text("turns-empty", "None of the 240 turns match these filters.");
    assert_eq!(page.rows(), 0);
    // Every surface: the MCP tool calls of that day, which name no host.
    let mcp: Vec<_> = day.iter().filter(|t| t.1 == "mcp").collect();
    page.choose("f-surface", "all");
    page.click("#turns-form button[type=submit]");
    page.wait_text("turns-summary", &format!("{} turns of 240", mcp.len()));
    assert!(page.url().contains("host=-"), "{}", page.url());
    assert!(page.column(4).iter().all(|s| s == "mcp"));
    assert!(page.column(3).iter().all(|h| h == "—"));
    assert!(page.column(5).iter().all(|m| m == "skill_search"));
    assert!(page.text("turns-body").contains(&mcp[0].3));

    // A filter nothing matches says so.
    page.choose("f-mode", "on_demand");
    page.click("#turns-form button[type=submit]");
    page.wait_text("turns-empty", "None of the 240 turns match these filters.");
    assert_eq!(page.rows(), 0);
    page.assert_fine();
}

/// Prompts for the scripted log: what agents are asked to do, some matching ClawHub skills,
/// some small talk.
const PROMPTS: &[&str] = &[
    "extract the tables from this scanned PDF invoice into a spreadsheet",
    "post the release notes to our Slack channel",
    "what's the weather forecast for Berlin tomorrow",
    "summarize this YouTube video transcript",
    "create a GitHub issue for the login bug with repro steps",
    "search arXiv for recent papers on retrieval augmented generation",
    "convert this markdown document to a nicely formatted PDF",
    "send an email to the team about the outage",
    "translate the README into Japanese",
    "schedule a meeting on Google Calendar for Friday",
    "generate a bar chart of monthly revenue from sales.csv",
    "scrape the product prices from this web page",
    "transcribe the meeting recording audio file",
    "review this pull request for security problems",
    "book a table at an Italian restaurant nearby",
    "hello, how are you today?",
    "thanks, that's all",
    "deploy the app to Kubernetes and check the pods",
    "track my crypto portfolio and alert me on big moves",
    "write a Notion page with the project plan",
];

#[test]
fn in_a_browser_the_clawhub_library_with_200_real_turns_answers_the_three_questions() {
    let Some(mut page) = Page::start() else {
        return;
    };
    let clawhub =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/eval/corpora/clawhub");
    if !clawhub.is_dir() {
        assert!(
            std::env::var_os("UI_BROWSER_TESTS").is_none(),
            "UI_BROWSER_TESTS is set but the ClawHub corpus is missing at {}",
            clawhub.display()
        );
        eprintln!("skipped: no ClawHub corpus at {}", clawhub.display());
        return;
    }
    let e = Env::new();
    // A skill that activates a plugin, so planned turns hide that plugin's tools when they do
    // not need it.
    e.file(
        "chart-report/SKILL.md",
        "---\nname: chart-report\ndescription: Generate bar and line charts of revenue from CSV sales data\nmetadata:\n  openclaw:\n    activates:\n      plugins: [\"chart-generator\"]\n---\nUse chart_make.\n",
    );
    let plugins = e.root.parent().unwrap().join("plugins");
    write_file(
        &plugins.join("charts/openclaw.plugin.json"),
        r#"{"id":"chart-generator","contracts":{"tools":["chart_make","chart_style","chart_export"]}}"#,
    );
    let roots = [clawhub.as_path(), e.root.as_path()];
    let skills_args = |c: &mut Command| {
        for r in roots {
            c.arg("--skills").arg(r);
        }
    };
    // Build the index once (the turns then open it).
    let mut c = e.command(BIN);
    c.arg("index");
    skills_args(&mut c);
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // 150 turns through the real hook, as three hosts run it.
    let hosts = ["claude-code", "codex", "codebuddy"];
    for i in 0..150 {
        let host = hosts[i % 3];
        let mode = if i % 10 == 9 { "on_demand" } else { "auto" };
        let mut c = e.command(BIN);
        c.args(["hook", "--host", host, "--mode", mode]);
        skills_args(&mut c);
        let mut child = c
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let input = json!({"hook_event_name": "UserPromptSubmit", "prompt": PROMPTS[i % PROMPTS.len()], "cwd": e.root, "session_id": "demo"});
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.to_string().as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
    }
    // 50 through one `serve --stdio`, as the OpenClaw plugin drives it: injected turns, tool
    // calls and tool plans.
    let mut c = e.command(BIN);
    c.args(["serve", "--stdio", "--mode", "auto"]);
    skills_args(&mut c);
    let mut serve = c
        .env("SKILLSEARCH_PLUGINS_DIRS", &plugins)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let schema = |n: &str| json!({"type": "function", "function": {"name": n, "description": format!("{n}: does one thing well for the agent"), "parameters": {"type": "object", "properties": {"input": {"type": "string", "description": "what to work on"}}}}});
    let tools: Vec<Value> = [
        "read",
        "exec",
        "web_fetch",
        "chart_make",
        "chart_style",
        "chart_export",
    ]
    .into_iter()
    .map(schema)
    .collect();
    let mut requests = String::new();
    for i in 0..50 {
        let prompt = PROMPTS[(i * 7) % PROMPTS.len()];
        let req = match i % 3 {
            0 => {
                json!({"id": i, "method": "retrieve", "params": {"query": prompt, "host": "openclaw"}})
            }
            1 => {
                json!({"id": i, "method": "search", "params": {"query": prompt, "host": "openclaw"}})
            }
            _ => {
                json!({"id": i, "method": "plan", "params": {"query": prompt, "host": "openclaw", "tools": tools}})
            }
        };
        requests.push_str(&format!("{req}\n"));
    }
    serve
        .stdin
        .take()
        .unwrap()
        .write_all(requests.as_bytes())
        .unwrap();
    let replies = serve.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&replies.stdout).lines().count(), 50);

    let d = ui(
        &e.home,
        &roots,
        &[],
        &[("SKILLSEARCH_PLUGINS_DIRS", plugins.as_os_str())],
    );
    let t = get(&d, "/api/turns?per_page=1");
    assert_eq!(t["all"], 200, "{t}");
    page.open(&d, "/");
    // What did a turn cost, and what did the catalogue it replaced cost?
    let funnel = page.text("funnel-text");
    assert!(
        funnel.contains("OpenClaw's catalogue of the same 2,"),
        "{funnel}"
    );
    assert!(funnel.contains("% fewer tokens"), "{funnel}");
    let f = get(&d, "/api/funnel");
    assert!(
        f["catalogue"]["skills"].as_u64().unwrap() > 2000,
        "{}",
        f["catalogue"]
    );
    assert!(f["saved_share"].as_f64().unwrap() > 0.9, "{f}");
    let tools = page.text("tools-text");
    assert!(
        tools.starts_with("16 turns planned tool visibility"),
        "{tools}"
    );
    assert!(f["tools_hidden"].as_u64().unwrap() > 0, "{f}");
    assert!(
        page.count("#tools-plot svg[aria-label='tool-schema tokens shown vs hidden']") == 1,
        "the tool plot is drawn"
    );
    // Why was this skill injected? The turns, each with what it injected, and the search.
    assert_eq!(page.rows(), 50);
    assert!(page.text("page-label").contains("page 1 of 4"));
    let body = page.text("turns-body");
    assert!(body.contains("openclaw") && body.contains("plan"), "{body}");
    let hosts = page.text("f-host");
    for h in [
        "claude-code (50)",
        "codex (50)",
        "codebuddy (50)",
        "openclaw (50)",
    ] {
        assert!(hosts.contains(h), "{hosts}");
    }
    // Which skills are never found, or held back, and why?
    let lib = page.text("library-summary");
    assert!(
        lib.contains("skills in") && lib.contains("2 roots"),
        "{lib}"
    );
    let never = page.text("never-found");
    assert!(
        never.contains("were not found by any of the last 200 turns"),
        "{never}"
    );
    page.open(&d, "/?q=extract+the+tables+from+this+scanned+PDF+invoice");
    assert!(page.text("explain-text").contains("hits (top"));
}
