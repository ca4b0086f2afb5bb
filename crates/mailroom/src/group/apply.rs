//! Performing a [`Change`]: every transition's check and effect, in one place.
//!
//! `apply_change` re-checks what makes delivery exact: fencing (a change must name the
//! exact attempt in flight, and a new delivery must be the next attempt number), the
//! failure budget (a change dead-letters exactly when the rules say it must), and the
//! bounds of `max_in_flight`. It does not re-check choices that depend on time (which
//! ready message a poll picked, whether a delay had passed): those are the plan's, and a
//! replayed history made by the same plans satisfies them.

use std::ops::Range;

use super::change::{Change, Failure};
use super::state::{taken_by, GroupState, NewDelivery, Slot, SlotPhase};
use super::{DeadLetterEntry, DeadLetterNote, DeliveryId, GroupError};

impl GroupState {
    /// Performs `change`, after checking that it follows from the current state (see
    /// the module docs of `group` for what is checked).
    ///
    /// # Errors
    ///
    /// [`GroupError::InvalidChange`] if it does not follow; the state is unchanged.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::group::{Change, DeliveryId, GroupState};
    ///
    /// let mut group = GroupState::new(1, 0).unwrap();
    /// let id = DeliveryId { offset: 0, attempt: 1 };
    /// assert!(group.apply_change(&Change::Acked(id)).is_err());
    /// group
    ///     .apply_change(&Change::Delivered { id, consumer: None, lease_until_ms: None })
    ///     .unwrap();
    /// group.apply_change(&Change::Acked(id)).unwrap();
    /// assert_eq!(group.position(), 1);
    /// ```
    #[inline]
    pub fn apply_change(&mut self, change: &Change) -> Result<(), GroupError> {
        let refused = |reason| GroupError::InvalidChange {
            change: Box::new(change.clone()),
            reason,
        };
        match change {
            Change::Delivered {
                id,
                consumer,
                lease_until_ms,
            } => self
                .deliver(*id, consumer.as_deref(), *lease_until_ms)
                .map_err(refused),
            Change::Acked(id) => {
                self.owned_mut(*id).map_err(refused)?;
                self.finish(id.offset);
                Ok(())
            }
            Change::Touched { id, lease_until_ms } => {
                let has_lease = self.config.lease_ms.is_some();
                let slot = self.owned_mut(*id).map_err(refused)?;
                match &mut slot.phase {
                    SlotPhase::InFlight {
                        lease_until_ms: Some(deadline),
                        ..
                    } if has_lease => {
                        *deadline = *lease_until_ms;
                        Ok(())
                    }
                    _ => Err(refused("touch of a delivery without a lease")),
                }
            }
            Change::Failed {
                id,
                cause,
                retry_at_ms,
                reason,
                at_ms,
            } => {
                let outcome = Outcome {
                    cause: *cause,
                    retry_at_ms: *retry_at_ms,
                    reason,
                    at_ms: *at_ms,
                };
                self.fail(*id, outcome).map_err(refused)
            }
            Change::Redriven { offsets } => self.redrive(offsets).map_err(refused),
            Change::Purged { offsets } => self.purge(offsets).map_err(refused),
            Change::Seeked { position } => {
                self.seek(*position);
                Ok(())
            }
            Change::Paused { .. } | Change::Resumed => self.apply_pause(change).map_err(refused),
        }
    }

    /// Performs a delivery a poll by `consumer` planned: the same as applying
    /// [`new.change(consumer)`](NewDelivery::change), without building the change.
    ///
    /// # Errors
    ///
    /// As [`apply_change`](Self::apply_change).
    #[inline(always)]
    pub fn apply_delivery(
        &mut self,
        new: NewDelivery,
        consumer: Option<&str>,
    ) -> Result<(), GroupError> {
        self.deliver(new.id, consumer, new.lease_until_ms)
            .map_err(|reason| GroupError::InvalidChange {
                change: Box::new(new.change(consumer)),
                reason,
            })
    }

    #[inline(always)]
    fn deliver(
        &mut self,
        id: DeliveryId,
        consumer: Option<&str>,
        lease_until_ms: Option<u64>,
    ) -> Result<(), &'static str> {
        if self.in_flight >= self.config.max_in_flight {
            return Err("max_in_flight deliveries are already in flight");
        }
        if lease_until_ms.is_some() != self.config.lease_ms.is_some() {
            return Err("a delivery's lease does not match the group's settings");
        }
        let phase = SlotPhase::InFlight {
            consumer: consumer.map(str::to_owned),
            lease_until_ms,
        };
        let fresh = self.next_fresh();
        if id.offset >= fresh {
            // Offsets skipped on the way (their keys were busy) are held in the window,
            // never delivered (see `keys.rs`).
            let skipped = id.offset - fresh;
            // The plan keeps unkeyed messages below `position + W`; keyed ones may reach
            // further (see `keys.rs`), which only the plan, knowing keys, can check.
            let room = (self.keyed_span() as usize).saturating_sub(self.window.len());
            if skipped >= room as u64 {
                return Err("the window of max_in_flight messages is full");
            }
            if Some(id.attempt) != self.first_attempt(id.offset) {
                return Err(
                    "a first delivery must be attempt 1 (or the floor's next after a seek back)",
                );
            }
            for offset in fresh..id.offset {
                self.window.push_back(Slot {
                    offset,
                    attempt: self.held_attempt(offset),
                    failures: 0,
                    phase: SlotPhase::Ready { not_before_ms: 0 },
                });
            }
            self.window.push_back(Slot {
                offset: id.offset,
                attempt: id.attempt,
                failures: 0,
                phase,
            });
            // A rewound message (see `seek.rs`) is delivered again, not for the first time.
            if id.attempt > 1 {
                self.counters.redeliveries += 1;
            }
        } else {
            let slot = self
                .slot_mut(id.offset)
                .ok_or("no message at that offset awaits delivery")?;
            if !matches!(slot.phase, SlotPhase::Ready { .. }) {
                return Err("that message is not waiting for delivery");
            }
            if slot.attempt.checked_add(1) != Some(id.attempt) {
                return Err("a redelivery must be the next attempt");
            }
            slot.attempt = id.attempt;
            slot.phase = phase;
            // A held slot's first delivery is attempt 1 (see `keys.rs`): not a redelivery.
            if id.attempt > 1 {
                self.counters.redeliveries += 1;
            }
        }
        self.in_flight += 1;
        self.attempts_high = self.attempts_high.max(id.attempt);
        self.frontier = self.frontier.max(id.offset + 1);
        Ok(())
    }

    /// The slot of `id` if it is in flight with exactly that attempt. Leases are not
    /// looked at here: whether one ran out is decided when planning, with the time.
    #[inline]
    fn owned_mut(&mut self, id: DeliveryId) -> Result<&mut Slot, &'static str> {
        match self.slot_mut(id.offset) {
            Some(slot)
                if slot.attempt == id.attempt
                    && matches!(slot.phase, SlotPhase::InFlight { .. }) =>
            {
                Ok(slot)
            }
            _ => Err("names no delivery in flight"),
        }
    }

    fn fail(&mut self, id: DeliveryId, outcome: Outcome<'_>) -> Result<(), &'static str> {
        let max_attempts = self.config.max_attempts;
        let slot = self.owned_mut(id)?;
        let counted = matches!(outcome.cause, Failure::Nack | Failure::LeaseExpired);
        let failures = slot.failures + u32::from(counted);
        // Attempt numbers are never reused, so one whose numbers are used up dies.
        let numbers_left = slot.attempt < u32::MAX;
        let must_die = match outcome.cause {
            Failure::Nack | Failure::LeaseExpired => failures >= max_attempts || !numbers_left,
            Failure::Release => !numbers_left,
            Failure::Reject => true,
        };
        if must_die != outcome.retry_at_ms.is_none() {
            return Err(if must_die {
                "this failure must dead-letter the message"
            } else {
                "this failure may not dead-letter the message"
            });
        }
        if outcome.cause == Failure::LeaseExpired {
            let expired = matches!(slot.phase, SlotPhase::InFlight { lease_until_ms: Some(deadline), .. } if deadline <= outcome.at_ms);
            if !expired {
                return Err("the lease had not run out");
            }
        }
        slot.failures = failures;
        match outcome.cause {
            Failure::Release => self.counters.releases += 1,
            Failure::LeaseExpired => self.counters.expired_leases += 1,
            Failure::Nack | Failure::Reject => {}
        }
        match outcome.retry_at_ms {
            Some(not_before_ms) => {
                let slot = self.slot_mut(id.offset).expect("found above");
                slot.phase = SlotPhase::Ready { not_before_ms };
                self.in_flight -= 1;
            }
            None => {
                self.dead_letters.push(DeadLetterEntry {
                    offset: id.offset,
                    attempts: id.attempt,
                });
                self.notes.push(DeadLetterNote {
                    reason: outcome.reason.clone(),
                    at_ms: outcome.at_ms,
                });
                self.finish(id.offset);
            }
        }
        Ok(())
    }

    /// Marks the in-flight slot at `offset` finished and moves the cursor past every
    /// finished message at the front of the window.
    #[inline]
    pub(super) fn finish(&mut self, offset: u64) {
        self.in_flight -= 1;
        if offset == self.position {
            // The common case, and with max_in_flight 1 the only one: the front finishes.
            self.window.pop_front();
            self.position += 1;
            if self.window.is_empty() {
                return;
            }
        } else if offset < self.position {
            self.redriven.remove(&offset);
            return;
        } else if let Some(slot) = self.slot_mut(offset) {
            slot.phase = SlotPhase::Done;
            return;
        }
        self.finish_front();
    }

    fn redrive(&mut self, offsets: &Range<u64>) -> Result<(), &'static str> {
        let taken = self.take_dead(offsets, true)?;
        for entry in taken {
            self.counters.redrives += 1;
            let revived = Slot {
                offset: entry.offset,
                attempt: self.revived_attempt(entry.offset, entry.attempts),
                failures: 0,
                phase: SlotPhase::Ready { not_before_ms: 0 },
            };
            // After a seek back, the message may be unfinished again (or never reached
            // again yet): then the group delivers it anyway, and nothing is revived.
            if entry.offset < self.position {
                self.redriven.entry(entry.offset).or_insert(revived);
            } else if let Some(slot) = self.slot_mut(entry.offset) {
                // Finished out of order inside the window (max_in_flight > 1).
                if slot.phase == SlotPhase::Done {
                    *slot = revived;
                }
            }
        }
        Ok(())
    }

    fn purge(&mut self, offsets: &Range<u64>) -> Result<(), &'static str> {
        let taken = self.take_dead(offsets, false)?;
        self.counters.purged += taken.len() as u64;
        Ok(())
    }

    /// Removes the dead letters with offsets in `offsets` and returns them.
    fn take_dead(
        &mut self,
        offsets: &Range<u64>,
        redrive: bool,
    ) -> Result<Vec<DeadLetterEntry>, &'static str> {
        let mut taken = Vec::new();
        let mut kept = Vec::with_capacity(self.dead_letters.len());
        let mut kept_notes = Vec::with_capacity(self.notes.len());
        for (entry, note) in self.dead_letters.drain(..).zip(self.notes.drain(..)) {
            if taken_by(&entry, offsets, redrive) {
                taken.push(entry);
            } else {
                kept.push(entry);
                kept_notes.push(note);
            }
        }
        self.dead_letters = kept;
        self.notes = kept_notes;
        if taken.is_empty() {
            return Err("no dead letter in that range");
        }
        Ok(taken)
    }

    /// Moves the cursor forward to `position`, dropping every unfinished message below
    /// it (deliveries in flight included). A durable home uses this when retention has
    /// deleted messages the group had not finished. Redriven dead letters are kept.
    ///
    /// # Errors
    ///
    /// [`GroupError::InvalidSnapshot`] if `position` is below the current one.
    pub fn skip_to(&mut self, position: u64) -> Result<(), GroupError> {
        if position < self.position {
            return Err(GroupError::InvalidSnapshot("the cursor cannot move back"));
        }
        let dropped = usize::try_from(position - self.position)
            .unwrap_or(usize::MAX)
            .min(self.window.len());
        for slot in self.window.drain(..dropped) {
            if matches!(slot.phase, SlotPhase::InFlight { .. }) {
                self.in_flight -= 1;
            }
        }
        self.position = position;
        if self
            .window
            .front()
            .is_some_and(|slot| slot.phase == SlotPhase::Done)
        {
            self.finish_front();
        }
        Ok(())
    }

    fn finish_front(&mut self) {
        while self
            .window
            .front()
            .is_some_and(|slot| slot.phase == SlotPhase::Done)
        {
            self.window.pop_front();
            self.position += 1;
        }
    }
}

/// How a failed delivery ends, as the change says.
struct Outcome<'a> {
    cause: Failure,
    retry_at_ms: Option<u64>,
    reason: &'a Option<String>,
    at_ms: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::{GroupConfig, GroupSnapshot, NackKind, NackOptions, PollStep};

    // Proves a message whose attempt numbers run out is dead-lettered by a release instead
    // of overflowing, and is then never redriven (that would reuse an attempt number).
    #[test]
    fn exhausted_attempt_numbers_dead_letter_and_stay_dead() {
        let mut snapshot = GroupSnapshot::basic(0, 0, false, 3, vec![]);
        snapshot.window = vec![Slot {
            offset: 0,
            attempt: u32::MAX - 1,
            failures: 0,
            phase: SlotPhase::Ready { not_before_ms: 0 },
        }];
        snapshot.attempt = u32::MAX - 1;
        let mut group = GroupState::from_snapshot(snapshot).unwrap();
        assert_eq!(group.config(), &GroupConfig::new(3));
        let PollStep::Deliver(new) = group.plan_poll(1, 0, None) else {
            panic!("expected a delivery");
        };
        assert_eq!(new.id.attempt, u32::MAX);
        group.apply_delivery(new, None).unwrap();
        let release = NackOptions::new(NackKind::Release);
        let change = group.plan_nack(new.id, &release, 0).unwrap();
        assert!(change.dead_letters());
        group.apply_change(&change).unwrap();
        assert_eq!(group.dead_letters().len(), 1);
        assert_eq!(group.plan_redrive(0..u64::MAX), None);
        let purge = group.plan_purge(0..u64::MAX).unwrap();
        group.apply_change(&purge).unwrap();
        assert!(group.dead_letters().is_empty());
    }
}
