//! Compaction of the groups log: copying old dead letters forward so that their
//! segments can go.
//!
//! A dead letter's payload lives in the record that dead-lettered it (and a redriven
//! message's in the same record until it is finished). A checkpoint can delete groups-log
//! segments only below the oldest record still named, so without compaction one old dead
//! letter would keep every later segment. Before such a checkpoint takes its snapshot, it
//! re-appends a `DeadLetterCopy` of each named payload outside the active segment, waits
//! until the copies are durable, and then, under each group's lock, points the group at
//! its copies (a reader sees the old record or the copy, both valid and holding the same
//! bytes). The checkpoint that follows names only the copies, and deletes the old
//! segments only after it is durable: a crash before then reopens from the old
//! checkpoint, whose records are all still there (replay skips copies).
//!
//! Cost: compaction runs only when the named records hold more than
//! [`COMPACT_SEGMENTS_MIN`] segments and those segments are more than
//! [`COMPACT_GARBAGE_FACTOR`] times the bytes the last compaction copied, so the bytes
//! copied are paid for by at least as many bytes of new groups-log traffic, and the log
//! keeps about `COMPACT_GARBAGE_FACTOR` times the live dead letters' bytes, at least
//! `COMPACT_SEGMENTS_MIN` segments, plus what replay needs. The bytes copied last are
//! kept in memory only; after a reopen the first checkpoint that finds enough segments
//! reads the payloads it would copy and judges by their size instead, so a reopen does
//! not cost a full copy.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::pending::UNWRITTEN_FROM;
use super::set::{GroupSet, GroupSlot};
use super::transition::GroupTransition;
use super::GroupId;
use crate::StoreError;

/// Compact only when the records that dead letters name span more than this many
/// groups-log segments (the active one included).
pub const COMPACT_SEGMENTS_MIN: usize = 4;

/// Compact only when the segments those records span hold more than this many times the
/// bytes the previous compaction copied (an estimate of the live dead letters' bytes).
pub const COMPACT_GARBAGE_FACTOR: u64 = 2;

/// What `compaction_copied_bytes` holds until the first look at compaction after the set
/// was opened: the bytes copied by the last compaction, which a reopen forgets, are then
/// estimated by reading what would be copied (see `compact_dead_letters`).
pub(super) const COPIED_BYTES_UNKNOWN: u64 = u64::MAX;

/// A record that holds a payload still needed: whose group, and which message.
#[derive(Debug, Clone, Copy)]
struct Pinned {
    group: GroupId,
    offset: u64,
}

impl GroupSet {
    /// Copies forward the payloads that pin old groups-log segments, if that is due (see
    /// the module docs), and points the groups at the copies. Called by a checkpoint,
    /// before its snapshot, with checkpoints serialised.
    ///
    /// # Errors
    ///
    /// I/O errors reading the old records or writing the copies (the set is then
    /// fail-stop: the log may hold part of the copies), fail-stop.
    pub(super) fn compact_dead_letters(&self) -> Result<(), StoreError> {
        let segments = self.log.segments();
        let Some(active) = segments.last() else {
            return Ok(());
        };
        let slots = self.slots();
        let pinned = pinned_below(&slots, active.base_offset);
        let Some((&lowest, _)) = pinned.first_key_value() else {
            return Ok(());
        };
        let spanned: Vec<_> = segments.iter().filter(|s| s.end_offset > lowest).collect();
        let spanned_bytes: u64 = spanned.iter().map(|segment| segment.bytes).sum();
        let copied_before = self.compaction_copied_bytes.load(Ordering::Relaxed);
        let known = copied_before != COPIED_BYTES_UNKNOWN;
        let not_worth =
            |copied: u64| spanned_bytes <= copied.saturating_mul(COMPACT_GARBAGE_FACTOR);
        if spanned.len() <= COMPACT_SEGMENTS_MIN || (known && not_worth(copied_before)) {
            return Ok(());
        }
        let Some(copies) = self.read_copies(&pinned)? else {
            return Ok(());
        };
        let copied: u64 = copies.iter().map(|copy| copy.len() as u64).sum();
        if !known {
            // The first look since the set was opened, which forgot what the last
            // compaction copied: what one would copy now stands in for it, so a reopen
            // does not cost a copy of every dead letter.
            self.compaction_copied_bytes
                .store(copied, Ordering::Relaxed);
            if not_worth(copied) {
                return Ok(());
            }
        }
        let written = self
            .write_records(&copies)
            .inspect_err(|error| self.fail(error))?;
        let copy_offsets = written.iter().flat_map(|range| range.clone());
        let moved: BTreeMap<u64, u64> = pinned.keys().copied().zip(copy_offsets).collect();
        assert_eq!(moved.len(), pinned.len(), "a copy per pinned record");
        if let Some(last) = written.last() {
            self.wait_durable(last.end)?;
        }
        point_at_copies(&slots, &moved);
        self.compaction_copied_bytes
            .store(copied, Ordering::Relaxed);
        tracing::debug!(
            topic = ?self.topic_dir,
            copies = copies.len(),
            copied_bytes = copied,
            "groups log compacted"
        );
        Ok(())
    }

    /// The `DeadLetterCopy` transitions, encoded, for every `pinned` record; `None` if one
    /// of them is damaged.
    ///
    /// # Errors
    ///
    /// I/O errors reading the records.
    fn read_copies(
        &self,
        pinned: &BTreeMap<u64, Pinned>,
    ) -> Result<Option<Vec<Vec<u8>>>, StoreError> {
        let mut copies = Vec::with_capacity(pinned.len());
        for (&record, pin) in pinned {
            let payload = match self.dead_letter_record(record, pin.offset) {
                Ok(payload) => payload,
                // A damaged record pins its segments whatever is copied, so copying the
                // others would only be repeated at every checkpoint: leave all as is
                // (the damaged dead letter reports `Corrupt` when read).
                Err(error @ StoreError::Corrupt { .. }) => {
                    tracing::error!(topic = ?self.topic_dir, %error, "groups log not compacted");
                    return Ok(None);
                }
                Err(error) => return Err(error),
            };
            let copy = GroupTransition::DeadLetterCopy {
                id: pin.group,
                offset: pin.offset,
                payload,
            };
            copies.push(copy.encode());
        }
        Ok(Some(copies))
    }
}

/// Every record below `below` that a live group's dead letter or unfinished redriven
/// message names, by groups-log offset.
fn pinned_below(slots: &[Arc<GroupSlot>], below: u64) -> BTreeMap<u64, Pinned> {
    let mut pinned = BTreeMap::new();
    for slot in slots {
        let entry = slot.entry.lock();
        if entry.deleted {
            continue;
        }
        let dead = entry
            .state
            .dead_letters()
            .iter()
            .map(|dead| dead.offset)
            .zip(entry.dead_letter_records.iter().copied());
        let redriven = entry
            .redriven_records
            .iter()
            .map(|(&offset, &record)| (offset, record));
        for (offset, record) in dead.chain(redriven) {
            // Placeholders exist only while a transaction holds the lock; never copied.
            if record < below && record < UNWRITTEN_FROM {
                let group = slot.id;
                pinned.insert(record, Pinned { group, offset });
            }
        }
    }
    pinned
}

/// Points every group's dead letters and redriven messages whose records `moved` maps
/// at the copies, one group's lock at a time.
fn point_at_copies(slots: &[Arc<GroupSlot>], moved: &BTreeMap<u64, u64>) {
    for slot in slots {
        let mut entry = slot.entry.lock();
        // A dead letter redriven or purged meanwhile keeps its record (or is gone);
        // the map finds it either way.
        for record in entry.dead_letter_records.iter_mut() {
            *record = moved.get(record).copied().unwrap_or(*record);
        }
        for record in entry.redriven_records.values_mut() {
            *record = moved.get(record).copied().unwrap_or(*record);
        }
    }
}
