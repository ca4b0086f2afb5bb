//! What the group's calls refuse with: a settlement that names no delivery of the
//! caller's ([`NotOwned`]) and a change, setting or history that does not fit
//! ([`GroupError`]).

use std::fmt;

use super::{ArgumentError, Change, DeliveryId, GroupEvent};
#[cfg(doc)]
use super::{GroupConfig, GroupState, NackOptions};

/// An ack, nack or touch that does not name the exact delivery in flight (or names one
/// whose lease has run out).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NotOwned {
    /// The delivery the caller named.
    pub requested: DeliveryId,
    /// The delivery in flight at that offset, else the group's lowest in flight, if any.
    pub current: Option<DeliveryId>,
}

impl fmt::Display for NotOwned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.current {
            Some(current) => write!(
                f,
                "{} is not the current delivery ({current} is in flight)",
                self.requested
            ),
            None => write!(f, "{} is not in flight (nothing is)", self.requested),
        }
    }
}

impl std::error::Error for NotOwned {}

/// Why a group could not be created, restored or changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupError {
    /// `max_attempts` was 0; every message needs at least one delivery.
    ZeroMaxAttempts,
    /// The event does not follow from the current state (see [`GroupState::apply`]).
    InvalidTransition {
        /// The event that was refused.
        event: GroupEvent,
        /// The group's position when it was refused.
        position: u64,
        /// The attempt count at that position.
        attempt: u32,
        /// Whether a delivery was in flight.
        in_flight: bool,
    },
    /// A snapshot's fields contradict each other.
    InvalidSnapshot(&'static str),
    /// A setting is out of range (see [`GroupConfig::check`], [`NackOptions::check`]).
    InvalidConfig(ArgumentError),
    /// The change does not follow from the current state (see
    /// [`GroupState::apply_change`]).
    InvalidChange {
        /// The change that was refused.
        change: Box<Change>,
        /// Why.
        reason: &'static str,
    },
}

impl fmt::Display for GroupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GroupError::ZeroMaxAttempts => f.write_str("max_attempts must be at least 1"),
            GroupError::InvalidTransition {
                event,
                position,
                attempt,
                in_flight,
            } => write!(
                f,
                "event {event:?} does not follow from position {position}, attempt {attempt}, in flight {in_flight}"
            ),
            GroupError::InvalidSnapshot(why) => write!(f, "invalid group snapshot: {why}"),
            GroupError::InvalidConfig(why) => write!(f, "invalid group setting: {why}"),
            GroupError::InvalidChange { change, reason } => {
                write!(f, "change {change:?} does not follow: {reason}")
            }
        }
    }
}

impl std::error::Error for GroupError {}
