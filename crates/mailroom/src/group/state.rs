//! [`GroupState`]: the data of one group, its accessors and its plan methods. The
//! transitions themselves are in `apply.rs`, the checkpoint form in `snapshot.rs`.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Range;

use super::change::{Change, Failure, LEASE_EXPIRED_REASON};
use super::config::{GroupConfig, NackKind, NackOptions};
use super::pause::Pause;
pub use super::types::{DeadLetterNote, GroupCounters, NewDelivery, Slot, SlotPhase};
use super::{DeadLetterEntry, DeliveryId, GroupError, GroupEvent, NotOwned};

/// One consumer group's delivery state. See the [module docs](super) for the rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupState {
    pub(super) position: u64,
    pub(super) config: GroupConfig,
    /// The messages from `position` up to the next never-delivered offset:
    /// `window[i].offset == position + i`, and the front is never `Done`.
    pub(super) window: VecDeque<Slot>,
    /// Redriven messages below `position`, by offset.
    pub(super) redriven: BTreeMap<u64, Slot>,
    /// How many slots are `InFlight`.
    pub(super) in_flight: u32,
    pub(super) dead_letters: Vec<DeadLetterEntry>,
    /// One note per dead letter, in the same order.
    pub(super) notes: Vec<DeadLetterNote>,
    pub(super) counters: GroupCounters,
    /// Every offset this group has delivered lies below this (see `seek.rs`).
    pub(super) frontier: u64,
    /// Offsets below this may have been delivered before a seek back (see `seek.rs`).
    pub(super) rewound_below: u64,
    /// The first delivery of a rewound offset is attempt `attempt_floor + 1`.
    pub(super) attempt_floor: u32,
    /// The largest attempt number ever handed out.
    pub(super) attempts_high: u32,
    /// The pause recorded, if any (see `pause.rs`).
    pub(super) pause: Option<Pause>,
}

impl GroupState {
    /// A group that will next deliver the message at `position`.
    ///
    /// # Errors
    ///
    /// [`GroupError::ZeroMaxAttempts`] if `max_attempts` is 0.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::group::GroupState;
    ///
    /// let group = GroupState::new(3, 0).unwrap();
    /// assert_eq!(group.position(), 0);
    /// assert!(GroupState::new(0, 0).is_err());
    /// ```
    pub fn new(max_attempts: u32, position: u64) -> Result<Self, GroupError> {
        GroupState::with_config(GroupConfig::new(max_attempts), position)
    }

    /// A group with `config` that will next deliver the message at `position`.
    ///
    /// # Errors
    ///
    /// As [`GroupConfig::check`].
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::group::{GroupConfig, GroupState};
    ///
    /// let group = GroupState::with_config(GroupConfig::new(3).with_max_in_flight(4), 0).unwrap();
    /// assert_eq!(group.config().max_in_flight, 4);
    /// ```
    pub fn with_config(config: GroupConfig, position: u64) -> Result<Self, GroupError> {
        config.check()?;
        Ok(GroupState {
            position,
            config,
            window: VecDeque::new(),
            redriven: BTreeMap::new(),
            in_flight: 0,
            dead_letters: Vec::new(),
            notes: Vec::new(),
            counters: GroupCounters::default(),
            frontier: 0,
            rewound_below: 0,
            attempt_floor: 0,
            attempts_high: 0,
            pause: None,
        })
    }

    /// The offset of the lowest message this group has not finished (redriven dead
    /// letters aside, which lie below it).
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Deliveries made so far of the message at [`position`](Self::position) (0 if none).
    pub fn attempt(&self) -> u32 {
        self.window.front().map_or(0, |slot| slot.attempt)
    }

    /// The number of failures allowed for one message (see [`GroupConfig::max_attempts`]).
    pub fn max_attempts(&self) -> u32 {
        self.config.max_attempts
    }

    /// The group's settings.
    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    /// The group's counters.
    pub fn counters(&self) -> GroupCounters {
        self.counters
    }

    /// The lowest-offset delivery in flight, if any (with `max_in_flight` 1, the one).
    pub fn in_flight(&self) -> Option<DeliveryId> {
        if self.in_flight == 0 {
            return None;
        }
        self.slots()
            .find(|slot| matches!(slot.phase, SlotPhase::InFlight { .. }))
            .map(slot_id)
    }

    /// How many deliveries are in flight.
    pub fn in_flight_count(&self) -> u32 {
        self.in_flight
    }

    /// Every unfinished slot (redriven ones first, then the window), by offset.
    pub fn slots(&self) -> impl Iterator<Item = &Slot> {
        self.redriven
            .values()
            .chain(self.window.iter())
            .filter(|slot| slot.phase != SlotPhase::Done)
    }

    /// The dead-letter queue, oldest first.
    pub fn dead_letters(&self) -> &[DeadLetterEntry] {
        &self.dead_letters
    }

    /// For each of [`dead_letters`](Self::dead_letters), its reason and time.
    pub fn dead_letter_notes(&self) -> &[DeadLetterNote] {
        &self.notes
    }

    /// Removes the dead letters and their notes from the state and returns them; the
    /// rest of the state is left as it was.
    ///
    /// For a home that keeps dead letters apart from the rest of the state (the
    /// PostgreSQL backend keeps them as rows) and holds the state without them between
    /// calls, so that a call costs nothing per dead letter. Nothing but a redrive, a purge
    /// and the counts of [`info`](Self::info) looks at them; before planning one of those,
    /// such a home puts them back (through [`snapshot`](Self::snapshot) and
    /// [`from_snapshot`](Self::from_snapshot)). A dead letter the state gains meanwhile is
    /// in the state until the next take.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::group::{GroupConfig, GroupState, PollPlan};
    ///
    /// let mut group = GroupState::with_config(GroupConfig::new(1), 0).unwrap();
    /// let PollPlan::Deliver(event) = group.poll(1) else { unreachable!() };
    /// group.apply(event).unwrap();
    /// group.apply(group.nack(event.delivery()).unwrap()).unwrap();
    /// let (letters, notes) = group.take_dead_letters();
    /// assert_eq!((letters.len(), notes.len()), (1, 1));
    /// assert!(group.dead_letters().is_empty());
    /// assert_eq!(group.position(), 1);
    /// ```
    pub fn take_dead_letters(&mut self) -> (Vec<DeadLetterEntry>, Vec<DeadLetterNote>) {
        (
            std::mem::take(&mut self.dead_letters),
            std::mem::take(&mut self.notes),
        )
    }

    /// How many messages of a log ending at `log_end` this group has not finished.
    pub fn lag(&self, log_end: u64) -> u64 {
        log_end.saturating_sub(self.position)
    }

    /// The offset after the highest one ever delivered in the window: the lowest
    /// message a poll may hand out for the first time (a home reads ahead from here).
    #[inline(always)]
    pub fn next_fresh(&self) -> u64 {
        self.position + self.window.len() as u64
    }

    #[inline(always)]
    pub(super) fn slot(&self, offset: u64) -> Option<&Slot> {
        if offset < self.position {
            return self.redriven.get(&offset);
        }
        let index = usize::try_from(offset - self.position).ok()?;
        self.window.get(index)
    }

    #[inline]
    pub(super) fn slot_mut(&mut self, offset: u64) -> Option<&mut Slot> {
        if offset < self.position {
            return self.redriven.get_mut(&offset);
        }
        let index = usize::try_from(offset - self.position).ok()?;
        self.window.get_mut(index)
    }

    /// The deliveries `consumer` (`None`: the anonymous consumer) has in flight:
    /// redriven messages first, then by offset.
    pub fn owned<'a>(&'a self, consumer: Option<&'a str>) -> impl Iterator<Item = DeliveryId> + 'a {
        self.slots()
            .filter(move |slot| match &slot.phase {
                SlotPhase::InFlight {
                    consumer: owner, ..
                } => owner.as_deref() == consumer,
                _ => false,
            })
            .map(slot_id)
    }

    /// Plans an ack of `delivery`, ignoring time: the basic ack. Changes nothing.
    ///
    /// # Errors
    ///
    /// [`NotOwned`] unless `delivery` is exactly a delivery in flight.
    #[inline]
    pub fn ack(&self, delivery: DeliveryId) -> Result<GroupEvent, NotOwned> {
        self.check_owned(delivery, 0)?;
        Ok(GroupEvent::Acked(delivery))
    }

    /// Plans a nack of `delivery`, ignoring time: a retry while attempts remain, else a
    /// dead letter. The basic nack. Changes nothing.
    ///
    /// # Errors
    ///
    /// [`NotOwned`] unless `delivery` is exactly a delivery in flight.
    #[inline]
    pub fn nack(&self, delivery: DeliveryId) -> Result<GroupEvent, NotOwned> {
        let change = self.plan_nack(delivery, &NackOptions::default(), 0)?;
        Ok(if change.dead_letters() {
            GroupEvent::DeadLettered(delivery)
        } else {
            GroupEvent::Retried(delivery)
        })
    }

    /// Plans and performs an ack of `delivery` at `now_ms` in one step: exactly
    /// [`plan_ack`](Self::plan_ack) then [`apply_change`](Self::apply_change), for a home
    /// that persists nothing (the in-memory topic).
    ///
    /// # Errors
    ///
    /// As [`plan_ack`](Self::plan_ack); nothing changes then.
    #[inline(always)]
    pub fn ack_now(&mut self, delivery: DeliveryId, now_ms: u64) -> Result<(), NotOwned> {
        self.check_owned(delivery, now_ms)?;
        self.finish(delivery.offset);
        Ok(())
    }

    /// Plans an ack of `delivery` at `now_ms`. Changes nothing.
    ///
    /// # Errors
    ///
    /// [`NotOwned`] unless `delivery` is exactly a delivery in flight whose lease has not
    /// run out.
    #[inline]
    pub fn plan_ack(&self, delivery: DeliveryId, now_ms: u64) -> Result<Change, NotOwned> {
        self.check_owned(delivery, now_ms)?;
        Ok(Change::Acked(delivery))
    }

    /// Plans a nack, release or reject of `delivery` at `now_ms`. The options are taken
    /// as given; homes check them first with [`NackOptions::check`]. Changes nothing.
    ///
    /// # Errors
    ///
    /// As [`plan_ack`](Self::plan_ack).
    #[inline]
    pub fn plan_nack(
        &self,
        delivery: DeliveryId,
        options: &NackOptions,
        now_ms: u64,
    ) -> Result<Change, NotOwned> {
        let slot = self.check_owned(delivery, now_ms)?;
        let (cause, retry_at_ms) = match options.kind {
            NackKind::Reject => (Failure::Reject, None),
            NackKind::Release => (
                Failure::Release,
                (slot.attempt < u32::MAX)
                    .then(|| now_ms.saturating_add(options.delay_ms.unwrap_or(0))),
            ),
            NackKind::Nack => (Failure::Nack, self.retry_at(slot, now_ms, options.delay_ms)),
        };
        Ok(Change::Failed {
            id: delivery,
            cause,
            retry_at_ms,
            reason: options.reason.clone(),
            at_ms: now_ms,
        })
    }

    /// When a failure of `slot` at `at_ms` makes it ready again, or `None` if it is its
    /// last allowed failure.
    #[inline]
    fn retry_at(&self, slot: &Slot, at_ms: u64, delay_ms: Option<u64>) -> Option<u64> {
        let failures = slot.failures.saturating_add(1);
        if failures >= self.config.max_attempts || slot.attempt == u32::MAX {
            return None;
        }
        let backoff = self.config.backoff.map_or(0, |b| b.delay_ms(failures));
        Some(at_ms.saturating_add(delay_ms.unwrap_or(backoff)))
    }

    /// Plans extending the lease of `delivery` to `now_ms + lease_ms`. `None` if the
    /// group has no leases (there is nothing to extend). Changes nothing.
    ///
    /// # Errors
    ///
    /// As [`plan_ack`](Self::plan_ack).
    pub fn plan_touch(
        &self,
        delivery: DeliveryId,
        now_ms: u64,
    ) -> Result<Option<Change>, NotOwned> {
        self.check_owned(delivery, now_ms)?;
        Ok(self.config.lease_ms.map(|lease_ms| Change::Touched {
            id: delivery,
            lease_until_ms: now_ms.saturating_add(lease_ms),
        }))
    }

    /// Plans the expiry of the lowest-offset delivery whose lease has run out by
    /// `now_ms`, if any. Homes apply these (one at a time, persisting each) before any
    /// other operation, so nobody observes an expired delivery as owned. Changes nothing.
    #[inline(always)]
    pub fn plan_expiry(&self, now_ms: u64) -> Option<Change> {
        self.config.lease_ms?;
        if self.in_flight == 0 {
            return None;
        }
        self.slots().find_map(|slot| match slot.phase {
            SlotPhase::InFlight {
                lease_until_ms: Some(deadline),
                ..
            } if deadline <= now_ms => {
                let retry_at_ms = self.retry_at(slot, deadline, None);
                Some(Change::Failed {
                    id: slot_id(slot),
                    cause: Failure::LeaseExpired,
                    retry_at_ms,
                    reason: Some(LEASE_EXPIRED_REASON.to_owned()),
                    at_ms: deadline,
                })
            }
            _ => None,
        })
    }

    /// Plans putting the dead letters with offsets in `offsets` back to this group.
    /// `None` if there are none. Changes nothing.
    pub fn plan_redrive(&self, offsets: Range<u64>) -> Option<Change> {
        self.any_dead_in(&offsets, true)
            .then_some(Change::Redriven { offsets })
    }

    /// Plans deleting the dead letters with offsets in `offsets`. `None` if there are
    /// none. Changes nothing.
    pub fn plan_purge(&self, offsets: Range<u64>) -> Option<Change> {
        self.any_dead_in(&offsets, false)
            .then_some(Change::Purged { offsets })
    }

    fn any_dead_in(&self, offsets: &Range<u64>, redrive: bool) -> bool {
        self.dead_letters
            .iter()
            .any(|entry| taken_by(entry, offsets, redrive))
    }

    /// The slot of `requested` if it is in flight with that attempt and its lease has
    /// not run out at `now_ms`.
    #[inline(always)]
    pub(super) fn check_owned(
        &self,
        requested: DeliveryId,
        now_ms: u64,
    ) -> Result<&Slot, NotOwned> {
        let owned = self.slot(requested.offset).filter(|slot| {
            slot.attempt == requested.attempt
                && match slot.phase {
                    SlotPhase::InFlight { lease_until_ms, .. } => {
                        lease_until_ms.is_none_or(|deadline| now_ms < deadline)
                    }
                    _ => false,
                }
        });
        owned.ok_or_else(|| NotOwned {
            requested,
            current: self.current_for(requested.offset),
        })
    }

    /// What a refused call is told is in flight: the delivery of that offset if one is,
    /// else the group's lowest.
    fn current_for(&self, offset: u64) -> Option<DeliveryId> {
        match self.slot(offset) {
            Some(slot) if matches!(slot.phase, SlotPhase::InFlight { .. }) => Some(slot_id(slot)),
            _ => self.in_flight(),
        }
    }
}

/// Whether a redrive (or purge) of `offsets` takes `entry`. A message whose attempt
/// numbers are used up (`u32::MAX`) cannot be delivered again, so it is never redriven.
pub(super) fn taken_by(entry: &DeadLetterEntry, offsets: &Range<u64>, redrive: bool) -> bool {
    offsets.contains(&entry.offset) && !(redrive && entry.attempts == u32::MAX)
}

pub(super) fn slot_id(slot: &Slot) -> DeliveryId {
    DeliveryId {
        offset: slot.offset,
        attempt: slot.attempt,
    }
}
