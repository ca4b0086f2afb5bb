//! The poll plans of a [`GroupState`]: which delivery a poll hands out next (the basic
//! poll, the timed and keyed polls, and the polls of new messages only). Each plan
//! changes nothing; applying it is `apply`'s job.

use super::keys::{KeyLookup, NoKeys};
use super::state::GroupState;
use super::types::{NewDelivery, PollStep};
use super::window_scan::WindowScan;
use super::{DeliveryId, GroupEvent, PollPlan};

impl GroupState {
    /// Plans a poll against a log whose next offset is `log_end`, ignoring time and
    /// consumers: the basic poll. Changes nothing.
    #[inline]
    pub fn poll(&self, log_end: u64) -> PollPlan {
        match self.plan_poll(log_end, 0, None) {
            PollStep::InFlight(id) => PollPlan::InFlight(id),
            PollStep::Deliver(new) => PollPlan::Deliver(GroupEvent::Delivered(new.id)),
            _ => PollPlan::Idle,
        }
    }

    /// Plans a poll by `consumer` (`None`: the anonymous consumer) at `now_ms` against a
    /// log whose next offset is `log_end`. Changes nothing.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::group::{GroupConfig, GroupState, PollStep};
    ///
    /// let mut group = GroupState::with_config(GroupConfig::new(1).with_max_in_flight(2), 0).unwrap();
    /// let PollStep::Deliver(new) = group.plan_poll(5, 0, Some("a")) else { unreachable!() };
    /// group.apply_change(&new.change(Some("a"))).unwrap();
    /// // "a" gets its own delivery back; "b" gets the next message.
    /// assert!(matches!(group.plan_poll(5, 0, Some("a")), PollStep::InFlight(_)));
    /// let PollStep::Deliver(new) = group.plan_poll(5, 0, Some("b")) else { unreachable!() };
    /// assert_eq!(new.id.offset, 1);
    /// ```
    #[inline(always)]
    pub fn plan_poll(&self, log_end: u64, now_ms: u64, consumer: Option<&str>) -> PollStep {
        self.plan_poll_keyed(log_end, now_ms, consumer, &mut NoKeys)
    }

    /// [`plan_poll`](Self::plan_poll) on a log whose messages may carry keys, which
    /// `keys` tells (see the module docs of `keys.rs`). Changes nothing.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::group::{GroupConfig, GroupState, PollStep};
    ///
    /// let mut group = GroupState::with_config(GroupConfig::new(1).with_max_in_flight(4), 0).unwrap();
    /// // Offsets 0 and 1 share a key, 2 has none.
    /// let mut keys = |offset: u64| (offset < 2).then_some(7);
    /// let PollStep::Deliver(new) = group.plan_poll_keyed(3, 0, Some("a"), &mut keys) else { unreachable!() };
    /// group.apply_delivery(new, Some("a")).unwrap();
    /// // "b" skips offset 1 (its key is in flight) and gets offset 2.
    /// let PollStep::Deliver(new) = group.plan_poll_keyed(3, 0, Some("b"), &mut keys) else { unreachable!() };
    /// assert_eq!(new.id.offset, 2);
    /// ```
    #[inline(always)]
    pub fn plan_poll_keyed(
        &self,
        log_end: u64,
        now_ms: u64,
        consumer: Option<&str>,
        keys: &mut dyn KeyLookup,
    ) -> PollStep {
        if let Some(change) = self.plan_expiry(now_ms) {
            return PollStep::Expire(change);
        }
        if self.in_flight > 0 {
            if let Some(own) = self.owned(consumer).next() {
                return PollStep::InFlight(own);
            }
        }
        self.plan_unexpired(log_end, now_ms, keys, &mut WindowScan::default())
    }

    /// Plans a poll for a *new* delivery at `now_ms`, whoever owns what: the step a batch
    /// poll repeats after taking the consumer's own deliveries ([`owned`](Self::owned)).
    /// Never returns [`PollStep::InFlight`]. Changes nothing.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::group::{GroupConfig, GroupState, PollStep};
    ///
    /// let config = GroupConfig::new(1).with_max_in_flight(4);
    /// let mut group = GroupState::with_config(config, 0).unwrap();
    /// // A batch poll of 3 by "a": three new deliveries, all owned by "a".
    /// for _ in 0..3 {
    ///     let PollStep::Deliver(new) = group.plan_poll_new(5, 0) else { unreachable!() };
    ///     group.apply_delivery(new, Some("a")).unwrap();
    /// }
    /// let offsets: Vec<u64> = group.owned(Some("a")).map(|id| id.offset).collect();
    /// assert_eq!(offsets, [0, 1, 2]);
    /// ```
    #[inline(always)]
    pub fn plan_poll_new(&self, log_end: u64, now_ms: u64) -> PollStep {
        self.plan_poll_new_keyed(log_end, now_ms, &mut NoKeys)
    }

    /// [`plan_poll_new`](Self::plan_poll_new) on a log whose messages may carry keys,
    /// which `keys` tells (see the module docs of `keys.rs`). Changes nothing.
    #[inline(always)]
    pub fn plan_poll_new_keyed(
        &self,
        log_end: u64,
        now_ms: u64,
        keys: &mut dyn KeyLookup,
    ) -> PollStep {
        self.plan_poll_new_scanned(log_end, now_ms, keys, &mut WindowScan::default())
    }

    /// [`plan_poll_new_keyed`](Self::plan_poll_new_keyed) for one of a batch's deliveries:
    /// `scan` carries the walk of the window from the batch's previous plan, so a batch
    /// is linear in the window (see [`WindowScan`]). It answers exactly what
    /// `plan_poll_new_keyed` answers. Changes nothing but `scan`.
    #[inline(always)]
    pub fn plan_poll_new_scanned(
        &self,
        log_end: u64,
        now_ms: u64,
        keys: &mut dyn KeyLookup,
        scan: &mut WindowScan,
    ) -> PollStep {
        // Resumed, the state is the one planned at this same time plus one delivery,
        // whose lease (at least 1 ms) ends later: no lease has come due since.
        if scan.resumes(self, log_end, now_ms) {
            debug_assert_eq!(
                self.plan_expiry(now_ms),
                None,
                "a resumed scan skips expiry"
            );
            return self.plan_unexpired(log_end, now_ms, keys, scan);
        }
        match self.plan_expiry(now_ms) {
            Some(change) => PollStep::Expire(change),
            None => self.plan_unexpired(log_end, now_ms, keys, scan),
        }
    }

    /// [`plan_poll_new_keyed`](Self::plan_poll_new_keyed) once no lease is due.
    #[inline(always)]
    fn plan_unexpired(
        &self,
        log_end: u64,
        now_ms: u64,
        keys: &mut dyn KeyLookup,
        scan: &mut WindowScan,
    ) -> PollStep {
        if let Some(step) = self.paused_step(now_ms) {
            return step;
        }
        if self.in_flight > 0 && self.in_flight >= self.config.max_in_flight {
            return PollStep::Full;
        }
        let offset = match self.next_candidate(log_end, now_ms, keys, scan) {
            Ok(offset) => offset,
            Err(step) => return step,
        };
        let attempt = match self.slot(offset) {
            Some(slot) => slot.attempt.checked_add(1),
            None => self.first_attempt(offset),
        };
        // No number left for it (see `seek.rs`): it waits for a seek past it.
        let Some(attempt) = attempt else {
            return PollStep::Idle;
        };
        PollStep::Deliver(NewDelivery {
            id: DeliveryId { offset, attempt },
            lease_until_ms: self.config.lease_ms.map(|l| now_ms.saturating_add(l)),
        })
    }
}
