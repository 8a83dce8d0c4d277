//! The skillsearch engine: discovers skills (`SKILL.md` directories) under ordered roots, keeps a
//! persistent tantivy index of them, answers queries with field-weighted BM25, gates the hits
//! the way OpenClaw does, and renders the block a model reads.
//!
//! This crate never prints and holds no global state; binaries and host adapters sit on top.

pub mod analyzer;
pub mod breaker;
pub mod bundle;
pub mod config;
pub mod corpus;
pub mod diagnostic;
pub mod eligibility;
pub mod embed;
pub mod error;
pub mod eval;
pub mod fifo;
pub mod frontmatter;
pub mod fusion;
pub mod hub;
pub mod index;
pub mod llm;
pub mod maxscore;
pub mod plan;
pub mod relevance;
pub mod remote;
pub mod search;
pub mod semantic;
pub mod source;
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
