//! The engine's error type. Retrieval paths turn these into diagnostics; only setup calls
//! (opening a home directory, building an index) return them.

use std::path::PathBuf;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("index at `{}`: {source}", path.display())]
    Index {
        path: PathBuf,
        source: tantivy::TantivyError,
    },
    #[error("index at `{}` is locked by another writer; try again when it finishes", path.display())]
    Locked { path: PathBuf },
    #[error("{what} in `{}`: {message}", path.display())]
    Format {
        what: &'static str,
        path: PathBuf,
        message: String,
    },
    #[error("no skill with id `{0}`; run `skillsearch search` to list ids")]
    UnknownSkill(String),
    #[error("model at `{}`: {message}", path.display())]
    Model { path: PathBuf, message: String },
    #[error("{0}")]
    Invalid(String),
    /// The hub did not answer within the step's deadline.
    #[error("hub {op}: timeout after {after_ms} ms")]
    HubTimeout { op: String, after_ms: u64 },
    /// The hub answered with a non-2xx HTTP status (`detail`: the envelope's code and message).
    #[error("hub {op}: HTTP {status}{detail}")]
    HubStatus {
        op: String,
        status: u16,
        detail: String,
    },
    /// A 2xx answer whose envelope is not a success (`status` 0 and `error` `ok`/`success`), or
    /// whose body is not the JSON the protocol describes.
    #[error("hub {op}: bad envelope: {message}")]
    HubEnvelope { op: String, message: String },
    /// Connection, DNS, TLS or read failure.
    #[error("hub {op}: {message}")]
    HubTransport { op: String, message: String },
    /// The hub's own safety score of a skill is below `hub_min_safety`.
    #[error("hub skill `{id}` has safety score {score} (below the minimum {min}); not used")]
    HubUnsafe { id: String, score: f64, min: f64 },
    /// A marketplace (ClawHub, skillhub.cn) call failed: unreachable, past its deadline, an
    /// HTTP error (`status`), or an answer that is not the documented shape.
    #[error("{market} {op}: {message}")]
    Market {
        market: &'static str,
        op: String,
        status: Option<u16>,
        message: String,
    },
    /// A bundle entry that could escape the cache or is not a plain file; nothing was installed.
    #[error("bundle `{bundle}`: entry `{entry}` {reason}; nothing was installed")]
    BundleUnsafe {
        bundle: String,
        entry: String,
        reason: &'static str,
    },
    /// The bundle inflated past the archive limit; nothing was installed.
    #[error("bundle `{bundle}` inflates past {limit} bytes; nothing was installed")]
    BundleTooLarge { bundle: String, limit: u64 },
    /// The bundle is not a usable zip (corrupt, encrypted, unsupported method, no `SKILL.md`).
    #[error("bundle `{bundle}`: {message}; nothing was installed")]
    BundleInvalid { bundle: String, message: String },
    /// A model or embeddings endpoint could not be reached or answered with an HTTP error.
    #[error("{url}: {message}")]
    Http { url: String, message: String },
    /// A model or embeddings call passed its deadline.
    #[error("{url}: no complete reply within {ms} ms")]
    Timeout { url: String, ms: u64 },
    /// An endpoint answered, but the reply is not what was asked for.
    #[error("{url}: bad reply: {message}")]
    Reply { url: String, message: String },
    /// A shared vector source (a hub's database, a peer hub) failed a read or a write.
    #[error("shared vectors at {from}: {message}")]
    SharedVectors { from: String, message: String },
}

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
}
