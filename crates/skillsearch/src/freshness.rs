//! How a per-turn hook keeps its index fresh within its budget.
//!
//! A fresh `hook` process re-checks the skill files when the last check is older than
//! `refresh_ms`. The check is a `stat` per `SKILL.md` and a comparison with the index: a few
//! milliseconds for a few thousand skills, ~0.4 s for the 64K real pool on this machine, far
//! past a turn's budget. Turns are seconds apart, so at that size nearly every turn would pay it.
//! When the index's last check took longer than [`INLINE_CHECK_MS`] (and it holds at least
//! [`BACKGROUND_MIN_SKILLS`]), the turn answers from the index as last saved and, once it has
//! answered, starts a detached `skillsearch check-index` (hidden) that brings the index up to
//! date for the next turns; the turn's decision says so, with the age of the last check. A check
//! already under way holds `check.lock` in the index directory, so checks never pile up.
//! Smaller libraries keep the check inside the turn: a skill added between two turns is found
//! on the second one.

use crate::context::open_index;
use anyhow::{Context, Result};
use skillsearch_core::index::Refresh;
use skillsearch_core::{Roots, SkillIndex};
use std::fs::{File, OpenOptions};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A check that took longer than this (ms) runs in another process, not in the turn...
pub(crate) const INLINE_CHECK_MS: u64 = 25;
/// ...when the index holds at least this many skill files: a smaller library checks in a few
/// milliseconds, and a slower check of one was the machine's load, not the library (a turn
/// then keeps finding a skill added just before it).
pub(crate) const BACKGROUND_MIN_SKILLS: u64 = 1_000;
/// The lock a running check holds, in the index directory.
const LOCK: &str = "check.lock";
/// The hidden subcommand the detached check runs.
pub(crate) const COMMAND: &str = "check-index";

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The last check's cost (ms) when checking `idx`'s skill files costs more than a turn should
/// pay.
pub(crate) fn costly(idx: &SkillIndex) -> Option<u64> {
    idx.check_ms()
        .filter(|&ms| ms > INLINE_CHECK_MS && idx.len() >= BACKGROUND_MIN_SKILLS)
}

/// A check the turn left to another process: started with [`Stale::start`] once the turn has
/// answered, so it does not compete with the turn for the cores.
pub(crate) struct Stale {
    home: PathBuf,
    roots: Roots,
    dir: PathBuf,
    age_ms: u64,
    cost_ms: u64,
}

/// Opens the index for a turn: checked in the turn when that is cheap; else answered as last
/// saved, and the check to start after the answer is returned.
pub(crate) fn open_for_turn(
    home: &Path,
    roots: &Roots,
    refresh: Duration,
) -> Result<(SkillIndex, Option<Stale>)> {
    let idx = open_index(home, roots, Refresh::Never)?;
    let age_ms = now_ms().saturating_sub(idx.verified_at_ms());
    if age_ms <= refresh.as_millis() as u64 {
        return Ok((idx, None));
    }
    match costly(&idx) {
        Some(cost_ms) => {
            let stale = Stale {
                home: home.to_path_buf(),
                roots: roots.clone(),
                dir: idx.dir().to_path_buf(),
                age_ms,
                cost_ms,
            };
            Ok((idx, Some(stale)))
        }
        None => {
            idx.refresh(&|_| {}).with_context(|| {
                format!("cannot check the skill files of {}", idx.dir().display())
            })?;
            Ok((idx, None))
        }
    }
}

impl Stale {
    /// Starts the detached check unless one is running; says which, for the turn's decision.
    pub(crate) fn start(self) -> String {
        let age = format!(
            "skill files last checked {:.1} s ago",
            self.age_ms as f64 / 1e3
        );
        match self.spawn() {
            Ok(true) => format!(
                "{age}; this turn answered from the index as saved and a check runs in the background (the last took {} ms, more than a turn's {INLINE_CHECK_MS} ms)",
                self.cost_ms
            ),
            Ok(false) => format!(
                "{age}; this turn answered from the index as saved while a check runs in the background"
            ),
            Err(e) => format!(
                "{age}; this turn answered from the index as saved and the background check could not start: {e:#}"
            ),
        }
    }

    /// `Ok(false)`: a check is running already. The child's output goes nowhere: a host reads
    /// the hook's stdout to its end, which a child holding it would delay.
    fn spawn(&self) -> Result<bool> {
        // Only a look: the lock is let go before the child starts, which takes it itself.
        let free = try_lock(&self.dir)?.is_some();
        if !free {
            return Ok(false);
        }
        let exe = std::env::current_exe().context("cannot find this program's path")?;
        Command::new(exe)
            .arg("--home")
            .arg(&self.home)
            .arg(COMMAND)
            .arg("--roots")
            .arg(serde_json::to_string(&self.roots)?)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .context("cannot start `skillsearch check-index`")?;
        Ok(true)
    }
}

/// The check lock of the index in `dir`, held by this process; `None` while another holds it.
fn try_lock(dir: &Path) -> Result<Option<File>> {
    let path = dir.join(LOCK);
    let f = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    match f.try_lock() {
        Ok(()) => Ok(Some(f)),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("cannot lock {}", path.display()))
        }
    }
}

/// Lowers this thread's priority to the least (nice 19; threads it starts inherit it), so a
/// check beside the turns takes the cores only when they would idle. Best effort.
pub(crate) fn yield_to_turns() {
    if let Err(e) = rustix::process::setpriority_process(None, 19) {
        tracing::debug!(error = %e, "the check keeps its priority");
    }
}

/// The detached check: re-checks every root and saves the time of the check (also when nothing
/// changed), under the lock; returns at once when another check holds it.
pub(crate) fn run_check(home: &Path, roots_json: &str) -> Result<()> {
    let roots: Roots = serde_json::from_str(roots_json)
        .with_context(|| format!("--roots is not a list of roots: {roots_json}"))?;
    let idx = open_index(home, &roots, Refresh::Never)?;
    let Some(_lock) = try_lock(idx.dir())? else {
        return Ok(());
    };
    yield_to_turns();
    let report = idx.refresh(&|_| {})?;
    if report.unsaved.is_none() && !report.locked {
        idx.record_check()?;
    }
    Ok(())
}
