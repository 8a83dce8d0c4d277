//! The hub client, source and bundle cache against a fake SkillHub on 127.0.0.1: a good round
//! trip, then every fault the protocol or an archive can bring. Each fault must end in a typed
//! error (or an empty answer) within its deadline, with nothing half-written in the cache.

use serde_json::{Value, json};
use skillsearch_core::config::Secret;
use skillsearch_core::corpus::bundle;
use skillsearch_core::{Error, HubClient, HubSettings, HubSource, Roots, SkillSource};
use skillsearch_testkit::{Fake, Reply, files_under, hub_ok, zip_of, zip_reply};
use std::collections::HashMap;
use std::io::{Cursor, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use zip::write::SimpleFileOptions;

// ---------------------------------------------------------------- fixtures

const KEY: &str = "sk-test-TOPSECRET-42";

fn settings(hub: &Fake, cache: &Path) -> HubSettings {
    HubSettings::new(&hub.base, cache)
}

fn far() -> Instant {
    Instant::now() + Duration::from_secs(30)
}

const SKILL_MD: &[u8] =
    b"---\nname: pdf-forms\ndescription: Fill PDF forms\n---\n\n# PDF forms\nRun scripts/fill.sh.\n";

fn catalogue() -> Value {
    json!([
        {"id": "u-pdf", "skill_id": "acme/pdf-forms", "name": "pdf-forms",
         "description": "Fill PDF AcroForm fields with pdftk", "quality_score": 0.9,
         "tags": ["pdf", "forms"], "install_count": 12},
        {"id": "u-unsafe", "name": "pdf-unsafe", "description": "Fill PDF forms fast",
         "quality_score": 0.9, "score_safety": 0.2},
        {"id": "u-low", "name": "pdf-low", "description": "PDF forms helper", "quality_score": 0.3},
        {"id": "u-noname", "description": "PDF forms"},
        {"name": "no-id", "description": "PDF forms"},
        {"id": "u-k8s", "name": "k8s-deploy", "description": "Deploy services to Kubernetes",
         "quality_score": 0.8},
        {"id": "u-merge", "name": "merger", "description": "Merge documents", "tags": "pdf,merge",
         "quality_score": 0.7, "score_safety": 0.7},
        {"id": "u-split", "name": "pdf-split", "description": "Split PDF forms into pages",
         "quality_score": 0.6}
    ])
}

/// A hub with the catalogue and one installable skill per entry of `bundles` (id → zip).
fn hub_with(bundles: HashMap<&'static str, Vec<u8>>) -> Fake {
    Fake::start(move |r| {
        let path = r.path.as_str();
        if path == "/openapi/v1/skills" {
            return hub_ok(json!({"items": catalogue()}));
        }
        let rest = path.strip_prefix("/openapi/v1/skills/").unwrap_or_default();
        if let Some(id) = rest.strip_suffix("/download") {
            return match bundles.get(id) {
                Some(z) => zip_reply(z.clone()),
                None => Reply::Json(404, json!({"error": "not found", "status": 60001})),
            };
        }
        match rest {
            "unsafe" => hub_ok(json!({"id": "unsafe", "name": "x", "score_safety": 0.3,
                                  "skill_md": "# x"})),
            id if bundles.contains_key(id) => hub_ok(json!({
                "id": id, "skill_id": format!("acme/{id}"), "version": "1.0.0",
                "name": id, "skill_md": String::from_utf8_lossy(SKILL_MD), "score_safety": 0.95
            })),
            _ => Reply::Json(404, json!({"error": "not found", "status": 60001})),
        }
    })
}

fn assert_cache_empty(cache: &Path) {
    let left: Vec<_> = std::fs::read_dir(cache)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "cache holds {left:?}");
}

// ---------------------------------------------------------------- round trip

#[test]
fn search_read_download_round_trip() {
    let zip = zip_of(&[
        ("pdf-forms/SKILL.md", SKILL_MD),
        ("pdf-forms/scripts/fill.sh", b"echo fill\n"),
        ("pdf-forms/references/fields.md", b"# Fields\n"),
        ("pdf-forms/tool.exe", b"MZ"),
    ]);
    let hub = hub_with(HashMap::from([("u-pdf", zip)]));
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache/hub");
    let source = HubSource::new(&settings(&hub, &cache)).unwrap();
    assert_eq!((source.name(), source.weight()), ("hub", 0.85));

    let found = source.search_explained("fill pdf forms", 5, far()).unwrap();
    let ids: Vec<&str> = found.hits.iter().map(|h| h.qualified_id.as_str()).collect();
    assert_eq!(ids, ["hub/u-pdf", "hub/u-merge"], "{:#?}", found.rejected);
    let why = |id: &str| {
        found
            .rejected
            .iter()
            .find(|r| r.id == id)
            .map(|r| r.reason.clone())
            .unwrap_or_default()
    };
    assert!(why("u-unsafe").contains("safety score 0.2 below 0.7"));
    assert!(why("u-low").contains("quality score 0.3 below 0.45"));
    assert!(why("u-noname").contains("missing"));
    assert!(why("u-k8s").starts_with("not relevant"));
    assert!(why("u-split").contains("over the 2 hits"));
    assert_eq!(found.rejected.len(), 6, "{:#?}", found.rejected);
    let hit = &found.hits[0];
    assert_eq!(hit.name, "pdf-forms");
    assert_eq!(hit.score, 0.9);
    assert_eq!(hit.body, None);
    assert_eq!(hit.meta["source"], "hub");
    assert_eq!(hit.meta["origin"], "hub/u-pdf");
    assert_eq!(hit.meta["skill_id"], "acme/pdf-forms");
    assert_eq!(hit.meta["keyword_relevance"]["passed"], true);
    assert_eq!(
        found.hits[1].meta["score_safety"], 0.7,
        "at the minimum passes"
    );
    // k below the cap.
    assert_eq!(source.search("fill pdf forms", 1, far()).unwrap().len(), 1);
    let search = &hub.requests()[0];
    assert!(
        search.query().contains("q=fill%20pdf%20forms")
            || search.query().contains("q=fill+pdf+forms"),
        "{}",
        search.query()
    );
    assert!(search.query().contains("limit=8"), "{}", search.query());

    // Hydrate: the body without frontmatter; the record kept for the install.
    let mut hit = found.hits[0].clone();
    source.hydrate(&mut hit, far()).unwrap();
    assert_eq!(
        hit.body.as_deref(),
        Some("# PDF forms\nRun scripts/fill.sh.")
    );
    assert_eq!(hub.count("/u-pdf"), 1);

    let installed = source.install(&hit, far()).unwrap();
    assert_eq!(hub.count("/u-pdf"), 1, "the hydrated record is reused");
    assert_eq!(hub.count("/u-pdf/download"), 1);
    assert_eq!(installed.dir, cache.join("acme_u-pdf/1.0.0"));
    assert!(!installed.from_cache);
    assert_eq!(
        files_under(&installed.dir),
        ["SKILL.md", "references/fields.md", "scripts/fill.sh"],
        "wrapper unwrapped, .exe skipped"
    );
    assert_eq!(std::fs::read(&installed.skill_md).unwrap(), SKILL_MD);
    let skipped: Vec<_> = installed
        .diagnostics
        .iter()
        .map(|d| d.code.as_str())
        .collect();
    assert_eq!(skipped, ["bundle-entry-skipped"]);
    assert_eq!(
        files_under(&cache),
        [
            "acme_u-pdf/1.0.0/SKILL.md",
            "acme_u-pdf/1.0.0/references/fields.md",
            "acme_u-pdf/1.0.0/scripts/fill.sh"
        ],
        "no staging directory left"
    );

    // Again: from the cache, no download.
    let again = source.client().install("u-pdf", None, far()).unwrap();
    assert!(again.from_cache);
    assert_eq!(again.dir, installed.dir);
    assert_eq!(hub.count("/u-pdf/download"), 1);
}

#[test]
fn bearer_key_and_request_id_are_sent_and_the_key_never_shown() {
    let hub = hub_with(HashMap::new());
    let tmp = tempfile::tempdir().unwrap();
    let mut s = settings(&hub, tmp.path());
    s.api_key = Secret::new(KEY);
    let source = HubSource::new(&s).unwrap();
    source.search("fill pdf forms", 2, far()).unwrap();
    let client = source.client();
    let e1 = client.get("missing", far()).unwrap_err();
    let e2 = client.download("missing", far()).unwrap_err();
    let reqs = hub.requests();
    assert_eq!(reqs.len(), 3);
    let mut ids = Vec::new();
    for r in &reqs {
        assert_eq!(r.header("Authorization"), Some(&*format!("Bearer {KEY}")));
        let rid = r.header("X-Request-ID").unwrap();
        assert!(
            rid.len() == 32 && rid.chars().all(|c| c.is_ascii_hexdigit()),
            "{rid}"
        );
        ids.push(rid.to_owned());
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 3, "one id per request");
    assert_eq!(reqs[2].query(), "source=cli");
    assert!(matches!(e1, Error::HubStatus { status: 404, .. }), "{e1}");
    assert!(e1.to_string().contains("60001"), "{e1}");
    let shown = format!("{s:?} {source:?} {client:?} {e1} {e1:?} {e2} {e2:?}");
    assert!(!shown.contains("TOPSECRET"), "{shown}");
    assert!(shown.contains("<redacted>"), "{shown}");

    // Without a key: no Authorization header at all.
    let hub = hub_with(HashMap::new());
    HubClient::new(&settings(&hub, tmp.path()))
        .unwrap()
        .discover("pdf", 8, far())
        .unwrap();
    assert_eq!(hub.requests()[0].header("Authorization"), None);
    assert!(hub.requests()[0].header("X-Request-ID").is_some());
}

// ---------------------------------------------------------------- protocol faults

#[test]
fn bad_envelopes_and_http_errors_are_typed_errors() {
    let hub = Fake::start(|r| match r.query() {
        q if q.contains("q=boom") => Reply::Json(
            200,
            json!({"error": "boom", "status": 0, "result": {"items": []}}),
        ),
        q if q.contains("q=status") => Reply::Json(
            200,
            json!({"error": "ok", "status": 1, "result": {"items": []}}),
        ),
        q if q.contains("q=html") => Reply::Raw(200, vec![], b"<html>hi</html>".to_vec()),
        q if q.contains("q=noitems") => hub_ok(json!({"total": 0})),
        q if q.contains("q=success") => Reply::Json(
            200,
            json!({"error": "success", "status": 0, "result": {"items": []}}),
        ),
        q if q.contains("q=redirect") => Reply::Raw(
            302,
            vec![("Location", "http://127.0.0.1:1/x".into())],
            vec![],
        ),
        _ => Reply::Json(500, json!({"error": "internal", "status": 20001})),
    });
    let tmp = tempfile::tempdir().unwrap();
    let source = HubSource::new(&settings(&hub, tmp.path())).unwrap();
    let err = |q: &str| source.search(q, 2, far()).unwrap_err();
    for q in ["boom pdf", "status pdf", "html pdf", "noitems pdf"] {
        let e = err(q);
        assert!(matches!(e, Error::HubEnvelope { .. }), "{q}: {e}");
        assert!(
            e.to_string().starts_with("hub search: bad envelope: "),
            "{e}"
        );
    }
    assert!(err("boom pdf").to_string().contains("\"boom\""));
    assert!(source.search("success pdf", 2, far()).unwrap().is_empty());
    let e = err("crash pdf");
    assert!(matches!(e, Error::HubStatus { status: 500, .. }), "{e}");
    assert_eq!(
        e.to_string(),
        "hub search: HTTP 500 (hub status 20001: `internal`)"
    );
    let e = err("redirect pdf");
    assert!(
        matches!(e, Error::HubStatus { status: 302, .. }),
        "redirects are not followed: {e}"
    );
    assert_eq!(hub.requests().len(), 8);
    // A query the guard can pass nothing for is not sent at all.
    assert!(
        source
            .search("please help me", 2, far())
            .unwrap()
            .is_empty()
    );
    assert!(source.search("   ", 2, far()).unwrap().is_empty());
    assert_eq!(hub.requests().len(), 8);
}

#[test]
fn a_hanging_hub_times_out_within_the_deadline() {
    let hub = Fake::start(|r| {
        if r.query().contains("trickle") || r.path.ends_with("/download") {
            Reply::Trickle
        } else {
            Reply::Hang(Duration::from_secs(10))
        }
    });
    let tmp = tempfile::tempdir().unwrap();
    let mut s = settings(&hub, tmp.path());
    s.api_key = Secret::new(KEY);
    s.timeout = Duration::from_millis(300);
    s.download_timeout = Duration::from_millis(400);
    let source = HubSource::new(&s).unwrap();
    let margin = Duration::from_millis(700);

    let timed = |f: &dyn Fn() -> skillsearch_core::Result<()>, limit: Duration| {
        let t = Instant::now();
        let e = f().unwrap_err();
        let took = t.elapsed();
        assert!(
            took < limit + margin,
            "took {took:?} for a {limit:?} deadline: {e}"
        );
        assert!(
            took + Duration::from_millis(20) >= limit,
            "gave up early ({took:?}): {e}"
        );
        assert!(matches!(e, Error::HubTimeout { .. }), "{e}");
        assert!(e.to_string().contains("timeout"), "{e}");
        assert!(!e.to_string().contains("TOPSECRET"));
        e
    };
    // The step timeout (hub_timeout_s).
    let e = timed(
        &|| source.search("pdf forms", 2, far()).map(|_| ()),
        s.timeout,
    );
    assert_eq!(e.to_string(), "hub search: timeout after 300 ms");
    // A caller deadline shorter than the step timeout wins.
    let mut slow = s.clone();
    slow.timeout = Duration::from_secs(5);
    let source2 = HubSource::new(&slow).unwrap();
    timed(
        &|| {
            source2
                .search("pdf forms", 2, Instant::now() + Duration::from_millis(250))
                .map(|_| ())
        },
        Duration::from_millis(250),
    );
    // Each case on a client of its own: three failures in a row open a client's breaker.
    let fresh = || HubSource::new(&s).unwrap();
    // Headers arrive but the body trickles: the deadline covers the body too.
    timed(
        &|| fresh().search("trickle pdf", 2, far()).map(|_| ()),
        s.timeout,
    );
    timed(&|| fresh().client().get("x", far()).map(|_| ()), s.timeout);
    // Downloads have their own (longer) timeout.
    timed(
        &|| fresh().client().download("x", far()).map(|_| ()),
        s.download_timeout,
    );
    // A deadline already past fails at once, without a request.
    let before = hub.requests().len();
    let e = source.search("pdf", 2, Instant::now()).unwrap_err();
    assert!(matches!(e, Error::HubTimeout { after_ms: 0, .. }), "{e}");
    assert_eq!(hub.requests().len(), before);
}

#[test]
fn a_hub_that_keeps_hanging_is_not_asked_again_for_a_while() {
    let hub = Fake::start(|_| Reply::Hang(Duration::from_secs(10)));
    let tmp = tempfile::tempdir().unwrap();
    let mut s = settings(&hub, tmp.path());
    s.timeout = Duration::from_millis(200);
    let source = HubSource::new(&s).unwrap();
    for _ in 0..3 {
        let e = source.search("pdf forms", 2, far()).unwrap_err();
        assert!(matches!(e, Error::HubTimeout { .. }), "{e}");
    }
    // The breaker is open: the next turns fail at once, without a request, and say why.
    let before = hub.requests().len();
    let t = Instant::now();
    let e = source.search("pdf forms", 2, far()).unwrap_err();
    assert!(t.elapsed() < Duration::from_millis(50), "{:?}", t.elapsed());
    assert_eq!(hub.requests().len(), before);
    assert_eq!(
        e.to_string(),
        "hub search: not called: its last 3 calls failed (the last: hub search: timeout after \
         200 ms); trying again in 5 s"
    );
    let e = source.client().get("x", far()).unwrap_err();
    assert!(e.to_string().contains("not called"), "{e}");
    assert_eq!(hub.requests().len(), before);
}

#[test]
fn an_unsafe_record_is_neither_read_nor_installed() {
    let hub = hub_with(HashMap::new());
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let client = HubClient::new(&settings(&hub, &cache)).unwrap();
    let e = client.get("unsafe", far()).unwrap_err();
    assert!(
        matches!(e, Error::HubUnsafe { score, .. } if score == 0.3),
        "{e}"
    );
    let e = client.install("unsafe", None, far()).unwrap_err();
    assert!(matches!(e, Error::HubUnsafe { .. }), "{e}");
    assert_eq!(hub.count("/download"), 0);
    assert_cache_empty(&cache);
}

// ---------------------------------------------------------------- archive faults

/// Installs the bundle `zip` under id `b` and returns the result and the cache directory.
fn install_zip(
    zip: Vec<u8>,
) -> (
    skillsearch_core::Result<bundle::Installed>,
    tempfile::TempDir,
) {
    let hub = hub_with(HashMap::from([("b", zip)]));
    let tmp = tempfile::tempdir().unwrap();
    let client = HubClient::new(&settings(&hub, &tmp.path().join("cache"))).unwrap();
    (client.install("b", None, far()), tmp)
}

fn assert_aborted(zip: Vec<u8>, expect: &str) -> Error {
    let (r, tmp) = install_zip(zip);
    let e = r.unwrap_err();
    assert!(e.to_string().contains(expect), "{e}");
    assert!(e.to_string().ends_with("nothing was installed"), "{e}");
    assert_cache_empty(&tmp.path().join("cache"));
    let outside: Vec<_> = files_under(tmp.path());
    assert!(
        outside.is_empty(),
        "files written outside the cache: {outside:?}"
    );
    e
}

#[test]
fn traversal_and_absolute_entries_abort_the_whole_bundle() {
    let e = assert_aborted(
        zip_of(&[("s/SKILL.md", SKILL_MD), ("s/../../evil.md", b"x")]),
        "leaves the bundle",
    );
    assert!(
        matches!(&e, Error::BundleUnsafe { entry, .. } if entry == "s/../../evil.md"),
        "{e}"
    );
    let e = assert_aborted(
        zip_of(&[
            ("SKILL.md", SKILL_MD),
            ("/tmp/skillsearch-abs-evil.md", b"x"),
        ]),
        "is an absolute path",
    );
    assert!(matches!(e, Error::BundleUnsafe { .. }), "{e}");
    assert!(!Path::new("/tmp/skillsearch-abs-evil.md").exists());
    assert_aborted(
        zip_of(&[("SKILL.md", SKILL_MD), ("..\\evil.md", b"x")]),
        "leaves the bundle",
    );
}

#[test]
fn symlink_entries_abort_the_bundle() {
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = SimpleFileOptions::default();
    w.start_file("SKILL.md", opts).unwrap();
    w.write_all(SKILL_MD).unwrap();
    w.add_symlink("passwd.md", "/etc/passwd", opts).unwrap();
    let zip = w.finish().unwrap().into_inner();
    let e = assert_aborted(zip, "is a symbolic link");
    assert!(matches!(e, Error::BundleUnsafe { .. }), "{e}");
}

#[test]
fn an_inflation_bomb_aborts_while_inflating() {
    // 10 files of 7 MB of zeros: each under the 8 MiB file limit, 70 MB in all, ~70 KB zipped.
    let zeros = vec![0u8; 7_000_000];
    let names: Vec<String> = (0..10).map(|i| format!("bomb/part{i}.txt")).collect();
    let mut entries: Vec<(&str, &[u8])> = vec![("bomb/SKILL.md", SKILL_MD)];
    entries.extend(names.iter().map(|n| (n.as_str(), zeros.as_slice())));
    let zip = zip_of(&entries);
    assert!(zip.len() < 200_000, "{} bytes", zip.len());
    let t = Instant::now();
    let e = assert_aborted(zip, "inflates past 67108864 bytes");
    assert!(
        matches!(
            e,
            Error::BundleTooLarge {
                limit: 67_108_864,
                ..
            }
        ),
        "{e}"
    );
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
}

/// Rewrites every uncompressed-size field (local and central headers) of a small zip.
fn understate_sizes(mut zip: Vec<u8>, declared: u32) -> Vec<u8> {
    let mut i = 0;
    while i + 30 < zip.len() {
        let sig = u32::from_le_bytes(zip[i..i + 4].try_into().unwrap());
        let at = match sig {
            0x0403_4b50 => Some(i + 22),
            0x0201_4b50 => Some(i + 24),
            _ => None,
        };
        if let Some(at) = at {
            zip[at..at + 4].copy_from_slice(&declared.to_le_bytes());
        }
        i += 1;
    }
    zip
}

#[test]
fn a_file_that_inflates_past_its_declared_size_aborts() {
    // Declares 1,000 bytes, inflates to 9 MB: caught while inflating, not from the headers.
    let big = vec![b'a'; 9_000_000];
    let zip = understate_sizes(zip_of(&[("big.md", &big)]), 1000);
    let (r, tmp) = install_zip(zip);
    let e = r.unwrap_err();
    assert!(
        matches!(&e, Error::BundleUnsafe { reason, .. } if reason.contains("declared size"))
            || matches!(&e, Error::BundleInvalid { .. }),
        "{e}"
    );
    assert_cache_empty(&tmp.path().join("cache"));
}

#[test]
fn disallowed_and_oversized_files_are_skipped_with_diagnostics() {
    let big = vec![b'a'; 9 * 1024 * 1024];
    let (r, _tmp) = install_zip(zip_of(&[
        ("SKILL.md", SKILL_MD),
        ("bin/tool.exe", b"MZ"),
        ("lib/x.so", b"\x7fELF"),
        ("data/big.csv", &big),
        ("scripts/run.py", b"print(1)"),
        ("Makefile", b"all:"),
    ]));
    let installed = r.unwrap();
    assert_eq!(
        files_under(&installed.dir),
        ["Makefile", "SKILL.md", "scripts/run.py"]
    );
    let mut codes: Vec<_> = installed
        .diagnostics
        .iter()
        .map(|d| format!("{} {}", d.code, d.path.display()))
        .collect();
    codes.sort();
    assert_eq!(
        codes,
        [
            "bundle-entry-skipped bin/tool.exe",
            "bundle-entry-skipped lib/x.so",
            "bundle-entry-too-large data/big.csv"
        ]
    );
}

#[test]
fn a_bundle_without_skill_md_or_not_a_zip_installs_nothing() {
    let e = assert_aborted(zip_of(&[("w/README.md", b"# hi")]), "no `SKILL.md`");
    assert!(matches!(e, Error::BundleInvalid { .. }), "{e}");
    let e = assert_aborted(
        b"PK not really a zip".to_vec(),
        "not a readable zip archive",
    );
    assert!(matches!(e, Error::BundleInvalid { .. }), "{e}");
    // Two top-level directories: no unwrapping, and no SKILL.md at the root.
    assert_aborted(
        zip_of(&[("a/SKILL.md", SKILL_MD), ("b/SKILL.md", SKILL_MD)]),
        "no `SKILL.md`",
    );
}

#[test]
fn wrapper_directory_is_unwrapped_and_flat_bundles_kept() {
    let (r, _t) = install_zip(zip_of(&[
        ("my-skill/", b""),
        ("my-skill/SKILL.md", SKILL_MD),
        ("my-skill/references/a.md", b"a"),
        (".hidden-top.md", b"ignored for unwrapping"),
    ]));
    let i = r.unwrap();
    assert_eq!(files_under(&i.dir), ["SKILL.md", "references/a.md"]);
    let (r, _t) = install_zip(zip_of(&[("SKILL.md", SKILL_MD), ("references/a.md", b"a")]));
    let i = r.unwrap();
    assert_eq!(files_under(&i.dir), ["SKILL.md", "references/a.md"]);
    // One directory without SKILL.md inside, next to a SKILL.md: not a wrapper.
    let (r, _t) = install_zip(zip_of(&[("SKILL.md", SKILL_MD), ("README", b"r")]));
    assert_eq!(files_under(&r.unwrap().dir), ["README", "SKILL.md"]);
}

#[test]
fn a_broken_cache_entry_heals_itself() {
    let zip = zip_of(&[("s/SKILL.md", SKILL_MD)]);
    let hub = hub_with(HashMap::from([("b", zip)]));
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let client = HubClient::new(&settings(&hub, &cache)).unwrap();
    // A half-copied entry from an interrupted older run: no SKILL.md.
    let dest = bundle::cache_path(&cache, "acme/b", "1.0.0");
    std::fs::create_dir_all(dest.join("references")).unwrap();
    std::fs::write(dest.join("references/stale.md"), "stale").unwrap();
    let i = client.install("b", None, far()).unwrap();
    assert_eq!(i.dir, dest);
    assert!(!i.from_cache);
    assert_eq!(files_under(&i.dir), ["SKILL.md"]);
    assert_eq!(i.diagnostics[0].code, "bundle-cache-healed");
    assert_eq!(hub.count("/download"), 1);
    assert_eq!(files_under(&cache), ["acme_b/1.0.0/SKILL.md"]);
    // A file where the directory should be heals too.
    std::fs::remove_dir_all(&dest).unwrap();
    std::fs::write(&dest, "junk").unwrap();
    assert!(client.install("b", None, far()).unwrap().skill_md.is_file());
}

#[test]
fn concurrent_installs_of_one_bundle_agree() {
    let zip = zip_of(&[("s/SKILL.md", SKILL_MD), ("s/references/a.md", b"a")]);
    let hub = hub_with(HashMap::from([("b", zip)]));
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let client = HubClient::new(&settings(&hub, &cache)).unwrap();
    let dirs: Vec<PathBuf> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| s.spawn(|| client.install("b", None, far()).unwrap().dir))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(dirs.iter().all(|d| d == &dirs[0]));
    assert_eq!(
        files_under(&cache),
        ["acme_b/1.0.0/SKILL.md", "acme_b/1.0.0/references/a.md"]
    );
}

#[test]
fn the_cache_must_be_outside_every_skill_root() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("skills");
    std::fs::create_dir_all(&root).unwrap();
    let roots = Roots::explicit([&root]);
    let e = bundle::check_outside(&root.join(".cache/hub"), &roots).unwrap_err();
    assert!(
        e.to_string().contains("would be indexed as local skills"),
        "{e}"
    );
    assert!(
        bundle::check_outside(tmp.path(), &roots).is_err(),
        "a cache holding a root"
    );
    bundle::check_outside(&tmp.path().join("home/cache/hub"), &roots).unwrap();
}

// ---------------------------------------------------------------- replicas

#[test]
fn several_endpoints_fail_over_and_stick_to_the_one_that_answers() {
    let zip = zip_of(&[("pdf-forms/SKILL.md", SKILL_MD)]);
    let good = hub_with(HashMap::from([("u-pdf", zip)]));
    let broken = Fake::start(|_| Reply::Json(503, json!({"error": "down", "status": 20001})));
    let tmp = tempfile::tempdir().unwrap();
    // A dead replica first, then one answering 503, then the good one.
    let endpoints = format!(
        "{},{},{}",
        skillsearch_testkit::dead_base(),
        broken.base,
        good.base
    );
    let source = HubSource::new(&HubSettings::new(&endpoints, tmp.path())).unwrap();
    assert_eq!(source.client().endpoint(), endpoints);
    let found = source.search_explained("fill pdf forms", 5, far()).unwrap();
    assert!(!found.hits.is_empty(), "{found:?}");
    assert_eq!(broken.count("/openapi/v1/skills"), 1);
    // The next calls go straight to the replica that answered.
    let mut hit = found.hits[0].clone();
    source.hydrate(&mut hit, far()).unwrap();
    source.install(&hit, far()).unwrap();
    assert_eq!(broken.requests().len(), 1, "{:?}", broken.requests());
    assert_eq!(good.count("/download"), 1);
    // Every replica failing is the last one's error, within the one deadline.
    let all_bad = format!("{},{}", skillsearch_testkit::dead_base(), broken.base);
    let mut s = HubSettings::new(&all_bad, tmp.path());
    s.timeout = Duration::from_millis(500);
    let t = Instant::now();
    let e = HubSource::new(&s)
        .unwrap()
        .search_explained("fill pdf forms", 5, far())
        .unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert!(matches!(e, Error::HubStatus { status: 503, .. }), "{e:?}");
}
