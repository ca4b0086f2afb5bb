//! Reading a group's dead letters back: all of them, or one page by offset.
//!
//! A dead letter's payload lives in the groups log (in the record that dead-lettered it,
//! or a compaction's copy), so reading it costs a log read. Which letters to read is
//! chosen under the group's lock, from the in-memory state; the payloads are read after
//! the lock is released. A page reads only its own payloads, however many dead letters
//! the group holds.
//!
//! # Why the chosen records are still there
//!
//! A compacting checkpoint may point the group at copies while its payloads are being
//! read, and then delete the segments that held the records chosen. So a read pins the
//! groups log's segments: it holds `segment_deletion` shared from before it chooses until
//! the last payload is read, and a checkpoint deletes segments only holding it
//! exclusively. Every record a read chose is therefore readable until it is done; there
//! is nothing to retry. The read's own transaction (due lease expiries) may make a
//! checkpoint due; that checkpoint runs after the pin is released, since it would wait
//! for the pin itself.

use std::collections::BinaryHeap;

use bytes::Bytes;
use mailroom::group::{DeadLetterEntry, DeadLetterNote};
use mailroom::topic::{DeadLetter, DeadLetterInfo};

use super::set::GroupSet;
use super::GroupEntry;
use crate::log::Log;
use crate::StoreError;

/// Dead letters read back, with their payloads.
type Letters = Vec<DeadLetterInfo<Bytes>>;

/// Dead letters chosen under the group's lock, payloads not read yet: each one's entry,
/// note and the groups-log offset of the record holding its payload.
struct Chosen {
    entries: Vec<DeadLetterEntry>,
    notes: Vec<DeadLetterNote>,
    records: Vec<u64>,
}

impl GroupSet {
    /// `group`'s dead letters with their payloads, read back from the groups log.
    ///
    /// # Errors
    ///
    /// `UnknownGroup`, I/O errors, corruption.
    pub fn dead_letters(
        &self,
        messages: &Log,
        group: &str,
    ) -> Result<Vec<DeadLetter<Bytes>>, StoreError> {
        Ok(self
            .dead_letter_info(messages, group)?
            .into_iter()
            .map(|dead| DeadLetter {
                offset: dead.offset,
                attempts: dead.attempts,
                message: dead.message,
            })
            .collect())
    }

    /// `group`'s dead letters with reasons, times and payloads.
    ///
    /// # Errors
    ///
    /// `UnknownGroup`, I/O errors, corruption.
    pub fn dead_letter_info(
        &self,
        messages: &Log,
        group: &str,
    ) -> Result<Vec<DeadLetterInfo<Bytes>>, StoreError> {
        let (letters, _, ()) = self.read_chosen(messages, group, usize::MAX, |entry| {
            let chosen = Chosen {
                entries: entry.state.dead_letters().to_vec(),
                notes: entry.state.dead_letter_notes().to_vec(),
                records: entry.dead_letter_records.clone(),
            };
            (chosen, ())
        })?;
        Ok(letters)
    }

    /// One page of `group`'s dead letters: those with offset `>= from`, by ascending
    /// offset (ties, which the state machine never makes, in the order they were made),
    /// at most `limit` (already checked to be at least 1), and the offset of the first
    /// dead letter after the page (`None` if there is none). Only the page's payloads are
    /// read.
    ///
    /// The page also stops before the dead letter that would take its payloads past
    /// `bytes_max` (but always holds at least one, however large), and then `next` names
    /// that letter, so paging goes on where the cap cut.
    ///
    /// # Errors
    ///
    /// `UnknownGroup`, I/O errors, corruption.
    pub fn dead_letter_page(
        &self,
        messages: &Log,
        group: &str,
        page: (u64, usize),
        bytes_max: usize,
    ) -> Result<(Vec<DeadLetterInfo<Bytes>>, Option<u64>), StoreError> {
        let (from, limit) = page;
        let (letters, cut, next) = self.read_chosen(messages, group, bytes_max, |entry| {
            choose_page(entry, from, limit)
        })?;
        Ok((letters, cut.or(next)))
    }

    /// Chooses dead letters with `choose` under the group's lock (after writing due
    /// expiries, as every read does), then reads their payloads with the groups log's
    /// segments pinned (see the module docs); returns them with what else `choose`
    /// answered, once every record the choice saw is durable. Reading stops before the
    /// letter that would take the payloads past `bytes_max` (never before the first),
    /// whose offset is returned too.
    fn read_chosen<T>(
        &self,
        messages: &Log,
        group: &str,
        bytes_max: usize,
        choose: impl FnOnce(&GroupEntry) -> (Chosen, T),
    ) -> Result<(Letters, Option<u64>, T), StoreError> {
        let (read, durable) = {
            let _pinned = self.segment_deletion.read();
            let staged = self.stage_transaction(messages, group, |_, entry, pending, _| {
                // A due expiry staged just now may have dead-lettered: write it first,
                // so the choice names records with real offsets.
                self.flush(entry, std::mem::take(pending))?;
                Ok(choose(entry))
            })?;
            let durable = self.log.wait_durable(staged.written_end);
            self.after_wait(&durable);
            let durable_ok = durable.is_ok();
            let read = durable.and(staged.outcome).and_then(|(chosen, extra)| {
                let (letters, cut) = self.read_dead_letters(chosen, bytes_max)?;
                Ok((letters, cut, extra))
            });
            (read, durable_ok)
        };
        if durable && self.checkpoint_due() {
            self.maybe_checkpoint(messages);
        }
        read
    }

    /// Reads the chosen payloads in order until the next would take their sum past
    /// `bytes_max`; returns what was read and, if it stopped early, the offset of the
    /// first letter left out. The letter that crosses the cap is read before it is
    /// weighed (the state keeps no payload lengths), so a read holds at most one payload
    /// more than the cap, and that one only briefly.
    fn read_dead_letters(
        &self,
        chosen: Chosen,
        bytes_max: usize,
    ) -> Result<(Letters, Option<u64>), StoreError> {
        let Chosen {
            entries,
            notes,
            records,
        } = chosen;
        let mut letters = Vec::with_capacity(entries.len());
        let mut bytes = 0usize;
        for ((dead, note), &record) in entries.into_iter().zip(notes).zip(&records) {
            let message = self.dead_letter_record(record, dead.offset)?;
            bytes = bytes.saturating_add(message.len());
            if bytes > bytes_max && !letters.is_empty() {
                return Ok((letters, Some(dead.offset)));
            }
            letters.push(DeadLetterInfo {
                offset: dead.offset,
                attempts: dead.attempts,
                reason: note.reason,
                at_ms: note.at_ms,
                message,
            });
        }
        Ok((letters, None))
    }
}

/// The page of [`GroupSet::dead_letter_page`] within `entry`, and its `next`.
///
/// The state keeps dead letters in the order they were made, which is not offset order
/// when several deliveries are in flight. Sorting them all for every page would cost
/// O(n log n) under the group's lock; instead a max-heap keeps the `limit + 1` smallest
/// (offset, position in the list) pairs at or after `from`: O(n log limit) time and
/// O(limit) memory. The position breaks ties as a stable sort by offset would.
fn choose_page(entry: &GroupEntry, from: u64, limit: usize) -> (Chosen, Option<u64>) {
    debug_assert!(limit >= 1, "the caller checks the page size");
    let dead = entry.state.dead_letters();
    let keep = limit.saturating_add(1);
    let mut smallest = BinaryHeap::with_capacity(keep.min(dead.len()));
    for (index, letter) in dead.iter().enumerate() {
        let key = (letter.offset, index);
        if letter.offset < from {
            continue;
        }
        if smallest.len() < keep {
            smallest.push(key);
        } else if smallest.peek().is_some_and(|&largest| key < largest) {
            smallest.pop();
            smallest.push(key);
        }
    }
    let mut page = smallest.into_sorted_vec();
    let next = if page.len() > limit {
        page.pop().map(|(offset, _)| offset)
    } else {
        None
    };
    let notes = entry.state.dead_letter_notes();
    let chosen = Chosen {
        entries: page.iter().map(|&(_, index)| dead[index]).collect(),
        notes: page
            .iter()
            .map(|&(_, index)| notes[index].clone())
            .collect(),
        records: page
            .iter()
            .map(|&(_, index)| entry.dead_letter_records[index])
            .collect(),
    };
    (chosen, next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mailroom::group::{GroupSnapshot, GroupState};
    use proptest::prelude::*;

    /// A group whose dead letters have `offsets`, in that (creation) order, each kept in
    /// groups-log record `1000 + offset`.
    fn entry_with(offsets: &[u64]) -> GroupEntry {
        let dead = offsets
            .iter()
            .map(|&offset| DeadLetterEntry {
                offset,
                attempts: 1,
            })
            .collect();
        let position = offsets.iter().max().map_or(0, |&last| last + 1);
        let snapshot = GroupSnapshot::basic(position, 0, false, 1, dead);
        let mut entry = GroupEntry::new(GroupState::from_snapshot(snapshot).unwrap());
        entry.dead_letter_records = offsets.iter().map(|&offset| 1000 + offset).collect();
        entry
    }

    proptest! {
        // Proves a page is exactly what sorting every dead letter by offset and slicing
        // gives (the server's old answer), its records match its entries, and `next` is
        // the offset of the first letter left out.
        #[test]
        fn page_is_the_sorted_slice(
            offsets in proptest::sample::subsequence((0..200u64).collect::<Vec<_>>(), 0..60)
                .prop_shuffle(),
            from in 0..220u64,
            limit in 1..70usize,
        ) {
            let entry = entry_with(&offsets);
            let (chosen, next) = choose_page(&entry, from, limit);
            let mut sorted: Vec<u64> = offsets.iter().copied().filter(|&o| o >= from).collect();
            sorted.sort_unstable();
            let got: Vec<u64> = chosen.entries.iter().map(|dead| dead.offset).collect();
            prop_assert_eq!(&got[..], &sorted[..sorted.len().min(limit)]);
            prop_assert_eq!(next, sorted.get(limit).copied());
            let records: Vec<u64> = got.iter().map(|offset| 1000 + offset).collect();
            prop_assert_eq!(chosen.records, records);
            prop_assert_eq!(chosen.notes.len(), got.len());
        }
    }
}
