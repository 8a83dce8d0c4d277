//! The parts of a turn beyond the local index (reference §1.1): the query rewrite, the remote
//! sources (the hub and the marketplaces), and the gate, all through the network and all
//! fail-open. The turn pipeline runs them in
//! the reference's order; this module holds the clients the settings configure.

pub(crate) mod breaker;
pub(crate) mod http;
pub(crate) mod hub;
pub mod llm;
pub(crate) mod marketplace;
pub(crate) mod source;

use crate::config::Settings;
use crate::remote::hub::{HubSettings, HubSource};
use crate::remote::llm::{ChatClient, GateOptions};
use crate::remote::marketplace::{MarketSettings, Marketplace};
use crate::remote::source::Source;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What a turn may use besides the local index, built once per process from the settings.
#[derive(Debug, Default)]
pub struct Remote {
    /// The sources searched beside the local index: the hub, then ClawHub, then skillhub.cn,
    /// those configured.
    pub(crate) sources: Vec<Source>,
    /// Where hub bundles go (also when no hub is configured: placeholders name it).
    pub(crate) hub_cache: PathBuf,
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
        r.hub_cache = HubSettings::default_cache_dir(home);
        if let Some(hs) = HubSettings::from_settings(s, home) {
            r.hub_cache = hs.cache_dir.clone();
            match HubSource::new(&hs) {
                Ok(h) => r.sources.push(Source::Hub(h)),
                Err(e) => r
                    .notes
                    .push(format!("hub `{}` is not used: {e}", s.hub_endpoint)),
            }
        }
        for ms in MarketSettings::from_settings(s, home) {
            match Marketplace::new(&ms) {
                Ok(m) => r.sources.push(Source::Market(m)),
                Err(e) => r.notes.push(format!(
                    "{} `{}` is not used: {e}",
                    ms.market.label(),
                    ms.endpoint
                )),
            }
        }
        if s.llm.is_configured() {
            match ChatClient::from_config(&s.llm) {
                Ok(c) => {
                    r.chat = Some(c);
                    r.rewrite_timeout = s.rewrite_enabled().then_some(s.rewrite_timeout);
                    r.gate = s
                        .gate_enabled(!r.sources.is_empty())
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

    /// Whether any remote part runs (a source, a rewrite or a gate).
    pub fn is_active(&self) -> bool {
        !self.sources.is_empty() || self.rewrite_timeout.is_some() || self.gate.is_some()
    }

    pub fn hub(&self) -> Option<&HubSource> {
        self.sources.iter().find_map(|s| match s {
            Source::Hub(h) => Some(h),
            Source::Market(_) => None,
        })
    }

    /// The source whose hits' ids start with `<label>/`, and the rest of `id`.
    pub fn source_of<'a>(&self, id: &'a str) -> Option<(&Source, &'a str)> {
        let (label, rest) = id.split_once('/')?;
        let src = self.sources.iter().find(|s| s.label() == label)?;
        Some((src, rest))
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
            hub: self.hub().map(|h| h.client().endpoint().to_owned()),
            marketplaces: self
                .sources
                .iter()
                .filter_map(|s| match s {
                    Source::Market(m) => Some(format!("{} {}", m.label(), m.endpoint())),
                    Source::Hub(_) => None,
                })
                .collect(),
            model: self.chat.as_ref().map(|c| c.model().to_owned()),
            rewrite: self.rewrite_on(),
            gate: self.gate_on(),
            notes: self.notes.clone(),
        }
    }

    /// Where hub bundles are extracted, when a hub is configured.
    pub fn hub_cache(&self) -> Option<&Path> {
        self.hub().map(|_| self.hub_cache.as_path())
    }
}

/// The remote parts that run.
#[derive(Debug, Clone, Serialize)]
pub struct RemoteSummary {
    /// The hub's endpoint.
    pub hub: Option<String>,
    /// The marketplaces searched: `<label> <endpoint>`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub marketplaces: Vec<String>,
    /// The chat model's id.
    pub model: Option<String>,
    pub rewrite: bool,
    pub gate: bool,
    /// Parts configured but not used, and why.
    pub notes: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(r.hub().is_some() && r.chat.is_none() && !r.gate_on());
        assert_eq!(r.hub_cache(), Some(Path::new("/h/cache/hub")));
        assert_eq!(r.notes.len(), 1, "{:?}", r.notes);
        assert!(r.notes[0].contains("chat model `m`"), "{:?}", r.notes);
    }
}
