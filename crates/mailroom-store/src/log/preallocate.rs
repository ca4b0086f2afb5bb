//! Preallocation: the active segment is zero-filled ahead of its records, so that a
//! record written and synced inside the zeroed area overwrites blocks that are already
//! allocated and written, and its `fdatasync` has no file metadata to commit.
//!
//! An append changes the file's size, so on ext4 each `fdatasync` after one also commits
//! the inode (a journal commit); an overwrite of written blocks does not (measured with
//! `dd` on the benchmark disk, 1 KiB `O_DSYNC` writes: 6,600 to 7,200 appends/s against
//! 11,700 overwrites/s).
//!
//! The rules (also in `docs/storage.md`, "Preallocated zeros"):
//! - Once the active segment holds [`LogOptions::preallocate_bytes`] of records (or
//!   64 KiB, if that is less) and less than half of `preallocate_bytes` of zeros are left
//!   past them, a sync round writes another
//!   `preallocate_bytes` of zeros after the file's end (never past
//!   [`LogOptions::segment_bytes_max`]), under the writer lock and before its
//!   `fdatasync`, which then makes them durable with the round's records. No extra sync,
//!   and so no extra failure to handle: a failed `fdatasync` cuts the zeros with the
//!   unsynced records (`Shared::fail_stop_cutting`).
//! - The zeros are not records: every reader stops at the segment's record bytes
//!   (`SegmentMeta::bytes`), and recovery ends the records where a zero tail begins
//!   (`recovery/active.rs`). A roll cuts them off before it syncs the segment it seals.
//! - A failed zero write is only logged: zeros past the records are harmless, however
//!   many of them reached the file (a roll cuts whatever did), and the records' own
//!   writes report a disk that is full or failing. The next try waits for another
//!   `preallocate_bytes` of records.
//!
//! [`LogOptions::preallocate_bytes`]: super::LogOptions::preallocate_bytes
//! [`LogOptions::segment_bytes_max`]: super::LogOptions::segment_bytes_max

use super::writer::Writer;
use super::Shared;

/// Zeros are written once the active segment holds `preallocate_bytes` of records or this
/// many, whichever is less: a groups log grows by some 50 bytes per change, so without the
/// cap it would wait for some 20,000 changes, while a log that never holds this much never
/// pays for zeros.
pub(crate) const PREALLOCATE_AFTER_BYTES_MAX: u64 = 64 << 10;

impl Shared {
    /// Tops up the zeros past the active segment's records if fewer than half a
    /// `preallocate_bytes` are left: so they stay between a half and one and a half of it
    /// ahead, and are written once per `preallocate_bytes` of records. Called by a sync
    /// round with the writer lock held, after the buffered records went out, before the
    /// round's `fdatasync`.
    pub(crate) fn preallocate(&self, writer: &mut Writer) {
        let step = self.options.preallocate_bytes;
        let active = &writer.active;
        let (bytes, unflushed) = {
            let meta = active.meta.lock();
            (meta.bytes, meta.unflushed_bytes)
        };
        debug_assert_eq!(unflushed, 0, "the round flushed the buffer first");
        let from = writer.allocated_bytes.max(bytes);
        let wanted = step > 0
            && bytes >= step.min(PREALLOCATE_AFTER_BYTES_MAX)
            && bytes >= writer.preallocate_after_bytes
            && from < bytes + step / 2;
        let to = from
            .saturating_add(step)
            .min(self.options.segment_bytes_max);
        if !wanted || to <= from {
            return;
        }
        let zeros = vec![0; usize::try_from(to - from).expect("capped by the segment size")];
        match active.file.write_at(&zeros, from) {
            Ok(()) => writer.allocated_bytes = to,
            Err(error) => {
                tracing::warn!(
                    path = %active.path.display(), %error,
                    "could not preallocate the active segment; appending instead"
                );
                writer.preallocate_after_bytes = bytes + step;
                // A write that failed part way may have grown the file all the same: a
                // roll must still find every byte past the records to cut.
                let grown = active.file.len().unwrap_or(to);
                writer.allocated_bytes = writer.allocated_bytes.max(grown);
            }
        }
    }
}
