//! Pausing a group: [`Pause`], [`GroupState::plan_pause`] and
//! [`GroupState::plan_resume`].
//!
//! A paused group hands out nothing new: a poll answers as if nothing waited
//! ([`PollStep::Idle`] for a pause without an end, [`PollStep::Wait`] until the end of a
//! timed one), while a consumer's own delivery in flight is still returned to it, and
//! acks, nacks and touches of deliveries in flight work as before. Leases keep running:
//! a lease that runs out while the group is paused is expired as usual (a failure), and
//! the message waits for the resume like any other. A timed pause ends by itself once
//! the clock reaches `until_ms`, with no call and no record; a resume ends any pause.

use super::argument::ArgumentError;
use super::change::Change;
use super::state::GroupState;
use super::types::PollStep;

/// The longest timed pause, in ms (one week): a home refuses an `until_ms` further
/// ahead than this (a longer pause is a pause until a resume).
pub const PAUSE_MS_MAX: u64 = 7 * 24 * 60 * 60 * 1000;

/// A pause of a group, as [`Change::Paused`] records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Pause {
    /// When the pause ends by itself (Unix ms), or `None` to hold until a resume.
    pub until_ms: Option<u64>,
}

impl Pause {
    /// Whether this pause still holds at `now_ms`.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::group::Pause;
    ///
    /// assert!(Pause { until_ms: None }.holds_at(u64::MAX));
    /// assert!(Pause { until_ms: Some(10) }.holds_at(9));
    /// assert!(!Pause { until_ms: Some(10) }.holds_at(10));
    /// ```
    pub fn holds_at(&self, now_ms: u64) -> bool {
        self.until_ms.is_none_or(|until_ms| now_ms < until_ms)
    }

    /// Checks the end of a timed pause asked for at `now_ms`: after now, and at most
    /// [`PAUSE_MS_MAX`] ahead.
    ///
    /// # Errors
    ///
    /// [`ArgumentError::OutOfRange`] for `until_ms`.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::group::Pause;
    ///
    /// assert!(Pause::check_until(1_001, 1_000).is_ok());
    /// assert!(Pause::check_until(1_000, 1_000).is_err());
    /// ```
    pub fn check_until(until_ms: u64, now_ms: u64) -> Result<(), ArgumentError> {
        let min = now_ms.saturating_add(1);
        ArgumentError::check_range(
            "until_ms",
            min,
            now_ms.saturating_add(PAUSE_MS_MAX),
            until_ms,
        )
    }
}

impl GroupState {
    /// The pause recorded on this group, whether or not its time has passed (see
    /// [`pause_at`](Self::pause_at)).
    pub fn pause(&self) -> Option<Pause> {
        self.pause
    }

    /// The pause that holds at `now_ms`, if any: a timed pause whose end has passed no
    /// longer holds.
    pub fn pause_at(&self, now_ms: u64) -> Option<Pause> {
        self.pause.filter(|pause| pause.holds_at(now_ms))
    }

    /// Plans pausing the group until `until_ms` (`None`: until a resume). A pause
    /// replaces any pause before it. Changes nothing.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::group::{GroupState, PollStep};
    ///
    /// let mut group = GroupState::new(3, 0).unwrap();
    /// group.apply_change(&group.plan_pause(Some(50))).unwrap();
    /// assert_eq!(group.plan_poll_new(1, 10), PollStep::Wait { until_ms: 50 });
    /// assert!(matches!(group.plan_poll_new(1, 50), PollStep::Deliver(_)));
    /// ```
    pub fn plan_pause(&self, until_ms: Option<u64>) -> Change {
        Change::Paused { until_ms }
    }

    /// Plans resuming the group. `None` if no pause is recorded (there is nothing to
    /// end). Changes nothing.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::group::{GroupState, PollStep};
    ///
    /// let mut group = GroupState::new(3, 0).unwrap();
    /// assert_eq!(group.plan_resume(), None);
    /// group.apply_change(&group.plan_pause(None)).unwrap();
    /// assert_eq!(group.plan_poll_new(1, 0), PollStep::Idle);
    /// group.apply_change(&group.plan_resume().unwrap()).unwrap();
    /// assert!(matches!(group.plan_poll_new(1, 0), PollStep::Deliver(_)));
    /// ```
    pub fn plan_resume(&self) -> Option<Change> {
        self.pause.map(|_| Change::Resumed)
    }

    /// What a poll answers at `now_ms` instead of a new delivery because the group is
    /// paused, if it is.
    #[inline(always)]
    pub(super) fn paused_step(&self, now_ms: u64) -> Option<PollStep> {
        let pause = self.pause?;
        match pause.until_ms {
            None => Some(PollStep::Idle),
            Some(until_ms) if now_ms < until_ms => Some(PollStep::Wait { until_ms }),
            Some(_) => None,
        }
    }

    pub(super) fn apply_pause(&mut self, change: &Change) -> Result<(), &'static str> {
        match change {
            Change::Paused { until_ms } => {
                self.pause = Some(Pause {
                    until_ms: *until_ms,
                });
                Ok(())
            }
            Change::Resumed if self.pause.is_some() => {
                self.pause = None;
                Ok(())
            }
            Change::Resumed => Err("the group is not paused"),
            _ => unreachable!("apply_pause of {change:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::group::{GroupConfig, GroupState, NackOptions, PollStep};

    // Proves a paused group still takes acks and nacks of deliveries in flight, expires
    // leases as usual, and redelivers nothing until it is resumed.
    #[test]
    fn paused_group_settles_but_hands_out_nothing() {
        let config = GroupConfig::new(3).with_lease_ms(100).with_max_in_flight(2);
        let mut group = GroupState::with_config(config, 0).unwrap();
        let mut ids = Vec::new();
        for _ in 0..2 {
            let PollStep::Deliver(new) = group.plan_poll_new(5, 0) else {
                panic!("expected a delivery");
            };
            group.apply_delivery(new, None).unwrap();
            ids.push(new.id);
        }
        group.apply_change(&group.plan_pause(None)).unwrap();
        group
            .apply_change(&group.plan_ack(ids[0], 10).unwrap())
            .unwrap();
        assert_eq!(group.plan_poll_new(5, 10), PollStep::Idle);
        // The second lease runs out while paused: expired, but not redelivered.
        let PollStep::Expire(expiry) = group.plan_poll_new(5, 100) else {
            panic!("expected an expiry");
        };
        group.apply_change(&expiry).unwrap();
        assert_eq!(group.plan_poll_new(5, 100), PollStep::Idle);
        assert_eq!(group.next_due_ms(), None);
        group.apply_change(&group.plan_resume().unwrap()).unwrap();
        let PollStep::Deliver(again) = group.plan_poll_new(5, 100) else {
            panic!("expected a redelivery");
        };
        assert_eq!((again.id.offset, again.id.attempt), (1, 2));
        group.apply_delivery(again, None).unwrap();
        assert!(group
            .plan_nack(again.id, &NackOptions::default(), 100)
            .is_ok());
    }

    // Proves a replayed resume of a group that is not paused is refused.
    #[test]
    fn resume_of_unpaused_group_is_refused() {
        let mut group = GroupState::new(1, 0).unwrap();
        assert!(group.apply_change(&crate::group::Change::Resumed).is_err());
    }
}
