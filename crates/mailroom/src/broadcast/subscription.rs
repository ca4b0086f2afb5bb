//! The consumer's handle: polling, receiving, counters and unsubscribing.

use super::broker::Shared;
use super::mailbox::Mailbox;
use super::recv::{recv_until, Recv};
use super::sync::Arc;
use super::{RecvTimeoutError, SubscriptionStats};
use std::time::{Duration, Instant};

/// One subscriber of a [`Broker`]: a read-only handle to its bounded mailbox.
///
/// Consuming never takes the broker lock, so a slow consumer cannot hold up the
/// publisher. Dropping a `Subscription` unsubscribes it.
///
/// # Examples
///
/// ```
/// use mailroom::broadcast::Broker;
///
/// let broker = Broker::new(4, 8)?;
/// let sub = broker.subscribe()?;
/// broker.publish(7)?;
/// assert_eq!(sub.poll(), Some(7));
/// assert_eq!(sub.poll(), None); // nothing buffered; not closed
/// assert!(!sub.is_closed());
/// # Ok::<(), mailroom::broadcast::BroadcastError>(())
/// ```
///
/// [`Broker`]: super::Broker
pub struct Subscription<T> {
    shared: Arc<Shared<T>>,
    mailbox: Arc<Mailbox<T>>,
}

impl<T> Subscription<T> {
    pub(crate) fn new(shared: Arc<Shared<T>>, mailbox: Arc<Mailbox<T>>) -> Self {
        Self { shared, mailbox }
    }

    pub(crate) fn shared(&self) -> &Arc<Shared<T>> {
        &self.shared
    }

    pub(crate) fn mailbox(&self) -> &Arc<Mailbox<T>> {
        &self.mailbox
    }

    /// Takes the oldest buffered message, or `None` if nothing is buffered. Never waits.
    ///
    /// `None` alone does not mean the subscription is closed: check [`is_closed`], or use
    /// [`recv`], which tells the two apart.
    ///
    /// [`is_closed`]: Subscription::is_closed
    /// [`recv`]: Subscription::recv
    pub fn poll(&self) -> Option<T> {
        self.mailbox.take()
    }

    /// Moves up to `max` buffered messages, oldest first, onto the end of `buf`, and returns
    /// how many it moved (0 if nothing is buffered, or if `max` is 0). Never waits.
    ///
    /// Equivalent to calling [`poll`] up to `max` times, but it takes the mailbox's
    /// consumer lock once for the whole batch instead of once per message, so draining in
    /// batches is cheaper per message. `buf` is appended to, not cleared; reuse one buffer
    /// across calls to avoid reallocating. Messages published while the batch is taken may
    /// or may not be included. Counters stay exact: the moved messages leave
    /// [`stats`]`().queued`, and `received`/`dropped` are unaffected.
    ///
    /// Like [`poll`], 0 alone does not mean the subscription is closed.
    ///
    /// # Panics
    ///
    /// Only if growing `buf` overflows `isize::MAX` bytes (as [`Vec::reserve`]); no message
    /// is lost in that case.
    ///
    /// # Examples
    ///
    /// ```
    /// use mailroom::broadcast::Broker;
    ///
    /// let broker = Broker::new(1, 8)?;
    /// let sub = broker.subscribe()?;
    /// for n in 0..5 {
    ///     broker.publish(n)?;
    /// }
    /// let mut buf = Vec::new();
    /// assert_eq!(sub.poll_many(&mut buf, 3), 3);
    /// assert_eq!(buf, [0, 1, 2]);
    /// assert_eq!(sub.poll_many(&mut buf, usize::MAX), 2);
    /// assert_eq!(buf, [0, 1, 2, 3, 4]);
    /// assert_eq!(sub.poll_many(&mut buf, usize::MAX), 0); // nothing buffered; not closed
    /// # Ok::<(), mailroom::broadcast::BroadcastError>(())
    /// ```
    ///
    /// [`poll`]: Subscription::poll
    /// [`stats`]: Subscription::stats
    pub fn poll_many(&self, buf: &mut Vec<T>, max: usize) -> usize {
        self.mailbox.take_many(buf, max)
    }

    /// Waits for the next message. Resolves to `None` once the subscription is closed
    /// (unsubscribed, or its broker closed) and its mailbox is drained.
    ///
    /// Works on any executor; the library itself depends on none. Cancel-safe: dropping the
    /// future loses no message.
    ///
    /// # Examples
    ///
    /// ```
    /// use mailroom::broadcast::Broker;
    ///
    /// let broker = Broker::new(1, 4)?;
    /// let sub = broker.subscribe()?;
    /// broker.publish("ping")?;
    /// broker.close();
    /// futures::executor::block_on(async {
    ///     assert_eq!(sub.recv().await, Some("ping"));
    ///     assert_eq!(sub.recv().await, None);
    /// });
    /// # Ok::<(), mailroom::broadcast::BroadcastError>(())
    /// ```
    pub fn recv(&self) -> Recv<'_, T> {
        Recv::new(self)
    }

    /// Blocks the calling thread until a message arrives, the subscription is closed and
    /// drained, or `timeout` passes.
    ///
    /// # Errors
    ///
    /// [`RecvTimeoutError::Timeout`] if nothing arrived in time;
    /// [`RecvTimeoutError::Closed`] once the subscription is closed and drained.
    ///
    /// # Examples
    ///
    /// ```
    /// use mailroom::broadcast::{Broker, RecvTimeoutError};
    /// use std::time::Duration;
    ///
    /// let broker = Broker::new(1, 4)?;
    /// let sub = broker.subscribe()?;
    /// let publisher = std::thread::spawn(move || broker.publish(5).map(|_| ()));
    /// assert_eq!(sub.recv_timeout(Duration::from_secs(10)), Ok(5));
    /// publisher.join().unwrap()?;
    /// // The publisher thread dropped the last broker handle, which closed the broker.
    /// assert_eq!(sub.recv_timeout(Duration::from_millis(1)), Err(RecvTimeoutError::Closed));
    /// # Ok::<(), mailroom::broadcast::BroadcastError>(())
    /// ```
    pub fn recv_timeout(&self, timeout: Duration) -> Result<T, RecvTimeoutError> {
        // An unrepresentable deadline is as good as none.
        recv_until(self, Instant::now().checked_add(timeout))
    }

    /// Blocks the calling thread until a message arrives; `None` once the subscription is
    /// closed and drained.
    ///
    /// # Examples
    ///
    /// ```
    /// use mailroom::broadcast::Broker;
    ///
    /// let broker = Broker::new(1, 4)?;
    /// let sub = broker.subscribe()?;
    /// broker.publish(1)?;
    /// drop(broker); // the last handle: closes the broker
    /// assert_eq!(sub.recv_blocking(), Some(1));
    /// assert_eq!(sub.recv_blocking(), None);
    /// # Ok::<(), mailroom::broadcast::BroadcastError>(())
    /// ```
    pub fn recv_blocking(&self) -> Option<T> {
        recv_until(self, None).ok()
    }

    /// Whether the subscription is closed: unsubscribed, or its broker closed. A closed
    /// subscription receives nothing new, but messages already buffered can still be taken.
    pub fn is_closed(&self) -> bool {
        self.mailbox.is_closed()
    }

    /// Leaves the broker, freeing a subscriber slot. Idempotent.
    ///
    /// Once this returns, no publish can enqueue here and [`is_closed`] is `true`.
    /// Messages already buffered stay available to [`poll`]. Receivers waiting in
    /// [`recv`] are woken.
    ///
    /// # Examples
    ///
    /// ```
    /// use mailroom::broadcast::{Broker, Delivery};
    ///
    /// let broker = Broker::new(1, 4)?;
    /// let sub = broker.subscribe()?;
    /// broker.publish(1)?;
    /// sub.unsubscribe();
    /// assert_eq!(broker.publish(2)?, Delivery { delivered: 0, dropped: 0 });
    /// assert_eq!(sub.poll(), Some(1));
    /// assert_eq!(sub.poll(), None);
    /// assert!(sub.is_closed());
    /// # Ok::<(), mailroom::broadcast::BroadcastError>(())
    /// ```
    ///
    /// [`is_closed`]: Subscription::is_closed
    /// [`poll`]: Subscription::poll
    /// [`recv`]: Subscription::recv
    pub fn unsubscribe(&self) {
        self.shared.unsubscribe(&self.mailbox);
    }

    /// This subscriber's counters.
    ///
    /// `received` and `dropped` are exact once publishers are quiet; `queued` is a
    /// snapshot that consumers may already have changed.
    ///
    /// # Examples
    ///
    /// ```
    /// use mailroom::broadcast::{Broker, SubscriptionStats};
    ///
    /// let broker = Broker::new(1, 2)?;
    /// let sub = broker.subscribe()?;
    /// for n in 0..5 {
    ///     broker.publish(n)?;
    /// }
    /// sub.poll();
    /// assert_eq!(sub.stats(), SubscriptionStats { received: 2, dropped: 3, queued: 1 });
    /// # Ok::<(), mailroom::broadcast::BroadcastError>(())
    /// ```
    pub fn stats(&self) -> SubscriptionStats {
        SubscriptionStats {
            received: self.mailbox.received(),
            dropped: self.mailbox.dropped(),
            queued: self.mailbox.queued(),
        }
    }

    /// Bytes buffered right now, as the broker's byte budget weighs them (always 0 for a
    /// broker made by [`Broker::new`](super::Broker::new)); a snapshot, like
    /// [`stats`](Subscription::stats)`().queued`. Example at
    /// [`Broker::with_mailbox_bytes`](super::Broker::with_mailbox_bytes).
    pub fn queued_bytes(&self) -> usize {
        self.mailbox.queued_bytes()
    }
}

impl<T> Drop for Subscription<T> {
    fn drop(&mut self) {
        self.unsubscribe();
    }
}

impl<T> std::fmt::Debug for Subscription<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("closed", &self.is_closed())
            .field("stats", &self.stats())
            .finish()
    }
}
