//! The log's side of retention: the list of segments a policy decides on, and deleting
//! whole segments from the front.

use std::sync::Arc;

use super::recovery::io_error;
use super::Log;
use crate::StoreError;

/// What retention needs to know about one segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentInfo {
    /// The offset of its first record.
    pub base_offset: u64,
    /// One past the offset of its last record.
    pub end_offset: u64,
    /// Its size in bytes.
    pub bytes: u64,
    /// The timestamp of its last record (0 if empty).
    pub last_timestamp_ms: u64,
}

impl Log {
    /// The segments, oldest first, for retention decisions. The last is the active one.
    pub fn segments(&self) -> Vec<SegmentInfo> {
        let end = self.end();
        let segments = self.shared.segments.read();
        segments
            .iter()
            .map(|segment| {
                let meta = segment.meta.lock();
                SegmentInfo {
                    base_offset: segment.base_offset,
                    end_offset: meta.end_offset.min(end).max(segment.base_offset),
                    bytes: meta.bytes,
                    last_timestamp_ms: meta.last_timestamp_ms,
                }
            })
            .collect()
    }

    /// Deletes whole segments whose records all lie below `offset`, oldest first, never
    /// the active segment; fsyncs the directory after each, so a crash leaves no gap.
    /// Returns how many were deleted.
    ///
    /// # Errors
    /// [`StoreError::Io`] if a removal or the directory sync fails (a failed sync makes
    /// the log fail-stop); [`StoreError::FailStopped`] once it is.
    ///
    /// # Example
    /// ```
    /// # use std::{path::Path, sync::Arc};
    /// use mailroom_store::log::{Log, LogOptions};
    /// use mailroom_store::storage::SimStorage;
    ///
    /// let options = LogOptions { segment_bytes_max: 100, ..LogOptions::default() };
    /// let log = Log::open(Arc::new(SimStorage::new()), Path::new("/l"), options)?;
    /// for i in 0..10u64 {
    ///     log.append(&[&[0u8; 40]], i)?; // 64 bytes each: one record per segment
    /// }
    /// assert_eq!(log.segments().len(), 10);
    /// assert_eq!(log.segments()[3].end_offset, 4);
    /// // Segments 0..=3 hold only offsets below 4.
    /// assert_eq!(log.delete_segments_before(4)?, 4);
    /// assert_eq!((log.start(), log.end()), (4, 10));
    /// assert!(log.read(3)?.is_none());
    /// # Ok::<(), mailroom_store::StoreError>(())
    /// ```
    pub fn delete_segments_before(&self, offset: u64) -> Result<usize, StoreError> {
        let shared = &self.shared;
        // Holding the writer lock keeps a roll from racing the segment list.
        let _writer = shared.writer.lock();
        shared.check_not_failed()?;
        let mut deleted = 0;
        loop {
            let oldest = {
                let segments = shared.segments.read();
                if segments.len() <= 1 || segments[0].meta.lock().end_offset > offset {
                    return Ok(deleted);
                }
                Arc::clone(&segments[0])
            };
            // Out of the list before the file goes: a reader that then fails to read the
            // file already sees `start()` past it, and knows the records moved or went
            // (rather than seeing a retained offset that cannot be read: corruption).
            shared.segments.write().remove(0);
            shared
                .storage
                .remove_file(&oldest.path)
                .map_err(io_error("remove", &oldest.path))?;
            deleted += 1;
            let index_path = &oldest.index_path;
            shared
                .storage
                .remove_file(index_path)
                .map_err(io_error("remove", index_path))?;
            shared
                .storage
                .sync_dir(&shared.dir)
                .map_err(io_error("fsync directory", &shared.dir))
                .inspect_err(|error| shared.fail_stop(error))?;
        }
    }
}
