//! The marketplace sources (ClawHub, skillhub.cn) against fake servers on 127.0.0.1 that speak
//! their documented shapes: search and the safety filters, the download route with its
//! parameters and its redirect to signed storage, the bundle cache, and each fault ending in a
//! typed error within its deadline with nothing half-written in the cache.

use serde_json::{Value, json};
use skillsearch_core::{Error, Market, MarketSettings, Marketplace, SkillSource};
use skillsearch_testkit::{Fake, Reply, Req, files_under, zip_of, zip_reply};
use std::path::Path;
use std::time::{Duration, Instant};

const SKILL_MD: &[u8] =
    b"---\nname: gif-grep\ndescription: Search GIFs\n---\n\n# GIF grep\nRun scripts/grep.sh QUERY.\n";

fn bundle() -> Vec<u8> {
    zip_of(&[
        ("gif-grep/SKILL.md", SKILL_MD),
        ("gif-grep/scripts/grep.sh", b"echo grep\n"),
    ])
}

fn far() -> Instant {
    Instant::now() + Duration::from_secs(30)
}

/// The query parameters of a request, decoded.
fn params(r: &Req) -> Vec<(String, String)> {
    r.query()
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            let decode = |s: &str| {
                let s = s.replace('+', " ");
                let bytes = s.as_bytes();
                let mut out = Vec::new();
                let mut i = 0;
                while i < bytes.len() {
                    if bytes[i] == b'%' && i + 2 < bytes.len() {
                        let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
                        out.push(u8::from_str_radix(hex, 16).unwrap());
                        i += 3;
                    } else {
                        out.push(bytes[i]);
                        i += 1;
                    }
                }
                String::from_utf8(out).unwrap()
            };
            (decode(k), decode(v))
        })
        .collect()
}

fn param(r: &Req, key: &str) -> Option<String> {
    params(r)
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
}

/// Signed object storage: any path under `/signed/` answers the bundle.
fn storage() -> Fake {
    Fake::start(|r| {
        if r.path.starts_with("/signed/") {
            zip_reply(bundle())
        } else {
            Reply::Body(404, "no such object".into())
        }
    })
}

fn clawhub_results() -> Value {
    json!({"results": [
        {"score": 0.9, "slug": "gif-grep", "displayName": "GIF grep", "summary": "Search GIFs by caption",
         "version": "1.2.3", "ownerHandle": "steipete", "updatedAt": 1730000000000u64},
        {"score": 0.8, "slug": "gif-evil", "displayName": "GIF evil", "summary": "Search GIFs",
         "native": {"skill": {"isSuspicious": true}}},
        {"score": 0.7, "slug": "gif-blocked", "displayName": "GIF blocked", "summary": "Search GIFs",
         "trust": {"visibility": "blocked"}},
        {"score": 0.6, "slug": "gif-review", "summary": "Search GIFs",
         "trust": {"installability": "pending-review"}},
        {"score": 0.5, "displayName": "no slug", "summary": "Search GIFs"},
        {"score": 0.4, "slug": "gif-make", "displayName": "GIF make", "summary": "Make GIFs",
         "trust": {"visibility": "public", "installability": "installable"}},
        {"score": 0.3, "slug": "gif-third", "summary": "A third GIF skill"}
    ]})
}

/// A ClawHub whose download redirects to `storage`.
fn clawhub(storage_base: String) -> Fake {
    Fake::start(move |r| match r.path.as_str() {
        "/api/v1/search" => Reply::Json(200, clawhub_results()),
        "/api/v1/download" => Reply::Raw(
            302,
            vec![(
                "Location",
                format!(
                    "{storage_base}/signed/{}?sig=SECRET",
                    param(r, "slug").unwrap_or_default()
                ),
            )],
            Vec::new(),
        ),
        _ => Reply::Body(404, "Not found".into()),
    })
}

fn source(market: Market, base: &str, cache: &Path) -> Marketplace {
    Marketplace::new(&MarketSettings::new(market, base, cache)).unwrap()
}

#[test]
fn clawhub_search_filters_and_installs_through_the_redirect() {
    let store = storage();
    let hub = clawhub(store.base.clone());
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache/clawhub");
    let m = source(Market::ClawHub, &hub.base, &cache);
    assert_eq!((m.name(), m.weight()), ("clawhub", 0.75));

    let found = m
        .search_explained("find a gif: cats & dogs", 5, far())
        .unwrap();
    let ids: Vec<&str> = found.hits.iter().map(|h| h.qualified_id.as_str()).collect();
    assert_eq!(
        ids,
        ["clawhub/gif-grep", "clawhub/gif-make"],
        "at most 2 per marketplace"
    );
    let reasons: Vec<String> = found
        .rejected
        .iter()
        .map(|r| format!("{}: {}", r.id, r.reason))
        .collect();
    assert_eq!(
        reasons,
        [
            "gif-evil: flagged suspicious",
            "gif-blocked: blocked",
            "gif-review: not installable (\"pending-review\")",
            ": missing `slug`",
            "gif-third: over the 2 hits a source may add",
        ]
    );
    let hit = &found.hits[0];
    assert_eq!(
        (
            hit.name.as_str(),
            hit.description.as_str(),
            hit.body.as_deref()
        ),
        ("GIF grep", "Search GIFs by caption", None)
    );
    assert_eq!(hit.meta["source"], "clawhub");
    assert_eq!(hit.meta["origin"], "clawhub/gif-grep");
    assert_eq!(hit.meta["ownerHandle"], "steipete");
    // The raw query, the documented parameters.
    let search = &hub.requests()[0];
    assert_eq!(
        param(search, "q").as_deref(),
        Some("find a gif: cats & dogs")
    );
    assert_eq!(param(search, "nonSuspiciousOnly").as_deref(), Some("true"));
    assert_eq!(param(search, "limit").as_deref(), Some("8"));

    // Hydrating installs: the body comes from the zip, frontmatter stripped.
    let mut hit = found.hits[0].clone();
    let inst = m.hydrate(&mut hit, far()).unwrap();
    assert_eq!(
        hit.body.as_deref(),
        Some("# GIF grep\nRun scripts/grep.sh QUERY.")
    );
    assert_eq!(inst.dir, cache.join("steipete_gif-grep/1.2.3"));
    assert!(inst.dir.join("scripts/grep.sh").is_file());
    assert!(!inst.from_cache);
    let dl: Vec<Req> = hub
        .requests()
        .into_iter()
        .filter(|r| r.path == "/api/v1/download")
        .collect();
    assert_eq!(dl.len(), 1);
    assert_eq!(
        params(&dl[0]),
        [
            ("slug".to_owned(), "gif-grep".to_owned()),
            ("source".to_owned(), "cli".to_owned()),
            ("ownerHandle".to_owned(), "steipete".to_owned()),
            ("version".to_owned(), "1.2.3".to_owned()),
        ]
    );
    assert_eq!(
        store.count("/signed/gif-grep"),
        1,
        "the redirect was followed"
    );
    // Installing again comes from the cache; `read` finds what this process installed.
    let again = m.install(&found.hits[0], far()).unwrap();
    assert!(again.from_cache);
    assert_eq!(m.read("gif-grep", far()).unwrap().dir, inst.dir);
    assert_eq!(store.requests().len(), 1);
    // A version `v0` is not sent; no owner, no ownerHandle.
    let plain = m.search_explained("gif", 5, far()).unwrap();
    let mut make = plain.hits[1].clone();
    m.hydrate(&mut make, far()).unwrap();
    let last = hub
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.path == "/api/v1/download")
        .unwrap();
    assert_eq!(
        params(&last),
        [
            ("slug".to_owned(), "gif-make".to_owned()),
            ("source".to_owned(), "cli".to_owned()),
        ]
    );
}

#[test]
fn skillhub_cn_needs_code_zero_and_drops_flagged_reports() {
    let store = storage();
    let base = store.base.clone();
    let hub = Fake::start(move |r| match r.path.as_str() {
        "/api/skills" if param(r, "keyword").as_deref() == Some("broken") => Reply::Json(
            200,
            json!({"code": 40001, "message": "keyword too short", "data": null}),
        ),
        "/api/skills" => Reply::Json(
            200,
            json!({"code": 0, "message": "ok", "data": {"total": 3, "skills": [
                {"slug": "pdf-cn", "name": "PDF 工具", "description": "PDF tools",
                 "description_zh": "处理 PDF 文件", "ownerName": "acme", "version": "2.0.0",
                 "namespace": {"canonicalName": "acme/pdf-cn", "handle": "acme"},
                 "securityReports": {"static": {"status": "clean"}}, "score": 9.5},
                {"slug": "pdf-bad", "name": "bad", "description": "PDF",
                 "securityReports": {"static": {"status": "clean"}, "llm": {"status": "malicious"}}},
                {"slug": "pdf-sus", "name": "sus", "description": "PDF",
                 "securityReports": [{"status": "suspicious"}]}
            ]}}),
        ),
        "/api/v1/download" => Reply::Raw(
            302,
            vec![("Location", format!("{base}/signed/x"))],
            Vec::new(),
        ),
        _ => Reply::Body(404, "Not found".into()),
    });
    let tmp = tempfile::tempdir().unwrap();
    let m = source(Market::SkillhubCn, &hub.base, &tmp.path().join("c"));
    let found = m.search_explained("pdf 文件", 2, far()).unwrap();
    let ids: Vec<&str> = found.hits.iter().map(|h| h.qualified_id.as_str()).collect();
    assert_eq!(ids, ["skillhub_cn/acme/pdf-cn"]);
    assert_eq!(found.hits[0].description, "处理 PDF 文件");
    assert_eq!(found.hits[0].meta["origin"], "skillhub_cn/pdf-cn");
    let reasons: Vec<&str> = found.rejected.iter().map(|r| r.reason.as_str()).collect();
    assert_eq!(
        reasons,
        [
            "security report says malicious",
            "security report says suspicious"
        ]
    );
    let search = &hub.requests()[0];
    for (k, v) in [
        ("keyword", "pdf 文件"),
        ("sortBy", "score"),
        ("order", "desc"),
        ("page", "1"),
        ("pageSize", "8"),
    ] {
        assert_eq!(param(search, k).as_deref(), Some(v), "{k}");
    }
    let mut hit = found.hits[0].clone();
    let inst = m.hydrate(&mut hit, far()).unwrap();
    assert!(hit.body.as_deref().unwrap().starts_with("# GIF grep"));
    assert_eq!(inst.dir, tmp.path().join("c/acme_pdf-cn/2.0.0"));
    let dl = hub
        .requests()
        .into_iter()
        .find(|r| r.path == "/api/v1/download")
        .unwrap();
    assert_eq!(param(&dl, "slug").as_deref(), Some("pdf-cn"));
    assert_eq!(param(&dl, "source").as_deref(), Some("dsh"));
    assert_eq!(param(&dl, "ownerHandle").as_deref(), Some("acme"));
    // A code other than 0 is an error naming it.
    let e = m.search_explained("broken", 2, far()).unwrap_err();
    assert!(
        matches!(
            &e,
            Error::Market {
                market: "skillhub_cn",
                status: None,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        e.to_string().contains("code 40001 `keyword too short`"),
        "{e}"
    );
}

#[test]
fn each_fault_is_a_typed_error_in_time_and_leaves_the_cache_clean() {
    let hostile = zip_of(&[("x/SKILL.md", SKILL_MD), ("../escape.md", b"x")]);
    let hub = Fake::start(move |r| {
        let slug = param(r, "slug").unwrap_or_default();
        match (r.path.as_str(), slug.as_str()) {
            ("/api/v1/search", _) => match param(r, "q").as_deref() {
                Some("hang") => Reply::Hang(Duration::from_secs(5)),
                Some("500") => Reply::Body(500, "upstream down".into()),
                Some("html") => Reply::Body(200, "<html>".into()),
                Some("shape") => Reply::Json(200, json!({"items": []})),
                _ => Reply::Json(200, json!({"results": []})),
            },
            ("/api/v1/download", "loop") => Reply::Raw(
                302,
                vec![("Location", "/api/v1/download?slug=loop".into())],
                vec![],
            ),
            ("/api/v1/download", "hostile") => zip_reply(hostile.clone()),
            ("/api/v1/download", "garbage") => zip_reply(b"not a zip".to_vec()),
            ("/api/v1/download", "slow") => Reply::Hang(Duration::from_secs(5)),
            _ => Reply::Body(404, "Not found".into()),
        }
    });
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let mut s = MarketSettings::new(Market::ClawHub, &hub.base, &cache);
    s.timeout = Duration::from_millis(300);
    s.download_timeout = Duration::from_millis(300);
    let m = Marketplace::new(&s).unwrap();

    let t = Instant::now();
    let e = m.search_explained("hang", 2, far()).unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert!(
        e.to_string().starts_with("clawhub search: timeout after"),
        "{e}"
    );
    let e = m.search_explained("500", 2, far()).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Market {
                status: Some(500),
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(e.to_string(), "clawhub search: HTTP 500 (upstream down)");
    for q in ["html", "shape"] {
        let e = m.search_explained(q, 2, far()).unwrap_err();
        assert!(e.to_string().contains("bad answer"), "{q}: {e}");
    }
    assert!(m.search_explained("ok", 2, far()).unwrap().hits.is_empty());
    assert!(m.search_explained("  ", 2, far()).unwrap().hits.is_empty());

    let e = m.read("loop", far()).unwrap_err();
    assert!(e.to_string().starts_with("clawhub download `loop`:"), "{e}");
    assert!(matches!(
        m.read("hostile", far()),
        Err(Error::BundleUnsafe { .. })
    ));
    assert!(matches!(
        m.read("garbage", far()),
        Err(Error::BundleInvalid { .. })
    ));
    let e = m.read("missing", far()).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Market {
                status: Some(404),
                ..
            }
        ),
        "{e:?}"
    );
    let t = Instant::now();
    assert!(m.read("slow", far()).is_err());
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    // The turn's deadline wins over the step's own.
    let t = Instant::now();
    assert!(
        m.read("slow", Instant::now() + Duration::from_millis(50))
            .is_err()
    );
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "{:?}",
        t.elapsed()
    );
    assert!(files_under(&cache).is_empty(), "{:?}", files_under(&cache));
}
