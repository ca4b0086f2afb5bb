//! The plain data a group is made of and hands out: slots (delivered, unfinished
//! messages), dead-letter notes, counters, and what a poll plans.

use super::change::Change;
use super::DeliveryId;

/// Where one delivered, unfinished message stands.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SlotPhase {
    /// Waiting to be delivered again, not before `not_before_ms`.
    Ready {
        /// The earliest time of the next delivery (ms).
        not_before_ms: u64,
    },
    /// Owned by a consumer.
    InFlight {
        /// The consumer that polled it, if it named itself.
        consumer: Option<String>,
        /// When its lease runs out (ms), if the group has leases.
        lease_until_ms: Option<u64>,
    },
    /// Finished (acked or dead-lettered) while a lower offset is still unfinished; only
    /// ever inside the window of a group with `max_in_flight` > 1.
    Done,
}

/// One message a group has delivered at least once and not yet finished.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Slot {
    /// The message's offset.
    pub offset: u64,
    /// The number of its latest delivery (attempt numbers only ever rise, so an old
    /// delivery's id can never name a new one).
    pub attempt: u32,
    /// Failures (nacks, expired leases) counted against `max_attempts` since it was
    /// first delivered or last redriven.
    pub failures: u32,
    /// Where it stands.
    pub phase: SlotPhase,
}

/// When a dead letter happened and why.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct DeadLetterNote {
    /// The reason of the final failure, if one was given ("lease expired" for a lease).
    pub reason: Option<String>,
    /// When it was dead-lettered (ms); 0 when time was not known (the basic API).
    pub at_ms: u64,
}

/// Counters of a group's history, for operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct GroupCounters {
    /// Deliveries that were not a message's first (retries, releases, expiries, redrives).
    pub redeliveries: u64,
    /// Deliveries handed back with a release.
    pub releases: u64,
    /// Deliveries whose lease ran out.
    pub expired_leases: u64,
    /// Dead letters put back by redrive.
    pub redrives: u64,
    /// Dead letters deleted by purge.
    pub purged: u64,
}

/// What a poll would do, for a group with any settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PollStep {
    /// Nothing to deliver: the log is consumed, or the window is full of unfinished
    /// messages none of which is ready.
    Idle,
    /// `max_in_flight` deliveries are in flight, none of them this consumer's.
    Full,
    /// A message waits out a delay until `until_ms`; nothing above it is delivered.
    Wait {
        /// When it becomes ready (ms).
        until_ms: u64,
    },
    /// This consumer's delivery in flight, returned again unchanged.
    InFlight(DeliveryId),
    /// A lease ran out: apply (persist) this change first, then plan again.
    Expire(Change),
    /// A new delivery: make it in flight with [`GroupState::apply_delivery`](super::GroupState::apply_delivery), or turn it
    /// into a [`Change`] with [`NewDelivery::change`] to persist it first.
    Deliver(NewDelivery),
}

/// A delivery a poll plans to make (see [`PollStep::Deliver`]). Kept small and `Copy`,
/// so that the in-memory home's poll costs no more than the basic [`PollPlan`](super::PollPlan).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NewDelivery {
    /// The delivery's id.
    pub id: DeliveryId,
    /// When its lease runs out (ms), if the group has leases.
    pub lease_until_ms: Option<u64>,
}

impl NewDelivery {
    /// The change that makes this delivery, owned by `consumer`.
    pub fn change(self, consumer: Option<&str>) -> Change {
        Change::Delivered {
            id: self.id,
            consumer: consumer.map(str::to_owned),
            lease_until_ms: self.lease_until_ms,
        }
    }
}
