//! Group commit: many appenders waiting for durability share each `fdatasync`.
//!
//! An appender writes its records (under the writer lock), then calls
//! [`Shared::wait_durable`] with the end of what it wrote. If no running sync covers that
//! end and fewer than [`SYNCS_IN_FLIGHT_MAX`] syncs are running, it becomes a *leader*: it
//! notes how far the log has been written at that moment, syncs the active segment once,
//! and publishes that point as durable. Otherwise it waits on a condition variable until a
//! sync finishes, and checks again. So with N concurrent appenders each sync covers
//! several appends, and a lone appender pays exactly one sync per call.
//!
//! Several syncs may run at once (a pipeline): a disk with a queue finishes overlapping
//! flushes faster than back-to-back ones. That is safe because `fdatasync` makes durable
//! every write made before the call: when a sync that started after offset `e` was
//! written returns, everything below `e` is on disk, whatever other syncs are doing, so
//! the durable end only ever moves up to the largest end a finished sync covered.
//!
//! Earlier segments need no sync here: a segment is synced before the next is created.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use super::recovery::io_error;
use super::{Shared, SyncPolicy};
use crate::StoreError;

/// The durability state shared by appenders.
#[derive(Debug, Default)]
pub(crate) struct GroupCommit {
    state: Mutex<CommitState>,
    /// Signalled whenever a leader finishes (successfully or not).
    leader_done: Condvar,
}

#[derive(Debug, Default)]
struct CommitState {
    /// Every offset below this is on disk.
    synced_end: u64,
    /// How many syncs are running now.
    syncs_in_flight: usize,
    /// The largest end a running (or finished) sync covers.
    in_flight_end: u64,
}

/// The most `fdatasync` calls that run at once for one log.
pub const SYNCS_IN_FLIGHT_MAX: usize = 1;

impl GroupCommit {
    /// A commit state where everything below `synced_end` is already durable.
    pub fn new(synced_end: u64) -> GroupCommit {
        GroupCommit {
            state: Mutex::new(CommitState {
                synced_end,
                syncs_in_flight: 0,
                in_flight_end: synced_end,
            }),
            leader_done: Condvar::new(),
        }
    }
}

impl Shared {
    /// Returns once every offset below `target` is durable, syncing if needed (as a
    /// leader) or waiting for a running sync (as a follower).
    pub(crate) fn wait_durable(&self, target: u64) -> Result<(), StoreError> {
        let commit = &self.commit;
        let mut state = commit.state.lock();
        loop {
            if state.synced_end >= target {
                return Ok(());
            }
            self.check_not_failed()?;
            let covered_by_running = state.in_flight_end >= target;
            if covered_by_running || state.syncs_in_flight >= SYNCS_IN_FLIGHT_MAX {
                commit.leader_done.wait(&mut state);
                continue;
            }
            // Every record below `end` was written before this sync starts, and `end`
            // is at least `target`: the caller's own write finished before it came here.
            let end = self.written_end.load(Ordering::Acquire);
            debug_assert!(end >= target);
            state.syncs_in_flight += 1;
            state.in_flight_end = state.in_flight_end.max(end);
            let synced = parking_lot::MutexGuard::unlocked(&mut state, || self.sync_active());
            state.syncs_in_flight -= 1;
            commit.leader_done.notify_all();
            match synced {
                Ok(()) => {
                    state.synced_end = state.synced_end.max(end);
                    self.publish_synced(state.synced_end);
                }
                Err(error) => {
                    self.fail_stop(&error);
                    return Err(error);
                }
            }
        }
    }

    /// Syncs the active segment. Data below the end noted before the call lies in it or
    /// in an older segment, which its roll synced (a roll holds the writer lock until its
    /// sync is done, so taking that lock here waits for a roll in progress).
    fn sync_active(&self) -> Result<(), StoreError> {
        let segment = Arc::clone(&self.writer.lock().active);
        segment
            .file
            .sync()
            .map_err(io_error("fdatasync", &segment.path))
    }

    /// Records that everything below `end` is durable because a roll synced it. Called
    /// with the writer lock held.
    pub(crate) fn note_synced_by_roll(&self, end: u64) {
        let mut state = self.commit.state.lock();
        state.synced_end = state.synced_end.max(end);
        self.publish_synced(state.synced_end);
    }

    /// Under [`SyncPolicy::Always`], readers see only durable records.
    fn publish_synced(&self, end: u64) {
        if self.options.sync == SyncPolicy::Always {
            self.visible_end.fetch_max(end, Ordering::AcqRel);
        }
    }
}

/// The background thread of [`SyncPolicy::Interval`].
#[derive(Debug, Default)]
pub(crate) struct Flusher {
    stop: Mutex<bool>,
    wake: Condvar,
}

impl Flusher {
    /// Asks the thread to do a last sync and exit.
    pub fn stop(&self) {
        *self.stop.lock() = true;
        self.wake.notify_all();
    }
}

/// Syncs whatever was written every `interval` until stopped, then once more.
pub(crate) fn run_flusher(shared: Arc<Shared>, interval: Duration) {
    let mut stopped = shared.flusher.stop.lock();
    loop {
        if !*stopped {
            // A timed wait is the point here: the policy is "sync every interval".
            let _ = shared.flusher.wake.wait_for(&mut stopped, interval);
        }
        let stopping = *stopped;
        parking_lot::MutexGuard::unlocked(&mut stopped, || {
            // Errors are logged by fail_stop; later appends report them.
            let _ = shared.sync_written();
        });
        if stopping {
            return;
        }
    }
}
