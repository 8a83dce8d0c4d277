//! The semantic retriever: one sentence vector per skill, kept beside the lexical index and
//! keyed by the hash of the text embedded ([`crate::corpus::embed_text`]), so an unchanged skill is never
//! embedded twice, whichever index, root set or process asks.
//!
//! Vectors live in an append-only file per model, `<home>/vectors/<model>-<dim>.bin`: a 16-byte
//! header, then records of `hash (u64 LE) + dim × f32 LE`. Appends are single writes of whole
//! records, so concurrent processes only ever duplicate a record (the later one wins on load)
//! and a torn tail is ignored. A query is embedded as one vector or, when long, as its
//! passages ([`crate::retrieve::passage`]); a skill scores the cosine of the nearest. One pass
//! over an int8 copy of the index's current vectors (rebuilt when the index commits) picks a
//! pool a few times the limit, which the exact vectors then rank.
//!
//! Until every valid skill has its vector, [`Semantic::search`] declines and retrieval stays
//! lexical; long-lived processes fill the gap in the background ([`Semantic::embed_pending`]).
//!
//! Vectors may also be shared between processes that do not share a home ([`SharedVectors`]:
//! a hub's PostgreSQL store, a peer hub's vectors route): before embedding, the missing
//! skills' vectors are asked of each source by (embedder id, dimension, text key), checked,
//! and kept in the local store; only what none had is embedded, and written back.

use crate::corpus::text_hash;
use crate::error::{Error, Result};
use crate::index::{DocKey, SkillIndex};
use crate::retrieve::embed::Embedder;
use crate::retrieve::passage;
use rayon::prelude::*;
use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

const MAGIC: &[u8; 8] = b"SSVEC\x001\n";
const HEADER: usize = 16;
/// Queries whose vectors a process remembers.
const QUERY_CACHE: usize = 512;

/// Stored vectors of one model.
pub struct VectorStore {
    path: PathBuf,
    dim: usize,
    inner: Mutex<StoreInner>,
}

#[derive(Default)]
struct StoreInner {
    rows: HashMap<u64, usize>,
    data: Vec<f32>,
    /// Bytes of the file read so far (records appended by others start here).
    read_to: u64,
}

impl VectorStore {
    /// Opens (creating) the store for `model` of dimension `dim` under `<home>/vectors/`.
    pub fn open(home: &Path, model: &str, dim: usize) -> Result<VectorStore> {
        let safe: String = model
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let dir = home.join("vectors");
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let store = VectorStore {
            path: dir.join(format!("{safe}-{dim}.bin")),
            dim,
            inner: Mutex::new(StoreInner::default()),
        };
        store.sync()?;
        Ok(store)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn record_bytes(&self) -> u64 {
        8 + 4 * self.dim as u64
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, StoreInner>> {
        self.inner
            .lock()
            .map_err(|_| Error::Invalid("vector store lock poisoned".into()))
    }

    /// Reads records other processes appended since the last look. A file with a foreign
    /// header is replaced (its vectors are only a cache).
    pub fn sync(&self) -> Result<()> {
        let mut inner = self.lock()?;
        let mut file = match crate::fsio::open_regular(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(Error::io(&self.path, e)),
        };
        let len = file.metadata().map_err(|e| Error::io(&self.path, e))?.len();
        if inner.read_to == 0 {
            let mut head = [0u8; HEADER];
            if len < HEADER as u64
                || file.read_exact(&mut head).is_err()
                || &head[..8] != MAGIC
                || u32::from_le_bytes([head[8], head[9], head[10], head[11]]) as usize != self.dim
            {
                tracing::warn!(path = %self.path.display(), "vector file unreadable; starting afresh");
                drop(file);
                std::fs::remove_file(&self.path).map_err(|e| Error::io(&self.path, e))?;
                return Ok(());
            }
            inner.read_to = HEADER as u64;
        }
        let rec = self.record_bytes();
        let whole = (len.saturating_sub(inner.read_to) / rec) * rec;
        if whole == 0 {
            return Ok(());
        }
        file.seek(SeekFrom::Start(inner.read_to))
            .map_err(|e| Error::io(&self.path, e))?;
        let mut buf = vec![0u8; whole as usize];
        file.read_exact(&mut buf)
            .map_err(|e| Error::io(&self.path, e))?;
        for r in buf.chunks_exact(rec as usize) {
            let mut k = [0u8; 8];
            k.copy_from_slice(&r[..8]);
            let v = r[8..]
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]));
            inner.insert(u64::from_le_bytes(k), v, self.dim);
        }
        inner.read_to += whole;
        Ok(())
    }

    /// Stores vectors (appended to the file in one write).
    pub fn append(&self, items: &[(u64, Vec<f32>)]) -> Result<()> {
        if items.is_empty() {
            return Ok(());
        }
        let io = |e| Error::io(&self.path, e);
        if !self.path.exists() {
            // The header appears with the file, atomically: a temporary file linked into place
            // (which fails if another process got there first; its header is as good).
            let dir = self.path.parent().unwrap_or(Path::new("."));
            let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
            let mut head = Vec::with_capacity(HEADER);
            head.extend_from_slice(MAGIC);
            head.extend_from_slice(&(self.dim as u32).to_le_bytes());
            head.extend_from_slice(&[0u8; 4]);
            tmp.write_all(&head).map_err(io)?;
            let _ = std::fs::hard_link(tmp.path(), &self.path);
        }
        // A FIFO where the store is would hold the open until a reader came.
        crate::fsio::refuse_special(&self.path).map_err(io)?;
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.path)
            .map_err(io)?;
        // A writer killed midway leaves part of a record; cut it off so ours stay aligned.
        let len = file.metadata().map_err(io)?.len();
        let rec = self.record_bytes();
        let torn = len.saturating_sub(HEADER as u64) % rec;
        if torn != 0 {
            file.set_len(len - torn).map_err(io)?;
        }
        let mut buf = Vec::with_capacity(items.len() * rec as usize);
        for (k, v) in items {
            if v.len() != self.dim {
                return Err(Error::Invalid(format!(
                    "a vector of {} values for a store of dimension {}",
                    v.len(),
                    self.dim
                )));
            }
            buf.extend_from_slice(&k.to_le_bytes());
            for x in v {
                buf.extend_from_slice(&x.to_le_bytes());
            }
        }
        file.write_all(&buf).map_err(io)?;
        drop(file);
        // Read back through the file, so records appended by others in between come too.
        self.sync()
    }

    /// Whether `key` has a vector.
    pub fn has(&self, key: u64) -> bool {
        self.lock().is_ok_and(|i| i.rows.contains_key(&key))
    }

    /// The stored vector of `key`.
    pub fn get(&self, key: u64) -> Option<Vec<f32>> {
        let inner = self.lock().ok()?;
        let row = *inner.rows.get(&key)?;
        Some(inner.data[row * self.dim..(row + 1) * self.dim].to_vec())
    }

    pub fn len(&self) -> usize {
        self.lock().map_or(0, |i| i.rows.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl StoreInner {
    fn insert(&mut self, key: u64, v: impl Iterator<Item = f32>, dim: usize) {
        match self.rows.get(&key) {
            Some(&row) => {
                for (slot, x) in self.data[row * dim..(row + 1) * dim].iter_mut().zip(v) {
                    *slot = x;
                }
            }
            None => {
                let row = self.data.len() / dim;
                self.data.extend(v);
                self.rows.insert(key, row);
            }
        }
    }
}

/// Vectors computed elsewhere, by text key ([`text_hash`] of the embedded text), for one
/// embedder id and dimension: a hub's shared store, or a peer hub. A source only ever answers
/// for the embedder id and dimension asked; what it returns is checked again here (length,
/// finite values) and a bad vector is skipped with a warning and embedded locally.
pub trait SharedVectors: Send + Sync {
    /// Where the vectors come from, for logs (no secret in it).
    fn describe(&self) -> String;
    /// The vectors this source has for `keys`, for embedder `model` of dimension `dim` (any
    /// subset of `keys`, in any order).
    fn fetch(&self, model: &str, dim: usize, keys: &[u64]) -> Result<Vec<(u64, Vec<f32>)>>;
    /// Keeps vectors this process embedded, for the next process of the same embedder (a
    /// source that only serves does nothing).
    fn save(&self, model: &str, dim: usize, items: &[(u64, Vec<f32>)]) -> Result<()>;
}

/// How much of an index has vectors.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct Coverage {
    pub embedded: usize,
    pub total: usize,
}

impl Coverage {
    pub fn complete(&self) -> bool {
        self.embedded == self.total
    }
}

/// A ranked document of the semantic retriever.
#[derive(Debug, Clone)]
pub struct SemanticCandidate {
    pub score: f32,
    pub key: DocKey,
}

/// The vectors of one index's current commit, int8-quantised into one matrix.
struct Matrix {
    generation: u64,
    /// Vectors in the store when built (an incomplete matrix is rebuilt when more arrive).
    stored: usize,
    /// When built, so an incomplete matrix is not rebuilt more than once per
    /// [`REBUILD_PENDING`] while vectors trickle in.
    built: std::time::Instant,
    keys: Vec<DocKey>,
    /// Empty unless coverage is complete.
    codes: Quantised,
    coverage: Coverage,
}

impl Matrix {
    /// Whether this matrix still answers for a store now holding `stored` vectors: it is
    /// complete, nothing arrived since, or too few arrived to complete it and it is recent.
    fn fresh(&self, stored: usize) -> bool {
        let missing = self.coverage.total.saturating_sub(self.coverage.embedded);
        self.coverage.complete()
            || stored == self.stored
            || (stored < self.stored + missing && self.built.elapsed() < REBUILD_PENDING)
    }
}

/// An incomplete matrix is rebuilt at most this often while the store grows (each rebuild
/// reads every document key; a background embedder adds vectors every fraction of a second).
const REBUILD_PENDING: std::time::Duration = std::time::Duration::from_secs(2);
/// Batches of texts read and sorted by length together when filling the store.
const SORT_WINDOW: usize = 16;
/// Rows per task of the parallel scan.
const SCAN_CHUNK: usize = 4096;

/// Unit vectors as int8 codes, one scale per row: `v ≈ code / scale`.
#[derive(Default)]
struct Quantised {
    dim: usize,
    codes: Vec<i8>,
    /// `1 / scale` of each row.
    inv: Vec<f32>,
}

impl Quantised {
    fn push(&mut self, v: &[f32]) {
        let (codes, inv) = quantise(v);
        self.codes.extend(codes);
        self.inv.push(inv);
    }

    /// Approximate dot product of every row with the nearest of `qs`, in one pass over the
    /// rows; split over the rayon pool when `split`.
    fn scores(&self, qs: &[Vec<f32>], split: bool) -> Vec<f32> {
        let queries: Vec<(Vec<i8>, f32)> = qs.iter().map(|q| quantise(q)).collect();
        let dim = self.dim.max(1);
        let mut out = vec![0f32; self.inv.len()];
        // Compiled for the widest vector instructions the CPU has (AVX-512, AVX2), chosen at
        // run time: the default x86-64 target only assumes SSE2.
        let arch = pulp::Arch::new();
        let scan = |((out, codes), inv): ((&mut [f32], &[i8]), &[f32])| {
            arch.dispatch(ScanRows {
                out,
                codes,
                inv,
                queries: &queries,
                dim,
            })
        };
        if split {
            out.par_chunks_mut(SCAN_CHUNK)
                .zip(self.codes.par_chunks(SCAN_CHUNK * dim))
                .zip(self.inv.par_chunks(SCAN_CHUNK))
                .for_each(scan);
        } else {
            out.chunks_mut(SCAN_CHUNK)
                .zip(self.codes.chunks(SCAN_CHUNK * dim))
                .zip(self.inv.chunks(SCAN_CHUNK))
                .for_each(scan);
        }
        out
    }
}

/// Approximate scores of a run of rows, as a [`pulp::WithSimd`] so that the loop is compiled
/// inside the instruction set `pulp` picked.
struct ScanRows<'a> {
    out: &'a mut [f32],
    codes: &'a [i8],
    inv: &'a [f32],
    /// Each query's codes and the inverse of its scale.
    queries: &'a [(Vec<i8>, f32)],
    dim: usize,
}

impl pulp::WithSimd for ScanRows<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _: S) {
        for ((o, row), &i) in self
            .out
            .iter_mut()
            .zip(self.codes.chunks_exact(self.dim))
            .zip(self.inv)
        {
            *o = self
                .queries
                .iter()
                .map(|(q, qinv)| dot_i8(row, q) as f32 * qinv)
                .fold(f32::NEG_INFINITY, f32::max)
                * i;
        }
    }
}

/// The texts a query is embedded as: its passages of up to `words` words, or the query itself
/// when it has no word or `words` is 0.
fn query_passages(query: &str, words: usize) -> Vec<&str> {
    let p = match words {
        0 => Vec::new(),
        w => passage::passages(query, w),
    };
    if p.is_empty() { vec![query] } else { p }
}

/// Int8 codes of `v` scaled by its largest magnitude, and the inverse of that scale.
fn quantise(v: &[f32]) -> (Vec<i8>, f32) {
    let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
    if !(max > 0.0 && max.is_finite()) {
        return (vec![0; v.len()], 0.0);
    }
    let scale = 127.0 / max;
    let codes = v
        .iter()
        .map(|x| (x * scale).round().clamp(-127.0, 127.0) as i8)
        .collect();
    (codes, 1.0 / scale)
}

/// Dot product of two int8 rows (written so the compiler vectorises it; inlined into the
/// caller's instruction set).
#[inline(always)]
fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    // Products of adjacent pairs summed in i32: the shape of a multiply-add-pairs instruction
    // (pmaddwd). Codes lie in -127..=127, so no product or pair sum overflows.
    let mut acc = [0i32; 16];
    let (ac, ar) = a.as_chunks::<32>();
    let (bc, br) = b.as_chunks::<32>();
    for (x, y) in ac.iter().zip(bc) {
        for k in 0..16 {
            acc[k] += i32::from(i16::from(x[2 * k]) * i16::from(y[2 * k]))
                + i32::from(i16::from(x[2 * k + 1]) * i16::from(y[2 * k + 1]));
        }
    }
    let tail: i32 = ar
        .iter()
        .zip(br)
        .map(|(x, y)| i32::from(*x) * i32::from(*y))
        .sum();
    acc.iter().sum::<i32>() + tail
}

/// The semantic retriever a process ranks with, or why it has none. One per process (as
/// the turn engine holds it), shared by every index it searches: vectors are keyed by text,
/// not by index. Whoever loads the embedder fills it; a search that wants semantic ranking reads
/// it once.
#[derive(Default)]
pub struct SemanticSlot {
    state: RwLock<(Option<Arc<Semantic>>, Option<String>)>,
}

impl SemanticSlot {
    /// A slot holding `semantic`.
    pub fn with(semantic: Arc<Semantic>) -> SemanticSlot {
        let slot = SemanticSlot::default();
        slot.attach(semantic);
        slot
    }

    /// Makes hybrid and semantic retrieval available to searches given this slot.
    pub fn attach(&self, semantic: Arc<Semantic>) {
        if let Ok(mut s) = self.state.write() {
            *s = (Some(semantic), None);
        }
    }

    /// Records why there is no semantic retriever (`None`: forget it); it stays detached. A
    /// search that wanted one says this in its notes instead of the generic "no sentence model
    /// loaded".
    pub fn set_off(&self, why: Option<String>) {
        if let Ok(mut s) = self.state.write() {
            *s = (None, why);
        }
    }

    /// The attached semantic retriever.
    pub fn get(&self) -> Option<Arc<Semantic>> {
        self.state.read().ok().and_then(|s| s.0.clone())
    }

    /// Why no semantic retriever is attached, when someone said so.
    pub fn off(&self) -> Option<String> {
        self.state.read().ok().and_then(|s| s.1.clone())
    }
}

/// Query vectors by query text, and the order they came in (oldest evicted first).
/// The vectors of a query's passages, one per passage.
pub type QueryVectors = Arc<Vec<Vec<f32>>>;
/// Remembered query vectors by (passage words, query), and their order of arrival.
type QueryCache = (
    HashMap<(usize, String), QueryVectors>,
    VecDeque<(usize, String)>,
);

/// The semantic retriever for one embedder, shared by every index of a process (the vectors
/// are keyed by text, not by index).
pub struct Semantic {
    embedder: Arc<dyn Embedder>,
    store: VectorStore,
    /// Per index directory.
    matrices: RwLock<HashMap<PathBuf, Arc<Matrix>>>,
    queries: Mutex<QueryCache>,
    /// Where vectors are asked for before embedding, and written back to ([`SharedVectors`]).
    shared: RwLock<Vec<Arc<dyn SharedVectors>>>,
}

/// What [`Semantic::embed_pending`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Filled {
    /// Skills embedded here.
    pub embedded: usize,
    /// Skills whose vectors came from a [`SharedVectors`] source.
    pub fetched: usize,
}

/// Shared vectors appended to the local store per write.
const FETCH_CHUNK: usize = 2_000;

/// One page of the vectors an index's skills have ([`Semantic::vectors_page`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VectorPage {
    /// Distinct skill texts of the index (what a complete set of vectors covers).
    pub total: usize,
    /// Whether every one of them has its vector.
    pub complete: bool,
    /// Text key, the id of a skill with that text, the vector; by key.
    pub items: Vec<(u64, String, Vec<f32>)>,
    /// The key to ask after for the next page; `None` on the last.
    pub next: Option<u64>,
}

impl Semantic {
    pub fn new(home: &Path, embedder: Arc<dyn Embedder>) -> Result<Semantic> {
        let store = VectorStore::open(home, embedder.id(), embedder.dim())?;
        Ok(Semantic {
            embedder,
            store,
            matrices: RwLock::new(HashMap::new()),
            queries: Mutex::new((HashMap::new(), VecDeque::new())),
            shared: RwLock::new(Vec::new()),
        })
    }

    /// Asks `sources`, in order, for the vectors of skills before embedding them, and writes
    /// what this process embeds back to them ([`SharedVectors`]).
    pub fn share_with(&self, sources: Vec<Arc<dyn SharedVectors>>) {
        if let Ok(mut s) = self.shared.write() {
            *s = sources;
        }
    }

    /// The embedder's dimension.
    pub fn dim(&self) -> usize {
        self.store.dim
    }

    /// Fills the local store from the shared sources with the vectors of `todo` they have;
    /// returns the keys still missing. A source that fails is logged and skipped (the skills
    /// are embedded here instead); a vector of the wrong length or with values that are not
    /// finite is skipped with a warning.
    fn fetch_shared(&self, sources: &[Arc<dyn SharedVectors>], todo: Vec<u64>) -> Vec<u64> {
        let (model, dim) = (self.embedder.id(), self.store.dim);
        let mut missing = todo;
        for src in sources {
            if missing.is_empty() {
                break;
            }
            let wanted: std::collections::HashSet<u64> = missing.iter().copied().collect();
            let rows = match src.fetch(model, dim, &missing) {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(source = %src.describe(), error = %e,
                        "shared vectors unavailable; embedding here instead");
                    continue;
                }
            };
            let mut good = Vec::with_capacity(rows.len());
            let mut bad = 0usize;
            for (k, v) in rows {
                if !wanted.contains(&k) {
                    continue;
                }
                if v.len() != dim || v.iter().any(|x| !x.is_finite()) {
                    bad += 1;
                    tracing::warn!(source = %src.describe(), key = format!("{k:016x}"), values = v.len(), expected = dim,
                        "a shared vector is corrupt (wrong length or not finite); skipped, embedding that skill here");
                    continue;
                }
                good.push((k, v));
            }
            let got = good.len();
            for part in good.chunks(FETCH_CHUNK) {
                if let Err(e) = self.store.append(part) {
                    tracing::warn!(error = %e, "cannot keep shared vectors in the local store");
                    break;
                }
            }
            if got + bad > 0 {
                tracing::info!(source = %src.describe(), model, fetched = got, skipped = bad, "vectors taken from a shared source");
            }
            missing.retain(|k| !self.store.has(*k));
        }
        missing
    }

    pub fn model(&self) -> &str {
        self.embedder.id()
    }

    pub fn store(&self) -> &VectorStore {
        &self.store
    }

    /// The matrix for the index's current commit, rebuilt when the commit changed or vectors
    /// arrived since it was built.
    fn matrix(&self, index: &SkillIndex) -> Result<Arc<Matrix>> {
        let generation = index.generation();
        if let Ok(all) = self.matrices.read()
            && let Some(m) = all.get(index.dir())
            && m.generation == generation
            && m.fresh(self.store.len())
        {
            return Ok(m.clone());
        }
        self.store.sync()?;
        let keys = index.doc_keys()?;
        let inner = self.store.lock()?;
        let stored = inner.rows.len();
        let dim = self.store.dim;
        let valid: Vec<&DocKey> = keys.iter().filter(|k| k.valid).collect();
        let mut coverage = Coverage {
            embedded: 0,
            total: valid.len(),
        };
        let mut rows = Vec::with_capacity(valid.len());
        let mut at = Vec::with_capacity(valid.len());
        for k in &valid {
            if let Some(&row) = inner.rows.get(&k.chash) {
                coverage.embedded += 1;
                rows.push((*k).clone());
                at.push(row);
            }
        }
        let mut codes = Quantised {
            dim,
            ..Quantised::default()
        };
        if coverage.complete() {
            codes.codes.reserve(at.len() * dim);
            codes.inv.reserve(at.len());
            for row in at {
                codes.push(&inner.data[row * dim..(row + 1) * dim]);
            }
        }
        drop(inner);
        let m = Arc::new(Matrix {
            generation,
            stored,
            built: std::time::Instant::now(),
            keys: rows,
            codes,
            coverage,
        });
        if let Ok(mut all) = self.matrices.write() {
            all.insert(index.dir().to_path_buf(), m.clone());
        }
        Ok(m)
    }

    /// The vectors of `index`'s skills, by text key, those after `after` (`None`: from the
    /// first), at most `limit`: what a hub serves so that a client of the same embedder need not
    /// embed its catalogue. Skills without a vector yet are left out (`complete` says so).
    pub fn vectors_page(
        &self,
        index: &SkillIndex,
        after: Option<u64>,
        limit: usize,
    ) -> Result<VectorPage> {
        self.store.sync()?;
        let keys = index.doc_keys()?;
        let mut all: Vec<(u64, &str)> = crate::index::embeddable(&keys)
            .map(|k| (k.chash, k.rel.as_str()))
            .collect();
        all.sort_unstable();
        let total = all.len();
        let inner = self.store.lock()?;
        let dim = self.store.dim;
        let complete = all.iter().all(|(k, _)| inner.rows.contains_key(k));
        let start = after.map_or(0, |a| all.partition_point(|(k, _)| *k <= a));
        let mut items = Vec::new();
        let mut next = None;
        for (k, id) in &all[start..] {
            if items.len() == limit.max(1) {
                next = items.last().map(|(k, _, _): &(u64, String, Vec<f32>)| *k);
                break;
            }
            if let Some(&row) = inner.rows.get(k) {
                items.push((
                    *k,
                    (*id).to_owned(),
                    inner.data[row * dim..(row + 1) * dim].to_vec(),
                ));
            }
        }
        Ok(VectorPage {
            total,
            complete,
            items,
            next,
        })
    }

    /// How many of the index's valid skills have vectors.
    pub fn coverage(&self, index: &SkillIndex) -> Result<Coverage> {
        Ok(self.matrix(index)?.coverage)
    }

    /// Embeds every valid skill of `index` that has no vector yet, `batch` texts at a time,
    /// calling `progress(done, todo)` after each batch; stops early when `stop` is set.
    /// Returns how many were embedded.
    pub fn embed_pending(
        &self,
        index: &SkillIndex,
        batch: usize,
        stop: &AtomicBool,
        progress: &dyn Fn(usize, usize),
    ) -> Result<usize> {
        Ok(self.fill_pending(index, batch, stop, progress)?.embedded)
    }

    /// [`Semantic::embed_pending`], first taking from the shared sources ([`Semantic::share_with`])
    /// the vectors they have of the missing skills (`progress` counts only what is embedded
    /// here); says how many were embedded and how many fetched.
    pub fn fill_pending(
        &self,
        index: &SkillIndex,
        batch: usize,
        stop: &AtomicBool,
        progress: &dyn Fn(usize, usize),
    ) -> Result<Filled> {
        self.store.sync()?;
        let (searcher, keys) = index.snapshot()?;
        let mut todo: Vec<&DocKey> = crate::index::embeddable(&keys)
            .filter(|k| !self.store.has(k.chash))
            .collect();
        let sources: Vec<Arc<dyn SharedVectors>> =
            self.shared.read().map(|s| s.clone()).unwrap_or_default();
        let mut fetched = 0;
        if !todo.is_empty() && !sources.is_empty() {
            let mut keys: Vec<u64> = todo.iter().map(|k| k.chash).collect();
            keys.sort_unstable();
            keys.dedup();
            let asked = keys.len();
            let missing = self.fetch_shared(&sources, keys);
            fetched = asked - missing.len();
            todo.retain(|k| !self.store.has(k.chash));
        }
        // A source that fails a write is not written to again in this pass (one warning).
        let mut writable: Vec<&Arc<dyn SharedVectors>> = sources.iter().collect();
        let batch = batch.max(1);
        let mut done = 0;
        // Texts are read a window of batches at a time and sorted by length within it, so that
        // each batch pads to a length close to its texts' own (faster by a fifth to a third on
        // skill corpora, where lengths vary tenfold).
        'windows: for window in todo.chunks(batch * SORT_WINDOW) {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let mut texts = Vec::with_capacity(window.len());
            for k in window {
                texts.push((k.chash, index.embed_text_of(&searcher, k.address)?));
            }
            texts.sort_by_key(|(_, t)| t.len());
            for part in texts.chunks(batch) {
                if stop.load(Ordering::Relaxed) {
                    break 'windows;
                }
                let refs: Vec<&str> = part.iter().map(|(_, t)| t.as_str()).collect();
                let vecs = self.embedder.embed(&refs)?;
                if vecs.len() != part.len() {
                    return Err(Error::Invalid(format!(
                        "the embedder returned {} vectors for {} texts",
                        vecs.len(),
                        part.len()
                    )));
                }
                let items: Vec<(u64, Vec<f32>)> = part.iter().map(|(h, _)| *h).zip(vecs).collect();
                self.store.append(&items)?;
                writable.retain(|src| match src.save(self.embedder.id(), self.store.dim, &items) {
                    Ok(()) => true,
                    Err(e) => {
                        tracing::warn!(source = %src.describe(), error = %e,
                            "cannot share the vectors embedded here; not trying again until the next pass");
                        false
                    }
                });
                done += part.len();
                progress(done, todo.len());
            }
        }
        Ok(Filled {
            embedded: done,
            fetched,
        })
    }

    /// Embeds and stores the vectors of `queries` (a long one's passages in batches), so that
    /// later searches for them (in this process or another) skip the model: for evaluation runs
    /// over a fixed query set. Returns how many texts were embedded.
    pub fn store_queries(&self, queries: &[&str], words: usize, batch: usize) -> Result<usize> {
        let mut seen = std::collections::HashSet::new();
        let (mut whole, mut passages) = (Vec::new(), Vec::new());
        for q in queries {
            let texts = query_passages(q, words);
            let split = texts.len() > 1;
            for t in texts {
                let h = text_hash(t);
                if seen.insert(h) && !self.store.has(h) {
                    if split { &mut passages } else { &mut whole }.push(t);
                }
            }
        }
        for (part, split) in whole
            .chunks(batch.max(1))
            .map(|p| (p, false))
            .chain(passages.chunks(batch.max(1)).map(|p| (p, true)))
        {
            let vecs = self.embed_texts(part, split)?;
            let items: Vec<(u64, Vec<f32>)> = part.iter().map(|q| text_hash(q)).zip(vecs).collect();
            self.store.append(&items)?;
        }
        Ok(whole.len() + passages.len())
    }

    /// The vectors of `texts`: a long query's passages when `passages`, else whole queries.
    fn embed_texts(&self, texts: &[&str], passages: bool) -> Result<Vec<Vec<f32>>> {
        if passages {
            self.embedder.embed_passages(texts)
        } else {
            texts.iter().map(|t| self.embedder.embed_query(t)).collect()
        }
    }

    /// The vectors of the query's passages of up to `words` words ([`passage::passages`]; 0:
    /// the query whole), remembered for repeated queries; a text whose vector is stored (see
    /// [`Semantic::store_queries`]) is not embedded again. A failure (the embedder's error, a wrong number of vectors or dimension,
    /// a value that is not finite) says that the query's embedding failed and why; nothing is
    /// remembered then, so the next search tries again.
    pub fn query_vectors(&self, query: &str, words: usize) -> Result<QueryVectors> {
        let key = (words, query.to_owned());
        if let Ok(c) = self.queries.lock()
            && let Some(v) = c.0.get(&key)
        {
            return Ok(v.clone());
        }
        let failed = |why: String| {
            Error::Invalid(format!(
                "embedding the query with `{}` failed: {why}",
                self.embedder.id()
            ))
        };
        let texts = query_passages(query, words);
        let mut vectors: Vec<Option<Vec<f32>>> =
            texts.iter().map(|t| self.store.get(text_hash(t))).collect();
        let missing: Vec<&str> = texts
            .iter()
            .zip(&vectors)
            .filter(|(_, v)| v.is_none())
            .map(|(t, _)| *t)
            .collect();
        if !missing.is_empty() {
            let embedded = self
                .embed_texts(&missing, texts.len() > 1)
                .map_err(|e| failed(e.to_string()))?;
            if embedded.len() != missing.len() {
                return Err(failed(format!(
                    "{} vectors for {} passages",
                    embedded.len(),
                    missing.len()
                )));
            }
            let mut embedded = embedded.into_iter();
            for v in vectors.iter_mut().filter(|v| v.is_none()) {
                *v = embedded.next();
            }
        }
        let vectors: Vec<Vec<f32>> = vectors.into_iter().flatten().collect();
        for v in &vectors {
            if v.len() != self.store.dim {
                return Err(failed(format!(
                    "a vector of {} values, expected {}",
                    v.len(),
                    self.store.dim
                )));
            }
            if v.iter().any(|x| !x.is_finite()) {
                return Err(failed("the vector holds values that are not finite".into()));
            }
        }
        let v = Arc::new(vectors);
        if let Ok(mut c) = self.queries.lock() {
            let (map, order) = &mut *c;
            if map.insert(key.clone(), v.clone()).is_none() {
                order.push_back(key);
                if order.len() > QUERY_CACHE
                    && let Some(old) = order.pop_front()
                {
                    map.remove(&old);
                }
            }
        }
        Ok(v)
    }

    /// The `limit` skills nearest the query (a skill's score: its cosine to the nearest of the
    /// query's passages of up to `words` words), best first (ties by precedence, then id), with
    /// the index generation their addresses belong to; `None` while some valid skill has no
    /// vector yet.
    pub fn search(
        &self,
        index: &SkillIndex,
        query: &str,
        words: usize,
        limit: usize,
    ) -> Result<Option<(Vec<SemanticCandidate>, u64, Coverage)>> {
        let m = self.matrix(index)?;
        if !m.coverage.complete() {
            return Ok(None);
        }
        if m.keys.is_empty() {
            return Ok(Some((Vec::new(), m.generation, m.coverage)));
        }
        let qs = self.query_vectors(query, words)?;
        let n = m.keys.len();
        // The int8 scan picks a pool a few times `limit`; the exact vectors rank it.
        let pool = (limit * 2).max(limit + 32);
        let mut order: Vec<usize> = (0..n).collect();
        if pool < n {
            let approx = m.codes.scores(&qs, index.may_split());
            order.select_nth_unstable_by(pool, |a, b| approx[*b].total_cmp(&approx[*a]));
            order.truncate(pool);
        }
        let mut ranked: Vec<(usize, f32)> = {
            let inner = self.store.lock()?;
            let dim = self.store.dim;
            order
                .into_iter()
                .map(|i| {
                    let score = inner
                        .rows
                        .get(&m.keys[i].chash)
                        .map_or(f32::NEG_INFINITY, |&r| {
                            let row = &inner.data[r * dim..(r + 1) * dim];
                            qs.iter()
                                .map(|q| crate::retrieve::embed::dot(row, q))
                                .fold(f32::NEG_INFINITY, f32::max)
                        });
                    (i, score)
                })
                .collect()
        };
        ranked.sort_by(|(a, sa), (b, sb)| {
            sb.total_cmp(sa).then_with(|| {
                (m.keys[*a].root, &m.keys[*a].rel).cmp(&(m.keys[*b].root, &m.keys[*b].rel))
            })
        });
        ranked.truncate(limit);
        let out = ranked
            .into_iter()
            .map(|(i, score)| SemanticCandidate {
                score,
                key: m.keys[i].clone(),
            })
            .collect();
        Ok(Some((out, m.generation, m.coverage)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_survives_reopening_a_torn_tail_and_a_foreign_file() {
        let home = tempfile::tempdir().unwrap();
        let s = VectorStore::open(home.path(), "m/x", 2).unwrap();
        s.append(&[(7, vec![0.6, 0.8]), (9, vec![1.0, 0.0])])
            .unwrap();
        assert!(s.append(&[(3, vec![1.0])]).is_err());
        let path = s.path().to_path_buf();
        assert!(
            path.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("m_x-2")
        );
        // A torn record at the end (a writer killed midway) is ignored.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(&[1, 2, 3]).unwrap();
        let again = VectorStore::open(home.path(), "m/x", 2).unwrap();
        assert!(again.has(7) && again.has(9) && !again.has(3));
        assert_eq!(again.len(), 2);
        // Another process's appends become visible on sync.
        s.append(&[(11, vec![0.0, 1.0])]).unwrap();
        again.sync().unwrap();
        assert!(again.has(11));
        // A store of another dimension under the same name starts afresh.
        std::fs::write(&path, b"garbage").unwrap();
        let fresh = VectorStore::open(home.path(), "m/x", 2).unwrap();
        assert!(fresh.is_empty());
    }

    /// Deterministic pseudo-random unit vectors (xorshift), so the test needs no crate.
    fn unit_vectors(n: usize, dim: usize, mut seed: u64) -> Vec<Vec<f32>> {
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        };
        (0..n)
            .map(|_| {
                let mut v: Vec<f32> = (0..dim).map(|_| next()).collect();
                assert!(crate::retrieve::embed::l2_normalise(&mut v));
                v
            })
            .collect()
    }

    #[test]
    fn the_int8_scan_tracks_exact_dot_products_and_keeps_the_true_top_in_its_pool() {
        let dim = 384;
        let rows = unit_vectors(3000, dim, 0x9e37_79b9_7f4a_7c15);
        let mut q = Quantised {
            dim,
            ..Quantised::default()
        };
        for r in &rows {
            q.push(r);
        }
        let queries = unit_vectors(5, dim, 42);
        for (t, query) in queries.iter().enumerate() {
            let approx = q.scores(std::slice::from_ref(query), true);
            let exact: Vec<f32> = rows
                .iter()
                .map(|r| crate::retrieve::embed::dot(r, query))
                .collect();
            for (a, e) in approx.iter().zip(&exact) {
                assert!((a - e).abs() < 0.02, "query {t}: {a} vs {e}");
            }
            // The exact top 30 all sit inside the int8 top 30 + 32 (the pool `search` uses).
            let top = |s: &[f32], k: usize| {
                let mut o: Vec<usize> = (0..s.len()).collect();
                o.sort_by(|a, b| s[*b].total_cmp(&s[*a]));
                o.truncate(k);
                o
            };
            let pool = top(&approx, 62);
            assert!(
                top(&exact, 30).iter().all(|i| pool.contains(i)),
                "query {t}"
            );
        }
        // Several queries (a prompt's passages) score each row by the nearest, in one pass.
        let each: Vec<Vec<f32>> = queries[..3]
            .iter()
            .map(|query| q.scores(std::slice::from_ref(query), false))
            .collect();
        let all = q.scores(&queries[..3], true);
        for (r, a) in all.iter().enumerate() {
            assert_eq!(*a, each.iter().map(|s| s[r]).fold(f32::MIN, f32::max));
        }
        // A zero or non-finite row scores 0 rather than NaN.
        q.push(&vec![0.0; dim]);
        q.push(&vec![f32::NAN; dim]);
        let s = q.scores(std::slice::from_ref(&rows[0]), false);
        assert_eq!(&s[s.len() - 2..], &[0.0, 0.0]);
        assert!((s[0] - 1.0).abs() < 0.02);
    }

    #[test]
    fn the_int8_dot_product_is_exact_for_extreme_codes_and_ragged_lengths() {
        for len in [0, 1, 31, 32, 33, 384, 385] {
            let a: Vec<i8> = (0..len)
                .map(|i| if i % 3 == 0 { -127 } else { 127 })
                .collect();
            let b: Vec<i8> = (0..len)
                .map(|i| if i % 2 == 0 { -127 } else { 127 })
                .collect();
            let exact: i32 = a
                .iter()
                .zip(&b)
                .map(|(x, y)| i32::from(*x) * i32::from(*y))
                .sum();
            assert_eq!(dot_i8(&a, &b), exact, "length {len}");
            assert_eq!(dot_i8(&a, &a), 127 * 127 * len, "length {len}");
        }
    }

    #[test]
    fn an_incomplete_matrix_is_reused_only_until_enough_vectors_arrived_to_complete_it() {
        let m = |embedded, total, stored, age_s| Matrix {
            generation: 1,
            stored,
            built: std::time::Instant::now() - std::time::Duration::from_secs(age_s),
            keys: Vec::new(),
            codes: Quantised::default(),
            coverage: Coverage { embedded, total },
        };
        // Complete: always fresh.
        assert!(m(10, 10, 10, 60).fresh(500));
        // Nothing arrived since it was built.
        assert!(m(4, 10, 4, 60).fresh(4));
        // Some arrived, too few to complete it, and it is recent: reused.
        assert!(m(4, 10, 4, 0).fresh(9));
        // Enough arrived to complete it: rebuilt at once.
        assert!(!m(4, 10, 4, 0).fresh(10));
        // Too old: rebuilt.
        assert!(!m(4, 10, 4, 60).fresh(5));
    }
}
