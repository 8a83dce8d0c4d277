//! The skillsearch engine: discovers skills (`SKILL.md` directories) under ordered roots, keeps a
//! persistent tantivy index of them, answers queries with field-weighted BM25, gates the hits
//! the way OpenClaw does, and renders the block a model reads.
//!
//! This crate never prints and holds no global state; binaries and host adapters sit on top.
//! A surface builds one [`Engine`] from the settings and runs every turn on it; the modules
//! below it are public where a surface or a benchmark reads them (settings, the index, ranking
//! options, evaluation, embedders), private otherwise.

mod analyzer;
mod breaker;
pub mod bundle;
pub mod config;
pub mod corpus;
mod diagnostic;
mod eligibility;
pub mod embed;
mod error;
pub mod eval;
pub mod fifo;
pub mod frontmatter;
mod fusion;
mod hub;
pub mod index;
pub mod llm;
mod maxscore;
pub mod plan;
mod relevance;
mod remote;
pub mod search;
pub mod semantic;
mod source;
pub mod tokens;
pub mod turn;

pub use corpus::{Root, Roots};
pub use diagnostic::{Diagnostic, Severity};
pub use eligibility::EligibilityEnv;
pub use embed::Embedder;
pub use error::{Error, Result};
pub use hub::{HubClient, HubSettings, HubSource};
pub use index::{IndexConfig, Progress, Refresh, RefreshReport, SkillIndex};
pub use remote::Remote;
pub use search::{Hit, SearchOptions, SearchResult};
pub use source::{RemoteHit, SkillSource};
pub use turn::{Engine, Turn};
