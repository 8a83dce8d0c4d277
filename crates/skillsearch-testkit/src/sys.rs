//! File-system faults for tests: FIFOs where files belong, a read-only home (also when the
//! tests run as root, who ignores permission bits), a listing that shows whether anything was
//! written, and time limits so that an operation that hangs fails its test instead of CI.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Makes a FIFO at `path` (after removing whatever is there), creating its parent directories.
pub fn mkfifo(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let _ = std::fs::remove_file(path);
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        path,
        rustix::fs::Mode::from_raw_mode(0o644),
    )
    .unwrap();
}

/// Runs `f` on its own thread and returns its result, or panics naming `what` when it takes
/// longer than `limit` (the thread is left behind, blocked; the test process ends anyway).
pub fn within<T: Send + 'static>(
    limit: Duration,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(v) => v,
        Err(_) => panic!("{what} did not finish within {limit:?} (it hangs)"),
    }
}

/// Runs `cmd` with `stdin` as its input, and returns its output; kills it and panics when it
/// has not exited within `limit`.
pub fn output_within(cmd: &mut Command, stdin: &[u8], limit: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let bytes = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&bytes);
    });
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{cmd:?} did not exit within {limit:?} (it hangs); stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let _ = writer.join();
    out
}

/// Every path under `dir` (itself included) with its size and modification time in
/// nanoseconds: equal listings before and after mean nothing there was created, removed or
/// written (a file created and removed again still changes its directory's mtime).
pub fn stamps(dir: &Path) -> BTreeMap<PathBuf, (u64, i128)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let Ok(m) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        let mtime = i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec());
        out.insert(p.clone(), (m.len(), mtime));
        if m.is_dir() {
            for e in std::fs::read_dir(&p).unwrap() {
                stack.push(e.unwrap().path());
            }
        }
    }
    out
}

/// How a test makes a directory read-only for the program it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadOnly {
    /// Permission bits suffice: this process is not privileged.
    Bits,
    /// This process ignores permission bits (root): the program runs as `nobody` (65534).
    AsNobody,
}

/// Makes `dir` and everything under it unwritable (`chmod -R a-w`) and says how to run a
/// program so that it sees it so. Root ignores permission bits, so then the program must run
/// as another user, who is let read what the owner could (`chmod -R a+rX` under `dir`) and
/// reach it (`a+rx` on every ancestor up to `open_up`, a test's temporary directory). `None`
/// when neither works here (root without the right to change user), with the reason printed.
pub fn make_read_only(dir: &Path, open_up: &Path) -> Option<ReadOnly> {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let m = std::fs::symlink_metadata(&p).unwrap();
        if m.file_type().is_symlink() {
            continue;
        }
        if m.is_dir() {
            for e in std::fs::read_dir(&p).unwrap() {
                stack.push(e.unwrap().path());
            }
        }
        let mode = m.permissions().mode() & !0o222;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let probe = dir.join(".write-probe");
    if std::fs::write(&probe, b"").is_err() {
        return Some(ReadOnly::Bits);
    }
    let _ = std::fs::remove_file(&probe);
    // Privileged: let another user read everything under `dir` (as its owner could), open the
    // way to it, and check that a program can be run as that user.
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let m = std::fs::symlink_metadata(&p).unwrap();
        if m.file_type().is_symlink() {
            continue;
        }
        let extra = if m.is_dir() {
            for e in std::fs::read_dir(&p).unwrap() {
                stack.push(e.unwrap().path());
            }
            0o555
        } else {
            0o444
        };
        let mode = m.permissions().mode() | extra;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let mut p = dir.to_path_buf();
    while p.starts_with(open_up) {
        let m = std::fs::metadata(&p).unwrap();
        let mode = m.permissions().mode() | 0o555;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        if !p.pop() {
            break;
        }
    }
    let works = Command::new("/bin/sh")
        .args(["-c", "exit 0"])
        .uid(65534)
        .gid(65534)
        .status()
        .is_ok_and(|s| s.success());
    if works {
        Some(ReadOnly::AsNobody)
    } else {
        eprintln!("skipped: running as root, and a program cannot be run as another user here");
        None
    }
}

impl ReadOnly {
    /// Sets `cmd` up to see the read-only directory as read-only.
    pub fn apply(self, cmd: &mut Command) -> &mut Command {
        match self {
            ReadOnly::Bits => cmd,
            ReadOnly::AsNobody => cmd.uid(65534).gid(65534),
        }
    }
}

/// Gives `dir` and everything under it back to its owner for writing (`chmod -R u+w`), so the
/// temporary directory can be removed.
pub fn make_writable(dir: &Path) {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let Ok(m) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if m.file_type().is_symlink() {
            continue;
        }
        let mode = m.permissions().mode() | 0o200;
        let _ = std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode));
        if m.is_dir() {
            for e in std::fs::read_dir(&p).into_iter().flatten() {
                stack.push(e.unwrap().path());
            }
        }
    }
}

/// A small tmpfs mounted on a directory, for a real "no space left on device"; unmounted when
/// dropped. Mounting needs root (or the right to mount here).
pub struct Tmpfs {
    pub dir: PathBuf,
}

impl Tmpfs {
    /// Mounts a tmpfs of `bytes` on `dir` (created). `Err(why)` when this process may not
    /// mount one: the caller reports the test as skipped with that reason.
    pub fn mount(dir: &Path, bytes: u64) -> Result<Tmpfs, String> {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(dir)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -t tmpfs failed (needs root): {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Tmpfs {
            dir: dir.to_path_buf(),
        })
    }

    /// Fills the file system: writes `<dir>/filler` until the disk refuses. Removing the file
    /// frees the space again.
    pub fn fill(&self) -> PathBuf {
        let path = self.dir.join("filler");
        let mut f = std::fs::File::create(&path).unwrap();
        let block = vec![0x5au8; 64 << 10];
        // Whole blocks, then single bytes, until nothing more fits.
        while f.write_all(&block).is_ok() {}
        while f.write_all(&block[..1]).is_ok() {}
        let _ = f.sync_all();
        path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}
