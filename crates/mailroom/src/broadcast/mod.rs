//! Live channels: best-effort fan-out to a capped set of subscribers, each with its own
//! bounded mailbox.
//!
//! # Semantics
//!
//! A [`Broker`] holds up to `max_subscribers` [`Subscription`]s. Each subscription owns a
//! FIFO mailbox of `mailbox_capacity` messages. [`Broker::publish`] offers the message to
//! every current subscriber exactly once and never waits:
//!
//! - if the subscriber's mailbox has room, the message is **delivered** (enqueued);
//! - if it is full, the new message is **dropped** for that subscriber alone. Its older
//!   messages stay, and every other subscriber is unaffected.
//!
//! The returned [`Delivery`] counts both, so `delivered + dropped` is the number of
//! subscribers at that moment. Publishing with no subscribers succeeds with `(0, 0)`.
//!
//! Publishers, subscribe, unsubscribe and close are ordered by one broker lock, so
//! concurrent publishes have a single order and every subscriber sees the messages it
//! received in that order. Consumers never take that lock: [`Subscription::poll`] and
//! [`Subscription::recv`] only touch their own mailbox.
//!
//! This is not a log: there is no persistence, acknowledgement, retry or replay. A message
//! in a mailbox says nothing about whether the application processed it. Do not retry a
//! partially delivered publish; healthy subscribers would see it twice.
//!
//! # Example
//!
//! The worked example: two subscribers with one-message mailboxes.
//!
//! ```
//! use mailroom::broadcast::{BroadcastError, Broker, Delivery};
//!
//! let broker = Broker::new(2, 1)?;
//! let s1 = broker.subscribe()?;
//! let s2 = broker.subscribe()?;
//! assert!(matches!(broker.subscribe(), Err(BroadcastError::SubscriberLimit { .. })));
//!
//! assert_eq!(broker.publish("m1")?, Delivery { delivered: 2, dropped: 0 });
//! assert_eq!(s1.poll(), Some("m1"));
//!
//! // s1 has room again; s2 still holds m1, so m2 is dropped for s2 only.
//! assert_eq!(broker.publish("m2")?, Delivery { delivered: 1, dropped: 1 });
//! assert_eq!(s2.poll(), Some("m1"));
//! assert_eq!(s2.poll(), None); // m2 never reached s2
//! assert_eq!(s1.poll(), Some("m2"));
//! # Ok::<(), BroadcastError>(())
//! ```
//!
//! # Payloads are cloned
//!
//! Every delivery is a `T::clone()` made while the broker lock is held (the last
//! subscriber gets the original). For anything larger than a few words, publish an
//! `Arc<_>` or a `bytes::Bytes`, so a clone is a reference-count increment rather than a
//! copy. Payloads are shared, not isolated: use immutable messages.
//!
//! # Lagging (slow subscribers)
//!
//! A subscriber that does not keep up fills its mailbox and then misses new messages until
//! it drains some. This is *drop newest*: what it keeps is the oldest backlog, and when it
//! catches up it resumes with the messages published after it made room. Nothing is
//! signalled to the subscriber itself; the publisher learns it from the
//! [`Delivery::dropped`] count, and anyone can read [`Subscription::stats`] and
//! [`Broker::stats`]. A slow subscriber never slows the publisher or the other subscribers
//! beyond the cost of one failed enqueue per publish.
//!
//! `mailbox_capacity` bounds the number of buffered messages. A broker made with
//! [`Broker::with_mailbox_bytes`] also bounds their bytes: drop newest then also applies
//! to a message that would take the mailbox past its byte budget (except into an empty
//! mailbox, which takes one message however large), counted as any other drop.
//!
//! # Closing
//!
//! [`Broker::close`] is idempotent. It closes every subscription, empties the registry and
//! wakes every parked receiver, without waiting for any consumer. Afterwards
//! [`Broker::publish`] and [`Broker::subscribe`] return [`BroadcastError::Closed`]. Messages
//! already queued stay available: [`Subscription::poll`] keeps returning them, and
//! [`Subscription::recv`] resolves to `None` only once the mailbox is both closed and empty.
//!
//! [`Subscription::unsubscribe`] closes one subscription the same way. Once it returns, no
//! publish can enqueue there. An empty `poll` means "nothing buffered"; only
//! [`Subscription::is_closed`] (or `recv` returning `None`) means "nothing more will come".
//!
//! # Dropping
//!
//! Dropping a [`Subscription`] unsubscribes it, freeing its slot. Dropping the last
//! [`Broker`] handle closes the broker, so receivers are not left waiting for a publisher
//! that no longer exists. A subscription kept after close still owns its buffered
//! messages until it is dropped.
//!
//! # Waiting
//!
//! [`Subscription::recv`] is a future that works on any executor (the crate depends on no
//! runtime). [`Subscription::recv_timeout`] and [`Subscription::recv_blocking`] block a
//! plain thread. With the `stream` feature, `Subscription::into_stream` gives a
//! `futures_core::Stream`. Receivers are woken by publish, unsubscribe and close with no
//! lost wake-ups; a publish costs one extra load when nobody is parked.

mod broker;
mod mailbox;
mod recv;
mod ring;
#[cfg(feature = "stream")]
mod stream;
mod subscription;
mod sync;

pub use broker::{Broker, MAILBOX_BYTES_MAX, MAILBOX_CAPACITY_MAX, SUBSCRIBERS_MAX};
pub use recv::Recv;
#[cfg(feature = "stream")]
pub use stream::SubscriptionStream;
pub use subscription::Subscription;

/// The outcome of one [`Broker::publish`]: how many subscribers got the message and how
/// many missed it because their mailbox was full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Delivery {
    /// Subscribers whose mailbox accepted the message.
    pub delivered: usize,
    /// Subscribers whose mailbox was full, so the message was dropped for them.
    pub dropped: usize,
}

/// Errors from [`Broker`] operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BroadcastError {
    /// A limit given to [`Broker::new`] is outside `1..=max`.
    #[error("invalid broadcast config: {name} = {value}, must be in 1..={max}")]
    InvalidConfig {
        /// The parameter: `"max_subscribers"`, `"mailbox_capacity"` or `"mailbox_bytes"`.
        name: &'static str,
        /// The value given.
        value: usize,
        /// The largest value accepted.
        max: usize,
    },
    /// The broker was closed.
    #[error("broker is closed")]
    Closed,
    /// `max_subscribers` subscriptions are already active.
    #[error("the subscriber limit ({max_subscribers}) is reached")]
    SubscriberLimit {
        /// The broker's cap.
        max_subscribers: usize,
    },
}

/// Why [`Subscription::recv_timeout`] returned without a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RecvTimeoutError {
    /// Nothing arrived before the timeout.
    #[error("timed out waiting for a message")]
    Timeout,
    /// The subscription is closed and its mailbox is drained.
    #[error("subscription is closed and drained")]
    Closed,
}

/// A snapshot of a broker's counters, from [`Broker::stats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BrokerStats {
    /// Active subscriptions.
    pub subscribers: usize,
    /// Successful publishes, including those that reached nobody.
    pub published: u64,
    /// Messages enqueued, summed over subscribers.
    pub delivered: u64,
    /// Messages dropped at full mailboxes, summed over subscribers.
    pub dropped: u64,
}

/// A snapshot of one subscription's counters, from [`Subscription::stats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SubscriptionStats {
    /// Messages enqueued in this mailbox (including those still queued).
    pub received: u64,
    /// Messages this subscriber missed because its mailbox was full.
    pub dropped: u64,
    /// Messages buffered right now.
    pub queued: usize,
}
