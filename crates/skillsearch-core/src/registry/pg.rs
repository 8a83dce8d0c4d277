//! The hub's PostgreSQL store: skills, versions, bundles and tokens in one database that any
//! number of stateless replicas share. The database is the source of truth; each replica serves
//! a derived tree of the current versions (`<cache>/live/`, the same layout and the same atomic
//! swap as the embedded [`Store`](super::store::Store)). A replica brings the skill it wrote
//! into its tree at once; the others follow the change log (`changes`: one row per write,
//! numbered in commit order) from where they were ([`PgStore::sync`]), on a `NOTIFY
//! skillsearch_hub` from any replica and every catch-up period ([`PgStore::follow`]). Each
//! write therefore costs every replica work for the skills it changed, not for the catalogue;
//! the whole catalogue is compared only when a replica cannot trust its place in the log
//! (first start, a log pruned past it, another database).
//!
//! Client: the blocking `postgres` crate. The engine library is synchronous; `postgres` is
//! tokio-postgres with a small current-thread runtime owned by each client, so no runtime has to
//! be threaded through the store or the server, and LISTEN needs only a thread of its own
//! (`Notifications::timeout_iter`). Connections are plain (no TLS): a unix socket or a network
//! the operator trusts.
//!
//! Schema (see `docs/hub-store.md`): `skills(name)`, `versions(seq, name, version, sha256, size,
//! published_at, yanked, bundle)` with `unique(name, version)`, `tokens(id, scope, sha256,
//! created)`, `changes(id, kind, name, at)` and `hub_state(epoch, pruned_through)`, versioned by
//! `schema_migrations` and changed only by [`migrate`] (`skillsearch hub migrate --store URI`).
//!
//! Migration 3 adds `vectors(embedder, dim, text_key, vec)`: each skill text's sentence vector,
//! computed once by whichever replica embedded it first and taken by the others before they
//! embed ([`SharedVectors`]); `vec` is the `dim` values as f32 little-endian in a `bytea` (no
//! pgvector: nothing is searched in the database, see `docs/hub-store.md`).

use super::store::{
    LiveTree, Published, Scope, StoreError, Validated, Version, hex, io, now, republished,
    valid_name, validate,
};
use crate::retrieve::semantic::SharedVectors;
use postgres::fallible_iterator::FallibleIterator;
use postgres::{Client, NoTls};
use sha2::{Digest, Sha256};
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// The channel every write notifies (payload: the skill name, or empty for a token). A
/// notification only wakes a replica: what changed is read from the change log.
pub const CHANNEL: &str = "skillsearch_hub";

/// How long the change log keeps a row. A replica away for longer finds the log pruned past
/// its place and compares the whole catalogue once.
pub const CHANGE_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// Change-log rows a replica reads at a time.
const CHANGE_BATCH: i64 = 5_000;

/// The advisory lock every write takes before it numbers its change, held to its commit.
const CHANGES_LOCK: i64 = 7_310_552_912;

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
    // 2: the change log replicas follow (one row per write, ids in commit order), the database's
    // identity and how far the log was pruned, and an index for each skill's current version.
    "CREATE TABLE changes (
         id bigserial PRIMARY KEY,
         kind text NOT NULL CHECK (kind IN ('skill', 'token')),
         name text NOT NULL,
         at bigint NOT NULL
     );
     CREATE INDEX changes_at ON changes (at);
     CREATE TABLE hub_state (
         only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
         epoch text NOT NULL,
         pruned_through bigint NOT NULL DEFAULT 0
     );
     INSERT INTO hub_state (epoch) VALUES (gen_random_uuid()::text);
     CREATE INDEX versions_current ON versions (name, seq) WHERE NOT yanked;",
    // 3: sentence vectors shared between replicas, by embedder id, dimension and text key (the
    // first 8 bytes of the SHA-256 of the embedded text, as the local vector store keys them);
    // `vec`: `dim` f32 values, little-endian.
    "CREATE TABLE vectors (
         embedder text NOT NULL,
         dim int4 NOT NULL CHECK (dim > 0),
         text_key bigint NOT NULL,
         vec bytea NOT NULL,
         PRIMARY KEY (embedder, dim, text_key)
     );",
];

/// Vectors written per statement.
const VECTOR_WRITE_BATCH: usize = 500;
/// Vectors read per query.
const VECTOR_READ_BATCH: usize = 5_000;

/// Records one write in the change log and notifies the replicas, inside the write's
/// transaction `tx`; also prunes rows older than [`CHANGE_RETENTION`]. Change ids are handed out
/// in commit order: the lock, held to the commit, makes every other write wait for its id, so
/// a replica that has read the log up to id N never sees a smaller id commit later.
fn record_change(
    tx: &mut postgres::Transaction<'_>,
    kind: &str,
    name: &str,
) -> Result<(), postgres::Error> {
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&CHANGES_LOCK])?;
    let cutoff = now().saturating_sub(CHANGE_RETENTION.as_secs()) as i64;
    prune(tx, cutoff)?;
    tx.execute(
        "INSERT INTO changes (kind, name, at) VALUES ($1, $2, $3)",
        &[&kind, &name, &(now() as i64)],
    )?;
    tx.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &name])?;
    Ok(())
}

/// Deletes the change-log rows written at or before `cutoff` (Unix seconds) and records the
/// highest id deleted; returns how many went.
fn prune(c: &mut impl postgres::GenericClient, cutoff: i64) -> Result<u64, postgres::Error> {
    let row = c.query_one(
        "WITH gone AS (DELETE FROM changes WHERE at <= $1 RETURNING id),
              moved AS (UPDATE hub_state
                        SET pruned_through = greatest(pruned_through, (SELECT max(id) FROM gone))
                        WHERE EXISTS (SELECT 1 FROM gone))
         SELECT count(*) FROM gone",
        &[&cutoff],
    )?;
    Ok(row.get::<_, i64>(0).max(0) as u64)
}

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
    record_change(&mut tx, "token", "")?;
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
    /// One sync of the live tree at a time (taken before `conn`, never after), and this
    /// replica's place in the change log (`None`: not trusted; the next sync compares all).
    syncing: Mutex<Option<Place>>,
    /// Tokens as last read: a replica answers token checks while the database is away.
    tokens: RwLock<HashMap<String, TokenRow>>,
    /// The connection for shared vectors (tens of megabytes read at a start): apart from the
    /// request connection, so token checks and writes never wait behind it.
    vec_conn: Mutex<Option<Client>>,
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

/// The file in the cache directory that holds its [`Place`].
const PLACE_FILE: &str = "sync-place.json";

/// How far a replica's tree follows the change log: every change up to `change` of the
/// database `uri` (shown form) whose `hub_state.epoch` is `epoch` is in it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Place {
    uri: String,
    epoch: String,
    change: i64,
}

/// What one [`PgStore::sync`] did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Synced {
    /// The skills whose served tree changed (added, replaced or removed), sorted.
    pub changed: Vec<String>,
    /// Whether the whole catalogue was compared (the replica could not trust its place in the
    /// change log) rather than only what the log named.
    pub full: bool,
}

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
            std::fs::create_dir_all(&d).map_err(|e| io(&d, e))?;
        }
        let store = PgStore {
            config,
            shown,
            cache: cache_dir.to_path_buf(),
            tree: LiveTree::new(cache_dir.join("live"), cache_dir.join("tmp")),
            conn: Mutex::new(None),
            syncing: Mutex::new(None),
            tokens: RwLock::new(HashMap::new()),
            vec_conn: Mutex::new(None),
        };
        store.tree.clear_tmp();
        let place: Option<Place> = std::fs::read(cache_dir.join(PLACE_FILE))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .filter(|p: &Place| p.uri == store.shown);
        *store.syncing.lock().unwrap_or_else(|p| p.into_inner()) = place;
        let marker = cache_dir.join(SYNCED_FILE);
        match store.sync() {
            Ok(_) => {
                std::fs::write(&marker, &store.shown).map_err(|e| io(&marker, e))?;
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
        if e.code() == Some(&postgres::error::SqlState::DISK_FULL) {
            return StoreError::Full(format!(
                "hub store at {}: the database's disk is full: {}",
                self.shown,
                describe(e)
            ));
        }
        StoreError::Database(format!("hub store at {}: {}", self.shown, describe(e)))
    }

    /// Runs `f` on the request connection: the one kept when it still answers, else a new one.
    fn with_client<T>(
        &self,
        f: impl FnOnce(&mut Client) -> Result<T, postgres::Error>,
    ) -> Result<T, StoreError> {
        self.with_conn(&self.conn, f)
    }

    /// Runs `f` on the connection kept in `slot` (replaced when found dead).
    fn with_conn<T>(
        &self,
        slot: &Mutex<Option<Client>>,
        f: impl FnOnce(&mut Client) -> Result<T, postgres::Error>,
    ) -> Result<T, StoreError> {
        let mut guard = slot.lock().unwrap_or_else(|p| p.into_inner());
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

    /// The stored vectors of embedder `model` with dimension `dim` for `keys` (text keys, see
    /// [`crate::corpus::text_hash`]), decoded; a row whose bytes are not `dim` f32 values comes
    /// back with the values it has (the caller skips it). Rows of another embedder or
    /// dimension are never read.
    pub fn vectors(
        &self,
        model: &str,
        dim: usize,
        keys: &[u64],
    ) -> Result<Vec<(u64, Vec<f32>)>, StoreError> {
        let dim32 = dim as i32;
        let mut out = Vec::new();
        for part in keys.chunks(VECTOR_READ_BATCH) {
            let part: Vec<i64> = part.iter().map(|k| *k as i64).collect();
            let rows = self.with_conn(&self.vec_conn, |c| {
                c.query(
                    "SELECT text_key, vec FROM vectors
                     WHERE embedder = $1 AND dim = $2 AND text_key = ANY($3)",
                    &[&model, &dim32, &part],
                )
            })?;
            out.extend(rows.iter().map(|r| {
                let bytes: &[u8] = r.get(1);
                let v = bytes
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect();
                (r.get::<_, i64>(0) as u64, v)
            }));
        }
        Ok(out)
    }

    /// Stores vectors of embedder `model` with dimension `dim` by text key (one embedded again
    /// replaces what was there: a corrupt row is mended by the next replica that embeds it).
    pub fn put_vectors(
        &self,
        model: &str,
        dim: usize,
        items: &[(u64, Vec<f32>)],
    ) -> Result<(), StoreError> {
        let dim32 = dim as i32;
        for part in items.chunks(VECTOR_WRITE_BATCH) {
            let mut keys = Vec::with_capacity(part.len());
            let mut vecs = Vec::with_capacity(part.len());
            for (k, v) in part {
                if v.len() != dim {
                    return Err(StoreError::Database(format!(
                        "a vector of {} values for `{model}` of dimension {dim}",
                        v.len()
                    )));
                }
                keys.push(*k as i64);
                vecs.push(v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>());
            }
            self.with_conn(&self.vec_conn, |c| {
                c.execute(
                    "INSERT INTO vectors (embedder, dim, text_key, vec)
                     SELECT $1, $2, k, v FROM unnest($3::bigint[], $4::bytea[]) AS t(k, v)
                     ON CONFLICT (embedder, dim, text_key) DO UPDATE SET vec = EXCLUDED.vec",
                    &[&model, &dim32, &keys, &vecs],
                )
            })?;
        }
        Ok(())
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
                record_change(&mut tx, "skill", &name)?;
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
        self.serve_after_write(&name, Some((&sha256, &zip)));
        Ok(Published {
            name,
            version,
            created: true,
            skipped,
        })
    }

    /// After a committed write to `name`: serves its current version here at once (`bundle`:
    /// the digest and bundle just written, not fetched again when they are the current ones).
    /// Only `name` is looked at. The write stands whatever happens here (the follower's next
    /// sync sees the change in the log and puts the tree right), so a failure is only logged.
    fn serve_after_write(&self, name: &str, bundle: Option<(&str, &[u8])>) {
        let _one = self.syncing.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = self.serve_names(&BTreeSet::from([name.to_owned()]), bundle) {
            tracing::warn!(target: "hub", store = %self.shown, skill = %name, error = %e,
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
                record_change(&mut tx, "skill", name)?;
                tx.commit()?;
            }
            Ok(row)
        })?;
        let Some(r) = row else {
            return Err(StoreError::NotFound(format!(
                "`{name}` has no version `{version}`"
            )));
        };
        self.serve_after_write(name, None);
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
                record_change(&mut tx, "skill", name)?;
                tx.commit()?;
            }
            Ok(n)
        })?;
        if removed == 0 {
            return Err(StoreError::NotFound(format!("no published skill `{name}`")));
        }
        self.serve_after_write(name, None);
        Ok(removed as usize)
    }

    /// Brings `live/` in step with the database: each skill's current version (the latest not
    /// yanked) served, skills with none removed. From a trusted place in the change log only
    /// the skills the log names since are looked at (and the tokens reloaded when it names a
    /// token); otherwise (first start, the log pruned past this replica's place, another
    /// database or one restored to an earlier state) every skill is compared and the tokens
    /// reloaded. Either way only bundles whose digest differs from what is served are fetched,
    /// and a fetched bundle must have the recorded digest. The place reached is kept in the
    /// cache directory, so a restarted replica carries on from it.
    pub fn sync(&self) -> Result<Synced, StoreError> {
        let mut place = self.syncing.lock().unwrap_or_else(|p| p.into_inner());
        let head = self.with_client(|c| {
            c.query_one(
                "SELECT epoch, pruned_through,
                        greatest(pruned_through, coalesce((SELECT max(id) FROM changes), 0))
                 FROM hub_state",
                &[],
            )
        })?;
        let (epoch, pruned, top): (String, i64, i64) = (head.get(0), head.get(1), head.get(2));
        let from = place
            .as_ref()
            .filter(|p| p.epoch == epoch && p.change >= pruned && p.change <= top)
            .map(|p| p.change);
        let (synced, reached) = match from {
            Some(from) => self.sync_from(from)?,
            None => {
                if place.is_some() {
                    tracing::info!(target: "hub", store = %self.shown,
                        "this replica's place in the change log cannot be trusted (pruned past it, or another database); comparing every skill");
                }
                // `top` was read before the catalogue: a change committed since is read from
                // the log next time.
                (self.sync_all()?, top)
            }
        };
        let now = Place {
            uri: self.shown.clone(),
            epoch,
            change: reached,
        };
        if place.as_ref() != Some(&now) {
            let p = self.cache.join(PLACE_FILE);
            crate::fsio::write_atomic(&p, &serde_json::to_vec(&now).unwrap_or_default())
                .map_err(|(p, e)| io(&p, e))?;
            *place = Some(now);
        }
        Ok(synced)
    }

    /// The changes after `from` in the log, a batch at a time: serves the skills they name and
    /// reloads the tokens when one names a token. Returns what changed and the last change
    /// applied.
    fn sync_from(&self, from: i64) -> Result<(Synced, i64), StoreError> {
        let mut reached = from;
        let mut changed = BTreeSet::new();
        loop {
            let rows = self.with_client(|c| {
                c.query(
                    "SELECT id, kind, name FROM changes WHERE id > $1 ORDER BY id LIMIT $2",
                    &[&reached, &CHANGE_BATCH],
                )
            })?;
            let Some(last) = rows.last() else { break };
            reached = last.get(0);
            let mut names = BTreeSet::new();
            let mut tokens = false;
            for r in &rows {
                match r.get::<_, &str>(1) {
                    "token" => tokens = true,
                    _ => {
                        names.insert(r.get::<_, String>(2));
                    }
                }
            }
            if tokens {
                self.reload_tokens()?;
            }
            changed.extend(self.serve_names(&names, None)?);
            if (rows.len() as i64) < CHANGE_BATCH {
                break;
            }
        }
        Ok((
            Synced {
                changed: changed.into_iter().collect(),
                full: false,
            },
            reached,
        ))
    }

    /// Serves each of `names` as the database has it now (its current version, or nothing);
    /// returns the names whose tree changed. `bundle`: a digest and bundle already in hand.
    fn serve_names(
        &self,
        names: &BTreeSet<String>,
        bundle: Option<(&str, &[u8])>,
    ) -> Result<Vec<String>, StoreError> {
        let wanted: Vec<&str> = names
            .iter()
            .map(String::as_str)
            .filter(|n| valid_name(n))
            .collect();
        if wanted.is_empty() {
            return Ok(Vec::new());
        }
        let rows = self.with_client(|c| {
            c.query(
                "SELECT DISTINCT ON (name) name, version, sha256 FROM versions
                 WHERE name = ANY($1) AND NOT yanked ORDER BY name, seq DESC",
                &[&wanted],
            )
        })?;
        let current: HashMap<String, (String, String)> = rows
            .iter()
            .map(|r| (r.get(0), (r.get(1), r.get(2))))
            .collect();
        let mut changed = Vec::new();
        for name in wanted {
            let want = current.get(name).map(|(v, sha)| (v.as_str(), sha.as_str()));
            if self.serve(name, want, bundle)? {
                changed.push(name.to_owned());
            }
        }
        Ok(changed)
    }

    /// Compares every skill: serves each one's current version and removes the trees of
    /// skills with none; reloads the tokens.
    fn sync_all(&self) -> Result<Synced, StoreError> {
        let current = self.with_client(|c| {
            c.query(
                "SELECT DISTINCT ON (name) name, version, sha256 FROM versions
                 WHERE NOT yanked ORDER BY name, seq DESC",
                &[],
            )
        })?;
        self.reload_tokens()?;
        let mut changed = BTreeSet::new();
        let mut wanted = std::collections::HashSet::new();
        for r in &current {
            let (name, version, sha): (String, String, String) = (r.get(0), r.get(1), r.get(2));
            if !valid_name(&name) {
                continue;
            }
            wanted.insert(name.clone());
            if self.serve(&name, Some((&version, &sha)), None)? {
                changed.insert(name);
            }
        }
        for name in self.tree.names()? {
            if !wanted.contains(&name) && self.serve(&name, None, None)? {
                changed.insert(name);
            }
        }
        Ok(Synced {
            changed: changed.into_iter().collect(),
            full: true,
        })
    }

    /// Makes `live/<name>` serve `want` (version, digest), or nothing; returns whether the tree
    /// changed. The bundle is fetched only when the served digest differs (from `bundle` when
    /// that is the one wanted), and must have the recorded digest.
    fn serve(
        &self,
        name: &str,
        want: Option<(&str, &str)>,
        bundle: Option<(&str, &[u8])>,
    ) -> Result<bool, StoreError> {
        let served = self.tree.served(name);
        let Some((version, sha)) = want else {
            if served.is_none() && std::fs::symlink_metadata(self.tree.live().join(name)).is_err() {
                return Ok(false);
            }
            self.tree.go_live(name, None)?;
            return Ok(true);
        };
        if served.is_some_and(|m| m.sha256 == sha) {
            return Ok(false);
        }
        let zip: Vec<u8> = match bundle {
            Some((have, zip)) if have == sha => zip.to_vec(),
            _ => {
                let row = self.with_client(|c| {
                    c.query_opt(
                        "SELECT bundle FROM versions WHERE name = $1 AND version = $2 AND NOT yanked",
                        &[&name, &version],
                    )
                })?;
                let Some(row) = row else {
                    return Ok(false); // yanked or deleted since: the log names it again
                };
                row.get(0)
            }
        };
        if hex(&Sha256::digest(&zip)) != sha {
            tracing::warn!(target: "hub", skill = %name, %version,
                "the stored bundle does not match its recorded digest; not served");
            return Ok(false);
        }
        self.tree.go_live(name, Some((version, sha, &zip)))?;
        Ok(true)
    }

    /// Reads every token again.
    fn reload_tokens(&self) -> Result<(), StoreError> {
        let rows = self.with_client(|c| c.query("SELECT id, scope, sha256 FROM tokens", &[]))?;
        let tokens: HashMap<String, TokenRow> = rows
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
        Ok(())
    }

    /// Deletes the change-log rows older than `older_than` (each write also prunes past
    /// [`CHANGE_RETENTION`]); returns how many went. A replica whose place is before them
    /// compares every skill at its next sync.
    pub fn prune_changes(&self, older_than: Duration) -> Result<u64, StoreError> {
        let cutoff = now().saturating_sub(older_than.as_secs()) as i64;
        self.with_client(|c| {
            let mut tx = c.transaction()?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&CHANGES_LOCK])?;
            let n = prune(&mut tx, cutoff)?;
            tx.commit()?;
            Ok(n)
        })
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
    /// reconnect may have missed), calls [`sync`](Self::sync), then `on_change` with the skills
    /// whose tree changed, when any did. When the database goes away it reconnects with backoff
    /// (logging a warning) and the tree stays as it was meanwhile. The thread ends when the
    /// returned [`Follower`] is dropped or stopped.
    pub fn follow(
        self: &Arc<Self>,
        catch_up: Duration,
        on_change: impl Fn(&[String]) + Send + 'static,
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

    fn follow_loop(&self, catch_up: Duration, stop: &AtomicBool, on_change: &dyn Fn(&[String])) {
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
                    Ok(s) if s.changed.is_empty() => {}
                    Ok(s) => on_change(&s.changed),
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

/// The replicas of a hub share their skills' vectors through its database.
impl SharedVectors for PgStore {
    fn describe(&self) -> String {
        format!("the hub store {}", self.shown)
    }

    fn fetch(&self, model: &str, dim: usize, keys: &[u64]) -> crate::Result<Vec<(u64, Vec<f32>)>> {
        self.vectors(model, dim, keys)
            .map_err(|e| crate::Error::SharedVectors {
                from: self.shown.clone(),
                message: e.to_string(),
            })
    }

    fn save(&self, model: &str, dim: usize, items: &[(u64, Vec<f32>)]) -> crate::Result<()> {
        self.put_vectors(model, dim, items)
            .map_err(|e| crate::Error::SharedVectors {
                from: self.shown.clone(),
                message: e.to_string(),
            })
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
