//! `hub-vectors`: how long a `hub serve` replica over PostgreSQL takes to rank hybrid (a vector
//! for every skill), with and without the vectors in the database. The store is seeded with
//! `--count` skills of `--skills` (as `hub-write` seeds it); then, each with a fresh home:
//!
//! 1. replica A starts on an empty `vectors` table and embeds the catalogue (writing it back);
//! 2. replica B starts with A's vectors in the table;
//! 3. replica C starts after the table is emptied: a second replica as it was before the
//!    vectors were shared.
//!
//! "Ready" is the first answer of `GET /openapi/v1/vectors?limit=1` saying `complete` with
//! `total` = `--count`, polled every 50 ms from the process's start. It prints figures and fails
//! only when a server does.

use crate::hub_child::HubChild;
use crate::hub_write::{run_bin, seed_pg, sources};
use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use std::ffi::OsStr;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(clap::Args)]
pub struct HubVectorsArgs {
    /// The `skillsearch` binary under test (a release build)
    #[arg(long, value_name = "FILE")]
    pub bin: PathBuf,
    /// The corpus the store is seeded from
    #[arg(long, value_name = "DIR")]
    pub skills: PathBuf,
    /// Skills in the store
    #[arg(long, default_value_t = 3_000)]
    pub count: usize,
    /// Scratch directory (emptied first)
    #[arg(long, value_name = "DIR")]
    pub work: PathBuf,
    /// The sentence model directory every replica loads
    #[arg(long, value_name = "DIR")]
    pub model: PathBuf,
    /// `f32`, `int8` or `auto` (embedding_precision)
    #[arg(long, default_value = "int8")]
    pub precision: String,
    /// Print one JSON object instead of text
    #[arg(long)]
    pub json: bool,
}

fn start(a: &HubVectorsArgs, home: &Path, store: &str, log: &Path) -> Result<HubChild> {
    HubChild::start(
        &a.bin,
        home,
        &["--store", store],
        &[
            ("SKILLSEARCH_EMBEDDING_MODEL_DIR", a.model.as_os_str()),
            ("SKILLSEARCH_EMBEDDING_PRECISION", OsStr::new(&a.precision)),
            ("SKILLSEARCH_LOG", OsStr::new("info")),
        ],
        Some(log),
    )
}

/// One GET on a new connection: the body as JSON.
fn get(addr: &str, path: &str) -> Result<Value> {
    let mut s = std::net::TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    Ok(serde_json::from_str(body).unwrap_or(Value::Null))
}

/// Seconds from `r`'s start until it serves a vector for each of `count` skills.
fn ready(r: &mut HubChild, count: usize, log: &Path) -> Result<f64> {
    loop {
        if let Some(status) = r.child.try_wait()? {
            bail!("the replica exited ({status}); see {}", log.display());
        }
        if let Ok(v) = get(&r.addr, "/openapi/v1/vectors?limit=1")
            && v["result"]["complete"] == true
            && v["result"]["total"].as_u64() == Some(count as u64)
        {
            return Ok(r.started.elapsed().as_secs_f64());
        }
        if r.started.elapsed() > Duration::from_secs(4 * 3600) {
            bail!("not ready after 4 h; see {}", log.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The `embedded=` and `fetched=` of the replica's "skills embedded" log lines, summed.
fn counts(log: &Path) -> (u64, u64) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let field = |line: &str, k: &str| -> u64 {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(k))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    text.lines()
        .filter(|l| l.contains("skills embedded"))
        .fold((0, 0), |(e, f), l| {
            (e + field(l, "embedded="), f + field(l, "fetched="))
        })
}

pub fn run(a: &HubVectorsArgs) -> Result<()> {
    if a.count == 0 {
        bail!("--count must be at least 1");
    }
    let _ = std::fs::remove_dir_all(&a.work);
    let stage = a.work.join("stage");
    std::fs::create_dir_all(&stage)?;
    let src = sources(&a.skills, a.count)?;
    let db =
        skillsearch_testkit::pg::Postgres::new().context("no PostgreSQL: pip install pgserver")?;
    let uri = db.uri();
    run_bin(
        &a.bin,
        &a.work.join("admin"),
        &["hub", "migrate", "--store", &uri],
    )?;
    seed_pg(&uri, &src, &stage)?;

    let mut out = serde_json::Map::new();
    for (name, before) in [
        ("A, empty table", ""),
        ("B, vectors in the table", ""),
        ("C, table emptied", "DELETE FROM vectors"),
    ] {
        if !before.is_empty() {
            postgres::Client::connect(&uri, postgres::NoTls)?.batch_execute(before)?;
        }
        let tag = &name[..1];
        let log = a.work.join(format!("{tag}.log"));
        let mut r = start(a, &a.work.join(format!("home-{tag}")), &uri, &log)?;
        let secs = ready(&mut r, a.count, &log)?;
        // The last batch's write-back follows its local append by a moment.
        std::thread::sleep(Duration::from_millis(300));
        let (embedded, fetched) = counts(&log);
        let rows: i64 = postgres::Client::connect(&uri, postgres::NoTls)?
            .query_one("SELECT count(*) FROM vectors", &[])?
            .get(0);
        out.insert(
            name.to_owned(),
            json!({"ready_s": secs, "embedded": embedded, "fetched": fetched, "rows_after": rows}),
        );
        if !a.json {
            println!(
                "{name}: hybrid-ready in {secs:.1} s (embedded {embedded}, fetched {fetched}; {rows} rows in the table after)"
            );
        }
    }
    if a.json {
        println!(
            "{}",
            json!({"count": a.count, "precision": a.precision, "replicas": out})
        );
    }
    Ok(())
}
