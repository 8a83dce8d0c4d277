//! `hub-load`: `skillsearch hub serve` under concurrent discover calls (#23). A release hub
//! server runs over `--skills` with its rate limits off; after one warm-up pass over the
//! queries, `--clients` threads, each on its own keep-alive connection, send
//! `GET /openapi/v1/skills?q=<query>&limit=<limit>` in turn (each client starting at its own
//! offset in the query list) for `--seconds`. An error is a failed request, a status other
//! than 200 or an envelope whose `status` is not 0. Prints latency percentiles, throughput,
//! errors and the server's peak RSS; fails (exit 1) on any error.
//!
//! With `--pg` the hub serves a PostgreSQL store instead of `--skills`: a PostgreSQL of the
//! bench's own (PyPI `pgserver`) is started, migrated and seeded with `--count` skills of
//! `--skills` (their descriptions and bodies under generated names, as `hub-write` seeds), and
//! the hub runs with `--store URI` alone: what it answers from is the replica's tree and index
//! derived from the database. The time to ready then includes that derivation.

use crate::hub_child::HubChild;
use crate::hub_write::{run_bin, seed_pg, sources};
use crate::soak::{Conn, percentile};
use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct HubLoadArgs {
    /// The `skillsearch` binary (a release build)
    #[arg(long, value_name = "FILE")]
    pub bin: PathBuf,
    /// The skills the hub serves
    #[arg(long, value_name = "DIR")]
    pub skills: PathBuf,
    /// The hub's home (its index is built there on first use and reused after)
    #[arg(long, value_name = "DIR")]
    pub home: PathBuf,
    /// Queries, one JSON object with a `query` field per line
    #[arg(long, value_name = "FILE.jsonl")]
    pub queries: PathBuf,
    /// Concurrent clients
    #[arg(long, default_value_t = 64)]
    pub clients: usize,
    /// Seconds of load after the warm-up
    #[arg(long, default_value_t = 30)]
    pub seconds: u64,
    /// `limit` of each discover call
    #[arg(long, default_value_t = 8)]
    pub limit: usize,
    /// Print one JSON object instead of text
    #[arg(long)]
    pub json: bool,
    /// Serve a PostgreSQL store seeded from `--skills` (see the module's text); `--home` is
    /// emptied first
    #[arg(long)]
    pub pg: bool,
    /// With `--pg`: how many skills to seed
    #[arg(long, default_value_t = 60_000)]
    pub count: usize,
}

/// Percent-encodes a query-string value.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn vm_hwm_kb(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

pub fn run(a: &HubLoadArgs) -> Result<()> {
    let queries: Vec<String> = std::fs::read_to_string(&a.queries)
        .with_context(|| format!("cannot read {}", a.queries.display()))?
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l)?;
            v["query"]
                .as_str()
                .map(str::to_owned)
                .context("a line without a `query` string")
        })
        .collect::<Result<_>>()?;
    if queries.is_empty() {
        bail!("{} holds no queries", a.queries.display());
    }
    // --pg: the database outlives the server (dropped at the end of `run`).
    let mut pg = None;
    let mut seed_s = None;
    let source: Vec<String> = if a.pg {
        let t = Instant::now();
        let _ = std::fs::remove_dir_all(&a.home);
        let stage = a.home.join("stage");
        std::fs::create_dir_all(&stage)?;
        let src = sources(&a.skills, a.count)?;
        let db = skillsearch_testkit::pg::Postgres::new()
            .context("no PostgreSQL: pip install pgserver")?;
        let uri = db.uri();
        run_bin(
            &a.bin,
            &a.home.join("admin"),
            &["hub", "migrate", "--store", &uri],
        )?;
        seed_pg(&uri, &src, &stage)?;
        std::fs::remove_dir_all(&stage)?;
        pg = Some(db);
        seed_s = Some(t.elapsed().as_secs_f64());
        vec!["--store".into(), uri]
    } else {
        vec!["--skills".into(), a.skills.to_string_lossy().into_owned()]
    };
    let home = if a.pg {
        a.home.join("replica")
    } else {
        a.home.clone()
    };
    let mut args = vec!["--rate-download".to_owned(), "0".to_owned()];
    args.extend(source);
    let server = HubChild::start(&a.bin, &home, &args, &[], None)?;
    let addr = server.addr.clone();
    let ready_s = server.ready_s;
    let path = |q: &str| format!("/openapi/v1/skills?q={}&limit={}", encode(q), a.limit);
    let result = (|| -> Result<Value> {
        // Warm-up: every query once (the first loads the BPE tables, fills page caches).
        let mut c = Conn::new(&addr);
        for q in &queries {
            let (st, v) = c.get(&path(q))?;
            if st != 200 || v["status"] != 0 {
                bail!("warm-up `{q}`: status {st}: {v}");
            }
        }
        let errors = Arc::new(AtomicU64::new(0));
        let first_error: Arc<Mutex<Option<String>>> = Arc::default();
        let until = Instant::now() + Duration::from_secs(a.seconds);
        let t0 = Instant::now();
        let handles: Vec<_> = (0..a.clients)
            .map(|i| {
                let (addr, queries, errors, first_error) = (
                    addr.clone(),
                    queries.clone(),
                    errors.clone(),
                    first_error.clone(),
                );
                let limit = a.limit;
                std::thread::spawn(move || {
                    let mut c = Conn::new(&addr);
                    let mut lat = Vec::new();
                    let mut n = i * 7;
                    while Instant::now() < until {
                        let q = &queries[n % queries.len()];
                        n += 1;
                        let t = Instant::now();
                        let r = c.get(&format!("/openapi/v1/skills?q={}&limit={limit}", encode(q)));
                        lat.push(t.elapsed().as_micros() as u64);
                        let bad = match r {
                            Ok((200, v)) if v["status"] == 0 => None,
                            Ok((st, v)) => Some(format!("status {st}: {v}")),
                            Err(e) => Some(e.to_string()),
                        };
                        if let Some(why) = bad {
                            errors.fetch_add(1, Ordering::Relaxed);
                            first_error.lock().unwrap().get_or_insert(why);
                        }
                    }
                    lat
                })
            })
            .collect();
        let mut lat: Vec<u64> = Vec::new();
        for h in handles {
            lat.extend(
                h.join()
                    .map_err(|_| anyhow::anyhow!("a client thread panicked"))?,
            );
        }
        let wall = t0.elapsed().as_secs_f64();
        lat.sort_unstable();
        let first = first_error.lock().unwrap().clone();
        Ok(json!({
            "skills": a.skills.display().to_string(), "clients": a.clients, "seconds": wall,
            "store": if a.pg { "postgresql" } else { "skills" }, "seeded": a.pg.then_some(a.count),
            "seed_s": seed_s,
            "ready_s": ready_s, "requests": lat.len(), "rps": lat.len() as f64 / wall,
            "errors": errors.load(Ordering::Relaxed), "first_error": first,
            "latency_ms": {"p50": percentile(&lat, 0.50), "p95": percentile(&lat, 0.95),
                           "p99": percentile(&lat, 0.99), "max": percentile(&lat, 1.0)},
            "server_peak_rss_mb": vm_hwm_kb(server.child.id()).map(|k| k / 1024),
        }))
    })();
    drop(server);
    drop(pg);
    let r = result?;
    if a.json {
        println!("{r}");
    } else {
        let l = &r["latency_ms"];
        if a.pg {
            println!(
                "PostgreSQL store seeded with {} skills in {:.1} s",
                a.count,
                r["seed_s"].as_f64().unwrap_or(0.0)
            );
        }
        println!(
            "hub discover, {} clients, {:.0} s: {} requests ({:.0}/s), {} errors; latency ms p50 {:.2} / p95 {:.2} / p99 {:.2} / max {:.2}; server ready in {:.1} s, peak RSS {} MB",
            a.clients,
            r["seconds"].as_f64().unwrap_or(0.0),
            r["requests"],
            r["rps"].as_f64().unwrap_or(0.0),
            r["errors"],
            l["p50"].as_f64().unwrap_or(0.0),
            l["p95"].as_f64().unwrap_or(0.0),
            l["p99"].as_f64().unwrap_or(0.0),
            l["max"].as_f64().unwrap_or(0.0),
            r["ready_s"].as_f64().unwrap_or(0.0),
            r["server_peak_rss_mb"],
        );
    }
    if r["errors"].as_u64().unwrap_or(0) > 0 {
        bail!(
            "{} requests failed; the first: {}",
            r["errors"],
            r["first_error"]
        );
    }
    Ok(())
}
