//! What a group tells operators about itself: [`GroupInfo`] and the deliveries in
//! flight ([`InFlightDelivery`]), built here once for every home.

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

/// One delivery in flight as operators see it: which it is, who polled it and until
/// when they own it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct InFlightDelivery {
    /// The delivery.
    pub id: DeliveryId,
    /// The consumer that polled it, or `None` for the anonymous consumer.
    pub consumer: Option<String>,
    /// When its lease runs out (ms), or `None` in a group without leases. It may lie in
    /// the past: an expired lease is taken back at the next call that looks at the time.
    pub lease_until_ms: Option<u64>,
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
        self.in_flight_details()
            .into_iter()
            .map(|delivery| delivery.id)
            .collect()
    }

    /// [`deliveries_in_flight`](Self::deliveries_in_flight) with each one's consumer and
    /// lease deadline, in the same order.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::group::{GroupConfig, GroupState, PollStep};
    ///
    /// let config = GroupConfig::new(3).with_max_in_flight(2).with_lease_ms(500);
    /// let mut group = GroupState::with_config(config, 0).unwrap();
    /// for (consumer, now_ms) in [(Some("a"), 10), (None, 20)] {
    ///     let PollStep::Deliver(new) = group.plan_poll(5, now_ms, consumer) else { unreachable!() };
    ///     group.apply_delivery(new, consumer).unwrap();
    /// }
    /// let shown: Vec<_> = group
    ///     .in_flight_details()
    ///     .into_iter()
    ///     .map(|d| (d.id.offset, d.consumer, d.lease_until_ms))
    ///     .collect();
    /// assert_eq!(shown, [(0, Some("a".to_owned()), Some(510)), (1, None, Some(520))]);
    /// ```
    pub fn in_flight_details(&self) -> Vec<InFlightDelivery> {
        self.slots()
            .filter_map(|slot| match &slot.phase {
                SlotPhase::InFlight {
                    consumer,
                    lease_until_ms,
                } => Some(InFlightDelivery {
                    id: DeliveryId {
                        offset: slot.offset,
                        attempt: slot.attempt,
                    },
                    consumer: consumer.clone(),
                    lease_until_ms: *lease_until_ms,
                }),
                _ => None,
            })
            .collect()
    }
}
