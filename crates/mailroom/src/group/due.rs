//! When a group's next poll can find something new by the clock alone: [`GroupState::next_due_ms`].
//!
//! A poll's answer ([`GroupState::plan_poll_new`]) depends on the time in exactly two
//! ways: a lease whose deadline has passed is expired first, and the lowest ready slot
//! is delivered only once its delay is over. Everything else that changes the answer is
//! a call (a publish, an ack, a nack...). So a home that wants to wait for the next
//! delivery, rather than poll on a timer, waits for a call or for this time, whichever
//! comes first.

use super::keys::{KeyLookup, NoKeys};
use super::state::GroupState;
use super::types::SlotPhase;

impl GroupState {
    /// The earliest time (ms) at which the answer of a poll can change with no call in
    /// between: the earliest lease deadline of a delivery in flight and, unless
    /// `max_in_flight` deliveries are in flight (then no slot can be delivered however
    /// long it waits), the end of the delay of the ready slot a poll would deliver next.
    /// `None` if no poll's answer depends on the time. A time at or before now means a
    /// poll now already does something (a redriven slot, ready at once, gives 0).
    ///
    /// Only the *next* change is reported: after it, a poll may expire a lease, which
    /// makes the message ready after its backoff, a later time the caller learns by
    /// asking again after that poll.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::group::{GroupConfig, GroupState, NackKind, NackOptions, PollStep};
    ///
    /// let config = GroupConfig::new(3).with_lease_ms(1_000).with_max_in_flight(2);
    /// let mut group = GroupState::with_config(config, 0).unwrap();
    /// assert_eq!(group.next_due_ms(), None); // nothing delivered: time changes nothing
    ///
    /// // At 100 ms, offset 0 goes out with a lease until 1,100 ms.
    /// let PollStep::Deliver(first) = group.plan_poll_new(2, 100) else { unreachable!() };
    /// group.apply_delivery(first, None).unwrap();
    /// assert_eq!(group.next_due_ms(), Some(1_100));
    ///
    /// // Offset 1 goes out and is nacked with a 300 ms delay: ready again at 500 ms.
    /// let PollStep::Deliver(second) = group.plan_poll_new(2, 200) else { unreachable!() };
    /// group.apply_delivery(second, None).unwrap();
    /// let nack = NackOptions::new(NackKind::Nack).with_delay_ms(300);
    /// group.apply_change(&group.plan_nack(second.id, &nack, 200).unwrap()).unwrap();
    /// assert_eq!(group.next_due_ms(), Some(500));
    /// assert!(matches!(group.plan_poll_new(2, 499), PollStep::Wait { until_ms: 500 }));
    /// assert!(matches!(group.plan_poll_new(2, 500), PollStep::Deliver(_)));
    /// ```
    pub fn next_due_ms(&self) -> Option<u64> {
        self.next_due_ms_keyed(&mut NoKeys)
    }

    /// [`next_due_ms`](Self::next_due_ms) on a log whose messages may carry keys, which
    /// `keys` tells (see the module docs of `keys.rs`): a ready slot counts only if it is
    /// the lowest unfinished message of its key, and an unkeyed ready slot hides every
    /// slot above it.
    pub fn next_due_ms_keyed(&self, keys: &mut dyn KeyLookup) -> Option<u64> {
        let lease = self.next_lease_deadline_ms();
        // A paused group delivers nothing new until its pause ends, whatever the delays.
        if let Some(pause) = self.pause {
            return match pause.until_ms {
                Some(until_ms) => Some(lease.map_or(until_ms, |lease| lease.min(until_ms))),
                None => lease,
            };
        }
        // A full window answers `Full` whatever the delays, until a lease runs out.
        if self.in_flight >= self.config.max_in_flight {
            return lease;
        }
        // Without keys only the lowest ready slot counts: a poll delivers it or waits for
        // it, and never delivers a slot above it first (see `next_candidate`).
        let delay = self.first_delay_end_ms(keys);
        match (lease, delay) {
            (Some(lease), Some(delay)) => Some(lease.min(delay)),
            (lease, delay) => lease.or(delay),
        }
    }

    /// The earliest lease deadline in flight, as [`plan_expiry`](Self::plan_expiry)
    /// would act on it (a group without leases expires nothing).
    fn next_lease_deadline_ms(&self) -> Option<u64> {
        self.config.lease_ms?;
        if self.in_flight == 0 {
            return None;
        }
        self.slots()
            .filter_map(|slot| match slot.phase {
                SlotPhase::InFlight { lease_until_ms, .. } => lease_until_ms,
                _ => None,
            })
            .min()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use crate::group::{
        DeliveryId, GroupConfig, GroupState, NackKind, NackOptions, PollStep, SlotPhase,
    };

    /// One call in a random history; time moves only by `Advance`.
    #[derive(Debug, Clone)]
    enum Op {
        /// A message with this key (`None`: without one).
        Publish {
            key: Option<u64>,
        },
        Poll {
            consumer: u8,
        },
        Ack {
            pick: usize,
        },
        Nack {
            pick: usize,
            kind: u8,
            delay_ms: Option<u64>,
        },
        Touch {
            pick: usize,
        },
        Redrive,
        Advance {
            ms: u64,
        },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            2 => proptest::option::of(0..3u64).prop_map(|key| Op::Publish { key }),
            4 => (0..3u8).prop_map(|consumer| Op::Poll { consumer }),
            2 => any::<usize>().prop_map(|pick| Op::Ack { pick }),
            3 => (any::<usize>(), 0..3u8, proptest::option::of(0..80u64))
                .prop_map(|(pick, kind, delay_ms)| Op::Nack { pick, kind, delay_ms }),
            1 => any::<usize>().prop_map(|pick| Op::Touch { pick }),
            1 => Just(Op::Redrive),
            3 => (0..60u64).prop_map(|ms| Op::Advance { ms }),
        ]
    }

    fn config() -> impl Strategy<Value = GroupConfig> {
        (1..4u32, proptest::option::of(1..60u64), 1..4u32).prop_map(|(attempts, lease, w)| {
            let config = GroupConfig::new(attempts).with_max_in_flight(w);
            match lease {
                Some(lease_ms) => config.with_lease_ms(lease_ms),
                None => config,
            }
        })
    }

    /// A poll's answer with the one part that moves with the poll's own time (the new
    /// lease's deadline) taken out: what "the answer changes" means.
    fn answer(group: &GroupState, log: &[Option<u64>], at_ms: u64) -> PollStep {
        match group.plan_poll_new_keyed(log.len() as u64, at_ms, &mut lookup(log)) {
            PollStep::Deliver(mut new) => {
                new.lease_until_ms = None;
                PollStep::Deliver(new)
            }
            other => other,
        }
    }

    fn in_flight(group: &GroupState, pick: usize) -> Option<DeliveryId> {
        let ids: Vec<DeliveryId> = group
            .slots()
            .filter(|slot| matches!(slot.phase, SlotPhase::InFlight { .. }))
            .map(|slot| DeliveryId {
                offset: slot.offset,
                attempt: slot.attempt,
            })
            .collect();
        (!ids.is_empty()).then(|| ids[pick % ids.len()])
    }

    /// The lookup of a log whose keys are `log` (one per offset).
    fn lookup(log: &[Option<u64>]) -> impl FnMut(u64) -> Option<u64> + '_ {
        |offset| log[offset as usize]
    }

    /// Performs `op` at `now` as a home would: plans at `now`, applies what was planned.
    /// Returns the delivery a poll made.
    fn perform(
        group: &mut GroupState,
        log: &mut Vec<Option<u64>>,
        now: &mut u64,
        op: &Op,
    ) -> Option<DeliveryId> {
        match *op {
            Op::Publish { key } => log.push(key),
            Op::Advance { ms } => *now += ms,
            Op::Poll { consumer } => loop {
                let log_end = log.len() as u64;
                match group.plan_poll_new_keyed(log_end, *now, &mut lookup(log)) {
                    PollStep::Expire(change) => group.apply_change(&change).unwrap(),
                    PollStep::Deliver(new) => {
                        let name = consumer.to_string();
                        group.apply_delivery(new, Some(&name)).unwrap();
                        return Some(new.id);
                    }
                    _ => break,
                }
            },
            Op::Ack { pick } => {
                if let Some(Ok(change)) = in_flight(group, pick).map(|id| group.plan_ack(id, *now))
                {
                    group.apply_change(&change).unwrap();
                }
            }
            Op::Nack {
                pick,
                kind,
                delay_ms,
            } => {
                let kind = [NackKind::Nack, NackKind::Release, NackKind::Reject][kind as usize];
                let options = NackOptions {
                    kind,
                    delay_ms,
                    reason: None,
                };
                let planned = in_flight(group, pick).map(|id| group.plan_nack(id, &options, *now));
                if let Some(Ok(change)) = planned {
                    group.apply_change(&change).unwrap();
                }
            }
            Op::Touch { pick } => {
                let planned = in_flight(group, pick).map(|id| group.plan_touch(id, *now));
                if let Some(Ok(Some(change))) = planned {
                    group.apply_change(&change).unwrap();
                }
            }
            Op::Redrive => {
                if let Some(change) = group.plan_redrive(0..u64::MAX) {
                    group.apply_change(&change).unwrap();
                }
            }
        }
        None
    }

    /// Every time at which a poll's answer could change: the poll compares the time only
    /// with these (`deadline <= now`, `not_before <= now`), so checking them and their
    /// neighbours checks every time.
    fn candidate_times(group: &GroupState, now: u64) -> Vec<u64> {
        let mut times = vec![0, 1, now, now + 1, u64::MAX / 2];
        for slot in group.slots() {
            let at = match slot.phase {
                SlotPhase::Ready { not_before_ms } => not_before_ms,
                SlotPhase::InFlight {
                    lease_until_ms: Some(deadline),
                    ..
                } => deadline,
                _ => continue,
            };
            times.extend([at.saturating_sub(1), at, at + 1]);
        }
        times.sort_unstable();
        times.dedup();
        times
    }

    /// Checks `next_due_ms` against the answers themselves: no answer changes before it,
    /// and the answer does change at it (or it is 0 and a poll delivers at once).
    fn check_next_due(
        group: &GroupState,
        log_end: &[Option<u64>],
        now: u64,
    ) -> Result<(), TestCaseError> {
        let due = group.next_due_ms_keyed(&mut lookup(log_end));
        let changes: Vec<u64> = candidate_times(group, now)
            .into_iter()
            .filter(|&at| at >= 1 && answer(group, log_end, at) != answer(group, log_end, at - 1))
            .collect();
        match due {
            None => prop_assert!(
                changes.is_empty(),
                "None, but the answer changes at {changes:?}"
            ),
            Some(due) => {
                let first = changes.first().copied();
                prop_assert!(
                    first.is_none_or(|first| first >= due),
                    "due {due}, but the answer already changes at {first:?}"
                );
                let changes_at_due =
                    due >= 1 && answer(group, log_end, due) != answer(group, log_end, due - 1);
                let due_at_once =
                    due == 0 && matches!(answer(group, log_end, 0), PollStep::Deliver(_));
                prop_assert!(
                    changes_at_due || due_at_once,
                    "due {due}, but the answer does not change there"
                );
            }
        }
        Ok(())
    }

    proptest! {
        // Proves the rules of ordering keys after every step of random histories (keys
        // and messages without one, leases, delays, releases, redrives, W up to 3): at
        // most one delivery per key in flight, and a key's messages go out in offset
        // order, a retry before any later message of its key.
        #[test]
        fn keys_deliver_in_order_one_at_a_time(
            config in config(),
            ops in proptest::collection::vec(op(), 1..80),
        ) {
            let mut group = GroupState::with_config(config, 0).unwrap();
            let (mut log, mut now) = (Vec::new(), 1);
            for op in &ops {
                let delivered = perform(&mut group, &mut log, &mut now, op);
                check_keys(&group, &log, delivered)?;
                let restored = GroupState::from_snapshot(group.snapshot());
                prop_assert_eq!(restored.as_ref(), Ok(&group));
            }
        }

        // Proves next_due_ms is exactly the first time a poll's answer changes by the
        // clock alone, after every step of random histories (leases, delays, releases,
        // redrives, parallel deliveries): never later (a waiter would sleep through a
        // delivery), never earlier (it would wake for nothing), None only if never.
        #[test]
        fn next_due_is_the_first_change_of_the_answer(
            config in config(),
            ops in proptest::collection::vec(op(), 1..60),
        ) {
            let mut group = GroupState::with_config(config, 0).unwrap();
            let (mut log, mut now) = (Vec::new(), 1);
            for op in &ops {
                perform(&mut group, &mut log, &mut now, op);
                check_next_due(&group, &log, now)?;
            }
        }
    }

    /// Checks the rules of ordering keys on `group` (see `keys.rs`): at most one
    /// delivery of a key in flight in the window, and `delivered` (just made) was the
    /// lowest unfinished message of its key: every lower offset of its key from the
    /// position on is finished.
    fn check_keys(
        group: &GroupState,
        log: &[Option<u64>],
        delivered: Option<DeliveryId>,
    ) -> Result<(), TestCaseError> {
        let position = group.position();
        let mut in_flight = std::collections::HashSet::new();
        for slot in group.slots().filter(|slot| slot.offset >= position) {
            if let (SlotPhase::InFlight { .. }, Some(key)) =
                (&slot.phase, log[slot.offset as usize])
            {
                prop_assert!(
                    in_flight.insert(key),
                    "two deliveries of key {key} in flight"
                );
            }
        }
        let Some(id) = delivered.filter(|id| id.offset >= position) else {
            return Ok(());
        };
        let Some(key) = log[id.offset as usize] else {
            return Ok(());
        };
        for offset in (position..id.offset).filter(|&o| log[o as usize] == Some(key)) {
            // Finished above the position means a `Done` slot in the window.
            let done = group.window.get((offset - position) as usize);
            prop_assert!(
                done.is_some_and(|slot| slot.phase == SlotPhase::Done),
                "{id} of key {key} went out before offset {offset} of its key"
            );
        }
        Ok(())
    }

    // Proves a full window reports only its leases, even with a slot past its delay
    // waiting behind them: a waiter must not wake (and spin) for a slot it cannot get.
    #[test]
    fn full_window_ignores_ready_slots() {
        let config = GroupConfig::new(3)
            .with_lease_ms(1_000)
            .with_max_in_flight(1);
        let mut group = GroupState::with_config(config, 0).unwrap();
        let PollStep::Deliver(first) = group.plan_poll_new(1, 10) else {
            unreachable!()
        };
        group.apply_delivery(first, None).unwrap();
        let nack = NackOptions::new(NackKind::Reject);
        group
            .apply_change(&group.plan_nack(first.id, &nack, 20).unwrap())
            .unwrap();
        group
            .apply_change(&group.plan_redrive(0..1).unwrap())
            .unwrap();
        assert_eq!(group.next_due_ms(), Some(0)); // redriven: ready at once
        let PollStep::Deliver(again) = group.plan_poll_new(2, 30) else {
            unreachable!()
        };
        group.apply_delivery(again, None).unwrap();
        assert_eq!(group.next_due_ms(), Some(1_030));
    }
}
