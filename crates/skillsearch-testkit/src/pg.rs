//! A real PostgreSQL 16 for the hub store's tests: the binaries the PyPI package `pgserver`
//! ships (`pginstall/bin/{initdb,pg_ctl,postgres}`), a data directory in a temporary directory,
//! listening on a unix socket there only (no TCP port). No container, no system service.
//!
//! ```no_run
//! let Some(mut pg) = skillsearch_testkit::pg::Postgres::new() else { return }; // prints why
//! let uri = pg.uri(); // postgresql://postgres:@/postgres?host=/tmp/pgXXXX
//! pg.stop();          // a fault: connections are cut
//! pg.start();         // back, same data
//! ```
//!
//! PostgreSQL refuses to run as root. As root (CI, this workplace), the server runs as `nobody`
//! (as `pgserver` itself runs as a user of its own): the data directory is given to it, and the
//! binaries are copied once to a directory it can read (`/var/tmp/skillsearch-pginstall-*`),
//! since the Python installation may sit under a home only root can enter.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

const NOBODY: u32 = 65534;

/// A PostgreSQL server of the test's own; stopped (fast) when dropped.
pub struct Postgres {
    dir: tempfile::TempDir,
    /// The data directory: `<dir>/data`, or one under the directory given to
    /// [`Postgres::with_data_on`].
    data: PathBuf,
    /// Where the write-ahead log goes when the data directory is elsewhere.
    wal: Option<PathBuf>,
    bin: PathBuf,
    as_nobody: bool,
    running: bool,
}

fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    // `/proc/self` belongs to the process's effective user.
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// `pgserver`'s `pginstall` directory, or `None` when it is not installed.
fn pginstall() -> Option<PathBuf> {
    static FOUND: OnceLock<Option<PathBuf>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            let out = Command::new("python3")
                .args([
                    "-c",
                    // Found, not imported: importing it starts nothing, but needs its deps.
                    "import importlib.util as u; print(u.find_spec('pgserver').submodule_search_locations[0])",
                ])
                .stderr(Stdio::null())
                .output()
                .ok()?;
            if !out.status.success() {
                return None;
            }
            let dir = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim()).join("pginstall");
            dir.join("bin").join("postgres").is_file().then_some(dir)
        })
        .clone()
}

/// A copy of `src` (`pgserver/pginstall`: bin, lib, share, and the wheel's `pgserver.libs`
/// beside the package, which the binaries' rpath `$ORIGIN/../../../pgserver.libs` names) that
/// `nobody` can read, made once per machine; returns the copy's `pginstall`.
fn readable_copy(src: &Path) -> PathBuf {
    use std::hash::{Hash, Hasher};
    let meta = std::fs::metadata(src.join("bin/postgres")).unwrap();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    src.hash(&mut h);
    meta.len().hash(&mut h);
    meta.modified().ok().hash(&mut h);
    let dest = PathBuf::from(format!(
        "/var/tmp/skillsearch-pginstall-{:016x}",
        h.finish()
    ));
    let install = dest.join("pgserver/pginstall");
    if install.join("bin/postgres").is_file() {
        return install;
    }
    let stage = tempfile::Builder::new()
        .prefix("skillsearch-pginstall-")
        .tempdir_in("/var/tmp")
        .unwrap()
        .keep();
    let cp = |from: &Path, to: &Path| {
        let ok = Command::new("cp")
            .arg("-a")
            .arg(from)
            .arg(to)
            .status()
            .unwrap()
            .success();
        assert!(ok, "copying {} failed", from.display());
    };
    std::fs::create_dir_all(stage.join("pgserver/pginstall")).unwrap();
    for sub in ["bin", "lib", "share"] {
        cp(&src.join(sub), &stage.join("pgserver/pginstall"));
    }
    let libs = src.join("../../pgserver.libs");
    if libs.is_dir() {
        cp(&libs, &stage);
    }
    use std::os::unix::fs::PermissionsExt;
    for d in [
        stage.clone(),
        stage.join("pgserver"),
        stage.join("pgserver/pginstall"),
    ] {
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    if std::fs::rename(&stage, &dest).is_err() {
        // Another test made it first.
        let _ = std::fs::remove_dir_all(&stage);
    }
    install
}

impl Postgres {
    /// Initialises and starts a server, or prints `skipped: pgserver not installed ...` and
    /// returns `None` when the binaries are not there (the caller returns: the test is skipped,
    /// and says so).
    pub fn new() -> Option<Postgres> {
        Postgres::init(None)
    }

    /// As [`Postgres::new`], with the data directory on `disk` (e.g. a small
    /// [`Tmpfs`](crate::sys::Tmpfs), for a database whose disk fills up) and the write-ahead
    /// log in the server's own temporary directory: a full data disk then fails a write with
    /// `53100 disk_full` and the server goes on, as PostgreSQL does; a full log disk would
    /// stop the server instead (the "database away" case).
    pub fn with_data_on(disk: &Path) -> Option<Postgres> {
        Postgres::init(Some(disk))
    }

    fn init(disk: Option<&Path>) -> Option<Postgres> {
        let Some(install) = pginstall() else {
            eprintln!("skipped: pgserver not installed (pip install pgserver)");
            return None;
        };
        let as_nobody = is_root();
        let bin = if as_nobody {
            static COPY: OnceLock<PathBuf> = OnceLock::new();
            COPY.get_or_init(|| readable_copy(&install)).join("bin")
        } else {
            install.join("bin")
        };
        // A short path: a unix socket's path is at most 107 bytes.
        let dir = tempfile::Builder::new()
            .prefix("pg")
            .tempdir_in("/tmp")
            .unwrap();
        if as_nobody {
            std::os::unix::fs::chown(dir.path(), Some(NOBODY), Some(NOBODY)).unwrap();
        }
        let (data, wal) = match disk {
            Some(d) => {
                if as_nobody {
                    std::os::unix::fs::chown(d, Some(NOBODY), Some(NOBODY)).unwrap();
                }
                (d.join("data"), Some(dir.path().join("wal")))
            }
            None => (dir.path().join("data"), None),
        };
        let mut pg = Postgres {
            dir,
            data,
            wal,
            bin,
            as_nobody,
            running: false,
        };
        let data = pg.data();
        let mut args: Vec<&std::ffi::OsStr> = vec![
            "-D".as_ref(),
            data.as_os_str(),
            "-U".as_ref(),
            "postgres".as_ref(),
            "--auth=trust".as_ref(),
            "--encoding=UTF8".as_ref(),
            "--no-locale".as_ref(),
            "--no-sync".as_ref(),
        ];
        let waldir = pg.wal.clone();
        if let Some(w) = &waldir {
            args.extend(["--waldir".as_ref(), w.as_os_str()]);
        }
        let out = pg.run("initdb", &args);
        assert!(
            out.status.success(),
            "initdb failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        pg.start();
        Some(pg)
    }

    fn data(&self) -> PathBuf {
        self.data.clone()
    }

    /// The directory of the server's socket.
    pub fn socket_dir(&self) -> &Path {
        self.dir.path()
    }

    /// The server's connection URI (unix socket, user `postgres`, no password).
    pub fn uri(&self) -> String {
        format!(
            "postgresql://postgres:@/postgres?host={}",
            self.socket_dir().display()
        )
    }

    fn run(&self, prog: &str, args: &[&std::ffi::OsStr]) -> Output {
        let mut cmd = Command::new(self.bin.join(prog));
        cmd.args(args)
            .current_dir(self.dir.path())
            .env_remove("PGDATA")
            .env_remove("PGHOST")
            .stdin(Stdio::null());
        if self.as_nobody {
            cmd.uid(NOBODY).gid(NOBODY); // std drops the supplementary groups too
        }
        cmd.output()
            .unwrap_or_else(|e| panic!("running {prog}: {e}"))
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }

    /// Starts the server (again) on the same data and socket; waits until it accepts
    /// connections.
    pub fn start(&mut self) {
        if self.running {
            return;
        }
        let data = self.data();
        let log = self.dir.path().join("log");
        let opts = format!("-h '' -k {} -F", self.socket_dir().display());
        let out = self.run(
            "pg_ctl",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-l".as_ref(),
                log.as_os_str(),
                "-o".as_ref(),
                opts.as_ref(),
                "-w".as_ref(),
                "-t".as_ref(),
                "60".as_ref(),
                "start".as_ref(),
            ],
        );
        assert!(
            out.status.success(),
            "pg_ctl start failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        self.running = true;
    }

    /// Freezes the server (SIGSTOP to the postmaster and its backends): connections stay open
    /// and nothing answers, as with a database host that hangs. [`Postgres::thaw`] resumes it.
    pub fn freeze(&self) {
        self.signal_all("STOP");
    }

    /// Resumes a frozen server (SIGCONT).
    pub fn thaw(&self) {
        self.signal_all("CONT");
    }

    fn signal_all(&self, sig: &str) {
        let pid_file = std::fs::read_to_string(self.data().join("postmaster.pid")).unwrap();
        let pid = pid_file.lines().next().unwrap().trim().to_owned();
        let children = std::process::Command::new("pgrep")
            .args(["-P", &pid])
            .output()
            .unwrap();
        let mut pids = vec![pid.clone()];
        pids.extend(
            String::from_utf8_lossy(&children.stdout)
                .split_whitespace()
                .map(str::to_owned),
        );
        let st = std::process::Command::new("kill")
            .arg(format!("-{sig}"))
            .args(&pids)
            .status()
            .unwrap();
        // A backend may exit between pgrep and kill (kill then fails for it alone and still
        // signals the rest); only a postmaster that is gone is a failure.
        if !st.success() {
            let alive = std::process::Command::new("kill")
                .args(["-0", &pid])
                .status()
                .unwrap();
            assert!(
                alive.success(),
                "kill -{sig} {pids:?}: the postmaster is gone"
            );
        }
    }

    /// Stops the server (`fast`: open connections are cut, as in a restart under load).
    pub fn stop(&mut self) {
        self.stop_with("fast");
    }

    fn stop_with(&mut self, mode: &str) {
        if !self.running {
            return;
        }
        let data = self.data();
        let out = self.run(
            "pg_ctl",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-m".as_ref(),
                mode.as_ref(),
                "-w".as_ref(),
                "stop".as_ref(),
            ],
        );
        assert!(
            out.status.success(),
            "pg_ctl stop failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.running = false;
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if self.running {
            // A test that failed while the server was frozen: resume it so it can stop.
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.thaw())).is_err() {
                eprintln!("pg: could not resume the server before stopping it");
            }
            let data = self.data();
            let _ = self.run(
                "pg_ctl",
                &[
                    "-D".as_ref(),
                    data.as_os_str(),
                    "-m".as_ref(),
                    "immediate".as_ref(),
                    "-w".as_ref(),
                    "stop".as_ref(),
                ],
            );
            self.running = false;
        }
    }
}
