//! Reading and writing files without being stalled or leaving debris.
//!
//! A read opens the path without blocking and refuses anything but a regular file, checked on
//! the opened descriptor: a FIFO put where a `SKILL.md` or `config.toml` was would otherwise
//! block the reading thread until some writer opens it (forever), and a check before the open
//! can be raced. A write goes to a temporary file beside the target and is renamed over it;
//! when any step fails the temporary file is removed.

use std::io::Read as _;
use std::path::{Path, PathBuf};

/// The error inside an [`std::io::Error`] for a path that is not a regular file.
#[derive(Debug, thiserror::Error)]
#[error("not a regular file (it is a {0})")]
pub struct NotRegular(pub &'static str);

/// The same, naming the path: for a file written where a FIFO or other special file stands.
#[derive(Debug, thiserror::Error)]
#[error("{path} is not a regular file (it is a {kind})", path = .0.display(), kind = .1)]
pub struct NotRegularAt(pub PathBuf, pub &'static str);

/// Whether `e` says the file was refused for not being a regular file.
pub fn is_not_regular(e: &std::io::Error) -> bool {
    e.get_ref()
        .is_some_and(|inner| inner.is::<NotRegular>() || inner.is::<NotRegularAt>())
}

/// Checks, without blocking, that `path` is a regular file or absent before a library opens
/// it with a plain (blocking) open: a FIFO there would hold that open until a peer came.
/// `Ok` when it is regular or missing, or when the check itself fails (the real open will say
/// why); an error naming the path when it is a FIFO or another special file.
pub fn refuse_special(path: &Path) -> std::io::Result<()> {
    use rustix::fs::FileType;
    let Ok(st) = rustix::fs::lstat(path) else {
        return Ok(());
    };
    let kind = FileType::from_raw_mode(st.st_mode);
    if matches!(kind, FileType::RegularFile | FileType::Symlink) {
        // A link is followed by the open: check its target the same way, without blocking.
        if kind == FileType::Symlink {
            return match open_regular(path) {
                Err(e) if is_not_regular(&e) => Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    NotRegularAt(path.to_path_buf(), "special file"),
                )),
                _ => Ok(()),
            };
        }
        return Ok(());
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        NotRegularAt(path.to_path_buf(), kind_name(kind)),
    ))
}

fn kind_name(t: rustix::fs::FileType) -> &'static str {
    use rustix::fs::FileType as T;
    match t {
        T::Fifo => "FIFO",
        T::Socket => "socket",
        T::CharacterDevice => "character device",
        T::BlockDevice => "block device",
        T::Directory => "directory",
        T::Symlink => "symbolic link",
        _ => "special file",
    }
}

/// Opens `path` for reading when it is a regular file (symbolic links followed). Never
/// blocks: the open is non-blocking, and a FIFO, socket, device or directory is refused with
/// a [`NotRegular`] error.
pub fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    use rustix::fs::{FileType, Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let fd = rustix::fs::open(path, flags, Mode::empty())?;
    let kind = FileType::from_raw_mode(rustix::fs::fstat(&fd)?.st_mode);
    if kind != FileType::RegularFile {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            NotRegular(kind_name(kind)),
        ));
    }
    // Reads of a regular file never block anyway; clear the flag so the file behaves as any.
    let now = rustix::fs::fcntl_getfl(&fd)?;
    rustix::fs::fcntl_setfl(&fd, now - OFlags::NONBLOCK)?;
    Ok(std::fs::File::from(fd))
}

/// Reads a whole regular file (see [`open_regular`]).
pub fn read_regular(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut f = open_regular(path)?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Reads a whole regular UTF-8 file (see [`open_regular`]).
pub fn read_regular_string(path: &Path) -> std::io::Result<String> {
    String::from_utf8(read_regular(path)?)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// A temporary name beside `path`, unique in this process.
fn temp_beside(path: &Path) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".tmp-{}-{n}", std::process::id()));
    path.with_file_name(name)
}

/// Replaces `path` with `bytes` by writing a temporary file beside it and renaming it over
/// `path`. On failure the temporary file is removed and the error names the path at fault.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), (PathBuf, std::io::Error)> {
    let tmp = temp_beside(path);
    if let Err(e) = std::fs::write(&tmp, bytes) {
        let _ = std::fs::remove_file(&tmp);
        return Err((tmp, e));
    }
    if let Err(e) = std::fs::rename(&tmp, path) {
        let _ = std::fs::remove_file(&tmp);
        return Err((path.to_path_buf(), e));
    }
    Ok(())
}

/// Whether `e` is the file system refusing a write (read-only, full, no permission, a path
/// that is not where a file can be written) rather than a fault in what was written.
pub fn is_unwritable(e: &std::io::Error) -> bool {
    use std::io::ErrorKind as K;
    matches!(
        e.kind(),
        K::PermissionDenied
            | K::ReadOnlyFilesystem
            | K::StorageFull
            | K::QuotaExceeded
            | K::NotADirectory
            | K::IsADirectory
            | K::FileTooLarge
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_is_refused_without_blocking_and_a_file_is_read() {
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("pipe");
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
        )
        .unwrap();
        let e = open_regular(&fifo).unwrap_err();
        assert!(is_not_regular(&e), "{e}");
        assert!(e.to_string().contains("FIFO"), "{e}");
        let e = read_regular(tmp.path()).unwrap_err();
        assert!(is_not_regular(&e), "{e}");
        let file = tmp.path().join("f");
        std::fs::write(&file, "x").unwrap();
        assert_eq!(read_regular_string(&file).unwrap(), "x");
        assert!(!is_not_regular(
            &read_regular(&tmp.path().join("none")).unwrap_err()
        ));
    }

    #[test]
    fn a_failed_write_leaves_no_temporary_file() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("state.json");
        // The target is a non-empty directory: the rename fails after the write succeeded.
        std::fs::create_dir_all(target.join("x")).unwrap();
        let (at, e) = write_atomic(&target, b"{}").unwrap_err();
        assert_eq!(at, target, "{e}");
        let names: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["state.json"]);
        std::fs::remove_dir_all(&target).unwrap();
        write_atomic(&target, b"{}").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"{}");
    }
}
