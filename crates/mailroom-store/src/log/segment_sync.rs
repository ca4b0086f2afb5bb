//! The `fdatasync`s that confirm records (a sync round's, a roll's), one at a time, and
//! none after one failed.
//!
//! After a failed writeback Linux may mark the dirty pages clean: they stay readable but
//! never reach the disk, and the error is reported once per open file, so a later (or
//! concurrent) `fdatasync` of the same file returns success without them. A round and a
//! roll sync the same segment through one open file, the round without the writer lock,
//! so before this a roll could sync after (or during) a round's failed sync and confirm
//! records that failure had lost, before the round took the writer lock to fail-stop.
//! Serialising them and refusing every sync after a failure closes that: the failure is
//! known before any other confirming sync can start.
//!
//! A fail-stop cut's sync does not come here: it confirms nothing, and it must run after
//! a failure to make the cut stick.

use parking_lot::Mutex;

use super::recovery::io_error;
use super::segment::Segment;
use crate::StoreError;

/// See the module documentation. Lock order: after the writer lock (a roll holds it).
#[derive(Debug, Default)]
pub(crate) struct SegmentSyncs {
    /// Held during each sync; true once one failed.
    failed: Mutex<bool>,
}

impl SegmentSyncs {
    /// Syncs `segment`'s records, unless an earlier confirming sync of this log failed.
    pub fn sync(&self, segment: &Segment) -> Result<(), StoreError> {
        let mut failed = self.failed.lock();
        if *failed {
            return Err(StoreError::FailStopped {
                reason: "an earlier fdatasync of this log failed, so a later one proves \
                         nothing about the records written before it"
                    .into(),
            });
        }
        let synced = segment
            .file
            .sync()
            .map_err(io_error("fdatasync", &segment.path));
        *failed = synced.is_err();
        synced
    }
}
