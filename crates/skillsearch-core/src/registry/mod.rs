//! The served side of a skill hub (reference §1.3d): what `skillsearch hub serve` answers about
//! each skill of its index. A [`Registry`] turns index documents into hub records — a stable
//! UUID and `skill_id`, a version that changes with the content, the static safety and quality
//! scores of [`scan`] — and packs a skill's tree into the zip a download returns ([`pack`]).
//! Ranking is not here: the server ranks with the engine, as local search does, and asks the
//! registry for the records of the hits.

pub mod pg;
pub mod scan;
pub mod store;

use crate::corpus::{self, frontmatter};
use crate::error::{Error, Result};
use crate::index::{DocKey, SkillIndex};
use scan::Scan;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::{Cursor, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Largest single file a bundle holds (as the client's extraction limit).
pub const MAX_BUNDLE_FILE_BYTES: u64 = 8 << 20;
/// Largest total a bundle holds, uncompressed.
pub const MAX_BUNDLE_BYTES: u64 = 64 << 20;

/// A skill as the hub serves it.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// A UUID derived from `skill_id`: the same on every replica and after a restart.
    pub id: String,
    /// The skill directory relative to its root (the local id).
    pub skill_id: String,
    /// `sha-` and 12 hex digits of the content: a new version when any served file changes.
    pub version: String,
    pub name: String,
    pub description: String,
    /// The whole `SKILL.md`, frontmatter included.
    pub skill_md: String,
    pub dir: PathBuf,
    pub tags: Vec<String>,
    pub category: Option<String>,
    pub license: Option<String>,
    /// Tokens of the body (estimated: 4 characters a token).
    pub body_tokens: usize,
    pub scan: Scan,
}

impl Record {
    /// The catalogue item a discover or search answer lists (no body).
    pub fn item(&self) -> Value {
        json!({
            "id": self.id, "skill_id": self.skill_id, "slug": self.skill_id,
            "version": self.version, "name": self.name, "description": self.description,
            "source": "skillsearch-hub", "category": self.category, "tags": self.tags,
            "license": self.license, "quality_score": self.scan.quality_score,
            "score_safety": self.scan.score_safety, "body_tokens": self.body_tokens,
            "download_url": format!("/openapi/v1/skills/{}/download", self.id),
        })
    }

    /// The full record a read answers.
    pub fn full(&self) -> Value {
        let mut v = self.item();
        if let Value::Object(m) = &mut v {
            m.insert("skill_md".into(), json!(self.skill_md));
            m.insert("files".into(), json!(self.scan.files));
            m.insert("safety_flags".into(), json!(self.scan.safety_flags));
            m.insert("subscores".into(), json!(self.scan.subscores));
        }
        v
    }
}

/// The UUID (version 5 layout) of a `skill_id`.
pub fn skill_uuid(skill_id: &str) -> String {
    let d = Sha256::digest(format!("skillsearch-hub\0{skill_id}").as_bytes());
    let mut b: [u8; 16] = d[..16].try_into().unwrap_or([0; 16]);
    b[6] = (b[6] & 0x0f) | 0x50;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

fn strings(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|x| x.as_str().map(|s| s.trim().to_owned()))
            .filter(|s| !s.is_empty())
            .collect(),
        Some(Value::String(s)) => s
            .split(',')
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty())
            .collect(),
        _ => Vec::new(),
    }
}

fn text(fields: &Map<String, Value>, key: &str) -> Option<String> {
    let v = fields
        .get(key)
        .or_else(|| fields.get("metadata").and_then(|m| m.get(key)))?;
    v.as_str()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// Records of one index, built on first use and rebuilt when a skill's `SKILL.md` changes
/// (size or modification time); a changed supporting file shows at the next index refresh.
#[derive(Debug, Default)]
pub struct Registry {
    /// Records by `skill_id`, with the (size, mtime) of the `SKILL.md` they were built from.
    cache: Mutex<HashMap<String, (Stamp, Arc<Record>)>>,
    /// Which `skill_id` each UUID stands for (see [`Registry::find`]).
    uuids: Mutex<Uuids>,
    /// What [`Registry::find`] found in one index generation, by the id it was asked: within a
    /// generation an id always names the same document, so its record needs no new lookup.
    found: Mutex<Found>,
}

/// See [`Registry::found`]. Holds only ids that found a record, so at most two entries (UUID
/// and `skill_id`) per skill of the index, whatever clients ask.
#[derive(Debug, Default)]
struct Found {
    at: Option<u64>,
    by_id: HashMap<String, Arc<Record>>,
}

type Stamp = (u64, i64);

/// The UUIDs of the skills an index held when it was last read whole: a UUID is a function of
/// the `skill_id` alone, so an entry never goes wrong; a skill gone since finds no document.
#[derive(Debug, Default)]
struct Uuids {
    by_uuid: HashMap<String, String>,
    /// `skill_id` → UUID, so a pass hashes only ids it has not met.
    by_id: HashMap<String, String>,
    /// The index generation the last pass read.
    read_at: Option<u64>,
}

/// Whether `id` has the shape of a UUID (`8-4-4-4-12` hex digits).
fn uuid_shaped(id: &str) -> bool {
    id.len() == 36
        && id.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        })
}

impl Registry {
    pub fn new() -> Registry {
        Registry::default()
    }

    /// The record of one indexed skill, or `None` for an invalid one.
    pub fn record(&self, key: &DocKey) -> Option<Arc<Record>> {
        if !key.valid {
            return None;
        }
        let stamp = (key.size, key.mtime_ns);
        if let Ok(c) = self.cache.lock()
            && let Some((s, r)) = c.get(&key.rel)
            && *s == stamp
        {
            return Some(r.clone());
        }
        let r = Arc::new(build(&key.rel, &key.path)?);
        if let Ok(mut c) = self.cache.lock() {
            c.insert(key.rel.clone(), (stamp, r.clone()));
        }
        Some(r)
    }

    /// Every valid skill's record, in the index's precedence order; a `skill_id` shadowed by an
    /// earlier root is left out.
    pub fn all(&self, index: &SkillIndex) -> Result<Vec<Arc<Record>>> {
        let keys = index.doc_keys()?;
        let mut seen = std::collections::HashSet::new();
        Ok(keys
            .iter()
            .filter(|k| seen.insert(k.rel.clone()))
            .filter_map(|k| self.record(k))
            .collect())
    }

    /// The record whose `id` or `skill_id` is `id`. A `skill_id` is looked up in the index
    /// directly (one term), so a write, which makes a new index generation, costs the next
    /// lookups nothing extra however many skills there are. A UUID is mapped to its `skill_id`
    /// from what the last whole read of the index learnt; one it does not know makes a new
    /// read (every document once), at most once per index generation.
    pub fn find(&self, index: &SkillIndex, id: &str) -> Result<Option<Arc<Record>>> {
        let generation = index.generation();
        {
            let mut f = self.found.lock().unwrap_or_else(|p| p.into_inner());
            if f.at != Some(generation) {
                *f = Found {
                    at: Some(generation),
                    by_id: HashMap::new(),
                };
            } else if let Some(r) = f.by_id.get(id) {
                return Ok(Some(r.clone()));
            }
        }
        let found = self.find_in(index, id)?;
        if let Some(r) = &found {
            let mut f = self.found.lock().unwrap_or_else(|p| p.into_inner());
            if f.at == Some(generation) {
                f.by_id.insert(id.to_owned(), r.clone());
            }
        }
        Ok(found)
    }

    fn find_in(&self, index: &SkillIndex, id: &str) -> Result<Option<Arc<Record>>> {
        let known = self
            .uuids
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .by_uuid
            .get(id)
            .cloned();
        let rel = match known {
            Some(rel) => rel,
            None if uuid_shaped(id) => self
                .learn_uuids(index, id)?
                .unwrap_or_else(|| id.to_owned()),
            None => id.to_owned(),
        };
        Ok(index.key_of(&rel)?.and_then(|k| self.record(&k)))
    }

    /// Reads the UUIDs of every skill `index` holds, unless this generation was read already;
    /// returns the `skill_id` whose UUID is `uuid`, if any.
    fn learn_uuids(&self, index: &SkillIndex, uuid: &str) -> Result<Option<String>> {
        let generation = index.generation();
        let mut u = self.uuids.lock().unwrap_or_else(|p| p.into_inner());
        if u.read_at != Some(generation) {
            let keys = index.doc_keys()?;
            let mut by_id = HashMap::with_capacity(keys.len());
            let mut by_uuid = HashMap::with_capacity(keys.len());
            for k in keys.iter() {
                if by_id.contains_key(&k.rel) {
                    continue;
                }
                let uuid = u
                    .by_id
                    .get(&k.rel)
                    .cloned()
                    .unwrap_or_else(|| skill_uuid(&k.rel));
                by_uuid.insert(uuid.clone(), k.rel.clone());
                by_id.insert(k.rel.clone(), uuid);
            }
            *u = Uuids {
                by_uuid,
                by_id,
                read_at: Some(generation),
            };
        }
        Ok(u.by_uuid.get(uuid).cloned())
    }
}

fn build(skill_id: &str, skill_md_path: &Path) -> Option<Record> {
    let dir = skill_md_path.parent()?.to_path_buf();
    let skill_md = crate::fsio::read_regular_string(skill_md_path).ok()?;
    if skill_md.len() as u64 > corpus::DEFAULT_MAX_FILE_BYTES {
        return None;
    }
    let dir_name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let parsed = frontmatter::parse(&skill_md, &dir_name);
    let fields = frontmatter::fields(&skill_md);
    let scan = scan::scan(
        &dir,
        &parsed.meta.description,
        &parsed.body,
        parsed.problems.len(),
    );
    let mut h = Sha256::new();
    for f in &scan.files {
        h.update(f.as_bytes());
        h.update([0]);
        if let Ok(b) = std::fs::read(dir.join(f)) {
            h.update(Sha256::digest(&b));
        }
    }
    let version = format!(
        "sha-{}",
        h.finalize()[..6]
            .iter()
            .map(|x| format!("{x:02x}"))
            .collect::<String>()
    );
    let tags = {
        let t = strings(fields.get("tags"));
        if t.is_empty() {
            strings(fields.get("metadata").and_then(|m| m.get("tags")))
        } else {
            t
        }
    };
    Some(Record {
        id: skill_uuid(skill_id),
        skill_id: skill_id.to_owned(),
        version,
        name: parsed.meta.name.clone(),
        description: parsed.meta.description.clone(),
        body_tokens: parsed.body.chars().count().div_ceil(4),
        tags,
        category: text(&fields, "category"),
        license: text(&fields, "license"),
        skill_md,
        dir,
        scan,
    })
}

/// The zip `hub publish` sends for the skill directory `dir` (holding `SKILL.md`): packed as a
/// download is (see [`pack`]), under the directory's own name. `None` when `SKILL.md` cannot
/// be read as a regular file.
pub fn pack_dir(dir: &Path) -> Option<Result<Vec<u8>>> {
    let name = dir.file_name()?.to_string_lossy().into_owned();
    let record = build(&name, &dir.join(corpus::bundle::SKILL_FILE))?;
    Some(pack(&record))
}

/// The zip a download returns: every file the scan listed (regular, visible, no links) under
/// `<last part of skill_id>/`, with fixed timestamps so the same tree packs to the same bytes.
/// A file over [`MAX_BUNDLE_FILE_BYTES`] or a tree over [`MAX_BUNDLE_BYTES`] is an error (the
/// bundle is not served), never a silently shorter bundle.
pub fn pack(record: &Record) -> Result<Vec<u8>> {
    let top = record
        .skill_id
        .rsplit('/')
        .next()
        .filter(|s| !s.is_empty() && !s.starts_with('.'))
        .unwrap_or("skill");
    let bad = |message: String| Error::BundleInvalid {
        bundle: record.skill_id.clone(),
        message,
    };
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .last_modified_time(zip::DateTime::default())
        .unix_permissions(0o644);
    let mut total = 0u64;
    for rel in &record.scan.files {
        let path = record.dir.join(rel);
        let meta = std::fs::symlink_metadata(&path).map_err(|e| Error::io(&path, e))?;
        if !meta.is_file() {
            return Err(bad(format!("`{rel}` is no longer a regular file")));
        }
        if meta.len() > MAX_BUNDLE_FILE_BYTES {
            return Err(bad(format!(
                "`{rel}` is {} bytes, over the {MAX_BUNDLE_FILE_BYTES} a bundle file may be",
                meta.len()
            )));
        }
        total += meta.len();
        if total > MAX_BUNDLE_BYTES {
            return Err(Error::BundleTooLarge {
                bundle: record.skill_id.clone(),
                limit: MAX_BUNDLE_BYTES,
            });
        }
        let mut data = Vec::with_capacity(meta.len() as usize);
        crate::fsio::open_regular(&path)
            .and_then(|f| f.take(MAX_BUNDLE_FILE_BYTES + 1).read_to_end(&mut data))
            .map_err(|e| Error::io(&path, e))?;
        w.start_file(format!("{top}/{rel}"), opts)
            .map_err(|e| bad(e.to_string()))?;
        w.write_all(&data).map_err(|e| bad(e.to_string()))?;
    }
    Ok(w.finish().map_err(|e| bad(e.to_string()))?.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_stable_and_well_formed() {
        let a = skill_uuid("pdf/forms");
        assert_eq!(a, skill_uuid("pdf/forms"));
        assert_ne!(a, skill_uuid("pdf/form"));
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "5");
        assert!(a.chars().all(|c| c.is_ascii_hexdigit() || c == '-'));
    }

    #[test]
    fn records_are_found_by_id_and_uuid_across_index_generations() {
        let t = tempfile::tempdir().unwrap();
        let (first, second) = (t.path().join("first"), t.path().join("second"));
        let write = |root: &Path, rel: &str, description: &str| {
            let d = root.join(rel);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(
                d.join("SKILL.md"),
                format!("---\nname: {rel}\ndescription: {description}\n---\nbody\n"),
            )
            .unwrap();
        };
        write(&first, "pdf-forms", "Fill PDF forms");
        write(&second, "pdf-forms", "A shadowed copy");
        write(&first, "broken", "");
        std::fs::write(first.join("broken/SKILL.md"), [0u8, 1, 2]).unwrap();
        let cfg = crate::index::IndexConfig::new(t.path().join("home"));
        let roots = corpus::Roots::explicit([&first, &second]);
        let (idx, _) =
            SkillIndex::open(&roots, &cfg, crate::index::Refresh::Always, &|_| {}).unwrap();
        let reg = Registry::new();
        let by_id = reg.find(&idx, "pdf-forms").unwrap().unwrap();
        assert_eq!(by_id.description, "Fill PDF forms", "the first root wins");
        let by_uuid = reg.find(&idx, &skill_uuid("pdf-forms")).unwrap().unwrap();
        assert!(Arc::ptr_eq(&by_id, &by_uuid));
        assert!(
            reg.find(&idx, "broken").unwrap().is_none(),
            "not a usable skill"
        );
        assert!(reg.find(&idx, &skill_uuid("missing")).unwrap().is_none());
        assert!(reg.find(&idx, "missing").unwrap().is_none());
        // A skill added since (a new generation) is found by its UUID too.
        write(&first, "csv-clean", "Clean CSV files");
        idx.refresh_dirs(&[first.join("csv-clean")], &|_| {})
            .unwrap();
        let csv = reg.find(&idx, &skill_uuid("csv-clean")).unwrap().unwrap();
        assert_eq!(csv.skill_id, "csv-clean");
        // Within a generation an id keeps its record; an edit (a new generation) is seen by
        // both ways of asking, and a removal finds nothing.
        assert!(Arc::ptr_eq(
            &by_id,
            &reg.find(&idx, "pdf-forms").unwrap().unwrap()
        ));
        write(&first, "pdf-forms", "Fill and sign PDF forms");
        idx.refresh_dirs(&[first.join("pdf-forms")], &|_| {})
            .unwrap();
        for id in ["pdf-forms".to_owned(), skill_uuid("pdf-forms")] {
            let r = reg.find(&idx, &id).unwrap().unwrap();
            assert_eq!(r.description, "Fill and sign PDF forms", "{id}");
        }
        std::fs::remove_dir_all(first.join("csv-clean")).unwrap();
        idx.refresh_dirs(&[first.join("csv-clean")], &|_| {})
            .unwrap();
        assert!(reg.find(&idx, "csv-clean").unwrap().is_none());
        assert!(reg.find(&idx, &skill_uuid("csv-clean")).unwrap().is_none());
    }

    #[test]
    fn a_record_and_its_bundle_round_trip_through_the_client_extractor() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("pdf-forms");
        std::fs::create_dir_all(dir.join("scripts")).unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            "---\nname: pdf-forms\ndescription: Fill PDF forms\ntags: [pdf, forms]\nmetadata:\n  category: documents\nlicense: MIT\n---\n# PDF forms\nRun scripts/fill.sh.\n",
        )
        .unwrap();
        std::fs::write(dir.join("scripts/fill.sh"), "echo fill\n").unwrap();
        std::fs::write(dir.join(".secret"), "x").unwrap();
        let r = build("team/pdf-forms", &dir.join("SKILL.md")).unwrap();
        assert_eq!(r.tags, ["pdf", "forms"]);
        assert_eq!(r.category.as_deref(), Some("documents"));
        assert_eq!(r.license.as_deref(), Some("MIT"));
        assert_eq!(r.scan.files, ["SKILL.md", "scripts/fill.sh"]);
        let zip = pack(&r).unwrap();
        assert_eq!(
            zip,
            pack(&r).unwrap(),
            "the same tree packs to the same bytes"
        );
        let out = t.path().join("out");
        crate::corpus::bundle::extract(&zip, &out, "x", &crate::corpus::bundle::Limits::default())
            .unwrap();
        assert!(out.join("SKILL.md").is_file() && out.join("scripts/fill.sh").is_file());
        assert!(!out.join(".secret").exists());
        // A changed file is a new version.
        std::fs::write(dir.join("scripts/fill.sh"), "echo fill2\n").unwrap();
        let r2 = build("team/pdf-forms", &dir.join("SKILL.md")).unwrap();
        assert_ne!(r.version, r2.version);
        assert_eq!(r.id, r2.id);
    }
}
