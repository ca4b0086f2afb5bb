//! A [`futures_core::Stream`] over a subscription (feature `stream`).

use super::recv::{poll_recv, Waiter};
use super::Subscription;
use futures_core::Stream;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A [`Stream`] of a subscription's messages, ending once it is closed and drained.
///
/// Made by [`Subscription::into_stream`]. Dropping the stream drops the subscription,
/// which unsubscribes it.
pub struct SubscriptionStream<T> {
    subscription: Subscription<T>,
    waiter: Option<Waiter<T>>,
}

impl<T> Subscription<T> {
    /// Turns the subscription into a [`Stream`] (feature `stream`).
    ///
    /// # Examples
    ///
    /// ```
    /// use futures::StreamExt;
    /// use mailroom::broadcast::Broker;
    ///
    /// let broker = Broker::new(1, 8)?;
    /// let stream = broker.subscribe()?.into_stream();
    /// for n in 0..3 {
    ///     broker.publish(n)?;
    /// }
    /// broker.close();
    /// let all: Vec<i32> = futures::executor::block_on(stream.collect());
    /// assert_eq!(all, [0, 1, 2]);
    /// # Ok::<(), mailroom::broadcast::BroadcastError>(())
    /// ```
    pub fn into_stream(self) -> SubscriptionStream<T> {
        SubscriptionStream {
            subscription: self,
            waiter: None,
        }
    }
}

impl<T> SubscriptionStream<T> {
    /// The underlying subscription, e.g. for its counters or to unsubscribe early.
    pub fn subscription(&self) -> &Subscription<T> {
        &self.subscription
    }
}

impl<T> Stream for SubscriptionStream<T> {
    type Item = T;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        // No field is structurally pinned, so the stream is `Unpin`.
        let this = self.get_mut();
        poll_recv(&this.subscription, &mut this.waiter, cx)
    }
}

impl<T> std::fmt::Debug for SubscriptionStream<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubscriptionStream")
            .field("subscription", &self.subscription)
            .finish()
    }
}
