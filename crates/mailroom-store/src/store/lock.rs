//! The directory lock: one open store per directory, across processes.
//!
//! Two stores writing one directory would interleave records and each trust its own view
//! of the logs' ends, so the second opener is refused. The lock is an advisory `flock`
//! on `<dir>/LOCK`; the kernel drops it when the process dies, so a crash never leaves a
//! stale lock behind.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::Path;

use crate::StoreError;

/// The lock file's name inside a store directory.
pub const LOCK_FILE: &str = "LOCK";

/// Holds the exclusive lock on a store directory until dropped.
#[derive(Debug)]
pub struct DirLock {
    // The lock lives as long as this open file description.
    _file: File,
}

impl DirLock {
    /// Takes the lock on `dir`, creating the lock file if needed. Never waits.
    ///
    /// # Errors
    ///
    /// [`StoreError::Locked`] if another store holds it (in this process or another);
    /// [`StoreError::Io`] if the lock file cannot be opened (read-only directory, ...).
    pub fn acquire(dir: &Path) -> Result<DirLock, StoreError> {
        let path = dir.join(LOCK_FILE);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|source| StoreError::Io {
                operation: "open lock file",
                path: path.clone(),
                source,
            })?;
        match file.try_lock() {
            Ok(()) => Ok(DirLock { _file: file }),
            Err(TryLockError::WouldBlock) => Err(StoreError::Locked { path }),
            Err(TryLockError::Error(source)) => Err(StoreError::Io {
                operation: "lock",
                path,
                source,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a second lock on the same directory is refused while the first is held,
    // and granted once it is dropped.
    #[test]
    fn second_lock_is_refused_until_release() {
        let dir = tempfile::tempdir().unwrap();
        let first = DirLock::acquire(dir.path()).unwrap();
        assert!(matches!(
            DirLock::acquire(dir.path()),
            Err(StoreError::Locked { .. })
        ));
        drop(first);
        DirLock::acquire(dir.path()).unwrap();
    }
}
