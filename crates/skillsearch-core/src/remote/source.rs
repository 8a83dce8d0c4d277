//! Remote skill sources (reference §1.3): something that answers a query with a few hits, each
//! with a weight for fusion with the local index. The hub (`HubSource`) is one;
//! marketplaces would be others. Plain owned data, so a caller can run sources on threads.

use crate::error::Result;
use serde::Serialize;
use serde_json::Value;
use std::time::Instant;

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
