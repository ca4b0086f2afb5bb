//! Long polls: how a waiting `poll/batch` learns that re-polling may now find something.
//!
//! Every handler that may make a message ready or free a slot of a group's window (a
//! publish, an ack, a nack, a touch, a redrive) calls [`LongPolls::wake`] for its topic
//! after the store call succeeded. A waiter registers interest *before* each re-poll
//! ([`Notify::notified`] + `enable`), so a wake that lands between its poll and its wait
//! is never lost: the registered future is already armed and completes at once.
//!
//! Some events happen with no request to signal them: a backoff delay running out, a
//! lease expiring. The store does not say when those are due, so a waiter also re-polls
//! every [`LONG_POLL_RECHECK_MS`]; such a delivery is at most that late.
//!
//! The number of waiting long polls is bounded by [`LONG_POLLS_MAX`]: a waiter holds a
//! slot ([`Waiting`]) from its first empty poll until it answers or its request is
//! dropped (the client went away), and a long poll that finds every slot taken is
//! refused with 429 `too_many_long_polls` instead of queueing.
//!
//! On shutdown ([`LongPolls::close`]) every waiter answers what it has (nothing) at once,
//! so idle consumers do not hold the server's graceful shutdown for their whole wait.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use axum::http::StatusCode;
use parking_lot::Mutex;
use tokio::sync::futures::Notified;
use tokio::sync::Notify;

use crate::error::ApiError;

/// The longest `wait_ms` a long poll may ask for: 30 seconds.
pub const LONG_POLL_WAIT_MS_MAX: u64 = 30_000;
/// The most long polls waiting at once across the server.
pub const LONG_POLLS_MAX: usize = 1024;
/// How often a waiting long poll re-polls even without a wake, for deliveries that become
/// ready by the clock alone (backoff delays, lease expiries).
pub const LONG_POLL_RECHECK_MS: u64 = 250;

/// The per-topic wake-ups and the count of waiting long polls.
#[derive(Debug, Default)]
pub struct LongPolls {
    /// One notifier per topic that has a long poll running now. The last
    /// [`TopicWaiter`] of a topic removes its entry, so names polled once (unknown ones
    /// included) leave nothing behind. Clones of a notifier exist only in the map and in
    /// waiters, and are made under this lock, so the count tells who still needs it.
    topics: Mutex<HashMap<String, Arc<Notify>>>,
    waiting: Arc<AtomicUsize>,
    closing: AtomicBool,
    closed: Notify,
}

/// A slot among the [`LONG_POLLS_MAX`] waiting long polls, given back on drop (also when
/// the request is cancelled because its client went away).
#[derive(Debug)]
pub struct Waiting {
    waiting: Arc<AtomicUsize>,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.waiting.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A running long poll's hold on its topic's notifier; the last one of a topic removes
/// the notifier when dropped.
#[derive(Debug)]
pub struct TopicWaiter<'a> {
    polls: &'a LongPolls,
    topic: String,
    notify: Arc<Notify>,
}

impl TopicWaiter<'_> {
    /// The topic's notifier: register with [`Notify::notified`] + `enable` before each
    /// poll.
    pub fn notify(&self) -> &Notify {
        &self.notify
    }
}

impl Drop for TopicWaiter<'_> {
    fn drop(&mut self) {
        let mut topics = self.polls.topics.lock();
        let is_ours = topics
            .get(&self.topic)
            .is_some_and(|notify| Arc::ptr_eq(notify, &self.notify));
        // The map's clone and this one: nobody else waits on it.
        if is_ours && Arc::strong_count(&self.notify) == 2 {
            topics.remove(&self.topic);
        }
    }
}

impl LongPolls {
    /// Wakes every long poll waiting on `topic` so it re-polls. Cheap when nobody waits:
    /// one map lookup under a short lock (the wake happens under it too, so the map
    /// and the waiters hold the only clones of a notifier).
    pub fn wake(&self, topic: &str) {
        if let Some(notify) = self.topics.lock().get(topic) {
            notify.notify_waiters();
        }
    }

    /// Joins the waiters of `topic`, creating its notifier if it has none.
    pub fn waiter(&self, topic: &str) -> TopicWaiter<'_> {
        let notify = self
            .topics
            .lock()
            .entry(topic.to_owned())
            .or_default()
            .clone();
        TopicWaiter {
            polls: self,
            topic: topic.to_owned(),
            notify,
        }
    }

    /// Drops `topic`'s notifier and wakes its waiters: the topic was deleted. Woken
    /// waiters re-poll, and the store answers that re-poll as for any unknown topic
    /// (404 `unknown_topic`), so a long poll on a deleted topic ends at once.
    pub fn forget(&self, topic: &str) {
        if let Some(notify) = self.topics.lock().remove(topic) {
            notify.notify_waiters();
        }
    }

    /// How many topics have a notifier now.
    pub fn topics(&self) -> usize {
        self.topics.lock().len()
    }

    /// Takes a waiting slot.
    ///
    /// # Errors
    /// 429 `too_many_long_polls` when [`LONG_POLLS_MAX`] long polls already wait.
    pub fn admit(&self) -> Result<Waiting, ApiError> {
        let admitted = self
            .waiting
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |count| {
                (count < LONG_POLLS_MAX).then_some(count + 1)
            });
        match admitted {
            Ok(_) => Ok(Waiting {
                waiting: self.waiting.clone(),
            }),
            Err(_) => Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_long_polls",
                format!(
                    "{LONG_POLLS_MAX} long polls are already waiting; retry later or poll \
                     without wait_ms"
                ),
            )),
        }
    }

    /// Ends every wait, now and from now on: the server is shutting down.
    pub fn close(&self) {
        self.closing.store(true, Ordering::Release);
        self.closed.notify_waiters();
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closing(&self) -> bool {
        self.closing.load(Ordering::Acquire)
    }

    /// Completes when [`close`](Self::close) is called; like a topic's wake-up, enable it
    /// before checking [`is_closing`](Self::is_closing) so a close in between is not
    /// missed.
    pub fn closed(&self) -> Notified<'_> {
        self.closed.notified()
    }

    /// How many long polls wait now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the waiting slots are bounded, refused with 429 beyond the bound, and given
    // back when a slot is dropped.
    #[test]
    fn admission_is_bounded_and_released_on_drop() {
        let polls = LongPolls::default();
        let slots: Vec<Waiting> = (0..LONG_POLLS_MAX)
            .map(|_| polls.admit().expect("below the limit"))
            .collect();
        assert_eq!(polls.waiting(), LONG_POLLS_MAX);
        let refused = polls.admit().unwrap_err();
        assert_eq!(
            (refused.status.as_u16(), refused.code),
            (429, "too_many_long_polls")
        );
        drop(slots);
        assert_eq!(polls.waiting(), 0);
        assert!(polls.admit().is_ok());
    }

    // Proves a wake between a waiter's registration and its wait is not lost: the
    // registered future completes, while a wake of another topic does not fire it.
    #[tokio::test]
    async fn wake_after_enable_is_not_lost() {
        let polls = LongPolls::default();
        let waiter = polls.waiter("t");
        let notified = waiter.notify().notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        polls.wake("other");
        assert!(futures_util::FutureExt::now_or_never(notified.as_mut()).is_none());
        polls.wake("t");
        notified.await;
    }

    // Proves forgetting a topic wakes its armed waiter and removes its notifier, so a
    // deleted topic leaves no state behind even while its waiters finish.
    #[tokio::test]
    async fn forget_wakes_and_removes() {
        let polls = LongPolls::default();
        let waiter = polls.waiter("t");
        let _kept = polls.waiter("kept");
        {
            let notified = waiter.notify().notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            polls.forget("t");
            notified.await;
        }
        assert_eq!(polls.topics(), 1);
        drop(waiter);
        assert_eq!(polls.topics(), 1);
    }

    // Proves a topic's notifier lives exactly as long as its last waiter, whatever the
    // order the waiters leave in, so polled names (unknown ones too) do not accumulate.
    #[test]
    fn last_waiter_removes_the_notifier() {
        let polls = LongPolls::default();
        let first = polls.waiter("t");
        let second = polls.waiter("t");
        let other = polls.waiter("u");
        assert_eq!(polls.topics(), 2);
        drop(first);
        assert_eq!(polls.topics(), 2);
        drop(other);
        assert_eq!(polls.topics(), 1);
        drop(second);
        assert_eq!(polls.topics(), 0);
    }
}
