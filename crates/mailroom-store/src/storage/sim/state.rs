//! The state behind a [`SimStorage`](super::SimStorage): files with their synced and
//! pending bytes, directories with their durable and pending entries, and how a power cut
//! turns that into a new file system.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

// Linux errno values, so that simulated faults look exactly like real ones
// (`io::Error::from_raw_os_error(ENOSPC).kind()` is `StorageFull`, and so on).
pub(super) const EIO: i32 = 5;
pub(super) const ENOTDIR: i32 = 20;
pub(super) const EISDIR: i32 = 21;
pub(super) const ENOSPC: i32 = 28;
pub(super) const EROFS: i32 = 30;

#[derive(Debug, Default)]
pub(super) struct SimState {
    pub(super) inodes: Vec<Inode>,
    /// What a reader sees now.
    pub(super) namespace: BTreeMap<PathBuf, Node>,
    /// What survives any crash.
    pub(super) durable: BTreeMap<PathBuf, Node>,
    /// Directory changes not yet made durable, oldest first.
    pub(super) pending_dir_ops: Vec<DirOp>,
    pub(super) faults: Faults,
    pub(super) syncs_done: u64,
}

#[derive(Debug, Default)]
pub(super) struct Faults {
    pub(super) syncs_failing: u64,
    pub(super) writes_failing: u64,
    pub(super) full: bool,
    pub(super) read_only: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Node {
    File(usize),
    Dir,
}

#[derive(Debug, Default, Clone)]
pub(super) struct Inode {
    pub(super) data: Vec<u8>,
    pub(super) synced: Vec<u8>,
    pub(super) pending: Vec<FileOp>,
    /// How many ops were ever moved from `pending` into `synced`: lets overlapping syncs
    /// of one file each apply just what they cover.
    pub(super) ops_synced: u64,
}

#[derive(Debug, Clone)]
pub(super) enum FileOp {
    Write { position: u64, data: Vec<u8> },
    SetLen(u64),
}

#[derive(Debug, Clone)]
pub(super) struct DirOp {
    pub(super) dir: PathBuf,
    pub(super) change: DirChange,
}

#[derive(Debug, Clone)]
pub(super) enum DirChange {
    Insert(PathBuf, Node),
    Remove(PathBuf),
    RemoveTree(PathBuf),
    Rename {
        from: PathBuf,
        to: PathBuf,
        node: Node,
    },
}

/// A small seeded generator (splitmix64): crash images must replay from a seed.
pub(super) struct SplitMix(pub(super) u64);

impl SplitMix {
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..=max`.
    pub(super) fn up_to(&mut self, max: usize) -> usize {
        (self.next() % (max as u64 + 1)) as usize
    }
}

pub(super) fn os_error(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}

pub(super) fn is_root(path: &Path) -> bool {
    path.as_os_str().is_empty() || path == Path::new("/") || path == Path::new(".")
}

/// The directory holding `path`; every spelling of the root becomes `/`, so that pending
/// changes are filed under one name per directory.
pub(super) fn parent_of(path: &Path) -> PathBuf {
    dir_key(path.parent().unwrap_or(Path::new("/")))
}

pub(super) fn dir_key(dir: &Path) -> PathBuf {
    if is_root(dir) {
        PathBuf::from("/")
    } else {
        dir.to_path_buf()
    }
}

impl FileOp {
    pub(super) fn apply(&self, data: &mut Vec<u8>) {
        match self {
            FileOp::Write {
                position,
                data: bytes,
            } => write_into(data, *position, bytes),
            FileOp::SetLen(len) => data.resize(*len as usize, 0),
        }
    }
}

pub(super) fn write_into(data: &mut Vec<u8>, position: u64, bytes: &[u8]) {
    let start = position as usize;
    let end = start + bytes.len();
    if data.len() < end {
        data.resize(end, 0);
    }
    data[start..end].copy_from_slice(bytes);
}

impl DirChange {
    pub(super) fn apply(&self, map: &mut BTreeMap<PathBuf, Node>) {
        match self {
            DirChange::Insert(path, node) => {
                map.insert(path.clone(), *node);
            }
            DirChange::Remove(path) => {
                map.remove(path);
            }
            DirChange::RemoveTree(path) => map.retain(|p, _| !p.starts_with(path)),
            DirChange::Rename { from, to, node } => {
                map.remove(from);
                map.insert(to.clone(), *node);
            }
        }
    }
}

impl SimState {
    pub(super) fn node(&self, path: &Path) -> Option<Node> {
        if is_root(path) {
            return Some(Node::Dir);
        }
        self.namespace.get(path).copied()
    }

    pub(super) fn check_writable(&self) -> io::Result<()> {
        if self.faults.read_only {
            return Err(os_error(EROFS));
        }
        Ok(())
    }

    pub(super) fn check_space(&self) -> io::Result<()> {
        if self.faults.full {
            return Err(os_error(ENOSPC));
        }
        Ok(())
    }

    pub(super) fn change(&mut self, dir: PathBuf, change: DirChange) {
        change.apply(&mut self.namespace);
        self.pending_dir_ops.push(DirOp { dir, change });
    }

    pub(super) fn take_sync_fault(&mut self) -> io::Result<()> {
        if self.faults.syncs_failing > 0 {
            self.faults.syncs_failing -= 1;
            return Err(os_error(EIO));
        }
        Ok(())
    }

    pub(super) fn take_write_fault(&mut self) -> io::Result<()> {
        self.check_writable()?;
        if self.faults.writes_failing > 0 {
            self.faults.writes_failing -= 1;
            return Err(os_error(EIO));
        }
        Ok(())
    }

    /// The image a power cut could leave, drawn from `rng`.
    pub(super) fn crash_image(&self, rng: &mut SplitMix) -> SimState {
        let mut namespace = self.durable.clone();
        // Ordered maps: the draws below go to the directories in a fixed order, so the
        // same seed on the same history gives the same image in every process.
        let mut ops_per_dir: BTreeMap<&Path, usize> = BTreeMap::new();
        for op in &self.pending_dir_ops {
            *ops_per_dir.entry(&op.dir).or_default() += 1;
        }
        let mut kept_per_dir: BTreeMap<&Path, usize> = BTreeMap::new();
        for (dir, count) in &ops_per_dir {
            kept_per_dir.insert(dir, rng.up_to(*count));
        }
        for op in &self.pending_dir_ops {
            let kept = kept_per_dir
                .get_mut(op.dir.as_path())
                .expect("counted above");
            if *kept > 0 {
                *kept -= 1;
                op.change.apply(&mut namespace);
            }
        }
        // Parents sort before their children, so one pass drops every orphan.
        let mut image = BTreeMap::new();
        for (path, node) in namespace {
            let parent = parent_of(&path);
            if is_root(&parent) || image.get(&parent) == Some(&Node::Dir) {
                image.insert(path, node);
            }
        }
        let mut inodes = Vec::new();
        for node in image.values_mut() {
            if let Node::File(ino) = node {
                inodes.push(self.inodes[*ino].crash_image(rng));
                *node = Node::File(inodes.len() - 1);
            }
        }
        SimState {
            inodes,
            namespace: image.clone(),
            durable: image,
            ..SimState::default()
        }
    }
}

impl Inode {
    pub(super) fn crash_image(&self, rng: &mut SplitMix) -> Inode {
        let mut data = self.synced.clone();
        let kept = rng.up_to(self.pending.len());
        for op in &self.pending[..kept] {
            op.apply(&mut data);
        }
        // Half the time the first lost write is torn instead: a prefix of it lands.
        if let Some(FileOp::Write {
            position,
            data: bytes,
        }) = self.pending.get(kept)
        {
            if rng.next().is_multiple_of(2) {
                let torn = rng.up_to(bytes.len());
                write_into(&mut data, *position, &bytes[..torn]);
            }
        }
        Inode {
            synced: data.clone(),
            data,
            pending: Vec::new(),
            ops_synced: 0,
        }
    }
}
