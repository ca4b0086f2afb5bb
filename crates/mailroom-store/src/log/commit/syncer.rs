//! The sync thread of `SyncPolicy::Always`: runs the rounds that futures wait for.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Shared, Syncer};

/// The longest the sync thread holds a round back waiting for more waiters.
const HOLD_BACK_MAX: Duration = Duration::from_millis(2);
/// Stack of the sync thread: it only loops, locks and calls `fdatasync`.
const SYNC_THREAD_STACK_BYTES: usize = 64 << 10;

/// The sync thread of [`SyncPolicy::Always`](crate::log::SyncPolicy::Always): runs rounds while waiters want them, until
/// stopped; then runs the rounds still wanted and exits.
///
/// Before a round it waits until as many futures want it as the last round woke, but no
/// longer than that round's sync took (at most [`HOLD_BACK_MAX`]). Without this, the
/// first task back after a round starts the next one alone, the other 63 write during
/// that sync and wait for the one after: rounds alternate between 1 and 63 records, two
/// syncs per 64 (measured: about 1.4x the records/s with it, 64 async tasks). Holding back costs at most one sync time, which is what
/// the lone-record round would have cost. This is a batching window, not a
/// synchronisation: no waiter's correctness depends on it.
fn run_syncer(shared: Arc<Shared>) {
    let commit = &shared.commit;
    let mut state = commit.state.lock();
    loop {
        if state.next_wanted && state.running.is_none() {
            let deadline = Instant::now() + state.last_sync.min(HOLD_BACK_MAX);
            while state.next_waiters < state.last_woken
                && state.next_wanted
                && state.running.is_none()
                && state.syncer == Syncer::Running
                && !commit
                    .wake_syncer
                    .wait_until(&mut state, deadline)
                    .timed_out()
            {}
            if !state.next_wanted || state.running.is_some() {
                continue; // a blocking waiter ran it meanwhile
            }
            let result = shared.run_round(&mut state);
            if let Err(error) = &result.outcome {
                tracing::debug!(%error, "sync round failed; its waiters report it");
            }
            shared.after_round(state, result.generation, result.outcome.is_err());
            state = commit.state.lock();
            continue;
        }
        if state.syncer == Syncer::Stopping {
            state.syncer = Syncer::Absent;
            return;
        }
        commit.wake_syncer.wait(&mut state);
    }
}

/// Spawns the sync thread of [`SyncPolicy::Always`](crate::log::SyncPolicy::Always).
pub(crate) fn spawn_syncer(shared: &Arc<Shared>) -> std::io::Result<std::thread::JoinHandle<()>> {
    shared.commit.syncer_starting();
    let thread_shared = Arc::clone(shared);
    std::thread::Builder::new()
        .name("mailroom-log-sync".into())
        .stack_size(SYNC_THREAD_STACK_BYTES)
        .spawn(move || run_syncer(thread_shared))
        .inspect_err(|_| shared.commit.state.lock().syncer = Syncer::Absent)
}
