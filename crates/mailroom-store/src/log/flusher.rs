//! The background sync thread of the relaxed policies ([`SyncPolicy::Interval`] and
//! [`SyncPolicy::Never`]).
//!
//! Under `Interval(d)` it syncs every `d`, and once more when the log is dropped. Under
//! both relaxed policies it also syncs when the writer asks for *writeback*: each time
//! another [`WRITEBACK_PARTS`]th of a segment (at least [`WRITEBACK_STEP_BYTES_MIN`]) has
//! been written since the last request.
//! Without that, the page cache holds up to a whole segment of unsynced records when the
//! log rolls, and the roll (which must make the full segment durable before the next one
//! exists, and holds the writer lock while it does) stalled every writer for the sync of
//! up to 64 MiB: a 72–78 ms slowest append for a lone 1 KiB appender, in
//! `benches/log/relaxed.rs`. Syncing earlier only makes records durable sooner, so it
//! keeps what each policy promises; a writeback sync runs without the writer lock.
//!
//! [`SyncPolicy::Interval`]: super::SyncPolicy::Interval
//! [`SyncPolicy::Never`]: super::SyncPolicy::Never

use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex, MutexGuard};

use super::Shared;

/// Under the relaxed policies the writer asks the background thread to sync the active
/// segment each time another `segment_bytes_max / WRITEBACK_PARTS` bytes went into it
/// (8 MiB with the default 64 MiB segments), so a roll finds at most about that much
/// (plus what was written during the last writeback) left to sync.
pub(crate) const WRITEBACK_PARTS: u64 = 8;
/// No writeback is asked for more often than once per this many bytes: a roll of a
/// small segment has little to sync anyway, and a sync costs a journal commit.
pub(crate) const WRITEBACK_STEP_BYTES_MIN: u64 = 1 << 20;

/// Stack of the flusher thread: it only waits, locks and calls `fdatasync`.
const FLUSHER_STACK_BYTES: usize = 64 << 10;

/// The background thread's mailbox (in `Shared`).
#[derive(Debug, Default)]
pub(crate) struct Flusher {
    state: Mutex<FlusherState>,
    wake: Condvar,
}

#[derive(Debug, Default)]
struct FlusherState {
    /// Asked to exit (after a last sync under `Interval`).
    stop: bool,
    /// The writer asked for a writeback sync that has not started yet.
    writeback_wanted: bool,
}

impl Flusher {
    /// Asks the thread to exit: under `Interval` after one last sync.
    pub fn stop(&self) {
        self.state.lock().stop = true;
        self.wake.notify_all();
    }

    /// Asks the thread to sync what was written so far, soon. Called with the writer
    /// lock held (lock order: writer, then this); it does not wait for the sync.
    pub fn request_writeback(&self) {
        let mut state = self.state.lock();
        if !state.writeback_wanted {
            state.writeback_wanted = true;
            self.wake.notify_one();
        }
    }
}

/// Spawns the background thread of a relaxed policy: `interval` is `Some` for
/// `Interval`, `None` for `Never` (writeback syncs only, no sync at drop).
pub(crate) fn spawn_flusher(
    shared: &Arc<Shared>,
    interval: Option<Duration>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let shared = Arc::clone(shared);
    std::thread::Builder::new()
        .name("mailroom-log-flush".into())
        .stack_size(FLUSHER_STACK_BYTES)
        .spawn(move || run_flusher(&shared, interval))
}

/// Syncs whatever was written every `interval` (if any) and whenever writeback is asked
/// for, until stopped; then, under `Interval`, once more.
fn run_flusher(shared: &Shared, interval: Option<Duration>) {
    let flusher = &shared.flusher;
    let mut state = flusher.state.lock();
    loop {
        if !state.stop && !state.writeback_wanted {
            wait(flusher, &mut state, interval);
        }
        let stopping = state.stop;
        state.writeback_wanted = false;
        if stopping && interval.is_none() {
            return;
        }
        MutexGuard::unlocked(&mut state, || {
            // Errors are logged by fail_stop; later appends report them.
            let _ = shared.sync_written();
        });
        if stopping {
            return;
        }
    }
}

/// Waits for a request, a stop, or (under `Interval`) the interval's end.
fn wait(flusher: &Flusher, state: &mut MutexGuard<'_, FlusherState>, interval: Option<Duration>) {
    match interval {
        // A timed wait is the point here: the policy is "sync every interval".
        Some(interval) => {
            let _ = flusher.wake.wait_for(state, interval);
        }
        None => flusher.wake.wait(state),
    }
}
