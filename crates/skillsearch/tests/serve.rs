//! `skillsearch serve` end to end: the real daemon on a loopback port chosen by the OS, spoken to
//! with plain HTTP/1.1, and `serve --stdio`.

use serde_json::{Value, json};
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Daemon {
    child: Child,
    addr: String,
}

impl Daemon {
    fn start(home: &Path, skills: &Path, extra: &[&str]) -> Daemon {
        Daemon::start_with_env(home, skills, extra, &[])
    }

    fn start_with_env(home: &Path, skills: &Path, extra: &[&str], env: &[(&str, &Path)]) -> Daemon {
        let mut child = Command::new(env!("CARGO_BIN_EXE_skillsearch"))
            .arg("--home")
            .arg(home)
            .args(["serve", "--listen", "127.0.0.1:0", "--skills"])
            .arg(skills)
            .args(extra)
            .envs(env.iter().copied())
            .env_remove("SKILLSEARCH_HOME")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
        let addr = v["listening"]
            .as_str()
            .unwrap()
            .trim_start_matches("http://")
            .to_owned();
        Daemon { child, addr }
    }

    /// (status, body as JSON).
    fn http(
        &self,
        method: &str,
        path: &str,
        body: &[u8],
        headers: &[(&str, &str)],
    ) -> (u16, Value) {
        let mut s = TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
            body.len()
        );
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
            req.push_str(&format!("Host: {}\r\n", self.addr));
        }
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        s.write_all(req.as_bytes()).unwrap();
        let _ = s.write_all(body);
        let mut resp = Vec::new();
        let _ = s.read_to_end(&mut resp);
        let text = String::from_utf8_lossy(&resp);
        let status: u16 = text
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let body = text.split("\r\n\r\n").nth(1).unwrap_or("");
        (status, serde_json::from_str(body).unwrap_or(Value::Null))
    }

    fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.http("POST", path, &serde_json::to_vec(body).unwrap(), &[])
    }

    /// Sends SIGTERM and waits for the daemon to exit.
    fn terminate(&mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        assert!(
            Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap()
                .success()
        );
        self.child.wait().unwrap()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn library() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let skills = tmp.path().join("skills");
    let d = skills.join("pdf-tables");
    fs::create_dir_all(d.join("references")).unwrap();
    fs::write(d.join("SKILL.md"), "---\nname: pdf-tables\ndescription: Extract tables from scanned PDF files\n---\n\nThe secret word is PARSNIP.\n").unwrap();
    fs::write(d.join("references/notes.md"), "Notes.\n").unwrap();
    fs::write(d.join(".env"), "TOKEN=sk-live-secret\n").unwrap();
    let long: String = (0..3000)
        .map(|i| format!("Step {i} of a long procedure.\n"))
        .collect();
    fs::write(d.join("references/long.md"), long).unwrap();
    let home = tmp.path().join("home");
    (tmp, home, skills)
}

#[test]
fn retrieve_search_read_health_and_modes() {
    let (_t, home, skills) = library();
    let d = Daemon::start(&home, &skills, &[]);
    let (st, v) = d.http("GET", "/v1/health", b"", &[]);
    assert_eq!((st, v["status"].as_str()), (200, Some("ok")));
    let (st, v) = d.post("/v1/retrieve", &json!({"query": "extract tables from a scanned PDF", "mode": "auto", "available_tools": ["read", "exec"], "host": "openclaw"}));
    assert_eq!(st, 200, "{v}");
    let text = v["text"].as_str().unwrap();
    assert!(
        text.starts_with(skillsearch_core::turn::CONTEXT_PREAMBLE) && text.contains("PARSNIP"),
        "{v}"
    );
    assert_eq!(v["hits"][0]["id"], "local/pdf-tables");
    assert_eq!(v["hits"][0]["source"], "local");
    assert!(v["tokens"].as_u64().unwrap() > 10 && v["chars"].as_u64().unwrap() > 50);
    let (_, v) = d.post(
        "/v1/retrieve",
        &json!({"query": "extract tables from a scanned PDF"}),
    );
    assert_eq!(
        (v["mode"].as_str(), v["text"].as_str()),
        (Some("on_demand"), Some("")),
        "on_demand injects nothing"
    );
    let (_, v) = d.post("/v1/search", &json!({"query": "scanned pdf tables"}));
    assert!(v["text"].as_str().unwrap().contains("PARSNIP"));
    // The catalogue of the same query is a different answer, not the cached full one.
    let (_, v) = d.post(
        "/v1/search",
        &json!({"query": "scanned pdf tables", "detail": "catalog"}),
    );
    let cat = v["text"].as_str().unwrap();
    assert!(
        cat.contains("`local/pdf-tables`") && !cat.contains("PARSNIP"),
        "{cat}"
    );
    let (st, v) = d.post("/v1/search", &json!({"query": "pdf", "detail": "brief"}));
    assert_eq!(st, 400, "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("detail `brief`"),
        "{v}"
    );
    let (_, v) = d.post("/v1/search", &json!({"query": "bake bread"}));
    assert_eq!(
        v["text"],
        "No skill in the library matches \"bake bread\". Proceed without one."
    );
    let (_, v) = d.post(
        "/v1/read",
        &json!({"id": "local/pdf-tables", "path": "references/notes.md"}),
    );
    assert_eq!(v["text"], "Notes.\n");
    // Hidden files are never served; a long file comes in parts that an offset continues.
    let (_, v) = d.post(
        "/v1/read",
        &json!({"id": "local/pdf-tables", "path": ".env"}),
    );
    let refused = v["text"].as_str().unwrap();
    assert!(
        refused.contains("hidden files") && !refused.contains("sk-live"),
        "{refused}"
    );
    let (_, v) = d.post(
        "/v1/read",
        &json!({"id": "local/pdf-tables", "path": "references/long.md"}),
    );
    let first = v["text"].as_str().unwrap();
    assert!(
        first.starts_with("Step 0 of") && first.contains("\"offset\": "),
        "{first}"
    );
    let next: u64 = first
        .rsplit_once("\"offset\": ")
        .unwrap()
        .1
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let (_, v) = d.post(
        "/v1/read",
        &json!({"id": "local/pdf-tables", "path": "references/long.md", "offset": next}),
    );
    assert!(!v["text"].as_str().unwrap().starts_with("Step 0 of"), "{v}");
    let (_, v) = d.post("/v1/retrieve", &json!({"query": "pdf tables", "mode": "auto", "workspace": skills.parent().unwrap(), "skills": [&skills]}));
    assert!(v["text"].as_str().unwrap().contains("PARSNIP"));
}

#[test]
fn bad_requests_get_json_errors_and_the_daemon_keeps_serving() {
    let (_t, home, skills) = library();
    let d = Daemon::start(&home, &skills, &[]);
    let (st, v) = d.http("POST", "/v1/retrieve", b"{not json", &[]);
    assert_eq!(st, 400, "{v}");
    assert!(v["error"].as_str().unwrap().contains("bad request body"));
    let (st, v) = d.post("/v1/retrieve", &json!({"query": "x", "qeury": "typo"}));
    assert!((400..500).contains(&st), "{st}");
    assert!(v["error"].as_str().unwrap().contains("qeury"), "{v}");
    let (st, v) = d.post("/v1/retrieve", &json!({"query": "x", "mode": "atuo"}));
    assert_eq!(st, 400);
    assert!(v["error"].as_str().unwrap().contains("`atuo`"));
    let (st, _) = d.post(
        "/v1/retrieve",
        &json!({"query": "x", "workspace": "relative/dir"}),
    );
    assert_eq!(st, 400);
    let big = vec![b'a'; 2 * 1024 * 1024];
    let (st, _) = d.http("POST", "/v1/retrieve", &big, &[]);
    assert_eq!(st, 413);
    let (st, _) = d.http("GET", "/v1/nope", b"", &[]);
    assert_eq!(st, 404);
    let (st, v) = d.post(
        "/v1/retrieve",
        &json!({"query": "scanned pdf tables", "mode": "auto"}),
    );
    assert_eq!(st, 200);
    assert!(
        v["text"].as_str().unwrap().contains("PARSNIP"),
        "still serving"
    );
}

#[test]
fn token_is_required_when_set_and_for_non_loopback() {
    let (_t, home, skills) = library();
    let d = Daemon::start(&home, &skills, &["--token", "s3cret-token"]);
    let (st, _) = d.http("GET", "/v1/health", b"", &[]);
    assert_eq!(st, 401);
    let (st, _) = d.http(
        "GET",
        "/v1/health",
        b"",
        &[("Authorization", "Bearer wrong")],
    );
    assert_eq!(st, 401);
    let (st, v) = d.http(
        "GET",
        "/v1/health",
        b"",
        &[("Authorization", "Bearer s3cret-token")],
    );
    assert_eq!((st, v["status"].as_str()), (200, Some("ok")));
    let out = Command::new(env!("CARGO_BIN_EXE_skillsearch"))
        .arg("--home")
        .arg(&home)
        .args(["serve", "--listen", "0.0.0.0:0", "--skills"])
        .arg(&skills)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("without --token"));
}

#[test]
fn a_new_skill_is_seen_without_a_restart_and_sigterm_stops_cleanly() {
    let (_t, home, skills) = library();
    let mut d = Daemon::start(&home, &skills, &[]);
    let (_, v) = d.post("/v1/search", &json!({"query": "zeppelin mooring"}));
    assert!(v["text"].as_str().unwrap().starts_with("No skill"));
    skillsearch_testkit::write_file(
        &skills.join("zeppelin/SKILL.md"),
        "---\nname: zeppelin\ndescription: Moor a zeppelin safely\n---\nUse the mast.\n",
    );
    let started = Instant::now();
    loop {
        let (_, v) = d.post("/v1/search", &json!({"query": "zeppelin mooring"}));
        if v["text"].as_str().unwrap_or("").contains("Use the mast") {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the watcher never picked the new skill up"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(d.terminate().code(), Some(0));
}

#[test]
fn stdio_mode_answers_line_by_line() {
    let (_t, home, skills) = library();
    let mut child = Command::new(env!("CARGO_BIN_EXE_skillsearch"))
        .arg("--home")
        .arg(&home)
        .args(["serve", "--stdio", "--mode", "auto", "--skills"])
        .arg(&skills)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut ask = |line: &str| -> Value {
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
        let mut reply = String::new();
        out.read_line(&mut reply).unwrap();
        serde_json::from_str(&reply).unwrap()
    };
    let v = ask(r#"{"id": 0, "method": "retrieve", "params": {"query": "scanned pdf tables"}}"#);
    assert_eq!(v["id"], 0);
    assert!(v["result"]["text"].as_str().unwrap().contains("PARSNIP"));
    let v = ask(r#"{"id": "h", "method": "health"}"#);
    assert_eq!(v["result"]["status"], "ok");
    let v = ask(r#"{"id": "t", "method": "tools"}"#);
    assert_eq!(v["result"], json!({"mode": "auto", "tools": []}));
    let v = ask(r#"{"id": "w", "method": "warm", "params": {}}"#);
    assert_eq!(v["result"]["ready"], true, "{v}");
    let v = ask("{broken");
    assert!(v["error"]["message"].as_str().unwrap().contains("not JSON"));
    let v = ask(r#"{"id": 2, "method": "explode"}"#);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown method")
    );
    let v = ask(r#"{"id": 3, "method": "read", "params": {"id": "local/pdf-tables"}}"#);
    assert!(
        v["result"]["text"]
            .as_str()
            .unwrap()
            .contains("references/notes.md")
    );
    // A line over the cap is answered with an error, never held whole; the next one is served.
    let huge = format!(
        r#"{{"id": 4, "method": "search", "params": {{"query": "{}"}}}}"#,
        "a".repeat(3 << 20)
    );
    let v = ask(&huge);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("over the 1048576-byte limit"),
        "{v}"
    );
    let v = ask(r#"{"id": 5, "method": "health"}"#);
    assert_eq!(v["result"]["status"], "ok", "{v}");
    drop(stdin);
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

#[test]
fn tools_method_serves_the_golden_tool_strings_in_on_demand_mode() {
    let (_t, home, skills) = library();
    let d = Daemon::start(&home, &skills, &["--mode", "on_demand"]);
    let (status, v) = d.http("GET", "/v1/tools", b"", &[]);
    assert_eq!(status, 200);
    assert_eq!(v["mode"], "on_demand");
    let golden = skillsearch_testkit::golden_file;
    let tools = v["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["skill_search", "skill_read"]);
    for t in tools {
        let name = t["name"].as_str().unwrap();
        assert_eq!(
            t["description"].as_str().unwrap().trim_end(),
            golden(&format!("{name}.description.txt")).trim_end()
        );
        let schema: Value = serde_json::from_str(&golden(&format!("{name}.schema.json"))).unwrap();
        assert_eq!(t["parameters"], schema);
    }
}

#[test]
fn plan_endpoint_hides_managed_plugin_tools_on_unrelated_turns() {
    let (tmp, home, skills) = library();
    let a = skills.join("analyst");
    fs::create_dir_all(&a).unwrap();
    fs::write(a.join("SKILL.md"), "---\nname: analyst\ndescription: Query the big data platform\nmetadata: {\"openclaw\":{\"activates\":{\"plugins\":[\"bigdata\"]}}}\n---\nbody\n").unwrap();
    let plugins = tmp.path().join("plugins/bigdata");
    fs::create_dir_all(&plugins).unwrap();
    fs::write(
        plugins.join("openclaw.plugin.json"),
        r#"{"id":"bigdata","contracts":{"tools":["bd_query"]}}"#,
    )
    .unwrap();
    let plugin_root = tmp.path().join("plugins");
    let d = Daemon::start_with_env(
        &home,
        &skills,
        &[],
        &[("SKILLSEARCH_PLUGINS_DIRS", &plugin_root)],
    );
    let tools = json!(["read", {"type": "function", "function": {"name": "bd_query", "description": "query", "parameters": {"type": "object"}}}]);
    let (st, v) = d.post(
        "/v1/plan",
        &json!({"query": "query the big data platform", "tools": tools}),
    );
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["visible_tools"], json!(["read", "bd_query"]));
    assert_eq!(v["activated_plugins"], json!(["bigdata"]));
    let (_, v) = d.post(
        "/v1/plan",
        &json!({"query": "good morning!", "tools": tools}),
    );
    assert_eq!(v["visible_tools"], json!(["read"]));
    assert_eq!(v["hidden_tools"], json!(["bd_query"]));
    // on_demand: the session's earlier skill_search / skill_read results activate, whatever
    // this turn's text says; an unknown id activates nothing.
    let (_, v) = d.post(
        "/v1/plan",
        &json!({"query": "good morning!", "matched": ["local/analyst"], "tools": tools}),
    );
    assert_eq!(v["visible_tools"], json!(["read", "bd_query"]), "{v}");
    assert_eq!(v["matched_skills"], json!(["local/analyst"]));
    let (_, v) = d.post(
        "/v1/plan",
        &json!({"matched": ["local/nope"], "tools": tools}),
    );
    assert_eq!(v["hidden_tools"], json!(["bd_query"]), "{v}");
    let log = fs::read_to_string(home.join("logs/decisions.jsonl")).unwrap();
    assert!(
        log.lines().any(|l| l.contains("\"hidden\":[\"bd_query\"]")),
        "{log}"
    );
}

#[test]
fn an_activated_plugin_brings_its_bundled_skills_into_the_block() {
    let (tmp, home, skills) = library();
    let a = skills.join("analyst");
    fs::create_dir_all(&a).unwrap();
    fs::write(a.join("SKILL.md"), "---\nname: analyst\ndescription: Query the big data platform for sales figures\nmetadata: {\"openclaw\":{\"activates\":{\"plugins\":[\"bigdata\"]}}}\n---\nUse the bigdata tools.\n").unwrap();
    let plugin = tmp.path().join("plugins/bigdata");
    let bundled = plugin.join("skills/bd-syntax");
    fs::create_dir_all(&bundled).unwrap();
    fs::write(
        plugin.join("openclaw.plugin.json"),
        r#"{"id":"bigdata","contracts":{"tools":["bd_query"]},"skills":["skills"]}"#,
    )
    .unwrap();
    fs::write(bundled.join("SKILL.md"), "---\nname: bd-syntax\ndescription: Query syntax of the big data platform\n---\nPartitions are named BDX-4471.\n").unwrap();
    let d = Daemon::start_with_env(
        &home,
        &skills,
        &[],
        &[("SKILLSEARCH_PLUGINS_DIRS", &tmp.path().join("plugins"))],
    );
    let (st, v) = d.post(
        "/v1/retrieve",
        &json!({"query": "query the big data platform for sales figures", "mode": "auto"}),
    );
    assert_eq!(st, 200, "{v}");
    let text = v["text"].as_str().unwrap();
    assert!(text.contains("Use the bigdata tools."), "{text}");
    assert!(
        text.contains("BDX-4471"),
        "the bundled skill is missing: {text}"
    );
    // Not activated: a turn whose hits activate nothing does not see the plugin's skills.
    let (_, v) = d.post(
        "/v1/retrieve",
        &json!({"query": "extract tables from a scanned PDF", "mode": "auto"}),
    );
    assert!(!v["text"].as_str().unwrap().contains("BDX-4471"), "{v}");
}

/// The daemon with a hub and a chat model: hub hits join the answer, the gate reads the agent's
/// tools from the request, and the answer cache keys on those tools.
#[test]
fn retrieve_with_a_hub_and_a_gate() {
    use skillsearch_testkit::{Fake, Reply, chat_reply, hub_ok, zip_of, zip_reply};
    let (_t, home, skills) = library();
    let hub = Fake::start(|r| match r.path.as_str() {
        "/openapi/v1/skills" => hub_ok(json!({"items": [{"id": "u-ocr", "name": "pdf-ocr",
            "description": "OCR scanned PDF pages before extracting tables", "quality_score": 0.9}]})),
        "/openapi/v1/skills/u-ocr" => hub_ok(json!({"id": "u-ocr", "name": "pdf-ocr",
            "skill_md": "---\nname: pdf-ocr\n---\nRun ocrmypdf first. The hub word is TURNIP.\n"})),
        "/openapi/v1/skills/u-ocr/download" => zip_reply(zip_of(&[(
            "pdf-ocr/SKILL.md",
            b"---\nname: pdf-ocr\n---\nRun ocrmypdf first.\n",
        )])),
        _ => Reply::Json(404, json!({"error": "not found", "status": 60001})),
    });
    let model = Fake::start(|r| {
        chat_reply(if r.prompt().contains("You are a skill selector") {
            r#"{"plan": "ocr then extract", "skills": ["hub/u-ocr", "local/pdf-tables"]}"#
        } else {
            r#"{"rewritten_query": null}"#
        })
    });
    let model_base = format!("{}/v1", model.base);
    let d = Daemon::start_with_env(
        &home,
        &skills,
        &[],
        &[
            ("SKILLSEARCH_HUB_ENDPOINT", Path::new(&hub.base)),
            ("SKILLSEARCH_MODEL", Path::new("m")),
            ("SKILLSEARCH_MODEL_BASE_URL", Path::new(&model_base)),
        ],
    );
    let (_, health) = d.http("GET", "/v1/health", b"", &[]);
    assert_eq!(
        health["remote"],
        json!({"hub": hub.base, "model": "m", "rewrite": true, "gate": true, "notes": []})
    );
    let req = json!({"query": "extract tables from a scanned PDF", "mode": "auto", "available_tools": ["read", "exec"]});
    let (st, v) = d.post("/v1/retrieve", &req);
    assert_eq!(st, 200, "{v}");
    let hits: Vec<(&str, &str)> = v["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["id"].as_str().unwrap(), h["source"].as_str().unwrap()))
        .collect();
    assert_eq!(
        hits,
        [("hub/u-ocr", "hub"), ("local/pdf-tables", "local")],
        "{v}"
    );
    let text = v["text"].as_str().unwrap();
    assert!(
        text.contains("TURNIP") && text.contains("PARSNIP"),
        "{text}"
    );
    assert_eq!(v["stages"]["gate"]["plan"], "ocr then extract", "{v}");
    assert_eq!(v["stages"]["degraded"], false, "{v}");
    let dir = v["hits"][0]["skill_dir"].as_str().unwrap();
    assert!(Path::new(dir).join("SKILL.md").is_file(), "{dir}");
    assert!(
        dir.starts_with(home.join("cache/hub").to_str().unwrap()),
        "{dir}"
    );
    let gate_prompts = || {
        model
            .requests()
            .iter()
            .filter(|r| r.prompt().contains("You are a skill selector"))
            .map(|r| r.prompt().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(gate_prompts().len(), 1);
    assert!(gate_prompts()[0].contains("The agent's ONLY available tools are: exec, read."));
    // The same turn again comes from the cache; other tools ask the gate again.
    let (_, again) = d.post("/v1/retrieve", &req);
    assert_eq!(again["hits"], v["hits"]);
    assert_eq!(gate_prompts().len(), 1);
    let (_, other) = d.post(
        "/v1/retrieve",
        &json!({"query": "extract tables from a scanned PDF", "mode": "auto", "available_tools": ["read"]}),
    );
    assert_eq!(other["hits"], v["hits"]);
    assert_eq!(gate_prompts().len(), 2);
    assert!(gate_prompts()[1].contains("The agent's ONLY available tools are: read."));
    // skill_read follows a hub id into its installed bundle; an unknown one is a fixed reply.
    let (st, r) = d.post("/v1/read", &json!({"id": "hub/u-ocr"}));
    assert_eq!(st, 200, "{r}");
    let text = r["text"].as_str().unwrap();
    assert!(text.contains("### Skill: pdf-ocr  [hub/u-ocr]"), "{text}");
    assert!(text.contains("Run ocrmypdf first."), "{text}");
    let (_, r) = d.post("/v1/read", &json!({"id": "hub/nope"}));
    assert!(r["text"].as_str().unwrap().contains("hub/nope"), "{r}");
}

/// A host supplies its own ranked skills with a turn: they are fused with the local ones, a
/// copy of a local skill collapses into it, a hit without a body is refused, and bad sources
/// are errors naming the field.
#[test]
fn host_supplied_sources_join_the_turn() {
    let (_t, home, skills) = library();
    let d = Daemon::start(&home, &skills, &[]);
    let local_body = "The secret word is PARSNIP.";
    let req = json!({
        "query": "extract tables from a scanned PDF", "mode": "auto", "top_k": 3,
        "sources": [{"name": "acme", "weight": 0.9, "hits": [
            {"id": "ocr", "name": "pdf-ocr", "description": "OCR scanned PDFs", "body": "Run ocrmypdf. CARROT."},
            {"id": "copy", "name": "pdf-tables", "description": "a copy", "body": local_body},
            {"id": "empty", "name": "nothing", "body": "  "}
        ]}]
    });
    let (st, v) = d.post("/v1/retrieve", &req);
    assert_eq!(st, 200, "{v}");
    let ids: Vec<&str> = v["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["local/pdf-tables", "acme/ocr"], "{v}");
    assert_eq!(v["hits"][1]["source"], "acme");
    let text = v["text"].as_str().unwrap();
    assert!(
        text.contains("CARROT") && text.contains("PARSNIP"),
        "{text}"
    );
    assert_eq!(
        v["stages"]["duplicates"],
        json!(["acme/copy: local/pdf-tables"]),
        "{v}"
    );
    assert_eq!(
        v["stages"]["sources"][0]["rejected"],
        json!(["acme/empty: no body"])
    );
    for (bad, field) in [
        (json!([{"name": "hub", "hits": []}]), "not `local` or `hub`"),
        (json!([{"name": "a b", "hits": []}]), "[A-Za-z0-9_-]"),
        (
            json!([{"name": "x", "weight": 99, "hits": []}]),
            "sources.x.weight 99",
        ),
        // Past f32's range: the same error as over stdio (found by fuzz/serve_request).
        (
            json!([{"name": "x", "weight": 1.3e99, "hits": []}]),
            "sources.x.weight 13000000000000000",
        ),
        (
            json!([{"name": "x", "hits": [{"id": "1", "name": "n"}]}]),
            "missing field `body`",
        ),
    ] {
        let (st, v) = d.post(
            "/v1/retrieve",
            &json!({"query": "pdf", "mode": "auto", "sources": bad}),
        );
        // A body that does not parse is axum's 422; a bad value is our 400.
        assert!(st == 400 || st == 422, "{st} {v}");
        assert!(v["error"].as_str().unwrap().contains(field), "{v}");
    }
}

/// One keep-alive connection: posts `body` to `path` and reads one response (by its
/// Content-Length), for clients that send many requests over one connection.
fn keep_alive_post(s: &mut BufReader<TcpStream>, addr: &str, path: &str, body: &Value) -> Value {
    let body = serde_json::to_vec(body).unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.get_mut().write_all(head.as_bytes()).unwrap();
    s.get_mut().write_all(&body).unwrap();
    let mut status = String::new();
    s.read_line(&mut status).unwrap();
    assert!(status.starts_with("HTTP/1.1 200"), "{status:?}");
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        s.read_line(&mut line).unwrap();
        if line == "\r\n" {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse().unwrap();
        }
    }
    let mut out = vec![0; length];
    s.read_exact(&mut out).unwrap();
    serde_json::from_slice(&out).unwrap()
}

#[test]
fn many_keep_alive_clients_are_all_answered_and_sigterm_still_stops_cleanly() {
    let (_t, home, skills) = library();
    let mut d = Daemon::start(&home, &skills, &["--mode", "auto"]);
    // More connections than cores, each asking one question after another on one connection
    // (retrievals run on the runtime's worker threads, one per core).
    let clients: Vec<_> = (0..6)
        .map(|c| {
            let addr = d.addr.clone();
            std::thread::spawn(move || {
                let s = TcpStream::connect(&addr).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                let mut s = BufReader::new(s);
                for i in 0..5 {
                    let q = format!("extract tables from scanned pdf files {c} {i}");
                    let v = keep_alive_post(&mut s, &addr, "/v1/retrieve", &json!({"query": q}));
                    assert!(
                        v["text"].as_str().unwrap_or("").contains("PARSNIP"),
                        "client {c}, request {i}: {v}"
                    );
                }
                s
            })
        })
        .collect();
    // The connections stay open (idle) while the daemon is told to stop.
    let open: Vec<_> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    assert_eq!(d.terminate().code(), Some(0));
    drop(open);
}

#[test]
fn without_a_token_only_loopback_host_names_are_answered() {
    let (_t, home, skills) = library();
    let d = Daemon::start(&home, &skills, &[]);
    for host in [
        "evil.example",
        "evil.example:7077",
        "10.0.0.5:7077",
        "localhost.evil.example",
    ] {
        let (st, v) = d.http("GET", "/v1/health", b"", &[("Host", host)]);
        assert_eq!(st, 403, "{host}: {v}");
        assert!(v["error"].as_str().unwrap().contains("--token"), "{v}");
        let (st, _) = d.http(
            "POST",
            "/v1/read",
            br#"{"id": "local/pdf-tables"}"#,
            &[("Host", host)],
        );
        assert_eq!(st, 403, "{host}");
    }
    for host in [
        "localhost",
        "localhost:7077",
        "127.0.0.1:9",
        "[::1]:7077",
        "app.localhost",
    ] {
        let (st, _) = d.http("GET", "/v1/health", b"", &[("Host", host)]);
        assert_eq!(st, 200, "{host}");
    }
    // With a token (read from a file) the token is the guard, whatever the host name.
    let token_file = home.parent().unwrap().join("token");
    fs::write(&token_file, "file-token\n").unwrap();
    let d = Daemon::start(
        &home,
        &skills,
        &["--token-file", token_file.to_str().unwrap()],
    );
    let auth = ("Authorization", "Bearer file-token");
    let (st, _) = d.http("GET", "/v1/health", b"", &[("Host", "evil.example"), auth]);
    assert_eq!(st, 200);
    let (st, _) = d.http("GET", "/v1/health", b"", &[("Host", "evil.example")]);
    assert_eq!(st, 401);
    // Or from the environment.
    let d = Daemon::start_with_env(
        &home,
        &skills,
        &[],
        &[("SKILLSEARCH_TOKEN", Path::new("env-token"))],
    );
    let (st, _) = d.http("GET", "/v1/health", b"", &[]);
    assert_eq!(st, 401);
    let (st, _) = d.http(
        "GET",
        "/v1/health",
        b"",
        &[("Authorization", "Bearer env-token")],
    );
    assert_eq!(st, 200);
}

/// Opens a connection and sends the start of a request, never its end.
fn half_open(addr: &str, start: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(start.as_bytes()).unwrap();
    s
}

#[test]
fn idle_half_open_connections_are_capped_and_timed_out() {
    let (_t, home, skills) = library();
    let d = Daemon::start(
        &home,
        &skills,
        &["--max-connections", "4", "--header-timeout-ms", "600"],
    );
    let idle: Vec<TcpStream> = (0..4)
        .map(|_| half_open(&d.addr, "GET /v1/health HTTP/1.1\r\nHost: localhost\r\n"))
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    // Over the cap: a clear 503 at once, not a hang.
    let started = Instant::now();
    let (st, v) = d.http("GET", "/v1/health", b"", &[]);
    assert_eq!(st, 503, "{v}");
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("too many open connections")
    );
    assert!(started.elapsed() < Duration::from_secs(2));
    // The idle ones are closed once their header time is up; then clients are served again.
    for mut s in idle {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf);
    }
    let started = Instant::now();
    loop {
        let (st, _) = d.http("GET", "/v1/health", b"", &[]);
        if st == 200 {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "still {st}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn sigterm_stops_within_the_grace_even_with_a_slow_client() {
    let (_t, home, skills) = library();
    let mut d = Daemon::start(&home, &skills, &["--shutdown-grace-ms", "300"]);
    // A request whose body never finishes arriving.
    let _slow = half_open(
        &d.addr,
        "POST /v1/search HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"query\":",
    );
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    let status = d.terminate();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(status.code(), Some(0));
}

/// The daemon's thread count, from /proc.
fn threads(pid: u32) -> usize {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn roots_a_request_names_need_an_allow_pattern_and_warm_workspaces_are_capped() {
    let (t, home, skills) = library();
    let many = t.path().join("many");
    let d = Daemon::start(
        &home,
        &skills,
        &[
            "--allow-roots",
            many.to_str().unwrap(),
            "--max-workspaces",
            "3",
        ],
    );
    for body in [
        json!({"query": "pdf", "skills": ["/"]}),
        json!({"query": "pdf", "workspace": "/"}),
        json!({"query": "pdf", "skills": [many.join("../skills")]}),
    ] {
        let (st, v) = d.post("/v1/search", &body);
        assert_eq!(st, 403, "{body}: {v}");
        assert!(
            v["error"].as_str().unwrap().contains("--allow-roots"),
            "{v}"
        );
    }
    // The configured roots need no pattern.
    let (st, v) = d.post(
        "/v1/search",
        &json!({"query": "scanned pdf", "skills": [&skills]}),
    );
    assert_eq!(st, 200);
    assert!(v["text"].as_str().unwrap().contains("PARSNIP"));
    let mut at_cap = 0;
    for i in 0..30 {
        if i == 3 {
            std::thread::sleep(Duration::from_millis(500));
            at_cap = threads(d.child.id());
        }
        let dir = many.join(format!("ws{i}"));
        fs::create_dir_all(&dir).unwrap();
        let (st, v) = d.post("/v1/search", &json!({"query": "pdf", "skills": [&dir]}));
        assert_eq!(st, 200, "{v}");
    }
    let (_, h) = d.http("GET", "/v1/health", b"", &[]);
    assert!(h["workspaces"].as_u64().unwrap() <= 4, "{h}");
    // Closed workspaces take their watcher threads with them.
    let started = Instant::now();
    while threads(d.child.id()) > at_cap + 2 {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "threads {} (at the cap {at_cap})",
            threads(d.child.id())
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Still serving, and the configured roots are still warm.
    let (_, v) = d.post("/v1/search", &json!({"query": "scanned pdf"}));
    assert!(v["text"].as_str().unwrap().contains("PARSNIP"));
}

#[test]
fn a_root_removed_and_made_again_is_watched_again() {
    let (_t, home, skills) = library();
    let d = Daemon::start(&home, &skills, &[]);
    let (_, v) = d.post("/v1/search", &json!({"query": "scanned pdf"}));
    assert!(v["text"].as_str().unwrap().contains("PARSNIP"));
    fs::remove_dir_all(&skills).unwrap();
    fs::create_dir_all(&skills).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    skillsearch_testkit::write_file(
        &skills.join("zeppelin/SKILL.md"),
        "---\nname: zeppelin\ndescription: Moor a zeppelin safely\n---\nUse the mast.\n",
    );
    let started = Instant::now();
    loop {
        let (_, v) = d.post("/v1/search", &json!({"query": "zeppelin mooring"}));
        let text = v["text"].as_str().unwrap_or("").to_owned();
        if text.contains("Use the mast") {
            assert!(!text.contains("PARSNIP"));
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the replaced root was never picked up: {text}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The hook asks a running daemon of the same home over `<home>/warm.sock`: the turn is the
/// daemon's answer, logged once (by the hook); the socket goes when the daemon stops.
#[test]
fn the_hook_is_answered_by_a_running_daemon() {
    let (_tmp, home, skills) = library();
    let hook = |args: &[&str]| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_skillsearch"))
            .arg("--home")
            .arg(&home)
            .args(["hook", "--mode", "auto", "--skills"])
            .arg(&skills)
            .args(args)
            .env_remove("SKILLSEARCH_HOME")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(br#"{"session_id":"s","cwd":"/tmp","prompt":"extract the tables from a scanned pdf"}"#)
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["hookSpecificOutput"]["additionalContext"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    let records = || -> Vec<Value> {
        fs::read_to_string(home.join("logs/decisions.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let alone = hook(&[]);
    assert!(alone.contains("pdf-tables"), "{alone}");

    let mut d = Daemon::start(&home, &skills, &[]);
    // Bound once the configured roots' index is open.
    let t = Instant::now();
    while !home.join("warm.sock").exists() {
        assert!(t.elapsed() < Duration::from_secs(20), "no warm socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    let before = records().len();
    let warm = hook(&[]);
    assert_eq!(warm, alone);
    let after = records();
    assert_eq!(after.len(), before + 1, "one record per turn: {after:?}");
    let last = after.last().unwrap();
    assert_eq!(last["surface"], "hook");
    assert!(last["elapsed_ms"].get("warm").is_some(), "{last}");
    assert_eq!(last["hits"][0]["name"], "pdf-tables", "{last}");

    assert!(d.terminate().success());
    assert!(!home.join("warm.sock").exists());
}

/// `resolve_placeholders` over HTTP, as the OpenClaw plugin asks: the request's `host` picks the
/// state directory (`OPENCLAW_STATE_DIR`) and its `workspace` the output directory, also when
/// `skills` names the roots; a host's own skill is expanded only when it says
/// `pathguard_processed`; `/v1/read` expands too; each workspace gets its own answer.
#[test]
fn placeholders_resolve_per_host_and_workspace() {
    let (_t, home, skills) = library();
    let d = skills.join("csv-report");
    fs::create_dir_all(&d).unwrap();
    fs::write(
        d.join("SKILL.md"),
        "---\nname: csv-report\ndescription: Write a CSV report of sales\n---\n\n\
         Use {{SKILL_DIR}}/gen.py; save {{OUTPUT_DIR}}/report.csv; cache {{AGENT_STATE_DIR}}/c.\n",
    )
    .unwrap();
    let state = Path::new("/srv/openclaw-state");
    let dm = Daemon::start_with_env(
        &home,
        &skills,
        &[],
        &[
            ("SKILLSEARCH_RESOLVE_PLACEHOLDERS", Path::new("true")),
            ("OPENCLAW_STATE_DIR", state),
        ],
    );
    let req = |ws: &str| {
        json!({
            "query": "write a CSV report of sales", "mode": "auto", "top_k": 3, "host": "openclaw",
            "workspace": ws, "skills": [skills],
            "sources": [{"name": "acme", "hits": [
                {"id": "a", "name": "sales-csv-a", "description": "CSV report of sales",
                 "body": "acme A {{OUTPUT_DIR}}/a.csv"},
                {"id": "b", "name": "sales-csv-b", "description": "CSV report of sales",
                 "body": "acme B {{OUTPUT_DIR}}/b.csv", "pathguard_processed": true}
            ]}]
        })
    };
    let (st, v) = dm.post("/v1/retrieve", &req("/ws/one"));
    assert_eq!(st, 200, "{v}");
    let text = v["text"].as_str().unwrap();
    assert!(
        text.contains(&format!(
            "Use {}/gen.py; save /ws/one/report.csv; cache /srv/openclaw-state/c.",
            d.display()
        )),
        "{text}"
    );
    assert!(
        text.contains("acme A {{OUTPUT_DIR}}/a.csv"),
        "untrusted: {text}"
    );
    assert!(text.contains("acme B /ws/one/b.csv"), "vouched for: {text}");
    let (_, v2) = dm.post("/v1/retrieve", &req("/ws/two"));
    assert!(
        v2["text"]
            .as_str()
            .unwrap()
            .contains("save /ws/two/report.csv"),
        "{v2}"
    );
    let (_, r) = dm.post(
        "/v1/read",
        &json!({"id": "csv-report", "host": "openclaw", "workspace": "/ws/one", "skills": [skills]}),
    );
    assert!(
        r["text"]
            .as_str()
            .unwrap()
            .contains("save /ws/one/report.csv; cache /srv/openclaw-state/c."),
        "{r}"
    );
}

/// The tool-visibility pattern: a skill that `requires.config` its plugin to be enabled is held
/// back until OpenClaw's config (found through `OPENCLAW_STATE_DIR`, as OpenClaw finds it)
/// enables the plugin, and is served as soon as it does, without a restart and without a cached
/// answer from before; a broken config keeps the last good read, with a diagnostic.
#[test]
fn requires_config_is_judged_against_the_openclaw_config_as_it_changes() {
    let (t, home, skills) = library();
    let d = skills.join("bigdata-report");
    fs::create_dir_all(&d).unwrap();
    fs::write(
        d.join("SKILL.md"),
        "---\nname: bigdata-report\ndescription: Report cluster job failures from the bigdata platform\n\
         metadata:\n  openclaw:\n    requires:\n      config: [plugins.entries.bigdata-platform.enabled]\n\
             activates:\n      plugins: [bigdata-platform]\n---\n\nUse the BIGDATA tools.\n",
    )
    .unwrap();
    let state = t.path().join("openclaw-state");
    fs::create_dir_all(&state).unwrap();
    let dm = Daemon::start_with_env(
        &home,
        &skills,
        &[],
        &[
            ("OPENCLAW_STATE_DIR", &state),
            ("OPENCLAW_CONFIG_PATH", Path::new("")),
        ],
    );
    let ask = || {
        let (st, v) = dm.post(
            "/v1/retrieve",
            &json!({"query": "report cluster job failures on the bigdata platform", "mode": "auto"}),
        );
        assert_eq!(st, 200, "{v}");
        v
    };
    let v = ask();
    assert!(!v["text"].as_str().unwrap().contains("BIGDATA"), "{v}");
    assert!(
        v["dropped"]
            .to_string()
            .contains("plugins.entries.bigdata-platform.enabled"),
        "{v}"
    );

    let cfg = state.join("openclaw.json");
    fs::write(
        &cfg,
        r#"{"plugins": {"entries": {"bigdata-platform": {"enabled": true}}}}"#,
    )
    .unwrap();
    let v = ask();
    assert!(v["text"].as_str().unwrap().contains("BIGDATA"), "{v}");

    fs::write(&cfg, "{plugins: ").unwrap();
    let v = ask();
    assert!(
        v["text"].as_str().unwrap().contains("BIGDATA"),
        "last good read: {v}"
    );
    assert!(
        v["diagnostics"].to_string().contains("not valid JSON5"),
        "{v}"
    );

    fs::write(
        &cfg,
        r#"{"plugins": {"entries": {"bigdata-platform": {"enabled": false}}}}"#,
    )
    .unwrap();
    let v = ask();
    assert!(!v["text"].as_str().unwrap().contains("BIGDATA"), "{v}");
}
