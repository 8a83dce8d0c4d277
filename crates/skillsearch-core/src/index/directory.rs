//! The tantivy directory an index is opened through: tantivy's memory-mapped one, except that
//! a read-only home can still be searched.
//!
//! Opening a reader takes tantivy's meta lock, which opens `.tantivy-meta.lock` for writing
//! (creating it if needed), so a reader fails on a read-only file system or directory. The lock
//! only keeps a writer's garbage collection from deleting segment files while a reader opens
//! them. When the file system refuses the write, the lock file is locked through a read-only
//! descriptor instead (`flock` needs no write access), or, when there is none to lock, the
//! reader goes on without: a directory nobody here can write to is one nobody here can delete
//! segment files from. The writer's own lock is never relaxed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tantivy::directory::OwnedBytes;
use tantivy::directory::error::{DeleteError, LockError, OpenReadError, OpenWriteError};
use tantivy::directory::{
    Directory, DirectoryLock, FileHandle, Lock, META_LOCK, MmapDirectory, WatchCallback,
    WatchHandle, WritePtr,
};

/// Segment files read into memory, by path in the directory.
type Held = Arc<Mutex<HashMap<PathBuf, OwnedBytes>>>;

#[derive(Debug, Clone)]
pub(crate) struct IndexDirectory {
    inner: MmapDirectory,
    root: PathBuf,
    /// Segment files held in memory rather than mapped (see the module docs).
    held: Option<Held>,
}

impl IndexDirectory {
    /// The index in `root`, its segment files mapped, or read into memory when `hold`.
    pub(crate) fn open(root: &Path, hold: bool) -> tantivy::Result<IndexDirectory> {
        Ok(IndexDirectory {
            inner: MmapDirectory::open(root)?,
            root: root.to_path_buf(),
            held: hold.then(Held::default),
        })
    }

    /// `path`'s bytes, read once and kept.
    fn held_file(&self, held: &Held, path: &Path) -> Result<OwnedBytes, OpenReadError> {
        if let Some(b) = held.lock().unwrap_or_else(|e| e.into_inner()).get(path) {
            return Ok(b.clone());
        }
        let full = self.root.join(path);
        let bytes = crate::fsio::read_regular(&full).map_err(|e| read_error(e, &full))?;
        let bytes = OwnedBytes::new(bytes);
        held.lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(path.to_path_buf(), bytes.clone());
        Ok(bytes)
    }

    /// The meta lock through a read-only descriptor, or no lock when there is no lock file.
    fn read_only_meta_lock(&self, lock: &Lock) -> Result<DirectoryLock, LockError> {
        use rustix::fs::{FlockOperation, Mode, OFlags};
        let path = self.root.join(&lock.filepath);
        let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK;
        let fd = match rustix::fs::open(&path, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => return Ok(DirectoryLock::from(Box::new(()))),
            Err(e) => return Err(LockError::wrap_io_error(e.into())),
        };
        let op = if lock.is_blocking {
            FlockOperation::LockExclusive
        } else {
            FlockOperation::NonBlockingLockExclusive
        };
        match rustix::fs::flock(&fd, op) {
            Ok(()) => Ok(DirectoryLock::from(Box::new(fd))),
            Err(rustix::io::Errno::WOULDBLOCK) => Err(LockError::LockBusy),
            Err(e) => Err(LockError::wrap_io_error(e.into())),
        }
    }
}

impl Directory for IndexDirectory {
    fn get_file_handle(&self, path: &Path) -> Result<Arc<dyn FileHandle>, OpenReadError> {
        if let Some(held) = &self.held {
            return Ok(Arc::new(self.held_file(held, path)?));
        }
        let full = self.root.join(path);
        crate::fsio::refuse_special(&full).map_err(|e| read_error(e, &full))?;
        self.inner.get_file_handle(path)
    }

    fn delete(&self, path: &Path) -> Result<(), DeleteError> {
        if let Some(held) = &self.held {
            held.lock().unwrap_or_else(|e| e.into_inner()).remove(path);
        }
        self.inner.delete(path)
    }

    fn exists(&self, path: &Path) -> Result<bool, OpenReadError> {
        self.inner.exists(path)
    }

    fn open_write(&self, path: &Path) -> Result<WritePtr, OpenWriteError> {
        self.inner.open_write(path)
    }

    fn atomic_read(&self, path: &Path) -> Result<Vec<u8>, OpenReadError> {
        let full = self.root.join(path);
        crate::fsio::read_regular(&full).map_err(|e| read_error(e, &full))
    }

    fn atomic_write(&self, path: &Path, data: &[u8]) -> std::io::Result<()> {
        self.inner.atomic_write(path, data)
    }

    fn sync_directory(&self) -> std::io::Result<()> {
        self.inner.sync_directory()
    }

    fn acquire_lock(&self, lock: &Lock) -> Result<DirectoryLock, LockError> {
        crate::fsio::refuse_special(&self.root.join(&lock.filepath))
            .map_err(LockError::wrap_io_error)?;
        match self.inner.acquire_lock(lock) {
            Err(LockError::IoError(e))
                if lock.filepath == META_LOCK.filepath && crate::fsio::is_unwritable(&e) =>
            {
                self.read_only_meta_lock(lock)
            }
            other => other,
        }
    }

    fn watch(&self, watch_callback: WatchCallback) -> tantivy::Result<WatchHandle> {
        self.inner.watch(watch_callback)
    }
}

/// A read error as tantivy expects it: a missing file is `FileDoesNotExist`.
fn read_error(e: std::io::Error, full: &Path) -> OpenReadError {
    if e.kind() == std::io::ErrorKind::NotFound {
        OpenReadError::FileDoesNotExist(full.to_path_buf())
    } else {
        OpenReadError::wrap_io_error(e, full.to_path_buf())
    }
}
