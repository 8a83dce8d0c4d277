//! The warm path of the per-turn hook: a long-lived skillsearch process (the MCP server, the
//! daemon) keeps its index open and its sentence model loaded, and answers the hook's turns on
//! a Unix socket in the home directory, `<home>/warm.sock`. The hook is a fresh process per
//! turn, and loading the model costs it 0.2–0.5 s, so alone it ranks lexically; through the
//! socket it gets the warm process's full (hybrid) answer in a few milliseconds.
//!
//! The protocol is one JSON line each way. A warm process answers only a turn it would rank
//! exactly as the hook would: the same resolved roots and the same settings (apart from the
//! roots, the mode and the deadline); otherwise it refuses and the hook answers itself. The
//! hook gives the socket at most half its deadline; a missing or stale socket, a process that
//! hangs, dies mid-answer or answers garbage all end in the hook's own lexical answer.
//!
//! The socket is made mode 0600 in the user's home directory: only the user reaches it.

use serde::{Deserialize, Serialize};
use skillsearch_core::Roots;
use skillsearch_core::config::Settings;
use skillsearch_core::turn::decision_log::Decision;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The socket's file name in the home directory.
pub(crate) const SOCKET: &str = "warm.sock";
/// Longest request or reply line read.
const MAX_LINE: u64 = 4 * 1024 * 1024;
/// Connections a warm process serves at once; more are closed unanswered (the hook then
/// answers itself).
const MAX_CONNECTIONS: usize = 16;
/// How long a warm process waits for a request line.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

pub(crate) fn socket_path(home: &Path) -> PathBuf {
    home.join(SOCKET)
}

/// One turn the hook asks a warm process to rank.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Request {
    /// The protocol version, 1.
    pub v: u32,
    pub query: String,
    /// The skill roots the hook resolved, in precedence order.
    pub roots: Roots,
    /// The hook's settings ([`fingerprint`]).
    pub settings: String,
    /// Milliseconds the warm process may spend.
    pub deadline_ms: u64,
    #[serde(default)]
    pub host: String,
    /// The host's directories (workspace, home, state), for PathGuard placeholders: the hook
    /// knows them from its input and environment, which the warm process does not share.
    #[serde(default)]
    pub paths: skillsearch_core::config::PathFacts,
}

/// A warm process's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum Reply {
    /// The context to inject (empty: nothing) and the turn's record.
    Answer {
        context: String,
        decision: Box<Decision>,
    },
    /// Why this process does not answer the turn (other roots, other settings, an error).
    Refused(String),
}

/// The settings a turn is ranked and rendered with, as one comparable string: everything but
/// the roots (compared resolved), the mode and the deadline.
pub(crate) fn fingerprint(s: &Settings) -> String {
    let mut s = s.clone();
    s.skills.clear();
    s.workspace = None;
    s.mode = skillsearch_core::config::Mode::Auto;
    s.deadline_ms = 0;
    serde_json::to_string(&s).unwrap_or_default()
}

/// Answers a turn (runs on the listener's connection threads).
pub(crate) type Handler = dyn Fn(Request) -> Reply + Send + Sync;

/// The bound socket; dropping it removes the file if it is still this process's.
pub(crate) struct Bound {
    path: PathBuf,
    ino: u64,
}

impl Drop for Bound {
    fn drop(&mut self) {
        if std::fs::symlink_metadata(&self.path).is_ok_and(|m| m.ino() == self.ino) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Binds `<home>/warm.sock` and answers turns on it with `handler` on a thread of its own.
/// `None` (with the reason logged) when another live process already serves it or the socket
/// cannot be made; a socket file nobody answers on (left by a process that died) is replaced.
pub(crate) fn listen(home: &Path, handler: Arc<Handler>) -> Option<Bound> {
    let path = socket_path(home);
    match bind(&path) {
        Ok((listener, bound)) => {
            tracing::info!(target: "warm", socket = %path.display(), "answering the hook's turns");
            std::thread::Builder::new()
                .name("warm-socket".into())
                .spawn(move || accept_loop(listener, handler))
                .ok()?;
            Some(bound)
        }
        Err(why) => {
            tracing::info!(target: "warm", socket = %path.display(), "not answering the hook's turns: {why}");
            None
        }
    }
}

fn bind(path: &Path) -> Result<(UnixListener, Bound), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if !m.file_type().is_socket() {
            return Err(format!(
                "{} exists and is not a socket; remove it to let the hook reach a warm process",
                path.display()
            ));
        }
        if UnixStream::connect(path).is_ok() {
            return Err("another skillsearch process answers on it".into());
        }
        // Nobody listens: left by a process that died.
        let _ = std::fs::remove_file(path);
    }
    let listener = UnixListener::bind(path).map_err(|e| format!("cannot bind: {e}"))?;
    let ino = std::fs::symlink_metadata(path)
        .map_err(|e| format!("cannot stat the socket: {e}"))?
        .ino();
    let bound = Bound {
        path: path.to_path_buf(),
        ino,
    };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("cannot make the socket private: {e}"))?;
    Ok((listener, bound))
}

fn accept_loop(listener: UnixListener, handler: Arc<Handler>) {
    let busy = Arc::new(AtomicUsize::new(0));
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        if busy.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            busy.fetch_sub(1, Ordering::SeqCst);
            continue; // dropped: the hook answers itself
        }
        let (busy, handler) = (busy.clone(), handler.clone());
        let spawned = std::thread::Builder::new()
            .name("warm-turn".into())
            .spawn(move || {
                answer(conn, &*handler);
                busy.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            tracing::warn!(target: "warm", "cannot start a thread for a hook turn");
        }
    }
}

fn answer(conn: UnixStream, handler: &Handler) {
    let _ = conn.set_read_timeout(Some(REQUEST_TIMEOUT));
    let _ = conn.set_write_timeout(Some(REQUEST_TIMEOUT));
    let mut line = Vec::new();
    let read = BufReader::new(&conn)
        .take(MAX_LINE)
        .read_until(b'\n', &mut line);
    let reply = match read {
        Ok(_) => match serde_json::from_slice::<Request>(&line) {
            Ok(req) if req.v == 1 => handler(req),
            Ok(req) => Reply::Refused(format!("protocol version {} is not 1", req.v)),
            Err(e) => Reply::Refused(format!("bad request: {e}")),
        },
        Err(e) => Reply::Refused(format!("cannot read the request: {e}")),
    };
    let mut bytes = serde_json::to_vec(&reply).unwrap_or_default();
    bytes.push(b'\n');
    let _ = (&conn).write_all(&bytes);
}

/// Asks the warm process on `<home>/warm.sock` to answer `req`, waiting at most `budget` in all.
/// `Err` says why there is no answer, for the decision log.
pub(crate) fn ask(home: &Path, req: &Request, budget: Duration) -> Result<Reply, String> {
    let started = Instant::now();
    let path = socket_path(home);
    let conn = UnixStream::connect(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => "no warm process (no socket)".to_owned(),
        std::io::ErrorKind::ConnectionRefused => {
            "no warm process (a stale socket nobody answers on)".to_owned()
        }
        _ => format!("cannot reach the warm process: {e}"),
    })?;
    let left = |started: Instant| {
        budget
            .checked_sub(started.elapsed())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| format!("the warm process did not answer within {budget:?}"))
    };
    conn.set_write_timeout(Some(left(started)?))
        .map_err(|e| e.to_string())?;
    let mut bytes = serde_json::to_vec(req).map_err(|e| e.to_string())?;
    bytes.push(b'\n');
    (&conn)
        .write_all(&bytes)
        .map_err(|e| format!("cannot send the turn to the warm process: {e}"))?;
    let mut line = Vec::new();
    let mut chunk = [0u8; 64 * 1024];
    loop {
        conn.set_read_timeout(Some(left(started)?))
            .map_err(|e| e.to_string())?;
        match (&conn).read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                line.extend_from_slice(&chunk[..n]);
                if line.last() == Some(&b'\n') {
                    break;
                }
                if line.len() as u64 > MAX_LINE {
                    return Err("the warm process's answer is too long".into());
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(format!("the warm process did not answer within {budget:?}"));
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("the warm process's answer broke off: {e}")),
        }
    }
    if line.last() != Some(&b'\n') {
        return Err("the warm process closed the connection mid-answer".into());
    }
    serde_json::from_slice(&line).map_err(|e| format!("the warm process answered garbage: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> Request {
        Request {
            v: 1,
            query: "pdf tables".into(),
            roots: Roots::explicit(["/r"]),
            settings: "s".into(),
            deadline_ms: 500,
            host: "claude-code".into(),
            paths: Default::default(),
        }
    }

    #[test]
    fn a_bound_socket_answers_and_is_private_and_removed_on_drop() {
        let home = tempfile::tempdir().unwrap();
        let bound = listen(
            home.path(),
            Arc::new(|r: Request| Reply::Answer {
                context: format!("block for {}", r.query),
                decision: Box::default(),
            }),
        )
        .expect("bound");
        let path = socket_path(home.path());
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // A second process does not take it over.
        assert!(listen(home.path(), Arc::new(|_| Reply::Refused("x".into()))).is_none());
        match ask(home.path(), &request(), Duration::from_secs(5)).unwrap() {
            Reply::Answer { context, .. } => assert_eq!(context, "block for pdf tables"),
            other => panic!("{other:?}"),
        }
        drop(bound);
        assert!(!path.exists());
        let err = ask(home.path(), &request(), Duration::from_secs(1)).unwrap_err();
        assert!(err.contains("no socket"), "{err}");
    }

    #[test]
    fn a_stale_socket_is_reported_and_replaced() {
        let home = tempfile::tempdir().unwrap();
        let path = socket_path(home.path());
        drop(UnixListener::bind(&path).unwrap()); // the file stays, nobody listens
        let err = ask(home.path(), &request(), Duration::from_secs(1)).unwrap_err();
        assert!(err.contains("stale"), "{err}");
        let _bound = listen(
            home.path(),
            Arc::new(|_| Reply::Refused("other roots".into())),
        )
        .expect("replaced");
        match ask(home.path(), &request(), Duration::from_secs(5)).unwrap() {
            Reply::Refused(why) => assert_eq!(why, "other roots"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_file_that_is_no_socket_is_left_alone() {
        let home = tempfile::tempdir().unwrap();
        let path = socket_path(home.path());
        std::fs::write(&path, "mine").unwrap();
        assert!(listen(home.path(), Arc::new(|_| Reply::Refused("x".into()))).is_none());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "mine");
    }

    /// A process that accepts and never answers, one that closes mid-answer and one that
    /// answers garbage each cost the hook at most its budget and a reason.
    #[test]
    fn hung_dying_and_garbage_answers_end_within_the_budget() {
        for (behaviour, expect) in [
            ("hang", "did not answer within"),
            ("die", "mid-answer"),
            ("garbage", "garbage"),
        ] {
            let home = tempfile::tempdir().unwrap();
            let listener = UnixListener::bind(socket_path(home.path())).unwrap();
            let server = std::thread::spawn(move || {
                let (mut conn, _) = listener.accept().unwrap();
                let mut buf = [0u8; 1024];
                let _ = conn.read(&mut buf);
                match behaviour {
                    "hang" => std::thread::sleep(Duration::from_millis(800)),
                    "die" => {
                        let _ = conn.write_all(b"{\"answer\":{\"cont");
                    }
                    _ => {
                        let _ = conn.write_all(b"\x1b[31mnot json\n");
                    }
                }
            });
            let t = Instant::now();
            let err = ask(home.path(), &request(), Duration::from_millis(300)).unwrap_err();
            assert!(err.contains(expect), "{behaviour}: {err}");
            assert!(
                t.elapsed() < Duration::from_millis(700),
                "{behaviour}: {:?}",
                t.elapsed()
            );
            server.join().unwrap();
        }
    }
}
