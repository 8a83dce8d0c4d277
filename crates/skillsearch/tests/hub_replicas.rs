//! Two `skillsearch hub serve` replicas over one PostgreSQL store (a real PostgreSQL 16 from
//! PyPI `pgserver`, see `skillsearch_testkit::pg`; skipped, and said so, where it is not
//! installed): `hub migrate`, `hub token create` against the database, a publish through one
//! replica found through the other within 2 s, a replica killed under load with no failed
//! call, and the database stopped and started under a replica that keeps serving.

use skillsearch_core::{HubClient, HubSettings};
use skillsearch_testkit::daemon::{Daemon, http};
use skillsearch_testkit::pg::Postgres;
use skillsearch_testkit::{command, write_file};
use std::ffi::OsStr;
use std::path::Path;
use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_skillsearch");

fn cli(home: &Path, key: Option<&str>, args: &[&str]) -> Output {
    let mut c = command(BIN, home);
    if let Some(k) = key {
        c.env("SKILLSEARCH_HUB_API_KEY", k);
    }
    c.args(args).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn replica(home: &Path, uri: &str) -> Daemon {
    let args: Vec<&OsStr> = [
        "hub",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--refresh-s",
        "0.2",
        // The load below is one client address: no per-client limit.
        "--rate-read",
        "0",
        "--store",
        uri,
    ]
    .into_iter()
    .map(OsStr::new)
    .collect();
    Daemon::spawn(BIN, home, &args, &[])
}

fn found(base: &str, cache: &Path, q: &str) -> Vec<String> {
    let c = HubClient::new(&HubSettings::new(base, cache)).unwrap();
    c.discover(q, 10, Instant::now() + Duration::from_secs(10))
        .map(|items| {
            items
                .iter()
                .map(|i| i["skill_id"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn skill(dir: &Path, name: &str, version: &str, body: &str) {
    write_file(
        &dir.join(name).join("SKILL.md"),
        format!(
            "---\nname: {name}\ndescription: Rotate the database credentials of a service\nversion: {version}\n---\n\n{body}\n"
        ),
    );
}

#[test]
fn two_replicas_over_one_database_publish_fail_over_and_ride_out_the_database() {
    let Some(mut pg) = Postgres::new() else {
        return;
    };
    let uri = pg.uri();
    let tmp = tempfile::tempdir().unwrap();
    let admin = tmp.path().join("admin");

    // Before `hub migrate` the server refuses to start and says what to run.
    let out = cli(&admin, None, &["hub", "serve", "--store", &uri]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("skillsearch hub migrate --store"),
        "{}",
        text(&out.stderr)
    );
    for _ in 0..2 {
        let out = cli(&admin, None, &["hub", "migrate", "--store", &uri]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(text(&out.stdout).contains(&format!(
            "schema version {}",
            skillsearch_core::registry::pg::SCHEMA_VERSION
        )));
    }
    let out = cli(
        &admin,
        None,
        &[
            "hub", "token", "create", "--scope", "publish", "--store", &uri,
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let token = text(&out.stdout).trim().to_owned();

    let mut a = replica(&tmp.path().join("a"), &uri);
    let b = replica(&tmp.path().join("b"), &uri);
    let (base_a, base_b) = (format!("http://{}", a.addr), format!("http://{}", b.addr));

    // Published through A, found through B within 2 s.
    let team = tmp.path().join("team");
    skill(&team, "rotate-creds", "1.0.0", "# Rotate\n\n- vault write");
    let out = cli(
        &admin,
        Some(&token),
        &["hub", "publish", team.to_str().unwrap(), "--hub", &base_a],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let t = Instant::now();
    let cache = tmp.path().join("cache");
    while found(&base_b, &cache, "rotate database credentials") != ["rotate-creds"] {
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "not on replica B after 2 s; B's stderr: {}",
            b.stderr()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!("publish-to-visible on the other replica: {:?}", t.elapsed());

    // Load through both; A dies mid-way; no call fails.
    let stop = Arc::new(AtomicBool::new(false));
    let (calls, errors) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (stop, calls, errors) = (stop.clone(), calls.clone(), errors.clone());
            let mut s = HubSettings::new(format!("{base_a},{base_b}"), tmp.path().join("lc"));
            s.timeout = Duration::from_secs(5);
            std::thread::spawn(move || {
                let c = HubClient::new(&s).unwrap();
                while !stop.load(Ordering::Relaxed) {
                    let deadline = Instant::now() + Duration::from_secs(5);
                    match c.discover("rotate credentials", 5, deadline) {
                        Ok(items) if !items.is_empty() => {}
                        other => {
                            eprintln!("failed call: {other:?}");
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    calls.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(700));
    a.kill9();
    std::thread::sleep(Duration::from_millis(1500));
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    let n = calls.load(Ordering::Relaxed);
    assert!(n > 20, "only {n} calls");
    assert_eq!(errors.load(Ordering::Relaxed), 0, "{n} calls");

    // The database frozen (it accepts nothing and answers nothing): a publish through B hangs
    // on the store, and B's searches keep answering meanwhile.
    pg.freeze();
    let zip = skillsearch_core::registry::pack_dir(&team.join("rotate-creds"))
        .unwrap()
        .unwrap();
    let auth = format!("Authorization: Bearer {token}");
    let hung = {
        let (addr, zip, auth) = (b.addr.clone(), zip.clone(), auth.clone());
        std::thread::spawn(move || {
            http(
                &addr,
                "POST",
                "/openapi/v1/skills",
                &[&auth],
                &zip,
                Duration::from_secs(120),
            )
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..5 {
        let t = Instant::now();
        assert_eq!(
            found(&base_b, &cache, "rotate database credentials"),
            ["rotate-creds"]
        );
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "a search waited {:?} behind a hung write",
            t.elapsed()
        );
    }
    pg.thaw();
    let r = hung.join().unwrap().unwrap();
    assert!(
        matches!(r.status, 200 | 201 | 503),
        "the write that hung ends with an answer: {} {:?}",
        r.status,
        r.json()
    );

    // The database stopped: B keeps answering reads; a publish is 503 60009 with Retry-After.
    pg.stop();
    assert_eq!(
        found(&base_b, &cache, "rotate database credentials"),
        ["rotate-creds"]
    );
    let r = http(
        &b.addr,
        "POST",
        "/openapi/v1/skills",
        &[&auth],
        &zip,
        Duration::from_secs(30),
    )
    .unwrap();
    assert_eq!(
        (r.status, r.json()["status"].as_u64()),
        (503, Some(60009)),
        "{:?}",
        r.json()
    );
    assert_eq!(r.header("retry-after"), Some("1"));
    assert!(
        !b.stderr().contains(&token),
        "a token never reaches the log"
    );

    // The database back: the next version publishes through B and is served.
    pg.start();
    skill(
        &team,
        "rotate-creds",
        "1.1.0",
        "# Rotate\n\n- vault write, then restart",
    );
    let t = Instant::now();
    loop {
        let out = cli(
            &admin,
            Some(&token),
            &["hub", "publish", team.to_str().unwrap(), "--hub", &base_b],
        );
        if out.status.success() {
            assert!(text(&out.stdout).contains("published rotate-creds 1.1.0"));
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "{}",
            text(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let c = HubClient::new(&HubSettings::new(&base_b, tmp.path().join("c2"))).unwrap();
    let rec = c
        .get("rotate-creds", Instant::now() + Duration::from_secs(10))
        .unwrap();
    assert!(rec.skill_md.unwrap().contains("then restart"));
}

/// Waits up to 2 s for B's discover of `q` to answer `want`.
fn until_found(base: &str, cache: &Path, q: &str, want: &[&str], b: &Daemon) {
    let t = Instant::now();
    while found(base, cache, q) != want {
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "`{q}` on replica B is not {want:?} after 2 s: {:?}; B's stderr: {}",
            found(base, cache, q),
            b.stderr()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_yank_and_a_delete_through_one_replica_reach_the_others_index() {
    let Some(pg) = Postgres::new() else {
        return;
    };
    let uri = pg.uri();
    let tmp = tempfile::tempdir().unwrap();
    let admin = tmp.path().join("admin");
    let out = cli(&admin, None, &["hub", "migrate", "--store", &uri]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = cli(
        &admin,
        None,
        &[
            "hub", "token", "create", "--scope", "publish", "--store", &uri,
        ],
    );
    let token = text(&out.stdout).trim().to_owned();
    let a = replica(&tmp.path().join("a"), &uri);
    let b = replica(&tmp.path().join("b"), &uri);
    let (base_a, base_b) = (format!("http://{}", a.addr), format!("http://{}", b.addr));
    let cache = tmp.path().join("cache");
    let team = tmp.path().join("team");
    skill(&team, "rotate-creds", "1.0.0", "# Rotate\n\n- vault write");
    write_file(
        &team.join("resize-images").join("SKILL.md"),
        "---\nname: resize-images\ndescription: Resize and compress images for the web\nversion: 1.0.0\n---\n\nmogrify\n",
    );
    let publish = |args: &[&str]| {
        let mut all = vec!["hub"];
        all.extend_from_slice(args);
        all.extend(["--hub", base_a.as_str()]);
        let out = cli(&admin, Some(&token), &all);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    };
    publish(&["publish", team.to_str().unwrap()]);
    until_found(
        &base_b,
        &cache,
        "rotate database credentials",
        &["rotate-creds"],
        &b,
    );
    until_found(&base_b, &cache, "resize images", &["resize-images"], &b);

    // A second version, then yanked: B serves the first again.
    skill(
        &team,
        "rotate-creds",
        "1.1.0",
        "# Rotate\n\n- vault write, then restart",
    );
    publish(&["publish", team.join("rotate-creds").to_str().unwrap()]);
    let c = HubClient::new(&HubSettings::new(&base_b, tmp.path().join("c2"))).unwrap();
    let body = |c: &HubClient| {
        c.get("rotate-creds", Instant::now() + Duration::from_secs(10))
            .ok()
            .and_then(|r| r.skill_md)
            .unwrap_or_default()
    };
    let t = Instant::now();
    while !body(&c).contains("then restart") {
        assert!(t.elapsed() < Duration::from_secs(2), "1.1.0 not on B");
        std::thread::sleep(Duration::from_millis(20));
    }
    publish(&["yank", "rotate-creds", "1.1.0"]);
    let t = Instant::now();
    while body(&c).contains("then restart") {
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "the yank did not reach B"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(body(&c).contains("vault write"));
    // The only version yanked: gone from B's answers; a delete likewise.
    publish(&["yank", "rotate-creds", "1.0.0"]);
    until_found(&base_b, &cache, "rotate database credentials", &[], &b);
    publish(&["delete", "resize-images"]);
    until_found(&base_b, &cache, "resize images", &[], &b);
}
