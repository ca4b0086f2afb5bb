//! [`Disk`]: the store's storage in the simulation. A [`SimStorage`] underneath keeps what
//! is durable; this layer adds the two faults the simulation needs that `SimStorage` does
//! not have: a power cut at an exact call inside an operation, and slow syncs measured in
//! simulated time.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mailroom_store::storage::{SimStorage, Storage, StorageFile};
use parking_lot::Mutex;

/// `EIO`: what every change after a power cut gets (the machine is off; nothing lands).
const EIO: i32 = 5;

/// The faults of a [`Disk`], shared by it and every file it opened.
#[derive(Debug, Default)]
struct Faults {
    /// Changes still allowed before the power goes; `None`: no cut armed.
    cut_after: Option<u64>,
    /// Whether the power has gone: every change fails and does nothing.
    cut: bool,
    /// Simulated milliseconds each file or directory sync takes.
    sync_ms: u64,
    /// Simulated milliseconds the syncs took since [`Disk::take_elapsed_ms`].
    elapsed_ms: u64,
}

impl Faults {
    /// Counts one change; fails it if the power is (now) gone.
    fn change(&mut self) -> io::Result<()> {
        if let Some(left) = self.cut_after {
            if left == 0 {
                self.cut = true;
                self.cut_after = None;
            } else {
                self.cut_after = Some(left - 1);
            }
        }
        if self.cut {
            return Err(io::Error::from_raw_os_error(EIO));
        }
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        self.change()?;
        self.elapsed_ms += self.sync_ms;
        Ok(())
    }
}

/// The simulation's storage: a [`SimStorage`] with a power cut that can be armed to fall
/// at the `n`th change (write, length change, sync, create, rename, removal) from now,
/// and syncs that take simulated time.
///
/// # Example
///
/// ```
/// use std::path::Path;
/// use mailroom_sim::Disk;
/// use mailroom_store::storage::Storage;
///
/// let disk = Disk::new(Default::default());
/// let file = disk.open(Path::new("/f"), true)?;
/// disk.cut_power_after(1);
/// file.write_at(b"lands", 0)?;
/// assert!(file.write_at(b"never lands", 5).is_err());
/// assert!(disk.power_is_cut());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Disk {
    sim: SimStorage,
    faults: Arc<Mutex<Faults>>,
}

impl Disk {
    /// A disk over `sim`, with no fault armed.
    pub fn new(sim: SimStorage) -> Disk {
        Disk {
            sim,
            faults: Arc::default(),
        }
    }

    /// The durable state underneath, for crash images and `SimStorage`'s own faults.
    pub fn sim(&self) -> &SimStorage {
        &self.sim
    }

    /// Arms a power cut: `changes` more changes succeed, every later one fails with `EIO`
    /// and does nothing.
    pub fn cut_power_after(&self, changes: u64) {
        self.faults.lock().cut_after = Some(changes);
    }

    /// Whether an armed power cut has fallen.
    pub fn power_is_cut(&self) -> bool {
        self.faults.lock().cut
    }

    /// Disarms a power cut that has not fallen yet.
    pub fn disarm(&self) {
        self.faults.lock().cut_after = None;
    }

    /// Makes every sync take `ms` simulated milliseconds (0: instant).
    pub fn set_sync_ms(&self, ms: u64) {
        self.faults.lock().sync_ms = ms;
    }

    /// The simulated time the syncs took since the last call.
    pub fn take_elapsed_ms(&self) -> u64 {
        std::mem::take(&mut self.faults.lock().elapsed_ms)
    }

    fn change(&self) -> io::Result<()> {
        self.faults.lock().change()
    }
}

#[derive(Debug)]
struct DiskFile {
    file: Box<dyn StorageFile>,
    faults: Arc<Mutex<Faults>>,
}

impl StorageFile for DiskFile {
    fn read_at(&self, buf: &mut [u8], position: u64) -> io::Result<()> {
        self.file.read_at(buf, position)
    }

    fn write_at(&self, data: &[u8], position: u64) -> io::Result<()> {
        self.faults.lock().change()?;
        self.file.write_at(data, position)
    }

    fn sync(&self) -> io::Result<()> {
        self.faults.lock().sync()?;
        self.file.sync()
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.faults.lock().change()?;
        self.file.set_len(len)
    }

    fn len(&self) -> io::Result<u64> {
        self.file.len()
    }
}

impl Storage for Disk {
    fn open(&self, path: &Path, create: bool) -> io::Result<Box<dyn StorageFile>> {
        if create && !self.sim.exists(path)? {
            self.change()?;
        }
        let file = self.sim.open(path, create)?;
        Ok(Box::new(DiskFile {
            file,
            faults: self.faults.clone(),
        }))
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        if !self.sim.exists(path)? {
            self.change()?;
        }
        self.sim.create_dir_all(path)
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
        self.sim.list_dir(path)
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        self.sim.exists(path)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.change()?;
        self.sim.remove_file(path)
    }

    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        self.change()?;
        self.sim.remove_dir_all(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.change()?;
        self.sim.rename(from, to)
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.faults.lock().sync()?;
        self.sim.sync_dir(path)
    }
}

/// Every file under `dir` on `storage`, sorted (so a seed picks the same one each run).
///
/// # Errors
///
/// A directory that cannot be listed.
pub fn files_under(storage: &dyn Storage, dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in storage.list_dir(&dir)? {
            match storage.list_dir(&entry) {
                Ok(_) => dirs.push(entry),
                Err(_) => files.push(entry),
            }
        }
    }
    files.sort();
    Ok(files)
}
