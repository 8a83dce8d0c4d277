//! The persistent index: one tantivy index per set of roots under `$SKILLSEARCH_HOME/indexes/`.
//!
//! Every `SKILL.md` found is one document whose fast fields hold its path, size and mtime, so a
//! fresh process compares the disk against the index without reading any skill body, and only
//! re-reads what changed. A tantivy commit is atomic: readers see the previous commit until the
//! next one lands, and a build killed midway leaves the previous commit serving.
//!
//! Opening checks every segment file (a truncated or missing one makes the index unusable, and
//! it is rebuilt from the skill files). A check that finds nothing changed writes nothing, so a
//! valid index answers from a read-only or full disk; changes that cannot be saved there are
//! reported ([`RefreshReport::unsaved`], the `index-unwritable` diagnostic) and the index
//! answers as last saved.

pub(crate) mod analyzer;
mod directory;
pub mod fifo;
pub(crate) mod maxscore;
pub(crate) mod relevance;

use crate::corpus::diagnostic::Diagnostic;
use crate::corpus::frontmatter::SkillMeta;
use crate::corpus::{self, FoundFile, Roots};
use crate::error::{Error, Result};
use crate::index::maxscore::Decoded;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tantivy::collector::DocSetCollector;
use tantivy::query::TermQuery;
use tantivy::schema::{
    FAST, Field, INDEXED, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing,
    TextOptions, Value as _,
};
use tantivy::{
    Index, IndexReader, IndexWriter, ReloadPolicy, Searcher, TantivyDocument, Term, doc,
};

/// Bumped whenever the schema or the analyzer changes; a new version builds a new index.
pub const FORMAT_VERSION: u32 = 3;

/// Incremental refreshes leave merging to tantivy once the index has this many segments.
const MERGE_AFTER_SEGMENTS: usize = 8;

/// How the index is built.
#[derive(Debug, Clone)]
pub struct IndexConfig {
    /// `$SKILLSEARCH_HOME`; indexes live under `<home>/indexes/`.
    pub home: PathBuf,
    /// Bytes of one `SKILL.md` read at most.
    pub max_file_bytes: u64,
    /// Characters of the body indexed (0 leaves the body out of the index).
    pub body_chars: usize,
    /// Indexing threads for full builds.
    pub threads: usize,
    /// Hold the segment files in memory instead of mapping them, and check them against their
    /// checksums when opened: for a long-lived process, which a segment file truncated or
    /// overwritten on disk must not crash or mislead (see `directory.rs`). A short-lived one
    /// maps them (cheaper to open).
    pub hold_in_memory: bool,
}

impl IndexConfig {
    pub fn new(home: impl Into<PathBuf>) -> Self {
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, 4);
        IndexConfig {
            home: home.into(),
            max_file_bytes: corpus::DEFAULT_MAX_FILE_BYTES,
            body_chars: 20_000,
            threads,
            hold_in_memory: false,
        }
    }
}

/// When a search first re-checks the disk against the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refresh {
    /// Walk the roots every time.
    Always,
    /// Walk the roots when the last check is older than this.
    IfOlderThan(Duration),
    /// Use the index as it is (it is still built when missing).
    Never,
}

/// Progress of a build, for a caller that draws a bar.
#[derive(Debug, Clone, Copy)]
pub enum Progress {
    /// The walk found this many files to (re)read.
    Start { to_read: usize },
    /// This many have been read and indexed.
    Read { done: usize },
}

/// What one refresh did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RefreshReport {
    pub added: usize,
    pub updated: usize,
    pub removed: usize,
    pub unchanged: usize,
    /// Set when the index was rebuilt from nothing, with the reason.
    pub rebuilt: Option<String>,
    /// Another process held the writer lock; the index was served as it was.
    pub locked: bool,
    /// Changes were found but could not be saved (a read-only or full disk, no permission):
    /// why. The index answers as last saved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unsaved: Option<String>,
    pub elapsed_ms: f64,
    /// Problems met by the walk and by files read this time.
    pub diagnostics: Vec<Diagnostic>,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Fields {
    pub(crate) path: Field,
    pub(crate) root: Field,
    pub(crate) rel: Field,
    pub(crate) size: Field,
    pub(crate) mtime: Field,
    pub(crate) valid: Field,
    pub(crate) has_diag: Field,
    pub(crate) name: Field,
    pub(crate) name_key: Field,
    pub(crate) description: Field,
    pub(crate) body: Field,
    pub(crate) meta: Field,
    /// Plugin ids from `activates.plugins`, one term each.
    pub(crate) activates: Field,
    /// The text the semantic retriever embeds ([`crate::corpus::embed_text`]), and its hash:
    /// vectors are keyed by the hash, so an unchanged skill is never embedded again.
    pub(crate) etext: Field,
    pub(crate) chash: Field,
}

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let text = |stored: bool| {
        let idx = TextFieldIndexing::default()
            .set_tokenizer(crate::index::analyzer::ANALYZER)
            .set_index_option(IndexRecordOption::WithFreqs);
        let o = TextOptions::default().set_indexing_options(idx);
        if stored { o.set_stored() } else { o }
    };
    let f = Fields {
        path: b.add_text_field("path", STRING | STORED | FAST),
        root: b.add_u64_field("root", INDEXED | STORED | FAST),
        rel: b.add_text_field("rel", STRING | STORED | FAST),
        size: b.add_u64_field("size", FAST),
        mtime: b.add_i64_field("mtime", FAST),
        valid: b.add_u64_field("valid", INDEXED | FAST),
        has_diag: b.add_u64_field("has_diag", INDEXED | FAST),
        name: b.add_text_field("name", text(false)),
        name_key: b.add_text_field("name_key", STRING | FAST),
        description: b.add_text_field("description", text(false)),
        body: b.add_text_field("body", text(false)),
        meta: b.add_text_field("meta", STORED),
        activates: b.add_text_field("activates", STRING),
        etext: b.add_text_field("etext", STORED),
        chash: b.add_u64_field("chash", FAST),
    };
    (b.build(), f)
}

/// What is stored per document besides the fast fields.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct StoredMeta {
    pub meta: SkillMeta,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diagnostics: Vec<Diagnostic>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct State {
    format: u32,
    roots: Roots,
    verified_at_ms: u64,
    #[serde(default)]
    walk_diagnostics: Vec<Diagnostic>,
    /// The segment files as the last commit left them: name → (size, mtime in ns). Segment
    /// files never change once written, so one that differs was damaged from outside (truncated,
    /// overwritten in place) and opening checks its checksum (see [`segment_stamps`]).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    files: std::collections::BTreeMap<String, (u64, i64)>,
    /// How long the last check of every root took (the walk and the comparison with the
    /// index, not the indexing of what changed), in ms: what the next check will cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    check_ms: Option<u64>,
}

/// The segment files in `tdir` (not its meta or lock files), by name, with size and mtime.
fn segment_stamps(tdir: &Path) -> std::collections::BTreeMap<String, (u64, i64)> {
    use std::os::unix::fs::MetadataExt as _;
    let mut out = std::collections::BTreeMap::new();
    for e in std::fs::read_dir(tdir).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || name.ends_with(".json") || name.contains(".tmp") {
            continue;
        }
        if let Ok(m) = e.metadata()
            && m.is_file()
        {
            out.insert(name, (m.len(), m.mtime() * 1_000_000_000 + m.mtime_nsec()));
        }
    }
    out
}

/// Whether a segment file recorded in `state` is there but no longer as the commit left it.
fn stamps_differ(tdir: &Path, state: &State) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    state.files.iter().any(|(name, &(len, mtime))| {
        std::fs::symlink_metadata(tdir.join(name))
            .is_ok_and(|m| (m.len(), m.mtime() * 1_000_000_000 + m.mtime_nsec()) != (len, mtime))
    })
}

/// Which part of the disk a refresh compares with the index.
#[derive(Debug, Clone, Copy)]
enum Scope<'a> {
    /// Every root: a full walk.
    All,
    /// These directories (absolute, none inside another) and what lies below them.
    Dirs(&'a [PathBuf]),
}

/// Most directories one [`SkillIndex::refresh_dirs`] looks at separately; past this a full
/// walk is cheaper.
pub const TARGETED_MAX_DIRS: usize = 1024;

/// How long a process waits for another one's first build of the same index before answering
/// without it, and how often it looks.
const FIRST_BUILD_WAIT: Duration = Duration::from_secs(120);
const LOCK_POLL: Duration = Duration::from_millis(20);

/// One document's identity, read from fast fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocKey {
    pub root: usize,
    pub rel: String,
    pub path: PathBuf,
    pub name: String,
    pub valid: bool,
    pub has_diag: bool,
    /// Hash of the text the semantic retriever embeds (0 for an invalid skill).
    pub chash: u64,
    pub(crate) size: u64,
    pub(crate) mtime_ns: i64,
    pub(crate) address: tantivy::DocAddress,
}

/// An opened skill index over a fixed set of roots.
pub struct SkillIndex {
    pub(crate) roots: Roots,
    dir: PathBuf,
    cfg: IndexConfig,
    index: Index,
    reader: IndexReader,
    pub(crate) f: Fields,
    state: std::sync::Mutex<State>,
    /// Document keys, with the searcher generation they were read from.
    keys: std::sync::Mutex<Option<(u64, std::sync::Arc<Vec<DocKey>>)>>,
    /// Searches running on this index now (see [`SkillIndex::may_split`]).
    searching: std::sync::atomic::AtomicUsize,
    /// Whether searches may split their work at all (see [`SkillIndex::set_split`]).
    split: std::sync::atomic::AtomicBool,
    /// What is kept while the index stays at one generation: skill bodies read for rendering
    /// (see [`SkillIndex::skill_body`]), guard terms, file existence, segment columns.
    per_generation: std::sync::Mutex<GenerationCache>,
    /// Postings decoded for lexical retrieval (see [`SkillIndex::postings`]).
    postings: std::sync::Mutex<
        crate::index::fifo::FifoCache<(tantivy::index::SegmentId, Term), Arc<Decoded>>,
    >,
    /// This opening's number in the process (see [`SkillIndex::generation`]).
    instance: u64,
}

/// Indexes opened in this process so far.
static OPENED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Bytes of skill bodies a [`SkillIndex`] keeps for rendering.
const BODY_CACHE_BYTES: usize = 16 << 20;

/// A segment's fast columns that ranking reads for every candidate: the root's precedence and
/// the id (its ordinal orders like the id).
pub(crate) struct SegmentColumns {
    pub root: tantivy::columnar::Column<u64>,
    pub rel: Option<tantivy::columnar::StrColumn>,
}

/// Bytes of decoded postings a [`SkillIndex`] keeps (9 per document of each list).
const POSTINGS_CACHE_BYTES: usize = 64 << 20;

/// Relevance-guard terms kept at most (see [`SkillIndex::guard_hay`]), oldest out.
const HAY_ENTRIES: usize = 20_000;
/// Existence answers kept at most per disk check, oldest out.
const EXISTS_ENTRIES: usize = 20_000;
/// Hits' stored fields kept at most per generation, oldest out (a few hundred bytes each).
const STORED_ENTRIES: usize = 8_192;

/// What a hit needs of its stored document (see [`SkillIndex::stored_hit`]).
#[derive(Debug)]
pub(crate) struct StoredHit {
    pub path: String,
    pub rel: String,
    pub meta: SkillMeta,
}

/// What an index keeps while the searcher is at `generation`: skill bodies by path, oldest
/// first out; the terms the relevance guard judges each skill on; whether referenced files
/// exist; and each segment's ranking columns.
struct GenerationCache {
    generation: u64,
    bodies: crate::index::fifo::FifoCache<PathBuf, (Arc<str>, bool)>,
    /// By path: (hash of the name and description, their terms).
    hays: crate::index::fifo::FifoCache<
        PathBuf,
        (u64, std::sync::Arc<std::collections::BTreeSet<String>>),
    >,
    /// Whether files a body refers to exist, as of the disk check at `checked_at_ms`.
    exists: crate::index::fifo::FifoCache<PathBuf, bool>,
    checked_at_ms: u64,
    /// Each segment's `root` and `rel` columns (see [`SkillIndex::columns`]).
    columns: HashMap<tantivy::index::SegmentId, Arc<SegmentColumns>>,
    /// Hits' stored fields by address (see [`SkillIndex::stored_hit`]).
    stored: crate::index::fifo::FifoCache<tantivy::DocAddress, Arc<StoredHit>>,
}

impl GenerationCache {
    fn new(max_bytes: usize) -> GenerationCache {
        GenerationCache {
            generation: 0,
            bodies: crate::index::fifo::FifoCache::new(usize::MAX, max_bytes),
            hays: crate::index::fifo::FifoCache::new(HAY_ENTRIES, usize::MAX),
            exists: crate::index::fifo::FifoCache::new(EXISTS_ENTRIES, usize::MAX),
            checked_at_ms: 0,
            columns: HashMap::new(),
            stored: crate::index::fifo::FifoCache::new(STORED_ENTRIES, usize::MAX),
        }
    }

    /// Starts over when the index has moved on to another generation.
    fn at(&mut self, generation: u64) -> &mut GenerationCache {
        if self.generation != generation {
            *self = GenerationCache {
                generation,
                ..GenerationCache::new(self.bodies.max_bytes())
            };
        }
        self
    }
}

/// Counts one running search while alive.
pub(crate) struct Searching<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for Searching<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The directory that holds the index for `roots`.
pub fn index_dir(home: &Path, roots: &Roots) -> PathBuf {
    let mut h = Sha256::new();
    h.update(FORMAT_VERSION.to_le_bytes());
    for r in &roots.0 {
        h.update(r.path.as_os_str().as_encoded_bytes());
        h.update([0]);
    }
    let digest = h.finalize();
    let key: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    home.join("indexes")
        .join(format!("v{FORMAT_VERSION}-{key}"))
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    crate::fsio::write_atomic(path, bytes).map_err(|(at, e)| Error::io(at, e))
}

/// Why a write in `dir` failed, when it is the file system refusing writes (read-only, full,
/// no permission: see [`crate::fsio::is_unwritable`]) rather than a fault of the index.
fn unwritable(e: &Error, dir: &Path) -> Option<String> {
    use tantivy::TantivyError as T;
    use tantivy::directory::error::{LockError, OpenWriteError};
    let io = match e {
        Error::Io { source, .. } => source,
        Error::Index { source, .. } => match source {
            T::IoError(io)
            | T::LockFailure(LockError::IoError(io), _)
            | T::OpenWriteError(OpenWriteError::IoError { io_error: io, .. }) => &**io,
            // An indexing thread's failure arrives as text.
            T::ErrorInThread(text) | T::SystemError(text) => {
                const REFUSALS: [&str; 4] = [
                    "No space left on device",
                    "Read-only file system",
                    "Permission denied",
                    "Disk quota exceeded",
                ];
                // An indexing thread that met a full disk may say only that it was killed:
                // then the disk itself is asked.
                return REFUSALS
                    .iter()
                    .find(|r| text.contains(*r))
                    .map(|r| (*r).to_owned())
                    .or_else(|| disk_full(dir));
            }
            _ => return None,
        },
        _ => return None,
    };
    // A FIFO or other special file where the writer's lock is made cannot be written either.
    (crate::fsio::is_unwritable(io) || crate::fsio::is_not_regular(io)).then(|| io.to_string())
}

/// Free space below which a failed write is put down to a full disk.
const NEARLY_FULL_BYTES: u64 = 1 << 20;

/// "No space left on device" when the file system holding `dir` has (almost) no space left
/// for this user.
fn disk_full(dir: &Path) -> Option<String> {
    let st = rustix::fs::statvfs(dir).ok()?;
    let free = st.f_bavail.saturating_mul(st.f_frsize);
    (free < NEARLY_FULL_BYTES).then(|| format!("No space left on device ({free} bytes free)"))
}

impl SkillIndex {
    /// Marks a search as running until the guard drops.
    pub(crate) fn searching(&self) -> Searching<'_> {
        self.searching
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Searching(&self.searching)
    }

    /// Lets searches split their work over the rayon pool while a core is free (the default),
    /// or keeps each on its caller's thread. A daemon that runs one retrieval per core on its
    /// own threads turns splitting off: it cannot see the requests queued behind the running
    /// ones, and a split search takes cores from them.
    pub fn set_split(&self, on: bool) {
        self.split.store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether a search may split its work (segments, the vector scan) over the rayon pool:
    /// only while fewer searches (or whole turns) run than the pool has threads. When every core already has a
    /// search of its own, splitting only adds hand-offs and idle spinning (a daemon under load
    /// answered ~25% more turns per second with each search on one thread).
    pub(crate) fn may_split(&self) -> bool {
        self.split.load(std::sync::atomic::Ordering::Relaxed)
            && self.searching.load(std::sync::atomic::Ordering::Relaxed)
                < rayon::current_num_threads()
    }

    /// Opens the index for `roots`, building it when missing and rebuilding it when it is
    /// corrupt, then refreshes it according to `refresh`. The report is `None` when the disk was
    /// not checked.
    pub fn open(
        roots: &Roots,
        cfg: &IndexConfig,
        refresh: Refresh,
        progress: &dyn Fn(Progress),
    ) -> Result<(SkillIndex, Option<RefreshReport>)> {
        let dir = index_dir(&cfg.home, roots);
        let (idx, rebuilt) = match Self::open_existing(roots, cfg, &dir) {
            Ok(Some(idx)) => (idx, None),
            Ok(None) => (
                Self::create(roots, cfg, &dir)?,
                Some("no index yet".to_owned()),
            ),
            Err(reason) => {
                tracing::warn!(target: "index", dir = %dir.display(), %reason, "index is unusable; rebuilding");
                let _ = std::fs::remove_dir_all(&dir);
                (
                    Self::create(roots, cfg, &dir)?,
                    Some(format!("previous index was unusable ({reason})")),
                )
            }
        };
        let stale = match refresh {
            _ if rebuilt.is_some() => true,
            Refresh::Always => true,
            Refresh::Never => false,
            Refresh::IfOlderThan(age) => {
                now_ms().saturating_sub(idx.verified_at_ms()) > age.as_millis() as u64
            }
        };
        if !stale {
            return Ok((idx, None));
        }
        let mut report = idx.refresh(progress)?;
        if let Some(r) = rebuilt {
            report.rebuilt = Some(r.clone());
            if r != "no index yet" {
                report.diagnostics.insert(
                    0,
                    Diagnostic::warning(
                        "index-rebuilt",
                        &dir,
                        format!("{r}; rebuilt from the skill files"),
                    ),
                );
            }
        }
        Ok((idx, Some(report)))
    }

    /// `Ok(None)`: no index there. `Err(reason)`: something is there but unusable.
    fn open_existing(
        roots: &Roots,
        cfg: &IndexConfig,
        dir: &Path,
    ) -> Result<Option<SkillIndex>, String> {
        let state_path = dir.join("state.json");
        let tdir = dir.join("tantivy");
        if !tdir.join("meta.json").exists() {
            return if dir.exists() {
                Err("index directory has no committed index".into())
            } else {
                Ok(None)
            };
        }
        let state: State = match crate::fsio::read_regular(&state_path) {
            Ok(bytes) => {
                serde_json::from_slice(&bytes).map_err(|e| format!("state.json is corrupt: {e}"))?
            }
            Err(e) => return Err(format!("state.json cannot be read: {e}")),
        };
        if state.format != FORMAT_VERSION || state.roots != *roots {
            return Err("state.json belongs to another format or root set".into());
        }
        // Tantivy's own executor stays single-threaded: the queries it runs (one term, a path
        // range) are microseconds of work, and handing each to a pool thread and back cost a
        // hub under load a context switch pair per lookup plus the pool's idle spinning. The
        // ranked search splits its own work (`may_split`).
        let index = directory::IndexDirectory::open(&tdir, cfg.hold_in_memory)
            .and_then(Index::open)
            .map_err(|e| e.to_string())?;
        let (_, f) = schema();
        if index.schema() != schema().0 {
            return Err("schema differs".into());
        }
        index.tokenizers().register(
            crate::index::analyzer::ANALYZER,
            crate::index::analyzer::analyzer(),
        );
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(|e| e.to_string())?;
        let idx = SkillIndex {
            roots: roots.clone(),
            dir: dir.to_path_buf(),
            cfg: cfg.clone(),
            index,
            reader,
            f,
            state: std::sync::Mutex::new(state),
            keys: Default::default(),
            searching: Default::default(),
            split: std::sync::atomic::AtomicBool::new(true),
            per_generation: std::sync::Mutex::new(GenerationCache::new(BODY_CACHE_BYTES)),
            postings: std::sync::Mutex::new(crate::index::fifo::FifoCache::new(
                usize::MAX,
                POSTINGS_CACHE_BYTES,
            )),
            instance: OPENED.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        };
        // Opening the reader already opened most of every segment (a truncated file fails
        // there); also open each segment's fast-field columns and each indexed field's term
        // dictionary, postings and positions, which is cheap (searches reuse what is opened)
        // and catches a damaged or missing file (tantivy opens a missing `.pos` as empty and
        // fails only at the first search).
        let schema = idx.index.schema();
        for seg in idx.searcher().segment_readers() {
            seg.fast_fields().u64("root").map_err(|e| e.to_string())?;
            seg.fast_fields().str("path").map_err(|e| e.to_string())?;
            for (field, entry) in schema.fields() {
                if entry.is_indexed() {
                    seg.inverted_index(field)
                        .map_err(|e| format!("segment {}: {e}", seg.segment_id().uuid_string()))?;
                }
            }
        }
        let changed_outside = stamps_differ(&tdir, &*idx.state.lock().map_err(|e| e.to_string())?);
        if cfg.hold_in_memory || changed_outside {
            // Held in memory: read whole anyway, so check every byte against its checksum.
            // Mapped: only when a segment file changed since its commit (cheap stats on every
            // open; the check reads every file).
            let damaged = idx.index.validate_checksum().map_err(|e| e.to_string())?;
            if !damaged.is_empty() {
                let mut names: Vec<String> =
                    damaged.iter().map(|p| p.display().to_string()).collect();
                names.sort();
                return Err(format!("damaged segment files: {}", names.join(", ")));
            }
            if changed_outside {
                idx.restamp(&state_path);
            }
        }
        Ok(Some(idx))
    }

    /// Creates an empty index beside `dir` and renames it into place, so a directory that
    /// exists always holds a committed index and its state (a concurrent process never sees a
    /// half-created one). If another process won the rename, its index is used.
    fn create(roots: &Roots, cfg: &IndexConfig, dir: &Path) -> Result<SkillIndex> {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let staging = dir.with_file_name(format!("{name}.incoming-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&staging);
        let staged = || -> Result<()> {
            let tdir = staging.join("tantivy");
            std::fs::create_dir_all(&tdir).map_err(|e| Error::io(&tdir, e))?;
            let (schema, _) = schema();
            Index::create_in_dir(&tdir, schema).map_err(|e| Error::Index {
                path: tdir.clone(),
                source: e,
            })?;
            let state = State {
                format: FORMAT_VERSION,
                roots: roots.clone(),
                verified_at_ms: 0,
                walk_diagnostics: vec![],
                files: Default::default(),
                check_ms: None,
            };
            write_atomic(
                &staging.join("state.json"),
                &serde_json::to_vec_pretty(&state).unwrap_or_default(),
            )
        };
        if let Err(e) = staged() {
            // A failed build leaves nothing behind (a full disk must not fill up further).
            let _ = std::fs::remove_dir_all(&staging);
            return Err(e);
        }
        if let Err(e) = std::fs::rename(&staging, dir) {
            let _ = std::fs::remove_dir_all(&staging);
            if !dir.join("tantivy/meta.json").exists() {
                return Err(Error::io(dir, e));
            }
        }
        match Self::open_existing(roots, cfg, dir) {
            Ok(Some(idx)) => Ok(idx),
            Ok(None) => Err(Error::Format {
                what: "index",
                path: dir.to_path_buf(),
                message: "vanished right after it was created".into(),
            }),
            Err(message) => Err(Error::Format {
                what: "index",
                path: dir.to_path_buf(),
                message,
            }),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn roots(&self) -> &Roots {
        &self.roots
    }

    /// Problems the last walk met (missing roots, loops, unreadable directories).
    pub fn walk_diagnostics(&self) -> Vec<Diagnostic> {
        self.state
            .lock()
            .map(|s| s.walk_diagnostics.clone())
            .unwrap_or_default()
    }

    /// Plugins named in some skill's `activates.plugins`, each with the ids of the skills that
    /// name it (in precedence order). Read from the term dictionary: no document is scanned.
    pub fn activations(
        &self,
    ) -> Result<std::collections::BTreeMap<String, Vec<(String, SkillMeta)>>> {
        let searcher = self.searcher();
        let mut plugins = std::collections::BTreeSet::new();
        for seg in searcher.segment_readers() {
            let inv = seg
                .inverted_index(self.f.activates)
                .map_err(|e| self.index_err(e))?;
            let mut terms = inv
                .terms()
                .stream()
                .map_err(|e| self.index_err(tantivy::TantivyError::from(e)))?;
            while terms.advance() {
                plugins.insert(String::from_utf8_lossy(terms.key()).into_owned());
            }
        }
        let mut out = std::collections::BTreeMap::new();
        for p in plugins {
            let q = TermQuery::new(
                Term::from_field_text(self.f.activates, &p),
                IndexRecordOption::Basic,
            );
            let docs = searcher
                .search(&q, &DocSetCollector)
                .map_err(|e| self.index_err(e))?;
            let mut skills = Vec::new();
            for addr in docs {
                let doc: TantivyDocument = searcher.doc(addr).map_err(|e| self.index_err(e))?;
                let root = doc
                    .get_first(self.f.root)
                    .and_then(|v| v.as_u64())
                    .unwrap_or(0);
                let rel = doc
                    .get_first(self.f.rel)
                    .and_then(|v| v.as_str())
                    .unwrap_or("")
                    .to_owned();
                let meta = self.stored_of(&doc)?.meta;
                skills.push((root, rel, meta));
            }
            skills.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
            out.insert(p, skills.into_iter().map(|(_, rel, m)| (rel, m)).collect());
        }
        Ok(out)
    }

    /// Plugins *managed* on this machine: those some eligible skill activates, each with the ids
    /// of those skills.
    pub fn managed_plugins(
        &self,
        gate: &crate::corpus::eligibility::EligibilityEnv,
    ) -> Result<std::collections::BTreeMap<String, Vec<String>>> {
        let mut managed = std::collections::BTreeMap::new();
        for (plugin, skills) in self.activations()? {
            let ids: Vec<String> = skills
                .into_iter()
                .filter(|(_, m)| gate.check(m).is_ok())
                .map(|(id, _)| id)
                .collect();
            if !ids.is_empty() {
                managed.insert(plugin, ids);
            }
        }
        Ok(managed)
    }

    /// Changes whenever a refresh commits: answers computed for one generation stay valid
    /// until it changes. Unique in the process, also across indexes opened anew over the same
    /// roots (a rebuilt index, a workspace closed and opened again), whose own commit counters
    /// start again from the same numbers.
    pub fn generation(&self) -> u64 {
        self.generation_of(&self.searcher())
    }

    /// [`SkillIndex::generation`] of the commit `searcher` reads.
    pub(crate) fn generation_of(&self, searcher: &Searcher) -> u64 {
        (self.instance << 32) ^ searcher.generation().generation_id()
    }

    /// When the files were last compared with the index (ms since the epoch).
    pub fn verified_at_ms(&self) -> u64 {
        self.state.lock().map(|s| s.verified_at_ms).unwrap_or(0)
    }

    /// How many skill files the index holds (valid or not).
    pub fn len(&self) -> u64 {
        self.searcher().num_docs()
    }

    /// Whether the index holds no skill file.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How long the last check of every root took (walk and comparison), if one was made or
    /// saved: what the next [`Self::refresh`] will cost when little changed. A per-turn caller
    /// with a budget can leave a costly check to another process.
    pub fn check_ms(&self) -> Option<u64> {
        self.state.lock().ok().and_then(|s| s.check_ms)
    }

    pub(crate) fn searcher(&self) -> Searcher {
        self.reader.searcher()
    }

    /// The `root` and `rel` columns of the segment `reader` reads (a segment of the searcher
    /// at `generation`), opened once per segment and generation: opening them reads the
    /// segment's column directory, ~2% of a daemon's CPU under load when done for every query.
    /// They are dropped when the generation changes, so a merged-away segment's files are not
    /// held open.
    pub(crate) fn columns(
        &self,
        reader: &tantivy::SegmentReader,
        generation: u64,
    ) -> Result<Arc<SegmentColumns>> {
        let id = reader.segment_id();
        if let Some(found) = self
            .per_generation
            .lock()
            .ok()
            .and_then(|mut b| b.at(generation).columns.get(&id).cloned())
        {
            return Ok(found);
        }
        let ff = reader.fast_fields();
        let columns = Arc::new(SegmentColumns {
            root: ff.u64("root").map_err(|e| self.index_err(e))?,
            rel: ff.str("rel").map_err(|e| self.index_err(e))?,
        });
        if let Ok(mut b) = self.per_generation.lock() {
            b.at(generation).columns.insert(id, columns.clone());
        }
        Ok(columns)
    }

    /// `term`'s postings in the segment `reader` reads, decoded; `None` when the segment lacks
    /// the term. Segments never change, so the lists are kept, up to 16 MiB, oldest out, and
    /// need no invalidation: a new generation's segments have new ids. Decoding a common word's
    /// list for every query was most of a daemon's search time under load.
    pub(crate) fn postings(
        &self,
        reader: &tantivy::SegmentReader,
        term: &Term,
    ) -> Result<Option<Arc<Decoded>>> {
        let key = (reader.segment_id(), term.clone());
        if let Some(found) = self.postings.lock().ok().and_then(|c| c.get(&key)) {
            return Ok(Some(found));
        }
        let Some(decoded) = Decoded::read(reader, term).map_err(|e| self.index_err(e))? else {
            return Ok(None);
        };
        let decoded = Arc::new(decoded);
        if let Ok(mut c) = self.postings.lock() {
            let bytes = decoded.bytes();
            // One list as big as a good part of the budget would only push the others out.
            if bytes <= c.max_bytes() / 4 {
                c.put(key, decoded.clone(), bytes);
            }
        }
        Ok(Some(decoded))
    }

    /// The body of the `SKILL.md` at `path` (a hit of this index) as rendering reads it, and
    /// whether it is a usable skill. GenerationCache are kept, up to 16 MiB, until the index changes: a
    /// refresh that finds an edit commits a new generation, and the body is read again then, so
    /// a rendered body is as fresh as the index that found it. Reading the file for every
    /// rendering cost a daemon under load ~18% of its CPU (the open and read, the front matter,
    /// and the watcher woken by each access).
    pub fn skill_body(&self, path: &Path) -> (Arc<str>, bool) {
        let generation = self.searcher().generation().generation_id();
        if let Some(found) = self
            .per_generation
            .lock()
            .ok()
            .and_then(|mut b| b.at(generation).bodies.get(path))
        {
            return found;
        }
        let loaded = corpus::load(path, corpus::DEFAULT_MAX_FILE_BYTES);
        let body: Arc<str> = loaded.body.into();
        if let Ok(mut b) = self.per_generation.lock() {
            let b = &mut b.at(generation).bodies;
            // A body as big as a good part of the budget would only push the others out.
            if body.len() <= b.max_bytes() / 4 {
                b.put(path.to_path_buf(), (body.clone(), loaded.valid), body.len());
            }
        }
        (body, loaded.valid)
    }

    /// Whether the file at `path` exists, for resolving the references of a body this index
    /// found. Under one of the index's roots the answer is kept until the index checks the
    /// disk again (a refresh) or changes: a file added beside a skill appears in renderings
    /// from the next check on. Elsewhere the disk is asked every time. A `stat` per
    /// reference per rendering was ~3% of a daemon's CPU under load.
    pub fn file_exists(&self, path: &Path) -> bool {
        if !self.roots.0.iter().any(|r| path.starts_with(&r.path)) {
            return path.exists();
        }
        let generation = self.searcher().generation().generation_id();
        let checked = self.verified_at_ms();
        let remembered = |b: &mut GenerationCache| {
            let b = b.at(generation);
            if b.checked_at_ms != checked {
                b.exists = crate::index::fifo::FifoCache::new(EXISTS_ENTRIES, usize::MAX);
                b.checked_at_ms = checked;
            }
            b.exists.get(path)
        };
        if let Some(found) = self
            .per_generation
            .lock()
            .ok()
            .and_then(|mut b| remembered(&mut b))
        {
            return found;
        }
        let found = path.exists();
        if let Ok(mut b) = self.per_generation.lock() {
            b.at(generation).exists.put(path.to_path_buf(), found, 0);
        }
        found
    }

    /// The terms the relevance guard judges a hit on (`relevance::hay` of its name
    /// and description), analysed once per skill and index generation (and again if the hit
    /// brings another name or description, as a skill of another index may).
    pub fn guard_hay(
        &self,
        path: &Path,
        name: &str,
        description: &str,
    ) -> std::sync::Arc<std::collections::BTreeSet<String>> {
        let generation = self.searcher().generation().generation_id();
        let key = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            (name, description).hash(&mut h);
            h.finish()
        };
        if let Some(found) = self.per_generation.lock().ok().and_then(|mut b| {
            b.at(generation)
                .hays
                .get(path)
                .filter(|(k, _)| *k == key)
                .map(|(_, hay)| hay)
        }) {
            return found;
        }
        let hay = std::sync::Arc::new(crate::index::relevance::hay(name, description));
        if let Ok(mut b) = self.per_generation.lock() {
            b.at(generation)
                .hays
                .put(path.to_path_buf(), (key, hay.clone()), 0);
        }
        hay
    }

    pub(crate) fn index_err(&self, e: tantivy::TantivyError) -> Error {
        Error::Index {
            path: self.dir.clone(),
            source: e,
        }
    }

    /// Every live document's identity, in precedence order (root, then id). Computed once per
    /// commit and cached: each string column's dictionary is streamed once, in order.
    pub fn doc_keys(&self) -> Result<std::sync::Arc<Vec<DocKey>>> {
        Ok(self.snapshot()?.1)
    }

    /// A searcher and the document keys of that same commit (addresses in the keys are valid
    /// for that searcher only).
    pub(crate) fn snapshot(&self) -> Result<(Searcher, std::sync::Arc<Vec<DocKey>>)> {
        let searcher = self.searcher();
        let generation = searcher.generation().generation_id();
        if let Ok(cache) = self.keys.lock()
            && let Some((g, keys)) = cache.as_ref()
            && *g == generation
        {
            return Ok((searcher, keys.clone()));
        }
        let keys = std::sync::Arc::new(self.read_doc_keys(&searcher)?);
        if let Ok(mut cache) = self.keys.lock() {
            *cache = Some((generation, keys.clone()));
        }
        Ok((searcher, keys))
    }

    /// The document of id `rel` that counts (the first root's; valid or not), read from the
    /// index directly: one term lookup, however many skills it holds, where
    /// [`Self::doc_keys`] reads every document once per commit.
    pub fn key_of(&self, rel: &str) -> Result<Option<DocKey>> {
        let searcher = self.searcher();
        let q = TermQuery::new(
            Term::from_field_text(self.f.rel, rel),
            IndexRecordOption::Basic,
        );
        let docs = searcher
            .search(&q, &DocSetCollector)
            .map_err(|e| self.index_err(e))?;
        let mut best: Option<DocKey> = None;
        for addr in docs {
            let key = self.key_at(&searcher, addr)?;
            if best.as_ref().is_none_or(|b| key.root < b.root) {
                best = Some(key);
            }
        }
        Ok(best)
    }

    /// The key of the document at `addr` of `searcher`, from its fast fields.
    fn key_at(&self, searcher: &Searcher, addr: tantivy::DocAddress) -> Result<DocKey> {
        let e = |e: tantivy::TantivyError| self.index_err(e);
        let ff = searcher.segment_reader(addr.segment_ord).fast_fields();
        let doc = addr.doc_id;
        let u =
            |name: &str| -> Result<u64> { Ok(ff.u64(name).map_err(e)?.first(doc).unwrap_or(0)) };
        let text = |name: &str| -> Result<String> {
            let mut out = String::new();
            if let Some(col) = ff.str(name).map_err(e)?
                && let Some(ord) = col.term_ords(doc).next()
            {
                col.ord_to_str(ord, &mut out)
                    .map_err(|err| Error::io(&self.dir, err))?;
            }
            Ok(out)
        };
        Ok(DocKey {
            root: u("root")? as usize,
            rel: text("rel")?,
            path: PathBuf::from(text("path")?),
            name: text("name_key")?,
            valid: u("valid")? == 1,
            has_diag: u("has_diag")? == 1,
            chash: u("chash")?,
            size: u("size")?,
            mtime_ns: ff.i64("mtime").map_err(e)?.first(doc).unwrap_or(0),
            address: addr,
        })
    }

    fn read_doc_keys(&self, searcher: &Searcher) -> Result<Vec<DocKey>> {
        let mut out = Vec::with_capacity(searcher.num_docs() as usize);
        let e = |e: tantivy::TantivyError| self.index_err(e);
        for (seg_ord, seg) in searcher.segment_readers().iter().enumerate() {
            let ff = seg.fast_fields();
            let root = ff.u64("root").map_err(e)?;
            let size = ff.u64("size").map_err(e)?;
            let valid = ff.u64("valid").map_err(e)?;
            let has_diag = ff.u64("has_diag").map_err(e)?;
            let mtime = ff.i64("mtime").map_err(e)?;
            let chash = ff.u64("chash").map_err(e)?;
            // (terms by ordinal, ordinal column) of one string column.
            let strings =
                |name: &str| -> Result<(Vec<String>, Option<tantivy::columnar::Column<u64>>)> {
                    let Some(col) = ff.str(name).map_err(e)? else {
                        return Ok((Vec::new(), None));
                    };
                    let mut terms = Vec::with_capacity(col.num_terms());
                    let mut stream = col
                        .dictionary()
                        .stream()
                        .map_err(|err| Error::io(&self.dir, err))?;
                    while stream.advance() {
                        terms.push(String::from_utf8_lossy(stream.key()).into_owned());
                    }
                    Ok((terms, Some(col.ords().clone())))
                };
            let (paths, path_ords) = strings("path")?;
            let (rels, rel_ords) = strings("rel")?;
            let (names, name_ords) = strings("name_key")?;
            let get = |terms: &[String],
                       ords: &Option<tantivy::columnar::Column<u64>>,
                       doc: u32|
             -> String {
                ords.as_ref()
                    .and_then(|o| o.first(doc))
                    .and_then(|ord| terms.get(ord as usize))
                    .cloned()
                    .unwrap_or_default()
            };
            let alive = seg.alive_bitset();
            for doc in 0..seg.max_doc() {
                if alive.is_some_and(|a| !a.is_alive(doc)) {
                    continue;
                }
                out.push(DocKey {
                    root: root.first(doc).unwrap_or(0) as usize,
                    rel: get(&rels, &rel_ords, doc),
                    path: PathBuf::from(get(&paths, &path_ords, doc)),
                    name: get(&names, &name_ords, doc),
                    valid: valid.first(doc) == Some(1),
                    has_diag: has_diag.first(doc) == Some(1),
                    chash: chash.first(doc).unwrap_or(0),
                    size: size.first(doc).unwrap_or(0),
                    mtime_ns: mtime.first(doc).unwrap_or(0),
                    address: tantivy::DocAddress::new(seg_ord as u32, doc),
                });
            }
        }
        out.sort_by(|a, b| (a.root, &a.rel).cmp(&(b.root, &b.rel)));
        Ok(out)
    }

    /// Re-checks the disk and applies every add, edit, delete and rename in one commit. A check
    /// that finds nothing new writes nothing (its time is kept in memory; [`Self::record_check`]
    /// saves it). Changes the file system refuses to take (read-only, full, no permission) are
    /// rolled back and reported in [`RefreshReport::unsaved`]; the index answers as last saved.
    pub fn refresh(&self, progress: &dyn Fn(Progress)) -> Result<RefreshReport> {
        self.refresh_in(Scope::All, progress)
    }

    /// [`Self::refresh`] of only what lies at and below `dirs` (directories under the roots, or
    /// a `SKILL.md` in one): for an owner that knows what it changed, such as a hub store after
    /// a write. Costs the walk of those directories and one lookup of the paths the index holds
    /// under each, not a walk of every root: a change to one skill among a million reads one
    /// directory. The same invariants hold: one commit for all of it, nothing written when
    /// nothing changed. It does not count as a check of the whole disk
    /// ([`Self::verified_at_ms`] stays), and falls back to a full refresh where a partial one
    /// could not be exact: a root itself, nested roots, or more than
    /// [`TARGETED_MAX_DIRS`] directories.
    pub fn refresh_dirs(
        &self,
        dirs: &[PathBuf],
        progress: &dyn Fn(Progress),
    ) -> Result<RefreshReport> {
        let mut wanted: Vec<PathBuf> = dirs
            .iter()
            .map(|d| {
                let d = corpus::absolute(d);
                match d.file_name() {
                    Some(n) if n == corpus::SKILL_FILE => {
                        d.parent().map_or(d.clone(), Path::to_path_buf)
                    }
                    _ => d,
                }
            })
            .collect();
        wanted.sort();
        wanted.dedup();
        // A directory inside another one of the list is covered by it.
        let mut outer: Vec<PathBuf> = Vec::with_capacity(wanted.len());
        for d in wanted {
            if !outer.last().is_some_and(|o| d.starts_with(o)) {
                outer.push(d);
            }
        }
        if outer.len() > TARGETED_MAX_DIRS {
            return self.refresh(progress);
        }
        self.refresh_in(Scope::Dirs(&outer), progress)
    }

    fn refresh_in(&self, scope: Scope<'_>, progress: &dyn Fn(Progress)) -> Result<RefreshReport> {
        let started = Instant::now();
        let (files, walk_diags) = match scope {
            Scope::All => corpus::discover(&self.roots),
            Scope::Dirs(dirs) => {
                let mut files = Vec::new();
                let mut diags = Vec::new();
                for d in dirs {
                    let Some((f, dg)) = corpus::discover_under(&self.roots, d) else {
                        return self.refresh(progress);
                    };
                    files.extend(f);
                    diags.extend(dg);
                }
                (files, diags)
            }
        };
        let all_keys;
        let under: Vec<(PathBuf, u64, i64)>;
        // Keyed by the path's bytes: hashing a `PathBuf` walks its components, which at 64K
        // skills costs more than the comparison itself.
        let existing: HashMap<&std::ffi::OsStr, (u64, i64)> = match scope {
            Scope::All => {
                all_keys = self.doc_keys()?;
                all_keys
                    .iter()
                    .map(|k| (k.path.as_os_str(), (k.size, k.mtime_ns)))
                    .collect()
            }
            Scope::Dirs(dirs) => {
                let searcher = self.searcher();
                let mut found = Vec::new();
                for d in dirs {
                    found.extend(self.docs_under(&searcher, d)?);
                }
                under = found;
                under
                    .iter()
                    .map(|(p, size, mtime)| (p.as_os_str(), (*size, *mtime)))
                    .collect()
            }
        };
        let mut report = RefreshReport {
            diagnostics: walk_diags.clone(),
            ..RefreshReport::default()
        };
        let mut to_read: Vec<&FoundFile> = Vec::new();
        let mut seen: std::collections::HashSet<&std::ffi::OsStr> =
            std::collections::HashSet::with_capacity(files.len());
        for f in &files {
            seen.insert(f.path.as_os_str());
            match existing.get(f.path.as_os_str()) {
                Some(&(size, mtime)) if size == f.size && mtime == f.mtime_ns => {
                    report.unchanged += 1
                }
                Some(_) => {
                    report.updated += 1;
                    to_read.push(f);
                }
                None => {
                    report.added += 1;
                    to_read.push(f);
                }
            }
        }
        let removed: Vec<&std::ffi::OsStr> = existing
            .keys()
            .filter(|p| !seen.contains(*p))
            .copied()
            .collect();
        report.removed = removed.len();
        let check_ms = started.elapsed().as_millis() as u64;
        let mut changed = false;
        if !to_read.is_empty() || !removed.is_empty() {
            let full_build = matches!(scope, Scope::All) && existing.is_empty();
            let threads = if full_build { self.cfg.threads } else { 1 };
            let heap = if full_build {
                64_000_000 * threads
            } else {
                30_000_000
            };
            let mut waited = Duration::ZERO;
            let mut writer: IndexWriter = loop {
                let e = match self.index.writer_with_num_threads(threads, heap) {
                    Ok(w) => break w,
                    Err(e) => e,
                };
                let busy = matches!(e, tantivy::TantivyError::LockFailure(..));
                let e = self.index_err(e);
                if let Some(why) = unwritable(&e, &self.dir) {
                    // A read-only or full disk: the lock file cannot even be made.
                    self.unsaved(&mut report, why);
                    report.elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
                    return Ok(report);
                }
                if !busy {
                    return Err(e);
                }
                // Another process is building. With a previous version to answer from, answer
                // from it; a first build has none (an empty index would answer every query
                // with nothing), so wait for that build to commit.
                if full_build && waited < FIRST_BUILD_WAIT {
                    std::thread::sleep(LOCK_POLL);
                    waited += LOCK_POLL;
                } else {
                    report.locked = true;
                    report.elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
                    return Ok(report);
                }
            };
            // Another process may have committed between our read and our lock: diff again
            // against what is committed now.
            let seen_segments: Vec<_> = self
                .searcher()
                .segment_readers()
                .iter()
                .map(|r| r.segment_id())
                .collect();
            self.reader.reload().map_err(|e| self.index_err(e))?;
            let now_segments: Vec<_> = self
                .searcher()
                .segment_readers()
                .iter()
                .map(|r| r.segment_id())
                .collect();
            if seen_segments != now_segments {
                drop(writer);
                return self.refresh_in(scope, progress);
            }
            // Small updates add a segment each; merging them costs more than it saves until
            // there are many, so merge only then (and wait, so no merge is left half-done). A
            // full build merges all its segments into one itself, after its commit.
            let segments = self.searcher().segment_readers().len();
            if full_build || segments < MERGE_AFTER_SEGMENTS {
                writer.set_merge_policy(Box::new(tantivy::indexer::NoMergePolicy));
            }
            let written = (|| -> Result<Vec<Diagnostic>> {
                for p in &removed {
                    writer.delete_term(Term::from_field_text(self.f.path, &p.to_string_lossy()));
                }
                for f in &to_read {
                    // Also for files we think are new: a document for the path must never
                    // exist twice.
                    writer.delete_term(Term::from_field_text(
                        self.f.path,
                        &f.path.to_string_lossy(),
                    ));
                }
                progress(Progress::Start {
                    to_read: to_read.len(),
                });
                let new_diags = self.index_files(&writer, &to_read, progress)?;
                writer.commit().map_err(|e| self.index_err(e))?;
                Ok(new_diags)
            })();
            let new_diags = match written {
                Ok(d) => d,
                Err(e) => {
                    // Nothing of this refresh was committed; drop what it wrote.
                    let _ = writer.rollback();
                    let _ = writer.garbage_collect_files().wait();
                    drop(writer);
                    let Some(why) = unwritable(&e, &self.dir) else {
                        return Err(e);
                    };
                    self.unsaved(&mut report, why);
                    report.elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
                    return Ok(report);
                }
            };
            report.diagnostics.extend(new_diags);
            // The commit landed: a merge that cannot be written leaves more segments, no harm.
            let merged = (|| -> Result<()> {
                if full_build {
                    // Each indexing thread wrote its own segment. One segment answers a search
                    // with one set of scorers and no ties to settle across segments: a daemon
                    // under load spent ~20% more CPU per retrieval on two (docs/performance.md,
                    // "Daemon under load"). Merging 64K skills takes well under a second.
                    let ids = self
                        .index
                        .searchable_segment_ids()
                        .map_err(|e| self.index_err(e))?;
                    if ids.len() > 1 {
                        writer.merge(&ids).wait().map_err(|e| self.index_err(e))?;
                    }
                }
                writer.wait_merging_threads().map_err(|e| self.index_err(e))
            })();
            if let Err(e) = merged {
                let Some(why) = unwritable(&e, &self.dir) else {
                    return Err(e);
                };
                tracing::warn!(target: "index", dir = %self.dir.display(), %why, "segments not merged");
            }
            self.reader.reload().map_err(|e| self.index_err(e))?;
            changed = true;
        }
        let (state_json, dirty) = {
            let mut state = self
                .state
                .lock()
                .map_err(|_| Error::Invalid("index state lock poisoned".into()))?;
            if changed {
                state.files = segment_stamps(&self.dir.join("tantivy"));
            }
            let now_diags = match scope {
                Scope::All => {
                    state.verified_at_ms = now_ms();
                    state.check_ms = Some(check_ms);
                    walk_diags
                }
                // The walk's findings elsewhere stand; those under the directories are new.
                Scope::Dirs(dirs) => {
                    let mut kept: Vec<Diagnostic> = state
                        .walk_diagnostics
                        .iter()
                        .filter(|d| !dirs.iter().any(|dir| d.path.starts_with(dir)))
                        .cloned()
                        .collect();
                    kept.extend(walk_diags);
                    kept
                }
            };
            let dirty = changed || state.walk_diagnostics != now_diags;
            state.walk_diagnostics = now_diags;
            (
                serde_json::to_vec_pretty(&*state).unwrap_or_default(),
                dirty,
            )
        };
        // A check that found nothing new writes nothing: the time of the check is kept in
        // memory only, so a valid index answers from a read-only or full disk.
        if dirty {
            self.save_state(&state_json, &mut report)?;
        }
        report.elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
        Ok(report)
    }

    /// The documents whose path lies below `dir` (starts with `dir/`), with their size and
    /// mtime: one range of the path terms, however many documents the index holds.
    fn docs_under(&self, searcher: &Searcher, dir: &Path) -> Result<Vec<(PathBuf, u64, i64)>> {
        let mut lo = dir.to_string_lossy().into_owned();
        lo.push('/');
        // Every path that starts with `dir/` sorts below `dir0` (`'0'` follows `'/'`).
        let hi = format!("{}0", &lo[..lo.len() - 1]);
        let q = tantivy::query::InvertedIndexRangeQuery::new(
            std::ops::Bound::Included(Term::from_field_text(self.f.path, &lo)),
            std::ops::Bound::Excluded(Term::from_field_text(self.f.path, &hi)),
        );
        let docs = searcher
            .search(&q, &DocSetCollector)
            .map_err(|e| self.index_err(e))?;
        let mut out = Vec::with_capacity(docs.len());
        for addr in docs {
            let ff = searcher.segment_reader(addr.segment_ord).fast_fields();
            let size = ff.u64("size").map_err(|e| self.index_err(e))?;
            let mtime = ff.i64("mtime").map_err(|e| self.index_err(e))?;
            let doc: TantivyDocument = searcher.doc(addr).map_err(|e| self.index_err(e))?;
            let path = doc
                .get_first(self.f.path)
                .and_then(|v| v.as_str())
                .unwrap_or_default();
            out.push((
                PathBuf::from(path),
                size.first(addr.doc_id).unwrap_or(0),
                mtime.first(addr.doc_id).unwrap_or(0),
            ));
        }
        Ok(out)
    }

    /// Writes `state.json`; when the file system refuses, records that the state is unsaved.
    fn save_state(&self, json: &[u8], report: &mut RefreshReport) -> Result<()> {
        match write_atomic(&self.dir.join("state.json"), json) {
            Err(e) => match unwritable(&e, &self.dir) {
                Some(why) => {
                    self.unsaved(report, why);
                    Ok(())
                }
                None => Err(e),
            },
            ok => ok,
        }
    }

    /// Saves the time of the last check, so that other processes skip the walk for a while
    /// (`Refresh::IfOlderThan`); a refresh that found nothing changed does not (see
    /// [`SkillIndex::refresh`]). For a command whose job is to bring the index up to date.
    pub fn record_check(&self) -> Result<()> {
        let json = {
            let state = self
                .state
                .lock()
                .map_err(|_| Error::Invalid("index state lock poisoned".into()))?;
            serde_json::to_vec_pretty(&*state).unwrap_or_default()
        };
        write_atomic(&self.dir.join("state.json"), &json)
    }

    /// After a checksum check found every segment file whole although their stamps had changed
    /// (a home copied without times, a backup restored), saves the new stamps, so that later
    /// opens do not read every file again (~10 ms per cold turn at 64K skills). Best effort,
    /// and only over the state this process read: a commit since has written its own.
    fn restamp(&self, state_path: &Path) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        let Ok(read) = serde_json::to_vec_pretty(&*state) else {
            return;
        };
        let on_disk: Option<State> = crate::fsio::read_regular(state_path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        if on_disk.is_none_or(|d| serde_json::to_vec_pretty(&d).ok() != Some(read)) {
            return;
        }
        state.files = segment_stamps(&self.dir.join("tantivy"));
        let json = serde_json::to_vec_pretty(&*state).unwrap_or_default();
        if let Err(e) = write_atomic(state_path, &json) {
            tracing::debug!(target: "index", error = %e, "segment stamps not saved");
        }
    }

    /// Records that changes found on disk could not be saved, and why.
    fn unsaved(&self, report: &mut RefreshReport, why: String) {
        tracing::warn!(target: "index", dir = %self.dir.display(), %why, "the index cannot be updated; answering from it as last saved");
        report.diagnostics.push(Diagnostic::warning(
            "index-unwritable",
            &self.dir,
            format!(
                "the index cannot be updated ({why}); answering from it as last saved. Make {} writable (or free space on its disk), then run `skillsearch index`",
                self.cfg.home.display()
            ),
        ));
        report.unsaved = Some(why);
    }

    fn index_files(
        &self,
        writer: &IndexWriter,
        files: &[&FoundFile],
        progress: &dyn Fn(Progress),
    ) -> Result<Vec<Diagnostic>> {
        if files.len() <= 256 {
            // Small updates: no threads, and no progress polling to wait on.
            let mut diags = Vec::new();
            for (i, f) in files.iter().enumerate() {
                let (doc, d) = self.document(f);
                diags.extend(d);
                writer.add_document(doc).map_err(|e| self.index_err(e))?;
                progress(Progress::Read { done: i + 1 });
            }
            return Ok(diags);
        }
        let n_workers = self.cfg.threads.max(1);
        let done = std::sync::atomic::AtomicUsize::new(0);
        let chunk = files.len().div_ceil(n_workers).max(1);
        let results: Vec<Result<Vec<Diagnostic>>> = std::thread::scope(|s| {
            let handles: Vec<_> = files
                .chunks(chunk)
                .map(|part| {
                    let done = &done;
                    s.spawn(move || -> Result<Vec<Diagnostic>> {
                        let mut diags = Vec::new();
                        for f in part {
                            let d = self.document(f);
                            diags.extend(d.1);
                            writer.add_document(d.0).map_err(|e| self.index_err(e))?;
                            done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        Ok(diags)
                    })
                })
                .collect();
            // Report progress from this thread while the workers run.
            loop {
                let finished = handles.iter().all(|h| h.is_finished());
                progress(Progress::Read {
                    done: done.load(std::sync::atomic::Ordering::Relaxed),
                });
                if finished {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Ok(Vec::new())))
                .collect()
        });
        let mut all = Vec::new();
        for r in results {
            all.extend(r?);
        }
        Ok(all)
    }

    fn document(&self, f: &FoundFile) -> (TantivyDocument, Vec<Diagnostic>) {
        let loaded = corpus::load(&f.path, self.cfg.max_file_bytes);
        let body: &str = if self.cfg.body_chars == 0 {
            ""
        } else {
            match loaded.body.char_indices().nth(self.cfg.body_chars) {
                Some((cut, _)) => &loaded.body[..cut],
                None => &loaded.body,
            }
        };
        let stored = StoredMeta {
            meta: loaded.meta.clone(),
            diagnostics: loaded.diagnostics.clone(),
        };
        let meta_json = serde_json::to_string(&stored).unwrap_or_default();
        let f_ = self.f;
        let mut d = doc!(
            f_.path => f.path.to_string_lossy().into_owned(),
            f_.root => f.root as u64,
            f_.rel => f.rel.clone(),
            f_.size => f.size,
            f_.mtime => f.mtime_ns,
            f_.valid => u64::from(loaded.valid),
            f_.has_diag => u64::from(!loaded.diagnostics.is_empty()),
            f_.meta => meta_json,
        );
        if !loaded.valid {
            d.add_u64(f_.chash, 0);
        }
        if loaded.valid {
            d.add_text(f_.name, &loaded.meta.name);
            d.add_text(f_.name_key, &loaded.meta.name);
            d.add_text(f_.description, &loaded.meta.description);
            d.add_text(f_.body, body);
            let etext = crate::corpus::embed_text(&loaded.meta, &loaded.body);
            d.add_u64(f_.chash, crate::corpus::text_hash(&etext));
            d.add_text(f_.etext, etext);
            for p in &loaded.meta.openclaw.activates_plugins {
                d.add_text(f_.activates, p);
            }
        }
        (d, loaded.diagnostics)
    }

    /// The texts the semantic retriever embeds for the current commit's valid skills, with
    /// their hashes (one per distinct hash), at most `limit`: what an embedding run would read.
    pub fn embed_texts(&self, limit: usize) -> Result<Vec<(u64, String)>> {
        let (searcher, keys) = self.snapshot()?;
        embeddable(&keys)
            .take(limit)
            .map(|k| Ok((k.chash, self.embed_text_of(&searcher, k.address)?)))
            .collect()
    }

    /// The text the semantic retriever embeds for one document.
    pub(crate) fn embed_text_of(
        &self,
        searcher: &Searcher,
        addr: tantivy::DocAddress,
    ) -> Result<String> {
        let doc: TantivyDocument = searcher.doc(addr).map_err(|e| self.index_err(e))?;
        Ok(doc
            .get_first(self.f.etext)
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_owned())
    }

    /// The stored metadata of one document.
    pub(crate) fn stored(
        &self,
        searcher: &Searcher,
        addr: tantivy::DocAddress,
    ) -> Result<StoredMeta> {
        let doc: TantivyDocument = searcher.doc(addr).map_err(|e| self.index_err(e))?;
        self.stored_of(&doc)
    }

    /// The stored fields a hit at `addr` of `searcher` needs, kept for the generation:
    /// reading a stored document decompresses its whole block, and a server under load paid
    /// about a tenth of its CPU reading the same popular skills again.
    pub(crate) fn stored_hit(
        &self,
        searcher: &Searcher,
        addr: tantivy::DocAddress,
    ) -> Result<Arc<StoredHit>> {
        let generation = searcher.generation().generation_id();
        if let Some(found) = self
            .per_generation
            .lock()
            .ok()
            .and_then(|mut c| c.at(generation).stored.get(&addr))
        {
            return Ok(found);
        }
        let doc: TantivyDocument = searcher.doc(addr).map_err(|e| self.index_err(e))?;
        let text = |f: Field| {
            doc.get_first(f)
                .and_then(|v| v.as_str())
                .unwrap_or("")
                .to_owned()
        };
        let hit = Arc::new(StoredHit {
            path: text(self.f.path),
            rel: text(self.f.rel),
            meta: self.stored_of(&doc)?.meta,
        });
        if let Ok(mut c) = self.per_generation.lock() {
            c.at(generation).stored.put(addr, hit.clone(), 1);
        }
        Ok(hit)
    }

    pub(crate) fn stored_of(&self, doc: &TantivyDocument) -> Result<StoredMeta> {
        let json = doc
            .get_first(self.f.meta)
            .and_then(|v| v.as_str())
            .unwrap_or("{}");
        serde_json::from_str(json).map_err(|e| Error::Format {
            what: "stored skill",
            path: self.dir.clone(),
            message: e.to_string(),
        })
    }

    /// The skill named `name` that shadows one of root `root`: the first, in precedence order
    /// (lowest root, then lowest id), of those in a root of higher precedence, by its id.
    /// Roots are read from the fast fields, and ids only of documents in the winning root: a
    /// search asks this of every hit, and a stored document read per hit cost a hub under load
    /// a tenth of its CPU.
    pub(crate) fn shadowing(
        &self,
        searcher: &Searcher,
        name: &str,
        root: usize,
    ) -> Result<Option<String>> {
        let e = |e: tantivy::TantivyError| self.index_err(e);
        use tantivy::DocSet;
        let term = Term::from_field_text(self.f.name_key, name);
        let mut above = Vec::new();
        // The postings and the root column are read directly: a term query through the
        // searcher (weight, statistics, a hash set of hits) and a column opened per document
        // cost more than the lookups themselves.
        for (ord, seg) in searcher.segment_readers().iter().enumerate() {
            let Some(mut docs) = seg
                .inverted_index(self.f.name_key)
                .map_err(e)?
                .read_postings(&term, IndexRecordOption::Basic)
                .map_err(|err| Error::io(&self.dir, err))?
            else {
                continue;
            };
            let roots = seg.fast_fields().u64("root").map_err(e)?;
            let alive = seg.alive_bitset();
            let mut doc = docs.doc();
            while doc != tantivy::TERMINATED {
                if alive.is_none_or(|a| a.is_alive(doc)) {
                    let r = roots.first(doc).unwrap_or(0) as usize;
                    if r < root {
                        above.push((r, tantivy::DocAddress::new(ord as u32, doc)));
                    }
                }
                doc = docs.advance();
            }
        }
        let Some(top) = above.iter().map(|(r, _)| *r).min() else {
            return Ok(None);
        };
        let mut best: Option<String> = None;
        for (_, addr) in above.iter().filter(|(r, _)| *r == top) {
            let rel = self.key_at(searcher, *addr)?.rel;
            if best.as_ref().is_none_or(|b| rel < *b) {
                best = Some(rel);
            }
        }
        Ok(best)
    }

    /// Every name held by more than one skill: the winner first, then the shadowed copies.
    pub fn collisions(&self) -> Result<Vec<Collision>> {
        let keys = self.doc_keys()?;
        let mut by_name: HashMap<&str, Vec<&DocKey>> = HashMap::with_capacity(keys.len());
        for k in keys.iter().filter(|k| k.valid) {
            by_name.entry(k.name.as_str()).or_default().push(k);
        }
        let mut out: Vec<Collision> = by_name
            .into_iter()
            .filter(|(_, v)| v.len() > 1)
            .map(|(name, v)| {
                // `keys` is in precedence order, so `v` is too.
                let first_root = v[0].root;
                let (same, later): (Vec<&DocKey>, Vec<&DocKey>) =
                    v.iter().partition(|k| k.root == first_root);
                Collision {
                    name: name.to_owned(),
                    winner: v[0].path.clone(),
                    shadowed: later.iter().map(|k| k.path.clone()).collect(),
                    same_root: same[1..].iter().map(|k| k.path.clone()).collect(),
                }
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Every diagnostic the index knows: the walk's, each file's, and name collisions.
    pub fn diagnostics(&self) -> Result<Vec<Diagnostic>> {
        let mut out = self.walk_diagnostics();
        let (searcher, keys) = self.snapshot()?;
        for k in keys.iter() {
            if k.has_diag {
                out.extend(self.stored(&searcher, k.address)?.diagnostics);
            }
        }
        for c in self.collisions()? {
            for s in &c.same_root {
                out.push(Diagnostic::warning(
                    "duplicate-name",
                    s,
                    format!("skill name `{}` is also used by {} in the same root; both are kept under their own ids", c.name, c.winner.display()),
                ));
            }
            for s in &c.shadowed {
                out.push(Diagnostic::warning(
                    "name-collision",
                    s,
                    format!(
                        "skill name `{}` is already taken by {}; this copy is shadowed",
                        c.name,
                        c.winner.display()
                    ),
                ));
            }
        }
        Ok(out)
    }
}

/// Skills sharing one name. Copies in later roots are shadowed (never offered); other copies in
/// the winner's own root are kept under their own ids.
#[derive(Debug, Clone, Serialize)]
pub struct Collision {
    pub name: String,
    pub winner: PathBuf,
    pub shadowed: Vec<PathBuf>,
    pub same_root: Vec<PathBuf>,
}

/// The keys whose text gets a vector: valid documents, the first of each distinct text hash.
pub(crate) fn embeddable(keys: &[DocKey]) -> impl Iterator<Item = &DocKey> {
    let mut seen = std::collections::HashSet::new();
    keys.iter()
        .filter(move |k| k.valid && k.chash != 0 && seen.insert(k.chash))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes `<root>/<name>/SKILL.md` with this description and body; returns its path.
    fn write_skill(root: &Path, name: &str, description: &str, body: &str) -> PathBuf {
        let path = root.join(name).join("SKILL.md");
        std::fs::create_dir_all(root.join(name)).unwrap();
        std::fs::write(
            &path,
            format!("---\nname: {name}\ndescription: {description}\n---\n{body}\n"),
        )
        .unwrap();
        path
    }

    /// An index over `root`, built now, its home under `tmp`.
    fn open_over(tmp: &Path, root: &Path) -> SkillIndex {
        let cfg = IndexConfig::new(tmp.join("home"));
        SkillIndex::open(&Roots::explicit([root]), &cfg, Refresh::Always, &|_| {})
            .unwrap()
            .0
    }

    #[test]
    fn a_search_splits_over_the_pool_only_while_a_thread_of_it_is_free() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("skills");
        write_skill(&root, "pdf", "Extract tables from PDF files", "Use pdftk.");
        let idx = open_over(tmp.path(), &root);
        assert!(idx.may_split(), "nothing runs yet");
        let threads = rayon::current_num_threads();
        let mut running: Vec<Searching<'_>> = (0..threads.saturating_sub(1))
            .map(|_| idx.searching())
            .collect();
        assert!(idx.may_split(), "{} of {threads} running", running.len());
        running.push(idx.searching());
        assert!(!idx.may_split(), "{threads} of {threads} running");
        running.pop();
        assert!(idx.may_split(), "a search that ended is no longer counted");
        drop(running);
        assert_eq!(idx.searching.load(std::sync::atomic::Ordering::Relaxed), 0);
        idx.set_split(false);
        assert!(!idx.may_split(), "splitting was turned off");
        idx.set_split(true);
        assert!(idx.may_split());
    }

    #[test]
    fn file_existence_under_the_roots_is_kept_until_the_next_disk_check() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("skills");
        write_skill(&root, "pdf", "Does pdf", "See [the guide](guide.md).");
        let idx = open_over(tmp.path(), &root);
        let guide = root.join("pdf/guide.md");
        assert!(!idx.file_exists(&guide));
        std::fs::write(&guide, "# Guide\n").unwrap();
        // Remembered until the index looks at the disk again...
        assert!(!idx.file_exists(&guide));
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert_eq!(idx.refresh(&|_| {}).unwrap().updated, 0);
        // ...which the unchanged skill does not stop.
        assert!(idx.file_exists(&guide));
        std::fs::remove_file(&guide).unwrap();
        assert!(idx.file_exists(&guide));
        // Outside the roots the disk is asked every time.
        let outside = tmp.path().join("elsewhere.md");
        assert!(!idx.file_exists(&outside));
        std::fs::write(&outside, "x").unwrap();
        assert!(idx.file_exists(&outside));
    }

    #[test]
    fn decoded_postings_are_kept_per_segment_and_a_new_generation_is_searched_afresh() {
        use crate::corpus::eligibility::EligibilityEnv;
        use crate::retrieve::SearchOptions;
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("skills");
        let skill = |name: &str, description: &str| write_skill(&root, name, description, "Body.");
        skill("pdf", "Extract tables from PDF files");
        skill("csv", "Clean up comma separated files");
        let idx = open_over(tmp.path(), &root);
        let (opts, gate) = (SearchOptions::default(), EligibilityEnv::default());
        let ids = |idx: &SkillIndex| -> Vec<String> {
            let r = idx.search("tables", &opts, &gate).unwrap();
            r.hits.iter().map(|h| h.id.clone()).collect()
        };
        assert_eq!(ids(&idx), ["pdf"]);
        let searcher = idx.searcher();
        let term = Term::from_field_text(idx.f.description, "tabl");
        let first = idx.postings(searcher.segment_reader(0), &term).unwrap();
        let again = idx.postings(searcher.segment_reader(0), &term).unwrap();
        assert!(
            Arc::ptr_eq(first.as_ref().unwrap(), again.as_ref().unwrap()),
            "decoded once"
        );
        // The word moves to another skill: the new generation's lists are read, not the kept ones.
        std::thread::sleep(std::time::Duration::from_millis(5));
        skill("pdf", "Extract text from PDF files");
        skill("csv", "Clean up comma separated tables");
        assert_eq!(idx.refresh(&|_| {}).unwrap().updated, 2);
        assert_eq!(ids(&idx), ["csv"]);
    }

    #[test]
    fn a_body_is_read_once_per_index_generation_and_the_cache_keeps_to_its_budget() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("skills");
        let skill =
            |name: &str, body: &str| write_skill(&root, name, &format!("Does {name}"), body);
        let pdf = skill("pdf", "Use pdftk.");
        let idx = open_over(tmp.path(), &root);
        assert_eq!(idx.skill_body(&pdf), ("Use pdftk.\n".into(), true));
        // Edited on disk: the index has not seen it, and renders the body it read.
        std::fs::write(
            &pdf,
            "---\nname: pdf\ndescription: Does pdf\n---\nUse qpdf, a much longer body.\n",
        )
        .unwrap();
        assert_eq!(&*idx.skill_body(&pdf).0, "Use pdftk.\n");
        // The refresh that indexes the edit starts a new generation: read again.
        assert_eq!(idx.refresh(&|_| {}).unwrap().updated, 1);
        assert_eq!(&*idx.skill_body(&pdf).0, "Use qpdf, a much longer body.\n");
        // A missing file is not a usable skill.
        assert!(!idx.skill_body(&root.join("gone/SKILL.md")).1);
        // The budget: the oldest bodies go first.
        *idx.per_generation.lock().unwrap() = GenerationCache::new(100);
        let paths: Vec<PathBuf> = (0..10)
            .map(|i| skill(&format!("s{i}"), &"x".repeat(20)))
            .collect();
        for p in &paths {
            assert_eq!(idx.skill_body(p).0.len(), 21);
        }
        let b = idx.per_generation.lock().unwrap();
        assert!(b.bodies.bytes() <= 100, "{} bytes", b.bodies.bytes());
        assert_eq!(b.bodies.bytes(), 21 * b.bodies.len());
        assert!(b.bodies.contains(&paths[9]) && !b.bodies.contains(&paths[0]));
        drop(b);
        // Guard terms: analysed once, again for another name or description.
        let hay = idx.guard_hay(&pdf, "pdf", "Extract tables from PDF files");
        assert!(hay.contains("tabl") && hay.contains("pdf"), "{hay:?}");
        let again = idx.guard_hay(&pdf, "pdf", "Extract tables from PDF files");
        assert!(std::sync::Arc::ptr_eq(&hay, &again));
        let other = idx.guard_hay(&pdf, "pdf", "Merge PDF files");
        assert!(
            other.contains("merg") && !other.contains("tabl"),
            "{other:?}"
        );
    }

    #[test]
    fn a_full_build_leaves_one_segment() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("skills");
        for i in 0..400 {
            let dir = root.join(format!("s{i:03}"));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(
                dir.join("SKILL.md"),
                format!(
                    "---\nname: skill-{i}\ndescription: Does task number {i}\n---\nBody {i}.\n"
                ),
            )
            .unwrap();
        }
        let mut cfg = IndexConfig::new(tmp.path().join("home"));
        // Several indexing threads write a segment each; the build merges them.
        cfg.threads = 4;
        let (idx, _) =
            SkillIndex::open(&Roots::explicit([&root]), &cfg, Refresh::Always, &|_| {}).unwrap();
        let searcher = idx.searcher();
        assert_eq!(searcher.num_docs(), 400);
        assert_eq!(searcher.segment_readers().len(), 1);
    }
}
