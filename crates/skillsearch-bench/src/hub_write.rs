//! `hub-write`: what one write (a publish of a new version, a yank of it) costs a hub whose
//! store already holds `--count` skills, and how soon it is visible. Run it once per `skillsearch` binary to
//! compare them in one sitting; it prints figures and fails only when the hub does.
//!
//! The store is seeded without the server: skill `i` of `--skills` (a corpus, e.g. one
//! `skillsearch-bench corpus` wrote) becomes `h<i>` with its description and body, version `1`.
//! `--store dir`: an embedded store, seeded through the library's `Store::publish`, served by
//! one `hub serve`. `--store pg`: a PostgreSQL of its own (`pgserver`, as the tests use),
//! migrated by the binary under test (`hub migrate`), seeded by inserting the repacked bundles
//! (the `skills` and `versions` tables every schema version shares), served by two replicas A
//! and B. Then, with the servers up and their trees and indexes built:
//!
//! 1. idle: each server's CPU over a few seconds, the baseline subtracted below;
//! 2. latency: `--writes` publishes through A, one at a time, of a new version of a skill
//!    spread over the catalogue, each with a word no skill holds: the publish call's time
//!    (the call answers once A's index has the change), whether A's discover finds the word
//!    right after and how long that first search after the write takes against the next one
//!    (what a new index generation costs a search), and (pg) how long until B's discover finds
//!    it, polled every 5 ms; then the same for a yank of that version (the skill falls back
//!    to the version before, without the word): the call's time, whether A's discover has
//!    lost the word right after, and (pg) how long until B's has;
//! 3. CPU: `--writes` more publishes, `--gap-ms` apart, nobody polling, then a yank of each,
//!    as far apart: each server's CPU over each phase, less its idle rate, per write. This
//!    includes whatever a write sets off in the background (a follower's sync, a watcher's
//!    refresh).

use crate::hub_child::HubChild;
use crate::soak::{Conn, percentile};
use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct HubWriteArgs {
    /// The `skillsearch` binary under test (a release build)
    #[arg(long, value_name = "FILE")]
    pub bin: PathBuf,
    /// The corpus the store is seeded from (skills in byte order of their directories)
    #[arg(long, value_name = "DIR")]
    pub skills: PathBuf,
    /// Skills in the store
    #[arg(long, default_value_t = 20_000)]
    pub count: usize,
    /// Scratch directory (emptied first): the store, the servers' homes
    #[arg(long, value_name = "DIR")]
    pub work: PathBuf,
    /// `dir` (the embedded store, one server) or `pg` (PostgreSQL, two replicas)
    #[arg(long, default_value = "dir")]
    pub store: String,
    /// Publishes per phase
    #[arg(long, default_value_t = 30)]
    pub writes: usize,
    /// Pause between the CPU phase's publishes (long enough for what a write sets off)
    #[arg(long, default_value_t = 1500)]
    pub gap_ms: u64,
    /// Print one JSON object instead of text
    #[arg(long)]
    pub json: bool,
}

/// User + system CPU seconds of process `pid` so far.
fn cpu_of(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("cannot read /proc/{pid}/stat"))?;
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .context("unexpected /proc/pid/stat")?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f
        .get(11)
        .zip(f.get(12))
        .and_then(|(u, s)| Some(u.parse::<u64>().ok()? + s.parse::<u64>().ok()?))
        .context("unexpected /proc/pid/stat")?;
    Ok(ticks as f64 / rustix::param::clock_ticks_per_second() as f64)
}

fn serve(bin: &Path, home: &Path, store: &str, log: &Path) -> Result<HubChild> {
    HubChild::start(
        bin,
        home,
        &["--rate-publish", "0", "--store", store],
        &[],
        Some(log),
    )
}

/// Writes `<dir>/<name>/SKILL.md` (a valid hub skill: a slug name, a description, a version).
fn write_skill(
    dir: &Path,
    name: &str,
    description: &str,
    version: &str,
    body: &str,
) -> Result<PathBuf> {
    let d = dir.join(name);
    std::fs::create_dir_all(&d)?;
    let md = format!(
        "---\nname: {name}\ndescription: {}\nversion: \"{version}\"\n---\n\n{body}\n",
        serde_json::to_string(description)?
    );
    std::fs::write(d.join("SKILL.md"), md)?;
    Ok(d)
}

fn pack(dir: &Path) -> Result<Vec<u8>> {
    skillsearch_core::registry::pack_dir(dir)
        .with_context(|| format!("{} holds no SKILL.md", dir.display()))?
        .with_context(|| format!("cannot pack {}", dir.display()))
}

/// The skills of the corpus, as (description, body), in byte order of their directories.
pub(crate) fn sources(from: &Path, count: usize) -> Result<Vec<(String, String)>> {
    let (files, _) =
        skillsearch_core::corpus::discover(&skillsearch_core::corpus::Roots::explicit([
            from.to_path_buf()
        ]));
    let mut out = Vec::with_capacity(count);
    for f in files {
        let s = skillsearch_core::corpus::load(&f.path, 1 << 20);
        if !s.valid {
            continue;
        }
        let description = if s.meta.description.trim().is_empty() {
            s.body
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("a skill")
                .to_owned()
        } else {
            s.meta.description.clone()
        };
        // Control characters (a stray U+0080) make the frontmatter invalid YAML, which a
        // publish refuses: seeded skills are kept publishable.
        let clean = |t: &str| -> String {
            t.chars()
                .map(|c| {
                    if c.is_control() && c != '\n' && c != '\t' {
                        ' '
                    } else {
                        c
                    }
                })
                .collect()
        };
        out.push((clean(&description), clean(&s.body)));
        if out.len() == count {
            break;
        }
    }
    if out.len() < count {
        bail!(
            "{} holds {} usable skills, fewer than --count {count}",
            from.display(),
            out.len()
        );
    }
    Ok(out)
}

/// `n` in letters (a word the analyzer keeps whole: no digits to split it).
fn letters(mut n: usize) -> String {
    let mut s = String::new();
    loop {
        s.push((b'a' + (n % 26) as u8) as char);
        n /= 26;
        if n == 0 {
            return s;
        }
    }
}

fn name_of(i: usize) -> String {
    format!("h{i:06}")
}

/// Seeds the embedded store at `store` with every source, version 1.
fn seed_dir(store: &Path, src: &[(String, String)], stage: &Path) -> Result<()> {
    let s = skillsearch_core::registry::store::Store::open(store)?;
    for (i, (description, body)) in src.iter().enumerate() {
        let dir = write_skill(stage, &name_of(i), description, "1", body)?;
        s.publish(&pack(&dir)?)
            .with_context(|| format!("seeding {}", name_of(i)))?;
        std::fs::remove_dir_all(&dir)?;
    }
    Ok(())
}

/// Seeds the migrated database at `uri` with every source, version 1, as a publish would have
/// stored it.
pub(crate) fn seed_pg(uri: &str, src: &[(String, String)], stage: &Path) -> Result<()> {
    let mut c = postgres::Client::connect(uri, postgres::NoTls)?;
    let mut tx = c.transaction()?;
    let skill = tx.prepare("INSERT INTO skills (name, created_at) VALUES ($1, 0)")?;
    let version = tx.prepare(
        "INSERT INTO versions (name, version, sha256, size, published_at, bundle)
         VALUES ($1, '1', $2, $3, 0, $4)",
    )?;
    for (i, (description, body)) in src.iter().enumerate() {
        let name = name_of(i);
        let dir = write_skill(stage, &name, description, "1", body)?;
        let zip = pack(&dir)?;
        let sha: String = Sha256::digest(&zip)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        tx.execute(&skill, &[&name])?;
        tx.execute(&version, &[&name, &sha, &(zip.len() as i64), &zip])?;
        std::fs::remove_dir_all(&dir)?;
    }
    tx.commit()?;
    Ok(())
}

/// `bin <args>` with `home`; its stdout, or why it failed.
pub(crate) fn run_bin(bin: &Path, home: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new(bin)
        .arg("--home")
        .arg(home)
        .args(args)
        .output()
        .with_context(|| format!("cannot run {}", bin.display()))?;
    if !out.status.success() {
        bail!(
            "{} {}: {}",
            bin.display(),
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Sends `zip` as a publish with `token`: (status, envelope).
fn publish(c: &mut Conn, token: &str, zip: &[u8]) -> Result<(u16, Value)> {
    c.send_raw(
        "POST",
        "/openapi/v1/skills",
        "application/zip",
        &[&format!("Authorization: Bearer {token}")],
        zip,
    )
}

/// The first `skill_id` discover answers for `q`.
fn top(c: &mut Conn, q: &str) -> Result<Option<String>> {
    let (st, v) = c.get(&format!("/openapi/v1/skills?q={q}&limit=1"))?;
    if st != 200 {
        bail!("discover `{q}`: status {st}: {v}");
    }
    Ok(v["result"]["items"][0]["skill_id"]
        .as_str()
        .map(str::to_owned))
}

/// Yanks `version` of `name` with `token`: (status, envelope).
fn yank(c: &mut Conn, token: &str, name: &str, version: &str) -> Result<(u16, Value)> {
    c.send_raw(
        "POST",
        &format!("/openapi/v1/skills/{name}/versions/{version}/yank"),
        "application/json",
        &[&format!("Authorization: Bearer {token}")],
        b"",
    )
}

/// Polls `c` every 5 ms until `shown` says whether `name` tops the search for `marker`; the
/// time since `t`. Fails after 30 s.
fn until(c: &mut Conn, marker: &str, name: &str, shown: bool, t: Instant) -> Result<u64> {
    while (top(c, marker)?.as_deref() == Some(name)) != shown {
        if t.elapsed() > Duration::from_secs(30) {
            bail!("{name} not as expected on replica B after 30 s");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(t.elapsed().as_micros() as u64)
}

/// Each server's CPU while `writes` run `gap` apart, less its idle rate, per write (ms).
fn cpu_per_write(
    servers: &[&HubChild],
    idle_rate: &[f64],
    writes: usize,
    gap: Duration,
    mut write: impl FnMut(usize) -> Result<()>,
) -> Result<Vec<f64>> {
    let before: Vec<f64> = servers
        .iter()
        .map(|s| cpu_of(s.child.id()))
        .collect::<Result<_>>()?;
    let t = Instant::now();
    for w in 0..writes {
        write(w)?;
        std::thread::sleep(gap);
    }
    let phase_s = t.elapsed().as_secs_f64();
    servers
        .iter()
        .zip(&before)
        .zip(idle_rate)
        .map(|((s, b), idle)| {
            Ok(((cpu_of(s.child.id())? - b - idle * phase_s) / writes as f64 * 1e3).max(0.0))
        })
        .collect()
}

fn ms(v: &Value, k: &str) -> f64 {
    v[k].as_f64().unwrap_or(0.0)
}

fn stats(mut v: Vec<u64>) -> Value {
    v.sort_unstable();
    json!({"p50": percentile(&v, 0.5), "p95": percentile(&v, 0.95), "max": percentile(&v, 1.0)})
}

pub fn run(a: &HubWriteArgs) -> Result<()> {
    let pg_store = match a.store.as_str() {
        "dir" => false,
        "pg" => true,
        other => bail!("--store is `dir` or `pg`, not `{other}`"),
    };
    if a.count == 0 || a.writes == 0 {
        bail!("--count and --writes must be at least 1");
    }
    let _ = std::fs::remove_dir_all(&a.work);
    let stage = a.work.join("stage");
    std::fs::create_dir_all(&stage)?;
    let admin = a.work.join("admin");
    let src = sources(&a.skills, a.count)?;

    let t = Instant::now();
    let mut pg = None;
    let store = if pg_store {
        let db = skillsearch_testkit::pg::Postgres::new()
            .context("no PostgreSQL: pip install pgserver")?;
        let uri = db.uri();
        run_bin(&a.bin, &admin, &["hub", "migrate", "--store", &uri])?;
        seed_pg(&uri, &src, &stage)?;
        pg = Some(db);
        uri
    } else {
        let dir = a.work.join("store");
        seed_dir(&dir, &src, &stage)?;
        dir.to_string_lossy().into_owned()
    };
    let seed_s = t.elapsed().as_secs_f64();
    let token = run_bin(
        &a.bin,
        &admin,
        &[
            "hub", "token", "create", "--scope", "publish", "--store", &store,
        ],
    )?;

    let server_a = serve(
        &a.bin,
        &a.work.join("home-a"),
        &store,
        &a.work.join("a.log"),
    )?;
    let server_b = if pg_store {
        Some(serve(
            &a.bin,
            &a.work.join("home-b"),
            &store,
            &a.work.join("b.log"),
        )?)
    } else {
        None
    };
    let servers: Vec<&HubChild> = std::iter::once(&server_a)
        .chain(server_b.as_ref())
        .collect();
    let mut ca = Conn::new(&server_a.addr);
    let mut cb = server_b.as_ref().map(|s| Conn::new(&s.addr));
    // Warm: one search each (the first loads what searching needs).
    top(&mut ca, "deploy")?;
    if let Some(c) = cb.as_mut() {
        top(c, "deploy")?;
    }
    // Settle: past the watchers' first look at the disk.
    std::thread::sleep(Duration::from_secs(3));

    // 1. Idle.
    let idle_s = 5.0;
    let before: Vec<f64> = servers
        .iter()
        .map(|s| cpu_of(s.child.id()))
        .collect::<Result<_>>()?;
    std::thread::sleep(Duration::from_secs_f64(idle_s));
    let idle_rate: Vec<f64> = servers
        .iter()
        .zip(&before)
        .map(|(s, b)| Ok((cpu_of(s.child.id())? - b) / idle_s))
        .collect::<Result<_>>()?;

    // A new version of skill `i`, holding the word `marker`: (name, version, bundle).
    let mut round = 0usize;
    let mut next_write = |marker: &str| -> Result<(String, String, Vec<u8>)> {
        round += 1;
        let i = (round * 7919) % a.count;
        let (description, body) = &src[i];
        let name = name_of(i);
        let version = format!("{}", round + 1);
        let dir = write_skill(
            &stage,
            &name,
            description,
            &version,
            // First: only the first 20,000 characters of a body are indexed.
            &format!("Release note: {marker}.\n\n{body}"),
        )?;
        let zip = pack(&dir)?;
        std::fs::remove_dir_all(&dir)?;
        Ok((name, version, zip))
    };

    // 2. Latency.
    let (mut post_us, mut b_us) = (Vec::new(), Vec::new());
    let (mut first_us, mut steady_us) = (Vec::new(), Vec::new());
    let (mut yank_us, mut b_yank_us) = (Vec::new(), Vec::new());
    let (mut not_at_once, mut yank_not_at_once) = (0, 0);
    for w in 0..a.writes {
        let marker = format!(
            "zq{}x",
            letters(w * 1000 + std::process::id() as usize % 1000)
        );
        let (name, version, zip) = next_write(&marker)?;
        let t = Instant::now();
        let (st, v) = publish(&mut ca, &token, &zip)?;
        post_us.push(t.elapsed().as_micros() as u64);
        if st != 201 {
            bail!("publish {name}: status {st}: {v}");
        }
        // The first search after a write meets a new index generation (what is cached per
        // generation is built again); the next one shows the steady cost.
        let t1 = Instant::now();
        if top(&mut ca, &marker)?.as_deref() != Some(name.as_str()) {
            not_at_once += 1;
        }
        first_us.push(t1.elapsed().as_micros() as u64);
        let t2 = Instant::now();
        top(&mut ca, &marker)?;
        steady_us.push(t2.elapsed().as_micros() as u64);
        if let Some(c) = cb.as_mut() {
            b_us.push(until(c, &marker, &name, true, t)?);
        }
        let t = Instant::now();
        let (st, v) = yank(&mut ca, &token, &name, &version)?;
        yank_us.push(t.elapsed().as_micros() as u64);
        if st != 200 {
            bail!("yank {name} {version}: status {st}: {v}");
        }
        if top(&mut ca, &marker)?.as_deref() == Some(name.as_str()) {
            yank_not_at_once += 1;
        }
        if let Some(c) = cb.as_mut() {
            b_yank_us.push(until(c, &marker, &name, false, t)?);
        }
    }

    // 3. CPU.
    let gap = Duration::from_millis(a.gap_ms);
    let mut written = Vec::with_capacity(a.writes);
    let per_write_ms = cpu_per_write(&servers, &idle_rate, a.writes, gap, |w| {
        let (name, version, zip) = next_write(&format!("zc{}x", letters(w)))?;
        let (st, v) = publish(&mut ca, &token, &zip)?;
        if st != 201 {
            bail!("publish {name}: status {st}: {v}");
        }
        written.push((name, version));
        Ok(())
    })?;
    let per_yank_ms = cpu_per_write(&servers, &idle_rate, a.writes, gap, |w| {
        let (name, version) = &written[w];
        let (st, v) = yank(&mut ca, &token, name, version)?;
        if st != 200 {
            bail!("yank {name} {version}: status {st}: {v}");
        }
        Ok(())
    })?;
    let ready: Vec<f64> = servers.iter().map(|s| s.ready_s).collect();
    drop(server_b);
    drop(server_a);
    drop(pg);

    let r = json!({
        "bin": a.bin.display().to_string(), "store": a.store, "skills": a.count,
        "writes": a.writes, "seed_s": seed_s,
        "ready_s": ready,
        "publish_ms": stats(post_us),
        "visible_on_writer_at_answer": a.writes - not_at_once,
        "first_search_after_write_ms": stats(first_us),
        "next_search_ms": stats(steady_us),
        "visible_on_b_ms": if pg_store { stats(b_us) } else { Value::Null },
        "yank_ms": stats(yank_us),
        "yank_visible_on_writer_at_answer": a.writes - yank_not_at_once,
        "yank_visible_on_b_ms": if pg_store { stats(b_yank_us) } else { Value::Null },
        "idle_cpu_pct": idle_rate.iter().map(|r| r * 100.0).collect::<Vec<_>>(),
        "cpu_per_publish_ms": per_write_ms,
        "cpu_per_yank_ms": per_yank_ms,
    });
    if a.json {
        println!("{r}");
    } else {
        let p = &r["publish_ms"];
        println!(
            "hub-write, {} store, {} skills, {} writes: publish p50 {:.1} / p95 {:.1} / max {:.1} ms, visible on A at the answer {}/{}",
            a.store,
            a.count,
            a.writes,
            ms(p, "p50"),
            ms(p, "p95"),
            ms(p, "max"),
            r["visible_on_writer_at_answer"],
            a.writes,
        );
        let (f, n) = (&r["first_search_after_write_ms"], &r["next_search_ms"]);
        println!(
            "  a search on A right after a publish: p50 {:.1} / p95 {:.1} ms; the next one: p50 {:.1} / p95 {:.1} ms",
            ms(f, "p50"),
            ms(f, "p95"),
            ms(n, "p50"),
            ms(n, "p95"),
        );
        let y = &r["yank_ms"];
        println!(
            "  yank p50 {:.1} / p95 {:.1} / max {:.1} ms, gone from A at the answer {}/{}",
            ms(y, "p50"),
            ms(y, "p95"),
            ms(y, "max"),
            r["yank_visible_on_writer_at_answer"],
            a.writes,
        );
        if pg_store {
            for (what, k) in [
                ("publish", "visible_on_b_ms"),
                ("yank", "yank_visible_on_b_ms"),
            ] {
                let b = &r[k];
                println!(
                    "  {what}-to-visible on replica B: p50 {:.1} / p95 {:.1} / max {:.1} ms",
                    ms(b, "p50"),
                    ms(b, "p95"),
                    ms(b, "max"),
                );
            }
        }
        let names = ["A", "B"];
        for (i, (p, y)) in per_write_ms.iter().zip(&per_yank_ms).enumerate() {
            println!(
                "  CPU per publish / per yank, server {}: {p:.1} / {y:.1} ms (idle {:.2}% of a core)",
                names[i],
                idle_rate[i] * 100.0
            );
        }
        println!(
            "  seeded in {seed_s:.0} s; servers answering after {} s (tree synced, index built)",
            ready
                .iter()
                .map(|r| format!("{r:.0}"))
                .collect::<Vec<_>>()
                .join(" and ")
        );
    }
    Ok(())
}
