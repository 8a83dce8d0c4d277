//! Files the tests write and compare: a temporary home and skill library, `SKILL.md` files,
//! golden files, zip bundles.

use std::ffi::OsStr;
use std::fs;
use std::io::{Cursor, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A temporary directory holding a home (`home`, not created) and a skill library (`root`,
/// created empty); both go when it is dropped.
pub struct Env {
    _tmp: tempfile::TempDir,
    pub home: PathBuf,
    pub root: PathBuf,
}

impl Env {
    pub fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let root = tmp.path().join("skills");
        fs::create_dir_all(&root).unwrap();
        Env {
            _tmp: tmp,
            home,
            root,
        }
    }

    /// Writes `bytes` at `rel` under the library (see [`write_file`]).
    pub fn file(&self, rel: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
        write_file(&self.root.join(rel), bytes)
    }

    /// Writes `<root>/<rel>/SKILL.md` (see [`write_skill`]).
    pub fn skill(&self, rel: &str, name: &str, description: &str, body: &str) -> PathBuf {
        write_skill(&self.root, rel, name, description, body)
    }

    /// The binary `bin` (a test's `env!("CARGO_BIN_EXE_…")`) with `--home <home>`, and no
    /// `SKILLSEARCH_*` variable of the test's own environment.
    pub fn command(&self, bin: impl AsRef<OsStr>) -> Command {
        command(bin, &self.home)
    }
}

/// The binary `bin` with `--home <home>`, and no `SKILLSEARCH_*` variable of the test's own
/// environment.
pub fn command(bin: impl AsRef<OsStr>, home: &Path) -> Command {
    let mut c = Command::new(bin);
    c.arg("--home").arg(home);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("SKILLSEARCH_") {
            c.env_remove(k);
        }
    }
    c
}

impl Default for Env {
    fn default() -> Self {
        Env::new()
    }
}

/// Every file under `dir` (not the directories), relative to it, sorted; nothing when `dir`
/// cannot be read.
pub fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p);
            } else if let Ok(rel) = p.strip_prefix(dir) {
                out.push(rel.display().to_string());
            }
        }
    }
    out.sort();
    out
}

/// Writes `bytes` at `path`, creating its parent directories; returns the path.
pub fn write_file(path: &Path, bytes: impl AsRef<[u8]>) -> PathBuf {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, bytes).unwrap();
    path.to_owned()
}

/// Writes `<root>/<rel>/SKILL.md` with this name, description and body; returns its path.
pub fn write_skill(root: &Path, rel: &str, name: &str, description: &str, body: &str) -> PathBuf {
    write_file(
        &root.join(rel).join("SKILL.md"),
        format!("---\nname: {name}\ndescription: {description}\n---\n\n{body}\n"),
    )
}

/// [`write_skill`] with a body that is only the title, `# <name>`.
pub fn write_titled_skill(root: &Path, rel: &str, name: &str, description: &str) -> PathBuf {
    write_skill(root, rel, name, description, &format!("# {name}"))
}

/// `crates/skillsearch-core/tests/golden/<name>`, found from the manifest directory of the test
/// that runs (cargo sets it at run time; every crate is a sibling under `crates/`). The
/// testkit's own compile-time directory is only the fallback: a build cache shared between
/// checkouts may hold a testkit compiled in another one.
fn golden_path(name: &str) -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .join("../skillsearch-core/tests/golden")
        .join(name)
}

/// The text of the golden file `name`.
pub fn golden_file(name: &str) -> String {
    let path = golden_path(name);
    fs::read_to_string(&path).unwrap_or_else(|_| panic!("missing golden file {}", path.display()))
}

/// Asserts that `actual` is the golden file `name`; `UPDATE_GOLDEN=1 cargo test` rewrites the
/// file first, after a deliberate change.
pub fn golden(name: &str, actual: &str) {
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        fs::write(golden_path(name), actual).unwrap();
    }
    let expected = golden_file(name);
    assert_eq!(
        actual, expected,
        "golden file {name} differs; rerun with UPDATE_GOLDEN=1 if the change is deliberate"
    );
}

/// A zip archive of these (name, bytes) entries, deflated.
pub fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, data) in entries {
        w.start_file(*name, opts).unwrap();
        w.write_all(data).unwrap();
    }
    w.finish().unwrap().into_inner()
}
