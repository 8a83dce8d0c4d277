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
    #[error("{0}")]
    Invalid(String),
    /// A model or embeddings endpoint could not be reached or answered with an HTTP error.
    #[error("{url}: {message}")]
    Http { url: String, message: String },
    /// A model or embeddings call passed its deadline.
    #[error("{url}: no complete reply within {ms} ms")]
    Timeout { url: String, ms: u64 },
    /// An endpoint answered, but the reply is not what was asked for.
    #[error("{url}: bad reply: {message}")]
    Reply { url: String, message: String },
}

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
}
