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
//!   `max_attempts` bounds the *failures* of one message
//!   ([`GroupConfig::max_attempts`](crate::group::GroupConfig::max_attempts) defines it):
//!   without releases and redrives a message is delivered at most `max_attempts` times.
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
//! - The final `nack` (the failure that reaches `max_attempts`: attempt == `max_attempts`
//!   when nothing was released or redriven) appends the message to *this group's*
//!   dead-letter queue once, moves the cursor on and returns [`Nack::DeadLettered`].
//!   Repeating it is `NotOwned`: nothing is dead-lettered twice.
//! - A topic made with [`Topic::new`] has no clock: no timeout, no automatic
//!   redelivery. A delivery stays in flight until it is acked or nacked.
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
//! # Group settings
//!
//! Per group and optional, through [`Topic::create_group_with`] and a
//! [`GroupConfig`](crate::group::GroupConfig) (the rules are in [`crate::group`], the full
//! contract in `docs/semantics.md`):
//!
//! - **Leases** (`lease_ms`, on a topic made with [`Topic::with_clock`]): a delivery not
//!   acked, nacked or [touched](Topic::touch) in time loses its owner, which counts as a
//!   failure; the final one dead-letters with reason "lease expired".
//! - **Nack kinds** ([`Topic::nack_with`]): nack (a failure), release (not a failure),
//!   reject (dead-letters at once), each with an optional delay and reason.
//! - **Backoff**: a failed message waits before its next delivery, and holds back every
//!   message above it meanwhile.
//! - **Redrive and purge** ([`Topic::redrive`], [`Topic::purge`]) of this group's dead
//!   letters; [`Topic::dead_letter_info`] shows each one's reason and time.
//! - **Parallel deliveries** (`max_in_flight` W): up to W deliveries in flight, each
//!   owned by the consumer identity that polled it ([`Topic::poll_as`], one at a time, or
//!   [`Topic::poll_batch`], several), delivered in offset order and never more than
//!   W − 1 offsets ahead of the position.
//!
//! ```
//! use std::sync::Arc;
//! use mailroom::clock::ManualClock;
//! use mailroom::group::{Backoff, GroupConfig};
//! use mailroom::topic::{StartPosition, Topic};
//!
//! let clock = Arc::new(ManualClock::new(0));
//! let topic = Topic::with_clock(clock.clone());
//! let config = GroupConfig::new(3)
//!     .with_lease_ms(1_000)
//!     .with_backoff(Backoff::Fixed { delay_ms: 100 })
//!     .with_max_in_flight(2);
//! topic.create_group_with("workers", StartPosition::Earliest, config).unwrap();
//! topic.publish("a");
//! topic.publish("b");
//! let a = topic.poll_as("workers", "w1").unwrap().unwrap();
//! let b = topic.poll_as("workers", "w2").unwrap().unwrap();
//! topic.ack("workers", b.id()).unwrap();
//! // w1 crashed: after its lease, "a" is retried after the backoff.
//! clock.advance_ms(1_000);
//! assert_eq!(topic.poll_as("workers", "w2").unwrap(), None);
//! clock.advance_ms(100);
//! let retry = topic.poll_as("workers", "w2").unwrap().unwrap();
//! assert_eq!((retry.offset, retry.attempt), (a.offset, 2));
//! assert!(topic.ack("workers", a.id()).is_err());
//! ```
//!
//! # Batches
//!
//! [`Topic::poll_batch`], [`Topic::ack_batch`] and [`Topic::nack_batch`] (and their
//! [`GroupHandle`] twins) move up to [`BATCH_DELIVERIES_MAX`] deliveries of one group
//! under one hold of its lock. Each does what the single operations would do one after
//! another, with nothing from other callers in between:
//!
//! - A batch poll first applies due lease expiries, then returns the consumer's own
//!   deliveries in flight, then new deliveries for it one by one until it has `max` or
//!   the group has nothing more to hand out (the log is drained, W deliveries are in
//!   flight, or a delayed message holds back the rest). Owned ones come first, then new
//!   ones, each by ascending offset. All of them are owned by the consumer: repeating the
//!   batch returns the same deliveries with the same attempts, and a plain poll returns
//!   the first. With W = 1 a batch poll is a poll: at most one delivery.
//! - An ack or nack batch settles each named delivery in order and answers one result
//!   per delivery: what a single ack or nack would have said at that point. A refused one
//!   (not owned, a stale attempt, named twice) does not stop the rest.
//!
//! ```
//! use mailroom::group::GroupConfig;
//! use mailroom::topic::{StartPosition, Topic};
//!
//! let topic = Topic::new();
//! let config = GroupConfig::new(3).with_max_in_flight(64);
//! topic.create_group_with("g", StartPosition::Earliest, config).unwrap();
//! for n in 0..100u32 {
//!     topic.publish(n);
//! }
//! let group = topic.group("g").unwrap();
//! let mut finished = 0;
//! loop {
//!     let batch = group.poll_batch(Some("worker"), 64).unwrap();
//!     if batch.is_empty() {
//!         break;
//!     }
//!     let ids: Vec<_> = batch.iter().map(|delivery| delivery.id()).collect();
//!     finished += group.ack_batch(&ids).unwrap().iter().filter(|r| r.is_ok()).count();
//! }
//! assert_eq!(finished, 100);
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
//! [`GROUP_NAME_BYTES_MAX`], [`GROUPS_MAX`], [`MESSAGES_MAX`] and [`BATCH_DELIVERIES_MAX`].
//!
//! The group rules themselves live in [`crate::group`], which the durable store and the
//! server share; this module is their in-memory home.

mod batch;
mod consumer_group;
mod dead_letters;
mod deliveries;
mod groups;
mod handle;
mod log;
mod message;
mod registry;
mod seek_pause;
mod sync;
mod time;
mod types;

use std::fmt;
use std::sync::Arc;

use crate::clock::Clock;
use log::Log;
use registry::Registry;
use time::TopicTime;

pub use crate::group::DeliveryId;
pub use batch::{check_batch_len, check_batch_poll};
pub use handle::GroupHandle;
pub use message::{
    check_metadata_lengths, Message, Metadata, MetadataRef, HEADERS_BYTES_MAX, HEADERS_MAX,
    HEADER_NAME_BYTES_MAX, HEADER_VALUE_BYTES_MAX, IDEMPOTENCY_KEY_BYTES_MAX, KEY_BYTES_MAX,
};
pub use types::{DeadLetter, DeadLetterInfo, Delivery, GroupInfo, Nack, StartPosition, TopicError};

/// The longest group name accepted, in bytes of UTF-8.
pub const GROUP_NAME_BYTES_MAX: usize = 128;

/// The most groups one topic may have at once.
pub const GROUPS_MAX: usize = 65_536;

/// The most messages one topic can hold (about 4.4 × 10^12); publishing more panics.
pub const MESSAGES_MAX: u64 = log::MESSAGES_MAX;

/// The most deliveries one batch may poll, ack or nack.
pub const BATCH_DELIVERIES_MAX: usize = 65_536;

/// A retained, append-only log of messages read by independent consumer groups.
///
/// See the [module docs](self) for the rules. Every method takes `&self`; share a topic
/// between threads with `Arc<Topic<M>>` (it is `Send + Sync` when `M` is). Messages are
/// cloned for every delivery, so use `Arc<_>` or `Bytes` for large payloads.
pub struct Topic<M> {
    pub(super) log: Arc<Log<M>>,
    pub(super) groups: Registry,
    pub(super) time: TopicTime,
}

impl<M: Clone> Topic<M> {
    /// An empty topic with no groups. Allocates no message storage until the first
    /// publish.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::Topic;
    ///
    /// let topic: Topic<String> = Topic::new();
    /// assert!(topic.is_empty());
    /// assert!(topic.groups().is_empty());
    /// ```
    pub fn new() -> Self {
        Topic {
            log: Arc::new(Log::new()),
            groups: Registry::default(),
            time: TopicTime::default(),
        }
    }

    /// An empty topic whose groups read time from `clock`: the one way to use leases,
    /// backoff and delays, which a topic without a clock refuses (its time would stand
    /// still, so they would never run out).
    ///
    /// # Example
    ///
    /// ```
    /// use std::sync::Arc;
    /// use mailroom::clock::ManualClock;
    /// use mailroom::group::GroupConfig;
    /// use mailroom::topic::{StartPosition, Topic};
    ///
    /// let clock = Arc::new(ManualClock::new(0));
    /// let topic = Topic::with_clock(clock.clone());
    /// topic
    ///     .create_group_with("g", StartPosition::Earliest, GroupConfig::new(3).with_lease_ms(1_000))
    ///     .unwrap();
    /// topic.publish("job");
    /// let first = topic.poll("g").unwrap().unwrap();
    /// clock.advance_ms(1_000);
    /// // The lease ran out: the old owner's ack is refused, the next poll is attempt 2.
    /// assert!(topic.ack("g", first.id()).is_err());
    /// assert_eq!(topic.poll("g").unwrap().unwrap().attempt, 2);
    /// ```
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        let mut topic = Topic::new();
        topic.time = TopicTime::new(clock);
        topic
    }

    /// Appends `message` and returns its offset: 0, 1, 2, … with no gaps, in the order
    /// the appends took the log's short append lock. Never waits on any group.
    ///
    /// # Panics
    ///
    /// If the topic already holds [`MESSAGES_MAX`] messages (memory
    /// runs out long before that for any payload that is not zero-sized).
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::Topic;
    ///
    /// let topic = Topic::new();
    /// assert_eq!(topic.publish("a"), 0);
    /// assert_eq!(topic.publish("b"), 1);
    /// ```
    #[inline]
    pub fn publish(&self, message: M) -> u64 {
        self.log.publish(message)
    }

    /// How many messages have been published; also the offset the next one gets.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::Topic;
    ///
    /// let topic = Topic::new();
    /// topic.publish(7u64);
    /// assert_eq!(topic.len(), 1);
    /// ```
    pub fn len(&self) -> u64 {
        self.log.len()
    }

    /// Whether nothing has been published yet.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::Topic;
    ///
    /// let topic = Topic::new();
    /// assert!(topic.is_empty());
    /// topic.publish(());
    /// assert!(!topic.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<M: Clone> Default for Topic<M> {
    /// The same as [`Topic::new`].
    fn default() -> Self {
        Topic::new()
    }
}

impl<M> fmt::Debug for Topic<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Topic")
            .field("len", &self.log.len())
            .field("groups", &self.groups.names())
            .field("clock", &self.time)
            .finish()
    }
}
