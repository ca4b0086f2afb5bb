//! The narrow interface between the store and the file system.
//!
//! Everything the store does to disk goes through [`Storage`] and [`StorageFile`], so
//! tests can swap the real file system for a fault-injecting one that separates written
//! bytes from synced bytes and can produce the image a power cut would leave.

use std::io;
use std::path::{Path, PathBuf};

mod fs;
mod sim;
mod watched;

pub use fs::FsStorage;
pub use sim::SimStorage;
pub use watched::{HeldGate, Op, SyncGate, Watched, Watcher};

/// A file opened through a [`Storage`].
///
/// Positions are absolute; there is no cursor. Methods take `&self` so that readers and
/// the single writer of a file can share it.
pub trait StorageFile: Send + Sync + std::fmt::Debug {
    /// Reads exactly `buf.len()` bytes at `position`; fails with `UnexpectedEof` if the
    /// file is shorter.
    fn read_at(&self, buf: &mut [u8], position: u64) -> io::Result<()>;
    /// Writes all of `data` at `position`, extending the file if needed.
    fn write_at(&self, data: &[u8], position: u64) -> io::Result<()>;
    /// Makes every write so far durable (`fdatasync`).
    fn sync(&self) -> io::Result<()>;
    /// Truncates or extends the file to `len` bytes.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// The file's current length in bytes.
    fn len(&self) -> io::Result<u64>;
    /// Whether the file is empty.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
}

/// A file system: the real one, or a simulated one for crash tests.
///
/// Creating, renaming or removing a file is durable only after [`Storage::sync_dir`] on
/// its directory, as on a real POSIX file system.
pub trait Storage: Send + Sync + std::fmt::Debug {
    /// Opens `path` for reading and writing, creating it (empty) if `create` is set.
    fn open(&self, path: &Path, create: bool) -> io::Result<Box<dyn StorageFile>>;
    /// Creates `path` and any missing parents.
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// The entries of directory `path` (full paths), in no particular order.
    fn list_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>>;
    /// Whether `path` exists.
    fn exists(&self, path: &Path) -> io::Result<bool>;
    /// Removes the file `path`.
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Removes the directory `path` and everything in it.
    fn remove_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Atomically renames `from` to `to`, replacing `to`.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Makes the directory's entries durable (fsync on the directory).
    fn sync_dir(&self, path: &Path) -> io::Result<()>;
}

/// Creates `dir` and any missing parents, and makes each new directory entry durable by
/// syncing the directory that holds it.
///
/// # Errors
/// The first failing create or sync.
///
/// # Example
///
/// ```
/// use std::path::Path;
/// use mailroom_store::storage::{create_dir_durable, SimStorage, Storage};
///
/// let sim = SimStorage::new();
/// create_dir_durable(&sim, Path::new("/a/b"))?;
/// assert!(sim.crash(1).exists(Path::new("/a/b"))?);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn create_dir_durable(storage: &dyn Storage, dir: &Path) -> io::Result<()> {
    let mut missing = Vec::new();
    for ancestor in dir.ancestors() {
        if ancestor.as_os_str().is_empty() || storage.exists(ancestor)? {
            break;
        }
        missing.push(ancestor);
    }
    storage.create_dir_all(dir)?;
    // Parents first: a child's entry is no use if its parent's entry is lost.
    for created in missing.iter().rev() {
        let parent = match created.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        storage.sync_dir(parent)?;
    }
    Ok(())
}
