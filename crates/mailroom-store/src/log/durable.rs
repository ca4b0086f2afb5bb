//! [`Durable`]: waiting for written records to reach the disk, as a future or blocking.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use event_listener::{EventListener, Listener};

use super::commit::Plan;
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

    /// Whether waiting would run an `fdatasync` that no other waiter shares: under
    /// [`SyncPolicy::Always`], with these records not yet durable, no sync running and
    /// nobody waiting for the next one. A caller on an executor that may block (tokio's
    /// `block_in_place`) can then [`wait`](Self::wait) on its own thread and skip two
    /// thread hand-offs (waking the sync thread, being woken by it); under load, when
    /// syncs are shared, awaiting stays the better way. Only a hint: a waiter arriving
    /// meanwhile shares the round.
    ///
    /// # Example
    /// ```
    /// # use std::{path::Path, sync::Arc};
    /// use mailroom_store::log::{Log, LogOptions, SyncPolicy};
    /// use mailroom_store::storage::SimStorage;
    ///
    /// let options = LogOptions { sync: SyncPolicy::Always, ..LogOptions::default() };
    /// let log = Log::open(Arc::new(SimStorage::new()), Path::new("/l"), options)?;
    /// let written = log.write(&[b"x"], 5)?;
    /// let durable = log.durable(written.end);
    /// assert!(durable.syncs_alone());
    /// durable.wait()?;
    /// // Once durable, there is nothing left to sync.
    /// assert!(!log.durable(written.end).syncs_alone());
    /// # Ok::<(), mailroom_store::StoreError>(())
    /// ```
    pub fn syncs_alone(&self) -> bool {
        self.waits_for_disk() && self.shared.would_sync_alone(self.target)
    }

    /// Blocks as [`wait`](Self::wait) does, but a failed sync that this thread ran comes
    /// back as [`StoreError::FailStopped`] (naming the sync's error), as it does for
    /// every waiter that the sync thread wakes, not as the sync's own
    /// [`StoreError::Io`]: so a caller that waits here instead of awaiting (see
    /// [`syncs_alone`](Self::syncs_alone)) is answered the same either way.
    ///
    /// # Errors
    /// As awaiting this `Durable`.
    ///
    /// # Example
    /// ```
    /// # use std::{path::Path, sync::Arc};
    /// use mailroom_store::log::{Log, LogOptions};
    /// use mailroom_store::storage::SimStorage;
    ///
    /// let log = Log::open(Arc::new(SimStorage::new()), Path::new("/l"), LogOptions::default())?;
    /// let written = log.write(&[b"x"], 5)?;
    /// log.durable(written.end).wait_in_place()?;
    /// assert_eq!(log.end(), 1);
    /// # Ok::<(), mailroom_store::StoreError>(())
    /// ```
    pub fn wait_in_place(self) -> Result<(), StoreError> {
        let shared = Arc::clone(&self.shared);
        self.wait()
            .map_err(|error| shared.check_not_failed().err().unwrap_or(error))
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
