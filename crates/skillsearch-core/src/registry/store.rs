//! The hub's embedded store: skills published to a hub, their versions and the tokens that may
//! publish or read, in one directory (no other process). `hub serve --store DIR` indexes its
//! `live/` tree like any other skill root, so a published skill is ranked, read and downloaded
//! as a configured one is.
//!
//! Layout of a store directory:
//! - `live/<name>/` — the current version of each published skill (what is served), with a
//!   hidden `.published.json` naming its version;
//! - `versions/<name>/<version>.zip` — every published version, as validated and repacked;
//!   `versions/<name>/versions.json` — their history (publish order, content digest, yanked);
//! - `tokens/<id>.json` — one token each: its scope and the SHA-256 of the token (never the
//!   token itself);
//! - `tmp/` — staging (same file system, so a finished tree is renamed into place).
//!
//! Publishing is all or nothing: the archive is extracted with the client's extractor (no `..`,
//! absolute paths, links or special files; sizes counted while inflating), its `SKILL.md` must
//! be UTF-8 text with a frontmatter `name` that is a slug and a `description`; then the version
//! is recorded and the live tree is swapped in one `rename` (an atomic exchange where one is
//! already served). A reader sees the old tree or the new one, never a mix. The current version
//! is the latest published one not yanked; yanking it puts the one before back.

use crate::corpus::bundle::{self, Limits, SKILL_FILE};
use crate::corpus::frontmatter;
use crate::error::Error as CoreError;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Largest archive a publish may send.
pub const MAX_PUBLISH_BYTES: usize = 16 << 20;

/// Why a store call failed; each maps to one hub error code.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The published content is refused (the message says what to change).
    #[error("{0}")]
    Rejected(String),
    /// The version exists with other content.
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    NotFound(String),
    /// The database behind a [`PgStore`](super::pg::PgStore) failed or cannot be reached (the
    /// message names it, never with its password).
    #[error("{0}")]
    Database(String),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The disk the store writes to (or its database's) is full: the write was not made, and
    /// none will be until space is freed. The message names the store or file.
    #[error("{0}")]
    Full(String),
}

/// The error of a file operation on `path`: [`StoreError::Full`] when the disk is full (or a
/// quota reached), else [`StoreError::Io`].
pub(crate) fn io(path: &Path, source: std::io::Error) -> StoreError {
    use std::io::ErrorKind::{QuotaExceeded, StorageFull};
    if matches!(source.kind(), StorageFull | QuotaExceeded) {
        return StoreError::Full(format!(
            "{}: no space left on the hub store's disk ({source})",
            path.display()
        ));
    }
    StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What a token may do. `publish` implies `read`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Read,
    Publish,
}

impl Scope {
    pub fn parse(s: &str) -> Option<Scope> {
        match s {
            "read" => Some(Scope::Read),
            "publish" => Some(Scope::Publish),
            _ => None,
        }
    }

    /// Whether a token of this scope may do what `needed` asks.
    pub fn allows(self, needed: Scope) -> bool {
        self == Scope::Publish || needed == Scope::Read
    }
}

/// One published version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Version {
    pub version: String,
    /// SHA-256 of the repacked bundle (hex).
    pub sha256: String,
    /// Seconds since the Unix epoch.
    pub published_at: u64,
    pub yanked: bool,
    /// Bytes of the repacked bundle.
    pub size: u64,
}

/// What a publish did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Published {
    pub name: String,
    pub version: String,
    /// False when this exact version was already published with the same content.
    pub created: bool,
    /// Entries of the archive that were not stored (a suffix clients never install), each
    /// with why.
    pub skipped: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct TokenFile {
    scope: Scope,
    sha256: String,
    created: u64,
}

/// The `.published.json` of a served tree: which version it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct LiveMarker {
    pub(crate) version: String,
    pub(crate) sha256: String,
}

/// What [`validate`] made of an archive: the repacked bundle that is stored and served.
#[derive(Debug, Clone)]
pub(crate) struct Validated {
    pub(crate) name: String,
    pub(crate) version: String,
    pub(crate) zip: Vec<u8>,
    pub(crate) sha256: String,
    pub(crate) skipped: Vec<String>,
}

/// See the module documentation.
#[derive(Debug)]
pub struct Store {
    dir: PathBuf,
    tree: LiveTree,
    /// Publishes, yanks and deletes one at a time (one server per store directory).
    writer: Mutex<()>,
}

pub(crate) fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A skill name a store accepts: the agent-skills rule (lowercase letters, digits and single
/// hyphens, 1–64 characters, not starting or ending with a hyphen).
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

/// The entries of `dir` that are skill names, sorted.
fn skill_names_in(dir: &Path) -> Result<Vec<String>, StoreError> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| io(dir, e))?
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .filter(|n| valid_name(n))
        .collect();
    out.sort();
    Ok(out)
}

pub(crate) fn valid_version(v: &str) -> bool {
    (1..=64).contains(&v.len())
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'+' | b'_'))
        && v.as_bytes()[0].is_ascii_alphanumeric()
}

impl Store {
    /// Opens (creating) the store at `dir` and puts back any live tree a crash left behind its
    /// recorded current version.
    pub fn open(dir: &Path) -> Result<Store, StoreError> {
        for sub in ["live", "versions", "tokens", "tmp"] {
            let d = dir.join(sub);
            std::fs::create_dir_all(&d).map_err(|e| io(&d, e))?;
        }
        let store = Store {
            dir: dir.to_path_buf(),
            tree: LiveTree::new(dir.join("live"), dir.join("tmp")),
            writer: Mutex::new(()),
        };
        store.tree.clear_tmp();
        store.reconcile()?;
        Ok(store)
    }

    /// The skill root `hub serve` indexes.
    pub fn live(&self) -> PathBuf {
        self.dir.join("live")
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn history_path(&self, name: &str) -> PathBuf {
        self.dir.join("versions").join(name).join("versions.json")
    }

    /// Every version of `name` in publish order (empty: never published, or deleted).
    pub fn versions(&self, name: &str) -> Result<Vec<Version>, StoreError> {
        if !valid_name(name) {
            return Ok(Vec::new());
        }
        let p = self.history_path(name);
        match std::fs::read(&p) {
            Ok(b) => serde_json::from_slice(&b).map_err(|e| {
                io(
                    &p,
                    std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()),
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(io(&p, e)),
        }
    }

    fn save_history(&self, name: &str, history: &[Version]) -> Result<(), StoreError> {
        let p = self.history_path(name);
        let bytes = serde_json::to_vec_pretty(history).unwrap_or_default();
        crate::fsio::write_atomic(&p, &bytes).map_err(|(p, e)| io(&p, e))
    }

    /// The published skills' names, sorted.
    pub fn names(&self) -> Result<Vec<String>, StoreError> {
        skill_names_in(&self.dir.join("versions"))
    }

    /// Validates and stores `archive` (a zip of one skill tree) as a new version, then serves
    /// it. See the module documentation for what is refused.
    pub fn publish(&self, archive: &[u8]) -> Result<Published, StoreError> {
        let _w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let Validated {
            name,
            version,
            zip,
            sha256: sha,
            skipped,
        } = validate(archive, &self.dir.join("tmp"))?;
        let mut history = self.versions(&name)?;
        if let Some(v) = history.iter().find(|v| v.version == version) {
            return republished(name, version, skipped, &sha, (&v.sha256, v.yanked));
        }
        let vdir = self.dir.join("versions").join(&name);
        let new_skill = history.is_empty();
        // Takes back a version that was not stored whole: the bundle first, whose space lets
        // the history be written again; a skill's first version, its directory.
        let take_back = |zpath: &Path, before: &[Version]| {
            let undone = if new_skill {
                std::fs::remove_dir_all(&vdir).map_err(|e| io(&vdir, e))
            } else {
                let _ = std::fs::remove_file(zpath);
                self.save_history(&name, before)
            };
            if let Err(undo) = undone {
                tracing::error!(target: "hub", skill = %name, version = %version, error = %undo,
                    "a failed publish could not be taken back");
            }
        };
        std::fs::create_dir_all(&vdir).map_err(|e| io(&vdir, e))?;
        let zpath = vdir.join(format!("{version}.zip"));
        if let Err((p, e)) = crate::fsio::write_atomic(&zpath, &zip) {
            // The bundle was not written (the write is atomic): only a first version's new
            // directory is left to remove.
            if new_skill {
                let _ = std::fs::remove_dir_all(&vdir);
            }
            return Err(io(&p, e));
        }
        let before = history.clone();
        history.push(Version {
            version: version.clone(),
            sha256: sha.clone(),
            published_at: now(),
            yanked: false,
            size: zip.len() as u64,
        });
        let stored = self
            .save_history(&name, &history)
            .and_then(|()| self.tree.go_live(&name, Some((&version, &sha, &zip))));
        if let Err(e) = stored {
            // Not served (a full disk, most often): nothing of the version stays.
            take_back(&zpath, &before);
            return Err(e);
        }
        Ok(Published {
            name,
            version,
            created: true,
            skipped,
        })
    }

    /// Marks `version` of `name` yanked: no longer served; when it was the current version,
    /// the latest one before it that is not yanked is served again (or none).
    pub fn yank(&self, name: &str, version: &str) -> Result<Version, StoreError> {
        let _w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let mut history = self.versions(name)?;
        let Some(v) = history.iter_mut().find(|v| v.version == version) else {
            return Err(StoreError::NotFound(format!(
                "`{name}` has no version `{version}`"
            )));
        };
        v.yanked = true;
        let yanked = v.clone();
        self.save_history(name, &history)?;
        self.serve_current(name, &history)?;
        Ok(yanked)
    }

    /// Removes `name`: every version and the served tree.
    pub fn delete(&self, name: &str) -> Result<usize, StoreError> {
        let _w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let history = self.versions(name)?;
        if history.is_empty() {
            return Err(StoreError::NotFound(format!("no published skill `{name}`")));
        }
        self.tree.go_live(name, None)?;
        let vdir = self.dir.join("versions").join(name);
        let aside = self.tree.staging();
        std::fs::rename(&vdir, &aside).map_err(|e| io(&vdir, e))?;
        let _ = std::fs::remove_dir_all(&aside);
        Ok(history.len())
    }

    /// Serves the current version of `name` per `history`.
    fn serve_current(&self, name: &str, history: &[Version]) -> Result<(), StoreError> {
        match history.iter().rev().find(|v| !v.yanked) {
            None => self.tree.go_live(name, None),
            Some(v) => {
                let zpath = self
                    .dir
                    .join("versions")
                    .join(name)
                    .join(format!("{}.zip", v.version));
                let zip = std::fs::read(&zpath).map_err(|e| io(&zpath, e))?;
                self.tree.go_live(name, Some((&v.version, &v.sha256, &zip)))
            }
        }
    }

    /// After a crash between recording a version and serving it: serves what the history says.
    fn reconcile(&self) -> Result<(), StoreError> {
        for name in self.names()? {
            let history = self.versions(&name)?;
            let want = history.iter().rev().find(|v| !v.yanked);
            let have = self.tree.served(&name);
            let same = match (want, &have) {
                (None, None) => !self.live().join(&name).exists(),
                (Some(w), Some(h)) => w.sha256 == h.sha256,
                _ => false,
            };
            if !same {
                tracing::warn!(target: "hub", skill = %name, "served tree did not match the recorded current version; serving the recorded one");
                self.serve_current(&name, &history)?;
            }
        }
        Ok(())
    }

    /// Creates a token of `scope`; returns it (shown once: only its digest is kept).
    pub fn create_token(&self, scope: Scope) -> Result<String, StoreError> {
        let mut secret = [0u8; 24];
        getrandom::fill(&mut secret).map_err(|e| {
            io(
                &self.dir,
                std::io::Error::other(format!("no system randomness: {e}")),
            )
        })?;
        let id = bundle::random_hex(12);
        let token = format!("skh_{id}_{}", hex(&secret));
        let file = TokenFile {
            scope,
            sha256: hex(&Sha256::digest(token.as_bytes())),
            created: now(),
        };
        let p = self.dir.join("tokens").join(format!("{id}.json"));
        crate::fsio::write_atomic(&p, &serde_json::to_vec(&file).unwrap_or_default())
            .map_err(|(p, e)| io(&p, e))?;
        Ok(token)
    }

    /// The scope of `token`, or `None` when it is not one of this store's.
    pub fn token_scope(&self, token: &str) -> Option<Scope> {
        let id = token.strip_prefix("skh_")?.split('_').next()?;
        if id.len() != 12 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let p = self.dir.join("tokens").join(format!("{id}.json"));
        let f: TokenFile = serde_json::from_slice(&crate::fsio::read_regular(&p).ok()?).ok()?;
        let got = hex(&Sha256::digest(token.as_bytes()));
        crate::secrets::constant_time_eq(got.as_bytes(), f.sha256.as_bytes()).then_some(f.scope)
    }

    /// Whether any token exists (a hub with none accepts no publish).
    pub fn has_tokens(&self) -> bool {
        std::fs::read_dir(self.dir.join("tokens"))
            .map(|mut d| d.next().is_some())
            .unwrap_or(false)
    }
}

/// A directory of served skill trees (`live/<name>/`, each with its `.published.json`) and the
/// staging directory beside it (same file system) where a tree is built before it is renamed
/// into place. Both stores serve through one.
#[derive(Debug)]
pub(crate) struct LiveTree {
    live: PathBuf,
    tmp: PathBuf,
}

impl LiveTree {
    pub(crate) fn new(live: PathBuf, tmp: PathBuf) -> LiveTree {
        LiveTree { live, tmp }
    }

    pub(crate) fn live(&self) -> &Path {
        &self.live
    }

    pub(crate) fn staging(&self) -> PathBuf {
        self.tmp.join(bundle::random_hex(16))
    }

    /// Removes what an interrupted run left in the staging directory.
    pub(crate) fn clear_tmp(&self) {
        if let Ok(rd) = std::fs::read_dir(&self.tmp) {
            for e in rd.flatten() {
                let _ =
                    std::fs::remove_dir_all(e.path()).or_else(|_| std::fs::remove_file(e.path()));
            }
        }
    }

    /// What `live/<name>` serves, per its marker (`None`: nothing, or no readable marker).
    pub(crate) fn served(&self, name: &str) -> Option<LiveMarker> {
        let marker = self.live.join(name).join(".published.json");
        std::fs::read(&marker)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
    }

    /// The names of the served trees (any entry of `live/` that is a skill name), sorted.
    pub(crate) fn names(&self) -> Result<Vec<String>, StoreError> {
        skill_names_in(&self.live)
    }

    /// Makes `live/<name>` the tree of `zip` (or removes it), in one rename.
    pub(crate) fn go_live(
        &self,
        name: &str,
        to: Option<(&str, &str, &[u8])>,
    ) -> Result<(), StoreError> {
        let live = self.live.join(name);
        let Some((version, sha, zip)) = to else {
            if std::fs::symlink_metadata(&live).is_ok() {
                let aside = self.staging();
                std::fs::rename(&live, &aside).map_err(|e| io(&live, e))?;
                let _ = std::fs::remove_dir_all(&aside);
            }
            return Ok(());
        };
        let stage = self.staging();
        let tree = stage.join(name);
        bundle::extract(zip, &tree, name, &Limits::default())
            .map_err(|e| StoreError::Rejected(e.to_string()))?;
        let marker = serde_json::to_vec(&LiveMarker {
            version: version.to_owned(),
            sha256: sha.to_owned(),
        })
        .unwrap_or_default();
        let mpath = tree.join(".published.json");
        std::fs::write(&mpath, marker).map_err(|e| io(&mpath, e))?;
        let swapped = if std::fs::symlink_metadata(&live).is_ok() {
            rustix::fs::renameat_with(
                rustix::fs::CWD,
                &tree,
                rustix::fs::CWD,
                &live,
                rustix::fs::RenameFlags::EXCHANGE,
            )
            .map_err(std::io::Error::from)
            .or_else(|_| {
                // No atomic exchange on this file system: move the old tree aside first (the
                // skill is absent for that moment, never half there).
                let aside = stage.join("old");
                std::fs::rename(&live, &aside)?;
                std::fs::rename(&tree, &live)
            })
        } else {
            std::fs::rename(&tree, &live)
        };
        let _ = std::fs::remove_dir_all(&stage);
        swapped.map_err(|e| io(&live, e))
    }
}

/// A publish of a version that exists, stored with digest and yanked state `existing`: the
/// same content again is not a new version (`created: false`); other content, or a yanked
/// version, is a conflict.
pub(crate) fn republished(
    name: String,
    version: String,
    skipped: Vec<String>,
    sha256: &str,
    existing: (&str, bool),
) -> Result<Published, StoreError> {
    let (had, yanked) = existing;
    if had == sha256 && !yanked {
        return Ok(Published {
            name,
            version,
            created: false,
            skipped,
        });
    }
    Err(StoreError::Conflict(format!(
        "`{name}` version `{version}` is already published{}; publish a new version (set `version` in the frontmatter)",
        if yanked {
            " (and yanked)"
        } else {
            " with other content"
        }
    )))
}

/// Checks `archive` as a publish must (size, the client's extractor and its limits, the
/// `SKILL.md` rules of [`check_skill`]) and repacks the checked tree, staging under `tmp`
/// (removed before returning). The version is the declared one, or `sha-` and 12 hex digits.
pub(crate) fn validate(archive: &[u8], tmp: &Path) -> Result<Validated, StoreError> {
    if archive.len() > MAX_PUBLISH_BYTES {
        return Err(StoreError::Rejected(format!(
            "the archive is {} bytes, over the {MAX_PUBLISH_BYTES} a publish may send",
            archive.len()
        )));
    }
    let stage = tmp.join(bundle::random_hex(16));
    let result = validate_staged(archive, &stage);
    let _ = std::fs::remove_dir_all(&stage);
    result
}

fn validate_staged(archive: &[u8], stage: &Path) -> Result<Validated, StoreError> {
    std::fs::create_dir_all(stage).map_err(|e| io(stage, e))?;
    let tree = stage.join("tree");
    let diagnostics =
        bundle::extract(archive, &tree, "publish", &Limits::default()).map_err(|e| match e {
            CoreError::BundleInvalid { message, .. } => StoreError::Rejected(message),
            CoreError::BundleTooLarge { limit, .. } => StoreError::Rejected(format!(
                "the archive inflates past {limit} bytes, the most a skill may hold"
            )),
            CoreError::Io { path, source } => io(&path, source),
            other => StoreError::Rejected(other.to_string()),
        })?;
    // A file too large to serve would leave the skill without it: the publish is refused, not
    // shortened. A suffix clients never install is only reported.
    if let Some(d) = diagnostics
        .iter()
        .find(|d| d.code == "bundle-entry-too-large")
    {
        return Err(StoreError::Rejected(format!(
            "`{}` is too large to serve: {}; leave it out or make it smaller",
            d.path.display(),
            d.message
        )));
    }
    let skipped: Vec<String> = diagnostics
        .iter()
        .map(|d| format!("{}: {}", d.path.display(), d.message))
        .collect();
    let (name, version) = check_skill(&tree)?;
    // Repacked from the validated tree: what is stored and served is what was checked.
    let record = super::build(&name, &tree.join(SKILL_FILE))
        .ok_or_else(|| StoreError::Rejected(format!("`{SKILL_FILE}` could not be read back")))?;
    let zip = super::pack(&record).map_err(|e| StoreError::Rejected(e.to_string()))?;
    let sha256 = hex(&Sha256::digest(&zip));
    let version = version.unwrap_or_else(|| format!("sha-{}", &sha256[..12]));
    Ok(Validated {
        name,
        version,
        zip,
        sha256,
        skipped,
    })
}

/// The published name and declared version of the tree at `tree`, or why it is refused.
fn check_skill(tree: &Path) -> Result<(String, Option<String>), StoreError> {
    let p = tree.join(SKILL_FILE);
    let bytes = crate::fsio::read_regular(&p).map_err(|e| io(&p, e))?;
    if bytes.contains(&0) {
        return Err(StoreError::Rejected(format!(
            "`{SKILL_FILE}` is binary (it holds NUL bytes); it must be markdown text"
        )));
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| StoreError::Rejected(format!("`{SKILL_FILE}` is not UTF-8 text")))?;
    let parsed = frontmatter::parse(&text, "");
    if !parsed.problems.is_empty() {
        let why: Vec<String> = parsed
            .problems
            .iter()
            .map(|(code, m)| format!("{code}: {m}"))
            .collect();
        return Err(StoreError::Rejected(format!(
            "`{SKILL_FILE}` frontmatter: {}",
            why.join("; ")
        )));
    }
    let name = parsed.meta.name.trim().to_owned();
    if !valid_name(&name) {
        return Err(StoreError::Rejected(format!(
            "`{SKILL_FILE}` name `{name}` is not a skill name: use 1-64 lowercase letters, digits and single hyphens"
        )));
    }
    if parsed.meta.description.trim().is_empty() {
        return Err(StoreError::Rejected(format!(
            "`{SKILL_FILE}` has no description; a hub ranks skills by it"
        )));
    }
    let fields = frontmatter::fields(&text);
    let version = fields
        .get("version")
        .or_else(|| fields.get("metadata").and_then(|m| m.get("version")))
        .and_then(|v| match v {
            serde_json::Value::String(s) => Some(s.trim().to_owned()),
            serde_json::Value::Number(n) => Some(n.to_string()),
            _ => None,
        });
    if let Some(v) = &version
        && !valid_version(v)
    {
        return Err(StoreError::Rejected(format!(
            "`{SKILL_FILE}` version `{v}` is not a version: use up to 64 letters, digits and `.-+_`, starting with a letter or digit"
        )));
    }
    Ok((name, version))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zip_of(files: &[(&str, &[u8])]) -> Vec<u8> {
        use std::io::Write;
        let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let o = zip::write::SimpleFileOptions::default();
        for (p, b) in files {
            w.start_file(*p, o).unwrap();
            w.write_all(b).unwrap();
        }
        w.finish().unwrap().into_inner()
    }

    fn skill(name: &str, version: &str, body: &str) -> Vec<u8> {
        let md = format!(
            "---\nname: {name}\ndescription: Fill PDF forms\nversion: \"{version}\"\n---\n{body}\n"
        );
        zip_of(&[(&format!("{name}/SKILL.md"), md.as_bytes())])
    }

    #[test]
    fn names_and_versions_are_checked() {
        assert!(valid_name("pdf-forms") && valid_name("a1"));
        for bad in ["", "-a", "a-", "a--b", "A", "a/b", "..", &"a".repeat(65)] {
            assert!(!valid_name(bad), "{bad}");
        }
        assert!(valid_version("1.2.0-rc.1+build"));
        assert!(!valid_version("../1") && !valid_version(".1") && !valid_version(""));
    }

    #[test]
    fn publish_yank_and_delete_serve_the_right_tree() {
        let t = tempfile::tempdir().unwrap();
        let s = Store::open(t.path()).unwrap();
        let live = s.live().join("pdf-forms").join(SKILL_FILE);
        let p1 = s.publish(&skill("pdf-forms", "1.0.0", "one")).unwrap();
        assert!(p1.created);
        assert!(std::fs::read_to_string(&live).unwrap().contains("one"));
        // The same content again is not a new version; other content under it is refused.
        assert!(
            !s.publish(&skill("pdf-forms", "1.0.0", "one"))
                .unwrap()
                .created
        );
        assert!(matches!(
            s.publish(&skill("pdf-forms", "1.0.0", "changed")),
            Err(StoreError::Conflict(_))
        ));
        s.publish(&skill("pdf-forms", "1.1.0", "two")).unwrap();
        assert!(std::fs::read_to_string(&live).unwrap().contains("two"));
        // Yanking the current version puts the one before back.
        s.yank("pdf-forms", "1.1.0").unwrap();
        assert!(std::fs::read_to_string(&live).unwrap().contains("one"));
        s.yank("pdf-forms", "1.0.0").unwrap();
        assert!(!live.exists());
        assert!(matches!(
            s.yank("pdf-forms", "9"),
            Err(StoreError::NotFound(_))
        ));
        s.publish(&skill("pdf-forms", "2.0.0", "three")).unwrap();
        assert_eq!(s.delete("pdf-forms").unwrap(), 3);
        assert!(!live.exists() && s.versions("pdf-forms").unwrap().is_empty());
        assert!(
            std::fs::read_dir(t.path().join("tmp"))
                .unwrap()
                .next()
                .is_none()
        );
    }

    #[test]
    fn a_crash_between_record_and_swap_is_put_right_at_open() {
        let t = tempfile::tempdir().unwrap();
        let s = Store::open(t.path()).unwrap();
        s.publish(&skill("pdf-forms", "1.0.0", "one")).unwrap();
        s.publish(&skill("pdf-forms", "1.1.0", "two")).unwrap();
        // The live tree still holds the old version (as if the swap never happened).
        let live = s.live().join("pdf-forms");
        std::fs::write(
            live.join(".published.json"),
            br#"{"version":"1.0.0","sha256":"x"}"#,
        )
        .unwrap();
        std::fs::write(live.join(SKILL_FILE), "stale").unwrap();
        drop(s);
        let s = Store::open(t.path()).unwrap();
        assert!(
            std::fs::read_to_string(s.live().join("pdf-forms/SKILL.md"))
                .unwrap()
                .contains("two")
        );
    }

    #[test]
    fn tokens_are_stored_hashed_with_their_scope() {
        let t = tempfile::tempdir().unwrap();
        let s = Store::open(t.path()).unwrap();
        assert!(!s.has_tokens());
        let r = s.create_token(Scope::Read).unwrap();
        let p = s.create_token(Scope::Publish).unwrap();
        assert_eq!(s.token_scope(&r), Some(Scope::Read));
        assert_eq!(s.token_scope(&p), Some(Scope::Publish));
        assert_eq!(s.token_scope(&format!("{r}x")), None);
        assert_eq!(s.token_scope("skh_../../x_y"), None);
        for f in std::fs::read_dir(t.path().join("tokens")).unwrap() {
            let text = std::fs::read_to_string(f.unwrap().path()).unwrap();
            assert!(!text.contains(&r[17..]) && !text.contains(&p[17..]));
        }
        assert!(Scope::Publish.allows(Scope::Read) && !Scope::Read.allows(Scope::Publish));
    }
}
