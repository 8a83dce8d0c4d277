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

use std::path::{Path, PathBuf};
use std::sync::Arc;
use tantivy::directory::error::{DeleteError, LockError, OpenReadError, OpenWriteError};
use tantivy::directory::{
    Directory, DirectoryLock, FileHandle, Lock, META_LOCK, MmapDirectory, WatchCallback,
    WatchHandle, WritePtr,
};

#[derive(Debug, Clone)]
pub(crate) struct IndexDirectory {
    inner: MmapDirectory,
    root: PathBuf,
}

impl IndexDirectory {
    pub(crate) fn open(root: &Path) -> tantivy::Result<IndexDirectory> {
        Ok(IndexDirectory {
            inner: MmapDirectory::open(root)?,
            root: root.to_path_buf(),
        })
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
        self.inner.get_file_handle(path)
    }

    fn delete(&self, path: &Path) -> Result<(), DeleteError> {
        self.inner.delete(path)
    }

    fn exists(&self, path: &Path) -> Result<bool, OpenReadError> {
        self.inner.exists(path)
    }

    fn open_write(&self, path: &Path) -> Result<WritePtr, OpenWriteError> {
        self.inner.open_write(path)
    }

    fn atomic_read(&self, path: &Path) -> Result<Vec<u8>, OpenReadError> {
        self.inner.atomic_read(path)
    }

    fn atomic_write(&self, path: &Path, data: &[u8]) -> std::io::Result<()> {
        self.inner.atomic_write(path, data)
    }

    fn sync_directory(&self) -> std::io::Result<()> {
        self.inner.sync_directory()
    }

    fn acquire_lock(&self, lock: &Lock) -> Result<DirectoryLock, LockError> {
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
