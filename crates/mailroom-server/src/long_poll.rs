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
    /// One notifier per topic that has ever been long-polled. Topics are few (the store
    /// caps them) and a notifier is small, so entries are never removed.
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

impl LongPolls {
    /// Wakes every long poll waiting on `topic` so it re-polls. Cheap when nobody waits:
    /// one map lookup under a short lock.
    pub fn wake(&self, topic: &str) {
        let notify = self.topics.lock().get(topic).cloned();
        if let Some(notify) = notify {
            notify.notify_waiters();
        }
    }

    /// The notifier of `topic`, created on first use.
    pub fn notifier(&self, topic: &str) -> Arc<Notify> {
        self.topics
            .lock()
            .entry(topic.to_owned())
            .or_default()
            .clone()
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
        let notify = polls.notifier("t");
        let notified = notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        polls.wake("other");
        assert!(futures_util::FutureExt::now_or_never(notified.as_mut()).is_none());
        polls.wake("t");
        notified.await;
    }
}
