//! Group commit: many appenders waiting for durability share one `fdatasync`.
//!
//! An appender writes its records (under the writer lock), then calls
//! [`Shared::wait_durable`] with the end of what it wrote. If no sync is running, it
//! becomes the *leader*: just before syncing it notes how far the log has been written,
//! syncs the active segment once, and publishes that point as durable. Appenders that
//! arrive while a leader syncs wait on a condition variable; when the leader finishes,
//! each one whose records were covered returns, and one of the rest becomes the next
//! leader. So with N concurrent appenders each sync covers up to N appends, and a lone
//! appender pays exactly one sync per call.
//!
//! One sync at a time is deliberate: letting up to four run at once (safe, since
//! `fdatasync` covers every write made before the call) halved throughput with 64
//! appenders in a side-by-side run (`benches/log.rs`), because concurrent syncs of one
//! file contend instead of batching.
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
    /// Whether some appender is running a sync now.
    leader_active: bool,
}

impl GroupCommit {
    /// A commit state where everything below `synced_end` is already durable.
    pub fn new(synced_end: u64) -> GroupCommit {
        GroupCommit {
            state: Mutex::new(CommitState {
                synced_end,
                leader_active: false,
            }),
            leader_done: Condvar::new(),
        }
    }
}

impl Shared {
    /// Returns once every offset below `target` is durable, syncing if needed (as the
    /// leader) or waiting for the running sync (as a follower).
    pub(crate) fn wait_durable(&self, target: u64) -> Result<(), StoreError> {
        let commit = &self.commit;
        let mut state = commit.state.lock();
        loop {
            if state.synced_end >= target {
                return Ok(());
            }
            self.check_not_failed()?;
            if state.leader_active {
                commit.leader_done.wait(&mut state);
                continue;
            }
            state.leader_active = true;
            let synced = parking_lot::MutexGuard::unlocked(&mut state, || self.sync_active());
            state.leader_active = false;
            commit.leader_done.notify_all();
            match synced {
                Ok(end) => {
                    debug_assert!(end >= target, "the leader's own write is covered");
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

    /// Syncs the active segment; returns the offset end it covers: every record below the
    /// end noted just before the call lies in this segment or in an older one, which its
    /// roll synced (a roll holds the writer lock until its sync is done, so taking that
    /// lock here waits for a roll in progress). Noting the end as late as possible lets
    /// one sync cover every append written meanwhile.
    fn sync_active(&self) -> Result<u64, StoreError> {
        let segment = Arc::clone(&self.writer.lock().active);
        let written_end = self.written_end.load(Ordering::Acquire);
        segment
            .file
            .sync()
            .map_err(io_error("fdatasync", &segment.path))?;
        Ok(written_end)
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
