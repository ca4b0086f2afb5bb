//! [`Watched`]: a [`Storage`] that tells a [`Watcher`] about every file operation, for
//! tests and benchmarks that count syncs or reads, hold syncs back, or snapshot power-cut
//! images between operations. [`SyncGate`] is the watcher that holds syncs back.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use super::{Storage, StorageFile};

/// One file operation, as a [`Watcher`] sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op<'a> {
    /// `bytes` read from the file at `path`.
    Read {
        /// The file.
        path: &'a Path,
        /// How many bytes.
        bytes: usize,
    },
    /// `bytes` written to the file at `path`.
    Write {
        /// The file.
        path: &'a Path,
        /// How many bytes.
        bytes: usize,
    },
    /// The file at `path` synced (`fdatasync`).
    Sync(&'a Path),
    /// The file at `path` truncated or extended.
    SetLen(&'a Path),
    /// The file at `path` opened (and perhaps created).
    Open(&'a Path),
    /// A directory created, a file or directory removed, or a directory synced: what
    /// changes the directory tree.
    Tree(&'a Path),
    /// A rename of `from`.
    Rename(&'a Path),
}

impl Op<'_> {
    /// Whether the operation may change what is on disk (everything but a read).
    pub fn changes_disk(&self) -> bool {
        !matches!(self, Op::Read { .. })
    }
}

/// Told about each operation of a [`Watched`] storage: `before` it runs (and may block,
/// to hold it back) and `after` it returned, whether it failed or not.
pub trait Watcher: Send + Sync + std::fmt::Debug + 'static {
    /// Called before `op` runs.
    fn before(&self, op: Op<'_>) {
        let _ = op;
    }
    /// Called after `op` returned.
    fn after(&self, op: Op<'_>) {
        let _ = op;
    }
}

/// A [`Storage`] that runs on `inner` and tells `watcher` about every file operation.
/// Listing a directory and asking whether a path exists are not reported.
///
/// # Example
///
/// ```
/// use std::path::Path;
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
/// use mailroom_store::storage::{Op, SimStorage, Storage, Watched, Watcher};
///
/// #[derive(Debug, Default)]
/// struct Syncs(AtomicU64);
/// impl Watcher for Syncs {
///     fn after(&self, op: Op<'_>) {
///         if let Op::Sync(_) = op {
///             self.0.fetch_add(1, Ordering::Relaxed);
///         }
///     }
/// }
///
/// let syncs = Arc::new(Syncs::default());
/// let storage = Watched::new(Arc::new(SimStorage::new()), syncs.clone());
/// let file = storage.open(Path::new("/f"), true)?;
/// file.write_at(b"abc", 0)?;
/// file.sync()?;
/// assert_eq!(syncs.0.load(Ordering::Relaxed), 1);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct Watched<W: Watcher> {
    inner: Arc<dyn Storage>,
    watcher: Arc<W>,
}

impl<W: Watcher> Watched<W> {
    /// `inner`, reporting to `watcher`.
    pub fn new(inner: Arc<dyn Storage>, watcher: Arc<W>) -> Watched<W> {
        Watched { inner, watcher }
    }

    fn around<T>(&self, op: Op<'_>, run: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
        self.watcher.before(op);
        let result = run();
        self.watcher.after(op);
        result
    }
}

#[derive(Debug)]
struct WatchedFile<W: Watcher> {
    file: Box<dyn StorageFile>,
    path: PathBuf,
    watcher: Arc<W>,
}

impl<W: Watcher> WatchedFile<W> {
    fn around<T>(&self, op: Op<'_>, run: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
        self.watcher.before(op);
        let result = run();
        self.watcher.after(op);
        result
    }
}

impl<W: Watcher> StorageFile for WatchedFile<W> {
    fn read_at(&self, buf: &mut [u8], position: u64) -> io::Result<()> {
        let path = &self.path;
        let bytes = buf.len();
        self.around(Op::Read { path, bytes }, || {
            self.file.read_at(buf, position)
        })
    }
    fn write_at(&self, data: &[u8], position: u64) -> io::Result<()> {
        let (path, bytes) = (&self.path, data.len());
        self.around(Op::Write { path, bytes }, || {
            self.file.write_at(data, position)
        })
    }
    fn sync(&self) -> io::Result<()> {
        self.around(Op::Sync(&self.path), || self.file.sync())
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.around(Op::SetLen(&self.path), || self.file.set_len(len))
    }
    fn len(&self) -> io::Result<u64> {
        self.file.len()
    }
}

impl<W: Watcher> Storage for Watched<W> {
    fn open(&self, path: &Path, create: bool) -> io::Result<Box<dyn StorageFile>> {
        let file = self.around(Op::Open(path), || self.inner.open(path, create))?;
        Ok(Box::new(WatchedFile {
            file,
            path: path.to_path_buf(),
            watcher: Arc::clone(&self.watcher),
        }))
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.around(Op::Tree(path), || self.inner.create_dir_all(path))
    }
    fn list_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
        self.inner.list_dir(path)
    }
    fn exists(&self, path: &Path) -> io::Result<bool> {
        self.inner.exists(path)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.around(Op::Tree(path), || self.inner.remove_file(path))
    }
    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        self.around(Op::Tree(path), || self.inner.remove_dir_all(path))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.around(Op::Rename(from), || self.inner.rename(from, to))
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.around(Op::Tree(path), || self.inner.sync_dir(path))
    }
}

/// A [`Watcher`] that, while held ([`SyncGate::hold`]), holds back every file sync until
/// released: how a test catches code that answers before its data is durable, however
/// the store's sync thread happens to be scheduled.
///
/// # Example
///
/// ```
/// use std::path::Path;
/// use std::sync::Arc;
/// use mailroom_store::storage::{SimStorage, Storage, SyncGate, Watched};
///
/// let gate = Arc::new(SyncGate::default());
/// let storage = Watched::new(Arc::new(SimStorage::new()), gate.clone());
/// let file = storage.open(Path::new("/f"), true)?;
/// let held = gate.hold();
/// let syncing = std::thread::spawn(move || file.sync());
/// // ... the sync is waiting here ...
/// drop(held);
/// syncing.join().unwrap()?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Default)]
pub struct SyncGate {
    closed: Mutex<bool>,
    opened: Condvar,
}

/// Keeps its [`SyncGate`] closed until dropped (also when a failed assertion unwinds, so
/// held syncs are let go and a test fails instead of hanging).
#[derive(Debug)]
#[must_use = "the gate opens again when this is dropped"]
pub struct HeldGate<'a>(&'a SyncGate);

impl SyncGate {
    /// Closes the gate until the returned guard is dropped.
    pub fn hold(&self) -> HeldGate<'_> {
        *self.closed.lock() = true;
        HeldGate(self)
    }

    fn pass(&self) {
        let mut closed = self.closed.lock();
        while *closed {
            self.opened.wait(&mut closed);
        }
    }
}

impl Drop for HeldGate<'_> {
    fn drop(&mut self) {
        *self.0.closed.lock() = false;
        self.0.opened.notify_all();
    }
}

impl Watcher for SyncGate {
    fn before(&self, op: Op<'_>) {
        if let Op::Sync(_) = op {
            self.pass();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;
    use crate::storage::SimStorage;

    #[derive(Debug, Default)]
    struct Log(Mutex<Vec<String>>);

    impl Watcher for Log {
        fn before(&self, op: Op<'_>) {
            self.0.lock().push(format!("before {op:?}"));
        }
        fn after(&self, op: Op<'_>) {
            self.0.lock().push(format!("after {op:?}"));
        }
    }

    // Proves each operation is reported before and after it runs, with its path and
    // size, and that reads and lookups change nothing on disk.
    #[test]
    fn operations_are_reported_around_the_call() {
        let log = Arc::new(Log::default());
        let storage = Watched::new(Arc::new(SimStorage::new()), log.clone());
        storage.create_dir_all(Path::new("/d")).unwrap();
        let file = storage.open(Path::new("/d/f"), true).unwrap();
        file.write_at(b"hello", 0).unwrap();
        file.read_at(&mut [0; 2], 1).unwrap();
        file.sync().unwrap();
        let seen = log.0.lock().clone();
        let path = Path::new("/d/f");
        let expected: Vec<String> = [
            Op::Tree(Path::new("/d")),
            Op::Open(path),
            Op::Write { path, bytes: 5 },
            Op::Read { path, bytes: 2 },
            Op::Sync(path),
        ]
        .iter()
        .flat_map(|op| [format!("before {op:?}"), format!("after {op:?}")])
        .collect();
        assert_eq!(seen, expected);
        assert!(!Op::Read { path, bytes: 2 }.changes_disk());
        assert!(Op::Sync(path).changes_disk());
    }

    // Proves a held gate keeps a sync from finishing until it is dropped.
    #[test]
    fn a_held_gate_holds_syncs_back() {
        let gate = Arc::new(SyncGate::default());
        let storage = Watched::new(Arc::new(SimStorage::new()), gate.clone());
        let file = storage.open(Path::new("/f"), true).unwrap();
        let held = gate.hold();
        let (done_tx, done_rx) = mpsc::channel();
        let syncing = std::thread::spawn(move || done_tx.send(file.sync().is_ok()));
        // The sync must not finish while the gate is held; 50 ms is only how long we
        // watch for a wrong early finish, not a wait for something to happen.
        assert!(done_rx.recv_timeout(Duration::from_millis(50)).is_err());
        drop(held);
        assert_eq!(done_rx.recv(), Ok(true));
        syncing.join().unwrap().unwrap();
    }
}
