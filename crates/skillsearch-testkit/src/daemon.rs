//! A real `skillsearch serve` for fault tests: started on a loopback port the OS picks, spoken
//! to with plain HTTP/1.1 where every request has a time limit (a daemon that hangs fails the
//! test instead of stalling it), its stderr kept for the test to read, and stopped by SIGKILL
//! when dropped.

use serde_json::Value;
use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A running daemon.
pub struct Daemon {
    pub child: Child,
    /// `127.0.0.1:<port>`.
    pub addr: String,
    stderr: Arc<Mutex<String>>,
}

impl Daemon {
    /// Starts `bin serve --listen 127.0.0.1:0 --skills <skills>` with `--home <home>`, `extra`
    /// arguments and `env` variables (and none of the test's own `SKILLSEARCH_*`), and waits
    /// for the line that says where it listens.
    pub fn start(
        bin: impl AsRef<OsStr>,
        home: &Path,
        skills: &Path,
        extra: &[&str],
        env: &[(&str, &OsStr)],
    ) -> Daemon {
        let mut args: Vec<&OsStr> = ["serve", "--listen", "127.0.0.1:0", "--skills"]
            .iter()
            .map(OsStr::new)
            .collect();
        args.push(skills.as_os_str());
        args.extend(extra.iter().map(OsStr::new));
        Self::spawn(bin, home, &args, env)
    }

    /// Starts `bin --home <home> <args>` (a command that prints `{"listening": "http://…"}` as
    /// its first stdout line, such as `serve` or `hub serve`) with `env` and none of the test's
    /// own `SKILLSEARCH_*` variables, and waits for that line.
    pub fn spawn(
        bin: impl AsRef<OsStr>,
        home: &Path,
        args: &[&OsStr],
        env: &[(&str, &OsStr)],
    ) -> Daemon {
        let mut cmd = Command::new(bin);
        cmd.arg("--home").arg(home).args(args);
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("SKILLSEARCH_") {
                cmd.env_remove(k);
            }
        }
        let mut child = cmd
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut line = String::new();
            while err.read_line(&mut line).is_ok_and(|n| n > 0) {
                sink.lock().unwrap().push_str(&line);
                line.clear();
            }
        });
        let mut line = String::new();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        out.read_line(&mut line).unwrap();
        let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
            panic!(
                "{line:?}: {e}; stderr: {}",
                stderr.lock().map(|s| s.clone()).unwrap_or_default()
            )
        });
        let addr = v["listening"]
            .as_str()
            .unwrap()
            .trim_start_matches("http://")
            .to_owned();
        Daemon {
            child,
            addr,
            stderr,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the daemon has written to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// One request, answered within `limit` or an error: (status, body as JSON).
    pub fn try_request(
        &self,
        method: &str,
        path: &str,
        body: &[u8],
        limit: Duration,
    ) -> std::io::Result<(u16, Value)> {
        request(&self.addr, method, path, body, limit)
    }

    /// A POST that must be answered within 20 s.
    pub fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let body = serde_json::to_vec(body).unwrap();
        self.try_request("POST", path, &body, Duration::from_secs(20))
            .unwrap_or_else(|e| panic!("POST {path}: {e}; stderr: {}", self.stderr()))
    }

    /// `GET /v1/health`.
    pub fn health(&self) -> Value {
        self.try_request("GET", "/v1/health", b"", Duration::from_secs(20))
            .unwrap_or_else(|e| panic!("health: {e}; stderr: {}", self.stderr()))
            .1
    }

    /// The text `/v1/search` answers for `query`.
    pub fn search(&self, query: &str) -> String {
        let (st, v) = self.post("/v1/search", &serde_json::json!({"query": query}));
        assert_eq!(st, 200, "{v}");
        v["text"].as_str().unwrap_or_default().to_owned()
    }

    /// Polls `/v1/search` for `query` until its text contains `want`, for at most `limit`;
    /// panics with the last answer otherwise.
    pub fn search_until(&self, query: &str, want: &str, limit: Duration) -> String {
        let started = std::time::Instant::now();
        loop {
            let text = self.search(query);
            if text.contains(want) {
                return text;
            }
            assert!(
                started.elapsed() < limit,
                "`{query}` never answered {want:?} within {limit:?}: {text}\nstderr: {}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGKILL, and waits for the process to go.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// One HTTP/1.1 request to `addr` with `Connection: close`, answered within `limit` (connect,
/// write and read) or an error.
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    body: &[u8],
    limit: Duration,
) -> std::io::Result<(u16, Value)> {
    let a = http(
        addr,
        method,
        path,
        &["Content-Type: application/json"],
        body,
        limit,
    )?;
    Ok((a.status, a.json()))
}

/// An HTTP answer: its status, its head (lower-cased) and its body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub head: String,
    pub body: Vec<u8>,
}

impl Answer {
    /// The body as JSON (`Null` when it is not).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// The value of header `name` (lower-case), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|l| {
            l.strip_prefix(name)
                .and_then(|r| r.strip_prefix(':'))
                .map(str::trim)
        })
    }
}

/// One HTTP/1.1 request like [`request`], with extra `headers` (`Name: value` lines without the
/// CRLF), answering the whole [`Answer`]. A server may answer before it has read a large body
/// (413): a failed write of the body is not an error when an answer came.
pub fn http(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[&str],
    body: &[u8],
    limit: Duration,
) -> std::io::Result<Answer> {
    let sock: std::net::SocketAddr = addr
        .parse()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let mut s = TcpStream::connect_timeout(&sock, limit)?;
    s.set_read_timeout(Some(limit))?;
    s.set_write_timeout(Some(limit))?;
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\n");
    for h in headers {
        head.push_str(h);
        head.push_str("\r\n");
    }
    head.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    ));
    s.write_all(head.as_bytes())?;
    let wrote = s.write_all(body);
    let mut resp = Vec::new();
    if let Err(e) = s.read_to_end(&mut resp) {
        // After a refused body the server's close may reset the connection: what arrived
        // before counts. Otherwise a failed read is the error.
        if wrote.is_ok() || resp.is_empty() {
            return Err(wrote.err().unwrap_or(e));
        }
    }
    let split = resp
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "no HTTP answer"))?;
    let head = String::from_utf8_lossy(&resp[..split]).to_lowercase();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidData, "no HTTP status"))?;
    Ok(Answer {
        status,
        head,
        body: resp[split + 4..].to_vec(),
    })
}
