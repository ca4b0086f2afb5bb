//! The consumer-group state machine, written once and reused by every home of a topic:
//! a cursor, the delivered-but-unfinished messages (each with its attempt number and
//! failure count), and a dead-letter queue.
//!
//! A [`GroupState`] knows nothing about where messages live, and reads no clock. Its
//! homes (the in-memory [`Topic`](crate::topic::Topic), the durable store, the server)
//! tell it how long the log is and what time it is, and fetch payloads themselves.
//!
//! # Planning and applying
//!
//! Every transition happens in two steps, so that a durable home can persist a change
//! before anyone sees it:
//!
//! 1. A *plan* method ([`plan_poll`](GroupState::plan_poll),
//!    [`plan_ack`](GroupState::plan_ack), [`plan_nack`](GroupState::plan_nack),
//!    [`plan_touch`](GroupState::plan_touch), [`plan_expiry`](GroupState::plan_expiry),
//!    [`plan_redrive`](GroupState::plan_redrive), [`plan_purge`](GroupState::plan_purge),
//!    and the basic [`poll`](GroupState::poll), [`ack`](GroupState::ack),
//!    [`nack`](GroupState::nack)) reads the state, checks the rules and returns the
//!    [`Change`] (or basic [`GroupEvent`]) that would happen. It changes nothing.
//! 2. [`apply_change`](GroupState::apply_change) (or the basic
//!    [`apply`](GroupState::apply)) performs it. A durable home writes the change to disk
//!    first and applies it once it is synced; on restart it replays the same changes
//!    through the same `apply_change`, which re-checks each one, so a damaged history is
//!    refused rather than trusted.
//!
//! Time enters only as the `now_ms` argument of plan methods. The basic methods plan at
//! time 0 as the anonymous consumer; on a group with a lease or backoff use the `plan_*`
//! methods.
//!
//! # The basic rules (every setting unset)
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
//! # Leases
//!
//! With [`GroupConfig::lease_ms`], a delivery carries a deadline (`now + lease_ms` when
//! it is made). [`plan_touch`](GroupState::plan_touch) moves it to `now + lease_ms`.
//! Once `now` reaches the deadline the delivery is no longer owned: an ack, nack or touch
//! naming it is [`NotOwned`], and [`plan_expiry`](GroupState::plan_expiry) plans its
//! expiry, a [`Change::Failed`] with [`Failure::LeaseExpired`] that counts as a failure
//! exactly like a nack (the final one dead-letters with reason
//! [`LEASE_EXPIRED_REASON`]). Homes apply pending expiries before every other operation,
//! so an expiry is persisted before anyone observes its effect. The expiry is dated at
//! the deadline, not at the moment it was noticed, so its backoff does not depend on
//! how often anyone looked.
//!
//! # Nack kinds, delays and backoff
//!
//! [`NackOptions`] choose the kind: [`NackKind::Nack`] counts a failure (the basic
//! nack); [`NackKind::Release`] hands the message back without counting one;
//! [`NackKind::Reject`] dead-letters at once. Each takes an optional reason, kept with
//! the dead letter, and an optional delay. A failed or released message is not delivered
//! again before its time: the nack's own delay if given, else for failures the group's
//! [`Backoff`], else at once.
//!
//! While a message waits out its delay, no message with a *higher* offset is delivered
//! (nor first-delivered) by that group: [`PollStep::Wait`]. This keeps the group's order
//! (with `max_in_flight` 1, strictly: offset `n + 1` is never delivered before `n` is
//! finished). Its cost is head-of-line blocking: one delayed message holds up its whole
//! group for the delay; other groups are unaffected.
//!
//! Attempt numbers count deliveries and only ever rise; failures are counted apart.
//! `max_attempts` bounds the *failures*, so without releases and redrives a message is
//! still delivered at most `max_attempts` times. Attempt numbers are `u32`: a message
//! whose number reaches `u32::MAX` is dead-lettered by its next nack, release or expiry,
//! and is not redriven, since it could not be delivered again without reusing an id.
//!
//! # Dead letters, redrive and purge
//!
//! Each dead letter records its offset and the attempt number of its last delivery
//! ([`DeadLetterEntry`]) and, beside it, the reason of the final failure and when it
//! happened ([`DeadLetterNote`]). [`plan_redrive`](GroupState::plan_redrive) puts the
//! dead letters in a range of offsets back to *this* group: each becomes ready again
//! with a fresh failure budget, and is delivered before any message above it. Its next
//! delivery is attempt `attempts + 1`, never a reused number, so a late ack from the
//! delivery that died can never settle the redriven one.
//! [`plan_purge`](GroupState::plan_purge) deletes dead letters.
//!
//! # Seek and pause
//!
//! [`plan_seek`](GroupState::plan_seek) moves the group to an offset, dropping what is
//! in flight; attempt numbers stay unique across it (the rule is in `seek.rs`: a
//! message delivered again after a seek back comes back above every attempt number the
//! group has used). [`plan_pause`](GroupState::plan_pause) stops new deliveries, for a
//! time or until [`plan_resume`](GroupState::plan_resume); deliveries in flight are
//! settled as usual.
//!
//! # Parallel deliveries (`max_in_flight` W)
//!
//! With W > 1, up to W deliveries are in flight at once, each fenced to its own
//! (offset, attempt), and each owned by the consumer that polled it: a consumer
//! identity passed to [`plan_poll`](GroupState::plan_poll) gets its own in-flight
//! delivery back on a repeated poll (the anonymous consumer is one identity). A batch
//! poll takes the consumer's own deliveries ([`owned`](GroupState::owned)) and then new
//! ones ([`plan_poll_new`](GroupState::plan_poll_new)), so one consumer may own several;
//! a plain poll then returns the first of them. The *position* is the lowest offset not
//! finished.
//!
//! Ordering guarantee: a poll delivers the lowest-offset message that is ready (failed,
//! released or redriven and past its delay), else the next message never delivered; and
//! a message is only ever delivered while its offset is below `position + W`. So first
//! deliveries happen in offset order, and no message is delivered until every message
//! at least W below it is finished (acked or dead-lettered). With W = 1 that is total
//! order. (With keys, a message may also wait for its key; see below.)
//!
//! # Ordering keys
//!
//! Messages may carry a key. The group does not store keys: the `*_keyed` plan methods
//! ([`plan_poll_keyed`](GroupState::plan_poll_keyed),
//! [`plan_poll_new_keyed`](GroupState::plan_poll_new_keyed),
//! [`next_due_ms_keyed`](GroupState::next_due_ms_keyed), and a [`BatchHome`] through
//! [`BatchHome::plan_new`]) take a [`KeyLookup`] the home provides (offset → key hash,
//! for the window `[position, position + KEYED_WINDOW_SPAN × W)`: a keyed message may go
//! out that far past the position, an unkeyed one only below `position + W`). With keys, at most one message per key is
//! in flight, a key's messages go out in offset order (a retry before any later message
//! of its key), and a waiting keyed message holds back only its key; a message without a
//! key keeps the rules above, and while it waits it still holds back everything above
//! it. A fresh message whose key is busy is *held*: it takes its place in the window as
//! a slot never delivered (attempt 0), persisted like any slot, so a delivery past it
//! needs no extra change. The plain methods plan with [`NoKeys`]: exactly the rules
//! without keys. The rules are in `keys.rs`.
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
//!
//! A lease running out, with time passed in by hand:
//!
//! ```
//! use mailroom::group::{GroupConfig, GroupState, PollStep};
//!
//! let mut group = GroupState::with_config(GroupConfig::new(3).with_lease_ms(100), 0).unwrap();
//! let PollStep::Deliver(new) = group.plan_poll(1, 0, None) else { unreachable!() };
//! group.apply_delivery(new, None).unwrap();
//! let first = new.id;
//!
//! // At 100 ms the lease has run out: the owner's ack is refused...
//! assert!(group.plan_ack(first, 100).is_err());
//! // ...and the next poll first expires it (a failure), then delivers attempt 2.
//! let PollStep::Expire(expiry) = group.plan_poll(1, 100, None) else { unreachable!() };
//! group.apply_change(&expiry).unwrap();
//! let PollStep::Deliver(new) = group.plan_poll(1, 100, None) else { unreachable!() };
//! assert_eq!(new.id.attempt, 2);
//! ```

mod apply;
mod argument;
mod batch;
mod change;
mod config;
mod due;
mod errors;
mod info;
mod keys;
mod pause;
mod poll_plans;
mod seek;
mod snapshot;
mod state;
mod types;
mod window_scan;

pub use argument::{check_consumer, ArgumentError};
pub use batch::{plan_batch, plan_batch_new, BatchEnd, BatchHome, BatchPoll, Offer};
pub use change::{Change, Failure, Nack, LEASE_EXPIRED_REASON};
pub use config::{
    Backoff, GroupConfig, NackKind, NackOptions, CONSUMER_BYTES_MAX, DELAY_MS_MAX, LEASE_MS_MAX,
    MAX_IN_FLIGHT_MAX, REASON_BYTES_MAX,
};
pub use errors::{GroupError, NotOwned};
pub use info::{GroupInfo, InFlightDelivery};
pub use keys::{key_hash, KeyLookup, NoKeys, KEYED_WINDOW_SPAN};
pub use pause::{Pause, PAUSE_MS_MAX};
pub use snapshot::GroupSnapshot;
pub use state::GroupState;
pub use types::{DeadLetterNote, GroupCounters, NewDelivery, PollStep, Slot, SlotPhase};
pub use window_scan::WindowScan;

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

/// One change to a group's state in the basic vocabulary (no time, consumers or
/// reasons). Every `GroupEvent` is a [`Change`]; homes persist changes and replay them.
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

impl GroupState {
    /// Performs a basic `event`, after checking that it follows from the current state.
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
        self.apply_change(&Change::from(event))
            .map_err(|_| GroupError::InvalidTransition {
                event,
                position: self.position(),
                attempt: self.attempt(),
                in_flight: self.in_flight().is_some(),
            })
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
