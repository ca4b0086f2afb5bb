//! The checkpoint file on disk: replaced atomically, read back with its checks.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{Checkpoint, CHECKPOINT_BYTES_MAX, CHECKPOINT_FILE, CHECKPOINT_TMP_FILE, HEADER_BYTES};
use crate::groups::reader::DecodeError;
use crate::storage::Storage;
use crate::StoreError;

fn io_error(operation: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> StoreError {
    let path = path.to_path_buf();
    move |source| StoreError::Io {
        operation,
        path,
        source,
    }
}

/// Replaces the checkpoint in `dir` atomically (write temp, sync, rename, sync dir).
///
/// # Errors
///
/// [`StoreError::Io`] if any step fails; the previous checkpoint is then still whole.
pub fn write(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    checkpoint: &Checkpoint,
) -> Result<(), StoreError> {
    let bytes = checkpoint.encode();
    let tmp = dir.join(CHECKPOINT_TMP_FILE);
    let file = storage.open(&tmp, true).map_err(io_error("create", &tmp))?;
    file.set_len(0).map_err(io_error("truncate", &tmp))?;
    file.write_at(&bytes, 0).map_err(io_error("write", &tmp))?;
    file.sync().map_err(io_error("fdatasync", &tmp))?;
    drop(file);
    let path = dir.join(CHECKPOINT_FILE);
    storage
        .rename(&tmp, &path)
        .map_err(io_error("rename", &tmp))?;
    storage
        .sync_dir(dir)
        .map_err(io_error("fsync directory", dir))
}

/// Reads the checkpoint in `dir`, if there is one, removing an unfinished temp file.
///
/// # Errors
///
/// [`StoreError::Corrupt`] if the file fails its checks; [`StoreError::Io`] on I/O errors.
pub fn read(storage: &Arc<dyn Storage>, dir: &Path) -> Result<Option<Checkpoint>, StoreError> {
    let tmp = dir.join(CHECKPOINT_TMP_FILE);
    if storage.exists(&tmp).map_err(io_error("stat", &tmp))? {
        storage
            .remove_file(&tmp)
            .map_err(io_error("remove", &tmp))?;
    }
    let path: PathBuf = dir.join(CHECKPOINT_FILE);
    if !storage.exists(&path).map_err(io_error("stat", &path))? {
        return Ok(None);
    }
    let file = storage
        .open(&path, false)
        .map_err(io_error("open", &path))?;
    let len = file.len().map_err(io_error("stat", &path))?;
    let corrupt = |reason: String| StoreError::Corrupt {
        path: path.clone(),
        position: 0,
        reason,
    };
    if len > CHECKPOINT_BYTES_MAX + HEADER_BYTES as u64 {
        return Err(corrupt(format!(
            "checkpoint of {len} bytes exceeds the limit"
        )));
    }
    let mut bytes = vec![0; len as usize];
    file.read_at(&mut bytes, 0)
        .map_err(io_error("read", &path))?;
    Checkpoint::decode(&bytes)
        .map(Some)
        .map_err(|DecodeError(reason)| corrupt(format!("bad checkpoint: {reason}")))
}
