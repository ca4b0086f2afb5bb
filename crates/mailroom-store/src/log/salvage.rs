//! Keeping the intact front of a damaged log: [`Log::cut_at_damage`].
//!
//! [`Log::repair`] moves every segment of a damaged log aside, which suits the message
//! log (its offsets were handed to clients, so it restarts past them). A topic's groups
//! log is different: its offsets are its own, and every record before the damage is a
//! change the groups confirmed. Cutting the log just before the first damaged record
//! keeps them all; what is lost is exactly the records from there on, and the cut says
//! which.
//!
//! Crash safety, in order: (1) a copy of the segment holding the damage is written to
//! `damaged/<cut offset:020>/` and synced; (2) every later segment moves there, the
//! folders synced after; (3) the synced mark is rewritten to claim the cut segment up to
//! the cut; (4) the segment is truncated there and its index (a cache) removed. A crash
//! before (3) leaves the damage in place, so open still refuses and a second cut finds
//! the same place; after (3), open sees a segment longer than its claim, whose extra
//! bytes a second cut removes in the same way.

use std::ops::Range;
use std::path::{Path, PathBuf};

use super::mark::{Claim, SyncedMark};
use super::recovery::{io_error, DAMAGED_DIR, SCAN_CHUNK_BYTES};
use super::repair::segment_bases;
use super::segment::{self, Window};
use super::{Log, LogOptions, RECORD_BYTES_LIMIT};
use crate::record::Decoded;
use crate::storage::{create_dir_durable, Storage};
use crate::StoreError;

/// What [`Log::cut_at_damage`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    /// The records kept, every one intact.
    pub kept: Range<u64>,
    /// The records dropped: from the first damaged one to the end the log claimed (as
    /// far as it is known; at least the damaged record).
    pub dropped: Range<u64>,
    /// Where the dropped records went, untouched: a copy of the segment cut, and every
    /// later segment.
    pub moved_to: PathBuf,
}

/// Where a log is cut: the segment, the byte and the offset of the first record lost.
struct CutPoint {
    base: u64,
    position: u64,
    offset: u64,
}

impl Log {
    /// Cuts the log in `dir` just before its first damaged record (or before record
    /// `at`, if given and reached first: a record that decodes but that its reader
    /// refused), keeping every record before it. The segment holding the cut is copied,
    /// and every later one moved, into `dir/damaged/<offset>/`. Returns `None`, changing
    /// nothing, if every record decodes and `at` is not in the log, or if the cut would
    /// keep nothing; nothing else may have the log open.
    ///
    /// Unlike [`Log::repair`], the offsets from the cut on are handed out again: only
    /// for a log whose offsets never leave the store (a topic's groups log).
    ///
    /// # Errors
    /// [`StoreError::Io`] if the file system fails; [`StoreError::Corrupt`] if the
    /// synced mark is unreadable.
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
    /// log.append(&[b"first", b"second", b"third"], 1)?;
    /// drop(log);
    /// // Rot in the second record's payload (records have a 24-byte header).
    /// let second = 24 + 5 + 24 + 1;
    /// storage.corrupt_file(&dir.join("00000000000000000000.log"), |b| b[second] ^= 1);
    /// assert!(Log::open(Arc::new(storage.clone()), dir, LogOptions::default()).is_err());
    ///
    /// let cut = Log::cut_at_damage(&storage, dir, &LogOptions::default(), None)?.unwrap();
    /// assert_eq!((cut.kept, cut.dropped), (0..1, 1..3));
    /// let log = Log::open(Arc::new(storage), dir, LogOptions::default())?;
    /// assert_eq!(log.end(), 1);
    /// # Ok::<(), mailroom_store::StoreError>(())
    /// ```
    pub fn cut_at_damage(
        storage: &dyn Storage,
        dir: &Path,
        options: &LogOptions,
        at: Option<u64>,
    ) -> Result<Option<Cut>, StoreError> {
        let bases = segment_bases(storage, dir)?;
        let Some(&first) = bases.first() else {
            return Ok(None);
        };
        let Some(cut) = find_cut(storage, dir, &bases, options, at)? else {
            return Ok(None);
        };
        if cut.offset <= first {
            return Ok(None);
        }
        let (mut mark, claim) = SyncedMark::open(storage, dir)?;
        let claimed_end = claim.map_or(cut.offset, |claim| claim.end_offset);
        let moved_to = dir.join(DAMAGED_DIR).join(format!("{:020}", cut.offset));
        create_dir_durable(storage, &moved_to).map_err(io_error("create directory", &moved_to))?;
        let from = segment::file_path(dir, cut.base, segment::LOG_EXTENSION);
        copy_file(storage, &from, &moved_to)?;
        for &base in bases.iter().filter(|&&base| base > cut.base) {
            for extension in [segment::LOG_EXTENSION, segment::INDEX_EXTENSION] {
                let path = segment::file_path(dir, base, extension);
                if storage.exists(&path).map_err(io_error("stat", &path))? {
                    let to = segment::file_path(&moved_to, base, extension);
                    storage
                        .rename(&path, &to)
                        .map_err(io_error("rename", &path))?;
                }
            }
        }
        for synced in [moved_to.as_path(), dir] {
            storage
                .sync_dir(synced)
                .map_err(io_error("fsync directory", synced))?;
        }
        mark.write_synced(Claim {
            base_offset: cut.base,
            end_offset: cut.offset,
            segment_bytes: cut.position,
        })?;
        let file = storage
            .open(&from, false)
            .map_err(io_error("open", &from))?;
        file.set_len(cut.position)
            .map_err(io_error("truncate", &from))?;
        file.sync().map_err(io_error("fsync", &from))?;
        let index = segment::file_path(dir, cut.base, segment::INDEX_EXTENSION);
        if storage.exists(&index).map_err(io_error("stat", &index))? {
            storage
                .remove_file(&index)
                .map_err(io_error("remove", &index))?;
            storage
                .sync_dir(dir)
                .map_err(io_error("fsync directory", dir))?;
        }
        let dropped = cut.offset..claimed_end.max(cut.offset + 1);
        tracing::warn!(
            dir = %dir.display(), moved_to = %moved_to.display(), ?dropped,
            "cut a damaged log before its first damaged record"
        );
        Ok(Some(Cut {
            kept: first..cut.offset,
            dropped,
            moved_to,
        }))
    }
}

/// The first place, oldest segment first, where the records stop being whole, valid and
/// consecutive (or reach `at`); `None` if they never do.
fn find_cut(
    storage: &dyn Storage,
    dir: &Path,
    bases: &[u64],
    options: &LogOptions,
    at: Option<u64>,
) -> Result<Option<CutPoint>, StoreError> {
    // Generous on purpose: a record the log wrote is never longer than this, and a
    // smaller limit would cut an intact record written under a larger one.
    let record_bytes_max = options.record_bytes_max.max(RECORD_BYTES_LIMIT);
    let mut due = bases[0];
    for &base in bases {
        if base != due {
            return Ok(Some(CutPoint {
                base: previous(bases, base),
                position: segment_len(storage, dir, previous(bases, base))?,
                offset: due,
            }));
        }
        let path = segment::file_path(dir, base, segment::LOG_EXTENSION);
        let file = storage
            .open(&path, false)
            .map_err(io_error("open", &path))?;
        let bytes = file.len().map_err(io_error("stat", &path))?;
        let mut window = Window::new(file.as_ref(), &path, bytes, SCAN_CHUNK_BYTES);
        let mut position = 0;
        while position < bytes {
            let whole = match window.decode_at(position, record_bytes_max)? {
                Decoded::Record { record, bytes } if record.offset == due => Some(bytes),
                _ => None,
            };
            match whole {
                Some(length) if at != Some(due) => {
                    position += length as u64;
                    due += 1;
                }
                // The active segment's preallocated zeros end its records, as the
                // file's end would (open has judged them against the mark already).
                None if Some(&base) == bases.last()
                    && segment::zeros_to_limit(&mut window, position)? =>
                {
                    return Ok(None);
                }
                _ => {
                    let offset = due;
                    return Ok(Some(CutPoint {
                        base,
                        position,
                        offset,
                    }));
                }
            }
        }
    }
    Ok(None)
}

/// The base of the segment before `base` in `bases`.
fn previous(bases: &[u64], base: u64) -> u64 {
    bases
        .iter()
        .copied()
        .take_while(|&b| b < base)
        .last()
        .unwrap_or(base)
}

fn segment_len(storage: &dyn Storage, dir: &Path, base: u64) -> Result<u64, StoreError> {
    let path = segment::file_path(dir, base, segment::LOG_EXTENSION);
    let file = storage
        .open(&path, false)
        .map_err(io_error("open", &path))?;
    file.len().map_err(io_error("stat", &path))
}

/// Copies the file at `from` into the directory `into`, synced.
fn copy_file(storage: &dyn Storage, from: &Path, into: &Path) -> Result<(), StoreError> {
    let source = storage.open(from, false).map_err(io_error("open", from))?;
    let bytes = source.len().map_err(io_error("stat", from))?;
    let mut buf = vec![0; usize::try_from(bytes).unwrap_or(usize::MAX)];
    source
        .read_at(&mut buf, 0)
        .map_err(io_error("read", from))?;
    let to = into.join(from.file_name().unwrap_or_default());
    let copy = storage.open(&to, true).map_err(io_error("create", &to))?;
    copy.set_len(0).map_err(io_error("truncate", &to))?;
    copy.write_at(&buf, 0).map_err(io_error("write", &to))?;
    copy.sync().map_err(io_error("fsync", &to))
}
