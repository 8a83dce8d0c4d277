//! Marketplaces as skill sources (reference §1.3e): ClawHub and skillhub.cn, weight 0.75 each.
//!
//! Protocol, as the reference pins it:
//! - ClawHub search: `GET {base}/api/v1/search?q=&limit=&nonSuspiciousOnly=true` → `results[]`;
//!   an item is rejected without a `slug`, when `native.skill.isSuspicious` is set, when
//!   `trust.visibility` is `blocked`, or when `trust.installability` is neither null nor
//!   `installable`. Fields: id `id|slug`, `displayName`, `summary`, `score`, `ownerHandle`,
//!   version `version|latestVersionId|v0`.
//! - skillhub.cn search: `GET {base}/api/skills?keyword=&sortBy=score&order=desc&page=1&pageSize=`
//!   → `{code, data: {skills: []}}`, `code` must be 0; an item is rejected when any
//!   `securityReports.*.status` is `malicious` or `suspicious`. Fields: id
//!   `namespace.canonicalName|slug`, description `description_zh|description`, owner
//!   `ownerName|namespace.handle`.
//! - download (both): `GET {base}/api/v1/download?slug=&source=(cli|dsh)[&ownerHandle][&version
//!   unless v0]`, following redirects (a 302 to signed storage), into the bundle cache with the
//!   safe extraction every bundle gets ([`bundle::install`]).
//!
//! A marketplace answer carries no body: the body lives only in the zip, so hydrating a hit
//! means installing it (before the gate); a hit that still has no body is dropped by the turn.
//! The raw query is sent as written; platform scores are never compared across sources; at
//! most `per_source_max` hits per marketplace. Marketplace bodies are never trusted with
//! PathGuard placeholders. Nothing but the configured base URL (and the storage it redirects a
//! download to) is contacted.

use crate::config::{Secret, Settings};
use crate::corpus::bundle::{self, Installed, Limits};
use crate::corpus::{self as corpus_mod};
use crate::error::{Error, Result};
use crate::remote::http::{Answer, Endpoint, Failure, Request};
use crate::remote::source::{Found, Rejected, RemoteHit, SkillSource};
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Largest JSON answer read.
const MAX_JSON_BYTES: u64 = 16 << 20;
/// Most redirects a download follows.
const MAX_REDIRECTS: u32 = 5;
/// Most remembered installs (for `skill_read` of a hit found earlier in this process).
const MAX_REMEMBERED: usize = 256;

/// Which marketplace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Market {
    ClawHub,
    SkillhubCn,
}

impl Market {
    /// The source label and `qualified_id` prefix: `clawhub`, `skillhub_cn`.
    pub fn label(self) -> &'static str {
        match self {
            Market::ClawHub => "clawhub",
            Market::SkillhubCn => "skillhub_cn",
        }
    }

    /// The `source` parameter of a download.
    fn download_source(self) -> &'static str {
        match self {
            Market::ClawHub => "cli",
            Market::SkillhubCn => "dsh",
        }
    }

    /// The marketplace a `qualified_id` prefix names.
    pub fn from_label(label: &str) -> Option<Market> {
        match label {
            "clawhub" => Some(Market::ClawHub),
            "skillhub_cn" => Some(Market::SkillhubCn),
            _ => None,
        }
    }
}

/// What a marketplace source needs, resolved from [`Settings`].
#[derive(Debug, Clone, PartialEq)]
pub struct MarketSettings {
    pub market: Market,
    /// Base URL without a trailing slash.
    pub endpoint: String,
    /// Search deadline.
    pub timeout: Duration,
    /// Download deadline (redirects included).
    pub download_timeout: Duration,
    pub weight: f32,
    pub per_source_max: usize,
    /// Where bundles are extracted (`<home>/cache/<label>`); must be outside every skill root.
    pub cache_dir: PathBuf,
}

impl MarketSettings {
    /// The marketplaces a configuration names (a non-empty endpoint), ClawHub first.
    pub fn from_settings(s: &Settings, home: &Path) -> Vec<MarketSettings> {
        [
            (Market::ClawHub, &s.clawhub_endpoint, s.weight_clawhub),
            (
                Market::SkillhubCn,
                &s.skillhub_cn_endpoint,
                s.weight_skillhub_cn,
            ),
        ]
        .into_iter()
        .filter(|(_, endpoint, _)| !endpoint.is_empty())
        .map(|(market, endpoint, weight)| MarketSettings {
            market,
            endpoint: endpoint.clone(),
            timeout: Duration::from_secs_f64(s.marketplace_timeout_s),
            download_timeout: Duration::from_secs_f64(s.marketplace_download_timeout_s),
            weight,
            per_source_max: s.per_source_max,
            cache_dir: home.join("cache").join(market.label()),
        })
        .collect()
    }

    /// Settings with the reference's defaults (tests, embedding).
    pub fn new(
        market: Market,
        endpoint: impl Into<String>,
        cache_dir: impl Into<PathBuf>,
    ) -> MarketSettings {
        MarketSettings {
            market,
            endpoint: endpoint.into().trim_end_matches('/').to_owned(),
            timeout: Duration::from_secs(5),
            download_timeout: Duration::from_secs(30),
            weight: 0.75,
            per_source_max: 2,
            cache_dir: cache_dir.into(),
        }
    }
}

/// One catalogue item, read the marketplace's way.
#[derive(Debug, Clone, PartialEq)]
struct Listing {
    /// The id in `qualified_id`.
    id: String,
    /// The `slug` of a download.
    slug: String,
    name: String,
    description: String,
    owner: Option<String>,
    version: String,
    score: f64,
}

fn text(v: &Value, path: &[&str]) -> Option<String> {
    let mut cur = v;
    for key in path {
        cur = cur.get(key)?;
    }
    match cur {
        Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_owned()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn first(v: &Value, paths: &[&[&str]]) -> Option<String> {
    paths.iter().find_map(|p| text(v, p))
}

/// Whether a JSON value counts as set (JavaScript truthiness, as the reference's check).
fn truthy(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_f64().is_some_and(|x| x != 0.0),
        Some(Value::String(s)) => !s.is_empty(),
        Some(_) => true,
    }
}

impl Market {
    /// An item as a listing, or why it is rejected.
    fn read(self, item: &Value) -> std::result::Result<Listing, String> {
        match self {
            Market::ClawHub => {
                let slug = text(item, &["slug"]).ok_or("missing `slug`")?;
                if truthy(item.pointer("/native/skill/isSuspicious")) {
                    return Err("flagged suspicious".into());
                }
                if item.pointer("/trust/visibility").and_then(Value::as_str) == Some("blocked") {
                    return Err("blocked".into());
                }
                match item.pointer("/trust/installability") {
                    None | Some(Value::Null) => {}
                    Some(Value::String(s)) if s == "installable" => {}
                    Some(other) => return Err(format!("not installable ({other})")),
                }
                Ok(Listing {
                    id: text(item, &["id"]).unwrap_or_else(|| slug.clone()),
                    name: text(item, &["displayName"]).unwrap_or_else(|| slug.clone()),
                    description: text(item, &["summary"]).unwrap_or_default(),
                    owner: text(item, &["ownerHandle"]),
                    version: first(item, &[&["version"], &["latestVersionId"]])
                        .unwrap_or_else(|| "v0".into()),
                    score: item.get("score").and_then(Value::as_f64).unwrap_or(0.0),
                    slug,
                })
            }
            Market::SkillhubCn => {
                let id = first(item, &[&["namespace", "canonicalName"], &["slug"]])
                    .ok_or("missing `slug`")?;
                let reports: Vec<&Value> = match item.get("securityReports") {
                    Some(Value::Object(m)) => m.values().collect(),
                    Some(Value::Array(a)) => a.iter().collect(),
                    _ => Vec::new(),
                };
                for r in reports {
                    if let Some(status @ ("malicious" | "suspicious")) =
                        r.get("status").and_then(Value::as_str)
                    {
                        return Err(format!("security report says {status}"));
                    }
                }
                let slug = text(item, &["slug"]).unwrap_or_else(|| id.clone());
                Ok(Listing {
                    name: first(item, &[&["name"], &["displayName"]])
                        .unwrap_or_else(|| slug.clone()),
                    description: first(item, &[&["description_zh"], &["description"]])
                        .unwrap_or_default(),
                    owner: first(item, &[&["ownerName"], &["namespace", "handle"]]),
                    version: text(item, &["version"]).unwrap_or_else(|| "v0".into()),
                    score: item.get("score").and_then(Value::as_f64).unwrap_or(0.0),
                    id,
                    slug,
                })
            }
        }
    }
}

/// A marketplace as a skill source. Cheap to share across threads; connections are pooled.
pub struct Marketplace {
    market: Market,
    api: Endpoint,
    download: Endpoint,
    timeout: Duration,
    download_timeout: Duration,
    weight: f32,
    per_source_max: usize,
    cache_dir: PathBuf,
    /// Installs of this process by hit id, so a later `skill_read` finds them again.
    installed: Mutex<HashMap<String, Installed>>,
}

impl fmt::Debug for Marketplace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Marketplace")
            .field("market", &self.market)
            .field("endpoint", &self.api.base())
            .field("cache_dir", &self.cache_dir)
            .finish()
    }
}

impl Marketplace {
    pub fn new(s: &MarketSettings) -> Result<Marketplace> {
        let bad = |why: String| Error::Invalid(format!("{} endpoint {why}", s.market.label()));
        Ok(Marketplace {
            market: s.market,
            api: Endpoint::new(&s.endpoint, Secret::default()).map_err(bad)?,
            download: Endpoint::following_redirects(&s.endpoint, Secret::default(), MAX_REDIRECTS)
                .map_err(bad)?,
            timeout: s.timeout,
            download_timeout: s.download_timeout,
            weight: s.weight,
            per_source_max: s.per_source_max,
            cache_dir: s.cache_dir.clone(),
            installed: Mutex::new(HashMap::new()),
        })
    }

    pub fn market(&self) -> Market {
        self.market
    }

    pub fn label(&self) -> &'static str {
        self.market.label()
    }

    pub fn endpoint(&self) -> &str {
        self.api.base()
    }

    pub fn weight(&self) -> f32 {
        self.weight
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    pub fn download_timeout(&self) -> Duration {
        self.download_timeout
    }

    pub fn cache_dir(&self) -> &Path {
        &self.cache_dir
    }

    fn error(&self, op: &str, status: Option<u16>, message: String) -> Error {
        Error::Market {
            market: self.label(),
            op: op.to_owned(),
            status,
            message,
        }
    }

    /// One GET within the earlier of `deadline` and now + `step`. An unreachable, hanging or
    /// failing (5xx) marketplace counts against its breaker.
    #[allow(clippy::too_many_arguments)]
    fn call(
        &self,
        endpoint: &Endpoint,
        op: &str,
        path: &str,
        query: &[(&str, &str)],
        step: Duration,
        deadline: Instant,
        max_bytes: u64,
    ) -> Result<Answer> {
        let start = Instant::now();
        let budget = deadline.saturating_duration_since(start).min(step);
        let timeout = || self.error(op, None, format!("timeout after {} ms", budget.as_millis()));
        if budget.is_zero() {
            return Err(timeout());
        }
        let sent = endpoint.send(
            path,
            Request::Get {
                query,
                accept: "application/json, application/zip, */*",
            },
            &[],
            budget,
            max_bytes,
        );
        let elapsed_ms = start.elapsed().as_millis() as u64;
        let e = match sent {
            Err(Failure::Refused(why)) => return Err(self.error(op, None, why)),
            Ok(a) => {
                tracing::debug!(target: "marketplace", market = self.label(), op, status = a.status, bytes = a.body.len(), elapsed_ms, "marketplace answered");
                if a.status >= 500 {
                    endpoint.failed(&format!("HTTP {}", a.status));
                } else {
                    endpoint.succeeded();
                }
                if !(200..300).contains(&a.status) {
                    let said: String = String::from_utf8_lossy(&a.body)
                        .chars()
                        .filter(|c| !c.is_control())
                        .take(200)
                        .collect();
                    let said = if said.trim().is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", said.trim())
                    };
                    return Err(self.error(op, Some(a.status), format!("HTTP {}{said}", a.status)));
                }
                return Ok(a);
            }
            Err(Failure::Timeout) => timeout(),
            Err(Failure::Transport(message)) => self.error(op, None, message),
        };
        tracing::debug!(target: "marketplace", market = self.label(), op, elapsed_ms, error = %e, "marketplace call failed");
        endpoint.failed(&e.to_string());
        Err(e)
    }

    /// The catalogue items a search answers, at most `limit`.
    fn items(&self, query: &str, limit: usize, deadline: Instant) -> Result<Vec<Value>> {
        let limit = limit.to_string();
        let (path, params): (&str, Vec<(&str, &str)>) = match self.market {
            Market::ClawHub => (
                "/api/v1/search",
                vec![
                    ("q", query),
                    ("limit", &limit),
                    ("nonSuspiciousOnly", "true"),
                ],
            ),
            Market::SkillhubCn => (
                "/api/skills",
                vec![
                    ("keyword", query),
                    ("sortBy", "score"),
                    ("order", "desc"),
                    ("page", "1"),
                    ("pageSize", &limit),
                ],
            ),
        };
        let a = self.call(
            &self.api,
            "search",
            path,
            &params,
            self.timeout,
            deadline,
            MAX_JSON_BYTES,
        )?;
        let bad = |m: &str| self.error("search", None, format!("bad answer: {m}"));
        let v: Value =
            serde_json::from_slice(&a.body).map_err(|e| bad(&format!("not JSON ({e})")))?;
        let list = match self.market {
            Market::ClawHub => v.get("results"),
            Market::SkillhubCn => {
                let code = v.get("code");
                if code.and_then(Value::as_f64) != Some(0.0) {
                    let message = text(&v, &["message"]).unwrap_or_default();
                    return Err(bad(&format!(
                        "code {} `{}` (success is code 0)",
                        code.map_or_else(|| "missing".to_owned(), Value::to_string),
                        message.chars().take(200).collect::<String>()
                    )));
                }
                v.pointer("/data/skills")
            }
        };
        match list {
            Some(Value::Array(items)) => Ok(items.clone()),
            _ => Err(bad(match self.market {
                Market::ClawHub => "`results` is not a list",
                Market::SkillhubCn => "`data.skills` is not a list",
            })),
        }
    }

    /// Search, then the marketplace's safety filters; at most `min(k, per_source_max)` kept.
    pub fn search_explained(&self, query: &str, k: usize, deadline: Instant) -> Result<Found> {
        let mut out = Found::default();
        let cap = k.min(self.per_source_max);
        if cap == 0 || query.trim().is_empty() {
            return Ok(out);
        }
        let label = self.label();
        for item in self.items(query, (cap * 4).max(8), deadline)? {
            let listing = match self.market.read(&item) {
                Ok(l) => l,
                Err(reason) => {
                    out.rejected.push(Rejected {
                        id: first(&item, &[&["slug"], &["id"]]).unwrap_or_default(),
                        reason,
                    });
                    continue;
                }
            };
            if out.hits.len() >= cap {
                out.rejected.push(Rejected {
                    id: listing.id,
                    reason: format!("over the {cap} hits a source may add"),
                });
                continue;
            }
            // The item's own fields, then `source` and `origin`, which an item cannot override.
            let mut meta: Map<String, Value> = match item {
                Value::Object(m) => m,
                _ => Map::new(),
            };
            meta.insert("source".into(), json!(label));
            meta.insert("origin".into(), json!(format!("{label}/{}", listing.slug)));
            out.hits.push(RemoteHit {
                qualified_id: format!("{label}/{}", listing.id),
                name: listing.name,
                description: listing.description,
                body: None,
                score: listing.score as f32,
                meta: Value::Object(meta),
            });
        }
        tracing::debug!(target: "marketplace", market = label, hits = out.hits.len(), rejected = out.rejected.len(), "marketplace search");
        Ok(out)
    }

    /// Download a listing's zip (redirects followed), at most the archive limit.
    fn fetch(&self, l: &Listing, deadline: Instant) -> Result<Vec<u8>> {
        let mut query: Vec<(&str, &str)> =
            vec![("slug", &l.slug), ("source", self.market.download_source())];
        if let Some(owner) = &l.owner {
            query.push(("ownerHandle", owner));
        }
        if l.version != "v0" {
            query.push(("version", &l.version));
        }
        let op = format!("download `{}`", l.slug);
        let a = self.call(
            &self.download,
            &op,
            "/api/v1/download",
            &query,
            self.download_timeout,
            deadline,
            crate::remote::hub::MAX_ARCHIVE_BYTES,
        )?;
        Ok(a.body)
    }

    /// Installs a listing: from the cache (`<cache>/[<owner>_]<slug>/<version>`), or downloaded
    /// and safely extracted.
    fn install_listing(&self, l: &Listing, deadline: Instant) -> Result<Installed> {
        let key = match &l.owner {
            Some(owner) => format!("{owner}_{}", l.slug),
            None => l.slug.clone(),
        };
        let installed = bundle::install(
            &self.cache_dir,
            &key,
            &l.version,
            &Limits::default(),
            || self.fetch(l, deadline),
        )?;
        let mut memo = self.installed.lock().unwrap_or_else(|p| p.into_inner());
        if memo.len() >= MAX_REMEMBERED {
            memo.clear();
        }
        memo.insert(l.id.clone(), installed.clone());
        Ok(installed)
    }

    fn listing_of(&self, hit: &RemoteHit) -> Result<Listing> {
        self.market.read(&hit.meta).map_err(|why| {
            Error::Invalid(format!(
                "`{}` is not a {} hit: {why}",
                hit.qualified_id,
                self.label()
            ))
        })
    }

    /// Installs a hit's bundle (hydrating is installing: the body lives only in the zip).
    pub fn install(&self, hit: &RemoteHit, deadline: Instant) -> Result<Installed> {
        let listing = self.listing_of(hit)?;
        self.install_listing(&listing, deadline)
    }

    /// Installs a hit and gives it its body: the `SKILL.md` without frontmatter (`None` when
    /// that is empty).
    pub fn hydrate(&self, hit: &mut RemoteHit, deadline: Instant) -> Result<Installed> {
        let installed = self.install(hit, deadline)?;
        let loaded = corpus_mod::load(&installed.skill_md, corpus_mod::DEFAULT_MAX_FILE_BYTES);
        let body = loaded.body.trim();
        hit.body = (!body.is_empty()).then(|| body.to_owned());
        Ok(installed)
    }

    /// The installed skill `id` (the part after `<label>/`): one this process installed, else
    /// the latest version downloaded by slug.
    pub fn read(&self, id: &str, deadline: Instant) -> Result<Installed> {
        let memo = self
            .installed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .cloned();
        if let Some(i) = memo.filter(|i| i.skill_md.is_file()) {
            return Ok(i);
        }
        let listing = Listing {
            id: id.to_owned(),
            slug: id.to_owned(),
            name: id.to_owned(),
            description: String::new(),
            owner: None,
            version: "v0".into(),
            score: 0.0,
        };
        self.install_listing(&listing, deadline)
    }
}

impl SkillSource for Marketplace {
    fn name(&self) -> &str {
        self.label()
    }

    fn weight(&self) -> f32 {
        self.weight
    }

    fn search(&self, query: &str, k: usize, deadline: Instant) -> Result<Vec<RemoteHit>> {
        self.search_explained(query, k, deadline).map(|f| f.hits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clawhub_items_are_read_and_filtered_as_the_reference_does() {
        let m = Market::ClawHub;
        let l = m
            .read(
                &json!({"slug": "gifgrep", "displayName": "GifGrep", "summary": "grep gifs",
                           "score": 0.5, "ownerHandle": "steipete", "version": "1.2.3"}),
            )
            .unwrap();
        assert_eq!(
            (
                l.id.as_str(),
                l.slug.as_str(),
                l.name.as_str(),
                l.version.as_str()
            ),
            ("gifgrep", "gifgrep", "GifGrep", "1.2.3")
        );
        assert_eq!(l.owner.as_deref(), Some("steipete"));
        let l = m
            .read(&json!({"id": "k1", "slug": "s", "latestVersionId": "v9"}))
            .unwrap();
        assert_eq!(
            (l.id.as_str(), l.name.as_str(), l.version.as_str()),
            ("k1", "s", "v9")
        );
        assert_eq!(m.read(&json!({"slug": "s"})).unwrap().version, "v0");
        for (item, why) in [
            (json!({"displayName": "x"}), "missing `slug`"),
            (
                json!({"slug": "s", "native": {"skill": {"isSuspicious": true}}}),
                "flagged suspicious",
            ),
            (
                json!({"slug": "s", "trust": {"visibility": "blocked"}}),
                "blocked",
            ),
            (
                json!({"slug": "s", "trust": {"installability": "needs-review"}}),
                "not installable (\"needs-review\")",
            ),
        ] {
            assert_eq!(m.read(&item).unwrap_err(), why, "{item}");
        }
        for ok in [
            json!({"slug": "s", "native": {"skill": {"isSuspicious": false}}}),
            json!({"slug": "s", "trust": {"visibility": "public", "installability": "installable"}}),
            json!({"slug": "s", "trust": {"installability": null}}),
        ] {
            assert!(m.read(&ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn skillhub_cn_items_are_read_and_filtered_as_the_reference_does() {
        let m = Market::SkillhubCn;
        let l = m
            .read(
                &json!({"slug": "pdf", "name": "PDF", "description": "en", "description_zh": "中文",
                           "namespace": {"canonicalName": "acme/pdf", "handle": "acme"},
                           "securityReports": {"av": {"status": "clean"}}}),
            )
            .unwrap();
        assert_eq!(
            (
                l.id.as_str(),
                l.slug.as_str(),
                l.description.as_str(),
                l.owner.as_deref()
            ),
            ("acme/pdf", "pdf", "中文", Some("acme"))
        );
        let l = m
            .read(&json!({"slug": "pdf", "description": "en", "ownerName": "bob"}))
            .unwrap();
        assert_eq!(
            (
                l.id.as_str(),
                l.name.as_str(),
                l.description.as_str(),
                l.owner.as_deref()
            ),
            ("pdf", "pdf", "en", Some("bob"))
        );
        assert_eq!(m.read(&json!({"name": "x"})).unwrap_err(), "missing `slug`");
        for status in ["malicious", "suspicious"] {
            let item = json!({"slug": "s", "securityReports": {"a": {"status": "clean"}, "b": {"status": status}}});
            assert_eq!(
                m.read(&item).unwrap_err(),
                format!("security report says {status}")
            );
        }
    }

    #[test]
    fn settings_follow_the_config() {
        let s = crate::config::resolve(&crate::config::Layers::default()).unwrap();
        assert!(MarketSettings::from_settings(&s, Path::new("/h")).is_empty());
        let s = crate::config::resolve(&crate::config::Layers {
            env: vec![
                (
                    "SKILLSEARCH_SKILLHUB_CN_ENDPOINT".into(),
                    "http://127.0.0.1:9/".into(),
                ),
                (
                    "SKILLSEARCH_CLAWHUB_ENDPOINT".into(),
                    "http://127.0.0.1:8".into(),
                ),
                ("SKILLSEARCH_MARKETPLACE_TIMEOUT_S".into(), "0.5".into()),
                ("SKILLSEARCH_WEIGHT_SKILLHUB_CN".into(), "0.5".into()),
            ],
            ..Default::default()
        })
        .unwrap();
        let m = MarketSettings::from_settings(&s, Path::new("/h"));
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].market, m[0].weight), (Market::ClawHub, 0.75));
        assert_eq!((m[1].market, m[1].weight), (Market::SkillhubCn, 0.5));
        assert_eq!(m[1].endpoint, "http://127.0.0.1:9");
        assert_eq!(m[0].timeout, Duration::from_millis(500));
        assert_eq!(m[0].download_timeout, Duration::from_secs(30));
        assert_eq!(m[1].cache_dir, PathBuf::from("/h/cache/skillhub_cn"));
        assert!(
            Marketplace::new(&MarketSettings::new(Market::ClawHub, "file:///x", "/c")).is_err()
        );
    }
}
