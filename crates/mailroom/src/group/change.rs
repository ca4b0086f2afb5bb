//! [`Change`]: the full vocabulary of group transitions, of which the basic
//! [`GroupEvent`] is the subset without time, consumers or reasons.

use std::ops::Range;

use super::state::taken_by;
use super::{DeadLetterEntry, DeliveryId, GroupEvent};

/// Why an in-flight delivery ended without an ack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Failure {
    /// The consumer nacked it: a failure, counted against `max_attempts`.
    Nack,
    /// The consumer handed it back: not a failure.
    Release,
    /// The consumer rejected it: dead-lettered at once.
    Reject,
    /// Its lease ran out: a failure, like a nack.
    LeaseExpired,
}

/// The reason recorded with a dead letter whose final failure was an expired lease.
pub const LEASE_EXPIRED_REASON: &str = "lease expired";

/// One change to a group's state: what the plan methods return and
/// [`GroupState::apply_change`](super::GroupState::apply_change) performs. Durable homes
/// persist these (the store writes each one before anyone observes it) and replay them
/// on restart.
///
/// Every change names the exact delivery it is about, so a change planned against one
/// delivery can never settle another.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Change {
    /// A poll created this delivery and marked it in flight.
    Delivered {
        /// The new delivery.
        id: DeliveryId,
        /// The consumer that polled, if it named itself.
        consumer: Option<String>,
        /// When its lease runs out (ms), if the group has leases.
        lease_until_ms: Option<u64>,
    },
    /// The delivery was acknowledged and is finished.
    Acked(DeliveryId),
    /// The owner extended the delivery's lease.
    Touched {
        /// The delivery.
        id: DeliveryId,
        /// Its new deadline (ms).
        lease_until_ms: u64,
    },
    /// The delivery ended without an ack: it waits for another attempt, or it was
    /// dead-lettered.
    Failed {
        /// The delivery.
        id: DeliveryId,
        /// How it ended.
        cause: Failure,
        /// When the message may be delivered again (ms); `None` means dead-lettered.
        retry_at_ms: Option<u64>,
        /// The reason given (kept with a dead letter).
        reason: Option<String>,
        /// When it happened (ms): the nack's time, or the lease's deadline.
        at_ms: u64,
    },
    /// The dead letters with offsets in this range went back to the group for delivery.
    Redriven {
        /// The offsets.
        offsets: Range<u64>,
    },
    /// The dead letters with offsets in this range were deleted.
    Purged {
        /// The offsets.
        offsets: Range<u64>,
    },
    /// The group moved to `position`, dropping everything unfinished (see
    /// [`GroupState::plan_seek`](super::GroupState::plan_seek)).
    Seeked {
        /// The new position.
        position: u64,
    },
    /// The group was paused (see [`GroupState::plan_pause`](super::GroupState::plan_pause)).
    Paused {
        /// When the pause ends by itself (ms), or `None` for a pause until a resume.
        until_ms: Option<u64>,
    },
    /// The group's pause ended by a resume.
    Resumed,
}

impl Change {
    /// The delivery this change is about, if it is about one.
    #[inline]
    pub fn delivery(&self) -> Option<DeliveryId> {
        match self {
            Change::Delivered { id, .. }
            | Change::Acked(id)
            | Change::Touched { id, .. }
            | Change::Failed { id, .. } => Some(*id),
            Change::Redriven { .. }
            | Change::Purged { .. }
            | Change::Seeked { .. }
            | Change::Paused { .. }
            | Change::Resumed => None,
        }
    }

    /// Whether this change (a redrive or purge) takes the dead letter `entry` out of the
    /// queue. A redrive leaves a message whose attempt numbers are used up (`u32::MAX`):
    /// it could not be delivered again without reusing an id.
    pub fn takes_dead_letter(&self, entry: &DeadLetterEntry) -> bool {
        match self {
            Change::Redriven { offsets } => taken_by(entry, offsets, true),
            Change::Purged { offsets } => taken_by(entry, offsets, false),
            _ => false,
        }
    }

    /// Whether this change dead-letters its delivery.
    #[inline]
    pub fn dead_letters(&self) -> bool {
        matches!(
            self,
            Change::Failed {
                retry_at_ms: None,
                ..
            }
        )
    }

    /// The basic event this change is, if it carries nothing a basic event cannot say (no
    /// consumer, lease, reason, time or delay, and a plain nack).
    pub fn basic_event(&self) -> Option<GroupEvent> {
        match self {
            Change::Delivered {
                id,
                consumer: None,
                lease_until_ms: None,
            } => Some(GroupEvent::Delivered(*id)),
            Change::Acked(id) => Some(GroupEvent::Acked(*id)),
            Change::Failed {
                id,
                cause: Failure::Nack,
                retry_at_ms,
                reason: None,
                at_ms: 0,
            } => match retry_at_ms {
                None => Some(GroupEvent::DeadLettered(*id)),
                Some(0) => Some(GroupEvent::Retried(*id)),
                Some(_) => None,
            },
            _ => None,
        }
    }
}

/// What a nack did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Nack {
    /// Attempts remain (or it was a release): ownership was released and the message will
    /// be delivered again, as attempt + 1.
    Retry,
    /// That was the final attempt: the message is in the group's dead-letter queue and
    /// the cursor moved past it.
    DeadLettered,
}

impl Change {
    /// What this change, applied as the answer to a nack (of any kind), did: every home
    /// answers a nack with this.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::group::{Change, DeliveryId, GroupEvent, Nack};
    ///
    /// let id = DeliveryId { offset: 0, attempt: 1 };
    /// assert_eq!(Change::from(GroupEvent::Retried(id)).nack_outcome(), Nack::Retry);
    /// assert_eq!(Change::from(GroupEvent::DeadLettered(id)).nack_outcome(), Nack::DeadLettered);
    /// ```
    #[inline]
    pub fn nack_outcome(&self) -> Nack {
        if self.dead_letters() {
            Nack::DeadLettered
        } else {
            Nack::Retry
        }
    }
}

impl From<GroupEvent> for Change {
    fn from(event: GroupEvent) -> Change {
        let failed = |id, retry_at_ms| Change::Failed {
            id,
            cause: Failure::Nack,
            retry_at_ms,
            reason: None,
            at_ms: 0,
        };
        match event {
            GroupEvent::Delivered(id) => Change::Delivered {
                id,
                consumer: None,
                lease_until_ms: None,
            },
            GroupEvent::Acked(id) => Change::Acked(id),
            GroupEvent::Retried(id) => failed(id, Some(0)),
            GroupEvent::DeadLettered(id) => failed(id, None),
        }
    }
}
