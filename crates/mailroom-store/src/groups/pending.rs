//! How a group transition is made durable: group commit without holding the group's lock
//! across the `fdatasync`.
//!
//! An operation on a group runs as a *transaction* ([`GroupSet::transact`]): under the
//! group's lock it plans each change with `mailroom::group`, applies it to the in-memory
//! state at once (so the next change of a batch is planned on the state the previous one
//! left) and stages its record in [`Pending`]; then it writes every staged record with
//! one [`Log::write`](crate::log::Log::write) (one `pwrite`), notes how far the groups
//! log is written, and releases the lock. Only then does it wait for that point to be
//! durable ([`Log::wait_durable`](crate::log::Log::wait_durable)), so transitions of the
//! same group (several consumers, `max_in_flight` > 1) and of different groups share one
//! `fdatasync`. The hot calls stop after the write ([`GroupSet::stage_transaction`]) and
//! leave the wait to a `crate::Deferred`, which hands the answer out only after it.
//!
//! # Why this is still exact
//!
//! - **A caller is answered only after its records are durable**: the wait comes before
//!   the answer, and a failed wait is the answer.
//! - **Nothing observed is ever taken back.** Between the apply and the sync, other
//!   callers can see the new state, but every operation (including the pure reads: info,
//!   position, dead letters, counters, in-flight lists) notes the log's *written* end
//!   while it still holds the lock and waits for it before answering. Every record whose
//!   effect it saw was written before that point, so it is durable before the answer
//!   leaves; a power cut either keeps the answer's whole cause or happens before anyone
//!   was told.
//! - **Failures stop everything.** A failed write or sync makes the group set fail-stop
//!   (as before): the in-memory state may then be ahead of the disk, so from then on every
//!   group operation, reads included, is refused with `FailStopped`; nothing more is
//!   confirmed and a restart recovers from the disk.
//! - **Records are read back only once durable.** Under `SyncPolicy::Always` the log shows
//!   readers only durable records; reading a dead letter's record waits for it first.
//! - **Checkpoints cover only durable state.** A snapshot notes, under each group's lock,
//!   the written end as the point its state covers, and the log is synced up to at least
//!   there before the checkpoint file is written (see `set.rs`).
//!
//! # Offsets of staged records
//!
//! A dead letter's entry remembers the offset of the record that holds its payload, which
//! is known only after the write. A staged dead letter gets a placeholder offset at or
//! above [`UNWRITTEN_FROM`] (`UNWRITTEN_FROM + index in the batch`), replaced under the
//! same lock as soon as the write returns; nobody else can see it meanwhile, and if the
//! write fails the set is fail-stop, so no placeholder is ever read or checkpointed.

use std::ops::Range;

use mailroom::group::Change;

use super::set::{GroupSet, GroupSlot};
use super::transition::GroupTransition;
use super::GroupEntry;
use crate::log::{Log, APPEND_BYTES_MAX, APPEND_RECORDS_MAX};
use crate::record::encoded_bytes;
use crate::StoreError;

/// The first placeholder offset of a staged record (see the module docs). Real groups-log
/// offsets stay far below: a log would need 2^63 records to reach it.
pub(super) const UNWRITTEN_FROM: u64 = 1 << 63;

/// Records planned and applied under a group's lock but not yet written.
#[derive(Debug, Default)]
pub(super) struct Pending {
    records: Vec<Vec<u8>>,
    /// Whether a staged record dead-letters (so a placeholder offset needs replacing).
    dead_letters: bool,
}

/// A transaction whose records are written but maybe not yet durable: what it answered,
/// to be handed out only once the groups log is durable below `written_end`.
#[derive(Debug)]
pub(crate) struct Staged<R> {
    /// What the operation answered (its error too, which may reflect staged changes).
    pub(crate) outcome: Result<R, StoreError>,
    /// The groups log's written end when the group's lock was released.
    pub(crate) written_end: u64,
}

impl GroupSet {
    /// Runs `operation` on `group` as one transaction (see the module docs) and waits for
    /// it: [`stage_transaction`](Self::stage_transaction), then
    /// [`finish`](Self::finish).
    ///
    /// # Errors
    ///
    /// As `stage_transaction`, then what the wait or `operation` answers.
    pub(super) fn transact<R, F>(
        &self,
        messages: &Log,
        group: &str,
        operation: F,
    ) -> Result<R, StoreError>
    where
        F: FnOnce(&GroupSlot, &mut GroupEntry, &mut Pending, u64) -> Result<R, StoreError>,
    {
        let staged = self.stage_transaction(messages, group, operation)?;
        self.finish(messages, staged)
    }

    /// The part of a transaction that does not wait for the disk: under the group's lock,
    /// due lease expiries and then `operation` stage their records, which are written
    /// together (into the log's buffer or the page cache, no `fdatasync`). Returns what
    /// `operation` answered, which the caller may hand out only once everything below
    /// [`Staged::written_end`] is durable. Staged records are written even when
    /// `operation` fails part way, since their changes are applied already (a batch's
    /// earlier items, an expiry before a refused ack), so its error is deferred too.
    ///
    /// # Errors
    ///
    /// `UnknownGroup`, `FailStopped`, and I/O errors of the write (which make the set
    /// fail-stop): nothing is left to wait for then.
    pub(super) fn stage_transaction<R, F>(
        &self,
        messages: &Log,
        group: &str,
        operation: F,
    ) -> Result<Staged<R>, StoreError>
    where
        F: FnOnce(&GroupSlot, &mut GroupEntry, &mut Pending, u64) -> Result<R, StoreError>,
    {
        let slot = self.slot(group)?;
        let now_ms = self.clock.now_ms();
        let mut entry = self.lock_live(&slot)?;
        let mut pending = Pending::default();
        let outcome = self
            .stage_expiries(messages, &slot, &mut entry, &mut pending, now_ms)
            .and_then(|()| operation(&slot, &mut entry, &mut pending, now_ms));
        self.flush(&mut entry, pending)?;
        // Noted under the lock: every record whose effect this operation saw, its own
        // included, lies below this point.
        let written_end = self.log.written_end();
        Ok(Staged {
            outcome,
            written_end,
        })
    }

    /// Waits (blocking) until `staged` is durable, then answers it.
    ///
    /// # Errors
    ///
    /// I/O errors of the wait and `FailStopped` (either makes the set fail-stop), else
    /// what the operation answered.
    pub(super) fn finish<R>(&self, messages: &Log, staged: Staged<R>) -> Result<R, StoreError> {
        let durable = self.log.wait_durable(staged.written_end);
        self.after_wait(&durable);
        if durable.is_ok() && self.checkpoint_due() {
            self.maybe_checkpoint(messages);
        }
        durable.and(staged.outcome)
    }

    /// What every wait for a transaction's durability is followed by: a failed wait makes
    /// the set fail-stop (memory may be ahead of the disk).
    pub(crate) fn after_wait(&self, durable: &Result<(), StoreError>) {
        if let Err(error) = durable {
            self.fail(error);
        }
    }

    /// Stages every lease expiry due at `now_ms`, so nobody sees an expired delivery as
    /// owned, and a restart can never bring one back.
    fn stage_expiries(
        &self,
        messages: &Log,
        slot: &GroupSlot,
        entry: &mut GroupEntry,
        pending: &mut Pending,
        now_ms: u64,
    ) -> Result<(), StoreError> {
        while let Some(change) = entry.state.plan_expiry(now_ms) {
            self.stage_change(messages, slot, entry, pending, change)?;
        }
        Ok(())
    }

    /// Stages `change` with a copy of the message if it dead-letters (so the dead letter
    /// outlives retention).
    pub(super) fn stage_change(
        &self,
        messages: &Log,
        slot: &GroupSlot,
        entry: &mut GroupEntry,
        pending: &mut Pending,
        change: Change,
    ) -> Result<(), StoreError> {
        let payload = match change.delivery() {
            // The message can only be gone already if retention ran with
            // keep_unconsumed off while it was in flight; the dead letter keeps none then.
            Some(id) if change.dead_letters() => self
                .payload(messages, entry, id.offset)?
                .unwrap_or_default(),
            _ => bytes::Bytes::new(),
        };
        self.stage(
            entry,
            pending,
            GroupTransition::event(slot.id, change, payload),
        );
        Ok(())
    }

    /// Applies `transition` (an event or move of `entry`'s group, planned on its current
    /// state) and stages its record.
    ///
    /// # Panics
    ///
    /// If the transition does not follow from the state (a planning bug), or if it redrives
    /// or purges after a staged dead letter (the placeholder bookkeeping assumes staged
    /// dead letters stay at the end of the list; no operation does that).
    pub(super) fn stage(
        &self,
        entry: &mut GroupEntry,
        pending: &mut Pending,
        transition: GroupTransition,
    ) {
        let placeholder = UNWRITTEN_FROM + pending.records.len() as u64;
        if let GroupTransition::Event { change, .. } = &transition {
            assert!(
                !(pending.dead_letters
                    && matches!(change, Change::Redriven { .. } | Change::Purged { .. })),
                "a redrive or purge is staged after a staged dead letter"
            );
            pending.dead_letters |= change.dead_letters();
        }
        entry
            .apply(&transition, placeholder)
            .expect("a planned transition follows from the state it was planned on");
        pending.records.push(transition.encode());
    }

    /// Writes the staged records and gives staged dead letters their real offsets.
    pub(super) fn flush(&self, entry: &mut GroupEntry, pending: Pending) -> Result<(), StoreError> {
        if pending.records.is_empty() {
            return Ok(());
        }
        let written = self.write_records(&pending.records).inspect_err(|error| {
            // The changes are applied in memory already: memory is now ahead of the
            // disk, so nothing more may be confirmed, whatever the error.
            self.fail(error);
        })?;
        if pending.dead_letters {
            let offset_of = |at: u64| {
                let mut index = at - UNWRITTEN_FROM;
                for range in &written {
                    let len = range.end - range.start;
                    if index < len {
                        return range.start + index;
                    }
                    index -= len;
                }
                unreachable!("placeholder {at} beyond the staged records")
            };
            // Staged dead letters are the newest, so their placeholders form the tail.
            for at in entry.dead_letter_records.iter_mut().rev() {
                if *at < UNWRITTEN_FROM {
                    break;
                }
                *at = offset_of(*at);
            }
        }
        Ok(())
    }

    /// Writes encoded records in as few log writes as the log's limits allow: one, unless
    /// the batch holds more than `APPEND_RECORDS_MAX` records or `APPEND_BYTES_MAX` bytes
    /// (only possible with huge batches of dead letters). Returns the written ranges.
    pub(super) fn write_records(&self, records: &[Vec<u8>]) -> Result<Vec<Range<u64>>, StoreError> {
        self.check_writable()?;
        let now_ms = self.clock.now_ms();
        let mut written = Vec::with_capacity(1);
        let mut rest = records;
        while !rest.is_empty() {
            let mut bytes = 0u64;
            let mut take = 0;
            for record in rest.iter().take(APPEND_RECORDS_MAX) {
                let record_bytes = encoded_bytes(record.len()) as u64;
                if take > 0 && bytes + record_bytes > APPEND_BYTES_MAX {
                    break;
                }
                bytes += record_bytes;
                take += 1;
            }
            let (chunk, after) = rest.split_at(take);
            let slices: Vec<&[u8]> = chunk.iter().map(Vec::as_slice).collect();
            let range = self.log.write(&slices, now_ms)?;
            assert!(
                range.end <= UNWRITTEN_FROM,
                "groups log offsets reach the placeholders"
            );
            self.note_records(chunk.len());
            written.push(range);
            rest = after;
        }
        Ok(written)
    }

    /// Waits until every groups-log record below `end` is durable (shared `fdatasync`).
    ///
    /// # Errors
    ///
    /// I/O errors and `FailStopped`; either makes the set fail-stop.
    pub(super) fn wait_durable(&self, end: u64) -> Result<(), StoreError> {
        self.log
            .wait_durable(end)
            .inspect_err(|error| self.fail(error))
    }
}
