//! Repairing a log that recovery refuses: [`Log::repair`].
//!
//! A log whose segments are damaged where a torn write cannot reach (rot inside the
//! synced mark, a damaged record with valid data after it, a damaged sealed segment, a
//! synced segment gone) is refused by [`Log::open`]. Repair does not guess which records
//! can be saved: it moves every segment into `damaged/<restart offset:020>/` (intact,
//! for an operator to salvage), and restarts the log empty at an offset past every
//! record that could ever have been confirmed, so no confirmed offset is reused.
//!
//! Offsets stay gap-free: the repaired log is `[restart, end)`, like a log whose older
//! segments retention deleted, so readers see the old offsets as gone (`start()` moved),
//! never as holes.
//!
//! Crash safety, in order: (1) the folder is created durably; (2) the mark is rewritten
//! and synced to claim an empty segment at the restart offset, which from then on makes
//! every open refuse the old segments ("a synced segment is missing") rather than serve
//! them; (3) segments move oldest first, the folders synced after; (4) the new segment is
//! created. A crash anywhere leaves a log that opens repaired, or one that open refuses and
//! a second repair finishes (it finds the same restart offset).

use std::path::{Path, PathBuf};

use super::mark::{Claim, SyncedMark};
use super::recovery::{self, io_error, DAMAGED_DIR};
use super::segment::{self, Window};
use super::{Log, LogOptions};
use crate::record::{self, Decoded, HEADER_BYTES};
use crate::storage::{create_dir_durable, Storage};
use crate::StoreError;

/// What [`Log::repair`] did to a damaged log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repaired {
    /// Why open refused the log (the `Corrupt` error's text).
    pub damage: String,
    /// Where the old segments went, untouched.
    pub moved_to: PathBuf,
    /// The offset the repaired log starts (and continues) at: past every record the old
    /// log held or confirmed.
    pub restarts_at: u64,
}

impl Log {
    /// Repairs the log in `dir` if [`Log::open`] refuses it as damaged: moves all of its
    /// segments into `dir/damaged/<offset>/` and restarts it, empty, at an offset past
    /// every record it held or confirmed, so the next append never reuses a confirmed
    /// offset. Returns `None`, changing nothing but what open itself does, for a log that
    /// opens. Damage that is not in a segment (a foreign file) is returned as the error:
    /// moving segments would not cure it. Nothing else may have the log open.
    ///
    /// # Errors
    /// The [`StoreError::Corrupt`] that open reported, if it is not about a segment;
    /// [`StoreError::Io`] if the file system fails; [`StoreError::InvalidArgument`] for
    /// bad options.
    ///
    /// # Example
    /// ```
    /// # use std::{path::Path, sync::Arc};
    /// use mailroom_store::log::{Log, LogOptions};
    /// use mailroom_store::storage::SimStorage;
    ///
    /// let storage = SimStorage::new();
    /// let dir = Path::new("/l");
    /// let log = Log::open(Arc::new(storage.clone()), dir, LogOptions::default())?;
    /// log.append(&[b"confirmed"], 1)?;
    /// drop(log);
    /// // Rot in the confirmed record: open refuses the log.
    /// storage.corrupt_file(&dir.join("00000000000000000000.log"), |b| b[30] ^= 1);
    /// assert!(Log::open(Arc::new(storage.clone()), dir, LogOptions::default()).is_err());
    ///
    /// let repaired = Log::repair(&storage, dir, &LogOptions::default())?.expect("damaged");
    /// assert_eq!(repaired.restarts_at, 1);
    /// let log = Log::open(Arc::new(storage), dir, LogOptions::default())?;
    /// assert_eq!(log.append(&[b"next"], 2)?, 1..2); // offset 0 is never reused
    /// # Ok::<(), mailroom_store::StoreError>(())
    /// ```
    pub fn repair(
        storage: &dyn Storage,
        dir: &Path,
        options: &LogOptions,
    ) -> Result<Option<Repaired>, StoreError> {
        options.validate()?;
        let damage = match recovery::recover(storage, dir, options) {
            Ok(_) => return Ok(None),
            Err(error @ StoreError::Corrupt { .. }) if names_a_segment(&error) => error,
            Err(error) => return Err(error),
        };
        let bases = segment_bases(storage, dir)?;
        let (mut mark, claim) = SyncedMark::open(storage, dir)?;
        let restarts_at = restart_offset(storage, dir, &bases, claim, options)?;
        let moved_to = dir.join(DAMAGED_DIR).join(format!("{restarts_at:020}"));
        create_dir_durable(storage, &moved_to).map_err(io_error("create directory", &moved_to))?;
        mark.write_synced(Claim::empty(restarts_at))?;
        for base in bases {
            for extension in [segment::LOG_EXTENSION, segment::INDEX_EXTENSION] {
                let from = segment::file_path(dir, base, extension);
                if storage.exists(&from).map_err(io_error("stat", &from))? {
                    let to = segment::file_path(&moved_to, base, extension);
                    storage
                        .rename(&from, &to)
                        .map_err(io_error("rename", &from))?;
                }
            }
        }
        for synced in [moved_to.as_path(), dir] {
            storage
                .sync_dir(synced)
                .map_err(io_error("fsync directory", synced))?;
        }
        recovery::create_segment(storage, dir, restarts_at)?;
        tracing::warn!(
            dir = %dir.display(), moved_to = %moved_to.display(), restarts_at, %damage,
            "repaired a damaged log: its segments were moved aside"
        );
        Ok(Some(Repaired {
            damage: damage.to_string(),
            moved_to,
            restarts_at,
        }))
    }
}

/// Whether a `Corrupt` error is about a segment file (which repair can move aside).
fn names_a_segment(error: &StoreError) -> bool {
    let StoreError::Corrupt { path, .. } = error else {
        return false;
    };
    path.file_name()
        .and_then(|name| name.to_str())
        .and_then(segment::parse_file_name)
        .is_some_and(|(_, extension)| extension == segment::LOG_EXTENSION)
}

/// The base offsets of the segment files in `dir`, oldest first.
pub(super) fn segment_bases(storage: &dyn Storage, dir: &Path) -> Result<Vec<u64>, StoreError> {
    let mut bases: Vec<u64> = storage
        .list_dir(dir)
        .map_err(io_error("list", dir))?
        .iter()
        .filter_map(|path| path.file_name()?.to_str())
        .filter_map(segment::parse_file_name)
        .filter(|(_, extension)| *extension == segment::LOG_EXTENSION)
        .map(|(base, _)| base)
        .collect();
    bases.sort_unstable();
    Ok(bases)
}

/// An offset past every record the log held or confirmed: past the mark's claim, the
/// newest segment's base, and every valid record found anywhere in that segment (read
/// without trusting its index, past any damage).
fn restart_offset(
    storage: &dyn Storage,
    dir: &Path,
    bases: &[u64],
    claim: Option<Claim>,
    options: &LogOptions,
) -> Result<u64, StoreError> {
    let mut restart = claim.map_or(0, |claim| claim.end_offset);
    let Some(&newest) = bases.last() else {
        return Ok(restart);
    };
    restart = restart.max(newest);
    let path = segment::file_path(dir, newest, segment::LOG_EXTENSION);
    let file = storage
        .open(&path, false)
        .map_err(io_error("open", &path))?;
    let bytes = file.len().map_err(io_error("stat", &path))?;
    let mut window = Window::new(file.as_ref(), &path, bytes, 1 << 20);
    // Records hold at least a header each, so no offset in this file can be further
    // from its base than this.
    let plausible = newest..newest.saturating_add(bytes / HEADER_BYTES as u64 + 1);
    let mut position = 0;
    while position < bytes {
        let header = window.bytes_from(position, HEADER_BYTES)?;
        if !record::peek_offset(header).is_some_and(|o| plausible.contains(&o)) {
            position += 1;
            continue;
        }
        match window.decode_at(position, options.record_bytes_max)? {
            Decoded::Record { record, bytes } if plausible.contains(&record.offset) => {
                restart = restart.max(record.offset + 1);
                position += bytes as u64;
            }
            _ => position += 1,
        }
    }
    Ok(restart)
}
