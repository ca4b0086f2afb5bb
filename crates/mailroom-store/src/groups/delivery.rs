//! The delivery operations of a topic's groups: poll, ack, nack (all kinds), touch,
//! redrive, purge, and the reads. Each plans with `mailroom::group`, makes the change
//! durable, then applies it, under the group's own lock (see `set.rs` for locking).
//!
//! Time comes from the store's clock. Before any operation on a group, every lease that
//! has run out by now is expired, and each expiry is written to the groups log like any
//! other transition, so nobody observes its effect before it is durable: a restart can
//! never bring back an expired delivery, nor dead-letter an expired message twice.

use std::ops::Range;

use bytes::Bytes;
use mailroom::group::{Change, DeliveryId, GroupState, NackOptions, PollStep};
use mailroom::topic::{DeadLetter, DeadLetterInfo, Delivery, GroupInfo, Nack, TopicError};
use parking_lot::MutexGuard;

use super::record::GroupRecord;
use super::set::{GroupSet, GroupSlot};
use super::{dead_letter_payload, GroupEntry};
use crate::log::Log;
use crate::StoreError;

/// How often a poll re-plans when retention deletes its message under it (only possible
/// with `keep_unconsumed` off) before giving up.
const POLL_RETRIES_MAX: usize = 8;

impl GroupSet {
    /// Locks `slot`'s group and makes every lease expiry due now durable and applied.
    fn lock_at<'a>(
        &self,
        messages: &Log,
        slot: &'a GroupSlot,
        now_ms: u64,
    ) -> Result<MutexGuard<'a, GroupEntry>, StoreError> {
        let mut entry = self.lock_live(slot)?;
        while let Some(change) = entry.state.plan_expiry(now_ms) {
            self.commit_change(messages, slot, &mut entry, change)?;
        }
        Ok(entry)
    }

    /// Makes `change` durable (with a copy of the message if it dead-letters) and applies it.
    fn commit_change(
        &self,
        messages: &Log,
        slot: &GroupSlot,
        entry: &mut GroupEntry,
        change: Change,
    ) -> Result<(), StoreError> {
        let payload = match change.delivery() {
            // The dead letter keeps its own copy, so it outlives retention. The message
            // can only be gone already if retention ran with keep_unconsumed off while it
            // was in flight; it then keeps none.
            Some(id) if change.dead_letters() => self
                .payload(messages, entry, id.offset)?
                .unwrap_or_default(),
            _ => Bytes::new(),
        };
        self.commit(entry, GroupRecord::event(slot.id, change, payload))
    }

    /// The payload of the message at `offset`: from the record that dead-lettered it if it
    /// was redriven, else from the message log (`None` if retention deleted it).
    fn payload(
        &self,
        messages: &Log,
        entry: &GroupEntry,
        offset: u64,
    ) -> Result<Option<Bytes>, StoreError> {
        match entry.redriven_records.get(&offset) {
            Some(&record) => self.dead_letter_record(record, offset).map(Some),
            None => Ok(messages.read(offset)?.map(|message| message.payload)),
        }
    }

    fn dead_letter_record(&self, record: u64, offset: u64) -> Result<Bytes, StoreError> {
        self.log
            .read(record)?
            .and_then(|stored| GroupRecord::decode(&stored.payload).ok())
            .and_then(dead_letter_payload)
            .ok_or_else(|| StoreError::Corrupt {
                path: self.log_dir.clone(),
                position: record,
                reason: format!("dead letter of offset {offset} is not readable"),
            })
    }

    /// Polls `group` as `consumer` (`None`: anonymous): the consumer's delivery in flight,
    /// a new attempt, or `None`.
    ///
    /// # Errors
    ///
    /// `UnknownGroup`, I/O errors, fail-stop.
    pub fn poll(
        &self,
        messages: &Log,
        group: &str,
        consumer: Option<&str>,
    ) -> Result<Option<Delivery<Bytes>>, StoreError> {
        let slot = self.slot(group)?;
        let result = self.poll_slot(messages, &slot, consumer);
        self.maybe_checkpoint(messages);
        result
    }

    fn poll_slot(
        &self,
        messages: &Log,
        slot: &GroupSlot,
        consumer: Option<&str>,
    ) -> Result<Option<Delivery<Bytes>>, StoreError> {
        let now_ms = self.clock.now_ms();
        let mut entry = self.lock_at(messages, slot, now_ms)?;
        for _ in 0..POLL_RETRIES_MAX {
            let start = messages.start();
            if entry.state.position() < start {
                // Retention (with keep_unconsumed off) deleted messages this group had
                // not finished: it skips to the oldest one kept.
                let moved = GroupRecord::Moved {
                    id: slot.id,
                    position: start,
                };
                self.commit(&mut entry, moved)?;
            }
            let (change, delivery) = match entry.state.plan_poll(messages.end(), now_ms, consumer) {
                PollStep::Idle | PollStep::Full | PollStep::Wait { .. } => return Ok(None),
                PollStep::Expire(change) => {
                    self.commit_change(messages, slot, &mut entry, change)?;
                    continue;
                }
                PollStep::InFlight(delivery) => (None, delivery),
                PollStep::Deliver(new) => (Some(new.change(consumer)), new.id),
            };
            let Some(message) = self.payload(messages, &entry, delivery.offset)? else {
                if delivery.offset >= messages.start() {
                    return Err(StoreError::Corrupt {
                        path: self.topic_dir.join("messages"),
                        position: delivery.offset,
                        reason: "a retained message could not be found".into(),
                    });
                }
                continue;
            };
            if let Some(change) = change {
                self.commit(
                    &mut entry,
                    GroupRecord::event(slot.id, change, Bytes::new()),
                )?;
            }
            return Ok(Some(Delivery {
                offset: delivery.offset,
                attempt: delivery.attempt,
                message,
            }));
        }
        Err(StoreError::InvalidArgument {
            reason: format!(
                "group {:?}: retention kept deleting the next message",
                slot.name
            ),
        })
    }

    /// Acks `delivery` in `group`.
    ///
    /// # Errors
    ///
    /// `UnknownGroup`, `NotOwned`, I/O errors, fail-stop.
    pub fn ack(&self, messages: &Log, group: &str, delivery: DeliveryId) -> Result<(), StoreError> {
        self.settle(messages, group, delivery, None).map(drop)
    }

    /// Nacks, releases or rejects `delivery` in `group` per `options` (already checked).
    ///
    /// # Errors
    ///
    /// `UnknownGroup`, `NotOwned`, I/O errors, fail-stop.
    pub fn nack(
        &self,
        messages: &Log,
        group: &str,
        delivery: DeliveryId,
        options: &NackOptions,
    ) -> Result<Nack, StoreError> {
        self.settle(messages, group, delivery, Some(options))
    }

    fn not_owned(group: &str) -> impl FnOnce(mailroom::group::NotOwned) -> StoreError + '_ {
        move |source| {
            StoreError::Topic(TopicError::NotOwned {
                group: group.to_owned(),
                source,
            })
        }
    }

    fn settle(
        &self,
        messages: &Log,
        group: &str,
        delivery: DeliveryId,
        nack: Option<&NackOptions>,
    ) -> Result<Nack, StoreError> {
        let slot = self.slot(group)?;
        let result = (|| {
            let now_ms = self.clock.now_ms();
            let mut entry = self.lock_at(messages, &slot, now_ms)?;
            let planned = match nack {
                Some(options) => entry.state.plan_nack(delivery, options, now_ms),
                None => entry.state.plan_ack(delivery, now_ms),
            };
            let change = planned.map_err(Self::not_owned(group))?;
            let dead = change.dead_letters();
            self.commit_change(messages, &slot, &mut entry, change)?;
            Ok(if dead {
                Nack::DeadLettered
            } else {
                Nack::Retry
            })
        })();
        self.maybe_checkpoint(messages);
        result
    }

    /// Extends the lease of `delivery` in `group`.
    ///
    /// # Errors
    ///
    /// `UnknownGroup`, `NotOwned`, I/O errors, fail-stop.
    pub fn touch(
        &self,
        messages: &Log,
        group: &str,
        delivery: DeliveryId,
    ) -> Result<(), StoreError> {
        let slot = self.slot(group)?;
        let result = (|| {
            let now_ms = self.clock.now_ms();
            let mut entry = self.lock_at(messages, &slot, now_ms)?;
            let planned = entry.state.plan_touch(delivery, now_ms);
            if let Some(change) = planned.map_err(Self::not_owned(group))? {
                self.commit_change(messages, &slot, &mut entry, change)?;
            }
            Ok(())
        })();
        self.maybe_checkpoint(messages);
        result
    }

    /// Redrives (or, with `purge`, deletes) `group`'s dead letters in `offsets`; returns
    /// how many.
    ///
    /// # Errors
    ///
    /// `UnknownGroup`, I/O errors, fail-stop.
    pub fn redrive(
        &self,
        messages: &Log,
        group: &str,
        offsets: Range<u64>,
        purge: bool,
    ) -> Result<u64, StoreError> {
        let slot = self.slot(group)?;
        let result = (|| {
            let mut entry = self.lock_at(messages, &slot, self.clock.now_ms())?;
            let before = entry.state.dead_letters().len();
            let planned = if purge {
                entry.state.plan_purge(offsets)
            } else {
                entry.state.plan_redrive(offsets)
            };
            if let Some(change) = planned {
                self.commit_change(messages, &slot, &mut entry, change)?;
            }
            Ok((before - entry.state.dead_letters().len()) as u64)
        })();
        self.maybe_checkpoint(messages);
        result
    }

    /// Runs `read` on `group`'s state after making due expiries durable.
    ///
    /// # Errors
    ///
    /// `UnknownGroup`, I/O errors and fail-stop (from writing an expiry).
    pub fn read<R>(
        &self,
        messages: &Log,
        group: &str,
        read: impl FnOnce(&GroupEntry) -> R,
    ) -> Result<R, StoreError> {
        let slot = self.slot(group)?;
        let entry = self.lock_at(messages, &slot, self.clock.now_ms())?;
        Ok(read(&entry))
    }

    /// Operator information about `group`.
    ///
    /// # Errors
    ///
    /// As [`read`](Self::read).
    pub fn info(&self, messages: &Log, group: &str) -> Result<GroupInfo, StoreError> {
        self.read(messages, group, |entry| {
            let state = &entry.state;
            GroupInfo {
                name: group.to_owned(),
                position: state.position(),
                attempt: state.attempt(),
                in_flight: state.in_flight(),
                max_attempts: state.max_attempts(),
                lag: state.lag(messages.end()),
                dead_letters: state.dead_letters().len() as u64,
            }
        })
    }

    /// `group`'s position.
    ///
    /// # Errors
    ///
    /// As [`read`](Self::read).
    pub fn position(&self, messages: &Log, group: &str) -> Result<u64, StoreError> {
        self.read(messages, group, |entry| entry.state.position())
    }

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
        let (entries, notes, records) = self.read(messages, group, |entry| {
            (
                entry.state.dead_letters().to_vec(),
                entry.state.dead_letter_notes().to_vec(),
                entry.dead_letter_records.clone(),
            )
        })?;
        let mut letters = Vec::with_capacity(entries.len());
        for ((dead, note), record) in entries.into_iter().zip(notes).zip(records) {
            letters.push(DeadLetterInfo {
                offset: dead.offset,
                attempts: dead.attempts,
                reason: note.reason,
                at_ms: note.at_ms,
                message: self.dead_letter_record(record, dead.offset)?,
            });
        }
        Ok(letters)
    }
}

/// The deliveries in flight of `state`, by offset.
pub fn in_flight(state: &GroupState) -> Vec<DeliveryId> {
    state
        .slots()
        .filter(|slot| matches!(slot.phase, mailroom::group::SlotPhase::InFlight { .. }))
        .map(|slot| DeliveryId {
            offset: slot.offset,
            attempt: slot.attempt,
        })
        .collect()
}
