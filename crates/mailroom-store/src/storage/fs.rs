//! [`FsStorage`]: the real file system, through `std`.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::{Storage, StorageFile};

/// The real file system.
///
/// Reads and writes are positional (`pread`/`pwrite`), [`StorageFile::sync`] is
/// `fdatasync`, and [`Storage::sync_dir`] opens the directory and fsyncs it.
///
/// # Example
///
/// ```
/// use mailroom_store::storage::{FsStorage, Storage};
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("a");
/// let file = FsStorage.open(&path, true)?;
/// file.write_at(b"hello", 0)?;
/// file.sync()?;
/// FsStorage.sync_dir(dir.path())?;
/// let mut buf = [0; 5];
/// file.read_at(&mut buf, 0)?;
/// assert_eq!(&buf, b"hello");
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct FsStorage;

/// A file opened by [`FsStorage`].
#[derive(Debug)]
struct FsFile {
    file: File,
}

impl StorageFile for FsFile {
    fn read_at(&self, buf: &mut [u8], position: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, position)
    }

    fn write_at(&self, data: &[u8], position: u64) -> io::Result<()> {
        self.file.write_all_at(data, position)
    }

    fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }
}

impl Storage for FsStorage {
    fn open(&self, path: &Path, create: bool) -> io::Result<Box<dyn StorageFile>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(false)
            .open(path)?;
        Ok(Box::new(FsFile { file }))
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir_all(path)
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
        std::fs::read_dir(path)?
            .map(|entry| entry.map(|entry| entry.path()))
            .collect()
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        path.try_exists()
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_dir_all(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        File::open(path)?.sync_all()
    }
}
