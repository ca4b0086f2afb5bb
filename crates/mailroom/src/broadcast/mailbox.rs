//! One subscriber's bounded mailbox: its queue, its closed flag, its counters and the
//! event its parked receivers wait on.

use super::ring::Ring;
use super::sync::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use event_listener::Event;

/// Marks a mailbox that is not (or no longer) in the broker's registry.
pub(crate) const NOT_REGISTERED: usize = usize::MAX;

/// How a broker weighs a message against a mailbox's byte budget.
pub(crate) type Weigh<T> = fn(&T) -> usize;

/// A subscriber's mailbox, shared by the broker's registry and the [`Subscription`].
///
/// Writers of the queue, the counters and `registry_index` all hold the broker lock, so
/// there is only ever one producer. Consumers (`poll`, `recv`) touch only `queue`,
/// `closed`, `waiters` and `event`, never the broker lock.
///
/// [`Subscription`]: super::Subscription
pub(crate) struct Mailbox<T> {
    queue: Ring<T>,
    /// Bytes queued, by `weigh`. Only the producer adds (before it pushes, so a consumer
    /// that pops a message always finds its weight counted) and consumers subtract after
    /// they pop: the producer may see more than is queued, never less, so the budget
    /// errs on the side of dropping.
    bytes: AtomicUsize,
    /// The byte budget: a message that would take `bytes` past it is dropped, unless the
    /// mailbox is empty (so a message larger than the budget still gets through alone).
    bytes_max: usize,
    weigh: Weigh<T>,
    /// Set (under the broker lock) when the mailbox leaves the registry for good.
    closed: AtomicBool,
    /// Position in the registry's vector while registered, else [`NOT_REGISTERED`].
    /// Only read and written under the broker lock; atomic only so that it can be shared.
    registry_index: AtomicUsize,
    /// Messages rejected because the queue was full. Written only by the broker-lock holder.
    dropped: AtomicU64,
    /// Receivers currently parked (or about to park) on `event`.
    waiters: AtomicUsize,
    /// Woken by publish (when `waiters > 0`), unsubscribe and close.
    pub(crate) event: Event,
}

impl<T> Mailbox<T> {
    /// An empty, closed-to-nobody mailbox holding at most `capacity` messages and at
    /// most `bytes_max` bytes of them (as `weigh` counts; one message however large).
    pub(crate) fn new(
        capacity: usize,
        (bytes_max, weigh): (usize, Weigh<T>),
        registry_index: usize,
    ) -> Self {
        Self {
            queue: Ring::new(capacity),
            bytes: AtomicUsize::new(0),
            bytes_max,
            weigh,
            closed: AtomicBool::new(false),
            registry_index: AtomicUsize::new(registry_index),
            dropped: AtomicU64::new(0),
            waiters: AtomicUsize::new(0),
            event: Event::new(),
        }
    }

    /// The weight of `message` against this mailbox's byte budget.
    pub(crate) fn weigh(&self, message: &T) -> usize {
        (self.weigh)(message)
    }

    /// Offers `message`, of weight `size`; returns whether it was enqueued. A full
    /// queue, or one whose bytes would pass the budget, keeps its older messages and the
    /// new one is dropped.
    ///
    /// # Safety
    ///
    /// The caller must hold the lock of the broker whose registry holds this mailbox: that
    /// makes it the ring's only producer (and the drop counter's and the byte count's
    /// only adder).
    pub(crate) unsafe fn offer(&self, message: T, size: usize) -> bool {
        // Relaxed: consumers only ever lower the count, so a stale value is too high and
        // at worst drops a message that would have fitted.
        let queued = self.bytes.load(Ordering::Relaxed);
        // Past the budget only a message to an empty mailbox goes in. Empty means no
        // message queued, not no bytes: messages may weigh nothing. (A stale length is
        // too high, like a stale count, and at worst drops a message that would have
        // gone in alone.)
        if queued.saturating_add(size) > self.bytes_max && (queued != 0 || self.queue.len() != 0) {
            bump(&self.dropped);
            return false;
        }
        // Counted before the push, so the consumer that pops it (after the ring's
        // release/acquire) subtracts a weight that was already added.
        self.bytes.fetch_add(size, Ordering::Relaxed);
        // SAFETY: the caller holds the broker lock (this function's contract), so this is
        // the ring's only producer.
        match unsafe { self.queue.push(message) } {
            Ok(()) => true,
            Err(_rejected) => {
                self.bytes.fetch_sub(size, Ordering::Relaxed);
                bump(&self.dropped);
                false
            }
        }
    }

    /// Takes the oldest queued message, if any. Never waits.
    pub(crate) fn take(&self) -> Option<T> {
        let message = self.queue.pop()?;
        self.bytes
            .fetch_sub(self.weigh(&message), Ordering::Relaxed);
        Some(message)
    }

    /// Moves up to `max` of the oldest queued messages onto `out`, under one consumer-lock
    /// hold; returns how many. Never waits.
    pub(crate) fn take_many(&self, out: &mut Vec<T>, max: usize) -> usize {
        let start = out.len();
        let taken = self.queue.pop_many(out, max);
        let size: usize = out[start..].iter().map(|message| self.weigh(message)).sum();
        self.bytes.fetch_sub(size, Ordering::Relaxed);
        taken
    }

    /// Bytes queued right now (as the broker weighs them).
    pub(crate) fn queued_bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Messages currently queued.
    pub(crate) fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Messages ever enqueued here.
    pub(crate) fn received(&self) -> u64 {
        // The ring's push count is exactly the number of messages enqueued.
        self.queue.pushed() as u64
    }

    /// Messages ever dropped here because the queue was full.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Whether the mailbox has left the registry. `Acquire` pairs with the `Release` in
    /// [`Mailbox::mark_closed`], so a reader that sees `true` also sees every message that
    /// was enqueued before the close.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Marks the mailbox closed. Called under the broker lock, after it left the registry.
    pub(crate) fn mark_closed(&self) {
        self.registry_index.store(NOT_REGISTERED, Ordering::Relaxed);
        self.closed.store(true, Ordering::Release);
    }

    /// The registry position (under the broker lock only).
    pub(crate) fn registry_index(&self) -> usize {
        self.registry_index.load(Ordering::Relaxed)
    }

    /// Moves the mailbox to `index` in the registry (under the broker lock only).
    pub(crate) fn set_registry_index(&self, index: usize) {
        self.registry_index.store(index, Ordering::Relaxed);
    }

    /// Whether a receiver may be parked on this mailbox.
    ///
    /// Only meaningful after a `SeqCst` fence that follows the enqueue: see
    /// [`Mailbox::add_waiter`] for the other half of that handshake.
    pub(crate) fn has_waiters(&self) -> bool {
        self.waiters.load(Ordering::Relaxed) > 0
    }

    /// Announces a receiver that is about to park.
    ///
    /// This `SeqCst` increment, followed by the `SeqCst` fence inside
    /// `Event::listen` and then a re-check of the queue, pairs with the publisher's
    /// "enqueue, `SeqCst` fence, read `waiters`". Either the publisher sees the waiter and
    /// notifies, or the receiver's re-check sees the message: no wake-up is lost.
    pub(crate) fn add_waiter(&self) {
        self.waiters.fetch_add(1, Ordering::SeqCst);
    }

    /// Withdraws a receiver announced by [`Mailbox::add_waiter`].
    pub(crate) fn remove_waiter(&self) {
        self.waiters.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Adds one to a counter that only the broker-lock holder writes.
fn bump(counter: &AtomicU64) {
    counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}
