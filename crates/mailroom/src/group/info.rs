//! What a group tells operators about itself: [`GroupInfo`] and the deliveries in
//! flight, built here once for every home.

use super::{DeliveryId, GroupState, Pause, SlotPhase};

/// A snapshot of one group, for operators.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupInfo {
    /// The group's name.
    pub name: String,
    /// The offset of the next message the group has to finish.
    pub position: u64,
    /// Deliveries made so far of the message at `position` (0 if none).
    pub attempt: u32,
    /// The delivery in flight, if any.
    pub in_flight: Option<DeliveryId>,
    /// The failures allowed for one message
    /// ([`GroupConfig::max_attempts`](crate::group::GroupConfig::max_attempts)).
    pub max_attempts: u32,
    /// Messages published but not yet finished by this group.
    pub lag: u64,
    /// How many messages this group has dead-lettered.
    pub dead_letters: u64,
    /// The pause that holds, if the group is paused.
    pub pause: Option<Pause>,
}

impl GroupState {
    /// What operators see of this group, named `name`, against a log whose next offset
    /// is `log_end` (read it after the state, so the lag is never negative: a log only
    /// grows), as at time 0 (see [`info_at`](Self::info_at)).
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::group::GroupState;
    ///
    /// let group = GroupState::new(3, 2).unwrap();
    /// let info = group.info("billing", 5);
    /// assert_eq!((info.name.as_str(), info.position, info.lag), ("billing", 2, 3));
    /// ```
    pub fn info(&self, name: &str, log_end: u64) -> GroupInfo {
        self.info_at(name, log_end, 0)
    }

    /// [`info`](Self::info) at `now_ms`: a timed pause whose end has passed is not shown.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::group::{GroupState, Pause};
    ///
    /// let mut group = GroupState::new(3, 0).unwrap();
    /// group.apply_change(&group.plan_pause(Some(100))).unwrap();
    /// assert_eq!(group.info_at("g", 0, 99).pause, Some(Pause { until_ms: Some(100) }));
    /// assert_eq!(group.info_at("g", 0, 100).pause, None);
    /// ```
    pub fn info_at(&self, name: &str, log_end: u64, now_ms: u64) -> GroupInfo {
        GroupInfo {
            name: name.to_owned(),
            position: self.position(),
            attempt: self.attempt(),
            in_flight: self.in_flight(),
            max_attempts: self.max_attempts(),
            lag: self.lag(log_end),
            dead_letters: self.dead_letters().len() as u64,
            pause: self.pause_at(now_ms),
        }
    }

    /// Every delivery in flight, whoever owns it: redriven messages first, then by
    /// offset.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::group::{GroupConfig, GroupState, PollStep};
    ///
    /// let mut group = GroupState::with_config(GroupConfig::new(3).with_max_in_flight(2), 0).unwrap();
    /// for consumer in ["a", "b"] {
    ///     let PollStep::Deliver(new) = group.plan_poll(5, 0, Some(consumer)) else { unreachable!() };
    ///     group.apply_delivery(new, Some(consumer)).unwrap();
    /// }
    /// let offsets: Vec<u64> = group.deliveries_in_flight().iter().map(|id| id.offset).collect();
    /// assert_eq!(offsets, [0, 1]);
    /// ```
    pub fn deliveries_in_flight(&self) -> Vec<DeliveryId> {
        self.slots()
            .filter(|slot| matches!(slot.phase, SlotPhase::InFlight { .. }))
            .map(|slot| DeliveryId {
                offset: slot.offset,
                attempt: slot.attempt,
            })
            .collect()
    }
}
