//! Polls of a topic's groups, single or batch, as one transaction each (see `pending.rs`):
//! every delivery a batch makes is planned, applied and staged under the group's lock,
//! written with one log write, and answered after one wait for durability.
//!
//! A batch is planned by `mailroom::group::plan_batch`, the planner the in-memory
//! `mailroom::topic::Topic::poll_batch` calls too (here each step is staged for the
//! transaction's write as it is applied): due expiries first, then the consumer's own
//! deliveries in flight (redriven first, then by offset), then new ones until `max` or
//! the group has nothing more (idle, full or waiting). A single poll is a batch of one,
//! which is exactly the library's poll: the consumer's first owned delivery, else a new
//! one.
//!
//! Retention with `keep_unconsumed` off can delete messages a group has not finished.
//! The group then skips to the oldest retained message (a `Moved` transition, which also
//! drops deliveries of deleted messages), and a poll that finds its message deleted under
//! it starts over.

use bytes::Bytes;
use mailroom::group::{
    plan_batch, plan_batch_new, BatchEnd, BatchHome, BatchPoll, Change, DeliveryId, GroupState,
    NackOptions, NewDelivery, Offer, PollStep, WindowScan,
};
use mailroom::topic::{Delivery, Message};

use super::keys::KeyReader;
use super::pending::{Pending, Staged};
use super::set::{GroupSet, GroupSlot};
use super::transition::GroupTransition;
use super::GroupEntry;
use crate::log::Log;
use crate::{MessageDelivery, PollScope, StoreError};

/// How often a poll starts over when retention deletes its message under it (only
/// possible with `keep_unconsumed` off) before giving up.
const POLL_RETRIES_MAX: usize = 8;

/// The most deliveries a batch reserves room for up front; larger batches grow.
const BATCH_PREALLOCATED_MAX: usize = 256;

impl GroupSet {
    /// Polls up to `max` (at least 1, already checked) deliveries of `group` as
    /// `consumer`: its own in flight, then new ones (with [`PollScope::New`], new ones
    /// only), in one transaction, staged (the deliveries may be handed out once the
    /// groups log is durable below the written end; a single poll is a batch of one).
    /// Each delivery carries its message as read, once.
    ///
    /// # Errors
    ///
    /// `UnknownGroup`, write errors, fail-stop. Deferred in the outcome: `InvalidArgument`
    /// if retention keeps deleting the next message under the poll, read errors.
    pub fn poll_batch(
        &self,
        messages: &Log,
        group: &str,
        consumer: Option<&str>,
        max: usize,
        scope: PollScope,
    ) -> Result<Staged<Vec<MessageDelivery>>, StoreError> {
        self.stage_transaction(messages, group, |slot, entry, pending, now_ms| {
            let batch = Batch {
                slot,
                consumer,
                max,
                scope,
                bytes_max: self.poll_batch_bytes_max,
                now_ms,
            };
            self.poll_staged(messages, entry, pending, &batch)
        })
    }

    /// Nacks each run of `nacks` (its deliveries, with its options, checked already),
    /// then acks each of `acks`, then polls up to `max` (at least 1, already checked)
    /// deliveries of `group` as `consumer`, in ONE transaction: what `settle_batch` and
    /// `poll_batch` answer one after the other, with one write and one wait for
    /// durability, and the slots the settlements free refilled by the poll.
    ///
    /// # Errors
    ///
    /// As [`poll_batch`](Self::poll_batch).
    #[allow(clippy::too_many_arguments)] // the group call's own arguments, as its callers hold them
    pub fn settle_then_poll_batch(
        &self,
        messages: &Log,
        group: &str,
        nacks: &[(&[DeliveryId], NackOptions)],
        acks: &[DeliveryId],
        consumer: Option<&str>,
        max: usize,
        scope: PollScope,
    ) -> Result<Staged<crate::SettledThenPolled<Message<Bytes>>>, StoreError> {
        self.stage_transaction(messages, group, |slot, entry, pending, now_ms| {
            let mut nacked = Vec::with_capacity(nacks.len());
            for (ids, options) in nacks {
                let run =
                    self.settle_staged(messages, slot, entry, pending, ids, Some(options), now_ms)?;
                nacked.push(run);
            }
            let acked = self.settle_staged(messages, slot, entry, pending, acks, None, now_ms)?;
            let batch = Batch {
                slot,
                consumer,
                max,
                scope,
                bytes_max: self.poll_batch_bytes_max,
                now_ms,
            };
            let polled = self.poll_staged(messages, entry, pending, &batch)?;
            let acked = acked.into_iter().map(|result| result.map(drop)).collect();
            Ok((nacked, (acked, polled)))
        })
    }

    /// The body of a batch poll inside a transaction: skips what retention deleted, then
    /// collects, starting over (a bounded number of times) if a message vanishes under it.
    fn poll_staged(
        &self,
        messages: &Log,
        entry: &mut GroupEntry,
        pending: &mut Pending,
        batch: &Batch<'_>,
    ) -> Result<Vec<MessageDelivery>, StoreError> {
        for _ in 0..POLL_RETRIES_MAX {
            let start = messages.start();
            if entry.state.position() < start {
                // Retention (with keep_unconsumed off) deleted messages this group
                // had not finished: it skips to the oldest one kept.
                let moved = GroupTransition::Moved {
                    id: batch.slot.id,
                    position: start,
                };
                self.stage(entry, pending, moved);
            }
            if let Some(deliveries) = self.collect(messages, entry, pending, batch)? {
                return Ok(deliveries);
            }
        }
        Err(StoreError::InvalidArgument {
            reason: format!(
                "group {:?}: retention kept deleting the next message",
                batch.slot.name
            ),
        })
    }

    /// One try at a batch, planned by `mailroom::group::plan_batch`: `None` if a message
    /// was deleted under it (start over; the deliveries made so far stay staged and
    /// owned, so the next try returns them). Stops before a payload that would take the
    /// batch past `bytes_max` (never before the first delivery): an owned delivery left
    /// out stays in flight for the next poll, a new one is not made.
    fn collect(
        &self,
        messages: &Log,
        entry: &mut GroupEntry,
        pending: &mut Pending,
        batch: &Batch<'_>,
    ) -> Result<Option<Vec<MessageDelivery>>, StoreError> {
        let poll = BatchPoll {
            consumer: batch.consumer,
            max: batch.max,
            log_end: messages.end(),
            now_ms: batch.now_ms,
        };
        let mut home = StagedBatch {
            set: self,
            messages,
            batch,
            entry,
            pending,
            deliveries: Vec::with_capacity(batch.max.min(BATCH_PREALLOCATED_MAX)),
            bytes: ByteBudget::new(batch.bytes_max),
        };
        let end = match batch.scope {
            PollScope::All => plan_batch(&mut home, &poll)?,
            PollScope::New => plan_batch_new(&mut home, &poll)?,
        };
        Ok(match end {
            BatchEnd::Done => Some(home.deliveries),
            BatchEnd::Vanished => None,
        })
    }

    /// The message at `offset` for a delivery; `None` if retention deleted it (start
    /// over).
    fn message(
        &self,
        messages: &Log,
        entry: &GroupEntry,
        offset: u64,
    ) -> Result<Option<Message<Bytes>>, StoreError> {
        match self.delivered_message(messages, entry, offset)? {
            Some(message) => Ok(Some(message)),
            None if offset >= messages.start() => Err(StoreError::Corrupt {
                path: self.topic_dir.join("messages"),
                position: offset,
                reason: "a retained message could not be found".into(),
            }),
            None => Ok(None),
        }
    }
}

/// A batch poll's home in the store: each change is staged for the transaction's write
/// (and applied by staging), each payload read from the log.
struct StagedBatch<'a> {
    set: &'a GroupSet,
    messages: &'a Log,
    batch: &'a Batch<'a>,
    entry: &'a mut GroupEntry,
    pending: &'a mut Pending,
    deliveries: Vec<MessageDelivery>,
    bytes: ByteBudget,
}

impl StagedBatch<'_> {
    /// Reads the message of `id` and adds the delivery if it fits; `take` runs first
    /// (to stage a new delivery), only if it does.
    fn offer(&mut self, id: DeliveryId, take: impl FnOnce(&mut Self)) -> Result<Offer, StoreError> {
        // A record read with its key just before is taken from there (see `keys.rs`);
        // a redriven message's payload comes from its dead letter, never from the log.
        let stashed = match self.entry.redriven_records.contains_key(&id.offset) {
            true => None,
            false => self.entry.keys.take_record(id.offset),
        };
        let message = match stashed {
            Some(record) => self.set.message_of(record)?,
            None => match self.set.message(self.messages, self.entry, id.offset)? {
                Some(message) => message,
                None => return Ok(Offer::Vanished),
            },
        };
        if !self.bytes.take(&message.payload) {
            return Ok(Offer::Declined);
        }
        take(self);
        self.deliveries.push(delivery(id, message));
        Ok(Offer::Taken)
    }
}

impl BatchHome for StagedBatch<'_> {
    type Error = StoreError;

    fn state(&self) -> &GroupState {
        &self.entry.state
    }

    fn expire(&mut self, change: Change) -> Result<(), StoreError> {
        let slot = self.batch.slot;
        self.set
            .stage_change(self.messages, slot, self.entry, self.pending, change)
    }

    fn plan_new(&mut self, log_end: u64, now_ms: u64) -> Result<PollStep, StoreError> {
        self.plan_new_scanned(log_end, now_ms, &mut WindowScan::default())
    }

    fn plan_new_scanned(
        &mut self,
        log_end: u64,
        now_ms: u64,
        scan: &mut WindowScan,
    ) -> Result<PollStep, StoreError> {
        let entry = &mut *self.entry;
        entry.keys.forget_below(entry.state.position());
        let mut keys = KeyReader {
            cache: &mut entry.keys,
            messages: self.messages,
            error: None,
        };
        let step = entry
            .state
            .plan_poll_new_scanned(log_end, now_ms, &mut keys, scan);
        match keys.error {
            Some(error) => Err(error),
            None => Ok(step),
        }
    }

    fn owned(&mut self, id: DeliveryId) -> Result<Offer, StoreError> {
        self.offer(id, |_| {})
    }

    fn deliver(&mut self, new: NewDelivery) -> Result<Offer, StoreError> {
        self.offer(new.id, |home| {
            let change = new.change(home.batch.consumer);
            let transition = GroupTransition::event(home.batch.slot.id, change, Bytes::new());
            home.set.stage(home.entry, home.pending, transition);
        })
    }
}

/// What a batch poll asks for.
struct Batch<'a> {
    slot: &'a GroupSlot,
    consumer: Option<&'a str>,
    max: usize,
    scope: PollScope,
    bytes_max: usize,
    now_ms: u64,
}

/// The payload bytes a batch may still hand out; the first payload always fits.
struct ByteBudget {
    taken: usize,
    payloads: usize,
    max: usize,
}

impl ByteBudget {
    fn new(max: usize) -> ByteBudget {
        ByteBudget {
            taken: 0,
            payloads: 0,
            max,
        }
    }

    /// Counts `payload` in if it fits (or is the first, even an empty one), else
    /// refuses it.
    fn take(&mut self, payload: &Bytes) -> bool {
        let taken = self.taken.saturating_add(payload.len());
        if self.payloads > 0 && taken > self.max {
            return false;
        }
        self.taken = taken;
        self.payloads += 1;
        true
    }
}

fn delivery(id: DeliveryId, message: Message<Bytes>) -> MessageDelivery {
    Delivery {
        offset: id.offset,
        attempt: id.attempt,
        message,
    }
}
