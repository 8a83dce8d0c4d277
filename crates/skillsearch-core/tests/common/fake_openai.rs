//! A fake OpenAI-compatible server on 127.0.0.1 for tests: one thread per connection, every
//! request logged, the answer chosen by a handler (a body, a late body, or headers then a
//! stall). Shared by the engine's tests (`mod common`) and the binary's end-to-end tests
//! (`#[path]`), so every fault case is served the same way.
#![allow(dead_code)]

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One request the fake server received.
#[derive(Debug, Clone)]
pub struct Req {
    pub path: String,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Req {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The texts of an embeddings request (`input`, a list or one string).
    pub fn inputs(&self) -> Vec<String> {
        match &self.body["input"] {
            Value::Array(a) => a
                .iter()
                .map(|v| v.as_str().unwrap_or_default().to_owned())
                .collect(),
            Value::String(s) => vec![s.clone()],
            _ => Vec::new(),
        }
    }
}

/// What the fake server answers.
pub enum Reply {
    /// Status and body.
    Body(u16, String),
    /// Waits, then answers.
    Late(Duration, Box<Reply>),
    /// Sends the headers and half the body, then stalls.
    Stall(Duration),
}

pub type Handler = dyn Fn(&Req) -> Reply + Send + Sync;

/// A fixed answer for a fault case.
pub type Responder = fn(&Req) -> Reply;

pub struct Fake {
    /// `http://127.0.0.1:<port>/v1`
    pub base: String,
    seen: Arc<Mutex<Vec<Req>>>,
}

impl Fake {
    pub fn start(handler: impl Fn(&Req) -> Reply + Send + Sync + 'static) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}/v1", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let handler: Arc<Handler> = Arc::new(handler);
        let log = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (handler, log) = (handler.clone(), log.clone());
                std::thread::spawn(move || {
                    let _ = serve_one(stream, &*handler, &log);
                });
            }
        });
        Fake { base, seen }
    }

    pub fn requests(&self) -> Vec<Req> {
        self.seen.lock().unwrap().clone()
    }
}

fn serve_one(
    mut stream: TcpStream,
    handler: &Handler,
    log: &Mutex<Vec<Req>>,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let path = line.split_whitespace().nth(1).unwrap_or("").to_owned();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        reader.read_line(&mut h)?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
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
        path,
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    };
    log.lock().unwrap().push(req.clone());
    let mut reply = handler(&req);
    loop {
        match reply {
            Reply::Late(d, r) => {
                std::thread::sleep(d);
                reply = *r;
            }
            Reply::Stall(d) => {
                let body = r#"{"data": [{"index": 0, "embedding": [0.1,"#;
                write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len() + 100
                )?;
                stream.flush()?;
                std::thread::sleep(d);
                return Ok(());
            }
            Reply::Body(status, body) => {
                write!(
                    stream,
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )?;
                return stream.flush();
            }
        }
    }
}

/// Embeddings: one vector per input, `f(i)` for input i, listed in reverse index order.
pub fn vectors(req: &Req, f: impl Fn(usize) -> Value) -> Reply {
    let n = req.body["input"].as_array().map_or(0, Vec::len);
    let data: Vec<Value> = (0..n)
        .rev()
        .map(|i| json!({"object": "embedding", "index": i, "embedding": f(i)}))
        .collect();
    Reply::Body(200, json!({"object": "list", "data": data}).to_string())
}

/// Dimension of [`bag_of_words`] vectors.
pub const BOW_DIM: usize = 64;

/// A deterministic sentence vector: each lower-cased word of 3+ letters adds 1 to the slot its
/// FNV-1a hash picks, plus a small constant slot so no vector is zero. Texts that share words
/// point the same way.
pub fn bag_of_words(text: &str) -> Vec<f64> {
    let mut v = vec![0.0; BOW_DIM];
    v[BOW_DIM - 1] = 0.05;
    for w in text
        .to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() >= 3)
    {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in w.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        v[(h % (BOW_DIM as u64 - 1)) as usize] += 1.0;
    }
    v
}

/// Embeddings of every input by [`bag_of_words`], in index order.
pub fn bow_reply(req: &Req) -> Reply {
    let data: Vec<Value> = req
        .inputs()
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": bag_of_words(t)}))
        .collect();
    Reply::Body(200, json!({"object": "list", "data": data}).to_string())
}

/// A base URL where nothing listens.
pub fn dead_base() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    format!("http://{addr}/v1")
}
