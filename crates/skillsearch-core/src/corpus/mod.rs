//! Skill roots and discovery: which `SKILL.md` files exist, in which precedence, with a cheap
//! fingerprint (size + mtime) per file. Reading and parsing one file is [`load`].

pub mod bundle;
pub(crate) mod diagnostic;
pub(crate) mod eligibility;
pub mod frontmatter;

use crate::corpus::diagnostic::Diagnostic;
use crate::corpus::frontmatter::SkillMeta;
use rustix::fd::OwnedFd;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The file every skill directory holds.
pub const SKILL_FILE: &str = "SKILL.md";
/// Directories never descended into.
pub const SKIP_DIRS: &[&str] = &[".git", "node_modules", "__pycache__", ".venv", "venv"];
/// How deep below a root a skill directory may sit.
pub const MAX_DEPTH: usize = 6;
/// Roots with at least this many entries are walked by two threads.
const PARALLEL_WALK_MIN: usize = 256;
/// Bytes of one `SKILL.md` read at most; the rest is reported and left out.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// One skill root. Earlier roots win name collisions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Root {
    pub path: PathBuf,
    /// Where the root came from (`workspace`, `agents`, `user-agents`, `managed`, `extra`).
    pub label: String,
    /// A default root that does not exist is skipped quietly; an explicit one is reported.
    #[serde(default)]
    pub explicit: bool,
}

/// Ordered skill roots, highest precedence first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Roots(pub Vec<Root>);

impl Roots {
    /// Roots given explicitly (`--skills DIR`, repeatable); the first wins a collision.
    pub fn explicit<I, P>(dirs: I) -> Self
    where
        I: IntoIterator<Item = P>,
        P: Into<PathBuf>,
    {
        let mut seen = HashSet::new();
        Roots(
            dirs.into_iter()
                .map(|p| absolute(&p.into()))
                .filter(|p| seen.insert(p.clone()))
                .map(|path| Root {
                    path,
                    label: "extra".to_owned(),
                    explicit: true,
                })
                .collect(),
        )
    }

    /// OpenClaw's precedence: `<workspace>/skills` > `<workspace>/.agents/skills` >
    /// `~/.agents/skills` > `~/.openclaw/skills` > `extra` dirs.
    pub fn openclaw(workspace: &Path, home: Option<&Path>, extra: &[PathBuf]) -> Self {
        let ws = absolute(workspace);
        let mut roots = vec![
            Root {
                path: ws.join("skills"),
                label: "workspace".into(),
                explicit: false,
            },
            Root {
                path: ws.join(".agents/skills"),
                label: "agents".into(),
                explicit: false,
            },
        ];
        if let Some(home) = home {
            roots.push(Root {
                path: home.join(".agents/skills"),
                label: "user-agents".into(),
                explicit: false,
            });
            roots.push(Root {
                path: home.join(".openclaw/skills"),
                label: "managed".into(),
                explicit: false,
            });
        }
        for e in extra {
            roots.push(Root {
                path: absolute(e),
                label: "extra".into(),
                explicit: true,
            });
        }
        let mut seen = HashSet::new();
        roots.retain(|r| seen.insert(r.path.clone()));
        Roots(roots)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Makes a path absolute without resolving symlinks (the user's spelling is kept).
pub fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// A `SKILL.md` found on disk, before it is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundFile {
    /// Index into [`Roots`].
    pub root: usize,
    /// The skill id: the skill directory relative to its root, `/`-separated.
    pub rel: String,
    pub path: PathBuf,
    pub size: u64,
    /// Modification time in nanoseconds since the epoch.
    pub mtime_ns: i64,
}

/// Walks every root. Deterministic: entries are visited in byte order of their names.
pub fn discover(roots: &Roots) -> (Vec<FoundFile>, Vec<Diagnostic>) {
    let mut files = Vec::new();
    let mut diags = Vec::new();
    for (idx, root) in roots.0.iter().enumerate() {
        match std::fs::metadata(&root.path) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                diags.push(Diagnostic::error(
                    "root-not-dir",
                    &root.path,
                    "skill root is not a directory; pass a directory that holds skill folders",
                ));
                continue;
            }
            Err(e) => {
                if root.explicit {
                    diags.push(Diagnostic::error(
                        "root-missing",
                        &root.path,
                        format!("skill root cannot be read ({e}); check the path or remove it from the roots"),
                    ));
                }
                continue;
            }
        }
        let new_walk = || Walk {
            root_idx: idx,
            root: &root.path,
            visited: Visited::default(),
            files: Vec::new(),
            identities: Vec::new(),
            diags: Vec::new(),
        };
        let mut walk = new_walk();
        let Some((fd, names)) = walk.enter(&root.path, 0, None) else {
            files.append(&mut walk.files);
            diags.append(&mut walk.diags);
            continue;
        };
        // The walk is bound by path lookups in the kernel, so a large root is split in two
        // halves walked in parallel; the halves are joined in order, and a skill reached from
        // both (through a link) is kept once.
        let halves: Vec<&[OsString]> = if names.len() >= PARALLEL_WALK_MIN {
            names.chunks(names.len().div_ceil(2)).collect()
        } else {
            vec![&names[..]]
        };
        let root_dirs = walk.visited.dirs.clone();
        let walks: Vec<Walk<'_>> = std::thread::scope(|s| {
            let handles: Vec<_> = halves
                .iter()
                .map(|half| {
                    let fd = &fd;
                    let mut w = new_walk();
                    w.visited.dirs = root_dirs.clone();
                    s.spawn(move || {
                        for name in half.iter() {
                            w.dir(&w.root.join(name), 1, Some(At { parent: fd, name }));
                        }
                        w
                    })
                })
                .collect();
            handles.into_iter().filter_map(|h| h.join().ok()).collect()
        });
        let mut seen: HashSet<(u64, u64)> = HashSet::new();
        diags.append(&mut walk.diags);
        for mut w in walks {
            for (f, id) in w.files.drain(..).zip(w.identities.drain(..)) {
                if seen.insert(id) {
                    files.push(f);
                } else {
                    diags.push(Diagnostic::warning(
                        "duplicate-link",
                        f.path.parent().unwrap_or(&f.path),
                        "this skill was already found through another path (a symlink); indexed once",
                    ));
                }
            }
            diags.append(&mut w.diags);
        }
    }
    (files, diags)
}

/// What [`discover`] finds at and below `dir`, a directory strictly inside one root: the same
/// rules (depth, skipped names, no descent below a `SKILL.md`, loops), applied to the
/// directories between the root and `dir` too, so the answer is the part of a full walk that
/// lies under `dir`. One difference: a skill also reachable through a link from elsewhere in
/// the root is not known here to be a duplicate (a full walk keeps the first path it meets).
/// Costs the ancestors' `stat`s plus the walk of `dir` itself, whatever the root holds.
///
/// Nothing when `dir` is inside no root; `None` when a full walk is needed instead: `dir` is a
/// root itself, lies inside several (nested) roots, or is not a plain path below its root.
pub fn discover_under(roots: &Roots, dir: &Path) -> Option<(Vec<FoundFile>, Vec<Diagnostic>)> {
    use std::os::unix::fs::MetadataExt as _;
    let dir = absolute(dir);
    let mut inside = roots
        .0
        .iter()
        .enumerate()
        .filter(|(_, r)| dir.starts_with(&r.path));
    let Some((root_idx, root)) = inside.next() else {
        return Some((Vec::new(), Vec::new()));
    };
    if inside.next().is_some() {
        return None;
    }
    let names: Vec<&OsStr> = dir
        .strip_prefix(&root.path)
        .ok()?
        .components()
        .map(|c| match c {
            std::path::Component::Normal(n) => Some(n),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let (last, between) = names.split_last()?;
    let nothing = Some((Vec::new(), Vec::new()));
    if names.len() > MAX_DEPTH
        || names
            .iter()
            .any(|n| n.to_str().is_some_and(|n| SKIP_DIRS.contains(&n)))
    {
        return nothing;
    }
    let mut walk = Walk {
        root_idx,
        root: &root.path,
        visited: Visited::default(),
        files: Vec::new(),
        identities: Vec::new(),
        diags: Vec::new(),
    };
    // The root and each directory down to `dir`'s parent: a full walk descends through them
    // only when each is a directory (reached once) without a `SKILL.md` of any kind.
    let mut ancestor = root.path.clone();
    for name in std::iter::once(None).chain(between.iter().map(Some)) {
        if let Some(n) = name {
            ancestor.push(n);
        }
        match std::fs::metadata(&ancestor) {
            Ok(m) if m.is_dir() && walk.visited.dirs.insert((m.dev(), m.ino())) => {}
            _ => return nothing,
        }
        match std::fs::symlink_metadata(ancestor.join(SKILL_FILE)) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            _ => return nothing,
        }
    }
    // Its parent's listing names only directories (or links to them): anything else, or
    // nothing at all (a skill removed), is not walked.
    let dir = ancestor.join(last);
    if !std::fs::metadata(&dir).is_ok_and(|m| m.is_dir()) {
        return nothing;
    }
    walk.dir(&dir, names.len(), None);
    // One walk: a skill met twice through links is already kept once (`visited.files`).
    let (files, diags) = (walk.files, walk.diags);
    Some((files, diags))
}

/// What the walk has seen, by (device, inode): directories (for loops) and `SKILL.md` files (a
/// skill reached twice through a link is indexed once).
#[derive(Default)]
struct Visited {
    dirs: HashSet<(u64, u64)>,
    files: HashSet<(u64, u64)>,
}

struct Walk<'a> {
    root_idx: usize,
    root: &'a Path,
    visited: Visited,
    files: Vec<FoundFile>,
    /// (device, inode) of each entry of `files`, in the same order.
    identities: Vec<(u64, u64)>,
    diags: Vec<Diagnostic>,
}

/// A directory to visit: its path, and (when it was found by listing its parent) the parent's
/// open descriptor and its own name, so system calls resolve one component instead of the
/// whole path (the walk's cost at 64K skills is dominated by path lookups).
struct At<'a> {
    parent: &'a OwnedFd,
    name: &'a OsStr,
}

fn stat_in(at: &Option<At<'_>>, path: &Path, below: Option<&str>) -> std::io::Result<Stat> {
    stat_with(at, path, below, AtFlags::empty())
}

/// [`stat_in`] of a link itself, not of what it points to.
fn lstat_in(at: &Option<At<'_>>, path: &Path, below: Option<&str>) -> std::io::Result<Stat> {
    stat_with(at, path, below, AtFlags::SYMLINK_NOFOLLOW)
}

fn stat_with(
    at: &Option<At<'_>>,
    path: &Path,
    below: Option<&str>,
    flags: AtFlags,
) -> std::io::Result<Stat> {
    match at {
        Some(at) => {
            let mut rel = at.name.to_os_string();
            if let Some(b) = below {
                rel.push("/");
                rel.push(b);
            }
            Ok(rustix::fs::statat(at.parent, rel.as_os_str(), flags)?)
        }
        None => {
            let p = below.map_or_else(|| path.to_path_buf(), |b| path.join(b));
            Ok(rustix::fs::statat(rustix::fs::CWD, &p, flags)?)
        }
    }
}

/// The `SKILL.md` of `dir` as discovery sees it: a link is followed only when it resolves
/// inside its own skill directory (`SKILL.md -> docs/skill.md`); one that leads out of it
/// (`SKILL.md -> /etc/passwd`) is refused, as `skill_read` refuses such files. The usual
/// regular file costs one `lstat`, as a plain `stat` did.
fn skill_file_stat(at: &Option<At<'_>>, dir: &Path) -> Result<std::io::Result<Stat>, PathBuf> {
    match lstat_in(at, dir, Some(SKILL_FILE)) {
        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {}
        other => return Ok(other),
    }
    let file = dir.join(SKILL_FILE);
    match (dir.canonicalize(), file.canonicalize()) {
        (Ok(base), Ok(target)) if !target.starts_with(&base) => Err(target),
        _ => Ok(stat_in(at, dir, Some(SKILL_FILE))),
    }
}

fn stat_mtime_ns(st: &Stat) -> i64 {
    st.st_mtime
        .saturating_mul(1_000_000_000)
        .saturating_add(st.st_mtime_nsec as i64)
}

impl Walk<'_> {
    /// One directory. A skill directory costs one `stat` (of its `SKILL.md`); only directories
    /// without one are stat'ed themselves (for loop detection) and listed.
    fn dir(&mut self, dir: &Path, depth: usize, at: Option<At<'_>>) {
        if let Some((fd, names)) = self.enter(dir, depth, at) {
            for name in &names {
                self.dir(&dir.join(name), depth + 1, Some(At { parent: &fd, name }));
            }
        }
    }

    /// Records `dir` if it is a skill; otherwise returns its open descriptor and its
    /// subdirectories (sorted) to descend into.
    fn enter(
        &mut self,
        dir: &Path,
        depth: usize,
        at: Option<At<'_>>,
    ) -> Option<(OwnedFd, Vec<OsString>)> {
        let skill_file = dir.join(SKILL_FILE);
        let stat = match skill_file_stat(&at, dir) {
            Ok(stat) => stat,
            Err(target) => {
                self.diags.push(Diagnostic::error(
                    "outside-skill",
                    &skill_file,
                    format!(
                        "SKILL.md is a symlink to {}, outside its skill directory; skipped",
                        target.display()
                    ),
                ));
                return None;
            }
        };
        match stat {
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile => {
                if self.visited.files.insert((st.st_dev, st.st_ino)) {
                    self.identities.push((st.st_dev, st.st_ino));
                    let rel = rel_id(self.root, dir);
                    self.files.push(FoundFile {
                        root: self.root_idx,
                        rel,
                        path: skill_file,
                        size: st.st_size as u64,
                        mtime_ns: stat_mtime_ns(&st),
                    });
                } else {
                    self.diags.push(Diagnostic::warning(
                        "duplicate-link",
                        dir,
                        "this skill was already found through another path (a symlink); indexed once",
                    ));
                }
                // A directory with a SKILL.md is a skill: never descend below it.
                return None;
            }
            Ok(_) => {
                self.diags.push(Diagnostic::error(
                    "not-a-file",
                    &skill_file,
                    "SKILL.md is not a regular file; skipped",
                ));
                return None;
            }
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                self.diags.push(Diagnostic::error(
                    "unreadable",
                    &skill_file,
                    format!("SKILL.md cannot be read ({e}); skipped"),
                ));
                return None;
            }
            Err(_) => {
                if std::fs::symlink_metadata(&skill_file).is_ok() {
                    self.diags.push(Diagnostic::error(
                        "unreadable",
                        &skill_file,
                        "SKILL.md is a symlink whose target does not exist; skipped",
                    ));
                    return None;
                }
            }
        }
        if let Ok(st) = stat_in(&at, dir, None)
            && !self.visited.dirs.insert((st.st_dev, st.st_ino))
        {
            self.diags.push(Diagnostic::warning(
                "symlink-loop",
                dir,
                "directory was already visited (symlink loop or duplicate link); skipped",
            ));
            return None;
        }
        if depth >= MAX_DEPTH {
            return None;
        }
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let opened = match &at {
            Some(at) => rustix::fs::openat(at.parent, at.name, flags, Mode::empty()),
            None => rustix::fs::open(dir, flags, Mode::empty()),
        };
        let listing = opened.and_then(|fd| {
            let mut names = Vec::new();
            let mut rd = rustix::fs::Dir::read_from(&fd)?;
            while let Some(entry) = rd.read() {
                let entry = entry?;
                let name = OsStr::from_bytes(entry.file_name().to_bytes());
                if name == "."
                    || name == ".."
                    || name.to_str().is_some_and(|n| SKIP_DIRS.contains(&n))
                {
                    continue;
                }
                let is_dir = match entry.file_type() {
                    FileType::Directory => true,
                    FileType::Symlink | FileType::Unknown => {
                        rustix::fs::statat(&fd, name, AtFlags::empty()).is_ok_and(|st| {
                            FileType::from_raw_mode(st.st_mode) == FileType::Directory
                        })
                    }
                    _ => false,
                };
                if is_dir {
                    names.push(name.to_os_string());
                }
            }
            Ok((fd, names))
        });
        let (fd, mut names) = match listing {
            Ok(l) => l,
            Err(e) => {
                let e = std::io::Error::from(e);
                self.diags.push(Diagnostic::error(
                    "unreadable-dir",
                    dir,
                    format!("directory cannot be listed ({e}); skills below it are missing"),
                ));
                return None;
            }
        };
        names.sort();
        Some((fd, names))
    }
}

fn rel_id(root: &Path, dir: &Path) -> String {
    // `dir` was built by joining names onto `root`, so its bytes start with the root's.
    let (root_b, dir_b) = (root.as_os_str().as_bytes(), dir.as_os_str().as_bytes());
    match dir_b.strip_prefix(root_b) {
        Some(rest) if !rest.is_empty() => {
            String::from_utf8_lossy(rest.strip_prefix(b"/").unwrap_or(rest)).into_owned()
        }
        _ => root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "skill".to_owned()),
    }
}

/// A skill read from disk.
#[derive(Debug, Clone)]
pub struct LoadedSkill {
    pub meta: SkillMeta,
    pub body: String,
    /// Problems with this file; an `Error` one means it is not a usable skill.
    pub diagnostics: Vec<Diagnostic>,
    /// False for files that are not skills at all (binary, unreadable).
    pub valid: bool,
}

/// Reads and parses one `SKILL.md`, never failing: problems become diagnostics.
pub fn load(path: &Path, max_bytes: u64) -> LoadedSkill {
    let dir_name = path
        .parent()
        .and_then(|p| p.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "skill".to_owned());
    let invalid = |d: Diagnostic| LoadedSkill {
        meta: SkillMeta {
            name: dir_name.clone(),
            ..SkillMeta::default()
        },
        body: String::new(),
        diagnostics: vec![d],
        valid: false,
    };
    let mut diagnostics = Vec::new();
    // Without blocking, and only a regular file: a FIFO swapped in after the walk saw a file
    // would otherwise stall this thread until some writer opened it.
    let file = match crate::fsio::open_regular(path) {
        Ok(f) => f,
        Err(e) if crate::fsio::is_not_regular(&e) => {
            return invalid(Diagnostic::error(
                "not-a-file",
                path,
                format!("SKILL.md is {e}; skipped"),
            ));
        }
        Err(e) => {
            return invalid(Diagnostic::error(
                "unreadable",
                path,
                format!("SKILL.md cannot be read ({e}); skipped"),
            ));
        }
    };
    let full_len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut bytes = Vec::with_capacity(full_len.min(max_bytes) as usize);
    if let Err(e) = file.take(max_bytes).read_to_end(&mut bytes) {
        return invalid(Diagnostic::error(
            "unreadable",
            path,
            format!("SKILL.md cannot be read ({e}); skipped"),
        ));
    }
    if bytes.iter().take(8192).any(|b| *b == 0) {
        return invalid(Diagnostic::error(
            "binary-file",
            path,
            "SKILL.md holds binary data (NUL bytes), not markdown; skipped",
        ));
    }
    let truncated = full_len > max_bytes;
    if truncated {
        diagnostics.push(Diagnostic::warning(
            "too-large",
            path,
            format!("SKILL.md is {full_len} bytes; only the first {max_bytes} bytes are indexed"),
        ));
    }
    let text = match String::from_utf8(bytes) {
        Ok(t) => t,
        Err(err) => {
            let utf8 = err.utf8_error();
            let mut bytes = err.into_bytes();
            if truncated && utf8.error_len().is_none() {
                // Only the cut at the size cap split a character.
                bytes.truncate(utf8.valid_up_to());
                String::from_utf8(bytes).unwrap_or_default()
            } else {
                diagnostics.push(Diagnostic::warning(
                    "invalid-utf8",
                    path,
                    format!("SKILL.md is not valid UTF-8 (first bad byte at offset {}); bad bytes were replaced", utf8.valid_up_to()),
                ));
                String::from_utf8_lossy(&bytes).into_owned()
            }
        }
    };
    let parsed = frontmatter::parse(&text, &dir_name);
    for (code, message) in parsed.problems {
        diagnostics.push(Diagnostic::warning(code, path, message));
    }
    LoadedSkill {
        meta: parsed.meta,
        body: parsed.body,
        diagnostics,
        valid: true,
    }
}

/// Characters of the body that follow the name and description in the embedded text.
const BODY_CHARS: usize = 600;
/// The text embedded for a skill: its name, its description, then the start of its body
/// without the heading and lines that only repeat the name or description.
pub fn embed_text(meta: &SkillMeta, body: &str) -> String {
    let name = meta.name.trim();
    let desc = meta.description.trim();
    let mut out = String::with_capacity(name.len() + desc.len() + BODY_CHARS + 2);
    out.push_str(name);
    if !desc.is_empty() {
        out.push('\n');
        out.push_str(desc);
    }
    let mut taken = 0;
    for line in body.lines() {
        let l = line.trim();
        let bare = l.trim_start_matches('#').trim();
        if l.is_empty() || bare == name || bare == desc {
            continue;
        }
        if taken >= BODY_CHARS {
            break;
        }
        let part: String = l.chars().take(BODY_CHARS - taken).collect();
        taken += part.chars().count();
        out.push('\n');
        out.push_str(&part);
    }
    out
}

/// The key of an embedded text: the first 8 bytes of its SHA-256 (never 0, which marks "none").
pub fn text_hash(text: &str) -> u64 {
    let d = Sha256::digest(text.as_bytes());
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[..8]);
    u64::from_le_bytes(b).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_text_skips_lines_that_repeat_the_name_or_description() {
        let meta = SkillMeta {
            name: "pdf".into(),
            description: "Read PDFs.".into(),
            ..SkillMeta::default()
        };
        let t = embed_text(&meta, "# pdf\n\nRead PDFs.\n\n- tables\n- forms\n");
        assert_eq!(t, "pdf\nRead PDFs.\n- tables\n- forms");
        let long = "x".repeat(5000);
        assert!(embed_text(&meta, &long).chars().count() <= 3 + 1 + 10 + 1 + BODY_CHARS);
        assert_ne!(text_hash("a"), text_hash("b"));
        assert_ne!(text_hash(""), 0);
    }
    use std::fs;

    fn skill(dir: &Path, rel: &str, text: &str) {
        let d = dir.join(rel);
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join(SKILL_FILE), text).unwrap();
    }

    #[test]
    fn discovery_is_sorted_stops_at_skills_and_skips_dirs() {
        let tmp = tempfile::tempdir().unwrap();
        let r = tmp.path();
        skill(r, "b", "---\nname: b\n---\n");
        skill(r, "a", "---\nname: a\n---\n");
        skill(r, "a/nested", "---\nname: hidden-below-a-skill\n---\n");
        skill(r, "group/c", "---\nname: c\n---\n");
        skill(r, "node_modules/x", "---\nname: x\n---\n");
        skill(r, ".git/y", "---\nname: y\n---\n");
        skill(r, "1/2/3/4/5/6", "---\nname: deep-ok\n---\n");
        skill(r, "1/2/3/4/5/6b/7", "---\nname: too-deep\n---\n");
        let (files, diags) = discover(&Roots::explicit([r]));
        let rels: Vec<_> = files.iter().map(|f| f.rel.as_str()).collect();
        assert_eq!(rels, ["1/2/3/4/5/6", "a", "b", "group/c"]);
        assert!(diags.is_empty(), "{diags:?}");
    }

    #[test]
    fn a_walk_under_one_directory_finds_what_a_full_walk_finds_there() {
        let tmp = tempfile::tempdir().unwrap();
        let r = tmp.path().join("root");
        skill(&r, "a", "---\nname: a\n---\n");
        skill(&r, "a/nested", "---\nname: hidden-below-a-skill\n---\n");
        skill(&r, "group/c", "---\nname: c\n---\n");
        skill(&r, "group/sub/d", "---\nname: d\n---\n");
        skill(&r, "node_modules/x", "---\nname: x\n---\n");
        skill(&r, "1/2/3/4/5/6", "---\nname: deep-ok\n---\n");
        skill(&r, "1/2/3/4/5/6b/7", "---\nname: too-deep\n---\n");
        std::os::unix::fs::symlink(r.join("group"), r.join("group/sub/loop")).unwrap();
        let roots = Roots::explicit([&r]);
        let (all, _) = discover(&roots);
        for dir in [
            "a",
            "a/nested",
            "group",
            "group/sub",
            "group/sub/loop",
            "node_modules/x",
            "1/2/3/4/5/6",
            "1/2/3/4/5/6b/7",
            "missing",
        ] {
            let d = r.join(dir);
            let (files, _) = discover_under(&roots, &d).unwrap();
            let want: Vec<&FoundFile> = all.iter().filter(|f| f.path.starts_with(&d)).collect();
            assert_eq!(files.iter().collect::<Vec<_>>(), want, "{dir}");
        }
        assert_eq!(
            discover_under(&roots, &r.join("missing")),
            Some((Vec::new(), Vec::new())),
            "a directory that is not there is no finding"
        );
        let (files, diags) = discover_under(&roots, &r.join("group/sub/loop")).unwrap();
        assert!(files.is_empty());
        assert!(diags.iter().any(|d| d.code == "symlink-loop"), "{diags:?}");
        // Outside every root: nothing. A root itself, or nested roots: a full walk instead.
        assert_eq!(
            discover_under(&roots, tmp.path()),
            Some((Vec::new(), Vec::new()))
        );
        assert_eq!(discover_under(&roots, &r), None);
        let nested = Roots::explicit([r.clone(), r.join("group")]);
        assert_eq!(discover_under(&nested, &r.join("group/c")), None);
    }

    #[test]
    fn openclaw_precedence_order() {
        let r = Roots::openclaw(
            Path::new("/ws"),
            Some(Path::new("/home/u")),
            &[PathBuf::from("/extra")],
        );
        let paths: Vec<_> = r.0.iter().map(|r| r.path.to_str().unwrap()).collect();
        assert_eq!(
            paths,
            [
                "/ws/skills",
                "/ws/.agents/skills",
                "/home/u/.agents/skills",
                "/home/u/.openclaw/skills",
                "/extra"
            ]
        );
        let labels: Vec<_> = r.0.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(
            labels,
            ["workspace", "agents", "user-agents", "managed", "extra"]
        );
        let dup = Roots::explicit(["/a", "/b", "/a"]);
        assert_eq!(
            dup.0.len(),
            2,
            "a root given twice is kept once, at its first place"
        );
    }

    #[test]
    fn missing_explicit_root_is_reported_and_default_is_not() {
        let tmp = tempfile::tempdir().unwrap();
        let gone = tmp.path().join("gone");
        let (_, diags) = discover(&Roots::explicit([&gone]));
        assert_eq!(diags.len(), 1);
        assert_eq!(diags[0].code, "root-missing");
        assert_eq!(diags[0].path, gone);
        let (_, diags) = discover(&Roots::openclaw(tmp.path(), Some(tmp.path()), &[]));
        assert!(diags.is_empty());
    }

    #[test]
    fn symlink_loop_is_reported_once_and_walk_terminates() {
        let tmp = tempfile::tempdir().unwrap();
        let r = tmp.path();
        skill(r, "real/s", "---\nname: s\n---\n");
        std::os::unix::fs::symlink(r.join("real"), r.join("real/loop")).unwrap();
        let (files, diags) = discover(&Roots::explicit([r]));
        assert_eq!(files.len(), 1);
        assert!(diags.iter().any(|d| d.code == "symlink-loop"), "{diags:?}");
    }

    #[test]
    fn a_skill_md_linked_out_of_its_directory_is_refused_and_one_linked_inside_is_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let r = tmp.path().join("root");
        fs::create_dir_all(r.join("leak")).unwrap();
        fs::write(
            tmp.path().join("secret"),
            "---\nname: secret\n---\nsk-live-1\n",
        )
        .unwrap();
        std::os::unix::fs::symlink(tmp.path().join("secret"), r.join("leak/SKILL.md")).unwrap();
        // A link to another skill's file in the same root still leaves its directory.
        skill(&r, "other", "---\nname: other\n---\n");
        fs::create_dir_all(r.join("borrow")).unwrap();
        std::os::unix::fs::symlink(r.join("other/SKILL.md"), r.join("borrow/SKILL.md")).unwrap();
        fs::create_dir_all(r.join("inside/docs")).unwrap();
        fs::write(r.join("inside/docs/skill.md"), "---\nname: inside\n---\n").unwrap();
        std::os::unix::fs::symlink("docs/skill.md", r.join("inside/SKILL.md")).unwrap();
        // A linked skill directory is followed as before.
        skill(tmp.path(), "elsewhere/linked", "---\nname: linked\n---\n");
        std::os::unix::fs::symlink(tmp.path().join("elsewhere/linked"), r.join("linked")).unwrap();
        let (files, diags) = discover(&Roots::explicit([&r]));
        let rels: Vec<_> = files.iter().map(|f| f.rel.as_str()).collect();
        assert_eq!(rels, ["inside", "linked", "other"]);
        let outside: Vec<_> = diags
            .iter()
            .filter(|d| d.code == "outside-skill")
            .map(|d| d.path.clone())
            .collect();
        assert_eq!(
            outside,
            [r.join("borrow/SKILL.md"), r.join("leak/SKILL.md")],
            "{diags:?}"
        );
        assert!(diags.iter().all(|d| !d.message.contains("sk-live")));
    }

    #[test]
    fn unreadable_directory_is_reported_and_siblings_survive() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let r = tmp.path();
        skill(r, "ok", "---\nname: ok\n---\n");
        skill(r, "locked/inner", "---\nname: inner\n---\n");
        let locked = r.join("locked");
        fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).unwrap();
        let blocked = fs::read_dir(&locked).is_err(); // root reads through mode 000
        let (files, diags) = discover(&Roots::explicit([r]));
        fs::set_permissions(&locked, fs::Permissions::from_mode(0o755)).unwrap();
        let rels: Vec<_> = files.iter().map(|f| f.rel.as_str()).collect();
        if blocked {
            assert_eq!(rels, ["ok"]);
            assert!(
                diags
                    .iter()
                    .any(|d| d.code == "unreadable-dir" && d.path == locked),
                "{diags:?}"
            );
        } else {
            assert_eq!(rels, ["locked/inner", "ok"]);
        }
    }

    #[test]
    fn load_rejects_binary_and_repairs_bad_utf8_and_caps_size() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("bin/SKILL.md");
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, b"\x7fELF\x00\x00\x01").unwrap();
        let l = load(&p, 1024);
        assert!(!l.valid);
        assert_eq!(l.diagnostics[0].code, "binary-file");

        fs::write(&p, b"---\nname: latin\ndescription: caf\xe9\n---\nbody").unwrap();
        let l = load(&p, 1024);
        assert!(l.valid);
        assert_eq!(l.meta.description, "caf\u{fffd}");
        assert_eq!(l.diagnostics[0].code, "invalid-utf8");

        let big = format!("---\nname: big\n---\n{}", "é".repeat(600));
        fs::write(&p, big).unwrap();
        let l = load(&p, 101);
        assert!(l.valid);
        assert_eq!(l.diagnostics.len(), 1, "{:?}", l.diagnostics);
        assert_eq!(l.diagnostics[0].code, "too-large");
        assert_eq!(l.meta.name, "big");
    }
}
