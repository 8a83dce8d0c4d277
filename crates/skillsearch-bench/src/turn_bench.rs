//! `turn`: the daemon's work for one fresh auto-mode turn (search, read the hits' SKILL.md,
//! relevance guard, render), without HTTP, for unique queries. Reports the process's CPU time
//! per turn (user + system, every thread) — the figure that bounds a daemon's throughput on a
//! small machine — and the wall time per turn with 1 or more threads turning at once.

use crate::run::query_set;
use anyhow::{Context, Result, bail};
use serde::Serialize;
use skillsearch_core::index::{IndexConfig, Refresh, SkillIndex};
use skillsearch_core::turn::Retrieval;
use skillsearch_core::{Engine, Roots, Turn, config, corpus};
use std::path::PathBuf;
use std::time::Instant;

#[derive(clap::Args)]
pub struct TurnArgs {
    /// The corpus: directories each holding a SKILL.md
    #[arg(long, value_name = "DIR")]
    skills: PathBuf,
    /// Where the index lives (built on first use)
    #[arg(long, value_name = "DIR")]
    home: PathBuf,
    /// Unique queries (fixed phrases, then first sentences of descriptions); each is asked once
    #[arg(long, default_value_t = 2000)]
    queries: usize,
    /// Threads turning at once, each taking every n-th query
    #[arg(long, default_value_t = 1)]
    threads: usize,
    #[arg(long)]
    json: bool,
}

#[derive(Serialize, Default)]
struct Report {
    skills: usize,
    queries: usize,
    threads: usize,
    turns_per_s: f64,
    cpu_ms_per_turn: f64,
    wall_p50_ms: f64,
    wall_p95_ms: f64,
    wall_p99_ms: f64,
    search_ms_mean: f64,
    render_ms_mean: f64,
    injected_chars_mean: f64,
}

/// One turn: wall ms, search ms, render ms, characters injected.
type Row = (f64, f64, f64, usize);

/// User + system CPU time of this process so far, in seconds.
fn cpu_seconds() -> Result<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").context("cannot read /proc/self/stat")?;
    // Fields after the command name (which may hold spaces) start at the last ')'.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .context("unexpected /proc/self/stat")?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after the name.
    let ticks: u64 = f
        .get(11)
        .zip(f.get(12))
        .and_then(|(u, s)| Some(u.parse::<u64>().ok()? + s.parse::<u64>().ok()?))
        .context("unexpected /proc/self/stat")?;
    Ok(ticks as f64 / rustix::param::clock_ticks_per_second() as f64)
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p / 100.0).round() as usize]
}

pub fn run(args: &TurnArgs) -> Result<()> {
    let dir = corpus::absolute(&args.skills);
    if !dir.is_dir() {
        bail!("{} is not a directory", dir.display());
    }
    std::fs::create_dir_all(&args.home)
        .with_context(|| format!("cannot create {}", args.home.display()))?;
    let roots = Roots::explicit([&dir]);
    let cfg = IndexConfig::new(&args.home);
    eprintln!("bench: opening the index (built on first use)");
    let (idx, _) = SkillIndex::open(&roots, &cfg, Refresh::Always, &|_| {})?;
    // The daemon's settings when nothing is configured: the defaults of every key.
    let settings = config::resolve(&config::Layers::default())?;
    let engine = Engine::new(&settings, &args.home);
    let threads = args.threads.max(1);
    let queries = query_set(&idx, args.queries.max(1))?;
    let turn = |q: &str| -> Result<(f64, Retrieval)> {
        let t = Instant::now();
        let r = engine.retrieve(&idx, q, &Turn::default())?;
        Ok((t.elapsed().as_secs_f64() * 1e3, r))
    };
    // Warm-up: the searcher, the token counter's tables, the file cache of the hits.
    for q in queries.iter().take(20) {
        turn(q)?;
    }

    let cpu0 = cpu_seconds()?;
    let t0 = Instant::now();
    let per_thread: Vec<Result<Vec<Row>>> = std::thread::scope(|s| {
        let jobs: Vec<_> = (0..threads)
            .map(|i| {
                let (queries, turn) = (&queries, &turn);
                s.spawn(move || {
                    queries
                        .iter()
                        .skip(i)
                        .step_by(threads)
                        .map(|q| {
                            let (ms, r) = turn(q)?;
                            Ok((ms, r.search_ms, r.render_ms, r.chars))
                        })
                        .collect()
                })
            })
            .collect();
        jobs.into_iter()
            .map(|j| j.join().unwrap_or_else(|_| bail!("a turn thread panicked")))
            .collect()
    });
    let wall = t0.elapsed().as_secs_f64();
    let cpu = cpu_seconds()? - cpu0;
    let mut rows = Vec::with_capacity(queries.len());
    for r in per_thread {
        rows.extend(r?);
    }
    let n = rows.len().max(1) as f64;
    let mut lat: Vec<f64> = rows.iter().map(|r| r.0).collect();
    lat.sort_by(f64::total_cmp);
    let r = Report {
        skills: idx.doc_keys()?.iter().filter(|k| k.valid).count(),
        queries: rows.len(),
        threads,
        turns_per_s: n / wall,
        cpu_ms_per_turn: cpu * 1e3 / n,
        wall_p50_ms: pct(&lat, 50.0),
        wall_p95_ms: pct(&lat, 95.0),
        wall_p99_ms: pct(&lat, 99.0),
        search_ms_mean: rows.iter().map(|r| r.1).sum::<f64>() / n,
        render_ms_mean: rows.iter().map(|r| r.2).sum::<f64>() / n,
        injected_chars_mean: rows.iter().map(|r| r.3 as f64).sum::<f64>() / n,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(());
    }
    println!(
        "{} skills, {} unique auto-mode turns on {} thread(s), lexical, no HTTP:",
        r.skills, r.queries, r.threads
    );
    println!(
        "  {:.0} turns/s, CPU {:.3} ms per turn (all threads, user + system)",
        r.turns_per_s, r.cpu_ms_per_turn
    );
    println!(
        "  wall per turn p50 {:.2} / p95 {:.2} / p99 {:.2} ms; mean search {:.2} ms, render {:.2} ms; {:.0} chars injected",
        r.wall_p50_ms,
        r.wall_p95_ms,
        r.wall_p99_ms,
        r.search_ms_mean,
        r.render_ms_mean,
        r.injected_chars_mean
    );
    Ok(())
}
