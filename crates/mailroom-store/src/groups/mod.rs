//! Durable consumer groups: the group state machine of `mailroom::group`, persisted as
//! transitions in the records of a topic's groups log, with checkpoints so opening replays only a tail.
//!
//! Every transition goes plan → apply → record → wait: under the group's own lock the
//! state machine plans each change, it is applied and its record staged, and all of an
//! operation's records are written to the groups log at once; then, with the lock
//! released, the operation waits until they are durable per the sync policy (concurrent
//! operations, on one group or many, share one `fdatasync`) and only then answers. See
//! `pending.rs` for why nothing unconfirmed is ever observed. Opening loads the last
//! checkpoint and replays the records after it through the same `apply`, which re-checks
//! each one.

pub mod checkpoint;
mod compaction;
mod dead_letters;
mod delivery;
pub mod keys;
mod pending;
mod poll;
mod reader;
mod replay;
mod seek_pause;
mod set;
pub mod transition;

pub(crate) use pending::Staged;
pub use set::GroupSet;

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use mailroom::group::{Change, GroupError, GroupState};

use transition::GroupTransition;

/// A group's id within its topic. Ids are handed out in order and never reused, so a
/// record can name its group in 8 bytes even if names are reused after a delete.
pub type GroupId = u64;

/// One group's state as the store keeps it in memory.
#[derive(Debug, Clone)]
pub struct GroupEntry {
    /// The state machine.
    pub state: GroupState,
    /// For each dead letter in `state`, the groups-log offset of its record (which holds
    /// the payload).
    pub dead_letter_records: Vec<u64>,
    /// For each redriven message still unfinished, by offset, the groups-log offset of
    /// the record that dead-lettered it: its payload, which outlives retention.
    pub redriven_records: BTreeMap<u64, u64>,
    /// Set when the group is deleted, so a handle that raced the delete is refused.
    pub deleted: bool,
    /// The key hashes of the window, for ordering keys (memory only, see `keys.rs`).
    pub keys: keys::KeyCache,
}

impl GroupEntry {
    /// A fresh group.
    pub fn new(state: GroupState) -> Self {
        GroupEntry {
            state,
            dead_letter_records: Vec::new(),
            redriven_records: BTreeMap::new(),
            deleted: false,
            keys: keys::KeyCache::default(),
        }
    }

    /// Applies an `Event` or `Moved` transition found in the record at groups-log offset
    /// `offset`. Both the
    /// live path and replay come through here, so a replayed history is checked by the
    /// same rules that produced it.
    ///
    /// # Errors
    ///
    /// [`GroupError`] if the transition does not follow from the current state; nothing
    /// changes then.
    ///
    /// # Panics
    ///
    /// If given a `Created` or `Deleted` transition, which change the registry instead, or a
    /// `DeadLetterCopy`, which changes nothing.
    pub fn apply(&mut self, transition: &GroupTransition, offset: u64) -> Result<(), GroupError> {
        match transition {
            GroupTransition::Event { change, .. } => {
                let kept = match change {
                    Change::Redriven { .. } | Change::Purged { .. } => {
                        Some(self.split_dead(change))
                    }
                    _ => None,
                };
                self.state.apply_change(change)?;
                match change {
                    Change::Acked(id) => {
                        self.redriven_records.remove(&id.offset);
                    }
                    // A failure that is retried leaves the slot (and a redriven one still
                    // needs its dead letter's copy: retention may have deleted the message).
                    Change::Failed { id, .. } if change.dead_letters() => {
                        self.redriven_records.remove(&id.offset);
                        self.dead_letter_records.push(offset);
                    }
                    Change::Failed { .. } => {}
                    Change::Redriven { .. } | Change::Purged { .. } => {
                        let (kept, taken) = kept.expect("split above");
                        self.dead_letter_records = kept;
                        if matches!(change, Change::Redriven { .. }) {
                            // After a seek back a dead letter's offset may not be revived
                            // (the group delivers it anyway): keep records of live slots only.
                            let live: BTreeSet<u64> =
                                self.state.slots().map(|slot| slot.offset).collect();
                            self.redriven_records
                                .extend(taken.into_iter().filter(|(at, _)| live.contains(at)));
                        }
                    }
                    // Everything unfinished is gone, redriven messages included.
                    Change::Seeked { .. } => self.redriven_records.clear(),
                    Change::Delivered { .. }
                    | Change::Touched { .. }
                    | Change::Paused { .. }
                    | Change::Resumed => {}
                }
                Ok(())
            }
            GroupTransition::Moved { position, .. } => {
                self.state.skip_to(*position)?;
                let live: BTreeSet<u64> = self.state.slots().map(|slot| slot.offset).collect();
                self.redriven_records.retain(|at, _| live.contains(at));
                Ok(())
            }
            GroupTransition::Created { .. }
            | GroupTransition::Deleted { .. }
            | GroupTransition::DeadLetterCopy { .. } => {
                panic!("registry transitions and copies change no group's state")
            }
        }
    }

    /// The dead-letter records split by whether `change` takes their dead letters: (kept
    /// records, (offset, record) of those taken).
    fn split_dead(&self, change: &Change) -> (Vec<u64>, Vec<(u64, u64)>) {
        let mut kept = Vec::new();
        let mut taken = Vec::new();
        for (entry, &record) in self
            .state
            .dead_letters()
            .iter()
            .zip(&self.dead_letter_records)
        {
            if change.takes_dead_letter(entry) {
                taken.push((entry.offset, record));
            } else {
                kept.push(record);
            }
        }
        (kept, taken)
    }
}

/// The payload of message `offset` kept by `transition`, which must be the one that
/// dead-lettered it or a compaction's copy of that payload.
fn dead_letter_payload(transition: GroupTransition, offset: u64) -> Option<Bytes> {
    match transition {
        GroupTransition::Event {
            change, payload, ..
        } if change.dead_letters() => Some(payload),
        GroupTransition::DeadLetterCopy {
            offset: copied,
            payload,
            ..
        } if copied == offset => Some(payload),
        _ => None,
    }
}
