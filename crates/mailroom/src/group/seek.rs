//! Moving a group: [`GroupState::plan_seek`], and the rule that keeps attempt numbers
//! unique across seeks.
//!
//! A seek to offset `p` makes `p` the group's position: the next message it delivers is
//! the one at `p` (then `p + 1`, ...). Everything unfinished is dropped, deliveries in
//! flight included (their acks, nacks and touches are then [`NotOwned`](super::NotOwned)),
//! and so are redriven messages waiting below the old position. The dead-letter queue,
//! the settings, the counters and any pause stay as they are. Which offsets are valid
//! (the retained log, its end) is the home's to check: the state machine does not know
//! the log.
//!
//! # Attempt numbers after a seek back
//!
//! The group keeps attempts only for the messages it has not finished; once a message
//! is acked its count is gone. Seeking back over it would, by the ordinary rule, deliver
//! it again as attempt 1, a `(offset, attempt)` already handed out, and a late ack of the
//! old delivery could settle the new one. So the group remembers two numbers:
//!
//! - its *frontier*: every offset it has ever delivered lies below it (the highest
//!   delivered offset + 1, kept across seeks);
//! - its *highest attempt*: the largest attempt number it has ever handed out.
//!
//! A seek to a position below the frontier sets the *attempt floor* to the highest
//! attempt and marks every offset below the frontier as *rewound*. From then on the
//! first delivery of a rewound offset is attempt `floor + 1` (and each redelivery one
//! more, as always); offsets at or above the frontier start at 1. A redriven dead letter
//! of a rewound offset comes back after the highest attempt so far. So no
//! `(offset, attempt)` is ever handed out twice, however often the group seeks. A seek
//! forward past the frontier changes neither number. A group whose highest attempt is
//! `u32::MAX` hands out no rewound offset (it has no number left for it) until it seeks
//! past its frontier.

use super::change::Change;
use super::state::GroupState;

impl GroupState {
    /// Plans moving the group to `position`. The home checks `position` against its log
    /// first. Changes nothing.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::group::{GroupState, PollStep};
    ///
    /// let mut group = GroupState::new(3, 0).unwrap();
    /// let PollStep::Deliver(first) = group.plan_poll_new(1, 0) else { unreachable!() };
    /// group.apply_delivery(first, None).unwrap();
    /// group.apply_change(&group.plan_ack(first.id, 0).unwrap()).unwrap();
    ///
    /// // Back to 0: the message is delivered again, with a new attempt number.
    /// group.apply_change(&group.plan_seek(0)).unwrap();
    /// let PollStep::Deliver(again) = group.plan_poll_new(1, 0) else { unreachable!() };
    /// assert_eq!((again.id.offset, again.id.attempt), (0, 2));
    /// ```
    pub fn plan_seek(&self, position: u64) -> Change {
        Change::Seeked { position }
    }

    /// Every offset below this one has been delivered at some time (see the module
    /// docs of `seek.rs`).
    pub fn frontier(&self) -> u64 {
        self.frontier
    }

    /// The largest attempt number this group has handed out.
    pub fn attempts_high(&self) -> u32 {
        self.attempts_high
    }

    /// The attempt number of the first delivery of `offset` when no slot holds it:
    /// `None` if no number is left for it.
    #[inline(always)]
    pub(super) fn first_attempt(&self, offset: u64) -> Option<u32> {
        if offset < self.rewound_below {
            self.attempt_floor.checked_add(1)
        } else {
            Some(1)
        }
    }

    /// The attempt a redriven dead letter of `offset`, last delivered as `attempts`,
    /// comes back with: its own, unless a seek may have delivered the offset again since.
    pub(super) fn revived_attempt(&self, offset: u64, attempts: u32) -> u32 {
        if offset < self.rewound_below {
            attempts.max(self.attempts_high)
        } else {
            attempts
        }
    }

    pub(super) fn seek(&mut self, position: u64) {
        if position < self.frontier {
            self.rewound_below = self.frontier;
            self.attempt_floor = self.attempts_high;
        }
        self.window.clear();
        self.redriven.clear();
        self.in_flight = 0;
        self.position = position;
    }
}

#[cfg(test)]
mod tests {
    use crate::group::{DeliveryId, GroupConfig, GroupState, NackKind, NackOptions, PollStep};

    fn deliver(group: &mut GroupState, log_end: u64) -> DeliveryId {
        let PollStep::Deliver(new) = group.plan_poll_new(log_end, 0) else {
            panic!(
                "expected a delivery, got {:?}",
                group.plan_poll_new(log_end, 0)
            );
        };
        group.apply_delivery(new, None).unwrap();
        new.id
    }

    // Proves a seek drops deliveries in flight (their acks are refused) and that offsets
    // delivered before the seek come back with attempts above every number used.
    #[test]
    fn seek_back_never_reuses_an_attempt() {
        let config = GroupConfig::new(5).with_max_in_flight(2);
        let mut group = GroupState::with_config(config, 0).unwrap();
        let first = deliver(&mut group, 4);
        group
            .apply_change(&group.plan_nack(first, &NackOptions::default(), 0).unwrap())
            .unwrap();
        let again = deliver(&mut group, 4);
        assert_eq!(again.attempt, 2);
        let second = deliver(&mut group, 4);
        group.apply_change(&group.plan_seek(0)).unwrap();
        assert!(group.plan_ack(again, 0).is_err());
        assert!(group.plan_ack(second, 0).is_err());
        assert_eq!(group.in_flight_count(), 0);
        // Both offsets below the frontier (2) start above the highest attempt (2).
        assert_eq!(
            deliver(&mut group, 4),
            DeliveryId {
                offset: 0,
                attempt: 3
            }
        );
        assert_eq!(
            deliver(&mut group, 4),
            DeliveryId {
                offset: 1,
                attempt: 3
            }
        );
        assert_eq!(group.frontier(), 2);
    }

    // Proves a seek forward past the frontier starts fresh offsets at attempt 1, and a
    // later seek back covers them too.
    #[test]
    fn seek_forward_then_back() {
        let mut group = GroupState::new(3, 0).unwrap();
        let first = deliver(&mut group, 10);
        group.apply_change(&group.plan_seek(5)).unwrap();
        assert_eq!(
            deliver(&mut group, 10),
            DeliveryId {
                offset: 5,
                attempt: 1
            }
        );
        assert!(group.plan_ack(first, 0).is_err());
        group.apply_change(&group.plan_seek(0)).unwrap();
        assert_eq!(
            deliver(&mut group, 10),
            DeliveryId {
                offset: 0,
                attempt: 2
            }
        );
    }

    // Proves a dead letter redriven after a seek back comes back after every attempt the
    // seek handed out for its offset.
    #[test]
    fn redrive_after_seek_back_skips_used_attempts() {
        let mut group = GroupState::new(1, 0).unwrap();
        let only = deliver(&mut group, 1);
        let reject = NackOptions::new(NackKind::Reject);
        group
            .apply_change(&group.plan_nack(only, &reject, 0).unwrap())
            .unwrap();
        group.apply_change(&group.plan_seek(0)).unwrap();
        let second = deliver(&mut group, 1);
        assert_eq!(second.attempt, 2);
        group
            .apply_change(&group.plan_ack(second, 0).unwrap())
            .unwrap();
        group
            .apply_change(&group.plan_redrive(0..1).unwrap())
            .unwrap();
        assert_eq!(
            deliver(&mut group, 1),
            DeliveryId {
                offset: 0,
                attempt: 3
            }
        );
    }
}
