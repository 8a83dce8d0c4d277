//! Remote skill sources (reference §1.3): something that answers a query with a few hits, each
//! with a weight for fusion with the local index. The hub ([`HubSource`]) and the marketplaces
//! ([`Marketplace`]: ClawHub, skillhub.cn) are the ones skillsearch searches itself; [`Source`]
//! holds either, so the turn runs them alike. Plain owned data, so a caller can run sources on
//! threads.

use crate::corpus::bundle::Installed;
use crate::error::Result;
use crate::remote::hub::HubSource;
use crate::remote::marketplace::Marketplace;
use serde::Serialize;
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

/// One hit from a remote source, ready to be fused with local hits.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RemoteHit {
    /// `<source>/<id>`, e.g. `hub/5f0c…`; unique across sources.
    pub qualified_id: String,
    pub name: String,
    pub description: String,
    /// The markdown body (frontmatter stripped). `None` until hydrated: a search answer
    /// carries metadata only.
    pub body: Option<String>,
    /// The source's own score (the hub's quality score); only comparable within one source.
    pub score: f32,
    /// Source-specific facts (`source`, `origin`, `id`, scores, `keyword_relevance`, …).
    pub meta: Value,
}

/// Why a discovered item was not returned.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejected {
    pub id: String,
    pub reason: String,
}

/// A search's hits with the items the filters dropped.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Found {
    pub hits: Vec<RemoteHit>,
    pub rejected: Vec<Rejected>,
}

/// A source of remote skills.
pub trait SkillSource: Send + Sync {
    /// The source label (`hub`), also the prefix of its hits' `qualified_id`.
    fn name(&self) -> &str;
    /// The weight of its hits in weighted RRF fusion.
    fn weight(&self) -> f32;
    /// At most `k` hits (and at most the source's own cap), answered before `deadline` or
    /// failed with a timeout. Never blocks past `deadline` plus a few milliseconds.
    fn search(&self, query: &str, k: usize, deadline: Instant) -> Result<Vec<RemoteHit>>;
}

/// A source skillsearch searches, hydrates and installs from itself.
#[derive(Debug)]
pub enum Source {
    Hub(HubSource),
    Market(Marketplace),
}

impl Source {
    /// The label, also the `qualified_id` prefix: `hub`, `clawhub`, `skillhub_cn`.
    pub fn label(&self) -> &str {
        match self {
            Source::Hub(_) => crate::remote::hub::SOURCE,
            Source::Market(m) => m.label(),
        }
    }

    pub fn endpoint(&self) -> &str {
        match self {
            Source::Hub(h) => h.client().endpoint(),
            Source::Market(m) => m.endpoint(),
        }
    }

    pub fn weight(&self) -> f32 {
        match self {
            Source::Hub(h) => h.weight(),
            Source::Market(m) => m.weight(),
        }
    }

    /// The deadline of one search.
    pub fn timeout(&self) -> Duration {
        match self {
            Source::Hub(h) => h.client().timeout(),
            Source::Market(m) => m.timeout(),
        }
    }

    /// The deadline of one hydrate: a read for the hub, an install for a marketplace.
    pub fn hydrate_timeout(&self) -> Duration {
        match self {
            Source::Hub(h) => h.client().timeout(),
            Source::Market(m) => m.download_timeout(),
        }
    }

    /// The deadline of one bundle download.
    pub fn download_timeout(&self) -> Duration {
        match self {
            Source::Hub(h) => h.client().download_timeout(),
            Source::Market(m) => m.download_timeout(),
        }
    }

    /// Where its bundles are extracted.
    pub fn cache_dir(&self) -> &Path {
        match self {
            Source::Hub(h) => h.client().cache_dir(),
            Source::Market(m) => m.cache_dir(),
        }
    }

    /// Whether PathGuard placeholders are expanded in its bodies (the hub's; a marketplace's
    /// never, as in the reference).
    pub fn trusted(&self) -> bool {
        matches!(self, Source::Hub(_))
    }

    /// Whether a hit still without a body after hydrating is dropped (a marketplace's: its
    /// body lives only in the zip, so no body means no skill).
    pub fn needs_body(&self) -> bool {
        matches!(self, Source::Market(_))
    }

    pub fn search_explained(&self, query: &str, k: usize, deadline: Instant) -> Result<Found> {
        match self {
            Source::Hub(h) => h.search_explained(query, k, deadline),
            Source::Market(m) => m.search_explained(query, k, deadline),
        }
    }

    /// Gives `hit` its body: the hub reads the record; a marketplace installs the bundle (and
    /// returns it). On failure the hit is unchanged.
    pub fn hydrate(&self, hit: &mut RemoteHit, deadline: Instant) -> Result<Option<Installed>> {
        match self {
            Source::Hub(h) => h.hydrate(hit, deadline).map(|()| None),
            Source::Market(m) => m.hydrate(hit, deadline).map(Some),
        }
    }

    /// Installs a hit's bundle (a marketplace's comes from the cache its hydrate filled).
    pub fn install(&self, hit: &RemoteHit, deadline: Instant) -> Result<Installed> {
        match self {
            Source::Hub(h) => h.install(hit, deadline),
            Source::Market(m) => m.install(hit, deadline),
        }
    }
}
