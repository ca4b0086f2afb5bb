//! The consumer-group state machine: one cursor, one delivery attempt, one in-flight flag
//! and one dead-letter queue, written once and reused by every home of a topic.
//!
//! A [`GroupState`] knows nothing about where messages live. Its homes (the in-memory
//! [`Topic`](crate::topic::Topic), the durable store, the server) tell it how long the log
//! is and fetch payloads themselves.
//!
//! # Planning and applying
//!
//! Every transition happens in two steps, so that a durable home can persist a change
//! before anyone sees it:
//!
//! 1. A *plan* method ([`poll`](GroupState::poll), [`ack`](GroupState::ack),
//!    [`nack`](GroupState::nack)) reads the state, checks the rules and returns the
//!    [`GroupEvent`] that would happen. It changes nothing.
//! 2. [`apply`](GroupState::apply) performs an event. A durable home writes the event to
//!    disk first and applies it once it is synced; on restart it replays the same events
//!    through the same `apply`, which re-checks each one, so a damaged history is
//!    refused rather than trusted.
//!
//! # Rules
//!
//! - A poll at the end of the log plans nothing.
//! - A poll while a delivery is in flight returns that same delivery: a repeated poll is
//!   not a new attempt.
//! - Otherwise a poll creates the next attempt (the first is 1) for the message at the
//!   cursor and marks it in flight.
//! - `ack` and `nack` must name the exact in-flight delivery: same offset, same attempt.
//!   Anything else is [`NotOwned`] and changes nothing.
//! - `ack` moves the cursor past the message and resets the attempt.
//! - A `nack` below `max_attempts` only clears in-flight; the next poll is attempt + 1.
//! - The final `nack` dead-letters the message once and moves the cursor on.
//!
//! # Example
//!
//! ```
//! use mailroom::group::{GroupEvent, GroupState, PollPlan};
//!
//! let mut group = GroupState::new(2, 0).unwrap();
//! let log_end = 1; // one message, at offset 0
//!
//! let PollPlan::Deliver(event) = group.poll(log_end) else { unreachable!() };
//! group.apply(event).unwrap();
//! let first = event.delivery();
//! assert_eq!((first.offset, first.attempt), (0, 1));
//!
//! // A repeated poll returns the same attempt.
//! assert_eq!(group.poll(log_end), PollPlan::InFlight(first));
//!
//! // A retryable nack only releases ownership; acking now fails.
//! group.apply(group.nack(first).unwrap()).unwrap();
//! assert!(group.ack(first).is_err());
//!
//! // The next poll is attempt 2, the last one allowed; its nack dead-letters.
//! let PollPlan::Deliver(event) = group.poll(log_end) else { unreachable!() };
//! group.apply(event).unwrap();
//! let second = event.delivery();
//! assert_eq!(second.attempt, 2);
//! let event = group.nack(second).unwrap();
//! assert_eq!(event, GroupEvent::DeadLettered(second));
//! group.apply(event).unwrap();
//! assert_eq!(group.position(), 1);
//! assert_eq!(group.dead_letters().len(), 1);
//! ```

use std::fmt;

/// Names one delivery: the message's offset and which attempt at it this is.
///
/// Acks and nacks are fenced to the exact `DeliveryId`, so a late answer from an
/// earlier attempt can never settle a later one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeliveryId {
    /// The message's offset in the topic's log.
    pub offset: u64,
    /// Which delivery of that message this is, starting at 1.
    pub attempt: u32,
}

impl fmt::Display for DeliveryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "offset {} attempt {}", self.offset, self.attempt)
    }
}

/// A message this group gave up on, without its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DeadLetterEntry {
    /// The message's offset in the log.
    pub offset: u64,
    /// How many deliveries were made before it was dead-lettered.
    pub attempts: u32,
}

/// One change to a group's state. Homes persist these and replay them on restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupEvent {
    /// A poll created this delivery and marked it in flight.
    Delivered(DeliveryId),
    /// The in-flight delivery was acknowledged; the cursor moves past it.
    Acked(DeliveryId),
    /// The in-flight delivery was nacked with attempts left; ownership is released.
    Retried(DeliveryId),
    /// The final attempt was nacked; the message is dead-lettered and the cursor moves on.
    DeadLettered(DeliveryId),
}

impl GroupEvent {
    /// The delivery this event is about.
    pub fn delivery(&self) -> DeliveryId {
        match *self {
            GroupEvent::Delivered(id)
            | GroupEvent::Acked(id)
            | GroupEvent::Retried(id)
            | GroupEvent::DeadLettered(id) => id,
        }
    }
}

/// What a poll would do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollPlan {
    /// The cursor is at the end of the log: nothing to deliver, nothing changes.
    Idle,
    /// A delivery is already in flight; the poll returns it unchanged.
    InFlight(DeliveryId),
    /// A new attempt; apply the event to make it in flight.
    Deliver(GroupEvent),
}

/// An ack or nack that does not name the exact in-flight delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NotOwned {
    /// The delivery the caller named.
    pub requested: DeliveryId,
    /// The delivery actually in flight, if any.
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
        }
    }
}

impl std::error::Error for GroupError {}

/// The plain-data form of a group, for checkpoints. Restore it with
/// [`GroupState::from_snapshot`], which checks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSnapshot {
    /// The offset of the next message to finish.
    pub position: u64,
    /// Deliveries made so far of the message at `position` (0 if none).
    pub attempt: u32,
    /// Whether attempt `attempt` is in flight.
    pub in_flight: bool,
    /// The total number of deliveries allowed for one message.
    pub max_attempts: u32,
    /// The dead-letter queue, oldest first.
    pub dead_letters: Vec<DeadLetterEntry>,
}

/// One consumer group's delivery state. See the [module docs](self) for the rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupState {
    position: u64,
    attempt: u32,
    in_flight: bool,
    max_attempts: u32,
    dead_letters: Vec<DeadLetterEntry>,
}

impl GroupState {
    /// A group that will next deliver the message at `position`.
    ///
    /// # Errors
    ///
    /// [`GroupError::ZeroMaxAttempts`] if `max_attempts` is 0.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::group::GroupState;
    ///
    /// let group = GroupState::new(3, 0).unwrap();
    /// assert_eq!(group.position(), 0);
    /// assert!(GroupState::new(0, 0).is_err());
    /// ```
    pub fn new(max_attempts: u32, position: u64) -> Result<Self, GroupError> {
        if max_attempts == 0 {
            return Err(GroupError::ZeroMaxAttempts);
        }
        Ok(GroupState {
            position,
            attempt: 0,
            in_flight: false,
            max_attempts,
            dead_letters: Vec::new(),
        })
    }

    /// Restores a group from a checkpoint.
    ///
    /// # Errors
    ///
    /// [`GroupError::InvalidSnapshot`] if the fields contradict each other, for example an
    /// attempt above `max_attempts` or a delivery in flight with no attempt.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::group::GroupState;
    ///
    /// let group = GroupState::new(3, 7).unwrap();
    /// let restored = GroupState::from_snapshot(group.snapshot()).unwrap();
    /// assert_eq!(restored, group);
    /// ```
    pub fn from_snapshot(snapshot: GroupSnapshot) -> Result<Self, GroupError> {
        if snapshot.max_attempts == 0 {
            return Err(GroupError::ZeroMaxAttempts);
        }
        if snapshot.attempt > snapshot.max_attempts {
            return Err(GroupError::InvalidSnapshot("attempt exceeds max_attempts"));
        }
        if snapshot.in_flight && snapshot.attempt == 0 {
            return Err(GroupError::InvalidSnapshot("in flight with no attempt"));
        }
        if !snapshot.in_flight && snapshot.attempt == snapshot.max_attempts {
            return Err(GroupError::InvalidSnapshot(
                "attempts exhausted but not dead-lettered",
            ));
        }
        Ok(GroupState {
            position: snapshot.position,
            attempt: snapshot.attempt,
            in_flight: snapshot.in_flight,
            max_attempts: snapshot.max_attempts,
            dead_letters: snapshot.dead_letters,
        })
    }

    /// The plain-data form of this group, for checkpoints.
    pub fn snapshot(&self) -> GroupSnapshot {
        GroupSnapshot {
            position: self.position,
            attempt: self.attempt,
            in_flight: self.in_flight,
            max_attempts: self.max_attempts,
            dead_letters: self.dead_letters.clone(),
        }
    }

    /// The offset of the next message this group has to finish.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Deliveries made so far of the message at [`position`](Self::position).
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The total number of deliveries allowed for one message.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The delivery in flight, if any.
    pub fn in_flight(&self) -> Option<DeliveryId> {
        self.in_flight.then_some(DeliveryId {
            offset: self.position,
            attempt: self.attempt,
        })
    }

    /// The dead-letter queue, oldest first.
    pub fn dead_letters(&self) -> &[DeadLetterEntry] {
        &self.dead_letters
    }

    /// How many messages of a log ending at `log_end` this group has not finished.
    pub fn lag(&self, log_end: u64) -> u64 {
        log_end.saturating_sub(self.position)
    }

    /// Plans a poll against a log whose next offset is `log_end`. Changes nothing.
    pub fn poll(&self, log_end: u64) -> PollPlan {
        if let Some(current) = self.in_flight() {
            return PollPlan::InFlight(current);
        }
        if self.position >= log_end {
            return PollPlan::Idle;
        }
        PollPlan::Deliver(GroupEvent::Delivered(DeliveryId {
            offset: self.position,
            attempt: self.attempt + 1,
        }))
    }

    /// Plans an ack of `delivery`. Changes nothing.
    ///
    /// # Errors
    ///
    /// [`NotOwned`] unless `delivery` is exactly the delivery in flight.
    pub fn ack(&self, delivery: DeliveryId) -> Result<GroupEvent, NotOwned> {
        self.check_owned(delivery)?;
        Ok(GroupEvent::Acked(delivery))
    }

    /// Plans a nack of `delivery`: a retry while attempts remain, else a dead letter.
    /// Changes nothing.
    ///
    /// # Errors
    ///
    /// [`NotOwned`] unless `delivery` is exactly the delivery in flight.
    pub fn nack(&self, delivery: DeliveryId) -> Result<GroupEvent, NotOwned> {
        self.check_owned(delivery)?;
        if delivery.attempt < self.max_attempts {
            Ok(GroupEvent::Retried(delivery))
        } else {
            Ok(GroupEvent::DeadLettered(delivery))
        }
    }

    fn check_owned(&self, requested: DeliveryId) -> Result<(), NotOwned> {
        let current = self.in_flight();
        if current == Some(requested) {
            Ok(())
        } else {
            Err(NotOwned { requested, current })
        }
    }

    /// Performs `event`, after checking that it follows from the current state.
    ///
    /// Events come from the plan methods, or from a durable home replaying what it
    /// persisted. The check means a replayed history that does not fit is refused
    /// instead of corrupting the group. `apply` does not know the log's length, so a
    /// home replaying from disk checks `Delivered` offsets against its log itself.
    ///
    /// # Errors
    ///
    /// [`GroupError::InvalidTransition`] if the event does not follow; the state is
    /// unchanged.
    pub fn apply(&mut self, event: GroupEvent) -> Result<(), GroupError> {
        if !self.follows(event) {
            return Err(GroupError::InvalidTransition {
                event,
                position: self.position,
                attempt: self.attempt,
                in_flight: self.in_flight,
            });
        }
        match event {
            GroupEvent::Delivered(id) => {
                self.attempt = id.attempt;
                self.in_flight = true;
            }
            GroupEvent::Retried(_) => self.in_flight = false,
            GroupEvent::Acked(_) => self.advance(),
            GroupEvent::DeadLettered(id) => {
                self.dead_letters.push(DeadLetterEntry {
                    offset: id.offset,
                    attempts: id.attempt,
                });
                self.advance();
            }
        }
        Ok(())
    }

    fn follows(&self, event: GroupEvent) -> bool {
        let id = event.delivery();
        match event {
            GroupEvent::Delivered(_) => {
                !self.in_flight
                    && id.offset == self.position
                    && id.attempt == self.attempt + 1
                    && id.attempt <= self.max_attempts
            }
            GroupEvent::Acked(_) => self.in_flight() == Some(id),
            GroupEvent::Retried(_) => {
                self.in_flight() == Some(id) && id.attempt < self.max_attempts
            }
            GroupEvent::DeadLettered(_) => {
                self.in_flight() == Some(id) && id.attempt == self.max_attempts
            }
        }
    }

    fn advance(&mut self) {
        self.position += 1;
        self.attempt = 0;
        self.in_flight = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deliver(group: &mut GroupState, log_end: u64) -> DeliveryId {
        let PollPlan::Deliver(event) = group.poll(log_end) else {
            panic!("expected a new delivery, got {:?}", group.poll(log_end));
        };
        group.apply(event).unwrap();
        event.delivery()
    }

    // Proves an idle poll at the end of the log plans nothing.
    #[test]
    fn poll_at_end_of_log_is_idle() {
        let group = GroupState::new(3, 0).unwrap();
        assert_eq!(group.poll(0), PollPlan::Idle);
    }

    // Proves a repeated poll returns the same attempt rather than a new one.
    #[test]
    fn repeated_poll_returns_same_attempt() {
        let mut group = GroupState::new(3, 0).unwrap();
        let first = deliver(&mut group, 5);
        assert_eq!(group.poll(5), PollPlan::InFlight(first));
        assert_eq!(group.attempt(), 1);
    }

    // Proves that an ack must name the exact delivery and that a stale one changes nothing.
    #[test]
    fn ack_is_fenced_to_exact_delivery() {
        let mut group = GroupState::new(3, 0).unwrap();
        let first = deliver(&mut group, 5);
        let before = group.clone();
        for wrong in [
            DeliveryId {
                offset: 1,
                attempt: 1,
            },
            DeliveryId {
                offset: 0,
                attempt: 2,
            },
        ] {
            assert_eq!(
                group.ack(wrong),
                Err(NotOwned {
                    requested: wrong,
                    current: Some(first)
                })
            );
        }
        assert_eq!(group, before);
        group.apply(group.ack(first).unwrap()).unwrap();
        assert_eq!((group.position(), group.attempt()), (1, 0));
        assert_eq!(group.in_flight(), None);
    }

    // Proves the final nack dead-letters once and a repeat is refused.
    #[test]
    fn final_nack_dead_letters_once() {
        let mut group = GroupState::new(1, 0).unwrap();
        let only = deliver(&mut group, 1);
        let event = group.nack(only).unwrap();
        assert_eq!(event, GroupEvent::DeadLettered(only));
        group.apply(event).unwrap();
        assert!(group.nack(only).is_err());
        assert!(matches!(
            group.apply(event),
            Err(GroupError::InvalidTransition { .. })
        ));
        assert_eq!(
            group.dead_letters(),
            &[DeadLetterEntry {
                offset: 0,
                attempts: 1
            }]
        );
    }

    // Proves apply refuses events that do not follow, leaving the state unchanged.
    #[test]
    fn apply_refuses_out_of_order_events() {
        let mut group = GroupState::new(2, 0).unwrap();
        let before = group.clone();
        let bogus = [
            GroupEvent::Delivered(DeliveryId {
                offset: 0,
                attempt: 2,
            }),
            GroupEvent::Delivered(DeliveryId {
                offset: 1,
                attempt: 1,
            }),
            GroupEvent::Acked(DeliveryId {
                offset: 0,
                attempt: 1,
            }),
            GroupEvent::Retried(DeliveryId {
                offset: 0,
                attempt: 1,
            }),
            GroupEvent::DeadLettered(DeliveryId {
                offset: 0,
                attempt: 2,
            }),
        ];
        for event in bogus {
            assert!(group.apply(event).is_err(), "{event:?} was accepted");
            assert_eq!(group, before);
        }
        let first = deliver(&mut group, 1);
        // Retried is not allowed on the final attempt, nor DeadLettered before it.
        assert!(group.apply(GroupEvent::DeadLettered(first)).is_err());
        group.apply(GroupEvent::Retried(first)).unwrap();
        let second = deliver(&mut group, 1);
        assert!(group.apply(GroupEvent::Retried(second)).is_err());
    }

    // Proves snapshots round-trip and contradictory snapshots are refused.
    #[test]
    fn snapshot_round_trip_and_validation() {
        let mut group = GroupState::new(2, 4).unwrap();
        deliver(&mut group, 10);
        assert_eq!(GroupState::from_snapshot(group.snapshot()).unwrap(), group);
        let bad = |edit: fn(&mut GroupSnapshot)| {
            let mut snapshot = group.snapshot();
            edit(&mut snapshot);
            GroupState::from_snapshot(snapshot)
        };
        assert!(bad(|s| s.max_attempts = 0).is_err());
        assert!(bad(|s| s.attempt = 3).is_err());
        assert!(bad(|s| s.attempt = 0).is_err());
        assert!(bad(|s| {
            s.attempt = 2;
            s.in_flight = false;
        })
        .is_err());
    }
}
