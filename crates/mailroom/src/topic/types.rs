//! The value types that every home of a topic hands out: deliveries, dead letters,
//! nack outcomes, group information and errors.

use crate::group::{ArgumentError, DeliveryId, GroupError, NotOwned};

pub use crate::group::{GroupInfo, Nack};

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

/// Why a topic operation was refused. Nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TopicError {
    /// An argument was out of range: an empty group name, `max_attempts == 0`, a start
    /// offset past the end of the log, a setting or option past its limit. It names the
    /// field, the bound and the value.
    #[error("invalid argument: {0}")]
    InvalidArgument(#[from] ArgumentError),
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

impl From<GroupError> for TopicError {
    /// The refusal of a group's settings (or snapshot) as a topic's refusal of the
    /// arguments that made them.
    fn from(error: GroupError) -> TopicError {
        TopicError::InvalidArgument(match error {
            GroupError::ZeroMaxAttempts => ArgumentError::OutOfRange {
                field: "max_attempts",
                min: 1,
                max: u64::from(u32::MAX),
                got: 0,
            },
            GroupError::InvalidConfig(argument) => argument,
            GroupError::InvalidSnapshot(reason) => ArgumentError::Unsupported { reason },
            GroupError::InvalidTransition { .. } | GroupError::InvalidChange { .. } => {
                ArgumentError::Unsupported {
                    reason: "invalid group settings",
                }
            }
        })
    }
}
