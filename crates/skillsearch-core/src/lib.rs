//! The skillsearch engine: discovers skills (`SKILL.md` directories) under ordered roots, keeps a
//! persistent tantivy index of them, answers queries with field-weighted BM25, gates the hits
//! the way OpenClaw does, and renders the block a model reads.
//!
//! This crate never prints and holds no global state; binaries and host adapters sit on top.
//! A surface builds one [`Engine`] from the settings and runs every turn on it; the modules
//! below it are public where a surface or a benchmark reads them (settings, the index, ranking
//! options, evaluation, embedders), private otherwise.

pub mod config;
pub mod corpus;
mod error;
pub mod eval;
pub mod fsio;
pub mod index;
pub mod plan;
pub mod registry;
pub mod remote;
pub mod retrieve;
pub mod secrets;
pub mod tokens;
pub mod turn;

pub use corpus::diagnostic::{Diagnostic, Severity};
pub use corpus::eligibility::EligibilityEnv;
pub use corpus::{Root, Roots};
pub use error::{Error, Result};
pub use index::{IndexConfig, Progress, Refresh, RefreshReport, SkillIndex};
pub use remote::Remote;
pub use remote::hub::{HubClient, HubSettings, HubSource, HubVectorPage, PeerVectors};
pub use remote::marketplace::{Market, MarketSettings, Marketplace};
pub use remote::source::{Found, Rejected, RemoteHit, SkillSource, Source};
pub use retrieve::embed::Embedder;
pub use retrieve::{Hit, SearchOptions, SearchResult};
pub use turn::{Engine, Turn};
