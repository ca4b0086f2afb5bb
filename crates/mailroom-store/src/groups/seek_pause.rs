//! Seeking and pausing a topic's groups: each is one transaction (see `pending.rs`), a
//! `Seeked`, `Paused` or `Resumed` record planned with `mailroom::group`, applied and
//! written under the group's lock, answered once durable.

use mailroom::group::{ArgumentError, Change, GroupState};
use mailroom::topic::{StartPosition, TopicError};

use super::set::GroupSet;
use crate::log::Log;
use crate::StoreError;

impl GroupSet {
    /// Moves `group` to `to`, which must lie within the retained log or at its end;
    /// returns the new position.
    ///
    /// # Errors
    ///
    /// `Topic(InvalidArgument)` for an offset outside the retained log (field `offset`),
    /// `UnknownGroup`, I/O errors, fail-stop.
    pub fn seek(&self, messages: &Log, group: &str, to: StartPosition) -> Result<u64, StoreError> {
        // Retention reads the groups' positions and deletes below them while holding
        // `changes`: holding it here too while staging keeps the log's start where it is
        // until the group's new position is in place, so a seek back is never cut from
        // under it. (The wait comes after: it may write a checkpoint, which takes
        // `changes` itself.)
        let changes = self.changes.lock();
        let staged = self.stage_transaction(messages, group, |slot, entry, pending, _now_ms| {
            let (start, end) = (messages.start(), messages.end());
            let position = match to {
                StartPosition::Earliest => start,
                StartPosition::Latest => end,
                StartPosition::Offset(offset) if (start..=end).contains(&offset) => offset,
                StartPosition::Offset(offset) => {
                    return Err(StoreError::Topic(TopicError::InvalidArgument(
                        ArgumentError::OutOfRange {
                            field: "offset",
                            min: start,
                            max: end,
                            got: offset,
                        },
                    )))
                }
            };
            // Staged expiries may have dead-lettered: write them first, as a redrive does.
            self.flush(entry, std::mem::take(pending))?;
            let change = entry.state.plan_seek(position);
            self.stage_change(messages, slot, entry, pending, change)?;
            Ok(position)
        })?;
        drop(changes);
        self.finish(messages, staged)
    }

    /// Applies the change `plan` makes of `group`'s state at the store's time, if any (a
    /// pause or resume); returns whether there was one.
    ///
    /// # Errors
    ///
    /// What `plan` refuses with, `UnknownGroup`, I/O errors, fail-stop.
    pub fn change(
        &self,
        messages: &Log,
        group: &str,
        plan: impl FnOnce(&GroupState, u64) -> Result<Option<Change>, StoreError>,
    ) -> Result<bool, StoreError> {
        self.transact(messages, group, |slot, entry, pending, now_ms| {
            let Some(change) = plan(&entry.state, now_ms)? else {
                return Ok(false);
            };
            self.stage_change(messages, slot, entry, pending, change)?;
            Ok(true)
        })
    }
}
