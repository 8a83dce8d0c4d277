//! A fake HTTP server on 127.0.0.1: one thread per connection, every request logged, the answer
//! chosen by a handler. It stands in for an OpenAI-compatible model or embeddings endpoint
//! ([`Fake::openai`]) and for a SkillHub ([`Fake::start`]), and serves each fault the same way
//! to every test: a late answer, a hang, a stall after the headers, a trickle.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One request the fake server received.
#[derive(Debug, Clone)]
pub struct Req {
    pub method: String,
    /// Path and query, as requested.
    pub target: String,
    /// The target without its query.
    pub path: String,
    /// Names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON (`Null` when it is not JSON).
    pub body: Value,
}

impl Req {
    /// The query string, without the `?` (empty when there is none).
    pub fn query(&self) -> &str {
        self.target.split_once('?').map_or("", |(_, q)| q)
    }

    /// A header's value; the name in any case.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
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

    /// The first chat message's text, for chat completion requests.
    pub fn prompt(&self) -> &str {
        self.body["messages"][0]["content"].as_str().unwrap_or("")
    }
}

/// What the fake server answers.
pub enum Reply {
    /// Status and a JSON value.
    Json(u16, Value),
    /// Status and a body sent as it is, labelled JSON (whether it is or not).
    Body(u16, String),
    /// Status, headers and bytes.
    Raw(u16, Vec<(&'static str, String)>, Vec<u8>),
    /// Waits, then answers.
    Late(Duration, Box<Reply>),
    /// Accepts the request and says nothing for this long.
    Hang(Duration),
    /// Sends the headers and part of an embeddings body, then stalls for this long.
    Stall(Duration),
    /// Sends headers promising 1000 bytes, then one byte every 50 ms.
    Trickle,
}

type Handler = dyn Fn(&Req) -> Reply + Send + Sync;

/// A fixed answer for a fault case.
pub type Responder = fn(&Req) -> Reply;

pub struct Fake {
    /// What a client is given: `http://127.0.0.1:<port>`, or with `/v1` from [`Fake::openai`].
    pub base: String,
    log: Arc<Mutex<Vec<Req>>>,
}

impl Fake {
    /// A server whose base is its root, `http://127.0.0.1:<port>` (a hub, or a model the test
    /// gives `<base>/v1`).
    pub fn start(handler: impl Fn(&Req) -> Reply + Send + Sync + 'static) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let log: Arc<Mutex<Vec<Req>>> = Arc::default();
        let handler: Arc<Handler> = Arc::new(handler);
        let seen = log.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (handler, seen) = (handler.clone(), seen.clone());
                std::thread::spawn(move || {
                    let _ = serve(stream, &*handler, &seen);
                });
            }
        });
        Fake { base, log }
    }

    /// An OpenAI-compatible server: its base is `http://127.0.0.1:<port>/v1`.
    pub fn openai(handler: impl Fn(&Req) -> Reply + Send + Sync + 'static) -> Fake {
        let mut fake = Fake::start(handler);
        fake.base.push_str("/v1");
        fake
    }

    pub fn requests(&self) -> Vec<Req> {
        self.log.lock().unwrap().clone()
    }

    /// How many requests had a path ending with `end`.
    pub fn count(&self, end: &str) -> usize {
        self.requests()
            .iter()
            .filter(|r| r.path.ends_with(end))
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

/// [`dead_base`] as an OpenAI-compatible base, ending in `/v1`.
pub fn dead_openai_base() -> String {
    dead_base() + "/v1"
}

fn serve(stream: TcpStream, handler: &Handler, log: &Mutex<Vec<Req>>) -> std::io::Result<()> {
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
        path: target.split('?').next().unwrap_or_default().to_owned(),
        target,
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    };
    log.lock().unwrap().push(req.clone());
    answer(stream, handler(&req))
}

fn answer(mut out: TcpStream, reply: Reply) -> std::io::Result<()> {
    let json = |s: String| vec![("Content-Type", s)];
    let (status, headers, body) = match reply {
        Reply::Json(s, v) => (
            s,
            json("application/json".into()),
            serde_json::to_vec(&v).unwrap(),
        ),
        Reply::Body(s, b) => (s, json("application/json".into()), b.into_bytes()),
        Reply::Raw(s, h, b) => (s, h, b),
        Reply::Late(d, r) => {
            std::thread::sleep(d);
            return answer(out, *r);
        }
        Reply::Hang(d) => {
            std::thread::sleep(d);
            return Ok(());
        }
        Reply::Stall(d) => {
            let body = r#"{"data": [{"index": 0, "embedding": [0.1,"#;
            write!(
                out,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len() + 100
            )?;
            out.flush()?;
            std::thread::sleep(d);
            return Ok(());
        }
        Reply::Trickle => {
            out.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")?;
            for _ in 0..1000 {
                std::thread::sleep(Duration::from_millis(50));
                out.write_all(b"x")?;
                out.flush()?;
            }
            return Ok(());
        }
    };
    let mut head = format!(
        "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    out.write_all(head.as_bytes())?;
    out.write_all(&body)?;
    out.flush()
}

/// A chat completion whose one choice says `content`.
pub fn chat_reply(content: &str) -> Reply {
    Reply::Json(
        200,
        json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                            "finish_reason": "stop"}]}),
    )
}

/// A hub's success envelope around `result`.
pub fn hub_ok(result: Value) -> Reply {
    Reply::Json(
        200,
        json!({"error": "ok", "requestId": "fake", "status": 0, "result": result}),
    )
}

/// A zip archive, as a hub's download answers it.
pub fn zip_reply(bytes: Vec<u8>) -> Reply {
    Reply::Raw(200, vec![("Content-Type", "application/zip".into())], bytes)
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
