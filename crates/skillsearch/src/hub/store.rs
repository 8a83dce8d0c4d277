//! Which store a hub serves from: a directory (the embedded store) or a PostgreSQL URI (many
//! replicas over one database, each serving its own synced tree). Both answer the same calls;
//! this is the one place the server tells them apart.

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};
use skillsearch_core::registry::pg::{self, Follower, PgStore};
use skillsearch_core::registry::store::{Published, Scope, Store, StoreError, Version};
use skillsearch_core::retrieve::semantic::SharedVectors;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Whether `--store` names a PostgreSQL database rather than a directory.
pub(crate) fn is_database(store: &str) -> bool {
    store.starts_with("postgres://") || store.starts_with("postgresql://")
}

/// `--store` as given, else the embedded store under the home.
pub(crate) fn store_arg(home: &Path, store: Option<String>) -> String {
    store.unwrap_or_else(|| home.join("hub").to_string_lossy().into_owned())
}

pub(crate) enum HubStore {
    Dir(Store),
    Pg {
        store: Arc<PgStore>,
        /// Keeps the tree in step; set once the index exists (see [`HubStore::follow`]).
        follower: std::sync::Mutex<Option<Follower>>,
    },
}

impl HubStore {
    /// Opens `store` (a directory, created when missing, or a PostgreSQL URI whose tree is kept
    /// under `<home>/hub-cache/`).
    pub(crate) fn open(home: &Path, store: &str) -> Result<HubStore> {
        if is_database(store) {
            let shown = pg::redact_uri(store);
            let digest = Sha256::digest(shown.as_bytes());
            let cache = home.join("hub-cache").join(
                digest[..8]
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>(),
            );
            let s = PgStore::open(store, &cache)
                .with_context(|| format!("cannot open the hub store {shown}"))?;
            return Ok(HubStore::Pg {
                store: Arc::new(s),
                follower: std::sync::Mutex::new(None),
            });
        }
        let dir = PathBuf::from(store);
        Ok(HubStore::Dir(Store::open(&dir).with_context(|| {
            format!(
                "cannot open the hub store {} (give another with --store DIR or postgres://…)",
                dir.display()
            )
        })?))
    }

    /// The store as it may be named in logs (no password).
    pub(crate) fn shown(&self) -> String {
        match self {
            HubStore::Dir(s) => s.dir().display().to_string(),
            HubStore::Pg { store, .. } => store.shown_uri().to_owned(),
        }
    }

    /// Keeps a database store's tree in step with what other replicas write, calling
    /// `on_change` with the skills whose tree changed (a directory store has nobody else
    /// writing).
    pub(crate) fn follow(
        &self,
        catch_up: Duration,
        on_change: impl Fn(&[String]) + Send + 'static,
    ) {
        if let HubStore::Pg { store, follower } = self {
            *follower.lock().unwrap_or_else(|p| p.into_inner()) =
                Some(store.follow(catch_up, on_change));
        }
    }

    /// Where this replica's embedder takes skills' vectors from before embedding them, and
    /// writes back what it embeds: a database store's `vectors` table, shared by every replica.
    /// A directory store has one server, whose vectors persist under its home already.
    pub(crate) fn shared_vectors(&self) -> Option<Arc<dyn SharedVectors>> {
        match self {
            HubStore::Dir(_) => None,
            HubStore::Pg { store, .. } => Some(store.clone() as Arc<dyn SharedVectors>),
        }
    }

    pub(crate) fn live(&self) -> PathBuf {
        match self {
            HubStore::Dir(s) => s.live(),
            HubStore::Pg { store, .. } => store.live(),
        }
    }

    pub(crate) fn publish(&self, archive: &[u8]) -> Result<Published, StoreError> {
        match self {
            HubStore::Dir(s) => s.publish(archive),
            HubStore::Pg { store, .. } => store.publish(archive),
        }
    }

    pub(crate) fn versions(&self, name: &str) -> Result<Vec<Version>, StoreError> {
        match self {
            HubStore::Dir(s) => s.versions(name),
            HubStore::Pg { store, .. } => store.versions(name),
        }
    }

    pub(crate) fn yank(&self, name: &str, version: &str) -> Result<Version, StoreError> {
        match self {
            HubStore::Dir(s) => s.yank(name, version),
            HubStore::Pg { store, .. } => store.yank(name, version),
        }
    }

    pub(crate) fn delete(&self, name: &str) -> Result<usize, StoreError> {
        match self {
            HubStore::Dir(s) => s.delete(name),
            HubStore::Pg { store, .. } => store.delete(name),
        }
    }

    pub(crate) fn token_scope(&self, token: &str) -> Option<Scope> {
        match self {
            HubStore::Dir(s) => s.token_scope(token),
            HubStore::Pg { store, .. } => store.token_scope(token),
        }
    }

    pub(crate) fn has_tokens(&self) -> bool {
        match self {
            HubStore::Dir(s) => s.has_tokens(),
            HubStore::Pg { store, .. } => store.has_tokens(),
        }
    }
}

/// Creates a token of `scope` in `store` (a directory or a PostgreSQL URI) without serving it.
pub(crate) fn create_token(store: &str, scope: Scope) -> Result<String> {
    if is_database(store) {
        return pg::create_token_at(store, scope)
            .with_context(|| format!("cannot create a token in {}", pg::redact_uri(store)));
    }
    let s = Store::open(Path::new(store))
        .with_context(|| format!("cannot open the hub store {store}"))?;
    Ok(s.create_token(scope)?)
}

/// Brings the database at `uri` to this build's schema (`hub migrate`); returns its version.
pub(crate) fn migrate(uri: &str) -> Result<u32> {
    if !is_database(uri) {
        anyhow::bail!(
            "`{uri}` is not a PostgreSQL URI (postgres://… or postgresql://…); a directory store needs no migration"
        );
    }
    pg::migrate(uri).with_context(|| format!("cannot migrate {}", pg::redact_uri(uri)))
}
