//! Opening a log directory: finding its segments, trusting sealed ones by their index
//! trailer, and checking the tail of the active one.
//!
//! The rules (also in `docs/storage.md`, "Log recovery"):
//! - Only `<20 digits>.log` and `<20 digits>.idx` may be in the directory; anything else
//!   is refused. An index without its segment is a leftover of an interrupted deletion
//!   or roll and is removed.
//! - A sealed segment (any but the last) is trusted if its index has a valid trailer that
//!   matches the segment's length. Otherwise it is scanned in full and must be entirely
//!   valid: sealed segments were synced before their successor was created, so they have
//!   no torn tail, and any damage is [`StoreError::Corrupt`].
//! - Consecutive segments must join up: a sealed segment ends where the next begins.
//! - The active (last) segment is scanned from its last usable index entry to its end.
//!   The first damaged record ends the scan. If it is cut short, or nothing valid with a
//!   later offset follows it, it is a torn tail: the segment is truncated there. If a
//!   valid later record follows, data that was written after the damage reached the disk,
//!   so the damage is not a torn write: [`StoreError::Corrupt`].
//! - The synced mark (`SYNCED`, see `mark.rs`) says how far the active segment was
//!   durable. Damage to a record that starts before that point is rot, never a torn
//!   tail: [`StoreError::Corrupt`] naming the file, byte and offset. So is a segment
//!   shorter than the mark, or a mark naming a segment that is gone. Without a usable
//!   mark (a log written before marks existed) the rules above are all there is.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use parking_lot::Mutex;

use super::index::{self, IndexContents, IndexEntry};
use super::mark::{self, Claim, SyncedMark};
use super::reindex::write_sealed_index;
use super::segment::{self, ScanEnd, Segment, SegmentMeta, Window};
use super::LogOptions;
use crate::record::RecordRef;
use crate::storage::{create_dir_durable, Storage};
use crate::StoreError;

mod active;

/// The folder inside a log directory where [`super::Log::repair`] moves damaged segments.
pub(crate) const DAMAGED_DIR: &str = "damaged";
/// Recovery reads segments in chunks this big.
pub(crate) const SCAN_CHUNK_BYTES: usize = 1 << 20;
/// An index file longer than this is not one of ours (1 GiB segments need 2 MiB).
const INDEX_FILE_BYTES_MAX: u64 = 64 << 20;

pub(crate) fn io_error(
    operation: &'static str,
    path: &Path,
) -> impl FnOnce(std::io::Error) -> StoreError {
    let path = path.to_path_buf();
    move |source| StoreError::Io {
        operation,
        path,
        source,
    }
}

/// Opens every segment in `dir`, creating the directory and a first segment if needed.
/// Returns the segments oldest first; the last is the active one.
pub(crate) fn recover(
    storage: &dyn Storage,
    dir: &Path,
    options: &LogOptions,
) -> Result<Recovered, StoreError> {
    create_dir_durable(storage, dir).map_err(io_error("create directory", dir))?;
    // Read before listing: creating a missing mark here puts its entry under the
    // directory sync that listing does.
    let (mut mark, claim) = SyncedMark::open(storage, dir)?;
    let bases = list_segments(storage, dir)?;
    let Some((&active_base, sealed_bases)) = bases.split_last() else {
        let base = mark::empty_log_base(&mark, claim)?;
        let segment = create_segment(storage, dir, base)?;
        mark.write_synced(Claim::empty(base))?;
        let segments = vec![segment];
        return Ok(Recovered { segments, mark });
    };
    let synced = mark::claim_for_active(&mark, claim, dir, active_base)?;
    let mut segments = Vec::with_capacity(bases.len());
    for &base in sealed_bases {
        segments.push(Arc::new(open_sealed(storage, dir, base, options)?));
    }
    let active = active::open_active(storage, dir, active_base, options, synced)?;
    segments.push(Arc::new(active));
    for pair in segments.windows(2) {
        let end = pair[0].meta.lock().end_offset;
        if end != pair[1].base_offset {
            return Err(StoreError::Corrupt {
                path: pair[1].path.clone(),
                position: 0,
                reason: format!(
                    "segments do not join up: the previous one ends at offset {end}, this one starts at {}",
                    pair[1].base_offset
                ),
            });
        }
    }
    // Open synced the whole active segment: all of it is durable now.
    mark.write_synced(Claim::of(segments.last().expect("pushed above")))?;
    Ok(Recovered { segments, mark })
}

/// What recovery hands to a new `Log`.
#[derive(Debug)]
pub(crate) struct Recovered {
    /// The segments, oldest first; the last is the active one.
    pub segments: Vec<Arc<Segment>>,
    /// The synced mark, claiming everything recovered.
    pub mark: SyncedMark,
}

/// The base offsets of the segments in `dir`, sorted; removes orphan index files and
/// refuses foreign files.
fn list_segments(storage: &dyn Storage, dir: &Path) -> Result<Vec<u64>, StoreError> {
    let mut files: BTreeMap<u64, (bool, bool)> = BTreeMap::new();
    for path in storage.list_dir(dir).map_err(io_error("list", dir))? {
        let parsed = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(segment::parse_file_name);
        let name = path.file_name().and_then(|n| n.to_str());
        if name.is_some_and(|n| n == mark::FILE_NAME || n == DAMAGED_DIR) {
            continue;
        }
        let Some((base, extension)) = parsed else {
            return Err(StoreError::Corrupt {
                path,
                position: 0,
                reason: "foreign file in a log directory (only <20-digit base offset>.log and .idx, SYNCED and damaged/ belong here)"
                    .into(),
            });
        };
        let entry = files.entry(base).or_default();
        if extension == segment::LOG_EXTENSION {
            entry.0 = true;
        } else {
            entry.1 = true;
        }
    }
    for (&base, _) in files.iter().filter(|(_, (has_log, _))| !has_log) {
        let path = segment::file_path(dir, base, segment::INDEX_EXTENSION);
        tracing::warn!(path = %path.display(), "removing an index file whose segment is gone");
        storage
            .remove_file(&path)
            .map_err(io_error("remove", &path))?;
    }
    // After a process crash, creations or deletions seen here may not be durable yet
    // (say, a retention whose directory sync failed): make the view open acts on stick.
    storage
        .sync_dir(dir)
        .map_err(io_error("fsync directory", dir))?;
    Ok(files
        .into_iter()
        .filter(|(_, (has_log, _))| *has_log)
        .map(|(base, _)| base)
        .collect())
}

/// Creates an empty segment and its index, and makes both entries durable.
pub(crate) fn create_segment(
    storage: &dyn Storage,
    dir: &Path,
    base_offset: u64,
) -> Result<Arc<Segment>, StoreError> {
    let path = segment::file_path(dir, base_offset, segment::LOG_EXTENSION);
    let index_path = segment::file_path(dir, base_offset, segment::INDEX_EXTENSION);
    let file = storage
        .open(&path, true)
        .map_err(io_error("create", &path))?;
    if file.len().map_err(io_error("stat", &path))? != 0 {
        return Err(StoreError::Corrupt {
            path,
            position: 0,
            reason: "a new segment's file already exists and is not empty".into(),
        });
    }
    let index_file = storage
        .open(&index_path, true)
        .map_err(io_error("create", &index_path))?;
    index_file
        .set_len(0)
        .map_err(io_error("truncate", &index_path))?;
    storage
        .sync_dir(dir)
        .map_err(io_error("fsync directory", dir))?;
    let meta = SegmentMeta {
        end_offset: base_offset,
        ..SegmentMeta::default()
    };
    Ok(Arc::new(Segment {
        base_offset,
        path,
        file,
        index_path,
        index_file,
        meta: Mutex::new(meta),
    }))
}

/// Opens a segment's two files and reads its index file.
pub(super) fn open_files(
    storage: &dyn Storage,
    dir: &Path,
    base_offset: u64,
) -> Result<(Segment, u64, IndexContents), StoreError> {
    let path = segment::file_path(dir, base_offset, segment::LOG_EXTENSION);
    let index_path = segment::file_path(dir, base_offset, segment::INDEX_EXTENSION);
    let file = storage
        .open(&path, false)
        .map_err(io_error("open", &path))?;
    let bytes = file.len().map_err(io_error("stat", &path))?;
    // The index is a cache: a missing one is created empty and rebuilt.
    let index_file = storage
        .open(&index_path, true)
        .map_err(io_error("open", &index_path))?;
    let index_bytes = index_file.len().map_err(io_error("stat", &index_path))?;
    let contents = if index_bytes > INDEX_FILE_BYTES_MAX {
        IndexContents::Open {
            entries: Vec::new(),
        }
    } else {
        let mut buf = vec![0; index_bytes as usize];
        index_file
            .read_at(&mut buf, 0)
            .map_err(io_error("read", &index_path))?;
        index::parse(&buf)
    };
    let segment = Segment {
        base_offset,
        path,
        file,
        index_path,
        index_file,
        meta: Mutex::new(SegmentMeta {
            end_offset: base_offset,
            ..SegmentMeta::default()
        }),
    };
    Ok((segment, bytes, contents))
}

/// Opens a sealed segment, trusting a valid trailer or else checking every record.
fn open_sealed(
    storage: &dyn Storage,
    dir: &Path,
    base_offset: u64,
    options: &LogOptions,
) -> Result<Segment, StoreError> {
    let (segment, bytes, contents) = open_files(storage, dir, base_offset)?;
    if let IndexContents::Sealed { entries, seal } = contents {
        let fits = entries.last().is_none_or(|e| u64::from(e.position) < bytes);
        if seal.segment_bytes == bytes && seal.end_offset > base_offset && fits {
            *segment.meta.lock() = SegmentMeta {
                entries,
                end_offset: seal.end_offset,
                bytes,
                unflushed_bytes: 0,
                last_timestamp_ms: seal.last_timestamp_ms,
            };
            return Ok(segment);
        }
    }
    tracing::warn!(path = %segment.index_path.display(), "rebuilding the index of a sealed segment");
    let mut meta = segment.meta.lock().clone();
    let mut window = Window::new(
        segment.file.as_ref(),
        &segment.path,
        bytes,
        SCAN_CHUNK_BYTES,
    );
    let end = scan_into(&mut window, &mut meta, base_offset, options)?;
    if let ScanEnd::Damaged { position, reason } = end {
        return Err(StoreError::Corrupt {
            path: segment.path.clone(),
            position,
            reason: format!("damaged record in a sealed segment: {reason}"),
        });
    }
    write_sealed_index(&segment, &meta)?;
    *segment.meta.lock() = meta;
    Ok(segment)
}

/// Scans `window` from where `meta` ends (its bytes and end offset), noting each valid
/// record in `meta`, up to the first damaged record or the end of the window.
pub(super) fn scan_into(
    window: &mut Window<'_>,
    meta: &mut SegmentMeta,
    base_offset: u64,
    options: &LogOptions,
) -> Result<ScanEnd, StoreError> {
    let (from, due) = (meta.bytes, meta.end_offset);
    segment::scan(
        window,
        from,
        due,
        options.record_bytes_max,
        |record, position| {
            note_record(
                meta,
                base_offset,
                record,
                position,
                options.index_interval_bytes,
            );
        },
    )
}

/// Records that `record` sits at `position` of the segment. Returns the index entry it
/// earned, if any (entries are spaced at least `interval_bytes` apart).
pub(crate) fn note_record(
    meta: &mut SegmentMeta,
    base_offset: u64,
    record: RecordRef<'_>,
    position: u64,
    interval_bytes: u32,
) -> Option<IndexEntry> {
    let mut earned = None;
    if position > 0 && position - meta.last_indexed_position() >= u64::from(interval_bytes) {
        // Both fit: options cap a segment below 4 GiB, so below 2^32 records too.
        let entry = IndexEntry {
            relative_offset: u32::try_from(record.offset - base_offset)
                .expect("segment size capped"),
            position: u32::try_from(position).expect("segment size capped"),
        };
        meta.entries.push(entry);
        earned = Some(entry);
    }
    meta.end_offset = record.offset + 1;
    meta.bytes = position + crate::record::encoded_bytes(record.payload.len()) as u64;
    meta.last_timestamp_ms = record.timestamp_ms;
    earned
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves note_record spaces index entries by the interval and never indexes position 0.
    #[test]
    fn note_record_spaces_entries() {
        let mut meta = SegmentMeta::default();
        let payload = [0u8; 76]; // 100-byte records
        let mut earned = Vec::new();
        for i in 0..10u64 {
            let record = RecordRef {
                offset: 50 + i,
                timestamp_ms: i,
                payload: &payload,
                has_metadata: false,
            };
            if let Some(e) = note_record(&mut meta, 50, record, i * 100, 250) {
                earned.push((e.relative_offset, e.position));
            }
        }
        assert_eq!(earned, vec![(3, 300), (6, 600), (9, 900)]);
        assert_eq!(
            (meta.end_offset, meta.bytes, meta.last_timestamp_ms),
            (60, 1000, 9)
        );
    }
}
