//! The hub's PostgreSQL store against a real PostgreSQL 16 (`skillsearch_testkit::pg`, from the
//! PyPI package `pgserver`; each test is skipped, and says so, where it is not installed).
//! Two `PgStore`s with two cache directories are two replicas of one hub.

use skillsearch_core::registry::pg::{self, PgStore, SCHEMA_VERSION, Synced};
use skillsearch_core::registry::store::{Scope, StoreError};
use skillsearch_testkit::pg::Postgres;
use skillsearch_testkit::sys::Tmpfs;
use skillsearch_testkit::zip_of;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

fn skill(name: &str, version: &str, body: &str) -> Vec<u8> {
    let md = format!(
        "---\nname: {name}\ndescription: Fill PDF forms\nversion: \"{version}\"\n---\n{body}\n"
    );
    zip_of(&[(&format!("{name}/SKILL.md"), md.as_bytes())])
}

/// The served `SKILL.md` of `name` under `live`, if any.
fn served(live: &Path, name: &str) -> Option<String> {
    std::fs::read_to_string(live.join(name).join("SKILL.md")).ok()
}

/// Waits up to `limit` for `cond`; returns how long it took.
fn within(limit: Duration, mut cond: impl FnMut() -> bool) -> Option<Duration> {
    let t = Instant::now();
    while t.elapsed() < limit {
        if cond() {
            return Some(t.elapsed());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    cond().then(|| t.elapsed())
}

fn sql(pg: &Postgres) -> postgres::Client {
    postgres::Client::connect(&pg.uri(), postgres::NoTls).unwrap()
}

fn migrated() -> Option<Postgres> {
    let pg = Postgres::new()?;
    assert_eq!(pg::migrate(&pg.uri()).unwrap(), SCHEMA_VERSION);
    Some(pg)
}

#[test]
fn migrations_are_versioned_idempotent_and_required_before_open() {
    let Some(pg) = Postgres::new() else { return };
    let cache = tempfile::tempdir().unwrap();
    let err = PgStore::open(&pg.uri(), cache.path()).unwrap_err();
    assert!(matches!(err, StoreError::Database(_)), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("schema version 0") && msg.contains("skillsearch hub migrate --store"),
        "{msg}"
    );
    assert_eq!(pg::migrate(&pg.uri()).unwrap(), SCHEMA_VERSION);
    assert_eq!(pg::migrate(&pg.uri()).unwrap(), SCHEMA_VERSION);
    let versions: Vec<i32> = sql(&pg)
        .query(
            "SELECT version FROM schema_migrations ORDER BY version",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(versions, (1..=SCHEMA_VERSION as i32).collect::<Vec<_>>());
    // A database newer than this build is refused, not written to.
    sql(&pg)
        .execute(
            "INSERT INTO schema_migrations VALUES ($1, 0)",
            &[&(SCHEMA_VERSION as i32 + 1)],
        )
        .unwrap();
    let newer = PgStore::open(&pg.uri(), cache.path()).unwrap_err();
    assert!(newer.to_string().contains("newer"), "{newer}");
    assert!(pg::migrate(&pg.uri()).is_err());
}

#[test]
fn a_publish_through_one_replica_is_served_by_another_within_2s() {
    let Some(pg) = migrated() else { return };
    let (ca, cb) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = PgStore::open(&pg.uri(), ca.path()).unwrap();
    let b = Arc::new(PgStore::open(&pg.uri(), cb.path()).unwrap());
    let changes = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&changes);
    // A catch-up far longer than the test: only the notification can bring the changes.
    let follower = b.follow(Duration::from_secs(600), move |_: &[String]| {
        seen.fetch_add(1, Ordering::SeqCst);
    });
    let (la, lb) = (a.live(), b.live());

    let p = a.publish(&skill("pdf-forms", "1.0.0", "one")).unwrap();
    assert!(p.created);
    assert!(served(&la, "pdf-forms").unwrap().contains("one"));
    let took = within(Duration::from_secs(2), || {
        served(&lb, "pdf-forms").is_some_and(|s| s.contains("one"))
    });
    assert!(
        took.is_some(),
        "replica B did not serve the publish within 2 s"
    );
    eprintln!("publish seen by the other replica after {took:?}");
    // The callback comes once the sync is over (just after the tree is in place).
    assert!(
        within(Duration::from_secs(1), || changes.load(Ordering::SeqCst)
            >= 1)
        .is_some()
    );

    // The same content again is not a new version; other content under it is refused.
    assert!(
        !b.publish(&skill("pdf-forms", "1.0.0", "one"))
            .unwrap()
            .created
    );
    assert!(matches!(
        b.publish(&skill("pdf-forms", "1.0.0", "changed")),
        Err(StoreError::Conflict(_))
    ));

    a.publish(&skill("pdf-forms", "1.1.0", "two")).unwrap();
    assert!(
        within(Duration::from_secs(2), || served(&lb, "pdf-forms")
            .is_some_and(|s| s.contains("two")))
        .is_some()
    );
    // Yanking the current version puts the one before back, everywhere.
    let y = a.yank("pdf-forms", "1.1.0").unwrap();
    assert!(y.yanked && y.version == "1.1.0");
    assert!(served(&la, "pdf-forms").unwrap().contains("one"));
    assert!(
        within(Duration::from_secs(2), || served(&lb, "pdf-forms")
            .is_some_and(|s| s.contains("one")))
        .is_some()
    );
    assert!(matches!(
        a.yank("pdf-forms", "9"),
        Err(StoreError::NotFound(_))
    ));
    let history = b.versions("pdf-forms").unwrap();
    let listed: Vec<(&str, bool)> = history
        .iter()
        .map(|v| (v.version.as_str(), v.yanked))
        .collect();
    assert_eq!(listed, [("1.0.0", false), ("1.1.0", true)]);
    assert!(history.iter().all(|v| v.sha256.len() == 64 && v.size > 0));
    assert_eq!(b.names().unwrap(), ["pdf-forms"]);

    assert_eq!(a.delete("pdf-forms").unwrap(), 2);
    assert!(served(&la, "pdf-forms").is_none());
    assert!(within(Duration::from_secs(2), || !lb.join("pdf-forms").exists()).is_some());
    assert!(b.versions("pdf-forms").unwrap().is_empty() && b.names().unwrap().is_empty());
    assert!(matches!(
        a.delete("pdf-forms"),
        Err(StoreError::NotFound(_))
    ));
    follower.stop();
}

#[test]
fn a_hostile_archive_is_rejected_and_nothing_reaches_the_database() {
    let Some(pg) = migrated() else { return };
    let cache = tempfile::tempdir().unwrap();
    let a = PgStore::open(&pg.uri(), cache.path()).unwrap();
    let md = b"---\nname: pdf-forms\ndescription: Fill PDF forms\n---\nx\n";
    let hostile = zip_of(&[
        ("pdf-forms/SKILL.md", &md[..]),
        ("../escaped.txt", b"out of the tree"),
    ]);
    let err = a.publish(&hostile).unwrap_err();
    assert!(matches!(err, StoreError::Rejected(_)), "{err:?}");
    let no_name = zip_of(&[("x/SKILL.md", b"---\ndescription: d\n---\n")]);
    assert!(matches!(a.publish(&no_name), Err(StoreError::Rejected(_))));
    let mut c = sql(&pg);
    for table in ["skills", "versions"] {
        let n: i64 = c
            .query_one(&format!("SELECT count(*) FROM {table}"), &[])
            .unwrap()
            .get(0);
        assert_eq!(n, 0, "{table}");
    }
    assert!(!cache.path().join("escaped.txt").exists());
    assert!(std::fs::read_dir(a.live()).unwrap().next().is_none());
    assert!(
        std::fs::read_dir(cache.path().join("tmp"))
            .unwrap()
            .next()
            .is_none()
    );
}

#[test]
fn tokens_are_stored_hashed_and_known_to_every_replica() {
    let Some(pg) = migrated() else { return };
    let (ca, cb) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = PgStore::open(&pg.uri(), ca.path()).unwrap();
    let b = PgStore::open(&pg.uri(), cb.path()).unwrap();
    assert!(!a.has_tokens() && !b.has_tokens());
    let r = a.create_token(Scope::Read).unwrap();
    let p = a.create_token(Scope::Publish).unwrap();
    assert!(b.has_tokens());
    assert_eq!(b.token_scope(&r), Some(Scope::Read));
    assert_eq!(b.token_scope(&p), Some(Scope::Publish));
    assert_eq!(b.token_scope(&format!("{p}x")), None);
    assert_eq!(b.token_scope("skh_../../x_y"), None);
    let rows = sql(&pg)
        .query("SELECT id, scope, sha256 FROM tokens ORDER BY scope", &[])
        .unwrap();
    assert_eq!(rows.len(), 2);
    for row in &rows {
        let (id, sha): (String, String) = (row.get(0), row.get(2));
        assert!(sha.len() == 64 && !r.contains(&sha) && !p.contains(&sha));
        assert!(r.contains(&id) || p.contains(&id));
    }
    assert_eq!(rows[0].get::<_, &str>(1), "publish");
}

#[test]
fn a_replica_behind_catches_up_on_sync_fetching_only_what_changed() {
    let Some(pg) = migrated() else { return };
    let (ca, cb) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = PgStore::open(&pg.uri(), ca.path()).unwrap();
    let b = PgStore::open(&pg.uri(), cb.path()).unwrap(); // not following
    for n in ["alpha", "beta", "gamma"] {
        a.publish(&skill(n, "1", n)).unwrap();
    }
    assert!(served(&b.live(), "alpha").is_none());
    assert_eq!(b.sync().unwrap().changed, ["alpha", "beta", "gamma"]);
    assert_eq!(b.sync().unwrap(), Synced::default());
    for n in ["alpha", "beta", "gamma"] {
        assert!(served(&b.live(), n).unwrap().contains(n));
    }
    a.delete("beta").unwrap();
    a.publish(&skill("gamma", "2", "gamma two")).unwrap();
    assert_eq!(b.sync().unwrap().changed, ["beta", "gamma"]);
    assert!(served(&b.live(), "beta").is_none());
    assert!(served(&b.live(), "gamma").unwrap().contains("gamma two"));
    // A replica restarted on its cache picks up where it was.
    drop(b);
    let b = PgStore::open(&pg.uri(), cb.path()).unwrap();
    assert_eq!(b.sync().unwrap(), Synced::default());
}

#[test]
fn the_database_away_and_back_the_replicas_keep_serving_and_catch_up() {
    let Some(mut pg) = migrated() else { return };
    let (ca, cb) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = Arc::new(PgStore::open(&pg.uri(), ca.path()).unwrap());
    let b = Arc::new(PgStore::open(&pg.uri(), cb.path()).unwrap());
    let _follower = b.follow(Duration::from_millis(500), |_: &[String]| {});
    a.publish(&skill("pdf-forms", "1", "one")).unwrap();
    let lb = b.live();
    assert!(
        within(Duration::from_secs(2), || served(&lb, "pdf-forms")
            .is_some())
        .is_some()
    );

    // Publishes under load while the server restarts: each one either commits or fails with
    // a database error, never anything else.
    let loader = {
        let a = Arc::clone(&a);
        std::thread::spawn(move || {
            let (mut ok, mut failed) = (Vec::new(), 0);
            for i in 0..150 {
                match a.publish(&skill("load", &format!("{i}"), &format!("load {i}"))) {
                    Ok(p) => ok.push(p.version),
                    Err(StoreError::Database(_)) => failed += 1,
                    Err(e) => panic!("publish {i}: {e:?}"),
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            (ok, failed)
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    pg.stop();
    let err = a.publish(&skill("pdf-forms", "2", "two")).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, StoreError::Database(_)), "{err:?}");
    assert!(msg.contains("hub store") && msg.contains("host="), "{msg}");
    assert!(b.sync().is_err());
    // B serves what it had while the database is away.
    std::thread::sleep(Duration::from_millis(800));
    assert!(served(&lb, "pdf-forms").unwrap().contains("one"));
    pg.start();
    let (ok, failed) = loader.join().unwrap();
    eprintln!(
        "under restart: {} publishes committed, {failed} failed",
        ok.len()
    );
    assert!(!ok.is_empty());

    // Back: writes work again (a new connection), and B catches up by itself.
    a.publish(&skill("pdf-forms", "2", "two")).unwrap();
    let took = within(Duration::from_secs(10), || {
        served(&lb, "pdf-forms").is_some_and(|s| s.contains("two"))
    });
    assert!(took.is_some(), "B did not catch up after the restart");
    // Every version a publish reported is in the database, and B serves the latest one.
    let listed: Vec<String> = a
        .versions("load")
        .unwrap()
        .into_iter()
        .map(|v| v.version)
        .collect();
    for v in &ok {
        assert!(listed.contains(v), "{v} reported published but not stored");
    }
    let latest = listed.last().unwrap().clone();
    assert!(
        within(Duration::from_secs(5), || served(&lb, "load")
            .is_some_and(|s| s.contains(&format!("load {latest}\n"))))
        .is_some(),
        "B does not serve the latest version {latest}"
    );
}

#[test]
fn an_unreachable_database_at_start_fails_clearly_unless_a_synced_tree_is_there() {
    let Some(mut pg) = migrated() else { return };
    let (ca, cb) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = PgStore::open(&pg.uri(), ca.path()).unwrap();
    a.publish(&skill("pdf-forms", "1", "one")).unwrap();
    drop(a);
    pg.stop();
    let t = Instant::now();
    let err = PgStore::open(&pg.uri(), cb.path()).unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(10));
    let msg = err.to_string();
    assert!(
        msg.contains("cannot reach") && msg.contains("host="),
        "{msg}"
    );
    // A replica restarting on a tree it synced from this database serves it meanwhile.
    let a = Arc::new(PgStore::open(&pg.uri(), ca.path()).unwrap());
    assert!(served(&a.live(), "pdf-forms").unwrap().contains("one"));
    assert!(matches!(
        a.publish(&skill("pdf-forms", "2", "two")),
        Err(StoreError::Database(_))
    ));
    let _follower = a.follow(Duration::from_millis(300), |_: &[String]| {});
    pg.start();
    let b = PgStore::open(&pg.uri(), cb.path()).unwrap();
    b.publish(&skill("pdf-forms", "2", "two")).unwrap();
    assert!(
        within(Duration::from_secs(10), || served(&a.live(), "pdf-forms")
            .is_some_and(|s| s.contains("two")))
        .is_some()
    );
}

/// (inode, mtime) of each file of `live/<name>/`, by file name.
fn stamps(live: &Path, name: &str) -> Vec<(String, u64, i64)> {
    use std::os::unix::fs::MetadataExt;
    let mut out: Vec<(String, u64, i64)> = std::fs::read_dir(live.join(name))
        .unwrap()
        .flatten()
        .map(|e| {
            let m = e.metadata().unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                m.ino(),
                m.mtime_nsec() + m.mtime() * 1_000_000_000,
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn a_sync_looks_only_at_the_skills_the_change_log_names() {
    let Some(pg) = migrated() else { return };
    let (ca, cb) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = PgStore::open(&pg.uri(), ca.path()).unwrap();
    let b = PgStore::open(&pg.uri(), cb.path()).unwrap();
    for n in ["alpha", "beta", "gamma"] {
        a.publish(&skill(n, "1", n)).unwrap();
    }
    assert_eq!(b.sync().unwrap().changed, ["alpha", "beta", "gamma"]);
    let lb = b.live();
    let beta = stamps(&lb, "beta");
    // B's trees of beta and gamma are damaged behind the store's back; a write to alpha alone
    // must not look at them (a sync of every skill would put them right).
    std::fs::write(
        lb.join("beta/.published.json"),
        r#"{"version":"0","sha256":"tampered"}"#,
    )
    .unwrap();
    std::fs::remove_dir_all(lb.join("gamma")).unwrap();
    let beta_tampered = stamps(&lb, "beta");
    a.publish(&skill("alpha", "2", "alpha two")).unwrap();
    let s = b.sync().unwrap();
    assert_eq!(
        s,
        Synced {
            changed: vec!["alpha".into()],
            full: false
        }
    );
    assert!(served(&lb, "alpha").unwrap().contains("alpha two"));
    assert_eq!(
        stamps(&lb, "beta"),
        beta_tampered,
        "beta's tree was touched"
    );
    assert!(served(&lb, "gamma").is_none(), "gamma was looked at");
    // The writer's own tree: only the skill it wrote was replaced.
    let la = a.live();
    let beta_a = stamps(&la, "beta");
    a.publish(&skill("gamma", "2", "gamma two")).unwrap();
    assert_eq!(stamps(&la, "beta"), beta_a);
    assert!(served(&la, "gamma").unwrap().contains("gamma two"));

    // The log pruned past B's place: B cannot know what it missed and compares every skill,
    // which also puts its damaged trees right.
    a.publish(&skill("delta", "1", "delta")).unwrap();
    assert!(a.prune_changes(Duration::ZERO).unwrap() >= 1);
    let s = b.sync().unwrap();
    assert!(s.full, "{s:?}");
    assert_eq!(s.changed, ["beta", "delta", "gamma"]);
    assert!(served(&lb, "beta").unwrap().contains("beta"));
    assert_ne!(stamps(&lb, "beta"), beta);
    assert!(served(&lb, "gamma").unwrap().contains("gamma two"));
    // From there on it follows the log again.
    a.yank("delta", "1").unwrap();
    assert_eq!(
        b.sync().unwrap(),
        Synced {
            changed: vec!["delta".into()],
            full: false
        }
    );
    assert!(served(&lb, "delta").is_none());
}

#[test]
fn a_replica_that_missed_notifications_catches_up_from_the_log() {
    let Some(pg) = migrated() else { return };
    let (ca, cb) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = PgStore::open(&pg.uri(), ca.path()).unwrap();
    a.publish(&skill("kept", "1", "kept")).unwrap();
    a.publish(&skill("yanked", "1", "yanked one")).unwrap();
    a.publish(&skill("yanked", "2", "yanked two")).unwrap();
    a.publish(&skill("deleted", "1", "deleted")).unwrap();
    let b = Arc::new(PgStore::open(&pg.uri(), cb.path()).unwrap());
    // B is down (no follower) while the writes below happen: it hears none of them.
    a.publish(&skill("added", "1", "added")).unwrap();
    a.yank("yanked", "2").unwrap();
    a.delete("deleted").unwrap();
    let tokens = a.create_token(Scope::Publish).unwrap();
    drop(b);
    // B back, on its cache: its follower starts with a sync from its place in the log, and
    // only the skills written meanwhile reach the callback.
    let b = Arc::new(PgStore::open(&pg.uri(), cb.path()).unwrap());
    let lb = b.live();
    // The open has caught up already (it syncs); so has the token list.
    assert!(served(&lb, "added").unwrap().contains("added"));
    assert!(served(&lb, "yanked").unwrap().contains("yanked one"));
    assert!(served(&lb, "deleted").is_none());
    assert_eq!(b.token_scope(&tokens), Some(Scope::Publish));

    // Writes while B follows with a catch-up far longer than the test, from two replicas at
    // once: every one reaches B through notifications and the log, none is skipped.
    let seen: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let into = Arc::clone(&seen);
    let follower = b.follow(Duration::from_secs(600), move |names: &[String]| {
        into.lock().unwrap().extend(names.iter().cloned());
    });
    let cc = tempfile::tempdir().unwrap();
    let c = Arc::new(PgStore::open(&pg.uri(), cc.path()).unwrap());
    let a = Arc::new(a);
    let writers: Vec<_> = [("a", Arc::clone(&a)), ("c", Arc::clone(&c))]
        .into_iter()
        .map(|(who, s)| {
            std::thread::spawn(move || {
                for i in 0..20 {
                    s.publish(&skill(&format!("{who}-{i}"), "1", "load"))
                        .unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    a.delete("kept").unwrap();
    let all = within(Duration::from_secs(5), || {
        (0..20).all(|i| {
            served(&lb, &format!("a-{i}")).is_some() && served(&lb, &format!("c-{i}")).is_some()
        }) && served(&lb, "kept").is_none()
    });
    assert!(all.is_some(), "B missed writes made while it followed");
    follower.stop();
    let mut names = seen.lock().unwrap().clone();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 41, "{names:?}");
    assert!(!names.contains(&"yanked".to_owned()));
}

#[test]
fn a_database_of_schema_1_migrates_to_the_change_log_and_its_replicas_resync() {
    let Some(pg) = migrated() else { return };
    let (ca, cb) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = PgStore::open(&pg.uri(), ca.path()).unwrap();
    a.publish(&skill("alpha", "1", "alpha")).unwrap();
    let b = PgStore::open(&pg.uri(), cb.path()).unwrap();
    assert!(served(&b.live(), "alpha").is_some());
    drop((a, b));
    // Back to schema 1 as it shipped (migrations 2 and 3 undone), with the skill still in it.
    sql(&pg)
        .batch_execute(
            "DROP TABLE vectors; DROP TABLE changes; DROP TABLE hub_state;
             DROP INDEX versions_current; DELETE FROM schema_migrations WHERE version >= 2;",
        )
        .unwrap();
    let err = PgStore::open(&pg.uri(), cb.path()).unwrap_err();
    assert!(err.to_string().contains("schema version 1"), "{err}");
    assert_eq!(pg::migrate(&pg.uri()).unwrap(), SCHEMA_VERSION);
    // A new epoch: B's place belongs to the database before, so it compares every skill once.
    let b = PgStore::open(&pg.uri(), cb.path()).unwrap();
    let a = PgStore::open(&pg.uri(), ca.path()).unwrap();
    a.publish(&skill("beta", "1", "beta")).unwrap();
    assert_eq!(
        b.sync().unwrap(),
        Synced {
            changed: vec!["beta".into()],
            full: false
        }
    );
    assert!(served(&b.live(), "alpha").is_some());
}

#[test]
fn a_full_database_disk_refuses_the_publish_whole_and_the_replicas_serve_on() {
    // The data directory on a small tmpfs (the write-ahead log elsewhere): a write that needs
    // a new page fails with 53100 disk_full and the server goes on, as PostgreSQL does.
    let mnt = tempfile::tempdir().unwrap();
    let disk = match Tmpfs::mount(mnt.path(), 96 << 20) {
        Ok(d) => d,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let Some(pg) = Postgres::with_data_on(&disk.dir) else {
        return;
    };
    assert_eq!(pg::migrate(&pg.uri()).unwrap(), SCHEMA_VERSION);
    let (ca, cb) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = PgStore::open(&pg.uri(), ca.path()).unwrap();
    let b = Arc::new(PgStore::open(&pg.uri(), cb.path()).unwrap());
    let _follower = b.follow(Duration::from_millis(300), |_: &[String]| {});
    a.publish(&skill("pdf-forms", "1", "one")).unwrap();
    let lb = b.live();
    assert!(
        within(Duration::from_secs(2), || served(&lb, "pdf-forms")
            .is_some())
        .is_some()
    );

    let filler = disk.fill();
    // A bundle that cannot be stored inline: its pages are new pages of the disk that is full.
    let big: String = (0..200_000u32)
        .map(|i| char::from(b'a' + (i.wrapping_mul(2_654_435_761) >> 27) as u8 % 26))
        .collect();
    let mut refused = 0;
    for v in 2..6 {
        match a.publish(&skill("pdf-forms", &v.to_string(), &big)) {
            Err(StoreError::Full(msg)) => {
                assert!(
                    msg.contains("disk is full") && msg.contains("host="),
                    "{msg}"
                );
                refused += 1;
            }
            other => panic!("publish on a full disk: {other:?}"),
        }
    }
    assert_eq!(refused, 4);
    // Nothing of the refused publishes is in the database or served; reads go on.
    let listed: Vec<String> = a
        .versions("pdf-forms")
        .unwrap()
        .into_iter()
        .map(|v| v.version)
        .collect();
    assert_eq!(listed, ["1"]);
    std::thread::sleep(Duration::from_millis(700));
    assert!(served(&lb, "pdf-forms").unwrap().contains("one"));
    assert!(b.sync().is_ok(), "a sync only reads");

    // Space freed: the same publish goes in and the other replica serves it.
    std::fs::remove_file(filler).unwrap();
    a.publish(&skill("pdf-forms", "2", &big)).unwrap();
    assert!(
        within(Duration::from_secs(5), || served(&lb, "pdf-forms")
            .is_some_and(|s| s.contains(&big[..100])))
        .is_some(),
        "B does not serve the publish made once space was freed"
    );
    drop(pg);
}
