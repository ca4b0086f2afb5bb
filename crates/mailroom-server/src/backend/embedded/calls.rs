//! Where the embedded backend runs a store call, and whom it wakes afterwards.

use mailroom_store::{Deferred, DeferredTurn, DurableTopic, Store, StoreError};

use super::Embedded;
use crate::backend::BackendError;

impl Embedded {
    /// A publish on `topic` through the store's deferred `call`, answered once durable
    /// ([`Embedded::durable`]); then the topic's long polls are woken, if `stored_new`
    /// says the answer stored something (an idempotent publish that found only
    /// duplicates stored nothing, so no waiting poll has anything new to find).
    ///
    /// # Errors
    /// As [`Embedded::durable`]; an unknown topic.
    pub async fn publish_then_wake<T>(
        &self,
        topic: &str,
        call: impl FnOnce(&DurableTopic) -> Result<Deferred<T>, StoreError>,
        stored_new: impl FnOnce(&T) -> bool,
    ) -> Result<T, BackendError> {
        let answer = self.durable(|store| call(&store.topic(topic)?)).await?;
        if stored_new(&answer) {
            self.long_polls.wake(topic);
        }
        Ok(answer)
    }

    /// Runs one of the store's hot calls (publish, poll, ack, nack and their batches)
    /// in its deferred form: the call part inline on the async worker, then an await
    /// until what it wrote (or saw) is durable. Used under every fsync policy.
    ///
    /// The call part checks, plans and writes to the log's buffer or the page cache; it
    /// never waits for an `fdatasync` (what it may still block on, briefly, is listed
    /// under "Blocking in the deferred calls" in `DurableTopic`'s docs). Under
    /// `--fsync always` the wait is a future that the log's sync thread completes after
    /// the one `fdatasync` it shares with every concurrent caller, so no call hops to
    /// the blocking pool and back; under the other policies the future is ready at once.
    /// One exception: a call that would have its sync to itself runs it right here, on
    /// its own worker, which spares the lone request the two thread hand-offs of
    /// awaiting (waking the sync thread, being woken by it). The store decides
    /// ([`Deferred::lead_or_listen`]) in the same locked step that places every waiter,
    /// and begins the round there, so no other waiter slips in between; the worker
    /// blocks only when it leads, never to await. It blocks plainly, not inside
    /// `block_in_place`: that hands the worker's run queue to a fresh thread (one more
    /// wake-up and futex round per lone request, measured in `BENCHMARKS.md`), while a
    /// plain block leaves the queued tasks to the other workers, which steal them when
    /// they run dry. So it is done only where another worker exists to steal
    /// (`may_block_a_worker`); with one worker every call awaits the sync thread. The
    /// trade-off is [`Embedded::blocking`]'s under the relaxed policies: the rare call
    /// part that does touch the disk (a segment roll and its sync) stalls its worker
    /// for as long.
    ///
    /// Cancellation: when the client goes away, axum drops the handler's future, and
    /// with it the [`Deferred`] mid-await. The call has happened by then (the call part
    /// ran to completion before the first await, and the sync it asked for still runs),
    /// but its answer is dropped unread: nothing that follows the await (the long-poll
    /// wake-ups here; the response and metrics in the handler) runs, so it is confirmed
    /// to nobody, as when a response is lost on the way. A poll's deliveries made that
    /// way stay in flight for their consumer (its next poll returns them first) until
    /// acked, nacked or their lease runs out; a long poll that misses the wake-up of
    /// such a call finds its effect at its next re-check
    /// (`long_poll::LONG_POLL_RECHECK_MS`).
    ///
    /// In the deterministic mode ([`Embedded::on_the_calling_thread`]) the wait blocks
    /// this thread instead, which leads the sync round and writes a due checkpoint.
    ///
    /// # Errors
    /// The call's own error, or the durability wait's (a failed sync, fail-stop).
    pub async fn durable<T, F>(&self, call: F) -> Result<T, BackendError>
    where
        F: FnOnce(&Store) -> Result<Deferred<T>, StoreError>,
    {
        let written = call(&self.store)?;
        if self.on_caller {
            return Ok(written.wait()?);
        }
        let histogram = self.sync_waits.as_ref().filter(|_| !self.calls_inline);
        let started = histogram.map(|_| std::time::Instant::now());
        let answer = if may_block_a_worker() {
            match written.lead_or_listen() {
                DeferredTurn::Ready(answer) => answer,
                // Nobody shares this sync: run it here, sparing the two thread hand-offs
                // of awaiting (waking the sync thread, being woken by it), which were a
                // third of a lone strict publish's time beyond the fdatasync. The other
                // workers steal what waits in this one's queue meanwhile.
                DeferredTurn::Lead(leader) => leader.sync(),
                DeferredTurn::Listen(listening) => listening.await,
            }
        } else {
            written.await
        };
        if let (Some(histogram), Some(started)) = (histogram, started) {
            histogram.observe(started.elapsed().as_secs_f64());
        }
        Ok(answer?)
    }

    /// Runs a store call (one with no deferred form) where it costs least.
    ///
    /// Under `--fsync always` a store call waits for fdatasync (milliseconds), which must
    /// not stall the async workers that serve every other connection, so it runs on the
    /// blocking pool. Under any other policy a store call does not wait for the disk: it
    /// writes to the page cache under short locks, so it runs inline on the async worker,
    /// saving the hand-off to the blocking pool and back (two context switches, which
    /// were most of the server's CPU). The trade-off: the rare call that does touch the
    /// disk (a checkpoint, a segment roll and its sync) then stalls that one worker for
    /// as long, the way a single-threaded server like Redis takes such pauses on its
    /// main thread.
    ///
    /// # Errors
    /// The call's own error; [`BackendError::Internal`] if it panicked on the blocking
    /// pool.
    pub async fn blocking<T, F>(&self, call: F) -> Result<T, BackendError>
    where
        F: FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
        T: Send + 'static,
    {
        if self.calls_inline {
            return call(&self.store).map_err(BackendError::from);
        }
        let store = self.store.clone();
        match tokio::task::spawn_blocking(move || call(&store)).await {
            Ok(result) => result.map_err(BackendError::from),
            Err(join) => Err(BackendError::Internal(format!("store task failed: {join}"))),
        }
    }

    /// Wakes the long polls of `topic` if a settlement freed anything.
    pub(super) fn woken_by<T, E>(&self, topic: &str, outcomes: &[Result<T, E>]) {
        if outcomes.iter().any(Result::is_ok) {
            self.long_polls.wake(topic);
        }
    }

    /// Runs a redrive or a purge of `group`'s dead letters on the blocking pool (see
    /// [`Embedded::blocking`]) and wakes the long polls of `topic` if it took any. A
    /// purge frees nothing, but it wakes as a redrive does: one rule for both is simpler
    /// than a flag, and a needless re-poll is cheap.
    pub(super) async fn take_dead_letters<F>(
        &self,
        topic: &str,
        group: &str,
        take: F,
    ) -> Result<u64, BackendError>
    where
        F: FnOnce(&DurableTopic, &str) -> Result<u64, StoreError> + Send + 'static,
    {
        let (name, group) = (topic.to_owned(), group.to_owned());
        let count = self
            .blocking(move |store| take(&store.topic(&name)?, &group))
            .await?;
        if count > 0 {
            self.long_polls.wake(topic);
        }
        Ok(count)
    }
}

/// Whether this thread is a worker of a multi-threaded tokio runtime with at least one
/// other worker, which steals this one's queued tasks while it blocks on a lone sync. On
/// a current-thread runtime (tests and embedders may use one) or with a single worker,
/// blocking would stall every other connection for the whole `fdatasync`.
fn may_block_a_worker() -> bool {
    tokio::runtime::Handle::try_current().is_ok_and(|handle| {
        handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread
            && handle.metrics().num_workers() >= 2
    })
}

#[cfg(test)]
mod tests {
    use super::may_block_a_worker;

    #[test]
    fn outside_a_runtime_no_worker_blocks() {
        assert!(!may_block_a_worker());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_current_thread_runtime_never_blocks_its_thread() {
        assert!(!may_block_a_worker());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_lone_worker_never_blocks() {
        assert!(!may_block_a_worker());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_of_two_workers_may_block() {
        assert!(may_block_a_worker());
    }
}
