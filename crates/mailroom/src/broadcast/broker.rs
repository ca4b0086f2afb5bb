//! The broker: admission, the subscriber registry, publish and close.

mod shared;

use super::mailbox::{Mailbox, Weigh};
use super::sync::{lock_ignoring_poison, Arc, AtomicUsize, Mutex, Ordering};
use super::{BroadcastError, BrokerStats, Delivery, Subscription};

/// The largest `max_subscribers` a broker accepts.
pub const SUBSCRIBERS_MAX: usize = 1 << 16;

/// The largest `mailbox_capacity` a broker accepts. Mailboxes allocate their capacity up
/// front, so this bounds the memory one subscription can pin.
pub const MAILBOX_CAPACITY_MAX: usize = 1 << 20;

/// The largest `mailbox_bytes` a broker accepts (1 TiB: far past any real budget; the
/// server's own limit is much lower).
pub const MAILBOX_BYTES_MAX: usize = 1 << 40;

/// A handle to a live channel: publishes to every current subscriber, never waiting.
///
/// Cloning a `Broker` gives another handle to the same broker. When the last handle is
/// dropped the broker closes, exactly as if [`Broker::close`] had been called, so that
/// receivers do not wait forever for a publisher that is gone.
///
/// # Examples
///
/// ```
/// use mailroom::broadcast::{Broker, Delivery};
///
/// let broker = Broker::new(8, 16)?;
/// let sub = broker.subscribe()?;
/// assert_eq!(broker.publish("hello")?, Delivery { delivered: 1, dropped: 0 });
/// assert_eq!(sub.poll(), Some("hello"));
/// # Ok::<(), mailroom::broadcast::BroadcastError>(())
/// ```
pub struct Broker<T> {
    shared: Arc<Shared<T>>,
}

/// State shared by every broker handle and every subscription.
pub(crate) struct Shared<T> {
    registry: Mutex<Registry<T>>,
    max_subscribers: usize,
    mailbox_capacity: usize,
    /// Every mailbox's byte budget (`usize::MAX`: none) and how messages are weighed.
    mailbox_bytes: (usize, Weigh<T>),
    /// Receivers parked on any mailbox of this broker: lets `publish` skip the wake-up
    /// scan with one load when nobody waits (the common case under load).
    parked: AtomicUsize,
    /// Live `Broker` handles; the broker closes when the last one goes.
    handles: AtomicUsize,
}

/// Everything the broker lock protects.
struct Registry<T> {
    closed: bool,
    /// Current subscribers, contiguous so that a publish walks them in one pass.
    mailboxes: Vec<Arc<Mailbox<T>>>,
    published: u64,
    delivered: u64,
    dropped: u64,
}

impl<T: Clone + Send> Broker<T> {
    /// Creates a broker accepting up to `max_subscribers` subscriptions, each buffering up
    /// to `mailbox_capacity` messages.
    ///
    /// # Errors
    ///
    /// [`BroadcastError::InvalidConfig`] when either limit is 0, when `max_subscribers`
    /// exceeds [`SUBSCRIBERS_MAX`], or when `mailbox_capacity` exceeds
    /// [`MAILBOX_CAPACITY_MAX`].
    ///
    /// # Examples
    ///
    /// ```
    /// use mailroom::broadcast::{BroadcastError, Broker};
    ///
    /// assert!(Broker::<u64>::new(4, 32).is_ok());
    /// assert!(matches!(Broker::<u64>::new(0, 32), Err(BroadcastError::InvalidConfig { .. })));
    /// ```
    pub fn new(max_subscribers: usize, mailbox_capacity: usize) -> Result<Self, BroadcastError> {
        Self::build(max_subscribers, mailbox_capacity, (usize::MAX, |_| 0))
    }

    /// As [`Broker::new`], with a byte budget beside the count: each mailbox holds at
    /// most `mailbox_bytes` bytes of messages as `weigh` counts them (`Bytes::len`, say).
    /// A message that would take a mailbox past it is dropped for that subscriber, as
    /// at a full mailbox, and counted the same way; an empty mailbox takes one message
    /// however heavy, so a budget below one message never silences a channel.
    ///
    /// # Errors
    ///
    /// As [`Broker::new`], and [`BroadcastError::InvalidConfig`] when `mailbox_bytes` is
    /// 0 or above [`MAILBOX_BYTES_MAX`].
    ///
    /// # Examples
    ///
    /// ```
    /// use mailroom::broadcast::{Broker, Delivery};
    ///
    /// // Room for 100 messages, but only 10 bytes of them.
    /// let broker = Broker::with_mailbox_bytes(1, 100, 10, |text: &&str| text.len())?;
    /// let sub = broker.subscribe()?;
    /// assert_eq!(broker.publish("123456")?, Delivery { delivered: 1, dropped: 0 });
    /// // 6 + 6 > 10: dropped, though the mailbox has room for 99 more messages.
    /// assert_eq!(broker.publish("abcdef")?, Delivery { delivered: 0, dropped: 1 });
    /// assert_eq!(broker.publish("xyz")?, Delivery { delivered: 1, dropped: 0 });
    /// assert_eq!(sub.queued_bytes(), 9);
    /// assert_eq!(sub.poll(), Some("123456"));
    /// assert_eq!(sub.queued_bytes(), 3);
    /// # Ok::<(), mailroom::broadcast::BroadcastError>(())
    /// ```
    pub fn with_mailbox_bytes(
        max_subscribers: usize,
        mailbox_capacity: usize,
        mailbox_bytes: usize,
        weigh: fn(&T) -> usize,
    ) -> Result<Self, BroadcastError> {
        check_limit("mailbox_bytes", mailbox_bytes, MAILBOX_BYTES_MAX)?;
        Self::build(max_subscribers, mailbox_capacity, (mailbox_bytes, weigh))
    }

    fn build(
        max_subscribers: usize,
        mailbox_capacity: usize,
        mailbox_bytes: (usize, Weigh<T>),
    ) -> Result<Self, BroadcastError> {
        check_limit("max_subscribers", max_subscribers, SUBSCRIBERS_MAX)?;
        check_limit("mailbox_capacity", mailbox_capacity, MAILBOX_CAPACITY_MAX)?;
        let registry = Registry {
            closed: false,
            mailboxes: Vec::new(),
            published: 0,
            delivered: 0,
            dropped: 0,
        };
        let shared = Shared {
            registry: Mutex::new(registry),
            max_subscribers,
            mailbox_capacity,
            mailbox_bytes,
            parked: AtomicUsize::new(0),
            handles: AtomicUsize::new(1),
        };
        Ok(Self {
            shared: Arc::new(shared),
        })
    }

    /// Adds a subscriber with an empty mailbox. It receives messages published after this
    /// call returns.
    ///
    /// # Errors
    ///
    /// [`BroadcastError::Closed`] after [`Broker::close`];
    /// [`BroadcastError::SubscriberLimit`] when `max_subscribers` subscriptions are active.
    ///
    /// # Examples
    ///
    /// ```
    /// use mailroom::broadcast::{BroadcastError, Broker};
    ///
    /// let broker = Broker::<u64>::new(1, 4)?;
    /// let first = broker.subscribe()?;
    /// assert!(matches!(broker.subscribe(), Err(BroadcastError::SubscriberLimit { .. })));
    /// drop(first); // dropping unsubscribes, freeing the slot
    /// assert!(broker.subscribe().is_ok());
    /// # Ok::<(), BroadcastError>(())
    /// ```
    pub fn subscribe(&self) -> Result<Subscription<T>, BroadcastError> {
        let mut registry = lock_ignoring_poison(&self.shared.registry);
        if registry.closed {
            return Err(BroadcastError::Closed);
        }
        if registry.mailboxes.len() >= self.shared.max_subscribers {
            return Err(BroadcastError::SubscriberLimit {
                max_subscribers: self.shared.max_subscribers,
            });
        }
        let index = registry.mailboxes.len();
        let mailbox = Mailbox::new(
            self.shared.mailbox_capacity,
            self.shared.mailbox_bytes,
            index,
        );
        let mailbox = Arc::new(mailbox);
        registry.mailboxes.push(Arc::clone(&mailbox));
        drop(registry);
        Ok(Subscription::new(Arc::clone(&self.shared), mailbox))
    }

    /// Offers `message` to every current subscriber once, without waiting for any of them.
    ///
    /// A subscriber whose mailbox has room gets a clone; one whose mailbox is full misses
    /// this message (its older messages stay). `delivered + dropped` is the number of
    /// subscribers at that moment; with none, the result is `(0, 0)` and still `Ok`.
    ///
    /// # Errors
    ///
    /// [`BroadcastError::Closed`] after [`Broker::close`].
    ///
    /// # Examples
    ///
    /// ```
    /// use mailroom::broadcast::{Broker, Delivery};
    ///
    /// let broker = Broker::new(2, 1)?;
    /// let (fast, slow) = (broker.subscribe()?, broker.subscribe()?);
    /// broker.publish(1)?;
    /// assert_eq!(fast.poll(), Some(1));
    /// // `slow` still holds 1, so 2 is dropped for it alone.
    /// assert_eq!(broker.publish(2)?, Delivery { delivered: 1, dropped: 1 });
    /// assert_eq!(slow.poll(), Some(1));
    /// assert_eq!(slow.poll(), None);
    /// # drop(fast);
    /// # Ok::<(), mailroom::broadcast::BroadcastError>(())
    /// ```
    pub fn publish(&self, message: T) -> Result<Delivery, BroadcastError> {
        let mut registry = lock_ignoring_poison(&self.shared.registry);
        if registry.closed {
            return Err(BroadcastError::Closed);
        }
        // SAFETY: we hold the broker lock, and every mailbox in the registry belongs to this
        // broker (mailboxes are created by `subscribe` and never move between brokers).
        let delivery = unsafe { offer_to_all(&registry.mailboxes, message) };
        registry.count(delivery);
        self.shared.wake_parked(registry);
        Ok(delivery)
    }

    /// Publishes every message of `messages`, in order, under one hold of the broker lock;
    /// returns the [`Delivery`] counts summed over the batch.
    ///
    /// Each subscriber sees exactly what the same calls to [`Broker::publish`] in a row
    /// would give it (same order, same drop-newest rule per message), and no other
    /// publisher's message lands in between. `delivered + dropped` is the number of messages
    /// times the number of subscribers; use [`Broker::publish`] when per-message counts
    /// matter. Taking the lock and checking for parked receivers once per batch instead of
    /// once per message makes publishing cheaper per message.
    ///
    /// The iterator runs while the broker lock is held: it must not call into this broker
    /// (that would deadlock), and a long batch delays other publishers and `subscribe`
    /// (never consumers). An empty batch returns `(0, 0)`.
    ///
    /// # Errors
    ///
    /// [`BroadcastError::Closed`] after [`Broker::close`]; then nothing is published.
    ///
    /// # Examples
    ///
    /// ```
    /// use mailroom::broadcast::{Broker, Delivery};
    ///
    /// let broker = Broker::new(2, 2)?;
    /// let (a, b) = (broker.subscribe()?, broker.subscribe()?);
    /// // 3 messages × 2 subscribers: the third finds both mailboxes full.
    /// assert_eq!(broker.publish_batch([1, 2, 3])?, Delivery { delivered: 4, dropped: 2 });
    /// let mut got = Vec::new();
    /// a.poll_many(&mut got, usize::MAX);
    /// assert_eq!(got, [1, 2]);
    /// assert_eq!(b.poll(), Some(1));
    /// # Ok::<(), mailroom::broadcast::BroadcastError>(())
    /// ```
    pub fn publish_batch<I>(&self, messages: I) -> Result<Delivery, BroadcastError>
    where
        I: IntoIterator<Item = T>,
    {
        let mut registry = lock_ignoring_poison(&self.shared.registry);
        if registry.closed {
            return Err(BroadcastError::Closed);
        }
        let mut total = Delivery::default();
        for message in messages {
            // SAFETY: as in `publish`: we hold the broker lock, and every mailbox in the
            // registry belongs to this broker.
            let delivery = unsafe { offer_to_all(&registry.mailboxes, message) };
            registry.count(delivery);
            total.delivered += delivery.delivered;
            total.dropped += delivery.dropped;
        }
        self.shared.wake_parked(registry);
        Ok(total)
    }

    /// Closes the broker: every subscription becomes closed, the registry is emptied, and
    /// later `publish` and `subscribe` calls fail with [`BroadcastError::Closed`].
    ///
    /// Idempotent. It does not wait for consumers: messages already queued can still be
    /// polled, and parked receivers are woken to drain them.
    ///
    /// # Examples
    ///
    /// ```
    /// use mailroom::broadcast::{BroadcastError, Broker};
    ///
    /// let broker = Broker::new(1, 4)?;
    /// let sub = broker.subscribe()?;
    /// broker.publish("last")?;
    /// broker.close();
    /// assert!(sub.is_closed());
    /// assert_eq!(sub.poll(), Some("last"));
    /// assert_eq!(broker.publish("late"), Err(BroadcastError::Closed));
    /// # Ok::<(), BroadcastError>(())
    /// ```
    pub fn close(&self) {
        self.shared.close();
    }
}

impl<T> Broker<T> {
    /// A snapshot of the broker's counters, taken under the broker lock.
    ///
    /// # Examples
    ///
    /// ```
    /// use mailroom::broadcast::Broker;
    ///
    /// let broker = Broker::new(2, 1)?;
    /// let _a = broker.subscribe()?;
    /// broker.publish(1)?;
    /// broker.publish(2)?; // `_a` is full: dropped
    /// let stats = broker.stats();
    /// assert_eq!((stats.subscribers, stats.published), (1, 2));
    /// assert_eq!((stats.delivered, stats.dropped), (1, 1));
    /// # Ok::<(), mailroom::broadcast::BroadcastError>(())
    /// ```
    pub fn stats(&self) -> BrokerStats {
        let registry = lock_ignoring_poison(&self.shared.registry);
        BrokerStats {
            subscribers: registry.mailboxes.len(),
            published: registry.published,
            delivered: registry.delivered,
            dropped: registry.dropped,
        }
    }

    /// Whether [`Broker::close`] has run (or every handle was dropped).
    pub fn is_closed(&self) -> bool {
        lock_ignoring_poison(&self.shared.registry).closed
    }

    /// The subscriber cap given to [`Broker::new`].
    pub fn max_subscribers(&self) -> usize {
        self.shared.max_subscribers
    }

    /// The per-subscriber mailbox capacity given to [`Broker::new`].
    pub fn mailbox_capacity(&self) -> usize {
        self.shared.mailbox_capacity
    }

    /// The per-subscriber byte budget given to [`Broker::with_mailbox_bytes`], or
    /// `usize::MAX` for a broker made by [`Broker::new`] (no budget).
    pub fn mailbox_bytes(&self) -> usize {
        self.shared.mailbox_bytes.0
    }

    /// Bytes queued in every current subscriber's mailbox, summed (0 without a budget,
    /// whose messages weigh nothing). Taken under the broker lock; consumers may take
    /// meanwhile, so it is an upper bound of the moment it returns.
    pub fn queued_bytes(&self) -> usize {
        let registry = lock_ignoring_poison(&self.shared.registry);
        registry
            .mailboxes
            .iter()
            .map(|mailbox| mailbox.queued_bytes())
            .sum()
    }
}

impl<T> Clone for Broker<T> {
    fn clone(&self) -> Self {
        self.shared.handles.fetch_add(1, Ordering::Relaxed);
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<T> Drop for Broker<T> {
    fn drop(&mut self) {
        // AcqRel so the last handle's close comes after every other handle's publishes.
        if self.shared.handles.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.shared.close();
        }
    }
}

impl<T> std::fmt::Debug for Broker<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker")
            .field("max_subscribers", &self.shared.max_subscribers)
            .field("mailbox_capacity", &self.shared.mailbox_capacity)
            .field("stats", &self.stats())
            .finish()
    }
}

impl<T> Registry<T> {
    /// Adds one publish's outcome to the broker counters.
    fn count(&mut self, delivery: Delivery) {
        self.published += 1;
        self.delivered += delivery.delivered as u64;
        self.dropped += delivery.dropped as u64;
    }
}

/// Offers `message` to each mailbox once, cloning for all but the last (which gets the
/// original, saving one clone per publish).
///
/// # Safety
///
/// The caller must hold the lock of the broker that owns `mailboxes`.
unsafe fn offer_to_all<T: Clone>(mailboxes: &[Arc<Mailbox<T>>], message: T) -> Delivery {
    let Some((last, rest)) = mailboxes.split_last() else {
        return Delivery {
            delivered: 0,
            dropped: 0,
        };
    };
    // Every mailbox of a broker weighs alike: weigh once per publish.
    let size = last.weigh(&message);
    let mut delivered = 0;
    for mailbox in rest {
        // SAFETY: forwarded from this function's contract.
        delivered += usize::from(unsafe { mailbox.offer(message.clone(), size) });
    }
    // SAFETY: forwarded from this function's contract.
    delivered += usize::from(unsafe { last.offer(message, size) });
    Delivery {
        delivered,
        dropped: mailboxes.len() - delivered,
    }
}

/// Checks that a configured limit lies in `1..=max`.
fn check_limit(name: &'static str, value: usize, max: usize) -> Result<(), BroadcastError> {
    if value == 0 || value > max {
        return Err(BroadcastError::InvalidConfig { name, value, max });
    }
    Ok(())
}
