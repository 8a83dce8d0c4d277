//! `soak`: the daemon under mixed load for a long while (#21), judged, unlike the other
//! subcommands: it fails (exit 1) on any error or when the daemon's memory or open files grow.
//!
//! A release `skillsearch serve` runs over a corpus (`--skills`, e.g. a synthetic one of a few
//! thousand skills) plus a directory a writer thread keeps changing (adds, edits and removes a
//! skill every `--write-ms`), so the watcher refreshes the index all along. `--clients` threads
//! each keep one keep-alive connection and send, in turn: repeated `/v1/search` queries (answer
//! cache hits), unique `/v1/retrieve` queries (fresh retrievals), `/v1/read` of a corpus skill,
//! and `/v1/plan`. Every `--sample-secs` the daemon's VmRSS (`/proc/PID/status`) and open file
//! descriptors (`/proc/PID/fd`) are sampled.
//!
//! An error is a request that failed (connection, status other than 200, a reply that is not
//! JSON) or an answer that says the engine failed (a `retrieval failed` / deadline diagnostic,
//! the fixed "unavailable" reply). Growth is judged from the sample at the end of the warm-up
//! (the first fifth of the run: caches fill, the heap grows to its working size) to the last:
//! RSS may grow by at most `--rss-tolerance-mb`, open files by at most `--fd-tolerance`.

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use skillsearch_core::turn::tools::UNAVAILABLE_REPLY;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct SoakArgs {
    /// The `skillsearch` binary (a release build)
    #[arg(long, value_name = "FILE")]
    pub bin: PathBuf,
    /// The corpus the daemon serves (left unchanged)
    #[arg(long, value_name = "DIR")]
    pub skills: PathBuf,
    /// Where the home, the writer's skills and the daemon's log go (a temporary directory
    /// when not given)
    #[arg(long, value_name = "DIR")]
    pub work: Option<PathBuf>,
    /// How long the load runs
    #[arg(long, default_value_t = 600)]
    pub seconds: u64,
    /// Client threads, one keep-alive connection each
    #[arg(long, default_value_t = 4)]
    pub clients: usize,
    /// How often the writer changes a skill
    #[arg(long, default_value_t = 250)]
    pub write_ms: u64,
    /// How often RSS and open files are sampled
    #[arg(long, default_value_t = 5)]
    pub sample_secs: u64,
    /// RSS growth allowed after the warm-up, in MB
    #[arg(long, default_value_t = 32)]
    pub rss_tolerance_mb: u64,
    /// Open-file growth allowed after the warm-up
    #[arg(long, default_value_t = 8)]
    pub fd_tolerance: i64,
    /// Print the figures as JSON
    #[arg(long)]
    pub json: bool,
}

/// Repeated questions: after the first time each is an answer-cache hit.
const REPEATED: [&str; 12] = [
    "extract tables from a scanned PDF invoice",
    "deploy a container to kubernetes and roll back",
    "write unit tests for a python function",
    "summarise a long email thread",
    "resize and compress images for the web",
    "query a postgres database",
    "translate a document into french",
    "generate an image from a prompt",
    "monitor a website for downtime",
    "send a message to a slack channel",
    "convert a markdown file to pdf",
    "search the web for recent news",
];

/// One keep-alive HTTP/1.1 connection to the daemon (or the hub server).
pub(crate) struct Conn {
    addr: String,
    s: Option<BufReader<TcpStream>>,
}

impl Conn {
    pub(crate) fn new(addr: &str) -> Conn {
        Conn {
            addr: addr.to_owned(),
            s: None,
        }
    }

    /// POSTs `body` to `path` and returns (status, body); on any error the connection is
    /// dropped and the next request opens a new one.
    fn post(&mut self, path: &str, body: &Value) -> Result<(u16, Value)> {
        self.send("POST", path, Some(body))
    }

    /// GETs `path` and returns (status, body as JSON); errors as [`Conn::post`].
    pub(crate) fn get(&mut self, path: &str) -> Result<(u16, Value)> {
        self.send("GET", path, None)
    }

    fn send(&mut self, method: &str, path: &str, body: Option<&Value>) -> Result<(u16, Value)> {
        let r = self.try_send(method, path, body);
        if r.is_err() {
            self.s = None;
        }
        r
    }

    /// Sends `body` (of `content_type`, with `headers`, each `Name: value`) and returns (status,
    /// body as JSON); errors as [`Conn::post`].
    pub(crate) fn send_raw(
        &mut self,
        method: &str,
        path: &str,
        content_type: &str,
        headers: &[&str],
        body: &[u8],
    ) -> Result<(u16, Value)> {
        let r = self.try_send_raw(method, path, content_type, headers, body);
        if r.is_err() {
            self.s = None;
        }
        r
    }

    fn try_send(&mut self, method: &str, path: &str, body: Option<&Value>) -> Result<(u16, Value)> {
        let body = match body {
            Some(b) => serde_json::to_vec(b)?,
            None => Vec::new(),
        };
        self.try_send_raw(method, path, "application/json", &[], &body)
    }

    fn try_send_raw(
        &mut self,
        method: &str,
        path: &str,
        content_type: &str,
        headers: &[&str],
        body: &[u8],
    ) -> Result<(u16, Value)> {
        if self.s.is_none() {
            let s = TcpStream::connect(&self.addr)?;
            s.set_read_timeout(Some(Duration::from_secs(20)))?;
            s.set_nodelay(true)?;
            self.s = Some(BufReader::new(s));
        }
        let s = self.s.as_mut().context("no connection")?;
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n",
            self.addr,
            body.len()
        );
        for h in headers {
            head.push_str(h);
            head.push_str("\r\n");
        }
        head.push_str("\r\n");
        s.get_mut().write_all(head.as_bytes())?;
        s.get_mut().write_all(body)?;
        let mut line = String::new();
        if s.read_line(&mut line)? == 0 {
            bail!("connection closed");
        }
        let status: u16 = line
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .with_context(|| format!("bad status line {line:?}"))?;
        let (mut length, mut close) = (None, false);
        loop {
            let mut h = String::new();
            if s.read_line(&mut h)? == 0 {
                bail!("connection closed in the headers");
            }
            if h == "\r\n" {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse::<usize>().ok();
                } else if k.eq_ignore_ascii_case("connection") && v.trim() == "close" {
                    close = true;
                }
            }
        }
        let length = length.context("no content-length")?;
        let mut out = vec![0; length];
        s.read_exact(&mut out)?;
        if close {
            self.s = None;
        }
        Ok((status, serde_json::from_slice(&out)?))
    }
}

/// Why an answer counts as an error, if it does.
fn failure(path: &str, status: u16, v: &Value) -> Option<String> {
    if status != 200 {
        return Some(format!("{path}: status {status}: {v}"));
    }
    let text = v["text"].as_str();
    if text == Some(UNAVAILABLE_REPLY) {
        return Some(format!("{path}: {UNAVAILABLE_REPLY}"));
    }
    let diags = v["diagnostics"].as_array().cloned().unwrap_or_default();
    if let Some(d) = diags.iter().find_map(|d| {
        d.as_str()
            .filter(|d| d.contains("failed") || d.contains("deadline"))
    }) {
        return Some(format!("{path}: {d}"));
    }
    let ok = match path {
        "/v1/plan" => v.get("visible_tools").is_some(),
        _ => text.is_some(),
    };
    (!ok).then(|| format!("{path}: unexpected answer {v}"))
}

/// Skill directories of the corpus (their names are the ids `/v1/read` takes).
fn skill_ids(dir: &Path) -> Result<Vec<String>> {
    let mut ids: Vec<String> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("SKILL.md").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    ids.sort();
    if ids.is_empty() {
        bail!("no <dir>/SKILL.md under {}", dir.display());
    }
    Ok(ids)
}

/// What the clients measured.
#[derive(Default)]
struct Tally {
    latencies_us: Vec<u64>,
    errors: Vec<String>,
    by_path: std::collections::BTreeMap<&'static str, u64>,
}

fn client(
    c: usize,
    addr: String,
    ids: Arc<Vec<String>>,
    stop: Arc<AtomicBool>,
    tally: Arc<Mutex<Tally>>,
) {
    let mut conn = Conn::new(&addr);
    let mut mine = Tally::default();
    let tools = json!(["read", "exec", "web_search", "browser", "message"]);
    let mut i: u64 = 0;
    while !stop.load(Ordering::Relaxed) {
        let n = ((c as u64) << 40) | i;
        let (path, body): (&'static str, Value) = match i % 10 {
            0..=3 => (
                "/v1/search",
                json!({"query": REPEATED[(i as usize + c) % REPEATED.len()]}),
            ),
            4..=5 => (
                "/v1/retrieve",
                json!({"query": format!("{} q{n}", REPEATED[(i as usize * 7 + c) % REPEATED.len()]), "mode": "auto"}),
            ),
            6 => (
                "/v1/search",
                json!({"query": format!("{} variant {n}", REPEATED[(i as usize * 5) % REPEATED.len()])}),
            ),
            7..=8 => (
                "/v1/read",
                json!({"id": format!("local/{}", ids[(n as usize).wrapping_mul(2_654_435_761) % ids.len()])}),
            ),
            _ => (
                "/v1/plan",
                json!({"query": REPEATED[(i as usize * 3 + c) % REPEATED.len()], "tools": tools}),
            ),
        };
        let t = Instant::now();
        let r = conn.post(path, &body);
        mine.latencies_us.push(t.elapsed().as_micros() as u64);
        *mine.by_path.entry(path).or_default() += 1;
        let bad = match r {
            Ok((status, v)) => failure(path, status, &v),
            Err(e) => Some(format!("{path}: {e:#}")),
        };
        if let Some(b) = bad {
            mine.errors.push(b);
        }
        i += 1;
    }
    let mut t = tally.lock().unwrap_or_else(|e| e.into_inner());
    t.latencies_us.extend(mine.latencies_us);
    t.errors.extend(mine.errors);
    for (k, v) in mine.by_path {
        *t.by_path.entry(k).or_default() += v;
    }
}

/// Adds, edits and removes skills under `dir` every `every` until `stop`; returns (adds,
/// edits, removes) and the number of the last skill added.
fn writer(dir: PathBuf, every: Duration, stop: Arc<AtomicBool>, last: Arc<AtomicU64>) -> [u64; 3] {
    let mut counts = [0u64; 3];
    let mut live: std::collections::VecDeque<u64> = Default::default();
    let mut n: u64 = 0;
    let write = |i: u64, edit: u64| {
        let d = dir.join(format!("soak-{i}"));
        let _ = std::fs::create_dir_all(&d);
        let text = format!(
            "---\nname: soak-{i}\ndescription: Calibrate the soak gauge number {i} of the plant\n---\n\nRevision {edit}: turn the gauge{i} valve until it reads {edit}.\n"
        );
        let _ = std::fs::write(d.join("SKILL.md"), text);
    };
    while !stop.load(Ordering::Relaxed) {
        match n % 4 {
            // Edit one that exists.
            1 if !live.is_empty() => {
                let i = live[(n as usize * 7) % live.len()];
                write(i, n);
                counts[1] += 1;
            }
            // Remove the oldest once there are enough.
            3 if live.len() > 40 => {
                if let Some(i) = live.pop_front() {
                    let _ = std::fs::remove_dir_all(dir.join(format!("soak-{i}")));
                    counts[2] += 1;
                }
            }
            _ => {
                write(n, 0);
                live.push_back(n);
                last.store(n, Ordering::Relaxed);
                counts[0] += 1;
            }
        }
        n += 1;
        std::thread::sleep(every);
    }
    counts
}

/// (VmRSS in KiB, open file descriptors) of `pid`.
fn sample(pid: u32) -> Result<(u64, i64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .context("no VmRSS")?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))?.count() as i64;
    Ok((rss, fds))
}

pub(crate) fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)] as f64 / 1000.0
}

/// Kills the daemon when dropped.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn run(a: &SoakArgs) -> Result<()> {
    let work = a.work.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("skillsearch-soak-{}", std::process::id()))
    });
    let (home, wroot) = (work.join("home"), work.join("writer"));
    std::fs::create_dir_all(&wroot)?;
    let ids = Arc::new(skill_ids(&a.skills)?);
    let skills_args = |c: &mut Command| {
        c.arg("--skills").arg(&a.skills).arg("--skills").arg(&wroot);
    };
    // The first build is not part of the soak.
    let mut index = Command::new(&a.bin);
    index.arg("--home").arg(&home).arg("index");
    skills_args(&mut index);
    let built = Instant::now();
    let st = index.stdout(Stdio::null()).status()?;
    if !st.success() {
        bail!("`skillsearch index` failed: {st}");
    }
    eprintln!(
        "soak: {} skills indexed in {:.1} s; load for {} s with {} clients",
        ids.len(),
        built.elapsed().as_secs_f64(),
        a.seconds,
        a.clients
    );
    let log = std::fs::File::create(work.join("daemon.log"))?;
    let mut serve = Command::new(&a.bin);
    serve
        .arg("--home")
        .arg(&home)
        .args(["serve", "--listen", "127.0.0.1:0", "--mode", "auto"]);
    skills_args(&mut serve);
    let mut child = serve
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log))
        .spawn()?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().context("no stdout")?).read_line(&mut line)?;
    let daemon = Daemon(child);
    let pid = daemon.0.id();
    let v: Value = serde_json::from_str(&line).with_context(|| format!("{line:?}"))?;
    let addr = v["listening"]
        .as_str()
        .context("no listening address")?
        .trim_start_matches("http://")
        .to_owned();

    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Mutex::new(Tally::default()));
    let last = Arc::new(AtomicU64::new(0));
    let writer_thread = {
        let (dir, stop, last) = (wroot.clone(), stop.clone(), last.clone());
        let every = Duration::from_millis(a.write_ms);
        std::thread::spawn(move || writer(dir, every, stop, last))
    };
    let clients: Vec<_> = (0..a.clients)
        .map(|c| {
            let (addr, ids, stop, tally) = (addr.clone(), ids.clone(), stop.clone(), tally.clone());
            std::thread::spawn(move || client(c, addr, ids, stop, tally))
        })
        .collect();
    let started = Instant::now();
    let total = Duration::from_secs(a.seconds);
    let warm_up = total / 5;
    let mut samples: Vec<(f64, u64, i64)> = Vec::new();
    let mut baseline: Option<(u64, i64)> = None;
    loop {
        let at = started.elapsed();
        let (rss, fds) = sample(pid).context("the daemon is gone")?;
        samples.push((at.as_secs_f64(), rss, fds));
        if baseline.is_none() && at >= warm_up {
            baseline = Some((rss, fds));
        }
        if at >= total {
            break;
        }
        std::thread::sleep(Duration::from_secs(a.sample_secs).min(total.saturating_sub(at)));
    }
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        let _ = c.join();
    }
    let writes = writer_thread.join().unwrap_or_default();
    // The writer's last skill is found: the refreshes kept up.
    let last_n = last.load(Ordering::Relaxed);
    let mut conn = Conn::new(&addr);
    let seen_started = Instant::now();
    let mut seen = false;
    while seen_started.elapsed() < Duration::from_secs(15) {
        let q = json!({"query": format!("calibrate soak gauge{last_n} valve")});
        if let Ok((200, v)) = conn.post("/v1/search", &q)
            && v["text"]
                .as_str()
                .is_some_and(|t| t.contains(&format!("soak-{last_n}")))
        {
            seen = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(daemon);

    let mut t = tally.lock().unwrap_or_else(|e| e.into_inner());
    t.latencies_us.sort_unstable();
    let requests = t.latencies_us.len() as u64;
    let elapsed = started.elapsed().as_secs_f64();
    let (first, last_s) = (samples[0], *samples.last().unwrap_or(&samples[0]));
    let base = baseline.unwrap_or((first.1, first.2));
    let rss_max = samples.iter().map(|s| s.1).max().unwrap_or(0);
    let fd_max = samples.iter().map(|s| s.2).max().unwrap_or(0);
    let rss_growth_kb = last_s.1 as i64 - base.0 as i64;
    let fd_growth = last_s.2 - base.1;
    let mb = |kb: u64| kb as f64 / 1024.0;
    let figures = json!({
        "seconds": a.seconds, "clients": a.clients, "skills": ids.len(),
        "requests": requests, "errors": t.errors.len(),
        "per_second": requests as f64 / elapsed.max(1e-9),
        "by_endpoint": t.by_path,
        "latency_ms": {"p50": percentile(&t.latencies_us, 0.50), "p95": percentile(&t.latencies_us, 0.95), "p99": percentile(&t.latencies_us, 0.99), "max": percentile(&t.latencies_us, 1.0)},
        "rss_mb": {"first": mb(first.1), "after_warm_up": mb(base.0), "last": mb(last_s.1), "max": mb(rss_max)},
        "fds": {"first": first.2, "after_warm_up": base.1, "last": last_s.2, "max": fd_max},
        "writer": {"added": writes[0], "edited": writes[1], "removed": writes[2], "last_seen": seen},
        "samples": samples.iter().map(|s| json!([s.0.round(), mb(s.1), s.2])).collect::<Vec<_>>(),
    });
    if a.json {
        println!("{}", serde_json::to_string_pretty(&figures)?);
    } else {
        let l = &figures["latency_ms"];
        println!(
            "soak: {} s, {} clients, {} skills (+ a writer: {} added, {} edited, {} removed)",
            a.seconds,
            a.clients,
            ids.len(),
            writes[0],
            writes[1],
            writes[2]
        );
        println!(
            "requests {requests} ({:.0}/s; {}), errors {}",
            figures["per_second"].as_f64().unwrap_or(0.0),
            t.by_path
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", "),
            t.errors.len()
        );
        println!(
            "latency ms: p50 {:.2}, p95 {:.2}, p99 {:.2}, max {:.2}",
            l["p50"].as_f64().unwrap_or(0.0),
            l["p95"].as_f64().unwrap_or(0.0),
            l["p99"].as_f64().unwrap_or(0.0),
            l["max"].as_f64().unwrap_or(0.0)
        );
        println!(
            "RSS MB: first {:.1}, after warm-up {:.1}, last {:.1}, max {:.1}",
            mb(first.1),
            mb(base.0),
            mb(last_s.1),
            mb(rss_max)
        );
        println!(
            "open fds: first {}, after warm-up {}, last {}, max {}",
            first.2, base.1, last_s.2, fd_max
        );
        println!("the writer's last skill found by search: {seen}");
    }
    for e in t.errors.iter().take(10) {
        eprintln!("soak: error: {e}");
    }
    let mut failed = Vec::new();
    if !t.errors.is_empty() {
        failed.push(format!("{} errors", t.errors.len()));
    }
    if rss_growth_kb > (a.rss_tolerance_mb * 1024) as i64 {
        failed.push(format!(
            "RSS grew {:.1} MB after the warm-up (tolerance {} MB)",
            rss_growth_kb as f64 / 1024.0,
            a.rss_tolerance_mb
        ));
    }
    if fd_growth > a.fd_tolerance {
        failed.push(format!(
            "open files grew by {fd_growth} after the warm-up (tolerance {})",
            a.fd_tolerance
        ));
    }
    if !seen {
        failed.push(format!(
            "the writer's last skill (soak-{last_n}) was never found"
        ));
    }
    if a.work.is_none() {
        let _ = std::fs::remove_dir_all(&work);
    }
    if !failed.is_empty() {
        bail!("soak failed: {}", failed.join("; "));
    }
    Ok(())
}
