//! One consumer group of an in-memory topic: the shared state machine behind its own lock.
//!
//! Every transition plans with [`GroupState`], fetches the payload from the log, then
//! applies the planned change, all under this group's lock and no other. Lease expiries
//! due at the caller's time are applied first, under the same lock. The payload is
//! cloned before the event is applied, so a panicking `Clone` leaves the group unchanged.
//! A batch (poll, ack or nack of several deliveries) takes the lock once for all of them.

use parking_lot::{Mutex, MutexGuard};

use std::convert::Infallible;
use std::ops::Range;

use super::log::Log;
use super::{DeadLetter, DeadLetterInfo, Delivery, DeliveryId, GroupInfo, Nack, TopicError};
use crate::group::{
    plan_batch, BatchEnd, BatchHome, BatchPoll, Change, GroupState, NackOptions, NewDelivery,
    NotOwned, Offer, PollStep,
};

/// A named group and its state. Shared by the topic's registry and by group handles.
///
/// Aligned to two cache lines (the unit the adjacent-line prefetcher moves) so that two
/// groups allocated side by side never share one: consumers of different groups on
/// different cores then write to disjoint memory.
#[derive(Debug)]
#[repr(align(128))]
pub(crate) struct ConsumerGroup {
    name: Box<str>,
    state: Mutex<Membership>,
}

/// What the group lock protects.
#[derive(Debug)]
struct Membership {
    machine: GroupState,
    /// Set once, by `delete_group`; a deleted group refuses every call, so a handle
    /// that outlives its group cannot act on it.
    deleted: bool,
}

impl ConsumerGroup {
    /// A live group named `name` (already validated by the registry).
    pub(crate) fn new(name: &str, machine: GroupState) -> Self {
        ConsumerGroup {
            name: name.into(),
            state: Mutex::new(Membership {
                machine,
                deleted: false,
            }),
        }
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Marks the group deleted. Later calls on any handle to it get `UnknownGroup`.
    pub(crate) fn mark_deleted(&self) {
        self.state.lock().deleted = true;
    }

    /// Locks the group, refusing if it was deleted.
    #[inline(always)]
    fn lock(&self) -> Result<MutexGuard<'_, Membership>, TopicError> {
        let state = self.state.lock();
        if state.deleted {
            return Err(TopicError::UnknownGroup {
                group: self.name.to_string(),
            });
        }
        Ok(state)
    }

    /// Polls as `consumer` at `now_ms`: expires leases that ran out, then returns the
    /// consumer's delivery in flight, or a new one, or `None`.
    #[inline]
    pub(crate) fn poll<M: Clone>(
        &self,
        log: &Log<M>,
        now_ms: u64,
        consumer: Option<&str>,
    ) -> Result<Option<Delivery<M>>, TopicError> {
        let mut state = self.lock()?;
        loop {
            let (id, new) = match state.machine.plan_poll(log.len(), now_ms, consumer) {
                PollStep::Idle | PollStep::Full | PollStep::Wait { .. } => return Ok(None),
                PollStep::Expire(change) => {
                    apply(&mut state.machine, &change);
                    continue;
                }
                PollStep::InFlight(id) => (id, None),
                PollStep::Deliver(new) => (new.id, Some(new)),
            };
            let message = published(log, id.offset).clone();
            if let Some(new) = new {
                if let Err(error) = state.machine.apply_delivery(new, consumer) {
                    unreachable!("a freshly planned delivery must follow: {error}");
                }
            }
            return Ok(Some(Delivery {
                offset: id.offset,
                attempt: id.attempt,
                message,
            }));
        }
    }

    /// Locks the group and applies every lease expiry due at `now_ms`, so that no caller
    /// sees an expired delivery as owned.
    #[inline(always)]
    fn lock_at(&self, now_ms: u64) -> Result<MutexGuard<'_, Membership>, TopicError> {
        let mut state = self.lock()?;
        while let Some(change) = state.machine.plan_expiry(now_ms) {
            apply(&mut state.machine, &change);
        }
        Ok(state)
    }

    #[inline]
    pub(crate) fn ack(&self, delivery: DeliveryId, now_ms: u64) -> Result<(), TopicError> {
        let mut state = self.lock_at(now_ms)?;
        state
            .machine
            .ack_now(delivery, now_ms)
            .map_err(|source| self.not_owned(source))
    }

    /// Nacks, releases or rejects `delivery`; `options` are already checked.
    #[inline]
    pub(crate) fn nack(
        &self,
        delivery: DeliveryId,
        options: &NackOptions,
        now_ms: u64,
    ) -> Result<Nack, TopicError> {
        let mut state = self.lock_at(now_ms)?;
        let change = state
            .machine
            .plan_nack(delivery, options, now_ms)
            .map_err(|source| self.not_owned(source))?;
        apply(&mut state.machine, &change);
        Ok(change.nack_outcome())
    }

    /// Polls up to `max` deliveries as `consumer` at `now_ms`, under one hold of the lock:
    /// due expiries first, then the consumer's own deliveries in flight, then new ones
    /// until `max` or the group has nothing more to hand out (idle, full or waiting).
    pub(crate) fn poll_batch<M: Clone>(
        &self,
        log: &Log<M>,
        now_ms: u64,
        consumer: Option<&str>,
        max: usize,
    ) -> Result<Vec<Delivery<M>>, TopicError> {
        let mut state = self.lock_at(now_ms)?;
        Ok(poll_locked(&mut state.machine, log, now_ms, consumer, max))
    }

    /// Acks each of `acks` in order, then polls up to `max` deliveries as `consumer`, all
    /// under one hold of the lock: what `ack_batch` followed by `poll_batch` answer, with
    /// nothing from other callers in between (so slots the acks free are refilled here).
    pub(crate) fn ack_then_poll_batch<M: Clone>(
        &self,
        log: &Log<M>,
        now_ms: u64,
        acks: &[DeliveryId],
        consumer: Option<&str>,
        max: usize,
    ) -> Result<AckedThenPolled<M>, TopicError> {
        let mut state = self.lock_at(now_ms)?;
        let acked = acks
            .iter()
            .map(|&id| state.machine.ack_now(id, now_ms))
            .collect();
        let polled = poll_locked(&mut state.machine, log, now_ms, consumer, max);
        Ok((acked, polled))
    }

    /// Acks each of `deliveries` in order under one hold of the lock; each result is what
    /// a single ack would have answered at that point.
    pub(crate) fn ack_batch(
        &self,
        deliveries: &[DeliveryId],
        now_ms: u64,
    ) -> Result<Vec<Result<(), NotOwned>>, TopicError> {
        let mut state = self.lock_at(now_ms)?;
        Ok(deliveries
            .iter()
            .map(|&id| state.machine.ack_now(id, now_ms))
            .collect())
    }

    /// Nacks each of `deliveries` per `options` (already checked) in order under one hold
    /// of the lock; each result is what a single nack would have answered at that point.
    pub(crate) fn nack_batch(
        &self,
        deliveries: &[DeliveryId],
        options: &NackOptions,
        now_ms: u64,
    ) -> Result<Vec<Result<Nack, NotOwned>>, TopicError> {
        let mut state = self.lock_at(now_ms)?;
        Ok(deliveries
            .iter()
            .map(|&id| {
                let change = state.machine.plan_nack(id, options, now_ms)?;
                apply(&mut state.machine, &change);
                Ok(change.nack_outcome())
            })
            .collect())
    }

    pub(crate) fn touch(&self, delivery: DeliveryId, now_ms: u64) -> Result<(), TopicError> {
        let mut state = self.lock_at(now_ms)?;
        let change = state
            .machine
            .plan_touch(delivery, now_ms)
            .map_err(|source| self.not_owned(source))?;
        if let Some(change) = change {
            apply(&mut state.machine, &change);
        }
        Ok(())
    }

    /// Redrives (or, with `purge`, deletes) the dead letters in `offsets`; returns how
    /// many.
    pub(crate) fn redrive(
        &self,
        offsets: Range<u64>,
        purge: bool,
        now_ms: u64,
    ) -> Result<u64, TopicError> {
        let mut state = self.lock_at(now_ms)?;
        let before = state.machine.dead_letters().len();
        let change = if purge {
            state.machine.plan_purge(offsets)
        } else {
            state.machine.plan_redrive(offsets)
        };
        if let Some(change) = change {
            apply(&mut state.machine, &change);
        }
        Ok((before - state.machine.dead_letters().len()) as u64)
    }

    /// Applies the change `plan` makes of the state machine (after due expiries), if it
    /// makes one; returns whether it did. For the changes that need no payload: seek,
    /// pause, resume.
    pub(crate) fn change(
        &self,
        now_ms: u64,
        plan: impl FnOnce(&GroupState) -> Option<Change>,
    ) -> Result<bool, TopicError> {
        let mut state = self.lock_at(now_ms)?;
        let change = plan(&state.machine);
        if let Some(change) = &change {
            apply(&mut state.machine, change);
        }
        Ok(change.is_some())
    }

    /// Runs `read` on the state machine after applying due expiries.
    pub(crate) fn read<R>(
        &self,
        now_ms: u64,
        read: impl FnOnce(&GroupState) -> R,
    ) -> Result<R, TopicError> {
        Ok(read(&self.lock_at(now_ms)?.machine))
    }

    /// The dead letters with reasons, times and payloads, oldest first.
    pub(crate) fn dead_letter_info<M: Clone>(
        &self,
        log: &Log<M>,
        now_ms: u64,
    ) -> Result<Vec<DeadLetterInfo<M>>, TopicError> {
        let (entries, notes) = self.read(now_ms, |machine| {
            (
                machine.dead_letters().to_vec(),
                machine.dead_letter_notes().to_vec(),
            )
        })?;
        Ok(entries
            .into_iter()
            .zip(notes)
            .map(|(entry, note)| DeadLetterInfo {
                offset: entry.offset,
                attempts: entry.attempts,
                reason: note.reason,
                at_ms: note.at_ms,
                message: published(log, entry.offset).clone(),
            })
            .collect())
    }

    /// The dead letters with their payloads. The entries are copied under the lock and
    /// the payloads cloned after it is released, so a long queue does not hold up polls.
    pub(crate) fn dead_letters<M: Clone>(
        &self,
        log: &Log<M>,
        now_ms: u64,
    ) -> Result<Vec<DeadLetter<M>>, TopicError> {
        let entries = self.read(now_ms, |machine| machine.dead_letters().to_vec())?;
        Ok(entries
            .into_iter()
            .map(|entry| DeadLetter {
                offset: entry.offset,
                attempts: entry.attempts,
                message: published(log, entry.offset).clone(),
            })
            .collect())
    }

    pub(crate) fn position(&self, now_ms: u64) -> Result<u64, TopicError> {
        self.read(now_ms, GroupState::position)
    }

    pub(crate) fn info<M>(&self, log: &Log<M>, now_ms: u64) -> Result<GroupInfo, TopicError> {
        let state = self.lock_at(now_ms)?;
        Ok(state.machine.info_at(&self.name, log.len(), now_ms))
    }

    fn not_owned(&self, source: NotOwned) -> TopicError {
        TopicError::NotOwned {
            group: self.name.to_string(),
            source,
        }
    }
}

/// Applies a change the machine itself just planned under the same lock.
#[inline]
fn apply(machine: &mut GroupState, change: &Change) {
    if let Err(error) = machine.apply_change(change) {
        unreachable!("a freshly planned event must follow: {error}");
    }
}

/// The delivery `id` with its payload.
fn delivery<M: Clone>(log: &Log<M>, id: DeliveryId) -> Delivery<M> {
    Delivery {
        offset: id.offset,
        attempt: id.attempt,
        message: published(log, id.offset).clone(),
    }
}

/// A message the group state machine points at. Group positions never pass the log's
/// length, so its absence is a bug in this module, not a caller's mistake.
#[inline]
fn published<M>(log: &Log<M>, offset: u64) -> &M {
    match log.get(offset) {
        Some(message) => message,
        None => unreachable!("group points at unpublished offset {offset}"),
    }
}

/// What an ack-then-poll batch answers: one result per ack, then the deliveries polled.
pub(crate) type AckedThenPolled<M> = (Vec<Result<(), NotOwned>>, Vec<Delivery<M>>);

/// A batch poll on a locked group, planned by [`plan_batch`]: the consumer's own
/// deliveries in flight, then new ones until `max` or the group has nothing more to hand
/// out (idle, full or waiting).
fn poll_locked<M: Clone>(
    machine: &mut GroupState,
    log: &Log<M>,
    now_ms: u64,
    consumer: Option<&str>,
    max: usize,
) -> Vec<Delivery<M>> {
    let poll = BatchPoll {
        consumer,
        max,
        log_end: log.len(),
        now_ms,
    };
    let mut home = MemoryBatch {
        machine,
        log,
        consumer,
        batch: Vec::new(),
    };
    match plan_batch(&mut home, &poll) {
        Ok(BatchEnd::Done) => home.batch,
        Ok(BatchEnd::Vanished) => unreachable!("an in-memory log never loses a message"),
        Err(never) => match never {},
    }
}

/// A batch poll's home in memory: every step is applied at once.
struct MemoryBatch<'a, M> {
    machine: &'a mut GroupState,
    log: &'a Log<M>,
    consumer: Option<&'a str>,
    batch: Vec<Delivery<M>>,
}

impl<M: Clone> BatchHome for MemoryBatch<'_, M> {
    type Error = Infallible;

    fn state(&self) -> &GroupState {
        self.machine
    }

    fn expire(&mut self, change: Change) -> Result<(), Infallible> {
        apply(self.machine, &change);
        Ok(())
    }

    fn owned(&mut self, id: DeliveryId) -> Result<Offer, Infallible> {
        self.batch.push(delivery(self.log, id));
        Ok(Offer::Taken)
    }

    fn deliver(&mut self, new: NewDelivery) -> Result<Offer, Infallible> {
        // Cloned before applying, as in `poll`: a panicking `Clone` leaves this
        // delivery unmade (those already made stay owned by the consumer).
        let next = delivery(self.log, new.id);
        if let Err(error) = self.machine.apply_delivery(new, self.consumer) {
            unreachable!("a freshly planned delivery must follow: {error}");
        }
        self.batch.push(next);
        Ok(Offer::Taken)
    }
}
