//! Long polls: how a waiting `poll/batch` learns that re-polling may now find something.
//!
//! A poll's answer changes in two ways: by a call, or by the clock alone.
//!
//! # Calls: wake-ups
//!
//! The backend ([`crate::backend`]) calls [`LongPolls::wake`] for a topic after each of
//! its calls that may make a message ready or free a slot of a group's window (a publish,
//! an ack, a nack, a redrive) has succeeded; a backend shared by several brokers also
//! wakes it for the other brokers' writes. A waiter registers interest *before* each
//! re-poll ([`TopicWaiter::notified`] + `enable`), so a wake that lands between its poll
//! and its wait is never lost: the registered future is already armed and completes at
//! once.
//!
//! # The clock: due times
//!
//! A backoff delay ending or a lease running out happens with no call to signal it. After
//! an empty poll a waiter asks the backend when the next such event of its group is due
//! ([`Backend::next_due_in`](crate::backend::Backend::next_due_in)) and sleeps until
//! then, or its own deadline, whichever is first; it re-polls at that moment, so such a
//! delivery is not late at all, and an idle long poll does not poll while it waits.
//!
//! One clock event is created by a call that does not wake: a poll by another consumer
//! makes a new lease, which may run out before the time a waiter slept until. Every
//! waiter therefore records the time it will wake by itself ([`TopicWaiter::arm`]), per
//! group, with the group's lease length, and a backend poll that made deliveries calls
//! [`LongPolls::leased`]: it wakes the topic only if the new lease's deadline comes before
//! the *latest* of those times (the latest sleeper is the one that would miss it). A
//! waiter's own time already covers the group's earliest lease deadline, and every new
//! lease of a group runs out after the ones made before it, so once its waiters have
//! re-armed, polls of that group no longer wake them. Touches only push deadlines later,
//! so they never need to wake. To close the gap between its empty poll and arming, a
//! waiter first arms at its deadline (any lease made meanwhile wakes it) and lowers that
//! once it has read the due time.
//!
//! A waiter still re-polls every [`LONG_POLL_RECHECK_MS`] (5 s) at least, for three
//! things a wake-up cannot promise: a request cancelled by its client between its store
//! call and its wake (`backend::Embedded::durable`), the store's wall clock being stepped
//! forward (timers run on the monotonic clock, so due times would then come early by the
//! store's reckoning), and a group deleted and re-created with a different lease while
//! its waiters still hold the old length.
//!
//! # Limits and shutdown
//!
//! The number of waiting long polls is bounded by [`LONG_POLLS_MAX`]: a waiter holds a
//! slot ([`Waiting`]) from its first empty poll until it answers or its request is
//! dropped (the client went away), and a long poll that finds every slot taken is
//! refused with 429 `too_many_long_polls` instead of queueing.
//!
//! On shutdown ([`LongPolls::close`]) every waiter answers what it has (nothing) at once,
//! so idle consumers do not hold the server's graceful shutdown for their whole wait.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use parking_lot::Mutex;
use tokio::sync::futures::Notified;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::error::ApiError;

/// The longest `wait_ms` a long poll may ask for: 30 seconds.
pub const LONG_POLL_WAIT_MS_MAX: u64 = 30_000;
/// The most long polls waiting at once across the server.
pub const LONG_POLLS_MAX: usize = 1024;
/// The longest a waiting long poll sleeps without re-polling, however far its next due
/// time: a safety net for the wake-ups that can be lost (see the [module docs](self)).
pub const LONG_POLL_RECHECK_MS: u64 = 5_000;

/// The per-topic wake-ups, the times waiters sleep until, and the count of waiting long
/// polls.
#[derive(Debug, Default)]
pub struct LongPolls {
    /// One entry per topic that has a long poll running now. The last [`TopicWaiter`]
    /// of a topic removes its entry, so names polled once (unknown ones included) leave
    /// nothing behind. Clones of a notifier exist only in the map and in waiters, and
    /// are made under this lock, so the count tells who still needs it.
    topics: Mutex<HashMap<String, TopicWaiters>>,
    waiting: Arc<AtomicUsize>,
    repolls: AtomicU64,
    closing: AtomicBool,
    closed: Notify,
}

/// The waiters of one topic.
#[derive(Debug, Default)]
struct TopicWaiters {
    notify: Arc<Notify>,
    /// By group: what its armed waiters sleep until.
    groups: HashMap<String, GroupArms>,
}

/// The armed waiters of one group.
#[derive(Debug, Default)]
struct GroupArms {
    /// The group's lease length, as its waiters last read it (`None`: no leases).
    lease: Option<Duration>,
    /// The times the waiters will wake by themselves, with how many wake at each.
    wake_at: BTreeMap<Instant, usize>,
}

impl GroupArms {
    fn remove(&mut self, at: Instant) {
        if let Some(count) = self.wake_at.get_mut(&at) {
            *count -= 1;
            if *count == 0 {
                self.wake_at.remove(&at);
            }
        }
    }
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

/// A running long poll's hold on its topic's notifier and its armed time; the last
/// waiter of a topic removes the topic's entry when dropped.
#[derive(Debug)]
pub struct TopicWaiter<'a> {
    polls: &'a LongPolls,
    topic: String,
    group: String,
    notify: Arc<Notify>,
    /// The time this waiter is counted as waking at, if armed.
    armed: Mutex<Option<Instant>>,
}

impl TopicWaiter<'_> {
    /// This waiter's topic entry in `topics`, unless the topic was forgotten (deleted)
    /// since, and perhaps polled again under a new notifier.
    fn own_entry<'m>(
        &self,
        topics: &'m mut HashMap<String, TopicWaiters>,
    ) -> Option<&'m mut TopicWaiters> {
        topics
            .get_mut(&self.topic)
            .filter(|waiters| Arc::ptr_eq(&waiters.notify, &self.notify))
    }

    /// The topic's next wake-up: create and `enable` it before each poll.
    pub fn notified(&self) -> Notified<'_> {
        self.notify.notified()
    }

    /// Records that this waiter will wake by itself at `wake_at` (replacing what it
    /// armed before), and that its group's leases last `lease`: from now on a new lease
    /// of the group running out before `wake_at` wakes the topic ([`LongPolls::leased`]).
    pub fn arm(&self, wake_at: Instant, lease: Option<Duration>) {
        let mut topics = self.polls.topics.lock();
        // A forgotten topic (deleted meanwhile) has no arms to keep: its waiters are
        // woken and end.
        let Some(waiters) = self.own_entry(&mut topics) else {
            return;
        };
        let arms = waiters.groups.entry(self.group.clone()).or_default();
        let mut armed = self.armed.lock();
        if let Some(before) = armed.replace(wake_at) {
            arms.remove(before);
        }
        *arms.wake_at.entry(wake_at).or_default() += 1;
        arms.lease = lease;
    }
}

impl Drop for TopicWaiter<'_> {
    fn drop(&mut self) {
        let mut topics = self.polls.topics.lock();
        let Some(waiters) = self.own_entry(&mut topics) else {
            return;
        };
        if let Some(armed) = self.armed.lock().take() {
            if let Some(arms) = waiters.groups.get_mut(&self.group) {
                arms.remove(armed);
                if arms.wake_at.is_empty() {
                    waiters.groups.remove(&self.group);
                }
            }
        }
        // The map's clone and this one: nobody else waits on it.
        if Arc::strong_count(&self.notify) == 2 {
            topics.remove(&self.topic);
        }
    }
}

impl LongPolls {
    /// Wakes every long poll waiting on `topic` so it re-polls. Cheap when nobody waits:
    /// one map lookup under a short lock (the wake happens under it too, so the map
    /// and the waiters hold the only clones of a notifier).
    pub fn wake(&self, topic: &str) {
        if let Some(waiters) = self.topics.lock().get(topic) {
            waiters.notify.notify_waiters();
        }
    }

    /// Wakes every long poll of every topic so each re-polls: after a stretch in which
    /// wakes may have been missed (a backend's listener for other brokers' writes was
    /// disconnected), so that no waiter sleeps on to its recheck for a write it was not
    /// told of.
    ///
    /// ```
    /// use mailroom_server::long_poll::LongPolls;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let polls = LongPolls::default();
    /// let orders = polls.waiter("orders", "workers");
    /// let invoices = polls.waiter("invoices", "billing");
    /// let (woken_orders, woken_invoices) = (orders.notified(), invoices.notified());
    /// polls.wake_all();
    /// woken_orders.await;
    /// woken_invoices.await;
    /// # }
    /// ```
    pub fn wake_all(&self) {
        for waiters in self.topics.lock().values() {
            waiters.notify.notify_waiters();
        }
    }

    /// [`leased`](Self::leased) when the poll `made_any` lease, else nothing: what every
    /// backend's poll calls after its store call, so the rule lives in one place.
    pub fn leased_if(&self, topic: &str, group: &str, polled_at: Instant, made_any: bool) {
        if made_any {
            self.leased(topic, group, polled_at);
        }
    }

    /// Called by a handler whose poll of `group` handed out deliveries, with the time
    /// taken *before* its store call: each new delivery's lease runs out no sooner than
    /// `polled_at` plus the group's lease length. Wakes `topic` if that is before the
    /// time some waiter of the group sleeps until, which would otherwise sleep through
    /// it. One map lookup when nobody of that group waits.
    pub fn leased(&self, topic: &str, group: &str, polled_at: Instant) {
        let topics = self.topics.lock();
        let Some(waiters) = topics.get(topic) else {
            return;
        };
        let Some(arms) = waiters.groups.get(group) else {
            return;
        };
        let (Some(lease), Some((&latest, _))) = (arms.lease, arms.wake_at.last_key_value()) else {
            return;
        };
        if polled_at + lease < latest {
            waiters.notify.notify_waiters();
        }
    }

    /// Joins the waiters of `topic` (polling `group`), creating the topic's notifier if
    /// it has none. The waiter is not armed until [`TopicWaiter::arm`].
    pub fn waiter(&self, topic: &str, group: &str) -> TopicWaiter<'_> {
        let notify = self
            .topics
            .lock()
            .entry(topic.to_owned())
            .or_default()
            .notify
            .clone();
        TopicWaiter {
            polls: self,
            topic: topic.to_owned(),
            group: group.to_owned(),
            notify,
            armed: Mutex::new(None),
        }
    }

    /// Drops `topic`'s notifier and wakes its waiters: the topic was deleted. Woken
    /// waiters re-poll, and the store answers that re-poll as for any unknown topic
    /// (404 `unknown_topic`), so a long poll on a deleted topic ends at once.
    pub fn forget(&self, topic: &str) {
        if let Some(waiters) = self.topics.lock().remove(topic) {
            waiters.notify.notify_waiters();
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

    /// Counts one re-poll of a waiting long poll (every poll after its first).
    pub fn note_repoll(&self) {
        self.repolls.fetch_add(1, Ordering::Relaxed);
    }

    /// How many re-polls waiting long polls have made since the server started: what
    /// waiting costs the store.
    pub fn repolls(&self) -> u64 {
        self.repolls.load(Ordering::Relaxed)
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
            (refused.status.as_u16(), refused.code.as_str()),
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
        let waiter = polls.waiter("t", "g");
        let notified = waiter.notified();
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
        let waiter = polls.waiter("t", "g");
        let _kept = polls.waiter("kept", "g");
        {
            let notified = waiter.notified();
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
        let first = polls.waiter("t", "g");
        let second = polls.waiter("t", "h");
        let other = polls.waiter("u", "g");
        assert_eq!(polls.topics(), 2);
        drop(first);
        assert_eq!(polls.topics(), 2);
        drop(other);
        assert_eq!(polls.topics(), 1);
        drop(second);
        assert_eq!(polls.topics(), 0);
    }

    /// Whether `waiter`'s wake-up, enabled before `act`, fired during it.
    fn woken_by(waiter: &TopicWaiter<'_>, act: impl FnOnce()) -> bool {
        let notified = waiter.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        act();
        futures_util::FutureExt::now_or_never(notified).is_some()
    }

    // Proves a new lease wakes the topic exactly when it runs out before the time some
    // waiter of its group sleeps until: the latest such time counts (that sleeper would
    // miss it), a lease of another group or a group with no leases wakes nobody.
    #[test]
    fn lease_wakes_only_waiters_that_would_sleep_through_it() {
        let polls = LongPolls::default();
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let lease = Some(Duration::from_millis(500));
        let early = polls.waiter("t", "g");
        let late = polls.waiter("t", "g");
        let other = polls.waiter("t", "h");
        early.arm(at(100), lease);
        other.arm(at(10_000), None);
        // Nobody sleeps past 600: a lease polled at 100 (running out at 600) is covered.
        assert!(!woken_by(&late, || polls.leased("t", "g", at(100))));
        late.arm(at(1_000), lease);
        assert!(woken_by(&early, || polls.leased("t", "g", at(499))));
        assert!(!woken_by(&early, || polls.leased("t", "g", at(500))));
        assert!(
            !woken_by(&other, || polls.leased("t", "h", at(0))),
            "no leases"
        );
        assert!(
            !woken_by(&early, || polls.leased("u", "g", at(0))),
            "other topic"
        );
        // Re-arming replaces the waiter's time rather than adding one.
        late.arm(at(200), lease);
        assert!(!woken_by(&early, || polls.leased("t", "g", at(0))));
        late.arm(at(900), lease);
        drop(late);
        assert!(
            !woken_by(&early, || polls.leased("t", "g", at(0))),
            "dropped"
        );
        drop(early);
        assert!(!woken_by(&other, || polls.leased("t", "g", at(0))));
    }

    // Proves a deleted (forgotten) topic keeps no arms: a waiter arming after the delete
    // changes nothing, and a new waiter of a re-created topic starts clean.
    #[test]
    fn arms_of_a_forgotten_topic_are_dropped() {
        let polls = LongPolls::default();
        let start = Instant::now();
        let old = polls.waiter("t", "g");
        polls.forget("t");
        old.arm(
            start + Duration::from_secs(9),
            Some(Duration::from_millis(1)),
        );
        let new = polls.waiter("t", "g");
        assert!(!woken_by(&new, || polls.leased("t", "g", start)));
        drop(old);
        assert_eq!(polls.topics(), 1);
        drop(new);
        assert_eq!(polls.topics(), 0);
    }
}
