//! `skillsearch mcp` over a pipe: raw JSON-RPC for every protocol era and bad input, the MCP
//! Skills extension (listing rules, manifests checked against the bytes read, refused escapes,
//! pagination; the Python `mcp` 2.3.0 client has no skills API), then the
//! real clients (Python `mcp` 2.3.0 in auto and legacy modes, the TypeScript SDK 1.32.2 and the
//! inspector CLI) when `MCP_CLIENT_TESTS=1` says they are installed (`.ci/run` installs
//! them from `tests/mcp-clients`).

use serde_json::{Value, json};
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

/// How long a test waits for a reply before calling the server silent.
const REPLY_WAIT: Duration = Duration::from_secs(60);

struct Server {
    child: Child,
    stdin: ChildStdin,
    /// stdout's lines, read on a thread so a missing reply fails the test instead of hanging it.
    stdout: Receiver<String>,
}

impl Server {
    fn start(home: &Path, skills: &Path, mode: &str) -> Server {
        Server::start_roots(home, &[skills], mode)
    }

    fn start_roots(home: &Path, roots: &[&Path], mode: &str) -> Server {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_skillsearch"));
        cmd.arg("--home").arg(home).args(["mcp", "--mode", mode]);
        for r in roots {
            cmd.arg("--skills").arg(r);
        }
        let mut child = cmd
            .env_remove("SKILLSEARCH_HOME")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let (tx, stdout) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            loop {
                let mut line = String::new();
                match out.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if tx.send(line).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        Server {
            child,
            stdin,
            stdout,
        }
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        self.stdin.write_all(bytes).unwrap();
        self.stdin.flush().unwrap();
    }

    fn send(&mut self, msg: &Value) {
        let mut line = serde_json::to_vec(msg).unwrap();
        line.push(b'\n');
        self.stdin.write_all(&line).unwrap();
        self.stdin.flush().unwrap();
    }

    /// The next line of stdout, which must be a JSON-RPC message.
    fn recv(&mut self) -> Value {
        let line = match self.stdout.recv_timeout(REPLY_WAIT) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => panic!("no reply within {REPLY_WAIT:?}"),
            Err(RecvTimeoutError::Disconnected) => panic!("the server closed stdout"),
        };
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
    fs::write(d.join(".env"), "TOKEN=sk-live-secret\n").unwrap();
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
    // detail: a catalogue (no body), or a clear reply for a bad value.
    let cat = text(&s.call(
        60,
        "skill_search",
        json!({"query": "extract tables from a scanned PDF", "detail": "catalog"}),
    ));
    assert!(
        cat.starts_with(skillsearch_core::turn::tools::CATALOGUE_HEADING)
            && cat.contains("`local/pdf-tables`")
            && !cat.contains("PARSNIP"),
        "{cat}"
    );
    assert_eq!(
        text(&s.call(
            61,
            "skill_search",
            json!({"query": "pdf", "detail": "summary"})
        )),
        skillsearch_core::turn::tools::bad_detail_reply("summary")
    );
    let huge = "scanned pdf tables ".repeat(50_000); // under the 1 MiB line cap
    assert!(text(&s.call(6, "skill_search", json!({"query": huge}))).contains("PARSNIP"));
    assert_eq!(
        text(&s.call(
            7,
            "skill_read",
            json!({"id": "local/pdf-tables", "path": "references/notes.md"})
        )),
        "Notes about multi-page tables.\n"
    );
    let refused = text(&s.call(
        70,
        "skill_read",
        json!({"id": "local/pdf-tables", "path": ".env"}),
    ));
    assert!(
        refused.contains("hidden files") && !refused.contains("sk-live"),
        "{refused}"
    );
    // An offset past the end (given as a string, as some models send numbers) says so.
    assert_eq!(
        text(&s.call(
            71,
            "skill_read",
            json!({"id": "local/pdf-tables", "path": "references/notes.md", "offset": "999"})
        )),
        "Nothing to read at offset 999: the text has 31 characters."
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

/// `ping` answers: the server is still serving.
fn assert_serving(s: &mut Server, id: i64) {
    let r = s.request(json!(id), "ping", json!({}));
    assert_eq!(r["result"], json!({}), "{r}");
}

#[test]
fn a_line_that_is_not_json_gets_a_parse_error() {
    let (_t, home, skills) = library();
    let mut s = Server::start(&home, &skills, "on_demand");
    s.initialize("2025-11-25");
    s.send_raw(b"{this is not json\n");
    let r = s.recv();
    assert_eq!(r.get("id"), Some(&Value::Null), "{r}");
    assert_eq!(r["error"]["code"], -32700, "{r}");
    assert_eq!(r["error"]["message"], "Parse error", "{r}");
    // JSON that is no JSON-RPC message is an invalid request, with a null id too.
    s.send_raw(b"[1, 2]\n");
    let r = s.recv();
    assert_eq!(r.get("id"), Some(&Value::Null), "{r}");
    assert_eq!(r["error"]["code"], -32600, "{r}");
    assert_eq!(r["error"]["message"], "Invalid Request", "{r}");
    assert_serving(&mut s, 1);
}

#[test]
fn a_request_reusing_an_id_in_flight_gets_an_error_and_the_first_its_answer() {
    let (_t, home, skills) = library();
    let mut s = Server::start(&home, &skills, "on_demand");
    s.initialize("2025-11-25");
    // Both lines in one write: the second arrives while the search is running.
    let search = json!({"jsonrpc": "2.0", "id": 20, "method": "tools/call", "params": {"name": "skill_search", "arguments": {"query": "scanned pdf tables"}}});
    let ping = json!({"jsonrpc": "2.0", "id": 20, "method": "ping"});
    s.send_raw(format!("{search}\n{ping}\n").as_bytes());
    let (a, b) = (s.recv(), s.recv());
    let (answer, error) = if a.get("error").is_some() {
        (b, a)
    } else {
        (a, b)
    };
    assert_eq!(answer["id"], 20, "{answer}");
    assert!(
        answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("PARSNIP"),
        "the first request gets its own answer: {answer}"
    );
    assert_eq!(error["id"], 20, "{error}");
    assert_eq!(error["error"]["code"], -32600, "{error}");
    let message = error["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("Invalid Request") && message.contains("20"),
        "{error}"
    );
    // Once answered, the id may be used again.
    assert_serving(&mut s, 20);
}

#[test]
fn an_overlong_line_gets_an_error_and_the_server_keeps_serving() {
    let (_t, home, skills) = library();
    let mut s = Server::start(&home, &skills, "on_demand");
    s.initialize("2025-11-25");
    let huge = json!({"jsonrpc": "2.0", "id": 30, "method": "tools/call", "params": {"name": "skill_search", "arguments": {"query": "pdf ".repeat(50 << 18)}}});
    let mut line = serde_json::to_vec(&huge).unwrap();
    assert!(line.len() > 50 << 20);
    line.push(b'\n');
    s.send_raw(&line);
    drop(line);
    let r = s.recv();
    assert_eq!(r.get("id"), Some(&Value::Null), "{r}");
    assert_eq!(r["error"]["code"], -32600, "{r}");
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("1048576 bytes"), "{r}");
    let r = s.call(31, "skill_search", json!({"query": "scanned pdf tables"}));
    assert!(
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("PARSNIP"),
        "{r}"
    );
}

/// Two roots: `pdf-tables` with files of every kind (text, binary, dotfile, tool directory,
/// symlinks in and out), an invalidly named skill, `shared` in both roots (the second
/// shadowed) and a skill the gate excludes. Returns (tmp, home, first root, second root).
fn catalogue_library() -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a");
    let b = tmp.path().join("b");
    let skill = |root: &Path, dir: &str, front: &str, body: &str| {
        let d = root.join(dir);
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join("SKILL.md"), format!("---\n{front}\n---\n\n{body}\n")).unwrap();
        d
    };
    let d = skill(
        &a,
        "pdf-tables",
        "name: pdf-tables\ndescription: Extract tables from scanned PDF files\nlicense: MIT",
        "The secret word is PARSNIP.",
    );
    fs::create_dir_all(d.join("references/deep")).unwrap();
    fs::write(d.join("references/notes.md"), "Notes about tables.\n").unwrap();
    fs::write(d.join("references/deep/more.md"), "More notes.\n").unwrap();
    fs::create_dir_all(d.join("scripts")).unwrap();
    fs::write(d.join("scripts/run.py"), "print('hi')\n").unwrap();
    fs::create_dir_all(d.join("assets")).unwrap();
    fs::write(d.join("assets/logo.bin"), [0u8, 159, 146, 150, 1, 2, 255]).unwrap();
    fs::write(d.join(".secret"), "TOKEN=1\n").unwrap();
    fs::create_dir_all(d.join("node_modules")).unwrap();
    fs::write(d.join("node_modules/x.js"), "x\n").unwrap();
    fs::write(tmp.path().join("outside.txt"), "OUTSIDE\n").unwrap();
    std::os::unix::fs::symlink(tmp.path().join("outside.txt"), d.join("escape.txt")).unwrap();
    std::os::unix::fs::symlink(d.join("references/notes.md"), d.join("link.md")).unwrap();
    skill(
        &a,
        "bad",
        "name: Bad_Name\ndescription: A name the extension rejects",
        "Bad.",
    );
    skill(
        &a,
        "shared",
        "name: shared\ndescription: The first shared skill",
        "FIRST copy.",
    );
    skill(
        &b,
        "shared",
        "name: shared\ndescription: The second shared skill",
        "SECOND copy.",
    );
    skill(
        &b,
        "gated",
        "name: gated\ndescription: Needs a binary nobody has\nmetadata: {\"openclaw\": {\"requires\": {\"bins\": [\"skillsearch-no-such-binary\"]}}}",
        "Gated.",
    );
    let home = tmp.path().join("home");
    (tmp, home, a, b)
}

/// The bytes of a `resources/read` result.
fn served_bytes(r: &Value) -> Vec<u8> {
    use base64::Engine as _;
    let c = &r["result"]["contents"][0];
    match (c["text"].as_str(), c["blob"].as_str()) {
        (Some(t), None) => t.as_bytes().to_vec(),
        (None, Some(b)) => base64::engine::general_purpose::STANDARD.decode(b).unwrap(),
        _ => panic!("neither text nor blob: {r}"),
    }
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    let h = sha2::Sha256::digest(bytes);
    format!(
        "sha256:{}",
        h.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

fn uris(r: &Value, key: &str) -> Vec<String> {
    r["result"][key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key}: {r}"))
        .iter()
        .map(|s| s["uri"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn skills_extension_lists_gets_and_serves_files() {
    let (tmp, home, a, b) = catalogue_library();
    let mut s = Server::start_roots(&home, &[&a, &b], "on_demand");
    let init = s.initialize("2025-11-25");
    let caps = &init["result"]["capabilities"];
    assert_eq!(
        caps["extensions"]["io.modelcontextprotocol/skills"],
        json!({"directoryRead": true}),
        "{init}"
    );
    assert!(caps["resources"].is_object(), "{init}");
    assert!(caps["tools"].is_object(), "{init}");
    let r = s.request(json!(1), "tools/list", json!({}));
    let names: Vec<_> = r["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].clone())
        .collect();
    assert_eq!(names, [json!("skill_search"), json!("skill_read")]);

    // Listed: the valid, unshadowed, eligible skills; left out: `Bad_Name`, the second
    // `shared`, `gated`.
    let r = s.request(json!(2), "skills/list", json!({}));
    assert_eq!(
        uris(&r, "skills"),
        ["skill://pdf-tables/SKILL.md", "skill://shared/SKILL.md"],
        "{r}"
    );
    assert!(r["result"].get("nextCursor").is_none(), "{r}");

    let r = s.request(
        json!(3),
        "skills/get",
        json!({"uri": "skill://pdf-tables/SKILL.md"}),
    );
    let skill = &r["result"]["skill"];
    assert_eq!(skill["uri"], "skill://pdf-tables/SKILL.md", "{r}");
    assert_eq!(skill["frontmatter"]["name"], "pdf-tables");
    assert_eq!(
        skill["frontmatter"]["description"],
        "Extract tables from scanned PDF files"
    );
    assert_eq!(skill["frontmatter"]["license"], "MIT");
    let manifest = skill["resources"].as_array().unwrap();
    let listed: Vec<&str> = manifest
        .iter()
        .map(|f| f["uri"].as_str().unwrap())
        .collect();
    assert_eq!(
        listed,
        [
            "skill://pdf-tables/SKILL.md",
            "skill://pdf-tables/assets/logo.bin",
            "skill://pdf-tables/references/notes.md",
            "skill://pdf-tables/references/deep/more.md",
            "skill://pdf-tables/scripts/run.py",
        ],
        "no dotfiles, tool directories or symlinks: {r}"
    );
    for (i, f) in manifest.iter().enumerate() {
        let r = s.request(json!(100 + i), "resources/read", json!({"uri": f["uri"]}));
        assert_eq!(r["result"]["contents"][0]["uri"], f["uri"], "{r}");
        let bytes = served_bytes(&r);
        assert_eq!(bytes.len() as u64, f["size"].as_u64().unwrap(), "{f}");
        assert_eq!(sha256(&bytes), f["digest"].as_str().unwrap(), "{f}");
    }
    let r = s.request(
        json!(4),
        "resources/read",
        json!({"uri": "skill://pdf-tables/SKILL.md"}),
    );
    assert_eq!(
        served_bytes(&r),
        fs::read(a.join("pdf-tables/SKILL.md")).unwrap()
    );
    assert_eq!(r["result"]["contents"][0]["mimeType"], "text/markdown");
    let r = s.request(
        json!(5),
        "resources/read",
        json!({"uri": "skill://pdf-tables/assets/logo.bin"}),
    );
    assert!(r["result"]["contents"][0]["blob"].is_string(), "{r}");
    // The name resolves to the first root's `shared`.
    let r = s.request(
        json!(6),
        "resources/read",
        json!({"uri": "skill://shared/SKILL.md"}),
    );
    assert!(
        String::from_utf8(served_bytes(&r))
            .unwrap()
            .contains("FIRST"),
        "{r}"
    );

    // Outside the skill directory, hidden, or through a symlink: refused.
    for (i, uri) in [
        "skill://pdf-tables/../shared/SKILL.md",
        "skill://pdf-tables/%2E%2E/%2E%2E/outside.txt",
        "skill://pdf-tables/references%2F..%2F..%2Fshared%2FSKILL.md",
        "skill://pdf-tables/escape.txt",
        "skill://pdf-tables/link.md",
        "skill://pdf-tables/.secret",
        "skill://pdf-tables/node_modules/x.js",
        "skill://pdf-tables/references",
    ]
    .iter()
    .enumerate()
    {
        let r = s.request(json!(200 + i), "resources/read", json!({"uri": uri}));
        assert_eq!(r["error"]["code"], -32602, "{uri}: {r}");
        assert!(
            !r.to_string().contains("OUTSIDE") && !r.to_string().contains("TOKEN"),
            "{r}"
        );
    }

    // Unknown skills and files.
    for (i, uri) in [
        "skill://nope/SKILL.md",
        "skill://gated/SKILL.md",
        "skill://Bad_Name/SKILL.md",
    ]
    .iter()
    .enumerate()
    {
        let r = s.request(json!(300 + i), "skills/get", json!({"uri": uri}));
        assert_eq!(r["error"]["code"], -32602, "{uri}: {r}");
    }
    // Resource not found: -32002 before 2026-07-28 (the SDK answers -32602 from then on).
    for (i, uri) in [
        "skill://nope/SKILL.md",
        "skill://pdf-tables/references/missing.md",
        "file:///etc/hostname",
    ]
    .iter()
    .enumerate()
    {
        let r = s.request(json!(400 + i), "resources/read", json!({"uri": uri}));
        assert_eq!(r["error"]["code"], -32002, "{uri}: {r}");
    }
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}, "io.modelcontextprotocol/clientCapabilities": {}});
    let r = s.request(
        json!(410),
        "resources/read",
        json!({"uri": "skill://nope/SKILL.md", "_meta": meta}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");

    // Directories.
    let r = s.request(
        json!(7),
        "resources/directory/read",
        json!({"uri": "skill://pdf-tables"}),
    );
    assert_eq!(
        uris(&r, "resources"),
        [
            "skill://pdf-tables/assets",
            "skill://pdf-tables/references",
            "skill://pdf-tables/scripts",
            "skill://pdf-tables/SKILL.md",
        ],
        "{r}"
    );
    let r = s.request(
        json!(8),
        "resources/directory/read",
        json!({"uri": "skill://pdf-tables/references/"}),
    );
    assert_eq!(
        uris(&r, "resources"),
        [
            "skill://pdf-tables/references/deep",
            "skill://pdf-tables/references/notes.md",
        ],
        "{r}"
    );
    let r = s.request(
        json!(9),
        "resources/directory/read",
        json!({"uri": "skill://pdf-tables/../shared"}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let r = s.request(json!(10), "resources/list", json!({}));
    assert_eq!(
        uris(&r, "resources"),
        ["skill://pdf-tables/SKILL.md", "skill://shared/SKILL.md"],
        "{r}"
    );
    drop(tmp);

    // The catalogue is offered in auto mode too; tools stay empty there.
    let (_tmp, home, a, b) = catalogue_library();
    let mut s = Server::start_roots(&home, &[&a, &b], "auto");
    let init = s.initialize("2025-11-25");
    assert!(
        init["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/skills"].is_object()
    );
    let r = s.request(json!(1), "tools/list", json!({}));
    assert_eq!(r["result"]["tools"], json!([]));
    let r = s.request(json!(2), "skills/list", json!({}));
    assert_eq!(uris(&r, "skills").len(), 2, "{r}");
}

#[test]
fn skills_list_pages_through_a_large_library() {
    let tmp = tempfile::tempdir().unwrap();
    let skills = tmp.path().join("skills");
    for i in 0..150 {
        let d = skills.join(format!("s{i:03}"));
        fs::create_dir_all(&d).unwrap();
        fs::write(
            d.join("SKILL.md"),
            format!("---\nname: skill-{i:03}\ndescription: Skill number {i}\n---\n\nBody {i}.\n"),
        )
        .unwrap();
    }
    // A skill whose tree is too large for a manifest.
    let big = skills.join("big");
    fs::create_dir_all(big.join("references")).unwrap();
    fs::write(
        big.join("SKILL.md"),
        "---\nname: zz-big\ndescription: A skill with many files\n---\n\nBig.\n",
    )
    .unwrap();
    for i in 0..520 {
        fs::write(big.join(format!("references/f{i:03}.md")), format!("{i}\n")).unwrap();
    }
    let home = tmp.path().join("home");
    let mut s = Server::start(&home, &skills, "on_demand");
    s.initialize("2025-11-25");
    let mut all = Vec::new();
    let mut cursor: Option<Value> = None;
    let mut pages = 0;
    loop {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let r = s.request(json!(pages + 1), "skills/list", params);
        let page = uris(&r, "skills");
        assert!(page.len() <= 100, "{}", page.len());
        all.extend(page);
        pages += 1;
        match r["result"].get("nextCursor") {
            Some(c) => cursor = Some(c.clone()),
            None => break,
        }
        assert!(pages < 5, "pagination does not end");
    }
    assert_eq!(pages, 2);
    let mut expected: Vec<String> = (0..150)
        .map(|i| format!("skill://skill-{i:03}/SKILL.md"))
        .collect();
    expected.push("skill://zz-big/SKILL.md".into());
    assert_eq!(all, expected);
    let r = s.request(
        json!(7),
        "skills/get",
        json!({"uri": "skill://zz-big/SKILL.md"}),
    );
    assert_eq!(r["result"]["skill"]["resources"], "dynamic", "{r}");
    let r = s.request(
        json!(8),
        "resources/read",
        json!({"uri": "skill://zz-big/references/f519.md"}),
    );
    assert_eq!(r["result"]["contents"][0]["text"], "519\n", "{r}");
    let r = s.request(json!(9), "skills/list", json!({"cursor": "garbage"}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
}

fn skillsearch_core_description() -> String {
    skillsearch_testkit::golden_file("skill_search.description.txt")
}

fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp-clients")
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
#[cfg_attr(
    not(has_mcp_clients),
    ignore = "set MCP_CLIENT_TESTS=1 after installing tests/mcp-clients (.ci/run does)"
)]
fn real_clients_python_typescript_and_inspector() {
    let dir = clients_dir();
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
