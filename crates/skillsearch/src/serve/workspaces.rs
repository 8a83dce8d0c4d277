//! Which roots a daemon serves, and how many warm indexes it keeps.
//!
//! A request may name its own roots (`skills`) or an OpenClaw workspace. Over HTTP any local
//! process can send one, so such roots are served only when an `--allow-roots` pattern covers
//! them (the daemon's own configured roots always are); over `--stdio` the one client is the
//! parent that started the daemon, and may name any. Either way at most `max` workspaces stay
//! warm: opening one more closes the least recently used (its index, its watcher and its
//! thread go once the requests using it end). The configured roots and plugins' bundled skills
//! are pinned.

use skillsearch_core::Roots;
use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Directories a request may name as roots, or a workspace: each pattern is a directory and
/// everything below it; `*` is any directory.
#[derive(Debug, Clone, Default)]
pub(crate) struct RootPolicy {
    /// Any root may be named (`--stdio`, or an `--allow-roots '*'`).
    any: bool,
    dirs: Vec<PathBuf>,
}

impl RootPolicy {
    pub(crate) fn any() -> RootPolicy {
        RootPolicy {
            any: true,
            dirs: Vec::new(),
        }
    }

    /// From `--allow-roots` values, relative ones taken from `cwd`.
    pub(crate) fn from_patterns(patterns: &[String], cwd: &Path) -> RootPolicy {
        let mut p = RootPolicy::default();
        for pat in patterns {
            let pat = pat.trim();
            if pat == "*" {
                p.any = true;
                continue;
            }
            let dir = pat.trim_end_matches("/**").trim_end_matches("/*");
            if !dir.is_empty() {
                p.dirs.push(resolved(&cwd.join(dir)));
            }
        }
        p
    }

    /// `Err(why)` unless `dir` may be served.
    pub(crate) fn check(&self, dir: &Path, what: &str) -> Result<(), String> {
        if self.any {
            return Ok(());
        }
        let full = resolved(dir);
        if self.dirs.iter().any(|d| full.starts_with(d)) {
            return Ok(());
        }
        Err(format!(
            "{what} `{}` is not served by this daemon: only its configured roots{} are; start it with --allow-roots DIR (DIR and everything below it) to serve more",
            dir.display(),
            if self.dirs.is_empty() {
                String::new()
            } else {
                format!(
                    " and what is below {}",
                    self.dirs
                        .iter()
                        .map(|d| d.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        ))
    }
}

/// `p` with `.` and `..` folded away, then with links resolved where it exists, so
/// `/allowed/../etc` and a link out of an allowed directory are judged by where they lead.
fn resolved(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out.canonicalize().unwrap_or(out)
}

/// One warm workspace: what a [`Workspaces`] holds per set of roots.
pub(crate) trait Warm {
    fn new(roots: Roots) -> Self;
}

struct Entry<W> {
    ws: Arc<W>,
    used: u64,
    pinned: bool,
}

/// The warm workspaces by roots, at most `max` of them unpinned.
pub(crate) struct Workspaces<W> {
    map: Mutex<HashMap<Vec<PathBuf>, Entry<W>>>,
    clock: AtomicU64,
    max: usize,
}

impl<W: Warm> Workspaces<W> {
    pub(crate) fn new(max: usize) -> Self {
        Workspaces {
            map: Mutex::new(HashMap::new()),
            clock: AtomicU64::new(0),
            max: max.max(1),
        }
    }

    /// The workspace of `roots`, made on first use; making one past the cap closes the least
    /// recently used unpinned one.
    pub(crate) fn get(&self, roots: Roots, pinned: bool) -> Arc<W> {
        let key: Vec<PathBuf> = roots.0.iter().map(|r| r.path.clone()).collect();
        let now = self.clock.fetch_add(1, Ordering::Relaxed);
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = map.get_mut(&key) {
            e.used = now;
            e.pinned |= pinned;
            return e.ws.clone();
        }
        if !pinned {
            let unpinned = map.values().filter(|e| !e.pinned).count();
            if unpinned >= self.max
                && let Some(oldest) = map
                    .iter()
                    .filter(|(_, e)| !e.pinned)
                    .min_by_key(|(_, e)| e.used)
                    .map(|(k, _)| k.clone())
            {
                map.remove(&oldest);
                tracing::info!(target: "serve", roots = ?oldest, max = self.max, "closed the least recently used workspace");
            }
        }
        let ws = Arc::new(W::new(roots));
        map.insert(
            key,
            Entry {
                ws: ws.clone(),
                used: now,
                pinned,
            },
        );
        ws
    }

    /// Every warm workspace.
    pub(crate) fn all(&self) -> Vec<Arc<W>> {
        self.map
            .lock()
            .map(|m| m.values().map(|e| e.ws.clone()).collect())
            .unwrap_or_default()
    }

    /// How many are warm.
    pub(crate) fn len(&self) -> usize {
        self.map.lock().map(|m| m.len()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct W(Roots);
    impl Warm for W {
        fn new(roots: Roots) -> Self {
            W(roots)
        }
    }

    fn roots(p: &str) -> Roots {
        Roots::explicit([PathBuf::from(p)])
    }

    #[test]
    fn past_the_cap_the_least_recently_used_unpinned_workspace_goes() {
        let w: Workspaces<W> = Workspaces::new(2);
        let pinned = w.get(roots("/pinned"), true);
        let a = w.get(roots("/a"), false);
        w.get(roots("/b"), false);
        // /a is used again, so /b is the oldest when /c comes.
        assert!(Arc::ptr_eq(&a, &w.get(roots("/a"), false)));
        w.get(roots("/c"), false);
        assert_eq!(w.len(), 3);
        assert!(Arc::ptr_eq(&a, &w.get(roots("/a"), false)));
        let b_again = w.get(roots("/b"), false);
        assert_eq!(b_again.0.0[0].path, PathBuf::from("/b"));
        assert_eq!(w.len(), 3, "/c went for /b");
        assert!(Arc::ptr_eq(&pinned, &w.get(roots("/pinned"), false)));
    }

    #[test]
    fn only_covered_directories_pass_and_dot_dots_do_not_escape() {
        let tmp = tempfile::tempdir().unwrap();
        let allowed = tmp.path().join("projects");
        std::fs::create_dir_all(allowed.join("x/skills")).unwrap();
        std::os::unix::fs::symlink("/", allowed.join("out")).unwrap();
        let p = RootPolicy::from_patterns(&[format!("{}/**", allowed.display())], tmp.path());
        assert!(p.check(&allowed.join("x/skills"), "root").is_ok());
        assert!(p.check(&allowed.join("not-yet"), "root").is_ok());
        for bad in [
            PathBuf::from("/"),
            allowed.join("../secrets"),
            allowed.join("out/etc"),
        ] {
            let e = p.check(&bad, "root").unwrap_err();
            assert!(e.contains("--allow-roots"), "{e}");
        }
        assert!(
            RootPolicy::default()
                .check(Path::new("/tmp"), "root")
                .is_err()
        );
        assert!(RootPolicy::any().check(Path::new("/"), "root").is_ok());
        let star = RootPolicy::from_patterns(&["*".into()], tmp.path());
        assert!(star.check(Path::new("/"), "root").is_ok());
    }
}
