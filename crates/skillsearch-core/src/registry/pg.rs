//! The hub's PostgreSQL store: skills, versions, bundles and tokens in one database that any
//! number of stateless replicas share. The database is the source of truth; each replica serves
//! a derived tree of the current versions (`<cache>/live/`, the same layout and the same atomic
//! swap as the embedded [`Store`](super::store::Store)), kept in step by [`PgStore::sync`]:
//! after each write of its own, on a `NOTIFY skillsearch_hub` from any replica, and every
//! catch-up period ([`PgStore::follow`]).
//!
//! Client: the blocking `postgres` crate. The engine library is synchronous; `postgres` is
//! tokio-postgres with a small current-thread runtime owned by each client, so no runtime has to
//! be threaded through the store or the server, and LISTEN needs only a thread of its own
//! (`Notifications::timeout_iter`). Connections are plain (no TLS): a unix socket or a network
//! the operator trusts.
//!
//! Schema (see `docs/hub-store.md`): `skills(name)`, `versions(seq, name, version, sha256, size,
//! published_at, yanked, bundle)` with `unique(name, version)`, `tokens(id, scope, sha256,
//! created)`, versioned by `schema_migrations` and changed only by [`migrate`]
//! (`skillsearch hub migrate --store URI`).

use super::store::{
    LiveTree, Published, Scope, StoreError, Validated, Version, hex, now, republished, valid_name,
    validate,
};
use postgres::fallible_iterator::FallibleIterator;
use postgres::{Client, NoTls};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// The channel every write notifies (payload: the skill name, or empty for a token).
pub const CHANNEL: &str = "skillsearch_hub";

/// How long a connection attempt (TCP) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The migrations, in order; migration `i + 1` is `MIGRATIONS[i]`. Never edit one that shipped:
/// add the next.
const MIGRATIONS: &[&str] = &[
    // 1: skills, their versions with the bundle, tokens.
    "CREATE TABLE skills (
         name text PRIMARY KEY,
         created_at bigint NOT NULL
     );
     CREATE TABLE versions (
         seq bigserial PRIMARY KEY,
         name text NOT NULL REFERENCES skills(name) ON DELETE CASCADE,
         version text NOT NULL,
         sha256 text NOT NULL,
         size bigint NOT NULL,
         published_at bigint NOT NULL,
         yanked boolean NOT NULL DEFAULT false,
         bundle bytea NOT NULL,
         UNIQUE (name, version)
     );
     CREATE TABLE tokens (
         id text PRIMARY KEY,
         scope text NOT NULL CHECK (scope IN ('read', 'publish')),
         sha256 text NOT NULL,
         created bigint NOT NULL
     );",
];

/// A connection to `config` whose schema is the one this build reads and writes (otherwise the
/// error says what to do).
fn checked_client(config: &postgres::Config, shown: &str) -> Result<Client, StoreError> {
    let mut client = connect(config, shown)?;
    let have = schema_version(&mut client)
        .map_err(|e| StoreError::Database(format!("hub store at {shown}: {}", describe(&e))))?;
    if have < SCHEMA_VERSION {
        return Err(StoreError::Database(format!(
            "the hub store at {shown} has schema version {have}, this skillsearch needs {SCHEMA_VERSION}: run `skillsearch hub migrate --store {shown}`"
        )));
    }
    if have > SCHEMA_VERSION {
        return Err(StoreError::Database(format!(
            "the hub store at {shown} has schema version {have}, newer than this skillsearch knows ({SCHEMA_VERSION}); upgrade skillsearch"
        )));
    }
    Ok(client)
}

/// A new token, its id and the SHA-256 that is stored.
fn new_token() -> Result<(String, String, String), StoreError> {
    let mut secret = [0u8; 24];
    getrandom::fill(&mut secret)
        .map_err(|e| StoreError::Database(format!("no system randomness: {e}")))?;
    let id = crate::corpus::bundle::random_hex(12);
    let token = format!("skh_{id}_{}", hex(&secret));
    let sha = hex(&Sha256::digest(token.as_bytes()));
    Ok((token, id, sha))
}

fn insert_token(c: &mut Client, id: &str, scope: Scope, sha: &str) -> Result<(), postgres::Error> {
    let scope_text = match scope {
        Scope::Read => "read",
        Scope::Publish => "publish",
    };
    let mut tx = c.transaction()?;
    tx.execute(
        "INSERT INTO tokens (id, scope, sha256, created) VALUES ($1, $2, $3, $4)",
        &[&id, &scope_text, &sha, &(now() as i64)],
    )?;
    tx.execute("SELECT pg_notify($1, '')", &[&CHANNEL])?;
    tx.commit()
}

/// Creates a token of `scope` in the store at `uri` without syncing any tree (`hub token
/// create --store URI`); returns it (shown once).
pub fn create_token_at(uri: &str, scope: Scope) -> Result<String, StoreError> {
    let shown = redact_uri(uri);
    let mut client = checked_client(&parse_uri(uri)?, &shown)?;
    let (token, id, sha) = new_token()?;
    insert_token(&mut client, &id, scope, &sha)
        .map_err(|e| StoreError::Database(format!("hub store at {shown}: {}", describe(&e))))?;
    Ok(token)
}

/// The schema version this build reads and writes.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// `uri` with any password replaced by `***` (URL user info, a `password=` parameter), for
/// messages and logs.
pub fn redact_uri(uri: &str) -> String {
    let mut out = uri.to_owned();
    for scheme in ["postgresql://", "postgres://"] {
        if let Some(rest) = uri.strip_prefix(scheme) {
            let end = rest.find(['/', '?']).unwrap_or(rest.len());
            if let Some(at) = rest[..end].rfind('@')
                && let Some(colon) = rest[..at].find(':')
                && colon + 1 < at
            {
                out = format!("{scheme}{}:***{}", &rest[..colon], &rest[at..]);
            }
            break;
        }
    }
    let re = regex::Regex::new(r"(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]*)")
        .expect("a valid pattern");
    re.replace_all(&out, "${1}***").into_owned()
}

/// Parses a connection string: `postgres://user:pw@host:port/db`, a unix-socket URI such as
/// `postgresql://postgres:@/postgres?host=/tmp/dir`, or `key=value` pairs.
pub fn parse_uri(uri: &str) -> Result<postgres::Config, StoreError> {
    let mut config: postgres::Config = uri.parse().map_err(|e| {
        StoreError::Database(format!(
            "`{}` is not a PostgreSQL connection URI: {e}",
            redact_uri(uri)
        ))
    })?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    if config.get_application_name().is_none() {
        config.application_name("skillsearch-hub");
    }
    Ok(config)
}

/// The error text of `e` with its causes (the crate's own text is only "db error" or "error
/// connecting to server").
fn describe(e: &postgres::Error) -> String {
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(cause) = src {
        s.push_str(": ");
        s.push_str(&cause.to_string());
        src = cause.source();
    }
    s
}

fn connect(config: &postgres::Config, shown: &str) -> Result<Client, StoreError> {
    config.connect(NoTls).map_err(|e| {
        StoreError::Database(format!(
            "cannot reach the hub store's PostgreSQL at {shown}: {}",
            describe(&e)
        ))
    })
}

/// The schema version of the database `client` is connected to (0: never migrated).
fn schema_version(client: &mut Client) -> Result<u32, postgres::Error> {
    match client.query_one(
        "SELECT coalesce(max(version), 0)::int4 FROM schema_migrations",
        &[],
    ) {
        Ok(row) => Ok(row.get::<_, i32>(0).max(0) as u32),
        Err(e) if e.code() == Some(&postgres::error::SqlState::UNDEFINED_TABLE) => Ok(0),
        Err(e) => Err(e),
    }
}

/// Brings the schema of the database at `uri` to [`SCHEMA_VERSION`], one transaction per
/// migration (a failed one leaves the version before it); returns the version now. Running it
/// again does nothing; two at once are serialised by an advisory lock.
pub fn migrate(uri: &str) -> Result<u32, StoreError> {
    let shown = redact_uri(uri);
    let config = parse_uri(uri)?;
    let mut client = connect(&config, &shown)?;
    let err = |e: postgres::Error| {
        StoreError::Database(format!(
            "migrating the hub store at {shown}: {}",
            describe(&e)
        ))
    };
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (
                 version int4 PRIMARY KEY,
                 applied_at bigint NOT NULL
             );
             SELECT pg_advisory_lock(7310552911);",
        )
        .map_err(err)?;
    let result = (|| {
        let have = schema_version(&mut client)?;
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(have as usize) {
            let version = i as i32 + 1;
            let mut tx = client.transaction()?;
            tx.batch_execute(sql)?;
            tx.execute(
                "INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)",
                &[&version, &(now() as i64)],
            )?;
            tx.commit()?;
            tracing::info!(target: "hub", version, "hub store schema migrated");
        }
        schema_version(&mut client)
    })();
    let _ = client.batch_execute("SELECT pg_advisory_unlock(7310552911)");
    let now = result.map_err(err)?;
    if now > SCHEMA_VERSION {
        return Err(StoreError::Database(format!(
            "the hub store at {shown} has schema version {now}, newer than this skillsearch knows ({SCHEMA_VERSION}); upgrade skillsearch"
        )));
    }
    Ok(now)
}

#[derive(Debug, Clone)]
struct TokenRow {
    scope: Scope,
    sha256: String,
}

/// See the module documentation.
pub struct PgStore {
    config: postgres::Config,
    /// The URI without its password: the only form that is ever shown.
    shown: String,
    cache: PathBuf,
    tree: LiveTree,
    /// The connection for requests (reconnected when it is found dead).
    conn: Mutex<Option<Client>>,
    /// One sync of the live tree at a time (taken before `conn`, never after).
    syncing: Mutex<()>,
    /// Tokens as last read: a replica answers token checks while the database is away.
    tokens: RwLock<HashMap<String, TokenRow>>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("uri", &self.shown)
            .field("cache", &self.cache)
            .finish_non_exhaustive()
    }
}

/// The file in the cache directory that says which database its live tree was synced from.
const SYNCED_FILE: &str = "synced-from";

impl PgStore {
    /// Connects to the store at `uri` (its schema must be at [`SCHEMA_VERSION`]: otherwise the
    /// error says to run `skillsearch hub migrate`), and brings `cache_dir/live/` in step with
    /// it. When the database cannot be reached but `cache_dir` holds a tree synced from the
    /// same database before, that tree is served as it is (with a warning) and writes fail until
    /// the database is back; with no such tree, the open fails.
    pub fn open(uri: &str, cache_dir: &Path) -> Result<PgStore, StoreError> {
        let shown = redact_uri(uri);
        let config = parse_uri(uri)?;
        for sub in ["live", "tmp"] {
            let d = cache_dir.join(sub);
            std::fs::create_dir_all(&d).map_err(|e| StoreError::Io {
                path: d.clone(),
                source: e,
            })?;
        }
        let store = PgStore {
            config,
            shown,
            cache: cache_dir.to_path_buf(),
            tree: LiveTree::new(cache_dir.join("live"), cache_dir.join("tmp")),
            conn: Mutex::new(None),
            syncing: Mutex::new(()),
            tokens: RwLock::new(HashMap::new()),
        };
        store.tree.clear_tmp();
        let marker = cache_dir.join(SYNCED_FILE);
        match store.sync() {
            Ok(_) => {
                std::fs::write(&marker, &store.shown).map_err(|e| StoreError::Io {
                    path: marker.clone(),
                    source: e,
                })?;
                Ok(store)
            }
            Err(StoreError::Database(why))
                if !why.contains("hub migrate")
                    && std::fs::read_to_string(&marker).is_ok_and(|s| s == store.shown) =>
            {
                tracing::warn!(target: "hub", store = %store.shown, error = %why,
                    "the hub store's database is unreachable; serving the tree synced before until it is back");
                Ok(store)
            }
            Err(e) => Err(e),
        }
    }

    /// The skill root `hub serve` indexes.
    pub fn live(&self) -> PathBuf {
        self.tree.live().to_path_buf()
    }

    /// The connection URI without its password.
    pub fn shown_uri(&self) -> &str {
        &self.shown
    }

    fn new_client(&self) -> Result<Client, StoreError> {
        checked_client(&self.config, &self.shown)
    }

    fn db_error(&self, e: &postgres::Error) -> StoreError {
        StoreError::Database(format!("hub store at {}: {}", self.shown, describe(e)))
    }

    /// Runs `f` on the request connection: the one kept when it still answers, else a new one.
    fn with_client<T>(
        &self,
        f: impl FnOnce(&mut Client) -> Result<T, postgres::Error>,
    ) -> Result<T, StoreError> {
        let mut guard = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = guard.as_mut()
            && (c.is_closed() || c.is_valid(Duration::from_secs(2)).is_err())
        {
            *guard = None;
        }
        let client = match guard.as_mut() {
            Some(c) => c,
            None => guard.insert(self.new_client()?),
        };
        let result = f(client);
        if result.is_err() && client.is_closed() {
            *guard = None;
        }
        result.map_err(|e| self.db_error(&e))
    }

    /// Every version of `name` in publish order (empty: never published, or deleted).
    pub fn versions(&self, name: &str) -> Result<Vec<Version>, StoreError> {
        if !valid_name(name) {
            return Ok(Vec::new());
        }
        let rows = self.with_client(|c| {
            c.query(
                "SELECT version, sha256, published_at, yanked, size FROM versions
                 WHERE name = $1 ORDER BY seq",
                &[&name],
            )
        })?;
        Ok(rows
            .iter()
            .map(|r| Version {
                version: r.get(0),
                sha256: r.get(1),
                published_at: r.get::<_, i64>(2).max(0) as u64,
                yanked: r.get(3),
                size: r.get::<_, i64>(4).max(0) as u64,
            })
            .collect())
    }

    /// The published skills' names, sorted.
    pub fn names(&self) -> Result<Vec<String>, StoreError> {
        let rows = self.with_client(|c| c.query("SELECT name FROM skills ORDER BY name", &[]))?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    /// Validates `archive` as the embedded store does, records the version in one transaction
    /// (which notifies the other replicas as it commits), then serves it here.
    pub fn publish(&self, archive: &[u8]) -> Result<Published, StoreError> {
        let Validated {
            name,
            version,
            zip,
            sha256,
            skipped,
        } = validate(archive, &self.cache.join("tmp"))?;
        // Ok(None): the version went in; Ok(Some((sha, yanked))): it was there already.
        let existing = self.with_client(|c| {
            let mut tx = c.transaction()?;
            tx.execute(
                "INSERT INTO skills (name, created_at) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                &[&name, &(now() as i64)],
            )?;
            let inserted = tx.query_opt(
                "INSERT INTO versions (name, version, sha256, size, published_at, bundle)
                 VALUES ($1, $2, $3, $4, $5, $6)
                 ON CONFLICT (name, version) DO NOTHING RETURNING seq",
                &[
                    &name,
                    &version,
                    &sha256,
                    &(zip.len() as i64),
                    &(now() as i64),
                    &zip,
                ],
            )?;
            if inserted.is_some() {
                tx.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &name])?;
                tx.commit()?;
                return Ok(None);
            }
            let row = tx.query_one(
                "SELECT sha256, yanked FROM versions WHERE name = $1 AND version = $2",
                &[&name, &version],
            )?;
            Ok(Some((row.get::<_, String>(0), row.get::<_, bool>(1))))
        })?;
        if let Some((sha, yanked)) = existing {
            return republished(name, version, skipped, &sha256, (&sha, yanked));
        }
        self.sync_after_write();
        Ok(Published {
            name,
            version,
            created: true,
            skipped,
        })
    }

    /// After a committed write: serve it here at once. The write stands whatever happens here
    /// (the next sync puts the tree right), so a failure is only logged.
    fn sync_after_write(&self) {
        if let Err(e) = self.sync() {
            tracing::warn!(target: "hub", store = %self.shown, error = %e,
                "written to the hub store, but this replica's tree was not brought in step");
        }
    }

    /// Marks `version` of `name` yanked: no longer served; when it was the current version,
    /// the latest one before it that is not yanked is served again (or none).
    pub fn yank(&self, name: &str, version: &str) -> Result<Version, StoreError> {
        let row = self.with_client(|c| {
            let mut tx = c.transaction()?;
            let row = tx.query_opt(
                "UPDATE versions SET yanked = true WHERE name = $1 AND version = $2
                 RETURNING version, sha256, published_at, yanked, size",
                &[&name, &version],
            )?;
            if row.is_some() {
                tx.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &name])?;
                tx.commit()?;
            }
            Ok(row)
        })?;
        let Some(r) = row else {
            return Err(StoreError::NotFound(format!(
                "`{name}` has no version `{version}`"
            )));
        };
        self.sync_after_write();
        Ok(Version {
            version: r.get(0),
            sha256: r.get(1),
            published_at: r.get::<_, i64>(2).max(0) as u64,
            yanked: r.get(3),
            size: r.get::<_, i64>(4).max(0) as u64,
        })
    }

    /// Removes `name`: every version and the served tree; returns how many versions it had.
    pub fn delete(&self, name: &str) -> Result<usize, StoreError> {
        let removed = self.with_client(|c| {
            let mut tx = c.transaction()?;
            let n = tx.execute("DELETE FROM versions WHERE name = $1", &[&name])?;
            let skills = tx.execute("DELETE FROM skills WHERE name = $1", &[&name])?;
            if n + skills > 0 {
                tx.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &name])?;
                tx.commit()?;
            }
            Ok(n)
        })?;
        if removed == 0 {
            return Err(StoreError::NotFound(format!("no published skill `{name}`")));
        }
        self.sync_after_write();
        Ok(removed as usize)
    }

    /// Brings `live/` in step with the database: each skill's current version (the latest not
    /// yanked) served, skills with none removed. Only bundles whose digest differs from what is
    /// served are fetched, and a fetched bundle must have the recorded digest. Also refreshes
    /// the tokens. Returns how many skills changed.
    pub fn sync(&self) -> Result<usize, StoreError> {
        let _one = self.syncing.lock().unwrap_or_else(|p| p.into_inner());
        let (current, tokens) = self.with_client(|c| {
            let current = c.query(
                "SELECT DISTINCT ON (name) name, version, sha256 FROM versions
                 WHERE NOT yanked ORDER BY name, seq DESC",
                &[],
            )?;
            let tokens = c.query("SELECT id, scope, sha256 FROM tokens", &[])?;
            Ok((current, tokens))
        })?;
        let tokens: HashMap<String, TokenRow> = tokens
            .iter()
            .filter_map(|r| {
                let scope = Scope::parse(r.get(1))?;
                Some((
                    r.get::<_, String>(0),
                    TokenRow {
                        scope,
                        sha256: r.get(2),
                    },
                ))
            })
            .collect();
        *self.tokens.write().unwrap_or_else(|p| p.into_inner()) = tokens;

        let mut changed = 0;
        let mut wanted = std::collections::HashSet::new();
        for r in &current {
            let name: String = r.get(0);
            let version: String = r.get(1);
            let sha: String = r.get(2);
            if !valid_name(&name) {
                continue;
            }
            wanted.insert(name.clone());
            if self.tree.served(&name).is_some_and(|m| m.sha256 == sha) {
                continue;
            }
            let bundle = self.with_client(|c| {
                c.query_opt(
                    "SELECT bundle FROM versions WHERE name = $1 AND version = $2 AND NOT yanked",
                    &[&name, &version],
                )
            })?;
            let Some(bundle) = bundle else {
                continue; // yanked or deleted since: the next sync sees it
            };
            let zip: Vec<u8> = bundle.get(0);
            if hex(&Sha256::digest(&zip)) != sha {
                tracing::warn!(target: "hub", skill = %name, %version,
                    "the stored bundle does not match its recorded digest; not served");
                continue;
            }
            self.tree.go_live(&name, Some((&version, &sha, &zip)))?;
            changed += 1;
        }
        for name in self.tree.names()? {
            if !wanted.contains(&name) {
                self.tree.go_live(&name, None)?;
                changed += 1;
            }
        }
        Ok(changed)
    }

    /// Creates a token of `scope`; returns it (shown once: only its digest is kept).
    pub fn create_token(&self, scope: Scope) -> Result<String, StoreError> {
        let (token, id, sha) = new_token()?;
        self.with_client(|c| insert_token(c, &id, scope, &sha))?;
        self.tokens
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, TokenRow { scope, sha256: sha });
        Ok(token)
    }

    /// The scope of `token`, or `None` when it is not one of this store's. Answered from the
    /// tokens last read; one not among them is looked up (a token made through another replica
    /// a moment ago), so only an unknown token costs a query.
    pub fn token_scope(&self, token: &str) -> Option<Scope> {
        let id = token.strip_prefix("skh_")?.split('_').next()?;
        if id.len() != 12 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let known = self
            .tokens
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .cloned();
        let row = match known {
            Some(r) => r,
            None => {
                let found = self
                    .with_client(|c| {
                        c.query_opt("SELECT scope, sha256 FROM tokens WHERE id = $1", &[&id])
                    })
                    .inspect_err(|e| {
                        tracing::warn!(target: "hub", error = %e, "token lookup failed");
                    })
                    .ok()??;
                let row = TokenRow {
                    scope: Scope::parse(found.get(0))?,
                    sha256: found.get(1),
                };
                self.tokens
                    .write()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(id.to_owned(), row.clone());
                row
            }
        };
        let got = hex(&Sha256::digest(token.as_bytes()));
        crate::secrets::constant_time_eq(got.as_bytes(), row.sha256.as_bytes()).then_some(row.scope)
    }

    /// Whether any token exists (a hub with none accepts no publish).
    pub fn has_tokens(&self) -> bool {
        if !self
            .tokens
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty()
        {
            return true;
        }
        self.with_client(|c| c.query_one("SELECT EXISTS (SELECT 1 FROM tokens)", &[]))
            .map(|r| r.get::<_, bool>(0))
            .unwrap_or(false)
    }

    /// Keeps this replica's tree in step on a background thread: it LISTENs on its own
    /// connection, and on a notification, or every `catch_up` (what a lost notification or a
    /// reconnect may have missed), calls [`sync`](Self::sync), then `on_change` when anything
    /// changed. When the database goes away it reconnects with backoff (logging a warning) and
    /// the tree stays as it was meanwhile. The thread ends when the returned [`Follower`] is
    /// dropped or stopped.
    pub fn follow(
        self: &Arc<Self>,
        catch_up: Duration,
        on_change: impl Fn() + Send + 'static,
    ) -> Follower {
        let stop = Arc::new(AtomicBool::new(false));
        let store = Arc::clone(self);
        let flag = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name("hub-pg-follow".into())
            .spawn(move || store.follow_loop(catch_up, &flag, &on_change))
            .expect("spawning the hub store's follower thread");
        Follower {
            stop,
            handle: Some(handle),
        }
    }

    fn follow_loop(&self, catch_up: Duration, stop: &AtomicBool, on_change: &dyn Fn()) {
        const SLICE: Duration = Duration::from_millis(200);
        const MAX_BACKOFF: Duration = Duration::from_secs(5);
        let mut listener: Option<Client> = None;
        let mut backoff = Duration::from_millis(100);
        let mut failures = 0u32;
        let mut next_sync = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            let Some(client) = listener.as_mut() else {
                match self.listen() {
                    Ok(c) => {
                        if failures > 0 {
                            tracing::info!(target: "hub", store = %self.shown, "hub store reachable again; catching up");
                        }
                        listener = Some(c);
                        failures = 0;
                        backoff = Duration::from_millis(100);
                        next_sync = Instant::now(); // what was missed while away
                    }
                    Err(e) => {
                        if failures.is_multiple_of(10) {
                            tracing::warn!(target: "hub", error = %e, retry_in_ms = backoff.as_millis() as u64,
                                "hub store unreachable; serving the tree as it is");
                        }
                        failures += 1;
                        sleep_unless(stop, backoff);
                        backoff = (backoff * 2).min(MAX_BACKOFF);
                    }
                }
                continue;
            };
            let wait = next_sync
                .saturating_duration_since(Instant::now())
                .min(SLICE);
            let mut notified = false;
            {
                let mut n = client.notifications();
                let first = n.timeout_iter(wait).next();
                match first {
                    Ok(Some(_)) => {
                        notified = true;
                        while let Ok(Some(_)) = n.iter().next() {}
                    }
                    Ok(None) => {}
                    Err(e) => {
                        tracing::warn!(target: "hub", store = %self.shown, error = %describe(&e), "hub store notifications lost");
                    }
                }
            }
            if client.is_closed() {
                tracing::warn!(target: "hub", store = %self.shown, "hub store connection closed; reconnecting");
                listener = None;
                continue;
            }
            if notified || Instant::now() >= next_sync {
                match self.sync() {
                    Ok(0) => {}
                    Ok(_) => on_change(),
                    Err(e) => {
                        tracing::warn!(target: "hub", error = %e, "hub store sync failed; serving the tree as it is");
                    }
                }
                next_sync = Instant::now() + catch_up;
            }
        }
    }

    fn listen(&self) -> Result<Client, StoreError> {
        let mut c = self.new_client()?;
        c.batch_execute(&format!("LISTEN {CHANNEL}"))
            .map_err(|e| self.db_error(&e))?;
        Ok(c)
    }
}

fn sleep_unless(stop: &AtomicBool, total: Duration) {
    let until = Instant::now() + total;
    while !stop.load(Ordering::Relaxed) {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}

/// The thread [`PgStore::follow`] started; stops it when dropped.
#[derive(Debug)]
pub struct Follower {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Follower {
    /// Stops the thread and waits for it.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.halt();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_parse_and_never_show_a_password() {
        let c = parse_uri("postgresql://postgres:@/postgres?host=/tmp/pg.x1").unwrap();
        assert_eq!(c.get_user(), Some("postgres"));
        assert_eq!(c.get_dbname(), Some("postgres"));
        assert!(matches!(
            c.get_hosts(),
            [postgres::config::Host::Unix(p)] if p == Path::new("/tmp/pg.x1")
        ));
        let c = parse_uri("postgres://hub:s3cret@db.example:6432/skills").unwrap();
        assert_eq!(c.get_user(), Some("hub"));
        assert_eq!(c.get_password(), Some(&b"s3cret"[..]));
        assert_eq!(c.get_ports(), [6432]);
        assert!(matches!(
            c.get_hosts(),
            [postgres::config::Host::Tcp(h)] if h == "db.example"
        ));
        assert_eq!(c.get_dbname(), Some("skills"));
        assert!(parse_uri("host=/tmp/x user=postgres password=pw").is_ok());

        assert_eq!(
            redact_uri("postgres://hub:s3cret@db.example:6432/skills"),
            "postgres://hub:***@db.example:6432/skills"
        );
        assert_eq!(
            redact_uri("postgresql://postgres:@/postgres?host=/tmp/d"),
            "postgresql://postgres:@/postgres?host=/tmp/d"
        );
        assert_eq!(
            redact_uri("postgres://u@h/db?password=s3cret&sslmode=disable"),
            "postgres://u@h/db?password=***&sslmode=disable"
        );
        assert_eq!(
            redact_uri("host=h user=u password='a b' dbname=d"),
            "host=h user=u password=*** dbname=d"
        );
        let bad = parse_uri("postgres://hub:s3cret@db.example:notaport/x").unwrap_err();
        assert!(!bad.to_string().contains("s3cret"), "{bad}");
    }
}
