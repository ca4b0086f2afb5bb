//! What one group-commit round does to the files: write out the buffer, sync the active
//! segment, note what became durable (see `commit.rs` for who runs rounds and when).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::mark::Claim;
use super::{Shared, SyncPolicy};
use crate::StoreError;

impl Shared {
    /// Writes out the writer's buffered records, then syncs the active segment. Every
    /// record below the end noted before the call was written before this takes the
    /// writer lock, so it is in the buffer flushed here, in this segment's file, or in an
    /// older segment, which its roll synced (a roll holds the writer lock throughout).
    ///
    /// Then it writes the synced mark (one small `pwrite`, not synced: see `mark.rs`) with
    /// what this sync made durable, before any waiter is answered: so after a process
    /// crash every confirmed record lies inside the mark, and recovery reads damage there
    /// as rot, not as a torn tail. It adds no `fdatasync` to the round.
    pub(super) fn sync_active(&self) -> Result<(), StoreError> {
        let (segment, claim) = {
            let mut writer = self.writer.lock();
            if let Err(error) = self.flush_pending(&mut writer) {
                // Records confirmed under a relaxed policy stay: no cut then.
                self.fail_stop_cutting(&writer, &error, None);
                return Err(error);
            }
            // Before the sync, so the sync below makes the new zeros durable too.
            self.preallocate(&mut writer);
            let active = Arc::clone(&writer.active);
            let claim = Claim::of(&active);
            (active, claim)
        };
        if let Err(error) = self.segment_syncs.sync(&segment) {
            // Under Always the records of this round (and any written since) are cut
            // before their waiters learn of the failure; see `fail_stop_cutting`.
            let writer = self.writer.lock();
            self.fail_stop_cutting(&writer, &error, None);
            return Err(error);
        }
        self.note_synced_by_round(claim)?;
        // Rounds run one at a time, so claims are written in order. A failure only
        // leaves an older (still true) claim: the data is durable, so it fails nothing.
        if let Err(error) = self.mark.lock().write(claim) {
            tracing::warn!(%error, "could not write the synced mark");
        }
        Ok(())
    }

    /// After a round's sync returned: records its claim as what a fail-stop cut keeps,
    /// unless the log failed meanwhile. Both under the writer lock, which every cut holds
    /// (`fail_stop_cutting`), because the sync ran without it: a roll or write that
    /// failed during the sync may already have cut this round's records from the file
    /// (the sync then returns success for a file without them), and one that fails after
    /// this must find them in `synced` or it cuts records about to be confirmed.
    fn note_synced_by_round(&self, claim: Claim) -> Result<(), StoreError> {
        let _writer = self.writer.lock();
        self.check_not_failed()?;
        let mut synced = self.synced.lock();
        if synced.base_offset == claim.base_offset && claim.segment_bytes > synced.segment_bytes {
            *synced = claim;
        }
        Ok(())
    }

    /// Under [`SyncPolicy::Always`], readers see only durable records.
    pub(super) fn publish_synced(&self, end: u64) {
        if self.options.sync == SyncPolicy::Always {
            self.visible_end.fetch_max(end, Ordering::AcqRel);
        }
    }
}
