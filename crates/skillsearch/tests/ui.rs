//! `skillsearch ui` end to end: the real binary on a loopback port the OS picks, its JSON routes
//! read over plain HTTP/1.1, and the page itself in a real browser (headless Chromium from
//! Debian's `chromium` package, `--dump-dom` after the page's scripts ran) asserting on what a
//! person sees: search hits with their explanation, the turns table, the empty-log message, a
//! 100,000-turn log paged, and the ClawHub corpus with a 200-turn log made by real turns.
//!
//! Without `chromium` on PATH the browser tests print `skipped: chromium not installed` and
//! return, unless `UI_BROWSER_TESTS=1` (CI), where a missing browser fails them.

use serde_json::{Value, json};
use skillsearch_core::turn::decision_log::{Decision, DecisionLog, LoggedHit, LoggedTools};
use skillsearch_testkit::daemon::{Daemon, http};
use skillsearch_testkit::{Env, write_file, write_skill};
use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
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
    let e = Env::new();
    e.skill(
        "pdf-tables",
        "pdf-tables",
        "Extract tables from PDF files",
        "Body.",
    );
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
    let e = Env::new();
    e.skill(
        "pdf-tables",
        "pdf-tables",
        "Extract tables from PDF files",
        "Body.",
    );
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

/// The `chromium` binary, or `None` (after saying so) when it is missing and
/// `UI_BROWSER_TESTS` is unset; with `UI_BROWSER_TESTS=1` a missing browser fails the test.
fn chromium() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("chromium"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var_os("UI_BROWSER_TESTS").is_none(),
            "UI_BROWSER_TESTS is set but chromium is not installed (apt-get install chromium)"
        );
        eprintln!("skipped: chromium not installed");
    }
    found
}

/// The page at `path` as the browser has it once its scripts ran: the DOM, serialised.
fn dom(browser: &Path, d: &Daemon, path: &str) -> String {
    let profile = tempfile::tempdir().unwrap();
    let url = format!("http://{}{path}", d.addr);
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--virtual-time-budget=5000",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(&url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = String::new();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let started = Instant::now();
    let reading = std::thread::spawn(move || {
        let mut s = String::new();
        while reader.read_line(&mut s).is_ok_and(|n| n > 0) {}
        s
    });
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(90) {
            let _ = child.kill();
            panic!("chromium did not finish {url} within 90 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    out.push_str(&reading.join().unwrap());
    assert!(out.contains("</html>"), "no DOM for {url}: {out}");
    assert!(
        out.contains("data-ready=\"1\""),
        "the page's scripts did not finish for {url}: {out}"
    );
    out
}

/// The text of the element with `id` (tags stripped, entities of `&`, `<`, `>` decoded).
fn text_of(html: &str, id: &str) -> String {
    let at = html
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id} in {html}"));
    let open = html[..at].rfind('<').unwrap();
    let tag: String = html[open + 1..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric())
        .collect();
    // The element ends at its closing tag, counting nested ones of the same name.
    let mut depth = 0;
    let mut i = open;
    let end = loop {
        let next_open = html[i + 1..].find(&format!("<{tag}")).map(|p| p + i + 1);
        let next_close = html[i + 1..]
            .find(&format!("</{tag}>"))
            .map(|p| p + i + 1)
            .unwrap();
        match next_open {
            Some(o) if o < next_close => {
                depth += 1;
                i = o;
            }
            _ if depth > 0 => {
                depth -= 1;
                i = next_close;
            }
            _ => break next_close,
        }
    };
    let mut text = String::new();
    let mut in_tag = false;
    for c in html[open..end].chars() {
        match c {
            '<' => in_tag = true,
            '>' => {
                in_tag = false;
                text.push(' ');
            }
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    let text = text
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
        .replace("&nbsp;", " ");
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Rows of the turns table.
fn turn_rows(html: &str) -> usize {
    html.matches("<tr class=\"turn").count()
}

#[test]
fn in_a_browser_search_explains_and_an_empty_log_says_so() {
    let Some(browser) = chromium() else { return };
    let e = Env::new();
    let second = library(&e);
    let d = ui(&e.home, &[&e.root, &second], &[], &[]);
    let html = dom(&browser, &d, "/?q=extract+tables+from+a+scanned+pdf");
    let hits = text_of(&html, "search-hits");
    assert!(
        hits.starts_with("rank skill score turn 1 pdf-tables local/pdf-tables"),
        "{hits}"
    );
    let why = text_of(&html, "explain-text");
    assert!(
        why.contains("query: extract tables from a scanned pdf"),
        "{why}"
    );
    assert!(why.contains("hits (top"), "{why}");
    assert!(why.contains("local/pdf-tables"), "{why}");
    // No turns yet: said in words, in the table's place and the funnel's.
    let empty = text_of(&html, "turns-empty");
    assert!(empty.starts_with("No turns logged yet in "), "{empty}");
    assert_eq!(turn_rows(&html), 0);
    assert!(text_of(&html, "page-label").contains("page 1 of 1"));
    let funnel = text_of(&html, "funnel-empty");
    assert!(
        funnel.starts_with("No turns to plot yet. Listing all 3 eligible skills"),
        "{funnel}"
    );
    // The library says what is held back, shadowed and broken.
    let lib = text_of(&html, "library-summary");
    assert!(
        lib.contains("1 held back") && lib.contains("1 shadowed copies"),
        "{lib}"
    );
    assert!(text_of(&html, "library-held").contains("needs-tool"));
    assert!(text_of(&html, "library-shadowed").contains("pdf-tables"));
    assert!(text_of(&html, "evals-empty").starts_with("No stored runs in "));
}

#[test]
fn in_a_browser_a_100000_turn_log_shows_page_1_of_2000_and_filters() {
    let Some(browser) = chromium() else { return };
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
    write_log(&e.home.join("logs/decisions.jsonl"), 100_000);
    let d = ui(&e.home, &[&e.root], &[], &[]);
    // Indexed once before the browser looks (the first request pays for it).
    get(&d, "/api/turns?per_page=1");
    let started = Instant::now();
    let html = dom(&browser, &d, "/");
    let took = started.elapsed();
    assert!(
        text_of(&html, "page-label").contains("page 1 of 2,000"),
        "{}",
        text_of(&html, "page-label")
    );
    assert_eq!(turn_rows(&html), 50);
    assert!(text_of(&html, "turns-summary").starts_with("100,000 turns"));
    assert!(
        text_of(&html, "turns-body")
            .contains("turn 99999: extract the tables from report-99999.pdf")
    );
    assert!(
        text_of(&html, "funnel-text")
            .starts_with("Over 100,000 turns skillsearch injected or returned")
    );
    assert!(html.contains("<polyline"), "the funnel is drawn");
    assert!(took < Duration::from_secs(30), "the page took {took:?}");
    // Filters and pages live in the address.
    let html = dom(&browser, &d, "/?host=codex&page=3");
    assert!(text_of(&html, "page-label").contains("page 3 of 500"));
    assert!(text_of(&html, "turns-summary").starts_with("25,000 turns of 100,000"));
    let body = text_of(&html, "turns-body");
    assert!(
        !body.contains("claude-code") && body.contains("codex"),
        "{body}"
    );
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
    let Some(browser) = chromium() else { return };
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
    let html = dom(&browser, &d, "/");
    // What did a turn cost, and what did the catalogue it replaced cost?
    let funnel = text_of(&html, "funnel-text");
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
    let tools = text_of(&html, "tools-text");
    assert!(
        tools.starts_with("16 turns planned tool visibility"),
        "{tools}"
    );
    assert!(f["tools_hidden"].as_u64().unwrap() > 0, "{f}");
    assert!(
        html.contains("aria-label=\"tool-schema tokens shown vs hidden\""),
        "the tool plot is drawn"
    );
    // Why was this skill injected? The turns, each with what it injected, and the search.
    assert_eq!(turn_rows(&html), 50);
    assert!(text_of(&html, "page-label").contains("page 1 of 4"));
    let body = text_of(&html, "turns-body");
    assert!(body.contains("openclaw") && body.contains("plan"), "{body}");
    let hosts = text_of(&html, "f-host");
    for h in [
        "claude-code (50)",
        "codex (50)",
        "codebuddy (50)",
        "openclaw (50)",
    ] {
        assert!(hosts.contains(h), "{hosts}");
    }
    // Which skills are never found, or held back, and why?
    let lib = text_of(&html, "library-summary");
    assert!(
        lib.contains("skills in") && lib.contains("2 roots"),
        "{lib}"
    );
    let never = text_of(&html, "never-found");
    assert!(
        never.contains("were not found by any of the last 200 turns"),
        "{never}"
    );
    let html = dom(
        &browser,
        &d,
        "/?q=extract+the+tables+from+this+scanned+PDF+invoice",
    );
    assert!(text_of(&html, "explain-text").contains("hits (top"));
}
