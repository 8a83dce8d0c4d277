//! `run`: the measurements on one corpus, plus the child processes that report their own peak RSS.

use anyhow::{Context, Result, bail};
use serde::Serialize;
use skillsearch_core::eval::percentile;
use skillsearch_core::index::{self, IndexConfig, Refresh, SkillIndex};
use skillsearch_core::retrieve::SearchOptions;
use skillsearch_core::{EligibilityEnv, Roots, corpus};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[derive(clap::Args)]
pub struct RunArgs {
    /// The skill corpus (one root)
    #[arg(long, value_name = "DIR")]
    skills: PathBuf,
    /// The `skillsearch` binary [default: next to this one]
    #[arg(long, value_name = "PATH")]
    bin: Option<PathBuf>,
    /// Warm in-process queries
    #[arg(long, default_value_t = 500)]
    queries: usize,
    /// Cold-process searches per refresh mode
    #[arg(long, default_value_t = 60)]
    cold_runs: usize,
    /// Repetitions of the unchanged re-open (median reported)
    #[arg(long, default_value_t = 5)]
    reopen_runs: usize,
    /// Keep the index in this SKILLSEARCH home instead of a temporary one
    #[arg(long, value_name = "DIR")]
    home: Option<PathBuf>,
    /// One JSON object on stdout
    #[arg(long)]
    json: bool,
}

/// Everything `run` reports; key names are the JSON output.
#[derive(Debug, Default, Serialize)]
struct Report {
    corpus: PathBuf,
    skills: usize,
    corpus_bytes: u64,
    build_ms: f64,
    build_process_ms: f64,
    reopen_unchanged_process_ms: f64,
    reopen_unchanged_process_refresh_ms: f64,
    reopen_unchanged_inprocess_ms: f64,
    walk_ms: f64,
    doc_keys_ms: f64,
    diagnostics_ms: f64,
    incremental_one_ms: f64,
    incremental_one_process_ms: f64,
    warm_p50_ms: f64,
    warm_p95_ms: f64,
    warm_max_ms: f64,
    warm_no_hits: usize,
    cold_never_p50_ms: f64,
    cold_never_p95_ms: f64,
    cold_auto_p50_ms: f64,
    cold_auto_p95_ms: f64,
    cold_auto_refreshed: usize,
    hook_p50_ms: f64,
    hook_p95_ms: f64,
    /// The same with a long prompt (~80 words, as users often write).
    hook_long_p50_ms: f64,
    hook_long_p95_ms: f64,
    hook_warm_p50_ms: f64,
    hook_warm_p95_ms: f64,
    build_peak_rss_mb: f64,
    search_peak_rss_mb: f64,
    index_bytes: u64,
    queries: usize,
    cold_runs: usize,
    reopen_runs: usize,
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median(v: &[f64]) -> f64 {
    percentile(v, 50.0)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// `VmHWM` of this process in kB (0 when /proc is unavailable).
fn vm_hwm_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Sum of file sizes below `dir`.
fn dir_bytes(dir: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.filter_map(|e| e.ok())
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}

/// Runs a command to exit; wall time from spawn to exit, and its output.
fn timed(cmd: &mut Command) -> Result<(f64, Output)> {
    cmd.stdin(Stdio::null());
    let t = Instant::now();
    let out = cmd
        .output()
        .with_context(|| format!("cannot run {:?}", cmd.get_program()))?;
    Ok((ms(t.elapsed()), out))
}

/// Fails unless the exit code is one of `ok`.
fn check(what: &str, out: &Output, ok: &[i32]) -> Result<()> {
    match out.status.code() {
        Some(c) if ok.contains(&c) => Ok(()),
        _ => bail!(
            "{what} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ),
    }
}

fn last_json(what: &str, out: &Output) -> Result<serde_json::Value> {
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim())
        .or_else(|_| serde_json::from_str(text.lines().last().unwrap_or_default()))
        .with_context(|| format!("{what} printed no JSON: {}", text.trim()))
}

/// A temporary (or kept) SKILLSEARCH home.
struct Home {
    path: PathBuf,
    keep: bool,
}

impl Drop for Home {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Puts a changed `SKILL.md` back, bytes and mtime, even on an early return.
struct Restore {
    path: PathBuf,
    bytes: Vec<u8>,
    mtime: SystemTime,
}

impl Restore {
    fn restore(&self) -> Result<()> {
        std::fs::write(&self.path, &self.bytes)
            .with_context(|| format!("cannot restore {}", self.path.display()))?;
        std::fs::File::options()
            .write(true)
            .open(&self.path)
            .and_then(|f| f.set_modified(self.mtime))
            .with_context(|| format!("cannot restore the mtime of {}", self.path.display()))
    }
}

impl Drop for Restore {
    fn drop(&mut self) {
        if let Err(e) = self.restore() {
            eprintln!("skillsearch-bench: warning: {e:#}");
        }
    }
}

fn append(path: &Path, line: &str) -> Result<()> {
    use std::io::Write;
    let mut f = std::fs::File::options()
        .append(true)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    f.write_all(line.as_bytes())
        .with_context(|| format!("cannot append to {}", path.display()))
}

/// The first sentence of a description, at most ~200 bytes.
fn first_sentence(desc: &str) -> String {
    let desc = desc.trim();
    let mut end = desc.len();
    let b = desc.as_bytes();
    for (i, &c) in b.iter().enumerate() {
        let boundary =
            matches!(c, b'.' | b'!' | b'?') && b.get(i + 1).is_none_or(|n| n.is_ascii_whitespace());
        if boundary || c == b'\n' {
            end = i;
            break;
        }
    }
    let mut s = &desc[..end];
    if s.len() > 200 {
        let mut cut = 200;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s = &s[..cut];
    }
    s.trim().to_owned()
}

const FIXED_QUERIES: &[&str] = &[
    "convert a pdf to markdown",
    "send a message to a slack channel",
    "what is the weather forecast for tomorrow",
    "create a pull request on github",
    "search the web for recent news",
    "resize and compress an image",
    "query a postgres database",
    "deploy a service to kubernetes",
    "transcribe an audio recording",
    "track live sports scores",
];

/// A prompt as users often write them: several requests in one long sentence (its distinct
/// terms are more than the lexical retriever keeps).
const LONG_PROMPT: &str = "I have a quarterly sales report as a scanned PDF invoice bundle from \
    our accounting team and I need to extract all the tables into a spreadsheet, clean up the \
    currency columns, merge them with the postgres database export we made last week, then \
    generate charts for the board meeting presentation and post a summary message to the \
    finance slack channel with the main numbers highlighted and a link to the shared drive \
    folder where the final deck lives";

/// `n` queries: the fixed phrases, then the first sentence of every k-th description.
pub(crate) fn query_set(idx: &SkillIndex, n: usize) -> Result<Vec<String>> {
    let mut out: Vec<String> = FIXED_QUERIES
        .iter()
        .take(n)
        .map(|s| (*s).to_owned())
        .collect();
    let need = n.saturating_sub(out.len());
    if need == 0 {
        return Ok(out);
    }
    let descs: Vec<String> = idx
        .skills()?
        .into_iter()
        .map(|(h, _)| first_sentence(&h.description))
        .filter(|s| !s.is_empty())
        .collect();
    let step = (descs.len() / need).max(1);
    out.extend(descs.into_iter().step_by(step).take(need));
    Ok(out)
}

pub fn run(args: &RunArgs) -> Result<()> {
    let dir = corpus::absolute(&args.skills);
    if !dir.is_dir() {
        bail!("{} is not a directory", dir.display());
    }
    let bin = match &args.bin {
        Some(b) => b.clone(),
        None => std::env::current_exe()?
            .parent()
            .map(|p| p.join("skillsearch"))
            .unwrap_or_default(),
    };
    if !bin.is_file() {
        bail!(
            "skillsearch binary not found at {}; build it (cargo build --release -p skillsearch) or pass --bin",
            bin.display()
        );
    }
    let me = std::env::current_exe()?;
    let home = match &args.home {
        Some(h) => Home {
            path: corpus::absolute(h),
            keep: true,
        },
        None => {
            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            Home {
                path: std::env::temp_dir()
                    .join(format!("skillsearch-bench-{}-{nanos}", std::process::id())),
                keep: false,
            }
        }
    };
    let roots = Roots::explicit([&dir]);
    let idx_dir = index::index_dir(&home.path, &roots);
    if idx_dir.exists() {
        bail!(
            "{} already holds an index for this corpus; remove it or pick another --home",
            idx_dir.display()
        );
    }
    std::fs::create_dir_all(&home.path)
        .with_context(|| format!("cannot create {}", home.path.display()))?;
    let cfg = IndexConfig::new(&home.path);
    let say = |m: &str| eprintln!("bench: {m}");

    let (files, _) = corpus::discover(&roots);
    if files.is_empty() {
        bail!("no SKILL.md under {}", dir.display());
    }
    let mut r = Report {
        corpus: dir.clone(),
        skills: files.len(),
        corpus_bytes: files.iter().map(|f| f.size).sum(),
        reopen_runs: args.reopen_runs.max(1),
        ..Report::default()
    };

    // Full build, in a child so its peak RSS is the build's own.
    say(&format!("full build of {} skills", r.skills));
    let (wall, out) = timed(
        Command::new(&me)
            .arg("build-child")
            .arg("--skills")
            .arg(&dir)
            .arg("--home")
            .arg(&home.path)
            .stderr(Stdio::piped()),
    )?;
    check("build-child", &out, &[0])?;
    let v = last_json("build-child", &out)?;
    r.build_ms = v["build_ms"].as_f64().unwrap_or(0.0);
    r.build_process_ms = wall;
    r.build_peak_rss_mb = v["vm_hwm_kb"].as_f64().unwrap_or(0.0) / 1024.0;
    r.index_bytes = dir_bytes(&home.path.join("indexes"));

    // Re-open with nothing changed, in this process.
    say("re-open unchanged (in-process)");
    let mut times = Vec::new();
    let mut idx = None;
    for _ in 0..r.reopen_runs {
        drop(idx.take());
        let t = Instant::now();
        let (i, rep) = SkillIndex::open(&roots, &cfg, Refresh::Always, &|_| {})?;
        times.push(ms(t.elapsed()));
        if let Some(rep) = rep
            && rep.added + rep.updated + rep.removed > 0
        {
            bail!("the corpus changed during the benchmark: {rep:?}");
        }
        idx = Some(i);
    }
    r.reopen_unchanged_inprocess_ms = median(&times);
    let Some(idx) = idx else {
        bail!("no index opened")
    };

    // Where a re-open goes: the walk, reading every document key, and `index`'s diagnostics.
    let (mut walk, mut keys, mut diags) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..r.reopen_runs {
        let t = Instant::now();
        let _ = corpus::discover(&roots);
        walk.push(ms(t.elapsed()));
        let t = Instant::now();
        idx.doc_keys()?;
        keys.push(ms(t.elapsed()));
        let t = Instant::now();
        idx.diagnostics()?;
        diags.push(ms(t.elapsed()));
    }
    r.walk_ms = median(&walk);
    r.doc_keys_ms = median(&keys);
    r.diagnostics_ms = median(&diags);

    // Warm queries.
    let queries = query_set(&idx, args.queries)?;
    r.queries = queries.len();
    say(&format!("{} warm queries", queries.len()));
    let opts = SearchOptions::default();
    let gate = EligibilityEnv::from_process();
    for q in queries.iter().take(20) {
        idx.search(q, &opts, &gate)?;
    }
    let mut lat = Vec::with_capacity(queries.len());
    for q in &queries {
        let t = Instant::now();
        let res = idx.search(q, &opts, &gate)?;
        lat.push(ms(t.elapsed()));
        if res.hits.is_empty() {
            r.warm_no_hits += 1;
        }
    }
    r.warm_p50_ms = percentile(&lat, 50.0);
    r.warm_p95_ms = percentile(&lat, 95.0);
    r.warm_max_ms = percentile(&lat, 100.0);
    drop(idx);

    // Re-open with nothing changed, in a fresh process (`skillsearch index`).
    let index_cmd = || {
        let mut c = Command::new(&bin);
        c.arg("--home")
            .arg(&home.path)
            .arg("index")
            .arg("--skills")
            .arg(&dir)
            .arg("--json");
        c
    };
    say("re-open unchanged (process)");
    let (mut walls, mut inner) = (Vec::new(), Vec::new());
    for _ in 0..r.reopen_runs {
        let (wall, out) = timed(&mut index_cmd())?;
        check("skillsearch index", &out, &[0])?;
        let v = last_json("skillsearch index", &out)?;
        walls.push(wall);
        inner.push(v["elapsed_ms"].as_f64().unwrap_or(0.0));
    }
    r.reopen_unchanged_process_ms = median(&walls);
    r.reopen_unchanged_process_refresh_ms = median(&inner);

    // Cold-process searches.
    let search_cmd = |q: &str, refresh: &str| {
        let mut c = Command::new(&bin);
        c.arg("--home")
            .arg(&home.path)
            .arg("search")
            .arg("--skills")
            .arg(&dir)
            .arg("--refresh")
            .arg(refresh)
            .arg("--json")
            .arg("--")
            .arg(q);
        c
    };
    let cold_q = |j: usize, offset: usize| -> &str {
        let n = queries.len().max(1);
        queries
            .get((j * n / args.cold_runs.max(1) + offset) % n)
            .map_or("skill", String::as_str)
    };
    r.cold_runs = args.cold_runs;
    say(&format!(
        "{} cold searches, --refresh never",
        args.cold_runs
    ));
    let mut lat = Vec::new();
    for j in 0..args.cold_runs {
        let (wall, out) = timed(&mut search_cmd(cold_q(j, 0), "never"))?;
        check("skillsearch search", &out, &[0, 1])?;
        lat.push(wall);
    }
    r.cold_never_p50_ms = percentile(&lat, 50.0);
    r.cold_never_p95_ms = percentile(&lat, 95.0);

    say(&format!(
        "{} cold searches, --refresh auto within 2 s of an index run",
        args.cold_runs
    ));
    let state_path = idx_dir.join("state.json");
    let verified_at = || -> u64 {
        std::fs::read(&state_path)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| v["verified_at_ms"].as_u64())
            .unwrap_or(0)
    };
    let mut lat = Vec::new();
    for j in 0..args.cold_runs {
        // Re-run `index` when the last check is over 1 s old, so the search lands in the window.
        if now_ms().saturating_sub(verified_at()) > 1000 {
            let (_, out) = timed(&mut index_cmd())?;
            check("skillsearch index", &out, &[0])?;
        }
        let (wall, out) = timed(&mut search_cmd(cold_q(j, 1), "auto"))?;
        check("skillsearch search", &out, &[0, 1])?;
        if !last_json("skillsearch search", &out)?["refresh"].is_null() {
            r.cold_auto_refreshed += 1;
        }
        lat.push(wall);
    }
    r.cold_auto_p50_ms = percentile(&lat, 50.0);
    r.cold_auto_p95_ms = percentile(&lat, 95.0);

    // The per-turn hook in auto mode: spawn, read the host's JSON, answer, exit. Measured with
    // the index fresh (refresh window not passed), as between turns seconds apart after `index`.
    say(&format!("{} cold hook turns (auto mode)", args.cold_runs));
    let (_, out) = timed(&mut index_cmd())?;
    check("skillsearch index", &out, &[0])?;
    let hook_turns = |prompt: &dyn Fn(usize) -> String, log: &OsStr| -> Result<Vec<f64>> {
        let mut lat = Vec::new();
        for j in 0..args.cold_runs {
            let input = serde_json::json!({"session_id": "bench", "cwd": "/", "hook_event_name": "UserPromptSubmit", "prompt": prompt(j)});
            let mut c = Command::new(&bin);
            c.arg("--home")
                .arg(&home.path)
                .arg("hook")
                .env("SKILLSEARCH_MODE", "auto")
                .env("SKILLSEARCH_SKILLS_DIRS", &dir)
                .env("SKILLSEARCH_REFRESH_MS", "3600000")
                .env("SKILLSEARCH_LOG_PATH", log)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let t = Instant::now();
            let mut child = c.spawn().context("cannot run skillsearch hook")?;
            if let Some(mut stdin) = child.stdin.take() {
                use std::io::Write;
                stdin.write_all(input.to_string().as_bytes())?;
            }
            let out = child.wait_with_output()?;
            lat.push(ms(t.elapsed()));
            check("skillsearch hook", &out, &[0])?;
        }
        Ok(lat)
    };
    let off = OsStr::new("off");
    let lat = hook_turns(&|j| cold_q(j, 2).to_owned(), off)?;
    r.hook_p50_ms = percentile(&lat, 50.0);
    r.hook_p95_ms = percentile(&lat, 95.0);
    let long = |j| format!("{LONG_PROMPT} {}", cold_q(j, 2));
    let lat = hook_turns(&long, off)?;
    r.hook_long_p50_ms = percentile(&lat, 50.0);
    r.hook_long_p95_ms = percentile(&lat, 95.0);

    // The same long-prompt turns answered by a warm MCP server of the same home and settings
    // over `<home>/warm.sock`; the decision log shows that the warm path answered.
    say("hook turns through a warm MCP server");
    let log = home.path.join("bench-decisions.jsonl");
    let mut server = Command::new(&bin)
        .arg("--home")
        .arg(&home.path)
        .arg("mcp")
        .env("SKILLSEARCH_SKILLS_DIRS", &dir)
        .env("SKILLSEARCH_REFRESH_MS", "3600000")
        .env("SKILLSEARCH_LOG_PATH", &log)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("cannot run skillsearch mcp")?;
    let t = Instant::now();
    while !home.path.join("warm.sock").exists() {
        if t.elapsed() > Duration::from_secs(60) {
            let _ = server.kill();
            bail!("the MCP server did not open its warm socket within 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let lat = hook_turns(&long, log.as_os_str());
    drop(server.stdin.take());
    let _ = server.wait();
    let lat = lat?;
    let last = std::fs::read_to_string(&log)
        .ok()
        .and_then(|t| t.lines().last().map(str::to_owned))
        .unwrap_or_default();
    if !last.contains("\"warm\"") {
        bail!("the hook did not take the warm path: {last}");
    }
    r.hook_warm_p50_ms = percentile(&lat, 50.0);
    r.hook_warm_p95_ms = percentile(&lat, 95.0);

    // Incremental update of one skill: in-process, then in a fresh process.
    let target = files[files.len() / 2].path.clone();
    say(&format!("incremental update of {}", target.display()));
    let meta = std::fs::metadata(&target)?;
    let restore = Restore {
        bytes: std::fs::read(&target)?,
        mtime: meta.modified()?,
        path: target.clone(),
    };
    append(&target, "\nAn edit by skillsearch-bench.\n")?;
    let t = Instant::now();
    let (i, rep) = SkillIndex::open(&roots, &cfg, Refresh::Always, &|_| {})?;
    r.incremental_one_ms = ms(t.elapsed());
    drop(i);
    let rep = rep.unwrap_or_default();
    if rep.updated != 1 || rep.added + rep.removed != 0 {
        eprintln!("bench: warning: incremental refresh did not see exactly one update: {rep:?}");
    }
    append(&target, "A second edit by skillsearch-bench.\n")?;
    let (wall, out) = timed(&mut index_cmd())?;
    check("skillsearch index", &out, &[0])?;
    let v = last_json("skillsearch index", &out)?;
    if v["updated"].as_u64() != Some(1) {
        eprintln!("bench: warning: `index` after one edit reported {}", v);
    }
    r.incremental_one_process_ms = wall;
    restore.restore()?;
    drop(restore);
    SkillIndex::open(&roots, &cfg, Refresh::Always, &|_| {})?;

    // Peak RSS of one cold search.
    say("peak RSS of a cold search");
    let (_, out) = timed(
        Command::new(&me)
            .arg("search-child")
            .arg("--skills")
            .arg(&dir)
            .arg("--home")
            .arg(&home.path)
            .arg("--query")
            .arg(cold_q(0, 2))
            .stderr(Stdio::piped()),
    )?;
    check("search-child", &out, &[0])?;
    r.search_peak_rss_mb = last_json("search-child", &out)?["vm_hwm_kb"]
        .as_f64()
        .unwrap_or(0.0)
        / 1024.0;

    if args.json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        print_table(&r, &home);
    }
    Ok(())
}

fn print_table(r: &Report, home: &Home) {
    let rows: Vec<(String, String)> = vec![
        ("skills".into(), r.skills.to_string()),
        (
            "SKILL.md text".into(),
            format!("{:.1} MB", r.corpus_bytes as f64 / 1e6),
        ),
        (
            "full build (in-process open)".into(),
            format!("{:.0} ms", r.build_ms),
        ),
        (
            "full build (process wall)".into(),
            format!("{:.0} ms", r.build_process_ms),
        ),
        (
            "build peak RSS (VmHWM)".into(),
            format!("{:.1} MB", r.build_peak_rss_mb),
        ),
        (
            "index on disk".into(),
            format!("{:.1} MB", r.index_bytes as f64 / 1e6),
        ),
        (
            format!(
                "re-open unchanged, in-process (median of {})",
                r.reopen_runs
            ),
            format!("{:.1} ms", r.reopen_unchanged_inprocess_ms),
        ),
        (
            "  walk (corpus::discover)".into(),
            format!("{:.1} ms", r.walk_ms),
        ),
        (
            "  read every doc key (doc_keys)".into(),
            format!("{:.1} ms", r.doc_keys_ms),
        ),
        (
            "  all diagnostics (as `index` lists them)".into(),
            format!("{:.1} ms", r.diagnostics_ms),
        ),
        (
            format!(
                "re-open unchanged, `index` process (median of {})",
                r.reopen_runs
            ),
            format!("{:.1} ms", r.reopen_unchanged_process_ms),
        ),
        (
            "  of which refresh (its elapsed_ms)".into(),
            format!("{:.1} ms", r.reopen_unchanged_process_refresh_ms),
        ),
        (
            "incremental, one skill, in-process".into(),
            format!("{:.1} ms", r.incremental_one_ms),
        ),
        (
            "incremental, one skill, `index` process".into(),
            format!("{:.1} ms", r.incremental_one_process_ms),
        ),
        (
            format!("warm query p50 / p95 ({} queries)", r.queries),
            format!("{:.2} / {:.2} ms", r.warm_p50_ms, r.warm_p95_ms),
        ),
        (
            "warm query max / no hits".into(),
            format!("{:.2} ms / {}", r.warm_max_ms, r.warm_no_hits),
        ),
        (
            format!(
                "cold search --refresh never p50 / p95 ({} runs)",
                r.cold_runs
            ),
            format!("{:.1} / {:.1} ms", r.cold_never_p50_ms, r.cold_never_p95_ms),
        ),
        (
            format!(
                "cold search --refresh auto, fresh p50 / p95 ({} runs, {} refreshed)",
                r.cold_runs, r.cold_auto_refreshed
            ),
            format!("{:.1} / {:.1} ms", r.cold_auto_p50_ms, r.cold_auto_p95_ms),
        ),
        (
            format!("cold hook turn, auto mode p50 / p95 ({} runs)", r.cold_runs),
            format!("{:.1} / {:.1} ms", r.hook_p50_ms, r.hook_p95_ms),
        ),
        (
            format!(
                "cold hook turn, ~80-word prompt p50 / p95 ({} runs)",
                r.cold_runs
            ),
            format!("{:.1} / {:.1} ms", r.hook_long_p50_ms, r.hook_long_p95_ms),
        ),
        (
            format!(
                "hook turn through a warm MCP server, ~80-word prompt p50 / p95 ({} runs)",
                r.cold_runs
            ),
            format!("{:.1} / {:.1} ms", r.hook_warm_p50_ms, r.hook_warm_p95_ms),
        ),
        (
            "cold search peak RSS (VmHWM)".into(),
            format!("{:.1} MB", r.search_peak_rss_mb),
        ),
    ];
    let width = rows.iter().map(|(l, _)| l.len()).max().unwrap_or(0);
    println!("{:<width$}  {}", "corpus", r.corpus.display());
    for (label, value) in rows {
        println!("{label:<width$}  {value:>18}");
    }
    if home.keep {
        println!("{:<width$}  {}", "home (kept)", home.path.display());
    }
}

/// Full build on an empty home; prints `{"build_ms", "vm_hwm_kb", ...}`.
pub fn build_child(skills: &Path, home: &Path) -> Result<()> {
    let roots = Roots::explicit([skills]);
    let cfg = IndexConfig::new(home);
    let t = Instant::now();
    let (idx, report) = SkillIndex::open(&roots, &cfg, Refresh::Always, &|_| {})?;
    let build_ms = ms(t.elapsed());
    let report = report.unwrap_or_default();
    let docs = idx.doc_keys()?.len();
    println!(
        "{}",
        serde_json::json!({
            "build_ms": build_ms,
            "vm_hwm_kb": vm_hwm_kb(),
            "docs": docs,
            "added": report.added,
            "rebuilt": report.rebuilt,
            "diagnostics": report.diagnostics.len(),
        })
    );
    Ok(())
}

/// One search on the existing index (never refreshed); prints `{"vm_hwm_kb", ...}`.
pub fn search_child(skills: &Path, home: &Path, query: &str) -> Result<()> {
    let roots = Roots::explicit([skills]);
    let cfg = IndexConfig::new(home);
    let t = Instant::now();
    let (idx, _) = SkillIndex::open(&roots, &cfg, Refresh::Never, &|_| {})?;
    let res = idx.search(
        query,
        &SearchOptions::default(),
        &EligibilityEnv::from_process(),
    )?;
    println!(
        "{}",
        serde_json::json!({
            "vm_hwm_kb": vm_hwm_kb(),
            "elapsed_ms": ms(t.elapsed()),
            "hits": res.hits.len(),
        })
    );
    Ok(())
}
