//! What one turn reports beyond its hits: the rewrite, each remote or host source, the duplicates
//! dropped, the gate's decision and the bundles installed.

use serde::Serialize;

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
