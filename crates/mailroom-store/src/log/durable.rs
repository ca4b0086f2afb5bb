//! [`Durable`]: waiting for written records to reach the disk, as a future or blocking,
//! and [`Turn`]: what a caller that may block does with one.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use event_listener::{EventListener, Listener};

use super::commit::{LeadPlan, LeadRound, Plan};
use super::{Shared, SyncPolicy};
use crate::StoreError;

/// Resolves once every offset below an end is durable: what [`super::Log::durable`]
/// returns.
///
/// It is a runtime-agnostic [`Future`] (any executor; no runtime inside) and also offers
/// a blocking [`wait`](Durable::wait). Under [`SyncPolicy::Always`] awaiting it never
/// blocks the executor: the log's sync thread runs the `fdatasync` and wakes exactly the
/// waiters that sync covered, and concurrent waiters share one sync. Only after the
/// [`super::Log`] was dropped, when there is no sync thread, does a poll run the sync
/// itself. Under the other policies it is ready at once.
///
/// It owns what it needs (no borrow of the log), so it can be moved into a task.
/// Dropping it cancels only the wait: the records stay written and become durable with
/// the next sync.
///
/// # Example
/// ```
/// # use std::{path::Path, sync::Arc};
/// use mailroom_store::log::{Log, LogOptions};
/// use mailroom_store::storage::SimStorage;
///
/// let log = Log::open(Arc::new(SimStorage::new()), Path::new("/l"), LogOptions::default())?;
/// let written = log.write(&[b"x"], 5)?;
/// futures::executor::block_on(log.durable(written.end))?;
/// assert_eq!(log.end(), 1);
/// # Ok::<(), mailroom_store::StoreError>(())
/// ```
#[derive(Debug)]
#[must_use = "a Durable does nothing until it is awaited or waited for"]
pub struct Durable {
    shared: Arc<Shared>,
    target: u64,
    /// The round this future waits for, once it has planned.
    listener: Option<EventListener>,
}

impl Durable {
    pub(super) fn new(shared: Arc<Shared>, target: u64) -> Durable {
        Durable {
            shared,
            target,
            listener: None,
        }
    }

    /// Blocks the calling thread until the records are durable. If no sync is running,
    /// this thread runs it (so a lone writer pays one `fdatasync` and no hand-off).
    ///
    /// # Errors
    /// As [`super::Log::wait_durable`].
    pub fn wait(mut self) -> Result<(), StoreError> {
        if !self.waits_for_disk() {
            return self.shared.check_wait(self.target);
        }
        // A round this future was already listening for wakes us no later than it ends.
        if let Some(listener) = self.listener.take() {
            listener.wait();
        }
        self.shared.wait_durable(self.target)
    }

    /// For a caller that may block its thread but would rather not when others share
    /// the sync (an executor worker whose queued tasks other workers steal meanwhile):
    /// decides, in the locked step that places every waiter, whether this one runs the
    /// sync itself or listens.
    ///
    /// - [`Turn::Lead`] when it would have the sync to itself: under
    ///   [`SyncPolicy::Always`], its records not yet durable, no sync running and nobody
    ///   waiting for the next one. The round is begun here, so a waiter arriving before
    ///   [`Leader::sync`] runs shares it (or waits for the next) as with any running
    ///   round. Running it where blocking is allowed spares the two thread hand-offs of
    ///   awaiting (waking the sync thread, being woken by it).
    /// - [`Turn::Listen`] otherwise: this `Durable`, already listening for the round
    ///   that covers it (which the sync thread runs); await it. A `Durable` that was
    ///   polled before comes back as it is.
    /// - [`Turn::Ready`] when there is nothing to wait for: a policy that does not wait
    ///   for the disk, records already durable, or a fail-stop log.
    ///
    /// # Example
    /// ```
    /// # use std::{path::Path, sync::Arc};
    /// use mailroom_store::log::{Log, LogOptions, SyncPolicy, Turn};
    /// use mailroom_store::storage::SimStorage;
    ///
    /// let options = LogOptions { sync: SyncPolicy::Always, ..LogOptions::default() };
    /// let log = Log::open(Arc::new(SimStorage::new()), Path::new("/l"), options)?;
    /// let written = log.write(&[b"x"], 5)?;
    /// match log.durable(written.end).lead_or_listen() {
    ///     Turn::Lead(leader) => leader.sync()?, // alone: this thread syncs
    ///     Turn::Listen(durable) => futures::executor::block_on(durable)?,
    ///     Turn::Ready(answer) => answer?,
    /// }
    /// assert_eq!(log.end(), 1);
    /// // Once durable, there is nothing left to wait for.
    /// let again = log.durable(written.end).lead_or_listen();
    /// assert!(matches!(again, Turn::Ready(Ok(()))));
    /// # Ok::<(), mailroom_store::StoreError>(())
    /// ```
    pub fn lead_or_listen(mut self) -> Turn {
        if !self.waits_for_disk() {
            return Turn::Ready(self.shared.check_wait(self.target));
        }
        if self.listener.is_some() {
            return Turn::Listen(self);
        }
        match self.shared.lead_or_listen(self.target) {
            LeadPlan::Done(result) => Turn::Ready(result),
            LeadPlan::Listen(listener) => {
                self.listener = Some(listener);
                Turn::Listen(self)
            }
            LeadPlan::Lead(round) => Turn::Lead(Leader { round }),
        }
    }

    fn waits_for_disk(&self) -> bool {
        self.shared.options.sync == SyncPolicy::Always
    }
}

impl Future for Durable {
    type Output = Result<(), StoreError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if !this.waits_for_disk() {
            return Poll::Ready(this.shared.check_wait(this.target));
        }
        loop {
            if let Some(listener) = &mut this.listener {
                ready!(Pin::new(listener).poll(cx));
                this.listener = None;
            }
            match this.shared.plan_wait(this.target) {
                Plan::Done(result) => return Poll::Ready(result),
                Plan::Listen(listener) => this.listener = Some(listener),
            }
        }
    }
}

/// What a caller that may block its thread does with a [`Durable`]: the answer of
/// [`Durable::lead_or_listen`].
///
/// # Example
/// ```
/// # use std::{path::Path, sync::Arc};
/// use mailroom_store::log::{Log, LogOptions, SyncPolicy, Turn};
/// use mailroom_store::storage::SimStorage;
///
/// let options = LogOptions { sync: SyncPolicy::Never, ..LogOptions::default() };
/// let log = Log::open(Arc::new(SimStorage::new()), Path::new("/l"), options)?;
/// let written = log.write(&[b"x"], 5)?;
/// // A policy that does not wait for the disk has nothing to lead or listen for.
/// assert!(matches!(log.durable(written.end).lead_or_listen(), Turn::Ready(Ok(()))));
/// # Ok::<(), mailroom_store::StoreError>(())
/// ```
#[derive(Debug)]
#[must_use = "a Turn is a wait still to do: sync the Leader or await the Durable"]
pub enum Turn {
    /// Nothing to wait for: the records are durable, or the wait failed.
    Ready(Result<(), StoreError>),
    /// This caller runs the sync: call [`Leader::sync`] where blocking is allowed.
    Lead(Leader),
    /// Another round covers the records, or will: await this `Durable`.
    Listen(Durable),
}

/// A sync round begun for one caller, to run on its thread: see
/// [`Durable::lead_or_listen`]. Until it runs, other waiters treat it as the running
/// round. Dropped without running, it ends that round unsynced and wakes its waiters,
/// whose records the next round (the sync thread's, or one a waiter leads) makes durable:
/// nobody is left waiting for it. The caller's own records stay written, as when a
/// [`Durable`] is dropped.
///
/// # Example
/// ```
/// # use std::{path::Path, sync::Arc};
/// use mailroom_store::log::{Log, LogOptions, Turn};
/// use mailroom_store::storage::SimStorage;
///
/// let log = Log::open(Arc::new(SimStorage::new()), Path::new("/l"), LogOptions::default())?;
/// let written = log.write(&[b"x"], 5)?;
/// let Turn::Lead(leader) = log.durable(written.end).lead_or_listen() else {
///     panic!("a lone writer leads");
/// };
/// drop(leader); // not synced: a later wait does it
/// log.wait_durable(written.end)?;
/// assert_eq!(log.end(), 1);
/// # Ok::<(), mailroom_store::StoreError>(())
/// ```
#[derive(Debug)]
#[must_use = "a Leader that is not synced leaves the records to the next sync"]
pub struct Leader {
    round: LeadRound,
}

impl Leader {
    /// Runs the round's `fdatasync` on this thread (it blocks) and wakes the round's
    /// other waiters. A failed sync comes back as [`StoreError::FailStopped`] (naming
    /// the sync's error), as it does for every waiter the sync thread wakes, not as the
    /// sync's own [`StoreError::Io`]: so a caller is answered the same whether it led or
    /// listened.
    ///
    /// # Errors
    /// As awaiting the [`Durable`]: [`StoreError::FailStopped`] if the sync failed or
    /// the log is fail-stop.
    ///
    /// # Example
    /// ```
    /// # use std::{path::Path, sync::Arc};
    /// use mailroom_store::log::{Log, LogOptions, Turn};
    /// use mailroom_store::storage::SimStorage;
    ///
    /// let storage = Arc::new(SimStorage::new());
    /// let log = Log::open(storage.clone(), Path::new("/l"), LogOptions::default())?;
    /// let written = log.write(&[b"x"], 5)?;
    /// let Turn::Lead(leader) = log.durable(written.end).lead_or_listen() else {
    ///     panic!("a lone writer leads");
    /// };
    /// let syncs = storage.syncs_done();
    /// leader.sync()?;
    /// assert_eq!((log.end(), storage.syncs_done()), (1, syncs + 1));
    /// # Ok::<(), mailroom_store::StoreError>(())
    /// ```
    pub fn sync(self) -> Result<(), StoreError> {
        self.round.run()
    }
}
