//! Skill bundles (reference §1.8): safe extraction of a downloaded zip and the on-disk cache of
//! extracted bundles.
//!
//! Extraction trusts nothing in the archive:
//! - an entry whose path leaves the destination (`..`, an absolute or drive path, a NUL byte)
//!   or that is a symbolic link or another special file aborts the whole bundle;
//! - files with a suffix outside [`ALLOWED_EXTENSIONS`] are skipped (a warning diagnostic),
//!   as are files whose declared size is above [`Limits::max_file_bytes`];
//! - sizes are counted *while inflating*: a file that inflates past its declared size, or an
//!   archive that inflates past [`Limits::max_total_bytes`] in all, aborts the bundle however
//!   small its headers claim it is;
//! - nothing is ever executed, and files are written with default permissions.
//!
//! A bundle is extracted into a staging directory next to its destination
//! (`<version>.incoming-<pid>-<8 hex>`) and renamed into place only when complete, so a cache
//! entry is either whole or absent; a failed extraction removes its staging directory. A single
//! wrapper directory (`<skill>/SKILL.md`) is unwrapped. An entry without a `SKILL.md` (left by
//! an older version or an interrupted copy) is removed and downloaded again.

use crate::corpus::diagnostic::Diagnostic;
use crate::corpus::{Roots, absolute};
use crate::error::{Error, Result};
use serde::Serialize;
use std::hash::{BuildHasher, Hasher};
use std::io::{Cursor, Read, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// File suffixes a bundle may carry (lowercase, without the dot; `""`: no suffix).
pub const ALLOWED_EXTENSIONS: &[&str] = &[
    "md", "txt", "json", "jsonl", "yaml", "yml", "toml", "csv", "tsv", "cfg", "ini", "xml", "html",
    "htm", "sql", "env", "", "sh", "py", "js", "mjs", "cjs", "ts", "rb", "pl", "lua", "ps1", "bat",
    "svg", "png", "jpg", "jpeg", "gif", "webp", "pdf",
];

/// The file every installed bundle has at its root.
pub const SKILL_FILE: &str = "SKILL.md";

/// Extraction limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// A file declared larger than this is skipped.
    pub max_file_bytes: u64,
    /// Inflating more than this in all aborts the bundle.
    pub max_total_bytes: u64,
    /// An archive with more entries than this is refused.
    pub max_entries: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_file_bytes: 8 << 20,
            max_total_bytes: 64 << 20,
            max_entries: 10_000,
        }
    }
}

/// An installed bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Installed {
    /// The cache key's parts, sanitised.
    pub slug: String,
    pub version: String,
    /// The skill directory (holds `SKILL.md`).
    pub dir: PathBuf,
    pub skill_md: PathBuf,
    /// True when the cache already held it and nothing was downloaded.
    pub from_cache: bool,
    /// Entries skipped, a cache entry healed.
    pub diagnostics: Vec<Diagnostic>,
}

/// A cache-key component: characters outside `[A-Za-z0-9_.@-]` become `_`, leading dots too
/// (no `.`, `..` or hidden names), at most 120 characters; `fallback` when nothing is left.
pub fn sanitize(component: &str, fallback: &str) -> String {
    let mut out: String = component
        .chars()
        .take(120)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '@' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let dots = out.len() - out.trim_start_matches('.').len();
    out.replace_range(..dots, &"_".repeat(dots));
    if out.trim_matches('_').is_empty() {
        fallback.to_owned()
    } else {
        out
    }
}

/// Where a bundle lives in the cache: `<cache_dir>/<slug>/<version>`.
pub fn cache_path(cache_dir: &Path, slug: &str, version: &str) -> PathBuf {
    cache_dir
        .join(sanitize(slug, "skill"))
        .join(sanitize(version, "v0"))
}

fn resolved(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| absolute(p))
}

/// The cache must sit outside every scanned skill root (and hold none), or installed bundles
/// would be indexed again as local skills.
pub fn check_outside(cache_dir: &Path, roots: &Roots) -> Result<()> {
    let cache = resolved(cache_dir);
    for root in &roots.0 {
        let r = resolved(&root.path);
        if cache.starts_with(&r) || r.starts_with(&cache) {
            return Err(Error::Invalid(format!(
                "bundle cache `{}` overlaps skill root `{}`; installed bundles would be indexed as local skills",
                cache.display(),
                r.display()
            )));
        }
    }
    Ok(())
}

/// `len` random lowercase hex digits (not cryptographic: names and request ids).
pub fn random_hex(len: usize) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut out = String::with_capacity(len + 16);
    while out.len() < len {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        h.write_u32(std::process::id());
        if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
            h.write_u128(t.as_nanos());
        }
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out.truncate(len);
    out
}

/// Checks an entry name and returns it as a relative path (`None`: nothing to write, e.g. `./`).
fn safe_relative(raw: &[u8]) -> std::result::Result<Option<PathBuf>, &'static str> {
    if raw.contains(&0) {
        return Err("has a NUL byte in its name");
    }
    let name = String::from_utf8_lossy(raw).replace('\\', "/");
    let b = name.as_bytes();
    if name.starts_with('/') || (b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':') {
        return Err("is an absolute path");
    }
    let mut out = PathBuf::new();
    for part in name.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err("leaves the bundle (`..`)"),
            p => out.push(p),
        }
    }
    // `Path` agrees: only plain components remain.
    if !out.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err("is not a plain relative path");
    }
    Ok((!out.as_os_str().is_empty()).then_some(out))
}

fn extension(rel: &Path) -> String {
    let name = rel
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => ext.to_ascii_lowercase(),
        _ => String::new(),
    }
}

/// Extracts `archive` into the empty directory `into`. On error the caller removes `into`.
fn extract_into(
    archive: &[u8],
    into: &Path,
    bundle: &str,
    limits: &Limits,
) -> Result<Vec<Diagnostic>> {
    let invalid = |message: String| Error::BundleInvalid {
        bundle: bundle.to_owned(),
        message,
    };
    let mut zip = zip::ZipArchive::new(Cursor::new(archive))
        .map_err(|e| invalid(format!("not a readable zip archive ({e})")))?;
    if zip.len() > limits.max_entries {
        return Err(invalid(format!(
            "{} entries, more than the {} allowed",
            zip.len(),
            limits.max_entries
        )));
    }
    let mut diagnostics = Vec::new();
    let mut total: u64 = 0;
    let mut buf = vec![0u8; 64 * 1024];
    for i in 0..zip.len() {
        let mut file = zip
            .by_index(i)
            .map_err(|e| invalid(format!("entry {i} cannot be read ({e})")))?;
        let shown = String::from_utf8_lossy(file.name_raw()).into_owned();
        let unsafe_entry = |reason: &'static str| Error::BundleUnsafe {
            bundle: bundle.to_owned(),
            entry: shown.clone(),
            reason,
        };
        let rel = safe_relative(file.name_raw()).map_err(&unsafe_entry)?;
        if file.is_symlink() {
            return Err(unsafe_entry("is a symbolic link"));
        }
        if file.is_dir() {
            continue;
        }
        // Unix file type bits: only regular files (or none recorded) are written.
        if let Some(mode) = file.unix_mode()
            && !matches!(mode & 0o170000, 0 | 0o100000)
        {
            return Err(unsafe_entry("is not a regular file"));
        }
        let Some(rel) = rel else { continue };
        if rel
            .components()
            .next()
            .is_some_and(|c| c.as_os_str() == "__MACOSX")
        {
            continue;
        }
        let ext = extension(&rel);
        if !ALLOWED_EXTENSIONS.contains(&ext.as_str()) {
            diagnostics.push(Diagnostic::warning(
                "bundle-entry-skipped",
                &rel,
                format!("bundle `{bundle}`: `.{ext}` files are not installed; skipped"),
            ));
            continue;
        }
        let declared = file.size();
        if declared > limits.max_file_bytes {
            diagnostics.push(Diagnostic::warning(
                "bundle-entry-too-large",
                &rel,
                format!(
                    "bundle `{bundle}`: {declared} bytes, more than the {} a file may have; skipped",
                    limits.max_file_bytes
                ),
            ));
            continue;
        }
        let target = into.join(&rel);
        let write_err = |e: std::io::Error| {
            invalid(format!(
                "entry `{shown}` cannot be written ({e}); is it listed twice, or under a file?"
            ))
        };
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(write_err)?;
        }
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&target)
            .map_err(write_err)?;
        let mut written: u64 = 0;
        loop {
            let n = file
                .read(&mut buf)
                .map_err(|e| invalid(format!("entry `{shown}` does not inflate ({e})")))?;
            if n == 0 {
                break;
            }
            written += n as u64;
            total += n as u64;
            if total > limits.max_total_bytes {
                return Err(Error::BundleTooLarge {
                    bundle: bundle.to_owned(),
                    limit: limits.max_total_bytes,
                });
            }
            if written > declared {
                return Err(unsafe_entry("inflates past its declared size"));
            }
            out.write_all(&buf[..n])
                .map_err(|e| Error::io(&target, e))?;
        }
        if written != declared {
            return Err(invalid(format!(
                "entry `{shown}` inflates to {written} bytes, not the {declared} it declares"
            )));
        }
    }
    Ok(diagnostics)
}

/// The skill root inside an extracted tree: its only non-dot entry when that is a directory
/// (hub zips wrap everything in `<skill>/`), else the tree itself.
fn bundle_root(tree: &Path) -> Result<PathBuf> {
    let mut visible = Vec::new();
    for entry in std::fs::read_dir(tree).map_err(|e| Error::io(tree, e))? {
        let entry = entry.map_err(|e| Error::io(tree, e))?;
        if !entry.file_name().to_string_lossy().starts_with('.') {
            visible.push(entry);
        }
    }
    if let [only] = visible.as_slice()
        && only.file_type().is_ok_and(|t| t.is_dir())
    {
        return Ok(only.path());
    }
    Ok(tree.to_path_buf())
}

/// Removes a directory tree, or a file, quietly (cleanup after a failure).
fn remove_quietly(p: &Path) {
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => {
            if let Err(e) = std::fs::remove_dir_all(p) {
                tracing::warn!(target: "bundle", path = %p.display(), error = %e, "cannot remove");
            }
        }
        Ok(_) => {
            let _ = std::fs::remove_file(p);
        }
        Err(_) => {}
    }
}

/// Extracts `archive` to `dest` (which must not exist) through a staging directory, unwrapping
/// a single wrapper directory. The result must hold a `SKILL.md`. Nothing is left behind on
/// failure. Returns the diagnostics of skipped entries.
pub fn extract(
    archive: &[u8],
    dest: &Path,
    bundle: &str,
    limits: &Limits,
) -> Result<Vec<Diagnostic>> {
    let parent = dest
        .parent()
        .ok_or_else(|| Error::Invalid(format!("`{}` has no parent directory", dest.display())))?;
    let leaf = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    let staging = parent.join(format!(
        "{leaf}.incoming-{}-{}",
        std::process::id(),
        random_hex(8)
    ));
    std::fs::create_dir(&staging).map_err(|e| Error::io(&staging, e))?;
    let staged = extract_into(archive, &staging, bundle, limits).and_then(|diagnostics| {
        let root = bundle_root(&staging)?;
        if !root.join(SKILL_FILE).is_file() {
            return Err(Error::BundleInvalid {
                bundle: bundle.to_owned(),
                message: format!("no `{SKILL_FILE}` at the bundle's root"),
            });
        }
        Ok((diagnostics, root))
    });
    let (diagnostics, root) = match staged {
        Ok(v) => v,
        Err(e) => {
            remove_quietly(&staging);
            return Err(e);
        }
    };
    let renamed = std::fs::rename(&root, dest);
    if root != staging || renamed.is_err() {
        remove_quietly(&staging);
    }
    match renamed {
        Ok(()) => Ok(diagnostics),
        // Another process installed the same bundle first: its copy is as good as ours.
        Err(_) if dest.join(SKILL_FILE).is_file() => Ok(diagnostics),
        Err(e) => Err(Error::io(dest, e)),
    }
}

/// Installs a bundle into `<cache_dir>/<slug>/<version>` and returns its directory.
///
/// A cache entry with a `SKILL.md` is used as is (`fetch` is not called). An entry without one
/// is removed and fetched again. `fetch` returns the zip's bytes (the download, with its own
/// deadline). On any failure nothing is left in the cache.
pub fn install(
    cache_dir: &Path,
    slug: &str,
    version: &str,
    limits: &Limits,
    fetch: impl FnOnce() -> Result<Vec<u8>>,
) -> Result<Installed> {
    let dest = cache_path(cache_dir, slug, version);
    let mut installed = Installed {
        slug: sanitize(slug, "skill"),
        version: sanitize(version, "v0"),
        skill_md: dest.join(SKILL_FILE),
        dir: dest.clone(),
        from_cache: false,
        diagnostics: Vec::new(),
    };
    if installed.skill_md.is_file() {
        installed.from_cache = true;
        return Ok(installed);
    }
    if std::fs::symlink_metadata(&dest).is_ok() {
        if installed.skill_md.is_file() {
            // Another process finished installing it a moment ago.
            installed.from_cache = true;
            return Ok(installed);
        }
        // Move it aside first, so no reader sees it half-deleted.
        let aside = dest.with_file_name(format!(
            "{}.broken-{}-{}",
            installed.version,
            std::process::id(),
            random_hex(8)
        ));
        std::fs::rename(&dest, &aside).map_err(|e| Error::io(&dest, e))?;
        remove_quietly(&aside);
        tracing::warn!(target: "bundle", dir = %dest.display(), "cache entry without SKILL.md removed; downloading again");
        installed.diagnostics.push(Diagnostic::warning(
            "bundle-cache-healed",
            &dest,
            format!(
                "cached bundle `{slug}` had no `{SKILL_FILE}`; it was removed and downloaded again"
            ),
        ));
    }
    let result = fetch().and_then(|bytes| extract(&bytes, &dest, slug, limits));
    match result {
        Ok(diagnostics) => {
            installed.diagnostics.extend(diagnostics);
            tracing::debug!(target: "bundle", dir = %dest.display(), "bundle installed");
            Ok(installed)
        }
        Err(e) => {
            // Leave no empty `<slug>/` behind either (fails quietly when other versions are there).
            if let Some(slug_dir) = dest.parent() {
                let _ = std::fs::remove_dir(slug_dir);
            }
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_names_that_escape_are_refused() {
        let ok = |s: &str| safe_relative(s.as_bytes()).unwrap();
        assert_eq!(ok("a/b.md"), Some(PathBuf::from("a/b.md")));
        assert_eq!(ok("./a//b.md"), Some(PathBuf::from("a/b.md")));
        assert_eq!(ok("a\\b.md"), Some(PathBuf::from("a/b.md")));
        assert_eq!(ok("./"), None);
        for bad in [
            "../x",
            "a/../../x",
            "/etc/passwd",
            "\\etc\\x",
            "C:/x",
            "c:x",
            "a\\..\\..\\x",
            "a\0b",
        ] {
            assert!(safe_relative(bad.as_bytes()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn cache_keys_cannot_escape_or_hide() {
        assert_eq!(sanitize("../../etc", "skill"), "___.._etc");
        assert_eq!(sanitize("..", "skill"), "skill");
        assert_eq!(sanitize("", "v0"), "v0");
        assert_eq!(
            sanitize("owner/pdf-tools@1.2", "skill"),
            "owner_pdf-tools@1.2"
        );
        assert_eq!(sanitize(".hidden", "skill"), "_hidden");
        assert_eq!(sanitize(&"x".repeat(300), "skill").len(), 120);
        let p = cache_path(Path::new("/c"), "../../etc", "../v1");
        assert!(p.starts_with("/c") && p.components().count() == 4, "{p:?}");
    }

    #[test]
    fn extensions_follow_the_allowlist() {
        let ext = |s: &str| extension(Path::new(s));
        assert_eq!(ext("a/SKILL.MD"), "md");
        assert_eq!(ext("Makefile"), "");
        assert_eq!(ext(".env"), "");
        assert_eq!(ext("tool.exe"), "exe");
        assert!(!ALLOWED_EXTENSIONS.contains(&"exe"));
        assert!(ALLOWED_EXTENSIONS.contains(&ext("run.sh").as_str()));
    }

    #[test]
    fn random_names_differ() {
        let a = random_hex(32);
        assert_eq!(a.len(), 32);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, random_hex(32));
    }
}
