//! The store's directory on disk: checking (or making) its root, opening each entry of
//! `topics/`, and the `STORE` and `TOPIC` markers. What is store-wide damage (the store
//! does not open) and what fails one topic only is decided here (see `health.rs`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::lock::LOCK_FILE;
use super::names::validate_name;
use super::{corrupt, health, io_error, repair, StoreOptions};
use super::{FORMAT_VERSION, STORE_FILE, STORE_MAGIC, TOPICS_DIR, TOPIC_FILE, TOPIC_MAGIC};
use crate::storage::{create_dir_durable, Storage};
use crate::topic::settings::replace_durable;
use crate::topic::DurableTopic;
use crate::StoreError;

/// Checks that `dir` is a mailroom store (or empty, and makes it one).
pub(super) fn prepare_root(storage: &dyn Storage, dir: &Path) -> Result<(), StoreError> {
    let marker = dir.join(STORE_FILE);
    let entries = storage.list_dir(dir).map_err(io_error("list", dir))?;
    let named = |path: &PathBuf| {
        path.file_name()
            .and_then(|name| name.to_str())
            .map(str::to_owned)
    };
    let has_marker = storage.exists(&marker).map_err(io_error("stat", &marker))?;
    for entry in &entries {
        let name = named(entry);
        let expected = match name.as_deref() {
            Some(LOCK_FILE) => true,
            Some(STORE_FILE) | Some(TOPICS_DIR) => has_marker,
            Some(name) => name == format!("{STORE_FILE}.tmp"),
            None => false,
        };
        if !expected {
            return Err(store_damage(corrupt(
                entry,
                "not part of a mailroom store (refusing to use a directory with foreign files)",
            )));
        }
    }
    if has_marker {
        check_marker(storage, &marker, STORE_MAGIC).map_err(store_damage)?;
    } else {
        write_marker(storage, dir, STORE_FILE, STORE_MAGIC)?;
    }
    // The marker comes first, so a crash in between leaves a store without `topics/`,
    // which is made here, never a `topics/` without a marker.
    let topics = dir.join(TOPICS_DIR);
    create_dir_durable(storage, &topics).map_err(io_error("create directory", &topics))
}

/// The topic name of an entry of `topics/`.
///
/// # Errors
///
/// [`StoreError::Corrupt`] for an entry that cannot be a topic: store-wide damage (see
/// [`store_damage`]).
pub(super) fn topic_name(dir: &Path) -> Result<&str, StoreError> {
    dir.file_name()
        .and_then(|name| name.to_str())
        .filter(|name| validate_name(name).is_ok())
        .ok_or_else(|| store_damage(corrupt(dir, "not a topic directory (invalid topic name)")))
}

/// Adds what to do to an error about a store-wide file, which stops the whole store.
pub(super) fn store_damage(error: StoreError) -> StoreError {
    match error {
        StoreError::Corrupt {
            path,
            position,
            reason,
        } => StoreError::Corrupt {
            path,
            position,
            reason: format!(
                "{reason}. This is store-wide, so the store does not open: move the entry \
                 out of the data directory, or for a damaged STORE marker (12 bytes: \
                 'MRSTORE1' and the format version 1 as u32 LE) write it again, then \
                 start again (docs/storage.md, \"Damage stays local\")"
            ),
        },
        other => other,
    }
}

/// Opens one entry of `topics/`: a topic, or the remains of an unfinished create or
/// delete (removed), or something foreign (an error).
pub(super) fn open_topic_dir(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    options: &StoreOptions,
) -> Result<Option<(String, DurableTopic)>, StoreError> {
    let name = topic_name(dir)?;
    let entries = storage
        .list_dir(dir)
        .map_err(|_| corrupt(dir, "not a topic directory (cannot be listed)"))?;
    let marker = dir.join(TOPIC_FILE);
    if !storage.exists(&marker).map_err(io_error("stat", &marker))? {
        tracing::warn!(?dir, "removing an unfinished topic create or delete");
        storage
            .remove_dir_all(dir)
            .map_err(io_error("remove", dir))?;
        let parent = dir.parent().unwrap_or(dir);
        storage
            .sync_dir(parent)
            .map_err(io_error("fsync directory", parent))?;
        return Ok(None);
    }
    check_marker(storage.as_ref(), &marker, TOPIC_MAGIC)?;
    for entry in &entries {
        let known = entry
            .file_name()
            .and_then(|name| name.to_str())
            .is_some_and(|name| {
                matches!(
                    name,
                    "TOPIC"
                        | "TOPIC.tmp"
                        | "messages"
                        | "groups"
                        | "CHECKPOINT"
                        | "CHECKPOINT.tmp"
                        | "SETTINGS"
                        | "SETTINGS.tmp"
                        | health::SPACE_PROBE_FILE
                        | repair::DAMAGED_DIR
                )
            });
        if !known {
            return Err(corrupt(entry, "not part of a mailroom topic"));
        }
    }
    let probe = dir.join(health::SPACE_PROBE_FILE);
    if storage.exists(&probe).map_err(io_error("stat", &probe))? {
        // Left by a reopen's probe for space that a crash interrupted.
        storage
            .remove_file(&probe)
            .map_err(io_error("remove", &probe))?;
    }
    let topic = DurableTopic::open(storage.clone(), name, dir, options)?;
    Ok(Some((name.to_owned(), topic)))
}

fn marker_bytes(magic: [u8; 8]) -> [u8; 12] {
    let mut bytes = [0; 12];
    bytes[..8].copy_from_slice(&magic);
    bytes[8..].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    bytes
}

/// Writes marker `file` in `dir` atomically and durably.
pub(super) fn write_marker(
    storage: &dyn Storage,
    dir: &Path,
    file: &str,
    magic: [u8; 8],
) -> Result<(), StoreError> {
    replace_durable(storage, dir, file, &marker_bytes(magic))
}

fn check_marker(storage: &dyn Storage, path: &Path, magic: [u8; 8]) -> Result<(), StoreError> {
    let file = storage.open(path, false).map_err(io_error("open", path))?;
    let expected = marker_bytes(magic);
    let len = file.len().map_err(io_error("stat", path))?;
    let mut found = [0; 12];
    if len != expected.len() as u64 {
        return Err(corrupt(
            path,
            format!("marker file of {len} bytes, expected 12"),
        ));
    }
    file.read_at(&mut found, 0)
        .map_err(io_error("read", path))?;
    if found[..8] != magic {
        return Err(corrupt(path, "bad magic: not written by mailroom"));
    }
    if found != expected {
        return Err(corrupt(path, "unsupported format version"));
    }
    Ok(())
}
