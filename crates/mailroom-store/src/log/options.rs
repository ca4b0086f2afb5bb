//! How a [`Log`] lays out and syncs its files: [`LogOptions`], [`SyncPolicy`], and the
//! limits they are checked against.
//!
//! [`Log`]: super::Log

use std::time::Duration;

use crate::StoreError;

/// The largest accepted [`LogOptions::segment_bytes_max`]: keeps every position in a
/// segment within the index's 32-bit fields.
pub const SEGMENT_BYTES_LIMIT: u64 = 1 << 30;
/// The largest accepted [`LogOptions::record_bytes_max`].
pub const RECORD_BYTES_LIMIT: u32 = 64 << 20;

/// When an append is made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SyncPolicy {
    /// Every append returns only after an `fdatasync` that covers it (shared by concurrent
    /// appenders: group commit).
    #[default]
    Always,
    /// A background thread syncs every interval, each time another eighth of a segment
    /// (at least 1 MiB) has been written (so that a roll, which syncs the whole segment
    /// with writers held, finds little left to sync), and once more when the log is
    /// dropped. Appends return once written to the OS. A power cut can lose the records
    /// appended in roughly the last interval (plus the time one sync takes); a process
    /// crash loses nothing, since written data is in the OS page cache. Whatever is lost
    /// is a suffix: the log stays gap-free.
    Interval(Duration),
    /// The log syncs only on [`Log::sync`], when it rolls to a new segment, and on a
    /// background thread each time another eighth of a segment (at least 1 MiB) has been
    /// written (so that a roll, which syncs the whole segment with writers held, finds
    /// little left to sync). A power cut can lose every record appended since the last of
    /// those (a suffix of the log); a process crash loses nothing.
    ///
    /// [`Log::sync`]: super::Log::sync
    Never,
}

/// How a [`Log`] lays out and syncs its files.
///
/// [`Log`]: super::Log
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogOptions {
    /// Roll to a new segment when an append would take the active one past this many
    /// bytes (an append is never split, so one larger than this gets a segment of its
    /// own). Default 64 MiB; at most [`SEGMENT_BYTES_LIMIT`].
    pub segment_bytes_max: u64,
    /// Write a sparse index entry at the first record starting at least this many bytes
    /// after the previous entry. A read scans at most about this much. Default 4 KiB.
    pub index_interval_bytes: u32,
    /// When appends are made durable. Default [`SyncPolicy::Always`].
    pub sync: SyncPolicy,
    /// The largest payload accepted, in bytes. Default 16 MiB; at most
    /// [`RECORD_BYTES_LIMIT`]. Reopen a log with a limit at least as large as the one it
    /// was written with: a longer record is read as corrupt.
    pub record_bytes_max: u32,
    /// Zero-fill the active segment this many bytes ahead of its records, once it holds
    /// this many (or 64 KiB, if that is less): a record written and synced inside the
    /// zeroed area changes no file metadata (no size change, so no journal commit per
    /// `fdatasync` on ext4).
    /// A sync round tops the zeros up by this much once less than half of it is left,
    /// never past [`segment_bytes_max`](Self::segment_bytes_max); a roll cuts them off
    /// the sealed segment. Default 1 MiB; 0 turns it off; at most
    /// [`SEGMENT_BYTES_LIMIT`].
    pub preallocate_bytes: u64,
}

impl Default for LogOptions {
    fn default() -> Self {
        LogOptions {
            segment_bytes_max: 64 << 20,
            index_interval_bytes: 4 << 10,
            sync: SyncPolicy::Always,
            record_bytes_max: 16 << 20,
            preallocate_bytes: 1 << 20,
        }
    }
}

impl LogOptions {
    pub(super) fn validate(&self) -> Result<(), StoreError> {
        let invalid = |reason: String| Err(StoreError::InvalidArgument { reason });
        if self.segment_bytes_max == 0 || self.segment_bytes_max > SEGMENT_BYTES_LIMIT {
            return invalid(format!(
                "segment_bytes_max {} is outside 1..={SEGMENT_BYTES_LIMIT}",
                self.segment_bytes_max
            ));
        }
        if self.record_bytes_max > RECORD_BYTES_LIMIT {
            return invalid(format!(
                "record_bytes_max {} exceeds {RECORD_BYTES_LIMIT}",
                self.record_bytes_max
            ));
        }
        if self.preallocate_bytes > SEGMENT_BYTES_LIMIT {
            return invalid(format!(
                "preallocate_bytes {} exceeds {SEGMENT_BYTES_LIMIT}",
                self.preallocate_bytes
            ));
        }
        if self.index_interval_bytes == 0 {
            return invalid("index_interval_bytes must be at least 1".into());
        }
        if let SyncPolicy::Interval(interval) = self.sync {
            if interval.is_zero() {
                return invalid("a sync interval must be longer than zero".into());
            }
        }
        Ok(())
    }
}
