//! The value types that every home of a topic hands out: deliveries, dead letters,
//! nack outcomes, group information and errors.

use crate::group::{DeliveryId, NotOwned};

/// One delivery of a message to a consumer group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery<M> {
    /// The message's offset in the log.
    pub offset: u64,
    /// Which delivery of this message to this group it is, starting at 1.
    pub attempt: u32,
    /// The message itself.
    pub message: M,
}

impl<M> Delivery<M> {
    /// The id to name when acking or nacking this delivery.
    pub fn id(&self) -> DeliveryId {
        DeliveryId {
            offset: self.offset,
            attempt: self.attempt,
        }
    }
}

/// A message a group gave up on after its final attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter<M> {
    /// The message's offset in the log.
    pub offset: u64,
    /// How many deliveries were made before it was dead-lettered.
    pub attempts: u32,
    /// The message itself.
    pub message: M,
}

/// A dead letter with the reason of its final failure and when it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetterInfo<M> {
    /// The message's offset in the log.
    pub offset: u64,
    /// The attempt number of its last delivery.
    pub attempts: u32,
    /// The reason given with the final failure ("lease expired" for an expired lease),
    /// if any.
    pub reason: Option<String>,
    /// When it was dead-lettered, in the topic clock's milliseconds (0 without a clock).
    pub at_ms: u64,
    /// The message itself.
    pub message: M,
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

/// Where a new group starts reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum StartPosition {
    /// At the oldest retained message (offset 0 in memory).
    #[default]
    Earliest,
    /// After the last message published so far.
    Latest,
    /// At this offset, which must lie within the retained log or at its end.
    Offset(u64),
}

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
}

/// Why a topic operation was refused. Nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TopicError {
    /// An argument was out of range: an empty group name, `max_attempts == 0`, or a
    /// start offset past the end of the log.
    #[error("invalid argument: {reason}")]
    InvalidArgument {
        /// What was wrong.
        reason: &'static str,
    },
    /// No group of that name exists.
    #[error("unknown group {group:?}")]
    UnknownGroup {
        /// The name asked for.
        group: String,
    },
    /// A group of that name already exists.
    #[error("group {group:?} already exists")]
    GroupExists {
        /// The name asked for.
        group: String,
    },
    /// The ack or nack did not name the group's exact in-flight delivery.
    #[error("group {group:?}: {source}")]
    NotOwned {
        /// The group.
        group: String,
        /// What was named and what is in flight.
        source: NotOwned,
    },
}
