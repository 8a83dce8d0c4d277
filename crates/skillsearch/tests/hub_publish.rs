//! Publishing to `skillsearch hub serve` as a team does it: tokens made with `hub token create`,
//! skills sent with `hub publish`, versions, yank and delete through the real binary, and
//! hostile archives sent straight over HTTP. Nothing refused may ever be served or written
//! outside the store.

use serde_json::Value;
use skillsearch_core::{HubClient, HubSettings};
use skillsearch_testkit::daemon::{Daemon, http};
use skillsearch_testkit::sys::Tmpfs;
use skillsearch_testkit::{command, files_under, write_file, write_skill, zip_of};
use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_skillsearch");

/// Fields drop in order: the server stops before its store's disk is unmounted and its
/// directories removed.
struct Hub {
    d: Daemon,
    disk: Option<Tmpfs>,
    tmp: tempfile::TempDir,
    store: PathBuf,
}

/// `hub serve` over a fresh store (and no configured skills), with `extra` arguments.
fn hub(extra: &[&str]) -> Hub {
    hub_in(tempfile::tempdir().unwrap(), None, extra)
}

/// As [`hub`], the store under `tmp` (on `disk` when given).
fn hub_in(tmp: tempfile::TempDir, disk: Option<Tmpfs>, extra: &[&str]) -> Hub {
    let store = tmp.path().join("store");
    let mut args: Vec<&OsStr> = ["hub", "serve", "--listen", "127.0.0.1:0", "--store"]
        .iter()
        .map(OsStr::new)
        .collect();
    args.push(store.as_os_str());
    args.extend(extra.iter().map(OsStr::new));
    let d = Daemon::spawn(BIN, &tmp.path().join("home"), &args, &[]);
    Hub {
        d,
        disk,
        tmp,
        store,
    }
}

impl Hub {
    fn base(&self) -> String {
        format!("http://{}", self.d.addr)
    }

    /// A new token of `scope` for this hub's store, made by the CLI.
    fn token(&self, scope: &str) -> String {
        let out = self.cli(&[
            "hub",
            "token",
            "create",
            "--scope",
            scope,
            "--store",
            self.store.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let t = String::from_utf8(out.stdout).unwrap().trim().to_owned();
        assert!(t.starts_with("skh_"), "{t}");
        t
    }

    /// `skillsearch <args>` with its own home, no SKILLSEARCH_* but the given key.
    fn cli_with_key(&self, key: Option<&str>, args: &[&str]) -> Output {
        let mut c = command(BIN, &self.tmp.path().join("client-home"));
        if let Some(k) = key {
            c.env("SKILLSEARCH_HUB_API_KEY", k);
        }
        c.args(args).output().unwrap()
    }

    fn cli(&self, args: &[&str]) -> Output {
        self.cli_with_key(None, args)
    }

    /// One HTTP call: status and the body as JSON (Null when not JSON).
    fn call(&self, method: &str, path: &str, token: Option<&str>, body: &[u8]) -> (u16, Value) {
        let auth = token.map(|t| format!("Authorization: Bearer {t}"));
        let mut headers = vec!["Content-Type: application/zip"];
        headers.extend(auth.as_deref());
        let a = http(
            &self.d.addr,
            method,
            path,
            &headers,
            body,
            Duration::from_secs(30),
        )
        .unwrap_or_else(|e| panic!("{method} {path}: {e}; stderr: {}", self.d.stderr()));
        (a.status, a.json())
    }

    fn client(&self, dir: &Path) -> HubClient {
        HubClient::new(&HubSettings::new(self.base(), dir)).unwrap()
    }

    fn discover(&self, q: &str) -> Vec<String> {
        let c = self.client(&self.tmp.path().join("cache"));
        c.discover(q, 10, far())
            .unwrap()
            .iter()
            .map(|i| i["skill_id"].as_str().unwrap().to_owned())
            .collect()
    }
}

fn far() -> Instant {
    Instant::now() + Duration::from_secs(20)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn skill_md(name: &str, version: &str, body: &str) -> String {
    format!(
        "---\nname: {name}\ndescription: Roll out the team's services with the deploy checklist\nversion: {version}\n---\n\n{body}\n"
    )
}

#[test]
fn a_team_publishes_versions_yanks_and_deletes_with_the_cli() {
    let h = hub(&[]);
    let publish = h.token("publish");
    let read = h.token("read");
    let team = h.tmp.path().join("team");
    write_file(
        &team.join("deploy-notes/SKILL.md"),
        skill_md(
            "deploy-notes",
            "1.0.0",
            "# Deploy\n\n- run the checklist v1",
        ),
    );
    write_file(&team.join("deploy-notes/scripts/check.sh"), "echo ok\n");
    write_skill(
        &team,
        "nested/kube-rollback",
        "kube-rollback",
        "Roll back a Kubernetes deployment",
        "# Rollback\n\n- kubectl rollout undo",
    );
    let base = h.base();
    let team_s = team.to_str().unwrap();

    // Without a key, or with a read key, nothing is published and the CLI says why.
    let out = h.cli(&["hub", "publish", team_s, "--hub", &base]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("401"), "{}", stderr(&out));
    assert!(stderr(&out).contains("2 of 2 skills not published"));
    let out = h.cli_with_key(Some(&read), &["hub", "publish", team_s, "--hub", &base]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("403") && stderr(&out).contains("60006"),
        "{}",
        stderr(&out)
    );
    assert!(h.discover("deploy checklist").is_empty());

    // Every skill directory under the path, each under its own name.
    let out = h.cli_with_key(Some(&publish), &["hub", "publish", team_s, "--hub", &base]);
    assert!(out.status.success(), "{}", stderr(&out));
    let said = stdout(&out);
    assert!(said.contains("published deploy-notes 1.0.0"), "{said}");
    assert!(said.contains("published kube-rollback sha-"), "{said}");
    let found = h.discover("deploy checklist services");
    assert_eq!(found.first().map(String::as_str), Some("deploy-notes"));
    let c = h.client(&h.tmp.path().join("c1"));
    let rec = c.get("deploy-notes", far()).unwrap();
    assert!(rec.skill_md.unwrap().contains("checklist v1"));
    let files = rec.record["files"].to_string();
    assert!(files.contains("scripts/check.sh"), "{files}");
    assert!(!files.contains("published.json"), "{files}");

    // The same content again is not a new version; other content under the same version is a
    // conflict; a new version is served at once.
    let one = team.join("deploy-notes");
    let one_s = one.to_str().unwrap();
    let out = h.cli_with_key(Some(&publish), &["hub", "publish", one_s, "--hub", &base]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("unchanged deploy-notes 1.0.0"));
    write_file(
        &one.join("SKILL.md"),
        skill_md(
            "deploy-notes",
            "1.0.0",
            "# Deploy\n\n- run the checklist v2",
        ),
    );
    let out = h.cli_with_key(Some(&publish), &["hub", "publish", one_s, "--hub", &base]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("409") && stderr(&out).contains("already published"),
        "{}",
        stderr(&out)
    );
    write_file(
        &one.join("SKILL.md"),
        skill_md(
            "deploy-notes",
            "1.1.0",
            "# Deploy\n\n- run the checklist v2",
        ),
    );
    let out = h.cli_with_key(
        Some(&publish),
        &["hub", "publish", one_s, "--hub", &base, "--json"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let line: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(line["result"]["version"], "1.1.0");
    assert_eq!(line["result"]["created"], true);
    let c = h.client(&h.tmp.path().join("c2"));
    assert!(
        c.get("deploy-notes", far())
            .unwrap()
            .skill_md
            .unwrap()
            .contains("checklist v2")
    );

    let out = h.cli(&["hub", "versions", "deploy-notes", "--hub", &base]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v = stdout(&out);
    assert!(v.lines().next().unwrap().starts_with("1.0.0\t"), "{v}");
    assert!(
        v.lines().nth(1).unwrap().starts_with("1.1.0\t") && v.contains("current"),
        "{v}"
    );

    // Yanking the current version serves the one before; a read key may not yank.
    let out = h.cli_with_key(
        Some(&read),
        &["hub", "yank", "deploy-notes", "1.1.0", "--hub", &base],
    );
    assert!(!out.status.success());
    assert!(stderr(&out).contains("60006"), "{}", stderr(&out));
    let out = h.cli_with_key(
        Some(&publish),
        &["hub", "yank", "deploy-notes", "1.1.0", "--hub", &base],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("now served: 1.0.0"),
        "{}",
        stdout(&out)
    );
    let c = h.client(&h.tmp.path().join("c3"));
    assert!(
        c.get("deploy-notes", far())
            .unwrap()
            .skill_md
            .unwrap()
            .contains("checklist v1")
    );
    let out = h.cli_with_key(
        Some(&publish),
        &["hub", "yank", "deploy-notes", "9.9.9", "--hub", &base],
    );
    assert!(!out.status.success());
    assert!(stderr(&out).contains("404"), "{}", stderr(&out));

    // Delete removes every version; the skill is gone from search and read.
    let out = h.cli_with_key(
        Some(&publish),
        &["hub", "delete", "deploy-notes", "--hub", &base],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("deleted deploy-notes (2 versions)"));
    assert!(
        !h.discover("deploy checklist services")
            .contains(&"deploy-notes".to_owned())
    );
    let (st, v) = h.call("GET", "/openapi/v1/skills/deploy-notes", None, b"");
    assert_eq!((st, v["status"].as_u64()), (404, Some(60001)), "{v}");
    assert!(
        !h.d.stderr().contains(&publish),
        "a token never reaches the log"
    );
}

/// A zip with one symlink entry beside a valid SKILL.md.
fn zip_with_symlink() -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default();
    w.start_file("evil/SKILL.md", opts).unwrap();
    w.write_all(skill_md("evil", "1.0.0", "# Evil").as_bytes())
        .unwrap();
    w.add_symlink("evil/passwd", "/etc/passwd", opts).unwrap();
    w.finish().unwrap().into_inner()
}

#[test]
fn hostile_publishes_are_refused_and_nothing_is_served() {
    let h = hub(&[]);
    let t = h.token("publish");
    let ok_md = skill_md("fine", "1.0.0", "# Fine");
    let zeros = vec![0u8; 70 << 20];
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "a ../ entry",
            zip_of(&[
                ("fine/SKILL.md", ok_md.as_bytes()),
                ("../escaped/SKILL.md", ok_md.as_bytes()),
            ]),
        ),
        (
            "an absolute path",
            zip_of(&[("/tmp/skillsearch-abs/SKILL.md", ok_md.as_bytes())]),
        ),
        ("a symlink", zip_with_symlink()),
        (
            "a 70 MB file",
            zip_of(&[
                ("fine/SKILL.md", ok_md.as_bytes()),
                ("fine/data.txt", &zeros),
            ]),
        ),
        ("a 70 MB inflation in ten files", {
            let names: Vec<String> = (0..10).map(|i| format!("fine/d{i}.txt")).collect();
            let mut entries: Vec<(&str, &[u8])> = vec![("fine/SKILL.md", ok_md.as_bytes())];
            entries.extend(names.iter().map(|n| (n.as_str(), &zeros[..7 << 20])));
            zip_of(&entries)
        }),
        (
            "a binary SKILL.md",
            zip_of(&[("fine/SKILL.md", b"\x7fELF\x02\x01\x01\0\0\0binary")]),
        ),
        (
            "malformed frontmatter",
            zip_of(&[(
                "fine/SKILL.md",
                b"---\nname: [fine\ndescription: : :\n---\n# x\n",
            )]),
        ),
        (
            "a name that is not a slug",
            zip_of(&[(
                "fine/SKILL.md",
                skill_md("Fine Skill!", "1.0.0", "# x").as_bytes(),
            )]),
        ),
        (
            "no description",
            zip_of(&[("fine/SKILL.md", b"---\nname: fine\n---\n# x\n")]),
        ),
        ("not a zip", b"this is not a zip archive".to_vec()),
        ("no SKILL.md", zip_of(&[("fine/README.md", b"# hi")])),
    ];
    for (what, body) in &cases {
        let (st, v) = h.call("POST", "/openapi/v1/skills", Some(&t), body);
        assert_eq!(st, 422, "{what}: {v}; stderr: {}", h.d.stderr());
        assert_eq!(v["status"], 60008, "{what}: {v}");
        let msg = v["error"].as_str().unwrap();
        assert!(msg.len() > 10, "{what}: says why: {msg}");
    }
    // Over the size a publish may send: refused before it is read whole.
    let (st, v) = h.call(
        "POST",
        "/openapi/v1/skills",
        Some(&t),
        &vec![b'x'; 17 << 20],
    );
    assert_eq!((st, v["status"].as_u64()), (413, Some(60008)), "{v}");
    // A wrong token, no token, a read token.
    let good = zip_of(&[("fine/SKILL.md", ok_md.as_bytes())]);
    let (st, v) = h.call(
        "POST",
        "/openapi/v1/skills",
        Some("skh_000000000000_00"),
        &good,
    );
    assert_eq!((st, v["status"].as_u64()), (401, Some(60002)), "{v}");
    let (st, _) = h.call("POST", "/openapi/v1/skills", None, &good);
    assert_eq!(st, 401);
    let read = h.token("read");
    let (st, v) = h.call("POST", "/openapi/v1/skills", Some(&read), &good);
    assert_eq!((st, v["status"].as_u64()), (403, Some(60006)), "{v}");
    let (st, v) = h.call("DELETE", "/openapi/v1/skills/fine", Some(&read), b"");
    assert_eq!((st, v["status"].as_u64()), (403, Some(60006)), "{v}");

    // Nothing was served, staged or written outside the store.
    assert!(h.discover("roll out services deploy checklist").is_empty());
    let live: Vec<_> = std::fs::read_dir(h.store.join("live")).unwrap().collect();
    assert!(live.is_empty(), "{live:?}");
    let staged: Vec<_> = std::fs::read_dir(h.store.join("tmp")).unwrap().collect();
    assert!(staged.is_empty(), "{staged:?}");
    assert!(!h.store.join("escaped").exists() && !h.tmp.path().join("escaped").exists());
    assert!(!Path::new("/tmp/skillsearch-abs").exists());

    // The server still serves, and a good publish still works.
    let (st, v) = h.call("POST", "/openapi/v1/skills", Some(&t), &good);
    assert_eq!(st, 201, "{v}");
    assert_eq!(v["result"]["name"], "fine");
    assert_eq!(h.discover("roll out services deploy checklist"), ["fine"]);
    // The versions of a skill are readable by anyone when reads are open.
    let (st, v) = h.call("GET", "/openapi/v1/skills/fine/versions", None, b"");
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["result"]["current"], "1.0.0");
    // A method a route does not take gets the envelope.
    let (st, v) = h.call("PUT", "/openapi/v1/skills/fine", Some(&t), b"");
    assert_eq!((st, v["status"].as_u64()), (405, Some(60002)), "{v}");
}

#[test]
fn require_token_closes_reads_to_unknown_callers() {
    let h = hub(&["--require-token"]);
    let read = h.token("read");
    let (st, v) = h.call("GET", "/openapi/v1/skills?q=deploy", None, b"");
    assert_eq!((st, v["status"].as_u64()), (401, Some(60002)), "{v}");
    let (st, _) = h.call("GET", "/openapi/v1/skills?q=deploy", Some("nope"), b"");
    assert_eq!(st, 401);
    let (st, v) = h.call("GET", "/openapi/v1/skills?q=deploy", Some(&read), b"");
    assert_eq!(st, 200, "{v}");
    // A token made while the server runs is honoured at once.
    let later = h.token("read");
    let (st, _) = h.call("GET", "/openapi/v1/skills?q=deploy", Some(&later), b"");
    assert_eq!(st, 200);
    let (st, _) = h.call("GET", "/health", None, b"");
    assert_eq!(st, 200, "health stays open");
}

#[test]
fn a_write_refreshes_only_the_skill_it_changed() {
    let h = hub(&[]);
    let publish = h.token("publish");
    let base = h.base();
    let team = h.tmp.path().join("team");
    let send = |name: &str, version: &str, body: &str| {
        write_file(
            &team.join(name).join("SKILL.md"),
            skill_md(name, version, body),
        );
        let dir = team.join(name);
        let out = h.cli_with_key(
            Some(&publish),
            &["hub", "publish", dir.to_str().unwrap(), "--hub", &base],
        );
        assert!(out.status.success(), "{}", stderr(&out));
    };
    send("deploy-notes", "1.0.0", "# Deploy\n\n- run the checklist");
    // Past the watcher's first look at the disk.
    std::thread::sleep(Duration::from_millis(800));
    // A skill put into the store's tree by hand, behind the store's back: the writes below
    // look only at the skill each one changes, so it stays unseen (until the minute's
    // catch-up), while each written skill is found as soon as its call answers.
    write_skill(
        &h.store.join("live"),
        "smuggled",
        "smuggled",
        "Zebra pipelines for tax invoices",
        "x",
    );
    send(
        "rollback-notes",
        "1.0.0",
        "# Rollback\n\n- undo the rollout",
    );
    assert_eq!(h.discover("rollback undo rollout"), ["rollback-notes"]);
    send(
        "deploy-notes",
        "1.1.0",
        "# Deploy\n\n- run the walrus checklist",
    );
    assert_eq!(h.discover("walrus"), ["deploy-notes"]);
    let token = Some(publish.as_str());
    let (st, _) = h.call(
        "POST",
        "/openapi/v1/skills/deploy-notes/versions/1.1.0/yank",
        token,
        b"",
    );
    assert_eq!(st, 200);
    assert!(h.discover("walrus").is_empty());
    let (st, _) = h.call("DELETE", "/openapi/v1/skills/rollback-notes", token, b"");
    assert_eq!(st, 200);
    assert!(h.discover("rollback undo rollout").is_empty());
    assert!(
        h.discover("zebra pipelines tax invoices").is_empty(),
        "a write walked the whole tree"
    );
}

#[test]
fn a_full_store_disk_refuses_a_publish_with_507_and_the_hub_serves_on() {
    let tmp = tempfile::tempdir().unwrap();
    let disk = match Tmpfs::mount(&tmp.path().join("store"), 16 << 20) {
        Ok(d) => d,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let h = hub_in(tmp, Some(disk), &[]);
    let t = h.token("publish");
    let zip = |name: &str, version: &str| {
        let md = skill_md(
            name,
            version,
            &format!("# {name}\n\n- run the {name} checklist"),
        );
        zip_of(&[(&format!("{name}/SKILL.md"), md.as_bytes())])
    };
    let (st, v) = h.call(
        "POST",
        "/openapi/v1/skills",
        Some(&t),
        &zip("deploy-notes", "1"),
    );
    assert_eq!(st, 201, "{v}");
    let before = files_under(&h.store);

    let filler = h.disk.as_ref().unwrap().fill();
    for (name, version) in [("deploy-notes", "2"), ("kube-rollback", "1")] {
        let (st, v) = h.call("POST", "/openapi/v1/skills", Some(&t), &zip(name, version));
        assert_eq!(
            (st, v["status"].as_u64()),
            (507, Some(60012)),
            "{name} {version}: {v}; stderr: {}",
            h.d.stderr()
        );
        assert!(
            v["error"].as_str().unwrap().contains("out of disk space"),
            "{v}"
        );
    }
    // Nothing of the refused publishes is stored or served; reads go on.
    std::fs::remove_file(&filler).unwrap();
    let mut now = files_under(&h.store);
    now.retain(|f| !f.starts_with("tmp/"));
    let mut was = before.clone();
    was.retain(|f| !f.starts_with("tmp/"));
    assert_eq!(now, was);
    assert_eq!(h.discover("deploy checklist"), ["deploy-notes"]);
    let (st, v) = h.call("GET", "/openapi/v1/skills/deploy-notes", None, b"");
    assert_eq!(st, 200, "{v}");
    assert!(
        v["result"]["skill_md"]
            .as_str()
            .unwrap()
            .contains("version: 1"),
        "{v}"
    );
    assert!(
        h.d.stderr().contains("out of disk space"),
        "{}",
        h.d.stderr()
    );

    // Space freed: the same publishes go in.
    for (name, version) in [("deploy-notes", "2"), ("kube-rollback", "1")] {
        let (st, v) = h.call("POST", "/openapi/v1/skills", Some(&t), &zip(name, version));
        assert_eq!(st, 201, "{name} {version}: {v}");
    }
    let mut found = h.discover("checklist");
    found.sort();
    assert_eq!(found, ["deploy-notes", "kube-rollback"]);
}
