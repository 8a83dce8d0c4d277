//! Keeping a warm index current: a `notify` watcher on its roots marks it dirty and a thread
//! refreshes it. The thread holds the index weakly and ends when the daemon closes the
//! workspace. A root that is removed and made again (`rm -rf D; mkdir D`) loses its inotify
//! watch, so the roots' identities are checked every few seconds and a replaced root is watched
//! again; a catch-up refresh every minute covers any event the watcher missed. Where roots
//! cannot be watched at all, the index is refreshed every `refresh_ms`.

use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use skillsearch_core::SkillIndex;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
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

/// Keeps `idx` current until the last strong handle to it is gone.
pub(super) fn watch(idx: &Arc<SkillIndex>, refresh_ms: u64) {
    let roots: Vec<PathBuf> = idx.roots().0.iter().map(|r| r.path.clone()).collect();
    let weak: Weak<SkillIndex> = Arc::downgrade(idx);
    let dirty = Arc::new(AtomicBool::new(false));
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
                let Some(idx) = weak.upgrade() else {
                    return; // the workspace was closed
                };
                let mut due = if watched {
                    dirty.swap(false, Ordering::Relaxed) || last_refresh.elapsed() >= CATCH_UP
                } else {
                    last_refresh.elapsed() >= period
                };
                if lost.swap(false, Ordering::Relaxed) || last_check.elapsed() >= ROOT_CHECK {
                    last_check = Instant::now();
                    let now: Vec<_> = roots.iter().map(identity).collect();
                    if now != ids {
                        tracing::info!(target: "serve", "a root was replaced, removed or created; watching again");
                        ids = now;
                        drop(watcher.take());
                        (watcher, watched) = watch_roots(&roots, &dirty, &lost);
                        due = true;
                    }
                }
                if due {
                    last_refresh = Instant::now();
                    if let Err(e) = idx.refresh(&|_| {}) {
                        tracing::warn!(target: "serve", error = %e, "refresh failed; serving the index as it is");
                    }
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
