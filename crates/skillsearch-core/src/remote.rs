//! The parts of a turn beyond the local index (reference §1.1): the query rewrite, the remote
//! hub, and the gate, all through the network and all fail-open. [`crate::deliver`] runs them
//! in the reference's order; this module holds what they need and what they report.

use crate::config::Settings;
use crate::hub::{HubSettings, HubSource};
use crate::llm::{ChatClient, GateOptions};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What a turn may use besides the local index, built once per process from the settings.
#[derive(Debug, Default)]
pub struct Remote {
    pub(crate) hub: Option<HubSource>,
    pub(crate) hub_cache: PathBuf,
    pub(crate) hub_timeout: Duration,
    pub(crate) hub_download_timeout: Duration,
    pub(crate) per_source_max: usize,
    pub(crate) chat: Option<ChatClient>,
    /// Set when the rewrite runs: its deadline.
    pub(crate) rewrite_timeout: Option<Duration>,
    /// Set when the gate runs.
    pub(crate) gate: Option<GateOptions>,
    pub(crate) gate_pool: usize,
    /// Problems found while building (an unusable URL...), repeated in every turn's notes.
    pub(crate) notes: Vec<String>,
}

impl Remote {
    /// Nothing remote: the local index answers alone.
    pub fn none() -> Remote {
        Remote::default()
    }

    /// The hub, rewrite and gate the settings configure. A part that cannot be built is left
    /// out and a note says why; the rest still runs. Bundles go under `<home>/cache/hub`.
    pub fn from_settings(s: &Settings, home: &Path) -> Remote {
        let mut r = Remote {
            per_source_max: s.per_source_max,
            gate_pool: s.gate_pool,
            ..Remote::default()
        };
        if let Some(hs) = HubSettings::from_settings(s, home) {
            r.hub_cache = hs.cache_dir.clone();
            r.hub_timeout = hs.timeout;
            r.hub_download_timeout = hs.download_timeout;
            match HubSource::new(&hs) {
                Ok(h) => r.hub = Some(h),
                Err(e) => r
                    .notes
                    .push(format!("hub `{}` is not used: {e}", s.hub_endpoint)),
            }
        }
        if s.llm.is_configured() {
            match ChatClient::from_config(&s.llm) {
                Ok(c) => {
                    r.chat = Some(c);
                    r.rewrite_timeout = s.rewrite_enabled().then_some(s.rewrite_timeout);
                    r.gate = s
                        .gate_enabled(r.hub.is_some())
                        .then(|| GateOptions::from_settings(s));
                }
                Err(e) => r.notes.push(format!(
                    "chat model `{}` is not used (no rewrite, no gate): {e}",
                    s.llm.model
                )),
            }
        }
        r
    }

    /// Whether any remote part runs (a hub, a rewrite or a gate).
    pub fn is_active(&self) -> bool {
        self.hub.is_some() || self.rewrite_timeout.is_some() || self.gate.is_some()
    }

    pub fn hub(&self) -> Option<&HubSource> {
        self.hub.as_ref()
    }

    pub fn gate_on(&self) -> bool {
        self.chat.is_some() && self.gate.is_some()
    }

    pub fn rewrite_on(&self) -> bool {
        self.chat.is_some() && self.rewrite_timeout.is_some()
    }

    /// What runs, for health reports (no secrets).
    pub fn summary(&self) -> RemoteSummary {
        RemoteSummary {
            hub: self.hub.as_ref().map(|h| h.client().endpoint().to_owned()),
            model: self.chat.as_ref().map(|c| c.model().to_owned()),
            rewrite: self.rewrite_on(),
            gate: self.gate_on(),
            notes: self.notes.clone(),
        }
    }

    /// The deadline of one bundle download.
    pub fn hub_download_timeout(&self) -> Duration {
        self.hub_download_timeout
    }

    /// Where hub bundles are extracted.
    pub fn hub_cache(&self) -> Option<&Path> {
        self.hub.as_ref().map(|_| self.hub_cache.as_path())
    }
}

/// The remote parts that run.
#[derive(Debug, Clone, Serialize)]
pub struct RemoteSummary {
    /// The hub's endpoint.
    pub hub: Option<String>,
    /// The chat model's id.
    pub model: Option<String>,
    pub rewrite: bool,
    pub gate: bool,
    /// Parts configured but not used, and why.
    pub notes: Vec<String>,
}

/// What the host tells about this turn.
#[derive(Debug, Clone, Default)]
pub struct Turn {
    /// The agent's tools this turn, for the gate's hard rule; `None`: not known.
    pub tools: Option<Vec<String>>,
    /// When the whole retrieval must be done; each step's own deadline is cut to fit.
    pub deadline: Option<Instant>,
    /// Skills the host found itself this turn, fused with the local and hub hits.
    pub sources: Vec<HostSource>,
}

/// A ranked list of skills a host supplies with a turn (its own registry, a marketplace it
/// already searched). Its hits must carry their bodies: nothing is fetched or installed for
/// them. A hit's `meta.skill_dir`, when set, is rendered as its directory.
#[derive(Debug, Clone, Default)]
pub struct HostSource {
    /// The label, also the prefix of its hits' qualified ids (`<name>/<id>`).
    pub name: String,
    pub weight: f32,
    /// Best first.
    pub hits: Vec<crate::source::RemoteHit>,
}

/// Time a remote step leaves before the turn's deadline for the local work after it (search,
/// reading bodies, render).
pub const LOCAL_RESERVE: Duration = Duration::from_millis(100);

impl Turn {
    /// `step`, cut to what is left before the turn's deadline less [`LOCAL_RESERVE`].
    pub fn within(&self, step: Duration) -> Duration {
        match self.deadline {
            Some(d) => step.min(
                d.saturating_duration_since(Instant::now())
                    .saturating_sub(LOCAL_RESERVE),
            ),
            None => step,
        }
    }

    /// What is left of the turn (`None`: no deadline).
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }

    /// The instant a step of length `step` must end by.
    pub fn deadline_for(&self, step: Duration) -> Instant {
        Instant::now() + self.within(step)
    }
}

/// The query rewrite of one turn.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RewriteReport {
    /// The model's rewrite, when it gave a usable one (it was searched instead of the query).
    pub rewritten: Option<String>,
    pub error: Option<String>,
    pub ms: u64,
}

/// What one remote source contributed.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SourceReport {
    pub source: String,
    /// Hits it offered to the fusion.
    pub hits: Vec<String>,
    /// Items its filters dropped, as `id: reason`.
    pub rejected: Vec<String>,
    pub error: Option<String>,
    pub ms: u64,
}

/// The gate's decision.
#[derive(Debug, Clone, Default, Serialize)]
pub struct GateReport {
    /// The candidates it was shown, best first.
    pub candidates: Vec<String>,
    pub selected: Vec<String>,
    pub plan: Option<String>,
    /// The selection is the first candidates because the gate failed (`error` says why).
    pub fell_back: bool,
    pub error: Option<String>,
    /// Ids the model named that were not candidates.
    pub unknown_ids: Vec<String>,
    pub ms: u64,
}

/// The remote stages of one retrieval; empty when nothing remote ran.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Stages {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rewrite: Option<RewriteReport>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<SourceReport>,
    /// Exact duplicates dropped (`dropped: kept instead`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub duplicates: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gate: Option<GateReport>,
    /// Hub bundles installed for the selected hits (`id: directory`), or why not.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub materialised: Vec<String>,
    /// Some remote part failed or timed out: the answer is what the healthy parts found.
    pub degraded: bool,
}

/// The SHA-256 of a body normalised for exact-duplicate detection (§1.5): CRLF and CR to LF,
/// each line's end trimmed, the whole trimmed. `None` for an empty body, which is never a
/// duplicate.
pub fn body_digest(body: &str) -> Option<[u8; 32]> {
    let unified = body.replace("\r\n", "\n").replace('\r', "\n");
    let lines: Vec<&str> = unified.lines().map(str::trim_end).collect();
    let norm = lines.join("\n");
    let norm = norm.trim();
    if norm.is_empty() {
        return None;
    }
    Some(Sha256::digest(norm.as_bytes()).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_equal_up_to_line_ends_and_trailing_space_share_a_digest() {
        let a = body_digest("# PDF\r\nFill forms.  \r\n\r\n").unwrap();
        let b = body_digest("\n# PDF\nFill forms.").unwrap();
        let c = body_digest("# PDF\rFill forms.").unwrap();
        assert_eq!(a, b);
        assert_eq!(a, c);
        assert_ne!(a, body_digest("# PDF\nFill  forms.").unwrap());
        assert_eq!(body_digest(" \r\n\t"), None);
    }

    #[test]
    fn nothing_configured_is_inactive_and_a_bad_model_url_is_a_note() {
        let s = crate::config::resolve(&crate::config::Layers::default()).unwrap();
        let r = Remote::from_settings(&s, Path::new("/h"));
        assert!(!r.is_active() && r.notes.is_empty());
        let s = crate::config::resolve(&crate::config::Layers {
            env: vec![
                ("SKILLSEARCH_MODEL".into(), "m".into()),
                ("SKILLSEARCH_MODEL_BASE_URL".into(), "ftp://x".into()),
                (
                    "SKILLSEARCH_HUB_ENDPOINT".into(),
                    "http://127.0.0.1:9".into(),
                ),
            ],
            ..Default::default()
        })
        .unwrap();
        let r = Remote::from_settings(&s, Path::new("/h"));
        assert!(r.hub.is_some() && r.chat.is_none() && !r.gate_on());
        assert_eq!(r.hub_cache(), Some(Path::new("/h/cache/hub")));
        assert_eq!(r.notes.len(), 1, "{:?}", r.notes);
        assert!(r.notes[0].contains("chat model `m`"), "{:?}", r.notes);
    }

    #[test]
    fn a_turn_deadline_cuts_every_step() {
        let t = Turn::default();
        assert_eq!(t.within(Duration::from_secs(5)), Duration::from_secs(5));
        let t = Turn {
            deadline: Some(Instant::now() + Duration::from_millis(300)),
            ..Turn::default()
        };
        assert!(t.within(Duration::from_secs(5)) <= Duration::from_millis(200));
        let t = Turn {
            deadline: Some(Instant::now() - Duration::from_millis(1)),
            ..Turn::default()
        };
        assert_eq!(t.within(Duration::from_secs(5)), Duration::ZERO);
    }
}
