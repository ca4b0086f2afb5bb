//! Waiting for a message: the [`Recv`] future and the blocking receive loop.
//!
//! Both follow one protocol. Take a message if one is buffered; if the subscription is
//! closed, take one last look and stop; otherwise announce a waiter, register a listener,
//! and look again before sleeping. The publisher's side of the handshake is in
//! `Broker::publish` (enqueue, `SeqCst` fence, read the waiter counts).

use super::broker::Shared;
use super::mailbox::Mailbox;
use super::sync::Arc;
use super::{RecvTimeoutError, Subscription};
use event_listener::{EventListener, Listener};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

/// The future returned by [`Subscription::recv`].
///
/// Resolves to the next message, or `None` once the subscription is closed and drained.
#[must_use = "futures do nothing unless polled"]
pub struct Recv<'a, T> {
    subscription: &'a Subscription<T>,
    waiter: Option<Waiter<T>>,
}

impl<'a, T> Recv<'a, T> {
    pub(crate) fn new(subscription: &'a Subscription<T>) -> Self {
        Self {
            subscription,
            waiter: None,
        }
    }
}

impl<T> Future for Recv<'_, T> {
    type Output = Option<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        // `Recv` holds no self-references, so it is `Unpin`.
        let this = self.get_mut();
        poll_recv(this.subscription, &mut this.waiter, cx)
    }
}

impl<T> std::fmt::Debug for Recv<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recv")
            .field("parked", &self.waiter.is_some())
            .finish()
    }
}

/// One round of the receive protocol for a task; shared by [`Recv`] and the stream adapter.
pub(crate) fn poll_recv<T>(
    subscription: &Subscription<T>,
    waiter: &mut Option<Waiter<T>>,
    cx: &mut Context<'_>,
) -> Poll<Option<T>> {
    loop {
        if let Some(message) = subscription.poll() {
            *waiter = None;
            return Poll::Ready(Some(message));
        }
        if subscription.is_closed() {
            // Everything enqueued before the close is visible now; take one last look.
            *waiter = None;
            return Poll::Ready(subscription.poll());
        }
        match waiter {
            None => *waiter = Some(Waiter::park(subscription)),
            Some(parked) => {
                let listener = parked
                    .listener
                    .as_mut()
                    .expect("a parked waiter has a listener");
                if Pin::new(listener).poll(cx).is_pending() {
                    return Poll::Pending;
                }
                *waiter = None;
            }
        }
    }
}

/// The blocking receive loop behind `recv_timeout` and `recv_blocking`.
pub(crate) fn recv_until<T>(
    subscription: &Subscription<T>,
    deadline: Option<Instant>,
) -> Result<T, RecvTimeoutError> {
    let mut waiter: Option<Waiter<T>> = None;
    loop {
        if let Some(message) = subscription.poll() {
            return Ok(message);
        }
        if subscription.is_closed() {
            return subscription.poll().ok_or(RecvTimeoutError::Closed);
        }
        let Some(mut parked) = waiter.take() else {
            waiter = Some(Waiter::park(subscription));
            continue;
        };
        let listener = parked
            .listener
            .take()
            .expect("a parked waiter has a listener");
        let notified = match deadline {
            None => {
                listener.wait();
                true
            }
            Some(deadline) => listener.wait_deadline(deadline).is_some(),
        };
        drop(parked);
        if !notified {
            // Timed out: a message or a close may still have landed just now.
            return match subscription.poll() {
                Some(message) => Ok(message),
                None if subscription.is_closed() => Err(RecvTimeoutError::Closed),
                None => Err(RecvTimeoutError::Timeout),
            };
        }
    }
}

/// A receiver that has announced itself to publishers and registered a listener.
///
/// Creating one increments the mailbox's and the broker's waiter counts (before the
/// listener is registered); dropping it decrements them, including when a [`Recv`] future
/// is cancelled.
pub(crate) struct Waiter<T> {
    mailbox: Arc<Mailbox<T>>,
    shared: Arc<Shared<T>>,
    /// `None` only while a blocking wait has taken it.
    listener: Option<EventListener>,
}

impl<T> Waiter<T> {
    /// Announces a receiver, then listens. The caller must re-check the mailbox after this
    /// returns and before waiting on the listener.
    fn park(subscription: &Subscription<T>) -> Self {
        let mailbox = Arc::clone(subscription.mailbox());
        let shared = Arc::clone(subscription.shared());
        mailbox.add_waiter();
        shared.add_parked();
        // `listen` registers the listener, then issues a `SeqCst` fence.
        let listener = Some(mailbox.event.listen());
        Self {
            mailbox,
            shared,
            listener,
        }
    }
}

impl<T> Drop for Waiter<T> {
    fn drop(&mut self) {
        self.shared.remove_parked();
        self.mailbox.remove_waiter();
    }
}
