//! Reading the log: one record by offset, and the range of offsets readers may see.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;

use super::segment::ReadOutcome;
use super::Log;
use crate::StoreError;

/// One record read back from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Its offset.
    pub offset: u64,
    /// The timestamp the appender passed.
    pub timestamp_ms: u64,
    /// Its payload (after the metadata block, if it has one).
    pub payload: Bytes,
    /// Its metadata block, with the block's length field (record format 2, see
    /// `crate::record`); `None` for a record written without one.
    pub metadata: Option<Bytes>,
}

impl Log {
    /// Reads one record; `Ok(None)` if `offset` is before [`Log::start`] (deleted) or at or
    /// after [`Log::end`].
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] if the record fails its checks; [`StoreError::Io`] if the
    /// read fails.
    ///
    /// # Example
    /// ```
    /// # use std::{path::Path, sync::Arc};
    /// # use mailroom_store::log::{Log, LogOptions};
    /// # use mailroom_store::storage::SimStorage;
    /// let log = Log::open(Arc::new(SimStorage::new()), Path::new("/l"), LogOptions::default())?;
    /// log.append(&[b"x"], 5)?;
    /// let record = log.read(0)?.unwrap();
    /// assert_eq!((record.timestamp_ms, &record.payload[..]), (5, &b"x"[..]));
    /// assert!(log.read(1)?.is_none());
    /// # Ok::<(), mailroom_store::StoreError>(())
    /// ```
    pub fn read(&self, offset: u64) -> Result<Option<Record>, StoreError> {
        if offset >= self.end() {
            return Ok(None);
        }
        let segment = {
            let segments = self.shared.segments.read();
            let after = segments.partition_point(|s| s.base_offset <= offset);
            match after.checked_sub(1) {
                Some(i) => Arc::clone(&segments[i]),
                None => return Ok(None), // deleted by retention
            }
        };
        let options = &self.shared.options;
        let chunk_bytes = (options.index_interval_bytes as usize)
            .saturating_add(4096)
            .min(1 << 20);
        let max = options.record_bytes_max;
        match segment.read(offset, max, chunk_bytes)? {
            ReadOutcome::Record(record) => return Ok(Some(record)),
            ReadOutcome::BadIndexEntry(entry) => {
                tracing::warn!(
                    path = %segment.index_path.display(), offset,
                    relative_offset = entry.relative_offset, position = entry.position,
                    "an index entry does not point at its record: rebuilding the index"
                );
            }
        }
        self.shared.rebuild_index(&segment)?;
        match segment.read(offset, max, chunk_bytes)? {
            ReadOutcome::Record(record) => Ok(Some(record)),
            // A rebuilt index points at records it has just read; only a file changing
            // under the log gets here.
            ReadOutcome::BadIndexEntry(entry) => Err(StoreError::Corrupt {
                path: segment.path.clone(),
                position: u64::from(entry.position),
                reason: format!(
                    "reading offset {offset}: the rebuilt index does not match the segment"
                ),
            }),
        }
    }

    /// The oldest retained offset.
    pub fn start(&self) -> u64 {
        self.shared.segments.read()[0].base_offset
    }

    /// The next offset to be assigned: with [`SyncPolicy::Always`], every offset below it
    /// is durable; otherwise every offset below it has been written.
    ///
    /// [`SyncPolicy::Always`]: super::SyncPolicy::Always
    pub fn end(&self) -> u64 {
        self.shared.visible_end.load(Ordering::Acquire)
    }
}
