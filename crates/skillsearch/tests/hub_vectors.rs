//! Skills' vectors computed once and shared, through the real binary: two `hub serve` replicas
//! over one PostgreSQL store (a real PostgreSQL 16 from `pgserver`; skipped, and said so, where
//! it is not installed) and a third hub seeded from the first over HTTP (`--vectors-from`,
//! `GET /openapi/v1/vectors`). Each server embeds through a fake embeddings endpoint of its own
//! (`skillsearch_testkit::bow_reply`), so what each one embedded is counted.

use skillsearch_testkit::daemon::{Daemon, http};
use skillsearch_testkit::pg::Postgres;
use skillsearch_testkit::{Fake, bow_reply, command, write_skill};
use std::ffi::OsStr;
use std::path::Path;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_skillsearch");
const SKILLS: usize = 40;

/// A word only skill `i` has (letters: the analyzer keeps it whole).
fn tag(i: usize) -> String {
    format!(
        "zq{}{}",
        (b'a' + (i / 26) as u8) as char,
        (b'a' + (i % 26) as u8) as char
    )
}

/// The catalogue every server of a test serves.
fn catalogue(skills: &Path) {
    for i in 0..SKILLS {
        write_skill(
            skills,
            &format!("s{i:02}"),
            &format!("skill-{i}"),
            &format!("Rotate credential number {i} of a service"),
            &format!("Step {i}: run the rotation with {}.", tag(i)),
        );
    }
}

/// Texts the fake embedder was asked to embed.
fn texts(f: &Fake) -> usize {
    f.requests().iter().map(|r| r.inputs().len()).sum()
}

fn server(
    home: &Path,
    skills: &Path,
    store: &str,
    model: &Fake,
    name: &str,
    extra: &[&str],
) -> Daemon {
    let mut args: Vec<&OsStr> = [
        "hub",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--rate-read",
        "0",
        "--store",
        store,
        "--skills",
        skills.to_str().unwrap(),
    ]
    .into_iter()
    .map(OsStr::new)
    .collect();
    args.extend(extra.iter().map(OsStr::new));
    Daemon::spawn(
        BIN,
        home,
        &args,
        &[
            ("SKILLSEARCH_EMBEDDING_BASE_URL", OsStr::new(&model.base)),
            ("SKILLSEARCH_EMBEDDING_MODEL", OsStr::new(name)),
            ("SKILLSEARCH_EMBEDDING_DIM", OsStr::new("64")),
            ("SKILLSEARCH_LOG", OsStr::new("info")),
        ],
    )
}

/// `GET /openapi/v1/vectors` with `query`: the HTTP status and the envelope.
fn vectors(d: &Daemon, query: &str) -> (u16, serde_json::Value) {
    let a = http(
        &d.addr,
        "GET",
        &format!("/openapi/v1/vectors?{query}"),
        &[],
        b"",
        Duration::from_secs(10),
    )
    .unwrap();
    (a.status, a.json())
}

/// Waits until `d` serves a vector for every skill; returns how long it took.
fn complete(d: &Daemon, model: &str) -> Duration {
    let t = Instant::now();
    loop {
        let (status, v) = vectors(d, &format!("model={model}&dim=64&limit=1"));
        if status == 200 && v["result"]["complete"] == true && v["result"]["total"] == SKILLS {
            return t.elapsed();
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "not complete after 60 s ({status} {v}); stderr: {}",
            d.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every vector `d` serves, a page of `limit` at a time, by key.
fn all_vectors(d: &Daemon, limit: usize) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut after = String::new();
    loop {
        let q = if after.is_empty() {
            format!("limit={limit}")
        } else {
            format!("limit={limit}&after={after}")
        };
        let (status, v) = vectors(d, &q);
        assert_eq!(status, 200, "{v}");
        let r = &v["result"];
        let items = r["items"].as_array().unwrap();
        assert!(items.len() <= limit);
        for it in items {
            out.push((
                it["key"].as_str().unwrap().to_owned(),
                it["vector"].as_str().unwrap().to_owned(),
            ));
        }
        match r["next"].as_str() {
            Some(n) => after = n.to_owned(),
            None => return out,
        }
    }
}

#[test]
fn replicas_share_vectors_through_the_database_and_a_hub_seeds_from_a_peer() {
    let Some(pg) = Postgres::new() else { return };
    let uri = pg.uri();
    let tmp = tempfile::tempdir().unwrap();
    let out = command(BIN, &tmp.path().join("admin"))
        .args(["hub", "migrate", "--store", &uri])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let skills = tmp.path().join("skills");
    catalogue(&skills);

    // A embeds the catalogue (and writes the vectors to the database).
    let fa = Fake::openai(bow_reply);
    let a = server(&tmp.path().join("a"), &skills, &uri, &fa, "emb", &[]);
    complete(&a, "remote:emb");
    assert_eq!(texts(&fa), SKILLS);

    // B, a second replica, takes them from the database and embeds nothing.
    let fb = Fake::openai(bow_reply);
    let b = server(&tmp.path().join("b"), &skills, &uri, &fb, "emb", &[]);
    complete(&b, "remote:emb");
    assert_eq!(texts(&fb), 0, "B embedded; stderr: {}", b.stderr());
    assert!(b.stderr().contains("fetched=40"), "{}", b.stderr());

    // The route: pages cover every skill once, and both replicas serve the same vectors.
    let pages = all_vectors(&a, 7);
    assert_eq!(pages.len(), SKILLS);
    let mut keys: Vec<&String> = pages.iter().map(|(k, _)| k).collect();
    keys.dedup();
    assert_eq!(keys.len(), SKILLS);
    assert_eq!(all_vectors(&b, 1000), pages);
    let (status, v) = vectors(&a, "limit=1");
    assert_eq!(status, 200);
    assert_eq!(v["result"]["model"], "remote:emb");
    assert_eq!(v["result"]["dim"], 64);
    // 64 f32 values, base64: 344 characters.
    assert_eq!(
        v["result"]["items"][0]["vector"].as_str().unwrap().len(),
        344
    );

    // A client of another model is told which model the hub has.
    let (status, v) = vectors(&a, "model=all-MiniLM-L6-v2&dim=384");
    assert_eq!(status, 409, "{v}");
    assert_eq!(v["status"], 60010);
    let msg = v["error"].as_str().unwrap();
    assert!(
        msg.contains("`remote:emb` (dimension 64)") && msg.contains("all-MiniLM-L6-v2"),
        "{msg}"
    );
    let (status, v) = vectors(&a, "after=zz");
    assert_eq!((status, v["status"].as_u64()), (400, Some(60002)));

    // C, a hub over a directory store serving the same skills, seeds from A over HTTP.
    let fc = Fake::openai(bow_reply);
    let base_a = format!("http://{}", a.addr);
    let c_store = tmp.path().join("c-store");
    let c = server(
        &tmp.path().join("c"),
        &skills,
        c_store.to_str().unwrap(),
        &fc,
        "emb",
        &["--vectors-from", &base_a],
    );
    complete(&c, "remote:emb");
    assert_eq!(texts(&fc), 0, "C embedded; stderr: {}", c.stderr());
    assert_eq!(all_vectors(&c, 500), pages);

    // D has another model: A's vectors are refused, D says why and embeds them itself.
    let fd = Fake::openai(bow_reply);
    let d_store = tmp.path().join("d-store");
    let d = server(
        &tmp.path().join("d"),
        &skills,
        d_store.to_str().unwrap(),
        &fd,
        "emb2",
        &["--vectors-from", &base_a],
    );
    complete(&d, "remote:emb2");
    assert_eq!(texts(&fd), SKILLS);
    let err = d.stderr();
    assert!(
        err.contains("shared vectors unavailable")
            && err.contains("HTTP 409")
            && err.contains("remote:emb"),
        "{err}"
    );
}

#[test]
fn the_database_unreachable_a_replica_serves_lexically_and_embeds_everything_itself() {
    let Some(mut pg) = Postgres::new() else {
        return;
    };
    let uri = pg.uri();
    let tmp = tempfile::tempdir().unwrap();
    let out = command(BIN, &tmp.path().join("admin"))
        .args(["hub", "migrate", "--store", &uri])
        .output()
        .unwrap();
    assert!(out.status.success());
    let skills = tmp.path().join("skills");
    catalogue(&skills);
    // A fills the table; B syncs its tree once (lexical: no vectors), so it can start later
    // with the database away.
    let fa = Fake::openai(bow_reply);
    let a = server(&tmp.path().join("a"), &skills, &uri, &fa, "emb", &[]);
    complete(&a, "remote:emb");
    drop(a);
    let home_b = tmp.path().join("b");
    let lexical = command(BIN, &home_b)
        .env("SKILLSEARCH_RETRIEVER", "lexical")
        .args(["hub", "serve", "--listen", "127.0.0.1:0", "--store", &uri])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lexical = lexical;
    {
        use std::io::BufRead;
        let mut line = String::new();
        std::io::BufReader::new(lexical.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.contains("listening"), "{line}");
    }
    lexical.kill().unwrap();
    lexical.wait().unwrap();

    pg.stop();
    // Each embedding call takes 300 ms, so B is seen answering while it embeds.
    let fb = Fake::openai(|r| {
        skillsearch_testkit::Reply::Late(Duration::from_millis(300), Box::new(bow_reply(r)))
    });
    let b = server(&home_b, &skills, &uri, &fb, "emb", &[]);
    let t = Instant::now();
    while texts(&fb) == 0 {
        assert!(t.elapsed() < Duration::from_secs(30), "{}", b.stderr());
        std::thread::sleep(Duration::from_millis(20));
    }
    let a = http(
        &b.addr,
        "GET",
        &format!("/openapi/v1/skills?q={}&limit=3", tag(7)),
        &[],
        b"",
        Duration::from_secs(10),
    )
    .unwrap();
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    assert_eq!(
        a.json()["result"]["items"][0]["name"],
        "skill-7",
        "{}",
        a.json()
    );
    let (_, v) = vectors(&b, "limit=1");
    assert_eq!(v["result"]["complete"], false, "{v}");
    complete(&b, "remote:emb");
    assert_eq!(texts(&fb), SKILLS);
    let err = b.stderr();
    assert!(
        err.contains("shared vectors unavailable") && err.contains("cannot reach"),
        "{err}"
    );
}
