//! [`Deferred`]: the answer of a store call that is written but maybe not yet durable.
//!
//! The `*_deferred` methods of [`DurableTopic`](crate::DurableTopic) do everything a call
//! does except wait for the disk: they check, plan, apply and write (into the log's write
//! buffer or the page cache) and return a [`Deferred`]. The answer inside is handed out
//! only by [`Deferred::wait`] or by awaiting it, both of which first wait until every
//! record the call wrote, and every record whose effect it saw, is durable under the
//! store's sync policy. So nobody is told anything a power cut could take back, exactly
//! as with the blocking methods (which are `deferred(..)?.wait()`).
//!
//! Awaiting builds on the log's [`Durable`]: under `SyncPolicy::Always` the log's sync
//! thread runs the `fdatasync` (one for every waiter of that moment) and wakes the task,
//! so an executor thread never blocks on the disk.
//!
//! A due group checkpoint (every `checkpoint_every` group records) is written by the
//! wait side, never by the call part: [`Deferred::wait`] writes it on the waiting thread
//! (it blocks anyway, and the blocking methods keep their exact behaviour), while an
//! awaited `Deferred` hands it to a short-lived background thread (at most one per topic
//! at a time), since a checkpoint syncs and must not stall an executor.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use crate::groups::Staged;
use crate::log::Durable;
use crate::topic::{CheckpointOn, TopicInner};
use crate::StoreError;

/// The answer of a store call that is written but may not be durable yet: it resolves
/// to the call's result once everything the call wrote or saw is durable.
///
/// Get one from a `*_deferred` method of [`DurableTopic`](crate::DurableTopic), e.g.
/// [`publish_deferred`](crate::DurableTopic::publish_deferred). Then either
/// - `.await` it (it is a runtime-agnostic [`Future`]: any executor, no runtime inside;
///   under `SyncPolicy::Always` the log's sync thread runs the shared `fdatasync` and
///   wakes the task, so the executor never blocks on the disk), or
/// - call the blocking [`wait`](Self::wait) (for threads; it may run the sync itself).
///
/// Under `SyncPolicy::Interval` and `Never`, which do not wait for the disk, it is ready
/// at once. The answer is never observable before it is durable: nothing but `wait` and
/// `.await` hands it out. Dropping a `Deferred` unawaited is allowed: the operation still
/// happened (and becomes durable with the next sync), but it was confirmed to nobody.
/// A failed sync resolves every `Deferred` waiting on it to an error, and the log (and
/// for group calls the topic's groups) is fail-stop from then on.
///
/// It owns what it needs (no borrow of the topic) and is `Send` when `T` is, so it can
/// be awaited in a spawned task or an axum handler. It does not hold the topic open: if
/// the topic is deleted meanwhile, it still resolves (the call happened before the
/// delete), to an error if the deleted files can no longer be synced.
///
/// # Example
///
/// ```
/// use bytes::Bytes;
/// use mailroom_store::{Store, StoreOptions};
///
/// let dir = tempfile::tempdir()?;
/// let store = Store::open(dir.path(), StoreOptions::default())?;
/// store.create_topic("t")?;
/// let topic = store.topic("t")?;
/// // Written, not yet confirmed: the offset is inside the Deferred.
/// let publishing = topic.publish_deferred(Bytes::from_static(b"hello"))?;
/// let offset = futures::executor::block_on(publishing)?;
/// assert_eq!(offset, 0);
/// // Or block the thread instead of awaiting.
/// assert_eq!(topic.publish_deferred(Bytes::from_static(b"again"))?.wait()?, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
#[must_use = "a Deferred hands out its answer only when awaited or waited for"]
pub struct Deferred<T> {
    /// The call's answer; taken when the Deferred resolves.
    outcome: Option<Result<T, StoreError>>,
    /// Resolves once the log the call wrote is durable far enough.
    durable: Durable,
    /// For a group call: the topic, whose groups go fail-stop if the wait fails and
    /// which may owe a checkpoint afterwards.
    groups: Option<Arc<TopicInner>>,
}

// The answer is moved out by value and never pinned, so a Deferred can move freely
// whatever `T` is (Durable is Unpin).
impl<T> Unpin for Deferred<T> {}

impl<T> Deferred<T> {
    /// A call on the message log: `outcome` once `durable` resolves.
    pub(crate) fn on_messages(durable: Durable, outcome: Result<T, StoreError>) -> Deferred<T> {
        Deferred {
            outcome: Some(outcome),
            durable,
            groups: None,
        }
    }

    /// A group transaction of `topic`: its outcome once the groups log is durable up to
    /// where the transaction left it.
    pub(crate) fn on_groups(topic: Arc<TopicInner>, staged: Staged<T>) -> Deferred<T> {
        Deferred {
            outcome: Some(staged.outcome),
            durable: topic.groups.log().durable(staged.written_end),
            groups: Some(topic),
        }
    }

    /// Turns the answer (not yet handed out) into another; runs `change` now, so only
    /// for pure conversions inside the crate (a public `map` would let callers look).
    pub(crate) fn and_then<U>(
        self,
        change: impl FnOnce(T) -> Result<U, StoreError>,
    ) -> Deferred<U> {
        Deferred {
            outcome: self.outcome.map(|outcome| outcome.and_then(change)),
            durable: self.durable,
            groups: self.groups,
        }
    }

    /// Whether [`wait`](Self::wait) would run an `fdatasync` no other caller shares (see
    /// [`Durable::syncs_alone`]): then a caller that may block its thread does better
    /// to wait than to await, which hands the sync to the log's sync thread and is
    /// woken back by it.
    ///
    /// # Example
    /// ```
    /// use bytes::Bytes;
    /// use mailroom_store::{Store, StoreOptions};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path(), StoreOptions::default())?;
    /// store.create_topic("t")?;
    /// let publishing = store.topic("t")?.publish_deferred(Bytes::from_static(b"x"))?;
    /// let offset = if publishing.syncs_alone() {
    ///     publishing.wait()?
    /// } else {
    ///     futures::executor::block_on(publishing)?
    /// };
    /// assert_eq!(offset, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn syncs_alone(&self) -> bool {
        self.durable.syncs_alone()
    }

    /// Blocks the calling thread until the call is durable, then returns its answer. If
    /// no sync is running, this thread runs it (a lone caller pays one `fdatasync` and
    /// no hand-off). Writes a due group checkpoint before returning.
    ///
    /// # Errors
    ///
    /// What the call answered (e.g. `Topic(NotOwned)`), or, first, the wait's error:
    /// [`StoreError::Io`] if the sync failed, [`StoreError::FailStopped`] if the log was
    /// or became fail-stop.
    ///
    /// # Panics
    ///
    /// If the `Deferred` was already polled to completion as a future.
    pub fn wait(self) -> Result<T, StoreError> {
        self.wait_with(Durable::wait)
    }

    /// Blocks as [`wait`](Self::wait) does, but answers as awaiting would: a sync that
    /// this thread ran and that failed comes back as [`StoreError::FailStopped`], as it
    /// does for every waiter the log's sync thread wakes, rather than as the sync's own
    /// [`StoreError::Io`]. For a caller that waits here only because
    /// [`syncs_alone`](Self::syncs_alone) said so, and would otherwise have awaited: its
    /// answers then do not depend on which thread ran the sync.
    ///
    /// # Errors
    ///
    /// As awaiting the `Deferred`.
    ///
    /// # Example
    /// ```
    /// use bytes::Bytes;
    /// use mailroom_store::{Store, StoreOptions};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path(), StoreOptions::default())?;
    /// store.create_topic("t")?;
    /// let publishing = store.topic("t")?.publish_deferred(Bytes::from_static(b"x"))?;
    /// assert_eq!(publishing.wait_in_place()?, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Panics
    ///
    /// As [`wait`](Self::wait).
    pub fn wait_in_place(self) -> Result<T, StoreError> {
        self.wait_with(Durable::wait_in_place)
    }

    fn wait_with(
        self,
        wait: impl FnOnce(Durable) -> Result<(), StoreError>,
    ) -> Result<T, StoreError> {
        let Deferred {
            outcome,
            durable,
            groups,
        } = self;
        let durable = wait(durable);
        if let Some(topic) = groups {
            topic.after_groups_wait(&durable, CheckpointOn::ThisThread);
        }
        let outcome = outcome.expect("a Deferred waited for after it resolved");
        durable.and(outcome)
    }
}

impl<T> Future for Deferred<T> {
    type Output = Result<T, StoreError>;

    /// # Panics
    ///
    /// If polled again after it returned `Ready`.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        assert!(
            this.outcome.is_some(),
            "a Deferred polled after it resolved"
        );
        let durable = ready!(Pin::new(&mut this.durable).poll(cx));
        if let Some(topic) = this.groups.take() {
            topic.after_groups_wait(&durable, CheckpointOn::Background);
        }
        let outcome = this.outcome.take().expect("checked above");
        Poll::Ready(durable.and(outcome))
    }
}
