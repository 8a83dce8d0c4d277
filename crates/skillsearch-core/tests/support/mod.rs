//! A fake HTTP server on 127.0.0.1 for integration tests: each request (line, headers, body)
//! is logged and answered by a handler; replies can be JSON, raw bytes, or a hang.

#![allow(dead_code)]

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Req {
    pub method: String,
    /// Path and query.
    pub target: String,
    /// Names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON (`Null` when it is not JSON).
    pub json: Value,
}

impl Req {
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or_default()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The first chat message's text, for chat completion requests.
    pub fn prompt(&self) -> &str {
        self.json["messages"][0]["content"].as_str().unwrap_or("")
    }
}

pub enum Reply {
    Json(u16, Value),
    Raw(u16, &'static str, Vec<u8>),
    /// Accept the request and say nothing for this long.
    Hang(Duration),
}

type Handler = dyn Fn(&Req) -> Reply + Send + Sync;

pub struct Fake {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    log: Arc<Mutex<Vec<Req>>>,
}

impl Fake {
    pub fn start(handler: impl Fn(&Req) -> Reply + Send + Sync + 'static) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let log: Arc<Mutex<Vec<Req>>> = Arc::default();
        let handler: Arc<Handler> = Arc::new(handler);
        let log2 = log.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (log, handler) = (log2.clone(), handler.clone());
                std::thread::spawn(move || {
                    let _ = serve(stream, &log, &*handler);
                });
            }
        });
        Fake { base, log }
    }

    pub fn requests(&self) -> Vec<Req> {
        self.log.lock().unwrap().clone()
    }

    /// Requests whose path ends with `end`.
    pub fn count(&self, end: &str) -> usize {
        self.requests()
            .iter()
            .filter(|r| r.path().ends_with(end))
            .count()
    }
}

/// A base URL nothing listens on.
pub fn dead_base() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", l.local_addr().unwrap());
    drop(l);
    base
}

fn serve(stream: TcpStream, log: &Mutex<Vec<Req>>, handler: &Handler) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(());
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let target = parts.next().unwrap_or_default().to_owned();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.trim_end().split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
        }
    }
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    reader.read_exact(&mut body)?;
    let req = Req {
        method,
        target,
        headers,
        json: serde_json::from_slice(&body).unwrap_or(Value::Null),
    };
    log.lock().unwrap().push(req.clone());
    let (status, ctype, body) = match handler(&req) {
        Reply::Json(s, v) => (s, "application/json", serde_json::to_vec(&v).unwrap()),
        Reply::Raw(s, t, b) => (s, t, b),
        Reply::Hang(d) => {
            std::thread::sleep(d);
            return Ok(());
        }
    };
    let mut out = stream;
    write!(
        out,
        "HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    out.write_all(&body)?;
    out.flush()
}
