//! [`SimStorage`]: an in-memory file system that remembers what is durable, for crash tests.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use super::{Storage, StorageFile};

mod state;

use state::{
    dir_key, is_root, os_error, parent_of, write_into, DirChange, FileOp, Inode, Node, SimState,
    SplitMix, EISDIR, ENOTDIR,
};
/// An in-memory file system that separates written bytes from synced bytes, and can
/// produce the image a power cut would leave.
///
/// Per file it keeps the current bytes, the bytes as of the last [`StorageFile::sync`],
/// and the writes in between. Per directory it keeps which creates, renames and removals
/// are durable ([`Storage::sync_dir`]) and which are still pending. [`SimStorage::crash`]
/// builds a new file system from that: synced data and synced directory entries survive;
/// of the pending writes of each file a random *prefix* survives, the last one possibly
/// torn; of the pending directory changes of each directory a random prefix survives. A
/// file whose directory entry did not survive is gone; so is everything under a lost
/// directory. (Cross-directory renames count as a change of the target directory.)
///
/// Faults can be injected: failing syncs (`EIO`; the file's pending writes and length
/// changes are then lost to a crash, though still read back, as dirty pages may be after
/// a failed writeback) or writes (`EIO`), a full disk (`ENOSPC`), a
/// read-only file system (`EROFS`), and a delay inside every sync that stands in for a
/// slow disk so that concurrent appenders really overlap.
///
/// Cloning gives another handle to the same file system.
///
/// # Example
///
/// ```
/// use std::path::Path;
/// use mailroom_store::storage::{SimStorage, Storage};
///
/// let sim = SimStorage::new();
/// sim.create_dir_all(Path::new("/d"))?;
/// sim.sync_dir(Path::new("/"))?;
/// let file = sim.open(Path::new("/d/f"), true)?;
/// sim.sync_dir(Path::new("/d"))?;
/// file.write_at(b"kept", 0)?;
/// file.sync()?;
/// file.write_at(b" maybe", 4)?; // not synced: a crash keeps none, some or all of it
///
/// let after = sim.crash(7);
/// let bytes = after.file_bytes(Path::new("/d/f")).unwrap();
/// assert!(bytes.starts_with(b"kept") && b"kept maybe".starts_with(&bytes[..]));
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct SimStorage {
    state: Arc<Mutex<SimState>>,
    /// Kept outside the lock so a slow sync does not stall every other call.
    sync_delay: Arc<Mutex<Duration>>,
    /// Holds file syncs part way, so a test can order other calls against a running sync.
    gate: Arc<SyncGate>,
}

/// See [`SimStorage::hold_syncs`].
#[derive(Debug, Default)]
struct SyncGate {
    state: Mutex<GateState>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct GateState {
    held: bool,
    /// How many syncs are held at the gate now.
    waiting: usize,
}

impl SimStorage {
    /// An empty file system (just the root directory, durable).
    pub fn new() -> SimStorage {
        SimStorage::default()
    }

    /// A new file system holding what a power cut now could leave, drawn from `seed`
    /// (the same seed on the same history gives the same image). Faults and the sync
    /// delay are not carried over.
    pub fn crash(&self, seed: u64) -> SimStorage {
        let mut rng = SplitMix(seed);
        let image = self.state.lock().crash_image(&mut rng);
        SimStorage {
            state: Arc::new(Mutex::new(image)),
            sync_delay: Arc::default(),
            gate: Arc::default(),
        }
    }

    /// Makes the next `count` syncs (file or directory) fail with `EIO`.
    pub fn fail_next_syncs(&self, count: u64) {
        self.state.lock().faults.syncs_failing = count;
    }

    /// Makes the next `count` writes or length changes fail with `EIO`, writing nothing.
    pub fn fail_next_writes(&self, count: u64) {
        self.state.lock().faults.writes_failing = count;
    }

    /// While set, anything that would take more space (growing a file, creating an
    /// entry) fails with `ENOSPC`.
    pub fn set_full(&self, full: bool) {
        self.state.lock().faults.full = full;
    }

    /// While set, every change and every open (files are opened read-write) fails with
    /// `EROFS`.
    pub fn set_read_only(&self, read_only: bool) {
        self.state.lock().faults.read_only = read_only;
    }

    /// Makes every file sync take this long (outside any lock), like a slow disk.
    pub fn set_sync_delay(&self, delay: Duration) {
        *self.sync_delay.lock() = delay;
    }

    /// While held, every file sync that does not fail stops after it noted which writes
    /// it covers (those made before the call) and before it makes them durable, until
    /// released: a test can then make other calls while a sync is known to be running.
    /// Releasing lets every held sync go on. A fault is taken before the gate, so a sync
    /// made to fail returns at once.
    pub fn hold_syncs(&self, held: bool) {
        self.gate.state.lock().held = held;
        self.gate.changed.notify_all();
    }

    /// Returns once `count` syncs are held (see [`Self::hold_syncs`]).
    pub fn wait_for_held_syncs(&self, count: usize) {
        let mut gate = self.gate.state.lock();
        while gate.waiting < count {
            self.gate.changed.wait(&mut gate);
        }
    }

    /// Stops a sync at the gate while it is held.
    fn pass_gate(&self) {
        let mut gate = self.gate.state.lock();
        if !gate.held {
            return;
        }
        gate.waiting += 1;
        self.gate.changed.notify_all();
        while gate.held {
            self.gate.changed.wait(&mut gate);
        }
        gate.waiting -= 1;
    }

    /// How many file syncs have succeeded so far.
    pub fn syncs_done(&self) -> u64 {
        self.state.lock().syncs_done
    }

    /// The current bytes of the file at `path`, if it exists.
    pub fn file_bytes(&self, path: &Path) -> Option<Vec<u8>> {
        let state = self.state.lock();
        match state.node(path)? {
            Node::File(ino) => Some(state.inodes[ino].data.clone()),
            Node::Dir => None,
        }
    }

    /// Changes the bytes of the file at `path` as if the disk itself had changed them:
    /// pending writes are first made durable, then `change` edits the durable bytes.
    /// Returns false if there is no such file.
    pub fn corrupt_file(&self, path: &Path, change: impl FnOnce(&mut Vec<u8>)) -> bool {
        let mut state = self.state.lock();
        let Some(Node::File(ino)) = state.node(path) else {
            return false;
        };
        let inode = &mut state.inodes[ino];
        inode.ops_synced += inode.pending.len() as u64;
        inode.pending.clear();
        change(&mut inode.data);
        inode.synced = inode.data.clone();
        true
    }
}

/// A file opened in a [`SimStorage`].
#[derive(Debug)]
struct SimFile {
    storage: SimStorage,
    ino: usize,
}

impl StorageFile for SimFile {
    fn read_at(&self, buf: &mut [u8], position: u64) -> io::Result<()> {
        let state = self.storage.state.lock();
        let data = &state.inodes[self.ino].data;
        let start = usize::try_from(position).unwrap_or(usize::MAX);
        match start.checked_add(buf.len()) {
            Some(end) if end <= data.len() => {
                buf.copy_from_slice(&data[start..end]);
                Ok(())
            }
            _ => Err(io::ErrorKind::UnexpectedEof.into()),
        }
    }

    fn write_at(&self, data: &[u8], position: u64) -> io::Result<()> {
        let mut state = self.storage.state.lock();
        state.take_write_fault()?;
        if position + data.len() as u64 > state.inodes[self.ino].data.len() as u64 {
            state.check_space()?;
        }
        let inode = &mut state.inodes[self.ino];
        write_into(&mut inode.data, position, data);
        inode.pending.push(FileOp::Write {
            position,
            data: data.to_vec(),
        });
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        let covered = {
            let mut state = self.storage.state.lock();
            if let Err(error) = state.take_sync_fault() {
                // Like Linux after a failed writeback: the pages stay readable but are
                // marked clean, so no later sync writes them and a crash loses them (the
                // worst case: some may have reached the disk). A sync running meanwhile
                // finds nothing left to apply and succeeds, as an `fdatasync` on the
                // same open file does once another call was told of the error.
                let inode = &mut state.inodes[self.ino];
                inode.ops_synced += inode.pending.len() as u64;
                inode.pending.clear();
                return Err(error);
            }
            let inode = &state.inodes[self.ino];
            inode.ops_synced + inode.pending.len() as u64
        };
        self.storage.pass_gate();
        let delay = *self.storage.sync_delay.lock();
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        // Like fdatasync, this covers the writes made before the call, not those made
        // while it ran.
        let mut state = self.storage.state.lock();
        let inode = &mut state.inodes[self.ino];
        // Another sync of this file may have run meanwhile and applied some of them.
        let still_pending = covered.saturating_sub(inode.ops_synced) as usize;
        inode.ops_synced += still_pending as u64;
        let Inode {
            synced, pending, ..
        } = inode;
        for op in pending.drain(..still_pending) {
            op.apply(synced);
        }
        state.syncs_done += 1;
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut state = self.storage.state.lock();
        state.take_write_fault()?;
        if len > state.inodes[self.ino].data.len() as u64 {
            state.check_space()?;
        }
        let inode = &mut state.inodes[self.ino];
        FileOp::SetLen(len).apply(&mut inode.data);
        inode.pending.push(FileOp::SetLen(len));
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.storage.state.lock().inodes[self.ino].data.len() as u64)
    }
}

impl Storage for SimStorage {
    fn open(&self, path: &Path, create: bool) -> io::Result<Box<dyn StorageFile>> {
        let mut state = self.state.lock();
        state.check_writable()?;
        let ino = match state.node(path) {
            Some(Node::File(ino)) => ino,
            Some(Node::Dir) => return Err(os_error(EISDIR)),
            None if !create => return Err(io::ErrorKind::NotFound.into()),
            None => {
                let parent = parent_of(path);
                match state.node(&parent) {
                    Some(Node::Dir) => {}
                    Some(Node::File(_)) => return Err(os_error(ENOTDIR)),
                    None => return Err(io::ErrorKind::NotFound.into()),
                }
                state.check_space()?;
                state.inodes.push(Inode::default());
                let ino = state.inodes.len() - 1;
                state.change(
                    parent,
                    DirChange::Insert(path.to_path_buf(), Node::File(ino)),
                );
                ino
            }
        };
        Ok(Box::new(SimFile {
            storage: self.clone(),
            ino,
        }))
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut state = self.state.lock();
        let mut missing: Vec<&Path> = path.ancestors().take_while(|p| !is_root(p)).collect();
        missing.reverse();
        for dir in missing {
            match state.node(dir) {
                Some(Node::Dir) => continue,
                Some(Node::File(_)) => return Err(os_error(ENOTDIR)),
                None => {}
            }
            state.check_writable()?;
            state.check_space()?;
            state.change(
                parent_of(dir),
                DirChange::Insert(dir.to_path_buf(), Node::Dir),
            );
        }
        Ok(())
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
        let state = self.state.lock();
        match state.node(path) {
            Some(Node::Dir) => {}
            Some(Node::File(_)) => return Err(os_error(ENOTDIR)),
            None => return Err(io::ErrorKind::NotFound.into()),
        }
        let dir = dir_key(path);
        let children = state.namespace.keys().filter(|p| parent_of(p) == dir);
        Ok(children.cloned().collect())
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        Ok(self.state.lock().node(path).is_some())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut state = self.state.lock();
        state.check_writable()?;
        match state.node(path) {
            Some(Node::File(_)) => {}
            Some(Node::Dir) => return Err(os_error(EISDIR)),
            None => return Err(io::ErrorKind::NotFound.into()),
        }
        state.change(parent_of(path), DirChange::Remove(path.to_path_buf()));
        Ok(())
    }

    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut state = self.state.lock();
        state.check_writable()?;
        match state.node(path) {
            Some(Node::Dir) if !is_root(path) => {}
            Some(_) => return Err(os_error(ENOTDIR)),
            None => return Err(io::ErrorKind::NotFound.into()),
        }
        state.change(parent_of(path), DirChange::RemoveTree(path.to_path_buf()));
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut state = self.state.lock();
        state.check_writable()?;
        let node = match state.node(from) {
            Some(node @ Node::File(_)) => node,
            // Directory renames are not needed by the store, so not simulated.
            Some(Node::Dir) => return Err(os_error(EISDIR)),
            None => return Err(io::ErrorKind::NotFound.into()),
        };
        let target_dir = parent_of(to);
        match (state.node(&target_dir), state.node(to)) {
            (Some(Node::Dir), None | Some(Node::File(_))) => {}
            (Some(Node::Dir), Some(Node::Dir)) => return Err(os_error(EISDIR)),
            _ => return Err(io::ErrorKind::NotFound.into()),
        }
        let change = DirChange::Rename {
            from: from.to_path_buf(),
            to: to.to_path_buf(),
            node,
        };
        state.change(target_dir, change);
        Ok(())
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let mut state = self.state.lock();
        if state.node(path) != Some(Node::Dir) {
            return Err(io::ErrorKind::NotFound.into());
        }
        state.take_sync_fault()?;
        let dir = dir_key(path);
        let SimState {
            pending_dir_ops,
            durable,
            ..
        } = &mut *state;
        pending_dir_ops.retain(|op| {
            if op.dir == dir {
                op.change.apply(durable);
                false
            } else {
                true
            }
        });
        Ok(())
    }
}
