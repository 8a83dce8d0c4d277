//! Keeping a warm index current: a `notify` watcher on its roots marks it dirty and a thread
//! refreshes it. The thread holds the index weakly and ends when the daemon closes the
//! workspace. A root that is removed and made again (`rm -rf D; mkdir D`) loses its inotify
//! watch, so the roots' identities are checked every few seconds and a replaced root is watched
//! again; a catch-up refresh every minute covers any event the watcher missed. Where roots
//! cannot be watched at all, the index is refreshed every `refresh_ms`.
//!
//! The index a workspace answers from is its [`Current`]: when the index's directory is gone
//! (deleted under the daemon) or a refresh fails for any reason but a disk that refuses writes,
//! the thread opens the index again (which rebuilds it from the skill files) and swaps it in;
//! the old one answers until then. What went wrong with the last refresh or rebuild stays in
//! `Current::problem` for `/v1/health` until one succeeds.

use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use skillsearch_core::SkillIndex;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

/// How often the roots' identities are compared.
const ROOT_CHECK: Duration = Duration::from_secs(2);
/// How often a watched index is refreshed anyway.
const CATCH_UP: Duration = Duration::from_secs(60);
/// The thread's tick.
const TICK: Duration = Duration::from_millis(250);

/// Whether a file-system event under a root can change what the index holds. Opening and
/// reading are not changes: the refresh's own walk opens every directory, so counting them
/// would make each refresh schedule the next, forever. A watcher error (a lost event queue)
/// counts as a change.
pub(super) fn may_change_skills(kind: &notify::EventKind) -> bool {
    use notify::event::{AccessKind, AccessMode, EventKind};
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    }
}

/// Which directory a root is: (device, inode, birth time). A directory made again often gets
/// the inode number just freed, so the birth time tells them apart. `None`: not a directory.
type Identity = Option<(u64, u64, Option<std::time::SystemTime>)>;

fn identity(p: &PathBuf) -> Identity {
    std::fs::metadata(p)
        .ok()
        .filter(|m| m.is_dir())
        .map(|m| (m.dev(), m.ino(), m.created().ok()))
}

/// A watcher on every root that is a directory now, and whether all of them are watched. An
/// event that removes or moves a root itself sets `lost`: its watch is gone with it.
fn watch_roots(
    roots: &[PathBuf],
    dirty: &Arc<AtomicBool>,
    lost: &Arc<AtomicBool>,
) -> (Option<RecommendedWatcher>, bool) {
    let (flag, gone, root_paths) = (dirty.clone(), lost.clone(), roots.to_vec());
    let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if res.as_ref().map_or(true, |e| may_change_skills(&e.kind)) {
            flag.store(true, Ordering::Relaxed);
        }
        if let Ok(e) = &res
            && matches!(
                e.kind,
                notify::EventKind::Remove(_)
                    | notify::EventKind::Modify(notify::event::ModifyKind::Name(_))
            )
            && e.paths.iter().any(|p| root_paths.contains(p))
        {
            gone.store(true, Ordering::Relaxed);
        }
    });
    let Ok(mut w) = watcher else {
        return (None, false);
    };
    let mut all = true;
    for r in roots.iter().filter(|r| r.is_dir()) {
        if let Err(e) = w.watch(r, RecursiveMode::Recursive) {
            tracing::warn!(target: "serve", root = %r.display(), error = %e, "cannot watch; falling back to periodic checks");
            all = false;
        }
    }
    (Some(w), all)
}

/// The index a workspace answers from now, and what went wrong with its last refresh.
pub(crate) struct Current {
    index: RwLock<Arc<SkillIndex>>,
    problem: Mutex<Option<String>>,
}

impl Current {
    pub(crate) fn new(idx: Arc<SkillIndex>) -> Arc<Current> {
        Arc::new(Current {
            index: RwLock::new(idx),
            problem: Mutex::new(None),
        })
    }

    /// The index to answer from.
    pub(crate) fn get(&self) -> Arc<SkillIndex> {
        self.index.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Why the last refresh (or rebuild) failed or saved nothing; `None` after one succeeded.
    pub(crate) fn problem(&self) -> Option<String> {
        self.problem
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn set_problem(&self, p: Option<String>) {
        *self.problem.lock().unwrap_or_else(|e| e.into_inner()) = p;
    }

    fn replace(&self, idx: Arc<SkillIndex>) {
        *self.index.write().unwrap_or_else(|e| e.into_inner()) = idx;
    }
}

/// Opens the workspace's index again (rebuilding it), for a watcher whose index is gone or
/// failing; also registers it wherever the first one was.
pub(crate) type Reopen = Box<dyn Fn() -> anyhow::Result<Arc<SkillIndex>> + Send>;

/// Whether the index's files are still where it saved them: a directory deleted under the
/// daemon leaves the open index answering (its files are held) but nothing to commit to.
fn on_disk(idx: &SkillIndex) -> bool {
    idx.dir().join("state.json").is_file() && idx.dir().join("tantivy/meta.json").is_file()
}

/// One refresh of `cur`'s index, or a rebuild when it is gone or the refresh fails; records
/// the outcome as `cur`'s problem.
fn refresh_or_rebuild(cur: &Current, reopen: &Reopen) {
    let idx = cur.get();
    let broken = if !on_disk(&idx) {
        Some(format!(
            "the index directory {} is gone",
            idx.dir().display()
        ))
    } else {
        match idx.refresh(&|_| {}) {
            Ok(report) => {
                cur.set_problem(report.unsaved.map(|why| {
                    format!(
                        "the index {} cannot be updated ({why}); answering from it as last saved",
                        idx.dir().display()
                    )
                }));
                None
            }
            Err(e) => Some(format!("refresh failed: {e}")),
        }
    };
    let Some(why) = broken else { return };
    tracing::warn!(target: "serve", dir = %idx.dir().display(), %why, "rebuilding the index; answering from the one in memory meanwhile");
    match reopen() {
        Ok(new) => {
            cur.replace(new);
            cur.set_problem(None);
        }
        Err(e) => {
            let problem = format!("{why}; rebuilding it failed: {e:#}");
            tracing::warn!(target: "serve", %problem, "serving the index as it is");
            cur.set_problem(Some(problem));
        }
    }
}

/// Keeps `cur` current until the last strong handle to it is gone. Roots in `owned` belong to
/// a writer that refreshes the index itself after each change it makes (a hub store's `live/`,
/// [`SkillIndex::refresh_dirs`]): they are not watched, and only the catch-up looks at them,
/// so a write costs the index the directories it changed, not a walk of every root.
pub(crate) fn watch(cur: &Arc<Current>, refresh_ms: u64, reopen: Reopen, owned: &[PathBuf]) {
    let roots: Vec<PathBuf> = cur
        .get()
        .roots()
        .0
        .iter()
        .map(|r| r.path.clone())
        .filter(|p| !owned.contains(p))
        .collect();
    let weak: Weak<Current> = Arc::downgrade(cur);
    // The first tick checks the disk: the index was opened without a walk when another process
    // checked it lately, and whatever changed since (or after a killed daemon's last commit)
    // has sent no event to this watcher.
    let dirty = Arc::new(AtomicBool::new(true));
    let lost = Arc::new(AtomicBool::new(false));
    let (mut watcher, mut watched) = watch_roots(&roots, &dirty, &lost);
    let mut ids: Vec<Identity> = roots.iter().map(identity).collect();
    let spawned = std::thread::Builder::new()
        .name("skillsearch-watch".into())
        .spawn(move || {
            let period = Duration::from_millis(refresh_ms.max(250));
            let (mut last_refresh, mut last_check) = (Instant::now(), Instant::now());
            loop {
                std::thread::sleep(TICK);
                let Some(cur) = weak.upgrade() else {
                    return; // the workspace was closed
                };
                let mut due = if watched {
                    dirty.swap(false, Ordering::Relaxed) || last_refresh.elapsed() >= CATCH_UP
                } else {
                    last_refresh.elapsed() >= period
                };
                let mut checked = false;
                if lost.swap(false, Ordering::Relaxed) || last_check.elapsed() >= ROOT_CHECK {
                    last_check = Instant::now();
                    checked = true;
                    let now: Vec<_> = roots.iter().map(identity).collect();
                    if now != ids {
                        tracing::info!(target: "serve", "a root was replaced, removed or created; watching again");
                        ids = now;
                        drop(watcher.take());
                        (watcher, watched) = watch_roots(&roots, &dirty, &lost);
                        due = true;
                    }
                }
                // A deleted index directory is seen at the next root check even with no change.
                if due || (checked && !on_disk(&cur.get())) {
                    last_refresh = Instant::now();
                    refresh_or_rebuild(&cur, &reopen);
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(target: "serve", error = %e, "cannot start the watcher thread; the index is refreshed only by restarts");
    }
}

#[cfg(test)]
mod tests {
    use super::may_change_skills;
    use notify::event::{
        AccessKind, AccessMode, CreateKind, EventKind, ModifyKind, RemoveKind, RenameMode,
    };

    #[test]
    fn only_events_that_can_change_a_skill_mark_the_index_dirty() {
        for kind in [
            EventKind::Create(CreateKind::File),
            EventKind::Modify(ModifyKind::Any),
            EventKind::Modify(ModifyKind::Name(RenameMode::Both)),
            EventKind::Remove(RemoveKind::Folder),
            EventKind::Access(AccessKind::Close(AccessMode::Write)),
            EventKind::Any,
            EventKind::Other,
        ] {
            assert!(may_change_skills(&kind), "{kind:?}");
        }
        // The refresh's own walk opens and reads: such events must not trigger another.
        for kind in [
            EventKind::Access(AccessKind::Open(AccessMode::Any)),
            EventKind::Access(AccessKind::Close(AccessMode::Read)),
            EventKind::Access(AccessKind::Read),
            EventKind::Access(AccessKind::Any),
        ] {
            assert!(!may_change_skills(&kind), "{kind:?}");
        }
    }
}
