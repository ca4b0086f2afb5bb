//! The delivery operations of a topic's groups: ack, nack (all kinds, single or batch),
//! touch, redrive, purge, and the reads; polls are in `poll.rs`, reads of dead letters in
//! `dead_letters.rs`. Each runs as one transaction (see `pending.rs`): planned with
//! `mailroom::group`, applied and written under the group's own lock, answered once
//! durable.
//!
//! Time comes from the store's clock. Before any operation on a group, every lease that
//! has run out by now is expired, and each expiry is written to the groups log like any
//! other transition, so nobody observes its effect before it is durable: a restart can
//! never bring back an expired delivery, nor dead-letter an expired message twice.

use std::ops::Range;

use bytes::Bytes;
use mailroom::group::{DeliveryId, NackOptions, NotOwned};
use mailroom::topic::{GroupInfo, Message, Metadata, Nack, TopicError};

use super::pending::{Pending, Staged, UNWRITTEN_FROM};
use super::set::{GroupSet, GroupSlot};
use super::transition::GroupTransition;
use super::{dead_letter_payload, GroupEntry};
use crate::log::{Log, Record};
use crate::message::message_of;
use crate::StoreError;

impl GroupSet {
    /// The payload of the message at `offset`: from the record that dead-lettered it if it
    /// was redriven, else from the message log (`None` if retention deleted it).
    pub(super) fn payload(
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

    /// The message at `offset` for a delivery, with its publish time and metadata, read
    /// once: from the message log (`None` if retention deleted it), or, redriven, with
    /// the payload its dead-letter record kept and the publish time and metadata from the
    /// log while the log still holds it (without them once retention deleted it).
    ///
    /// # Errors
    ///
    /// Read errors; a record whose metadata block does not read (corrupt).
    pub(super) fn delivered_message(
        &self,
        messages: &Log,
        entry: &GroupEntry,
        offset: u64,
    ) -> Result<Option<Message<Bytes>>, StoreError> {
        let Some(&record) = entry.redriven_records.get(&offset) else {
            return messages
                .read(offset)?
                .map(|read| self.message_of(read))
                .transpose();
        };
        let payload = self.dead_letter_record(record, offset)?;
        Ok(Some(match messages.read(offset)? {
            Some(read) => Message {
                payload,
                ..self.message_of(read)?
            },
            None => Message::new(payload, None, Metadata::default()),
        }))
    }

    /// The message of a record read from the message log.
    ///
    /// # Errors
    ///
    /// A metadata block that does not read (corrupt).
    pub(super) fn message_of(&self, record: Record) -> Result<Message<Bytes>, StoreError> {
        let position = record.offset;
        message_of(record).map_err(|reason| StoreError::Corrupt {
            path: self.topic_dir.join("messages"),
            position,
            reason,
        })
    }

    /// The payload kept by the dead-letter record (or copy) at groups-log offset `record`.
    pub(super) fn dead_letter_record(&self, record: u64, offset: u64) -> Result<Bytes, StoreError> {
        debug_assert!(record < UNWRITTEN_FROM, "a staged record is read back");
        if record >= self.log.end() {
            // Written by a transaction that has not seen its sync yet (the log shows only
            // durable records): wait for it. Rare, since the record had to be dead-lettered
            // and redriven within one sync; waiting under a group's lock is fine then.
            self.wait_durable(record + 1)?;
        }
        self.log
            .read(record)?
            .and_then(|stored| GroupTransition::decode(&stored.payload).ok())
            .and_then(|record| dead_letter_payload(record, offset))
            .ok_or_else(|| StoreError::Corrupt {
                path: self.log_dir.clone(),
                position: record,
                reason: format!("dead letter of offset {offset} is not readable"),
            })
    }

    /// Turns a refusal into the `NotOwned` error of a single ack or nack of `group`.
    pub(crate) fn not_owned(group: &str) -> impl FnOnce(NotOwned) -> StoreError + '_ {
        move |source| {
            StoreError::Topic(TopicError::NotOwned {
                group: group.to_owned(),
                source,
            })
        }
    }

    /// Acks (`nack` `None`) or nacks per `nack` (already checked) each of `deliveries` in
    /// order, in one transaction: one write, staged for one wait for durability. Each
    /// result is what a single ack or nack would have answered at that point.
    ///
    /// # Errors
    ///
    /// `UnknownGroup`, write errors, fail-stop. Deferred in the outcome: an I/O error
    /// reading a message (to copy it into a dead letter), after which the deliveries
    /// before it may be settled.
    pub fn settle_batch(
        &self,
        messages: &Log,
        group: &str,
        deliveries: &[DeliveryId],
        nack: Option<&NackOptions>,
    ) -> Result<Staged<Vec<Result<Nack, NotOwned>>>, StoreError> {
        self.stage_transaction(messages, group, |slot, entry, pending, now_ms| {
            self.settle_staged(messages, slot, entry, pending, deliveries, nack, now_ms)
        })
    }

    /// The body of [`settle_batch`](Self::settle_batch) inside a transaction (also the
    /// ack half of an ack-then-poll batch).
    #[allow(clippy::too_many_arguments)] // the transaction's parts, passed through
    pub(super) fn settle_staged(
        &self,
        messages: &Log,
        slot: &GroupSlot,
        entry: &mut GroupEntry,
        pending: &mut Pending,
        deliveries: &[DeliveryId],
        nack: Option<&NackOptions>,
        now_ms: u64,
    ) -> Result<Vec<Result<Nack, NotOwned>>, StoreError> {
        let mut results = Vec::with_capacity(deliveries.len());
        for &delivery in deliveries {
            let planned = match nack {
                Some(options) => entry.state.plan_nack(delivery, options, now_ms),
                None => entry.state.plan_ack(delivery, now_ms),
            };
            results.push(match planned {
                Ok(change) => {
                    let outcome = change.nack_outcome();
                    self.stage_change(messages, slot, entry, pending, change)?;
                    Ok(outcome)
                }
                Err(refused) => Err(refused),
            });
        }
        Ok(results)
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
        self.transact(messages, group, |slot, entry, pending, now_ms| {
            let planned = entry.state.plan_touch(delivery, now_ms);
            if let Some(change) = planned.map_err(Self::not_owned(group))? {
                self.stage_change(messages, slot, entry, pending, change)?;
            }
            Ok(())
        })
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
        self.transact(messages, group, |slot, entry, pending, _now_ms| {
            // An expiry staged just now may have dead-lettered: write it first, so the
            // redrive moves dead letters whose records have real offsets.
            self.flush(entry, std::mem::take(pending))?;
            let before = entry.state.dead_letters().len();
            let planned = if purge {
                entry.state.plan_purge(offsets)
            } else {
                entry.state.plan_redrive(offsets)
            };
            if let Some(change) = planned {
                self.stage_change(messages, slot, entry, pending, change)?;
            }
            Ok((before - entry.state.dead_letters().len()) as u64)
        })
    }

    /// Runs `read` on `group`'s state after making due expiries durable; answers once
    /// every record the state reflects is durable.
    ///
    /// # Errors
    ///
    /// `UnknownGroup`, I/O errors and fail-stop.
    pub fn read<R>(
        &self,
        messages: &Log,
        group: &str,
        read: impl FnOnce(&GroupEntry) -> R,
    ) -> Result<R, StoreError> {
        self.transact(messages, group, |_, entry, pending, _| {
            // A due expiry staged just now may have dead-lettered: write it first, so
            // `read` sees dead letters whose records have real offsets (a read of one
            // still waiting in `pending` would find no record yet).
            self.flush(entry, std::mem::take(pending))?;
            Ok(read(entry))
        })
    }

    /// Runs `read` on `group`'s state as it is in memory now: no expiry is written and
    /// nothing is waited for, so it may reflect changes not yet durable. For hints that
    /// a later transaction re-checks (when a long poll should poll again).
    ///
    /// # Errors
    ///
    /// `UnknownGroup` and fail-stop.
    pub fn peek<R>(
        &self,
        group: &str,
        read: impl FnOnce(&GroupEntry) -> R,
    ) -> Result<R, StoreError> {
        let slot = self.slot(group)?;
        let entry = self.lock_live(&slot)?;
        Ok(read(&entry))
    }

    /// Operator information about `group`.
    ///
    /// # Errors
    ///
    /// As [`read`](Self::read).
    pub fn info(&self, messages: &Log, group: &str) -> Result<GroupInfo, StoreError> {
        let now_ms = self.clock.now_ms();
        self.read(messages, group, |entry| {
            entry.state.info_at(group, messages.end(), now_ms)
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
}
