//! Topics: a retained, append-only log read by independent consumer groups.
//!
//! A [`Topic`] keeps every message it is given, at offsets 0, 1, 2, … with no gaps. Any
//! number of *consumer groups* read that one log. Each group owns its cursor (the
//! *position*: the next message it has to finish), the *attempt* count for the message
//! under the cursor, at most one *in-flight* delivery and its own dead-letter queue. So
//! one group's failures and slowness never hold back or change another.
//!
//! # Delivery and ownership
//!
//! - A new group starts at offset 0, unless created with a [`StartPosition`].
//!   `max_attempts` is the total number of deliveries allowed for one message.
//! - [`poll`](Topic::poll) at the end of the log returns `None` and changes nothing. While
//!   a delivery is in flight, it returns that same delivery, same attempt: repeating a
//!   poll is not a new attempt. Otherwise it creates the next attempt (the first is 1) at
//!   the cursor and marks it in flight.
//! - [`ack`](Topic::ack) and [`nack`](Topic::nack) succeed only for the exact in-flight
//!   delivery, same offset *and* same attempt, named by its [`DeliveryId`]. Anything else
//!   (a stale attempt, a wrong offset, nothing in flight) is [`TopicError::NotOwned`] and
//!   changes nothing. A late answer from an earlier attempt can never settle a later one.
//! - `ack` moves the cursor past the message and resets the attempt.
//!
//! # Retries and dead letters
//!
//! - A `nack` with attempts left only releases ownership and returns [`Nack::Retry`]. The
//!   cursor stays; the next poll is attempt + 1. Between that nack and the next poll
//!   nothing is in flight, so an ack then fails.
//! - The final `nack` (attempt == `max_attempts`) appends the message to *this group's*
//!   dead-letter queue once, moves the cursor on and returns [`Nack::DeadLettered`].
//!   Repeating it is `NotOwned`: nothing is dead-lettered twice.
//! - There is no clock: no timeout, no automatic redelivery. A delivery stays in flight
//!   until it is acked or nacked.
//!
//! ```
//! use mailroom::topic::{Nack, Topic, TopicError};
//!
//! let topic = Topic::new();
//! topic.create_group("billing", 3).unwrap();
//! topic.publish("invoice-17");
//!
//! // Attempt 1 is in flight; polling again repeats it rather than making attempt 2.
//! let first = topic.poll("billing").unwrap().unwrap();
//! assert_eq!((first.offset, first.attempt), (0, 1));
//! assert_eq!(topic.poll("billing").unwrap(), Some(first.clone()));
//!
//! // A retryable nack releases ownership only: same position, nothing in flight.
//! assert_eq!(topic.nack("billing", first.id()).unwrap(), Nack::Retry);
//! let info = topic.group_info("billing").unwrap();
//! assert_eq!((info.position, info.attempt, info.in_flight), (0, 1, None));
//!
//! // So an ack now fails: no delivery is owned.
//! assert!(matches!(
//!     topic.ack("billing", first.id()),
//!     Err(TopicError::NotOwned { .. })
//! ));
//!
//! // The next poll is attempt 2, and acking it finishes the message.
//! let second = topic.poll("billing").unwrap().unwrap();
//! assert_eq!((second.offset, second.attempt, second.message), (0, 2, "invoice-17"));
//! topic.ack("billing", second.id()).unwrap();
//! assert_eq!(topic.position("billing").unwrap(), 1);
//! ```
//!
//! # Errors
//!
//! Every refused call returns a [`TopicError`] and changes nothing: `InvalidArgument`
//! for an empty or over-long group name, `max_attempts == 0` or a start offset past the
//! end; `GroupExists`; `UnknownGroup` for any call naming a group that does not exist;
//! `NotOwned` as above.
//!
//! # Concurrency
//!
//! Every method takes `&self`, and `Topic<M>` is `Send + Sync` when `M` is.
//!
//! - `publish` holds the log's append lock just long enough to write one slot and advance
//!   the published length.
//! - Each group has its own lock. Polls, acks and nacks of different groups never wait for
//!   each other, nor for publishers: reading a published message costs one atomic load of
//!   the log's length and a few pointer reads, never a lock.
//! - Groups are found by name under a read lock that only creating and deleting a group
//!   take for writing. A [`GroupHandle`] from [`Topic::group`] skips that lookup.
//!
//! Every operation is amortized O(1), apart from those that return a list, which are
//! linear in it. Retention grows with published messages (about their size plus a few
//! hundredths of a byte each for the chunk directory, since the log stores them in
//! fixed-size chunks that never move) and with dead letters (16 bytes each).
//!
//! # Limits
//!
//! [`GROUP_NAME_BYTES_MAX`], [`GROUPS_MAX`] and [`MESSAGES_MAX`].
//!
//! The group rules themselves live in [`crate::group`], which the durable store and the
//! server share; this module is their in-memory home.

mod consumer_group;
mod extended;
mod handle;
mod log;
mod registry;
mod retained;
mod sync;
mod time;
mod types;

pub use crate::group::DeliveryId;
pub use handle::GroupHandle;
pub use retained::Topic;
pub use types::{DeadLetter, DeadLetterInfo, Delivery, GroupInfo, Nack, StartPosition, TopicError};

/// The longest group name accepted, in bytes of UTF-8.
pub const GROUP_NAME_BYTES_MAX: usize = 128;

/// The most groups one topic may have at once.
pub const GROUPS_MAX: usize = 65_536;

/// The most messages one topic can hold (about 4.4 × 10^12); publishing more panics.
pub const MESSAGES_MAX: u64 = log::MESSAGES_MAX;
