//! [`Deferred`]: the answer of a store call that is written but maybe not yet durable.
//!
//! The `*_deferred` methods of [`DurableTopic`](crate::DurableTopic) do everything a call
//! does except wait for the disk: they check, plan, apply and write (into the log's write
//! buffer or the page cache) and return a [`Deferred`]. The answer inside is handed out
//! only by [`Deferred::wait`], by awaiting it, or through [`Deferred::lead_or_listen`],
//! all of which first wait until every record the call wrote, and every record whose
//! effect it saw, is durable under the store's sync policy. So nobody is told anything a
//! power cut could take back, exactly as with the blocking methods (which are
//! `deferred(..)?.wait()`).
//!
//! Awaiting builds on the log's [`Durable`]: under `SyncPolicy::Always` the log's sync
//! thread runs the `fdatasync` (one for every waiter of that moment) and wakes the task,
//! so an executor thread never blocks on the disk. A caller whose thread may block
//! ([`Deferred::lead_or_listen`]) runs a sync it would have to itself on its own thread
//! instead ([`DeferredLeader::sync`]), and awaits any other.
//!
//! A due group checkpoint (every `checkpoint_every` group records) is written by the
//! wait side, never by the call part: [`Deferred::wait`] writes it on the waiting thread
//! (it blocks anyway, and the blocking methods keep their exact behaviour), while a
//! leader ([`DeferredLeader::sync`]), an awaited `Deferred` and one found ready by
//! `lead_or_listen` hand it to a short-lived background thread (at most one per topic at
//! a time): a checkpoint syncs and must not stall an executor, nor hold back the answer
//! of a call that is durable already (a server's lone caller leads its own sync, and
//! paid the checkpoint's syncs before its answer went out).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use crate::groups::Staged;
use crate::log::{Durable, Leader, Turn};
use crate::topic::{CheckpointOn, TopicInner};
use crate::StoreError;

/// The answer of a store call that is written but may not be durable yet: it resolves
/// to the call's result once everything the call wrote or saw is durable.
///
/// Get one from a `*_deferred` method of [`DurableTopic`](crate::DurableTopic), e.g.
/// [`publish_deferred`](crate::DurableTopic::publish_deferred). Then either
/// - `.await` it (it is a runtime-agnostic [`Future`]: any executor, no runtime inside;
///   under `SyncPolicy::Always` the log's sync thread runs the shared `fdatasync` and
///   wakes the task, so the executor never blocks on the disk),
/// - call the blocking [`wait`](Self::wait) (for threads; it may run the sync itself), or
/// - on an executor thread that may block, call [`lead_or_listen`](Self::lead_or_listen):
///   it runs a sync nobody shares on this thread and awaits any other.
///
/// Under `SyncPolicy::Interval` and `Never`, which do not wait for the disk, it is ready
/// at once. The answer is never observable before it is durable: nothing but these three
/// ways hands it out. Dropping a `Deferred` unawaited is allowed: the operation still
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
        let Deferred {
            outcome,
            durable,
            groups,
        } = self;
        answer(outcome, groups, durable.wait(), CheckpointOn::ThisThread)
    }

    /// For a caller that may block its thread but would rather not when others share
    /// the sync (see [`Durable::lead_or_listen`], which decides): lead the sync when the
    /// call would have it to itself, listen otherwise.
    ///
    /// Answers [`DeferredTurn::Lead`] (run [`DeferredLeader::sync`] where blocking is
    /// allowed), [`DeferredTurn::Listen`] (await the `Deferred`, already listening for
    /// the round that covers it) or [`DeferredTurn::Ready`] (nothing to wait for; a due
    /// group checkpoint then goes to a background thread, as when awaited).
    ///
    /// # Example
    /// ```
    /// use bytes::Bytes;
    /// use mailroom_store::{DeferredTurn, Store, StoreOptions};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path(), StoreOptions::default())?;
    /// store.create_topic("t")?;
    /// let publishing = store.topic("t")?.publish_deferred(Bytes::from_static(b"x"))?;
    /// let offset = match publishing.lead_or_listen() {
    ///     DeferredTurn::Lead(leader) => leader.sync()?,
    ///     DeferredTurn::Listen(listening) => futures::executor::block_on(listening)?,
    ///     DeferredTurn::Ready(answer) => answer?,
    /// };
    /// assert_eq!(offset, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Panics
    ///
    /// As [`wait`](Self::wait).
    pub fn lead_or_listen(self) -> DeferredTurn<T> {
        let Deferred {
            outcome,
            durable,
            groups,
        } = self;
        assert!(outcome.is_some(), "a Deferred led after it resolved");
        match durable.lead_or_listen() {
            Turn::Ready(durable) => {
                DeferredTurn::Ready(answer(outcome, groups, durable, CheckpointOn::Background))
            }
            Turn::Listen(durable) => DeferredTurn::Listen(Deferred {
                outcome,
                durable,
                groups,
            }),
            Turn::Lead(leader) => DeferredTurn::Lead(DeferredLeader {
                leader,
                outcome,
                groups,
            }),
        }
    }
}

/// The call's answer once its wait ended (`durable`): the wait's error first. For a
/// group call, tells the groups how the wait went and writes a due checkpoint
/// `checkpoint`.
fn answer<T>(
    outcome: Option<Result<T, StoreError>>,
    groups: Option<Arc<TopicInner>>,
    durable: Result<(), StoreError>,
    checkpoint: CheckpointOn,
) -> Result<T, StoreError> {
    if let Some(topic) = groups {
        topic.after_groups_wait(&durable, checkpoint);
    }
    let outcome = outcome.expect("a Deferred resolves once");
    durable.and(outcome)
}

/// What a caller that may block its thread does with a [`Deferred`]: the answer of
/// [`Deferred::lead_or_listen`].
///
/// # Example
/// ```
/// use bytes::Bytes;
/// use mailroom_store::log::{LogOptions, SyncPolicy};
/// use mailroom_store::{DeferredTurn, Store, StoreOptions};
///
/// let dir = tempfile::tempdir()?;
/// let log = LogOptions { sync: SyncPolicy::Never, ..LogOptions::default() };
/// let options = StoreOptions { log, ..StoreOptions::default() };
/// let store = Store::open(dir.path(), options)?;
/// store.create_topic("t")?;
/// let publishing = store.topic("t")?.publish_deferred(Bytes::from_static(b"x"))?;
/// // A policy that does not wait for the disk: the answer is there at once.
/// assert!(matches!(publishing.lead_or_listen(), DeferredTurn::Ready(Ok(0))));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
#[must_use = "a DeferredTurn holds the answer: sync the leader or await the Deferred"]
pub enum DeferredTurn<T> {
    /// The call's answer: nothing was left to wait for.
    Ready(Result<T, StoreError>),
    /// This caller runs the sync: call [`DeferredLeader::sync`] where blocking is
    /// allowed.
    Lead(DeferredLeader<T>),
    /// Another round covers the call, or will: await this `Deferred`.
    Listen(Deferred<T>),
}

/// A [`Deferred`] whose caller runs the sync round itself: see
/// [`Deferred::lead_or_listen`] and [`Leader`], which it wraps. Dropped without
/// syncing, the call stays done but confirmed to nobody, and nobody else is left
/// waiting for its round.
///
/// # Example
/// ```
/// use bytes::Bytes;
/// use mailroom_store::{DeferredTurn, Store, StoreOptions};
///
/// let dir = tempfile::tempdir()?;
/// let store = Store::open(dir.path(), StoreOptions::default())?;
/// store.create_topic("t")?;
/// let topic = store.topic("t")?;
/// let publishing = topic.publish_deferred(Bytes::from_static(b"x"))?;
/// let DeferredTurn::Lead(leader) = publishing.lead_or_listen() else {
///     panic!("a lone call under SyncPolicy::Always leads");
/// };
/// assert_eq!(leader.sync()?, 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
#[must_use = "a DeferredLeader hands out its answer only when synced"]
pub struct DeferredLeader<T> {
    leader: Leader,
    outcome: Option<Result<T, StoreError>>,
    groups: Option<Arc<TopicInner>>,
}

impl<T> DeferredLeader<T> {
    /// Runs the sync on this thread (it blocks), then returns the call's answer; a due
    /// group checkpoint goes to a background thread, as when the [`Deferred`] is
    /// awaited, so that the answer does not wait for the checkpoint's syncs.
    ///
    /// # Errors
    ///
    /// As awaiting the [`Deferred`]: what the call answered, or first the wait's error,
    /// [`StoreError::FailStopped`] if the sync failed (naming its error) or the log was
    /// fail-stop; see [`Leader::sync`].
    ///
    /// # Example
    /// ```
    /// use bytes::Bytes;
    /// use mailroom_store::{DeferredTurn, Store, StoreOptions};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path(), StoreOptions::default())?;
    /// store.create_topic("t")?;
    /// let topic = store.topic("t")?;
    /// topic.create_group("g", 3)?;
    /// topic.publish(Bytes::from_static(b"x"))?;
    /// let DeferredTurn::Lead(leader) = topic.poll_deferred("g")?.lead_or_listen() else {
    ///     panic!("a lone call under SyncPolicy::Always leads");
    /// };
    /// assert_eq!(leader.sync()?.expect("one message").offset, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sync(self) -> Result<T, StoreError> {
        let DeferredLeader {
            leader,
            outcome,
            groups,
        } = self;
        answer(outcome, groups, leader.sync(), CheckpointOn::Background)
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
        let (outcome, groups) = (this.outcome.take(), this.groups.take());
        Poll::Ready(answer(outcome, groups, durable, CheckpointOn::Background))
    }
}
