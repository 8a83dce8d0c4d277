//! Bundle extraction (`corpus::bundle::install`, reference §1.8): a downloaded zip installed
//! into the bundle cache.
//!
//! An input starting `PK` is the archive itself (the seeds are real zips); any other input
//! describes one, built here with the `zip` crate: entries of any name, kind (file, directory,
//! symbolic link), Unix mode and compression, data repeated to pass the limits, and maybe a
//! declared size patched below or above the real one. Small limits (4 KiB a file, 16 KiB in
//! all, 32 entries) put the caps in reach.
//!
//! Properties: nothing panics; nothing is written outside the cache directory, and outside the
//! bundle's own `<slug>/<version>` directory; a failed install leaves nothing behind (no
//! staging directory, no empty `<slug>/`); an installed bundle has `SKILL.md` at its root and
//! holds only directories and regular files (no link), each within the per-file cap, with an
//! allowed suffix, together within the total cap.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use skillsearch_core::corpus::bundle::{ALLOWED_EXTENSIONS, Limits, install};
use std::io::{Cursor, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use zip::write::SimpleFileOptions;

const LIMITS: Limits = Limits {
    max_file_bytes: 4 << 10,
    max_total_bytes: 16 << 10,
    max_entries: 32,
};

#[derive(Arbitrary, Debug)]
enum Kind {
    File,
    Dir,
    Symlink,
}

#[derive(Arbitrary, Debug)]
struct Entry {
    name: String,
    kind: Kind,
    deflate: bool,
    mode: Option<u32>,
    data: Vec<u8>,
    /// The data is written this many times (mod 64) plus once.
    repeat: u8,
}

#[derive(Arbitrary, Debug)]
struct Spec {
    slug: String,
    version: String,
    /// A `<skill>/` directory around every entry, as the hub's zips have.
    wrapper: Option<String>,
    skill_md: bool,
    entries: Vec<Entry>,
    /// Entry (mod the count) whose declared size is set to this.
    declared: Option<(u8, u32)>,
}

fn build(spec: &Spec) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let prefix = spec
        .wrapper
        .as_ref()
        .map(|w| format!("{w}/"))
        .unwrap_or_default();
    if spec.skill_md {
        let _ = w.start_file(format!("{prefix}SKILL.md"), SimpleFileOptions::default());
        let _ = w.write_all(b"---\nname: fuzz\ndescription: a fuzzed bundle\n---\nbody\n");
    }
    for e in &spec.entries {
        let mut o = SimpleFileOptions::default().compression_method(if e.deflate {
            zip::CompressionMethod::Deflated
        } else {
            zip::CompressionMethod::Stored
        });
        if let Some(mode) = e.mode {
            o = o.unix_permissions(mode);
        }
        let name = format!("{prefix}{}", e.name);
        match e.kind {
            Kind::File => {
                if w.start_file(name, o).is_ok() {
                    for _ in 0..=(e.repeat % 64) {
                        let _ = w.write_all(&e.data);
                    }
                }
            }
            Kind::Dir => {
                let _ = w.add_directory(name, o);
            }
            Kind::Symlink => {
                let _ = w.add_symlink(name, String::from_utf8_lossy(&e.data), o);
            }
        }
    }
    let mut bytes = w.finish().map(Cursor::into_inner).unwrap_or_default();
    if let Some((i, size)) = spec.declared {
        patch_declared(&mut bytes, i, size);
    }
    bytes
}

/// Sets the uncompressed size that central directory record `i` (mod the count) and its local
/// header declare.
fn patch_declared(zip: &mut [u8], i: u8, size: u32) {
    let records: Vec<usize> = zip
        .windows(4)
        .enumerate()
        .filter(|(_, w)| *w == b"PK\x01\x02")
        .map(|(at, _)| at)
        .collect();
    if records.is_empty() {
        return;
    }
    let at = records[usize::from(i) % records.len()];
    let le = size.to_le_bytes();
    if let Some(field) = zip.get_mut(at + 24..at + 28) {
        field.copy_from_slice(&le);
    }
    let local = zip
        .get(at + 42..at + 46)
        .map(|b| u32::from_le_bytes(b.try_into().unwrap()) as usize);
    if let Some(field) = local.and_then(|l| zip.get_mut(l + 22..l + 26)) {
        field.copy_from_slice(&le);
    }
}

/// Every path under `dir`, without following links.
fn walk(dir: &Path, out: &mut Vec<(PathBuf, std::fs::Metadata)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries {
        let e = e.unwrap();
        let m = std::fs::symlink_metadata(e.path()).unwrap();
        let is_dir = m.is_dir();
        out.push((e.path(), m));
        if is_dir {
            walk(&e.path(), out);
        }
    }
}

fn extension(p: &Path) -> String {
    let name = p.file_name().unwrap().to_string_lossy().into_owned();
    match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => ext.to_ascii_lowercase(),
        _ => String::new(),
    }
}

/// This process's scratch directory (on tmpfs when there is one).
fn scratch() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let base = Path::new("/dev/shm");
        let base = if base.is_dir() {
            base.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        let dir = base.join(format!("skillsearch-fuzz-bundle-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("outside.md"), b"untouched").unwrap();
        dir
    })
}

fuzz_target!(|data: &[u8]| {
    let (archive, slug, version) = if data.starts_with(b"PK") {
        (data.to_vec(), "owner/skill".to_owned(), "1.0.0".to_owned())
    } else {
        let Ok(spec) = Spec::arbitrary_take_rest(Unstructured::new(data)) else {
            return;
        };
        (build(&spec), spec.slug, spec.version)
    };
    let work = scratch();
    let cache = work.join("cache");
    let result = install(&cache, &slug, &version, &LIMITS, || Ok(archive));

    let mut all = Vec::new();
    walk(work, &mut all);
    for (p, _) in &all {
        assert!(
            p == &work.join("outside.md") || p.starts_with(&cache),
            "written outside the cache: {p:?}"
        );
    }
    assert_eq!(
        std::fs::read(work.join("outside.md")).unwrap(),
        b"untouched"
    );
    match &result {
        Ok(installed) => {
            let dir = &installed.dir;
            assert!(!installed.from_cache);
            assert!(
                dir.starts_with(&cache) && dir.parent().unwrap().parent() == Some(cache.as_path())
            );
            assert!(installed.skill_md.is_file(), "SKILL.md at the root");
            let mut total = 0;
            let mut files = 0;
            for (p, m) in all.iter().filter(|(p, _)| p.starts_with(&cache)) {
                assert!(
                    p.starts_with(dir) || dir.starts_with(p),
                    "only the bundle's directory: {p:?}"
                );
                if !p.starts_with(dir) {
                    continue;
                }
                assert!(
                    m.is_dir() || m.is_file(),
                    "{p:?} is neither a directory nor a file"
                );
                if m.is_file() {
                    assert!(m.len() <= LIMITS.max_file_bytes, "{p:?}: {} bytes", m.len());
                    assert!(ALLOWED_EXTENSIONS.contains(&extension(p).as_str()), "{p:?}");
                    total += m.len();
                    files += 1;
                }
            }
            assert!(total <= LIMITS.max_total_bytes);
            assert!(files <= LIMITS.max_entries);
        }
        Err(_) => assert!(
            all.iter()
                .all(|(p, _)| !p.starts_with(&cache) || p == &cache),
            "a failed install left {all:?}"
        ),
    }
    let _ = std::fs::remove_dir_all(&cache);
});
