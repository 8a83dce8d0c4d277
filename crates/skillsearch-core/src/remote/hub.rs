//! The remote hub source (reference §1.3d): a synchronous client for a SkillHub-compatible
//! service and the [`SkillSource`] built on it.
//!
//! Protocol, as the reference pins it:
//! - every request carries `X-Request-ID` (32 random hex digits) and, when a key is set,
//!   `Authorization: Bearer <key>`;
//! - JSON answers are wrapped in `{error, requestId, status, result}`; success needs **both**
//!   `status == 0` and `error` ∈ {`ok`, `success`}, anything else is [`Error::HubEnvelope`];
//!   a non-2xx status is [`Error::HubStatus`] (redirects are not followed);
//! - discover: `GET {base}/openapi/v1/skills?q=&limit=` → `result.items[]` (metadata, no body);
//! - read: `GET {base}/openapi/v1/skills/{id}` → `result` with `skill_md`;
//! - download: `GET {base}/openapi/v1/skills/{id}/download?source=cli` → the raw zip;
//! - vectors (a `skillsearch hub serve` extension): `GET {base}/openapi/v1/vectors?model=&dim=
//!   &after=&limit=` → the hub's embedder id, dimension and a page of its skills' vectors by text
//!   key ([`HubClient::vectors`]; [`PeerVectors`] takes them instead of embedding).
//!
//! Every call has a hard deadline: the earlier of the caller's deadline and the step's own
//! timeout (`hub_timeout_s` for search and read, `hub_download_timeout_s` for a download). It
//! bounds DNS, connect, sending and reading the whole body. Nothing else is contacted: the
//! client talks only to the configured endpoint.

use crate::config::{Secret, Settings};
use crate::corpus::bundle::{self, Installed, Limits};
use crate::corpus::frontmatter;
use crate::error::{Error, Result};
use crate::index::relevance::Guard;
use crate::remote::http::{Answer, Endpoint, Failure, Request};
use crate::remote::source::{Found, Rejected, RemoteHit, SkillSource};
use serde_json::{Value, json};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Source label and `qualified_id` prefix of hub hits.
pub const SOURCE: &str = "hub";
/// Hub items whose `quality_score` is below this are dropped (fixed in the reference too).
pub const MIN_QUALITY: f64 = 0.45;
/// The `source` query parameter of downloads (the service accepts raven, everme, cli, web).
pub const DOWNLOAD_SOURCE: &str = "cli";
/// Largest JSON answer read.
const MAX_JSON_BYTES: u64 = 16 << 20;
/// Largest archive downloaded (its inflated size is bounded separately while extracting).
pub const MAX_ARCHIVE_BYTES: u64 = 64 << 20;
/// Most items one discover call asks for (the service accepts 1–50).
const MAX_LIMIT: usize = 50;

/// What the hub client and source need, resolved from [`Settings`].
#[derive(Debug, Clone, PartialEq)]
pub struct HubSettings {
    /// Base URL without a trailing slash; empty: no hub.
    pub endpoint: String,
    pub api_key: Secret,
    /// Search and read deadline.
    pub timeout: Duration,
    /// Download deadline.
    pub download_timeout: Duration,
    pub min_safety: f64,
    pub min_quality: f64,
    pub weight: f32,
    pub per_source_max: usize,
    /// Where bundles are extracted; must be outside every skill root
    /// ([`bundle::check_outside`]).
    pub cache_dir: PathBuf,
}

impl HubSettings {
    /// The hub settings of a configuration, or `None` when `hub_endpoint` is empty. Bundles go
    /// to `<home>/cache/hub`.
    pub fn from_settings(s: &Settings, home: &Path) -> Option<HubSettings> {
        if s.hub_endpoint.is_empty() {
            return None;
        }
        Some(HubSettings {
            endpoint: s.hub_endpoint.clone(),
            api_key: s.hub_api_key.clone(),
            timeout: Duration::from_secs_f64(s.hub_timeout_s),
            download_timeout: Duration::from_secs_f64(s.hub_download_timeout_s),
            min_safety: s.hub_min_safety,
            min_quality: MIN_QUALITY,
            weight: s.weight_hub,
            per_source_max: s.per_source_max,
            cache_dir: Self::default_cache_dir(home),
        })
    }

    pub fn default_cache_dir(home: &Path) -> PathBuf {
        home.join("cache").join("hub")
    }

    /// Settings with the reference's defaults for `endpoint` (tests, embedding).
    pub fn new(endpoint: impl Into<String>, cache_dir: impl Into<PathBuf>) -> HubSettings {
        HubSettings {
            endpoint: endpoint.into().trim_end_matches('/').to_owned(),
            api_key: Secret::default(),
            timeout: Duration::from_secs(2),
            download_timeout: Duration::from_secs(30),
            min_safety: 0.7,
            min_quality: MIN_QUALITY,
            weight: 0.85,
            per_source_max: 2,
            cache_dir: cache_dir.into(),
        }
    }
}

/// One page of a hub's skill vectors ([`HubClient::vectors`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HubVectorPage {
    /// Distinct skill texts the hub serves.
    pub total: usize,
    /// Whether the hub has a vector for every one of them.
    pub complete: bool,
    /// Text key and vector (its length is checked by whoever uses it).
    pub items: Vec<(u64, Vec<f32>)>,
    /// The key to ask after for the next page; `None` on the last.
    pub next: Option<u64>,
}

/// Vectors per page a [`PeerVectors`] asks for.
const VECTOR_PAGE: usize = 1_000;

/// How often a [`PeerVectors`] reads the peer's whole catalogue again: a skill added in
/// between is embedded here rather than paying a full read for it.
const PEER_REREAD: Duration = Duration::from_secs(600);

/// A peer hub's skill vectors as a
/// [`SharedVectors`](crate::retrieve::semantic::SharedVectors) source: read a page at a time,
/// those of the keys asked kept; nothing is written back. For a hub server that serves the
/// same skills as another (`hub serve --vectors-from URL`) and so need not embed them itself.
/// The route has no lookup by key, so the peer is read whole at most once per 10 minutes;
/// asked again sooner (a skill added since), it answers nothing and the skill is embedded here.
#[derive(Debug)]
pub struct PeerVectors {
    client: HubClient,
    /// When the peer was last read whole.
    read_at: std::sync::Mutex<Option<Instant>>,
}

impl PeerVectors {
    pub fn new(settings: &HubSettings) -> Result<PeerVectors> {
        Ok(PeerVectors {
            client: HubClient::new(settings)?,
            read_at: std::sync::Mutex::new(None),
        })
    }
}

impl crate::retrieve::semantic::SharedVectors for PeerVectors {
    fn describe(&self) -> String {
        format!("the hub {}", self.client.endpoint())
    }

    fn fetch(&self, model: &str, dim: usize, keys: &[u64]) -> Result<Vec<(u64, Vec<f32>)>> {
        {
            let mut at = self.read_at.lock().unwrap_or_else(|p| p.into_inner());
            if at.is_some_and(|t| t.elapsed() < PEER_REREAD) {
                return Ok(Vec::new());
            }
            *at = Some(Instant::now());
        }
        let wanted: std::collections::HashSet<u64> = keys.iter().copied().collect();
        let mut out = Vec::new();
        let mut after = None;
        let started = Instant::now();
        loop {
            let deadline = Instant::now() + self.client.download_timeout;
            let page = self
                .client
                .vectors(model, dim, after, VECTOR_PAGE, deadline)?;
            out.extend(page.items.into_iter().filter(|(k, _)| wanted.contains(k)));
            match page.next {
                Some(n) if Some(n) != after => after = Some(n),
                _ => break,
            }
        }
        tracing::debug!(target: "hub", hub = %self.client.endpoint(), kept = out.len(), ms = started.elapsed().as_millis() as u64, "peer vectors read");
        Ok(out)
    }

    fn save(&self, _model: &str, _dim: usize, _items: &[(u64, Vec<f32>)]) -> Result<()> {
        Ok(())
    }
}

/// One skill record read from the hub.
#[derive(Debug, Clone, PartialEq)]
pub struct HubSkill {
    /// The id it was read by (the record's `id` when it has one).
    pub id: String,
    /// Cache key: `slug`, else `skill_id`, else `id`.
    pub slug: String,
    /// `version`, else `v0`.
    pub version: String,
    pub name: String,
    pub description: String,
    /// The whole `SKILL.md`, frontmatter included.
    pub skill_md: Option<String>,
    pub score_safety: Option<f64>,
    /// The record as the hub sent it.
    pub record: Value,
}

fn text_field(v: &Value, key: &str) -> Option<String> {
    match v.get(key)? {
        Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_owned()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn number_field(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64)
}

impl HubSkill {
    /// Reads a record; `asked` is the id it was requested by.
    pub fn from_record(record: Value, asked: &str) -> HubSkill {
        let id = text_field(&record, "id").unwrap_or_else(|| asked.to_owned());
        HubSkill {
            slug: text_field(&record, "slug")
                .or_else(|| text_field(&record, "skill_id"))
                .unwrap_or_else(|| id.clone()),
            version: text_field(&record, "version").unwrap_or_else(|| "v0".to_owned()),
            name: text_field(&record, "name").unwrap_or_default(),
            description: text_field(&record, "description").unwrap_or_default(),
            skill_md: record
                .get("skill_md")
                .and_then(Value::as_str)
                .map(str::to_owned),
            score_safety: number_field(&record, "score_safety"),
            id,
            record,
        }
    }

    /// The body a model reads: `skill_md` without its frontmatter.
    pub fn body(&self) -> Option<String> {
        let md = self.skill_md.as_deref()?;
        let parsed = frontmatter::parse(md, &self.slug);
        let body = parsed.body.trim();
        (!body.is_empty()).then(|| body.to_owned())
    }
}

/// A synchronous hub client. Cheap to share across threads (`&HubClient` is `Send + Sync`);
/// connections are pooled.
///
/// `hub_endpoint` may name several replicas of one hub, separated by commas. A call goes to the
/// replica that answered last (the first at start); when it cannot be reached, times out,
/// answers 5xx or its breaker is open, the call moves on to the next within the same deadline,
/// each try getting an equal share of what is left.
pub struct HubClient {
    /// As configured (comma-separated when several).
    configured: String,
    endpoints: Vec<Endpoint>,
    /// Index of the replica that answered last.
    preferred: std::sync::atomic::AtomicUsize,
    timeout: Duration,
    download_timeout: Duration,
    min_safety: f64,
    cache_dir: PathBuf,
}

impl fmt::Debug for HubClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HubClient")
            .field("endpoints", &self.endpoints)
            .field("timeout", &self.timeout)
            .field("download_timeout", &self.download_timeout)
            .field("min_safety", &self.min_safety)
            .field("cache_dir", &self.cache_dir)
            .finish()
    }
}

/// Applies the envelope rule to a JSON answer and returns its `result`.
pub fn open_envelope(op: &str, status: u16, body: &[u8]) -> Result<Value> {
    let parsed: std::result::Result<Value, _> = serde_json::from_slice(body);
    if !(200..300).contains(&status) {
        let detail = match &parsed {
            Ok(v) => {
                let code = v.get("status").map(Value::to_string).unwrap_or_default();
                let error = v.get("error").and_then(Value::as_str).unwrap_or_default();
                format!(
                    " (hub status {code}: `{}`)",
                    error.chars().take(200).collect::<String>()
                )
            }
            Err(_) => String::new(),
        };
        return Err(Error::HubStatus {
            op: op.to_owned(),
            status,
            detail,
        });
    }
    let bad = |message: String| Error::HubEnvelope {
        op: op.to_owned(),
        message,
    };
    let v = parsed.map_err(|e| bad(format!("not JSON ({e})")))?;
    let Some(obj) = v.as_object() else {
        return Err(bad("not a JSON object".into()));
    };
    let code = obj.get("status");
    let error = obj.get("error");
    let status_ok = code.and_then(Value::as_f64) == Some(0.0);
    let error_ok = matches!(error.and_then(Value::as_str), Some("ok" | "success"));
    if !(status_ok && error_ok) {
        let shown = |v: Option<&Value>| v.map_or_else(|| "missing".to_owned(), Value::to_string);
        return Err(bad(format!(
            "status {} and error {} (success is status 0 with error \"ok\" or \"success\")",
            shown(code),
            shown(error).chars().take(200).collect::<String>()
        )));
    }
    Ok(obj.get("result").cloned().unwrap_or(Value::Null))
}

/// A GET with `query`, accepting JSON or a zip.
fn get<'a>(query: &'a [(&'a str, &'a str)]) -> Request<'a> {
    Request::Get {
        query,
        accept: "application/json, application/zip",
    }
}

/// Percent-encodes one path segment.
fn path_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl HubClient {
    pub fn new(settings: &HubSettings) -> Result<HubClient> {
        let endpoints = settings
            .endpoint
            .split(',')
            .map(|u| {
                Endpoint::new(u, settings.api_key.clone())
                    .map_err(|why| Error::Invalid(format!("hub endpoint {why}")))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(HubClient {
            configured: endpoints
                .iter()
                .map(Endpoint::base)
                .collect::<Vec<_>>()
                .join(","),
            endpoints,
            preferred: std::sync::atomic::AtomicUsize::new(0),
            timeout: settings.timeout,
            download_timeout: settings.download_timeout,
            min_safety: settings.min_safety,
            cache_dir: settings.cache_dir.clone(),
        })
    }

    /// The endpoint as configured (several separated by commas).
    pub fn endpoint(&self) -> &str {
        &self.configured
    }

    /// The deadline of one search or read.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The deadline of one bundle download.
    pub fn download_timeout(&self) -> Duration {
        self.download_timeout
    }

    /// Where bundles are extracted.
    pub fn cache_dir(&self) -> &Path {
        &self.cache_dir
    }

    /// One GET with a hard deadline: the earlier of `deadline` and now + `step`, across the
    /// replicas (see [`HubClient`]). A hub that cannot be reached, hangs or fails (5xx) counts
    /// against its breaker; any other answer, even a refusal, shows it is up.
    fn call(
        &self,
        op: &str,
        path: &str,
        request: Request<'_>,
        step: Duration,
        deadline: Instant,
        max_bytes: u64,
    ) -> Result<Answer> {
        use std::sync::atomic::Ordering;
        let start = Instant::now();
        let until = deadline.min(start + step);
        let n = self.endpoints.len();
        let first = self.preferred.load(Ordering::Relaxed) % n;
        let mut last = None;
        for k in 0..n {
            let i = (first + k) % n;
            let now = if k == 0 { start } else { Instant::now() };
            let left = until.saturating_duration_since(now);
            // An equal share of what is left for this try and each one after it.
            let budget = left / (n - k) as u32;
            match self.call_one(&self.endpoints[i], op, path, request, budget, max_bytes) {
                Ok(a) if a.status < 500 || k + 1 == n => {
                    self.preferred.store(i, Ordering::Relaxed);
                    return Ok(a);
                }
                Ok(a) => {
                    tracing::debug!(target: "hub", op, replica = self.endpoints[i].base(), status = a.status, "replica failed; trying the next");
                    last = Some(Ok(a));
                }
                Err(e) => {
                    if n > 1 {
                        tracing::debug!(target: "hub", op, replica = self.endpoints[i].base(), error = %e, "replica failed; trying the next");
                    }
                    last = Some(Err(e));
                }
            }
        }
        last.unwrap_or_else(|| {
            Err(Error::HubTimeout {
                op: op.to_owned(),
                after_ms: step.as_millis() as u64,
            })
        })
    }

    /// One call to one replica within `budget`.
    fn call_one(
        &self,
        endpoint: &Endpoint,
        op: &str,
        path: &str,
        request: Request<'_>,
        budget: Duration,
        max_bytes: u64,
    ) -> Result<Answer> {
        let start = Instant::now();
        let timeout = || Error::HubTimeout {
            op: op.to_owned(),
            after_ms: budget.as_millis() as u64,
        };
        if budget.is_zero() {
            return Err(timeout());
        }
        let request_id = bundle::random_hex(32);
        let sent = endpoint.send(
            path,
            request,
            &[("X-Request-ID", &request_id)],
            budget,
            max_bytes,
        );
        let elapsed_ms = start.elapsed().as_millis() as u64;
        let transport = |message: String| Error::HubTransport {
            op: op.to_owned(),
            message,
        };
        let e = match sent {
            Err(Failure::Refused(why)) => return Err(transport(why)),
            Ok(a) => {
                tracing::debug!(target: "hub", op, request_id = %request_id, status = a.status, bytes = a.body.len(), elapsed_ms, "hub answered");
                if a.status >= 500 {
                    endpoint.failed(&format!("HTTP {}", a.status));
                } else {
                    endpoint.succeeded();
                }
                return Ok(a);
            }
            Err(Failure::Timeout) => timeout(),
            Err(Failure::Transport(message)) => transport(message),
        };
        tracing::debug!(target: "hub", op, request_id = %request_id, elapsed_ms, error = %e, "hub call failed");
        endpoint.failed(&e.to_string());
        Err(e)
    }

    /// Discover: the raw `result.items` for `query`, at most `limit` (1–50).
    pub fn discover(&self, query: &str, limit: usize, deadline: Instant) -> Result<Vec<Value>> {
        let limit = limit.clamp(1, MAX_LIMIT).to_string();
        let a = self.call(
            "search",
            "/openapi/v1/skills",
            get(&[("q", query), ("limit", &limit)]),
            self.timeout,
            deadline,
            MAX_JSON_BYTES,
        )?;
        let result = open_envelope("search", a.status, &a.body)?;
        match result.get("items") {
            Some(Value::Array(items)) => Ok(items.clone()),
            _ => Err(Error::HubEnvelope {
                op: "search".into(),
                message: "`result.items` is not a list".into(),
            }),
        }
    }

    /// One page of the hub's skill vectors for embedder `model` of dimension `dim`, those after
    /// text key `after`, at most `limit` (the hub caps it). A hub of another embedder answers
    /// 409, its message naming its model ([`Error::HubStatus`]).
    pub fn vectors(
        &self,
        model: &str,
        dim: usize,
        after: Option<u64>,
        limit: usize,
        deadline: Instant,
    ) -> Result<HubVectorPage> {
        let op = "vectors";
        let (dim_s, limit_s) = (dim.to_string(), limit.to_string());
        let after_s = after.map(|a| format!("{a:016x}")).unwrap_or_default();
        let mut query = vec![("model", model), ("dim", &dim_s), ("limit", &limit_s)];
        if after.is_some() {
            query.push(("after", &after_s));
        }
        let a = self.call(
            op,
            "/openapi/v1/vectors",
            get(&query),
            self.download_timeout,
            deadline,
            MAX_JSON_BYTES,
        )?;
        let result = open_envelope(op, a.status, &a.body)?;
        let bad = |message: String| Error::HubEnvelope {
            op: op.to_owned(),
            message,
        };
        let hub_model = result["model"].as_str().unwrap_or_default();
        let hub_dim = result["dim"].as_u64().unwrap_or(0) as usize;
        if hub_model != model || hub_dim != dim {
            return Err(bad(format!(
                "vectors of `{hub_model}` (dimension {hub_dim}) for `{model}` (dimension {dim})"
            )));
        }
        let Some(list) = result["items"].as_array() else {
            return Err(bad("`result.items` is not a list".into()));
        };
        let mut items = Vec::with_capacity(list.len());
        for it in list {
            let key = it["key"]
                .as_str()
                .and_then(|k| u64::from_str_radix(k, 16).ok())
                .ok_or_else(|| bad(format!("an item without a hex `key`: {}", it["key"])))?;
            let bytes = it["vector"]
                .as_str()
                .and_then(|v| {
                    use base64::Engine as _;
                    base64::engine::general_purpose::STANDARD.decode(v).ok()
                })
                .ok_or_else(|| bad(format!("the vector of key {key:016x} is not base64")))?;
            let v = bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            items.push((key, v));
        }
        let next = match result["next"].as_str() {
            Some(n) => Some(
                u64::from_str_radix(n, 16)
                    .map_err(|_| bad(format!("`next` is not a hex key: {n}")))?,
            ),
            None => None,
        };
        Ok(HubVectorPage {
            total: result["total"].as_u64().unwrap_or(0) as usize,
            complete: result["complete"].as_bool().unwrap_or(false),
            items,
            next,
        })
    }

    /// Read one skill (`skill_md` and metadata) by UUID or `skill_id`. A record whose
    /// `score_safety` is below `hub_min_safety` is [`Error::HubUnsafe`].
    pub fn get(&self, id: &str, deadline: Instant) -> Result<HubSkill> {
        let op = format!("read `{id}`");
        let a = self.call(
            &op,
            &format!("/openapi/v1/skills/{}", path_segment(id)),
            get(&[]),
            self.timeout,
            deadline,
            MAX_JSON_BYTES,
        )?;
        let result = open_envelope(&op, a.status, &a.body)?;
        if !result.is_object() {
            return Err(Error::HubEnvelope {
                op,
                message: "`result` is not a skill record".into(),
            });
        }
        let skill = HubSkill::from_record(result, id);
        self.check_safety(&skill)?;
        Ok(skill)
    }

    fn check_safety(&self, skill: &HubSkill) -> Result<()> {
        match skill.score_safety {
            Some(score) if score < self.min_safety => Err(Error::HubUnsafe {
                id: skill.id.clone(),
                score,
                min: self.min_safety,
            }),
            _ => Ok(()),
        }
    }

    /// Download a skill's bundle (the raw zip, not enveloped), at most `MAX_ARCHIVE_BYTES`.
    pub fn download(&self, id: &str, deadline: Instant) -> Result<Vec<u8>> {
        let op = format!("download `{id}`");
        let a = self.call(
            &op,
            &format!("/openapi/v1/skills/{}/download", path_segment(id)),
            get(&[("source", DOWNLOAD_SOURCE)]),
            self.download_timeout,
            deadline,
            MAX_ARCHIVE_BYTES,
        )?;
        if (200..300).contains(&a.status) {
            Ok(a.body)
        } else {
            // Errors come enveloped; `open_envelope` turns a non-2xx status into `HubStatus`.
            open_envelope(&op, a.status, &a.body).map(|_| Vec::new())
        }
    }

    /// Publishes `archive` (a zip of one skill tree) to the hub: `result` names the skill and
    /// its version (`created` false when that exact content was already published). Needs a
    /// key with the publish scope. A call that failed on one replica is tried on the next
    /// (publishing the same content twice is not a second version).
    pub fn publish(&self, archive: &[u8], deadline: Instant) -> Result<Value> {
        let op = "publish";
        let a = self.call(
            op,
            "/openapi/v1/skills",
            Request::PostBytes {
                content_type: "application/zip",
                body: archive,
            },
            self.download_timeout,
            deadline,
            MAX_JSON_BYTES,
        )?;
        open_envelope(op, a.status, &a.body)
    }

    /// Every version of the published skill `name` (`result.versions`, publish order).
    pub fn versions(&self, name: &str, deadline: Instant) -> Result<Value> {
        let op = format!("versions of `{name}`");
        let a = self.call(
            &op,
            &format!("/openapi/v1/skills/{}/versions", path_segment(name)),
            get(&[]),
            self.timeout,
            deadline,
            MAX_JSON_BYTES,
        )?;
        open_envelope(&op, a.status, &a.body)
    }

    /// Yanks `version` of `name`: no longer served; the version before it is served again.
    pub fn yank(&self, name: &str, version: &str, deadline: Instant) -> Result<Value> {
        let op = format!("yank `{name}` {version}");
        let a = self.call(
            &op,
            &format!(
                "/openapi/v1/skills/{}/versions/{}/yank",
                path_segment(name),
                path_segment(version)
            ),
            Request::PostBytes {
                content_type: "application/json",
                body: b"{}",
            },
            self.timeout,
            deadline,
            MAX_JSON_BYTES,
        )?;
        open_envelope(&op, a.status, &a.body)
    }

    /// Deletes the published skill `name` and every version of it.
    pub fn delete(&self, name: &str, deadline: Instant) -> Result<Value> {
        let op = format!("delete `{name}`");
        let a = self.call(
            &op,
            &format!("/openapi/v1/skills/{}", path_segment(name)),
            Request::Delete,
            self.timeout,
            deadline,
            MAX_JSON_BYTES,
        )?;
        open_envelope(&op, a.status, &a.body)
    }

    /// Makes a skill's bundle available on disk: from the cache, or downloaded and safely
    /// extracted into `<cache_dir>/<slug>/<version>`. `prefetched` is the record a hydrate
    /// already read (saves one call). The read and the download each keep their own timeout,
    /// bounded by `deadline`.
    pub fn install(
        &self,
        id: &str,
        prefetched: Option<&HubSkill>,
        deadline: Instant,
    ) -> Result<Installed> {
        let skill = match prefetched {
            Some(s) => {
                self.check_safety(s)?;
                s.clone()
            }
            None => self.get(id, deadline)?,
        };
        bundle::install(
            &self.cache_dir,
            &skill.slug,
            &skill.version,
            &Limits::default(),
            || self.download(&skill.id, deadline),
        )
    }
}

/// The hub as a [`SkillSource`]: discover, then the safety, quality and relevance filters.
#[derive(Debug)]
pub struct HubSource {
    client: HubClient,
    weight: f32,
    per_source_max: usize,
    min_safety: f64,
    min_quality: f64,
}

fn tags_text(v: Option<&Value>) -> String {
    match v {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" "),
        Some(Value::String(s)) => s.replace(',', " "),
        _ => String::new(),
    }
}

impl HubSource {
    pub fn new(settings: &HubSettings) -> Result<HubSource> {
        Ok(HubSource {
            client: HubClient::new(settings)?,
            weight: settings.weight,
            per_source_max: settings.per_source_max,
            min_safety: settings.min_safety,
            min_quality: settings.min_quality,
        })
    }

    pub fn client(&self) -> &HubClient {
        &self.client
    }

    /// Discover and filter, in the reference's order: items without `id` or `name`, then
    /// `score_safety` below the minimum, then `quality_score` below 0.45, then the lexical
    /// relevance guard on name + description + tags; at most `min(k, per_source_max)` kept.
    pub fn search_explained(&self, query: &str, k: usize, deadline: Instant) -> Result<Found> {
        let mut out = Found::default();
        let cap = k.min(self.per_source_max);
        let guard = Guard::new(query);
        // Nothing could pass the guard: do not ask.
        if cap == 0 || guard.term_count() == 0 {
            return Ok(out);
        }
        let items = self.client.discover(query, (cap * 4).max(8), deadline)?;
        for item in items {
            let id = text_field(&item, "id");
            let name = text_field(&item, "name");
            let (Some(id), Some(name)) = (id, name) else {
                out.rejected.push(Rejected {
                    id: text_field(&item, "id").unwrap_or_default(),
                    reason: "missing `id` or `name`".into(),
                });
                continue;
            };
            let reject = |reason: String| Rejected {
                id: id.clone(),
                reason,
            };
            let safety = number_field(&item, "score_safety");
            if let Some(s) = safety.filter(|s| *s < self.min_safety) {
                out.rejected.push(reject(format!(
                    "safety score {s} below {}",
                    self.min_safety
                )));
                continue;
            }
            let quality = number_field(&item, "quality_score");
            if let Some(q) = quality.filter(|q| *q < self.min_quality) {
                out.rejected.push(reject(format!(
                    "quality score {q} below {}",
                    self.min_quality
                )));
                continue;
            }
            let description = text_field(&item, "description").unwrap_or_default();
            let verdict = guard.check(
                &name,
                &format!("{description} {}", tags_text(item.get("tags"))),
            );
            if !verdict.passed {
                out.rejected.push(reject(format!(
                    "not relevant: matched {:?}, {} required",
                    verdict.matched, verdict.required
                )));
                continue;
            }
            if out.hits.len() >= cap {
                out.rejected
                    .push(reject(format!("over the {cap} hits a source may add")));
                continue;
            }
            let field = |k: &str| item.get(k).cloned().unwrap_or(Value::Null);
            let meta = json!({
                "source": SOURCE,
                "origin": format!("{SOURCE}/{id}"),
                "id": id,
                "skill_id": field("skill_id"),
                "description": description,
                "tags": field("tags"),
                "category": field("category"),
                "quality_score": field("quality_score"),
                "install_count": field("install_count"),
                "score_safety": field("score_safety"),
                "keyword_relevance": {
                    "passed": verdict.passed,
                    "matched_terms": verdict.matched,
                    "required_matched": verdict.required,
                    "match_ratio": verdict.matched.len() as f64 / guard.term_count() as f64,
                },
            });
            out.hits.push(RemoteHit {
                qualified_id: format!("{SOURCE}/{id}"),
                name,
                description,
                body: None,
                score: quality.unwrap_or(0.0) as f32,
                meta,
            });
        }
        tracing::debug!(target: "hub", hits = out.hits.len(), rejected = out.rejected.len(), "hub search");
        Ok(out)
    }

    /// Fetches a hit's body (`skill_md` without frontmatter) and keeps the record in
    /// `meta._fetched` for a later [`HubSource::install`]. On failure the hit is unchanged.
    pub fn hydrate(&self, hit: &mut RemoteHit, deadline: Instant) -> Result<()> {
        let id = Self::hit_id(hit)?;
        let skill = self.client.get(&id, deadline)?;
        hit.body = skill.body();
        if let Value::Object(m) = &mut hit.meta {
            m.insert("_fetched".into(), skill.record);
        }
        Ok(())
    }

    /// Installs a hit's bundle, reusing the record a hydrate fetched.
    pub fn install(&self, hit: &RemoteHit, deadline: Instant) -> Result<Installed> {
        let id = Self::hit_id(hit)?;
        let fetched = hit
            .meta
            .get("_fetched")
            .map(|r| HubSkill::from_record(r.clone(), &id));
        self.client.install(&id, fetched.as_ref(), deadline)
    }

    fn hit_id(hit: &RemoteHit) -> Result<String> {
        hit.qualified_id
            .strip_prefix("hub/")
            .filter(|id| !id.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| Error::Invalid(format!("`{}` is not a hub hit", hit.qualified_id)))
    }
}

impl SkillSource for HubSource {
    fn name(&self) -> &str {
        SOURCE
    }

    fn weight(&self) -> f32 {
        self.weight
    }

    fn search(&self, query: &str, k: usize, deadline: Instant) -> Result<Vec<RemoteHit>> {
        self.search_explained(query, k, deadline).map(|s| s.hits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(error: Value, status: Value) -> Vec<u8> {
        serde_json::to_vec(
            &json!({"error": error, "requestId": "r", "status": status, "result": {"items": []}}),
        )
        .unwrap()
    }

    #[test]
    fn envelope_accepts_only_status_zero_with_ok_or_success() {
        // The reference's parity matrix: ok/0 ✓, success/0 ✓, ""/0 ✗, boom/0 ✗, ok/1 ✗.
        assert!(open_envelope("t", 200, &env(json!("ok"), json!(0))).is_ok());
        assert!(open_envelope("t", 200, &env(json!("success"), json!(0))).is_ok());
        for (e, s) in [
            (json!(""), json!(0)),
            (json!("boom"), json!(0)),
            (json!("ok"), json!(1)),
            (json!("ok"), json!("0")),
            (json!(null), json!(0)),
            (json!("OK"), json!(0)),
        ] {
            let err = open_envelope("t", 200, &env(e.clone(), s.clone())).unwrap_err();
            assert!(matches!(err, Error::HubEnvelope { .. }), "{e}/{s}: {err}");
        }
        assert!(matches!(
            open_envelope("t", 200, b"<html>"),
            Err(Error::HubEnvelope { .. })
        ));
        assert!(matches!(
            open_envelope("t", 200, b"[1]"),
            Err(Error::HubEnvelope { .. })
        ));
        let e = open_envelope("t", 404, br#"{"error":"not found","status":60001}"#).unwrap_err();
        assert_eq!(
            e.to_string(),
            "hub t: HTTP 404 (hub status 60001: `not found`)"
        );
        // A 2xx status does not excuse a bad envelope, and a good envelope does not excuse a 5xx.
        assert!(matches!(
            open_envelope("t", 500, &env(json!("ok"), json!(0))),
            Err(Error::HubStatus { status: 500, .. })
        ));
    }

    #[test]
    fn records_and_bodies() {
        let s = HubSkill::from_record(
            json!({"id": "u-1", "skill_id": "acme/pdf", "version": "1.2", "name": "pdf",
                   "skill_md": "---\nname: pdf\n---\n\n# PDF\nFill forms.\n", "score_safety": 0.9}),
            "acme/pdf",
        );
        assert_eq!(
            (s.id.as_str(), s.slug.as_str(), s.version.as_str()),
            ("u-1", "acme/pdf", "1.2")
        );
        assert_eq!(s.body().as_deref(), Some("# PDF\nFill forms."));
        let s = HubSkill::from_record(json!({"name": "x"}), "asked");
        assert_eq!(
            (s.id.as_str(), s.slug.as_str(), s.version.as_str()),
            ("asked", "asked", "v0")
        );
        assert_eq!(s.body(), None);
        assert_eq!(path_segment("a/b c"), "a%2Fb%20c");
    }

    #[test]
    fn settings_follow_the_config() {
        let s = crate::config::resolve(&crate::config::Layers::default()).unwrap();
        assert_eq!(HubSettings::from_settings(&s, Path::new("/h")), None);
        let s = crate::config::resolve(&crate::config::Layers {
            env: vec![
                (
                    "SKILLSEARCH_HUB_ENDPOINT".into(),
                    "http://127.0.0.1:9".into(),
                ),
                ("SKILLSEARCH_HUB_TIMEOUT_S".into(), "0.5".into()),
            ],
            ..Default::default()
        })
        .unwrap();
        let h = HubSettings::from_settings(&s, Path::new("/h")).unwrap();
        assert_eq!(h.timeout, Duration::from_millis(500));
        assert_eq!(h.download_timeout, Duration::from_secs(30));
        assert_eq!(h.cache_dir, PathBuf::from("/h/cache/hub"));
        assert_eq!(
            (h.min_safety, h.min_quality, h.weight, h.per_source_max),
            (0.7, 0.45, 0.85, 2)
        );
        assert!(HubClient::new(&HubSettings::new("file:///etc", "/c")).is_err());
    }
}
