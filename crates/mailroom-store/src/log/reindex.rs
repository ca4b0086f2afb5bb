//! Writing a segment's index file from what is known about the segment, and rebuilding
//! the index from its records when a read finds an entry that does not point at the
//! record it names: the index is a cache, so its damage is repaired, never reported.

use std::sync::Arc;

use super::index::{self, IndexEntry, Seal};
use super::recovery::{io_error, note_record, SCAN_CHUNK_BYTES};
use super::segment::{self, ScanEnd, Segment, SegmentMeta, Window};
use super::Shared;
use crate::StoreError;

impl Shared {
    /// Rescans `segment` from its first byte and replaces its index, in memory and on
    /// disk, with entries that point at the records just read. Holds the writer lock
    /// (appends wait for the scan: this happens once per damaged index, not per read).
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] if the records themselves are damaged (then it is not the
    /// index); [`StoreError::Io`] if reading fails. Failing to write the rebuilt file is
    /// only logged: the entries in memory are what reads use.
    pub(crate) fn rebuild_index(&self, segment: &Arc<Segment>) -> Result<(), StoreError> {
        let mut writer = self.writer.lock();
        let active = Arc::ptr_eq(&writer.active, segment);
        if active {
            // Entries of buffered records are in memory only; the scan reads the file,
            // so the buffer and the queued entries go out first.
            if let Err(error) = self.flush_pending(&mut writer) {
                self.fail_stop_cutting(&writer, &error, None);
                return Err(error);
            }
        }
        let (bytes, end_offset) = {
            let meta = segment.meta.lock();
            (meta.bytes, meta.end_offset)
        };
        let mut rebuilt = SegmentMeta {
            end_offset: segment.base_offset,
            ..SegmentMeta::default()
        };
        let mut window = Window::new(
            segment.file.as_ref(),
            &segment.path,
            bytes,
            SCAN_CHUNK_BYTES,
        );
        let interval = self.options.index_interval_bytes;
        let base = segment.base_offset;
        let end = segment::scan(
            &mut window,
            0,
            base,
            self.options.record_bytes_max,
            |record, position| {
                note_record(&mut rebuilt, base, record, position, interval);
            },
        )?;
        if let ScanEnd::Damaged { position, reason } = end {
            return Err(StoreError::Corrupt {
                path: segment.path.clone(),
                position,
                reason: format!("rebuilding the index: {reason}"),
            });
        }
        if rebuilt.end_offset != end_offset {
            return Err(StoreError::Corrupt {
                path: segment.path.clone(),
                position: bytes,
                reason: format!(
                    "rebuilding the index: the records end at offset {}, {end_offset} expected",
                    rebuilt.end_offset
                ),
            });
        }
        let written = {
            let mut meta = segment.meta.lock();
            meta.entries = rebuilt.entries;
            if active {
                rewrite_open_index(segment, &meta.entries)
            } else {
                write_sealed_index(segment, &meta)
            }
        };
        if let Err(error) = written {
            tracing::warn!(%error, "could not write a rebuilt index; reads use the one in memory");
        }
        Ok(())
    }
}

/// Writes and syncs the index of a segment that will take no more records.
pub(crate) fn write_sealed_index(segment: &Segment, meta: &SegmentMeta) -> Result<(), StoreError> {
    let seal = Seal {
        end_offset: meta.end_offset,
        segment_bytes: meta.bytes,
        last_timestamp_ms: meta.last_timestamp_ms,
    };
    let bytes = index::encode_sealed(&meta.entries, seal);
    let path = &segment.index_path;
    segment
        .index_file
        .write_at(&bytes, 0)
        .map_err(io_error("write", path))?;
    segment
        .index_file
        .set_len(bytes.len() as u64)
        .map_err(io_error("truncate", path))?;
    segment
        .index_file
        .sync()
        .map_err(io_error("fdatasync", path))
}

/// Replaces the active segment's index file with exactly `entries` (no trailer). Not
/// synced: it is a cache, and open re-checks it.
pub(crate) fn rewrite_open_index(
    segment: &Segment,
    entries: &[IndexEntry],
) -> Result<(), StoreError> {
    let mut bytes = Vec::with_capacity(entries.len() * 8);
    for entry in entries {
        bytes.extend_from_slice(&index::encode_entry(*entry));
    }
    let path = &segment.index_path;
    segment
        .index_file
        .set_len(0)
        .map_err(io_error("truncate", path))?;
    segment
        .index_file
        .write_at(&bytes, 0)
        .map_err(io_error("write", path))
}
