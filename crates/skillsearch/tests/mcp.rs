//! `skillsearch mcp` over a pipe: raw JSON-RPC for every protocol era and bad input, then the
//! real clients (Python `mcp` 2.3.0 in auto and legacy modes, the TypeScript SDK 1.32.2 and the
//! inspector CLI) when `MCP_CLIENT_TESTS=1` says they are installed (`.ci/run` installs
//! them from `tests/mcp-clients`).

use serde_json::{Value, json};
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Server {
    fn start(home: &Path, skills: &Path, mode: &str) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_skillsearch"))
            .arg("--home")
            .arg(home)
            .args(["mcp", "--mode", mode, "--skills"])
            .arg(skills)
            .env_remove("SKILLSEARCH_HOME")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Server {
            child,
            stdin,
            stdout,
        }
    }

    fn send(&mut self, msg: &Value) {
        let mut line = serde_json::to_vec(msg).unwrap();
        line.push(b'\n');
        self.stdin.write_all(&line).unwrap();
        self.stdin.flush().unwrap();
    }

    /// The next line of stdout, which must be a JSON-RPC message.
    fn recv(&mut self) -> Value {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout carried a non-JSON line {line:?}: {e}"));
        assert_eq!(v["jsonrpc"], "2.0", "{v}");
        v
    }

    fn request(&mut self, id: Value, method: &str, params: Value) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let v = self.recv();
        assert_eq!(v["id"], id, "the id comes back unchanged: {v}");
        v
    }

    fn initialize(&mut self, version: &str) -> Value {
        let v = self.request(
            json!(0),
            "initialize",
            json!({"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}),
        );
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        v
    }

    fn call(&mut self, id: i64, name: &str, args: Value) -> Value {
        self.request(json!(id), "tools/call", json!({"name": name, "arguments": args, "_meta": {"progressToken": 7, "claudecode/toolUseId": "t"}}))
    }
}

impl Drop for Server {
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
    fs::write(
        d.join("references/notes.md"),
        "Notes about multi-page tables.\n",
    )
    .unwrap();
    let home = tmp.path().join("home");
    (tmp, home, skills)
}

#[test]
fn every_handshake_version_is_negotiated() {
    let (_t, home, skills) = library();
    for v in ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"] {
        let mut s = Server::start(&home, &skills, "on_demand");
        let r = s.initialize(v);
        assert_eq!(r["result"]["protocolVersion"], v);
        assert_eq!(r["result"]["serverInfo"]["name"], "skillsearch");
        assert_eq!(
            r["result"]["serverInfo"]["version"],
            env!("CARGO_PKG_VERSION")
        );
    }
    let mut s = Server::start(&home, &skills, "on_demand");
    let r = s.initialize("1999-01-01");
    assert_eq!(
        r["result"]["protocolVersion"], "2025-11-25",
        "an unknown version gets the newest handshake version"
    );
}

#[test]
fn stateless_discover_and_calls_with_meta() {
    let (_t, home, skills) = library();
    let mut s = Server::start(&home, &skills, "on_demand");
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}, "io.modelcontextprotocol/clientCapabilities": {}});
    let r = s.request(json!("d1"), "server/discover", json!({"_meta": meta}));
    let versions = r["result"]["supportedVersions"].as_array().unwrap();
    assert!(
        versions.contains(&json!("2026-07-28")) && versions.contains(&json!("2024-11-05")),
        "{r}"
    );
    let r = s.request(json!("l1"), "tools/list", json!({"_meta": meta}));
    let names: Vec<_> = r["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].clone())
        .collect();
    assert_eq!(names, [json!("skill_search"), json!("skill_read")]);
    let r = s.request(json!("c1"), "tools/call", json!({"name": "skill_search", "arguments": {"query": "scanned pdf tables"}, "_meta": meta}));
    assert!(
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("PARSNIP"),
        "{r}"
    );
}

#[test]
fn tools_follow_the_mode_and_bad_input_gets_answers() {
    let (_t, home, skills) = library();
    let mut s = Server::start(&home, &skills, "on_demand");
    s.initialize("2025-11-25");
    let r = s.request(json!(1), "tools/list", json!({}));
    let tools = r["result"]["tools"].as_array().unwrap();
    assert_eq!(tools[0]["name"], "skill_search");
    assert_eq!(tools[0]["description"], skillsearch_core_description());
    assert_eq!(tools[0]["inputSchema"]["required"], json!(["query"]));
    assert_eq!(tools[0]["inputSchema"]["additionalProperties"], false);
    let text = |r: &Value| {
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert!(
        text(&s.call(
            2,
            "skill_search",
            json!({"query": "extract tables from a scanned PDF"})
        ))
        .contains("PARSNIP")
    );
    assert_eq!(
        text(&s.call(3, "skill_search", json!({"query": "bake sourdough bread"}))),
        "No skill in the library matches \"bake sourdough bread\". Proceed without one."
    );
    assert_eq!(
        text(&s.call(4, "skill_search", json!({}))),
        "skill_search needs a query describing the task."
    );
    assert_eq!(
        text(&s.call(5, "skill_search", json!({"query": 42}))),
        "skill_search needs a query describing the task."
    );
    let huge = "scanned pdf tables ".repeat(60_000);
    assert!(text(&s.call(6, "skill_search", json!({"query": huge}))).contains("PARSNIP"));
    assert_eq!(
        text(&s.call(
            7,
            "skill_read",
            json!({"id": "local/pdf-tables", "path": "references/notes.md"})
        )),
        "Notes about multi-page tables.\n"
    );
    let r = s.call(8, "no_such_tool", json!({}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let r = s.request(json!(9), "no/such/method", json!({}));
    assert_eq!(r["error"]["code"], -32601, "{r}");
    let r = s.request(json!(10), "ping", json!({}));
    assert_eq!(r["result"], json!({}));
    // Still serving after every error.
    assert!(text(&s.call(11, "skill_search", json!({"query": "pdf tables"}))).contains("PARSNIP"));

    let mut s = Server::start(&home, &skills, "auto");
    s.initialize("2025-11-25");
    let r = s.request(json!(1), "tools/list", json!({}));
    assert_eq!(r["result"]["tools"], json!([]));
    let r = s.call(2, "skill_search", json!({"query": "pdf"}));
    assert_eq!(r["error"]["code"], -32601, "{r}");
    let r = s.request(json!(3), "tools/list", json!({}));
    assert_eq!(
        r["result"]["tools"],
        json!([]),
        "the server stays up in auto mode"
    );
}

fn skillsearch_core_description() -> String {
    fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../skillsearch-core/tests/golden/skill_search.description.txt"),
    )
    .unwrap()
}

fn clients_dir() -> Option<PathBuf> {
    if std::env::var_os("MCP_CLIENT_TESTS").is_none() {
        eprintln!(
            "real MCP client tests skipped: set MCP_CLIENT_TESTS=1 after installing tests/mcp-clients (.ci/run does)"
        );
        return None;
    }
    Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp-clients"))
}

fn run_json(cmd: &mut Command) -> Value {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{:?} failed: {}",
        cmd,
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&text)
        .or_else(|_| serde_json::from_str(text.lines().last().unwrap_or("")))
        .unwrap_or_else(|e| panic!("{text}: {e}"))
}

#[test]
fn real_clients_python_typescript_and_inspector() {
    let Some(dir) = clients_dir() else { return };
    let (_t, home, skills) = library();
    let bin = env!("CARGO_BIN_EXE_skillsearch");
    let py = |mode: &str, client_mode: &str| {
        run_json(Command::new("python3").arg(dir.join("client.py")).args([
            bin,
            home.to_str().unwrap(),
            skills.to_str().unwrap(),
            mode,
            client_mode,
            "extract tables from a scanned PDF",
            "20",
        ]))
    };
    let v = py("on_demand", "auto");
    assert_eq!(v["protocol_version"], "2026-07-28", "{v}");
    assert_eq!(v["server_name"], "skillsearch");
    assert_eq!(v["tools"], json!(["skill_search", "skill_read"]));
    assert!(v["search"].as_str().unwrap().contains("PARSNIP"));
    assert_eq!(
        v["empty"],
        "skill_search needs a query describing the task."
    );
    assert_eq!(v["read"], "Notes about multi-page tables.\n");
    let v = py("on_demand", "legacy");
    assert_eq!(v["protocol_version"], "2025-11-25", "{v}");
    assert!(v["search"].as_str().unwrap().contains("PARSNIP"));
    let v = py("auto", "legacy");
    assert_eq!(v["tools"], json!([]));
    assert!(
        v["auto_call"].as_str().unwrap().starts_with("refused"),
        "{v}"
    );

    let v = run_json(Command::new("node").arg(dir.join("client.mjs")).args([
        bin,
        home.to_str().unwrap(),
        skills.to_str().unwrap(),
        "on_demand",
        "scanned pdf tables",
    ]));
    assert_eq!(v["server"]["name"], "skillsearch");
    assert_eq!(v["tools"], json!(["skill_search", "skill_read"]));
    assert!(v["search"].as_str().unwrap().contains("PARSNIP"));
    assert_eq!(v["unknown"], "refused: -32602");

    let inspector = dir.join("node_modules/.bin/mcp-inspector");
    let base = |c: &mut Command| {
        c.arg("--cli")
            .arg(bin)
            .arg("--home")
            .arg(&home)
            .arg("mcp")
            .arg("--skills")
            .arg(&skills);
    };
    let mut c = Command::new(&inspector);
    base(&mut c);
    let v = run_json(c.args([
        "--method",
        "tools/call",
        "--tool-name",
        "skill_search",
        "--tool-arg",
        "query=scanned pdf tables",
    ]));
    assert!(
        v["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("PARSNIP"),
        "{v}"
    );
}
