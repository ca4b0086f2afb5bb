//! Opening the active (last) segment of a log: its records are found by scanning from
//! the last usable index entry, a torn tail or preallocated zeros are cut, rot inside the
//! synced mark is reported, and what was read is made durable before the mark claims it
//! (rules in `recovery.rs` and `docs/storage.md`, "Log recovery", step 5).

use std::path::Path;

use super::{io_error, open_files, scan_into, SCAN_CHUNK_BYTES};
use crate::log::index::{self, IndexContents};
use crate::log::mark::{self, Claim};
use crate::log::reindex::rewrite_open_index;
use crate::log::segment::{self, Damage, ScanEnd, Segment, SegmentMeta, Window};
use crate::log::LogOptions;
use crate::storage::Storage;
use crate::StoreError;

/// Opens the active segment: finds the last index entry that points at a valid record,
/// scans from there, and truncates a torn tail or preallocated zeros.
pub(super) fn open_active(
    storage: &dyn Storage,
    dir: &Path,
    base_offset: u64,
    options: &LogOptions,
    synced: Option<Claim>,
) -> Result<Segment, StoreError> {
    let (segment, bytes, contents) = open_files(storage, dir, base_offset)?;
    let (IndexContents::Sealed { mut entries, .. } | IndexContents::Open { mut entries }) =
        contents;
    entries.retain(|e| u64::from(e.position) < bytes);
    let max = options.record_bytes_max;
    let mut window = Window::new(
        segment.file.as_ref(),
        &segment.path,
        bytes,
        SCAN_CHUNK_BYTES,
    );
    // An entry may point at data that did not survive a crash (the index is written
    // after the segment, but neither order nor durability is promised): drop entries
    // until one points at the record it names.
    while let Some(last) = entries.last() {
        let due = base_offset + u64::from(last.relative_offset);
        match window.decode_at(u64::from(last.position), max)? {
            crate::record::Decoded::Record { record, .. } if record.offset == due => break,
            _ => entries.pop(),
        };
    }
    let start = index::floor(&entries, u32::MAX);
    let mut meta = SegmentMeta {
        entries,
        end_offset: base_offset + u64::from(start.relative_offset),
        bytes: u64::from(start.position),
        unflushed_bytes: 0,
        last_timestamp_ms: 0,
    };
    let end = scan_into(&mut window, &mut meta, base_offset, options)?;
    if let ScanEnd::Damaged { position, reason } = end {
        debug_assert_eq!(
            position, meta.bytes,
            "the scan ends after the last good record"
        );
        // Checked before the zeros: a zeroed record the mark says was durable is rot,
        // never an end.
        if let Some(claim) = synced.filter(|claim| position < claim.segment_bytes) {
            return Err(mark::rotten(
                &segment.path,
                position,
                reason,
                meta.end_offset,
                claim,
            ));
        }
        if segment::zeros_to_limit(&mut window, position)? {
            // Preallocated zeros: the records end here, cleanly. They are cut off all
            // the same (the sync below makes it stick), so an open segment holds only
            // records, as before preallocation; the writer's next rounds zero-fill again.
            tracing::debug!(path = %segment.path.display(), position, "cutting preallocated zeros");
        } else {
            check_torn_tail(
                &segment,
                &mut window,
                position,
                reason,
                meta.end_offset,
                max,
            )?;
        }
    } else if let Some(claim) = synced.filter(|claim| meta.bytes < claim.segment_bytes) {
        return Err(mark::cut_short(
            &segment.path,
            meta.bytes,
            meta.end_offset,
            claim,
        ));
    }
    // After a process crash the tail may still sit in the page cache, unsynced; one sync
    // now makes everything readers are about to see durable, and makes the cut stick.
    let claimed = synced.map_or(0, |claim| claim.segment_bytes);
    rewrite_unclaimed_tail(&segment, claimed, meta.bytes)?;
    let path = &segment.path;
    segment.file.sync().map_err(io_error("fdatasync", path))?;
    rewrite_open_index(&segment, &meta.entries)?;
    *segment.meta.lock() = meta;
    Ok(segment)
}

/// Writes the active segment's records past what the mark claims (`claimed`) once more,
/// and its length (`end`: a torn tail or preallocated zeros past it are cut), so that the
/// sync after this makes durable what recovery read, or fails.
///
/// Without it a restart after a fail-stop could confirm what never reached the disk: after
/// a failed writeback Linux may keep pages readable that it marked clean and will not
/// write (and a failed sync may lose a truncation the same way), so this process reads
/// records (or a length) that a power cut would not keep, and a sync of clean pages
/// succeeds. A roll would then seal a segment whose zeros past its records, or its missing
/// records, show up as damage after the next power cut (simulation seed 45 found this).
/// Rewriting costs only what the mark does not cover: after a clean close, nothing; after
/// a crash, what was written since the last sync.
fn rewrite_unclaimed_tail(segment: &Segment, claimed: u64, end: u64) -> Result<(), StoreError> {
    let path = &segment.path;
    let mut chunk = Vec::new();
    let mut at = claimed.min(end);
    while at < end {
        let bytes = (end - at).min(SCAN_CHUNK_BYTES as u64) as usize;
        chunk.resize(bytes, 0);
        segment
            .file
            .read_at(&mut chunk, at)
            .map_err(io_error("read", path))?;
        segment
            .file
            .write_at(&chunk, at)
            .map_err(io_error("write", path))?;
        at += bytes as u64;
    }
    segment
        .file
        .set_len(end)
        .map_err(io_error("truncate", path))
}

/// Decides whether damage at `position` of the active segment is a torn tail (the caller
/// cuts it off and syncs).
fn check_torn_tail(
    segment: &Segment,
    window: &mut Window<'_>,
    position: u64,
    reason: Damage,
    due_offset: u64,
    payload_bytes_max: u32,
) -> Result<(), StoreError> {
    // Even a record that seems cut short is checked: a flipped bit in a length field
    // makes a record look longer than the file.
    if let Some(later) =
        segment::valid_record_after(window, position, due_offset, payload_bytes_max)?
    {
        return Err(StoreError::Corrupt {
            path: segment.path.clone(),
            position,
            reason: format!(
                "{reason} (offset {due_offset} due); a valid record follows at byte {later}, \
                 so this is damage to written data, not a torn tail"
            ),
        });
    }
    tracing::warn!(
        path = %segment.path.display(), position, %reason,
        "truncating the torn tail of the active segment"
    );
    Ok(())
}
