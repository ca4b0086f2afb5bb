//! Group commit: many writers waiting for durability share one `fdatasync`.
//!
//! Syncs run in *rounds*, one at a time. A round notes how far the log has been written,
//! writes out the writer's buffered records (one `pwrite`, see `Writer::pending`), syncs
//! the active segment once, and publishes the noted point as durable. A waiter (a caller
//! of [`Shared::wait_durable`] or a polled [`super::Durable`]) whose records the running
//! round covers waits for that round; any other waits for the next round, which covers
//! everything written meanwhile. Each round parity has its own event (futures) and
//! condition variable (threads), so a round wakes exactly the waiters it made durable,
//! not everyone still waiting.
//!
//! Who runs a round:
//! - A blocking waiter that finds no round running runs one itself (the *leader*): a
//!   lone writer pays one `fdatasync` per call and no thread hand-off, and under load the
//!   first thread back starts the next round.
//! - Under [`SyncPolicy::Always`] a per-log sync thread runs the rounds that futures wait
//!   for (a future must not block its executor in `fdatasync`), and any round still wanted
//!   when a leader finishes.
//! - Without that thread (other policies, or after the log was dropped) the waiters of
//!   the next round are all woken when a round ends, and one of them leads.
//!
//! One sync at a time is deliberate: letting up to four run at once (safe, since
//! `fdatasync` covers every write made before the call) halved throughput with 64
//! writers in a side-by-side run (`benches/log/main.rs`), because concurrent syncs of one
//! file contend instead of batching.
//!
//! Earlier segments need no sync here: a segment is synced before the next is created.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use event_listener::{Event, EventListener};
use parking_lot::{Condvar, Mutex, MutexGuard};

use super::mark::Claim;
use super::{Shared, SyncPolicy};
use crate::StoreError;

/// The longest the sync thread holds a round back waiting for more waiters.
const HOLD_BACK_MAX: Duration = Duration::from_millis(2);
/// Stack of the sync thread: it only loops, locks and calls `fdatasync`.
const SYNC_THREAD_STACK_BYTES: usize = 64 << 10;

/// The durability state shared by writers, waiters and the sync thread.
#[derive(Debug)]
pub(crate) struct GroupCommit {
    state: Mutex<CommitState>,
    /// `rounds[g % 2]` is notified when round `g` ends, synced or failed, for futures;
    /// `rounds_blocking[g % 2]` for blocked threads. Two suffice: a waiter only ever
    /// waits for the running round or the one after it. Threads wait on a condition
    /// variable, whose notify_all moves them onto the mutex to wake one after another,
    /// rather than on an event, whose notifier would unpark each in turn itself while
    /// the next round waits.
    rounds: [Event; 2],
    rounds_blocking: [Condvar; 2],
    /// Wakes the sync thread when a round is wanted or it should stop.
    wake_syncer: Condvar,
}

#[derive(Debug)]
struct CommitState {
    /// Every offset below this is on disk.
    synced_end: u64,
    /// The round being synced now, if any.
    running: Option<Round>,
    /// The generation the next round will get.
    next_generation: u64,
    /// Whether someone waits for the next round (it must run even if a roll made
    /// everything durable meanwhile: that round's event is what wakes its waiters).
    next_wanted: bool,
    /// How many futures listen for the running round / for the next one.
    running_waiters: usize,
    next_waiters: usize,
    /// How many futures the last round woke: the sync thread expects about as many to
    /// come back with new records (see [`run_syncer`]). Threads are not counted: a
    /// thread that finds no round running leads one itself, so no round waits for them.
    last_woken: usize,
    /// How long the last round's sync took: the longest the sync thread holds a round
    /// back for them.
    last_sync: Duration,
    /// The sync thread's lifecycle.
    syncer: Syncer,
}

/// A round in progress.
#[derive(Debug, Clone, Copy)]
struct Round {
    generation: u64,
    /// Every offset below this is durable once the round's sync succeeds.
    end: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Syncer {
    /// No sync thread (policies other than Always, or it has exited).
    Absent,
    /// Running rounds on request.
    Running,
    /// Asked to stop: runs the rounds still wanted, then exits.
    Stopping,
}

/// Whether a waiter may block its thread in `fdatasync`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WaiterKind {
    /// A thread that can run a round itself.
    Blocking,
    /// A future: hands rounds to the sync thread while there is one.
    Async,
}

/// What a future does next.
pub(crate) enum Plan {
    /// Its records are durable (or the wait failed).
    Done(Result<(), StoreError>),
    /// Wait for this round's event, then plan again.
    Listen(EventListener),
}

/// What a waiter does next (decided with the state locked).
enum Step {
    /// Its records are durable (or the wait failed).
    Done(Result<(), StoreError>),
    /// Wait for the end of the round with this generation, then decide again.
    Wait(u64),
    /// Run a round now.
    Lead,
}

impl GroupCommit {
    /// A commit state where everything below `synced_end` is already durable.
    pub fn new(synced_end: u64) -> GroupCommit {
        GroupCommit {
            state: Mutex::new(CommitState {
                synced_end,
                running: None,
                next_generation: 0,
                next_wanted: false,
                running_waiters: 0,
                next_waiters: 0,
                last_woken: 0,
                last_sync: Duration::ZERO,
                syncer: Syncer::Absent,
            }),
            rounds: [Event::new(), Event::new()],
            rounds_blocking: [Condvar::new(), Condvar::new()],
            wake_syncer: Condvar::new(),
        }
    }

    fn event(&self, generation: u64) -> &Event {
        &self.rounds[(generation % 2) as usize]
    }

    fn round_ended(&self, generation: u64) -> &Condvar {
        &self.rounds_blocking[(generation % 2) as usize]
    }

    /// Wakes every waiter (thread or future) of round `generation`.
    fn notify_round(&self, generation: u64) {
        self.round_ended(generation).notify_all();
        self.event(generation).notify(usize::MAX);
    }

    /// Marks the sync thread as started (before it is spawned, so no round is missed).
    pub fn syncer_starting(&self) {
        self.state.lock().syncer = Syncer::Running;
    }

    /// Asks the sync thread to finish the rounds still wanted and exit.
    pub fn stop_syncer(&self) {
        let mut state = self.state.lock();
        if state.syncer == Syncer::Running {
            state.syncer = Syncer::Stopping;
        }
        self.wake_syncer.notify_one();
    }
}

impl Shared {
    /// Returns once every offset below `target` is durable (blocking; may run rounds).
    pub(crate) fn wait_durable(&self, target: u64) -> Result<(), StoreError> {
        let commit = &self.commit;
        let mut state = commit.state.lock();
        loop {
            match self.step(&mut state, target, WaiterKind::Blocking) {
                Step::Done(result) => return result,
                // Re-planned after every wake-up, so a spurious one is harmless.
                Step::Wait(generation) => commit.round_ended(generation).wait(&mut state),
                Step::Lead => {
                    let result = self.run_round(&mut state);
                    self.after_round(state, result.generation, result.failed);
                    state = commit.state.lock();
                    if let Err(error) = result.outcome {
                        // Unless a roll synced the records meanwhile: then they are
                        // published, and an error answer must mean they are not.
                        if state.synced_end < target {
                            return Err(error);
                        }
                    }
                }
            }
        }
    }

    /// Whether a waiter for `target` would have the next sync to itself: its records are
    /// not durable yet, no round is running and nobody waits for the next one. A caller
    /// that may block (see `Durable::syncs_alone`) then runs the round on its own thread
    /// rather than hand it to the sync thread and be woken back. Only a hint: another
    /// waiter may come between this answer and the wait, which then simply shares the
    /// round (or waits for it) as every waiter does.
    pub(crate) fn would_sync_alone(&self, target: u64) -> bool {
        let state = self.commit.state.lock();
        state.synced_end < target && state.running.is_none() && !state.next_wanted
    }

    /// What a future waiting for `target` does next: done, or listen for a round's end.
    /// It runs a round itself only while the log has no sync thread (after the log was
    /// dropped): otherwise it must not block its executor in `fdatasync`.
    pub(crate) fn plan_wait(&self, target: u64) -> Plan {
        let commit = &self.commit;
        let mut state = commit.state.lock();
        loop {
            match self.step(&mut state, target, WaiterKind::Async) {
                Step::Done(result) => return Plan::Done(result),
                // Listening starts before the lock is released: no round end is missed.
                Step::Wait(generation) => return Plan::Listen(commit.event(generation).listen()),
                Step::Lead => {
                    let result = self.run_round(&mut state);
                    self.after_round(state, result.generation, result.failed);
                    state = commit.state.lock();
                    if let Err(error) = result.outcome {
                        // As in `wait_durable`: records a roll synced are published.
                        if state.synced_end < target {
                            return Plan::Done(Err(error));
                        }
                    }
                }
            }
        }
    }

    /// Decides, with the state locked, what a waiter for `target` does next.
    fn step(&self, state: &mut CommitState, target: u64, kind: WaiterKind) -> Step {
        if state.synced_end >= target {
            return Step::Done(Ok(()));
        }
        if let Err(error) = self.check_not_failed() {
            return Step::Done(Err(error));
        }
        let written_end = self.written_end.load(Ordering::Acquire);
        if target > written_end {
            return Step::Done(Err(StoreError::InvalidArgument {
                reason: format!("cannot wait for end {target}: only {written_end} written"),
            }));
        }
        // A blocking waiter that finds no round running leads one: a lone writer syncs on
        // its own thread, and under load the first thread back starts the next round
        // (the sync thread competes for the CPU with every woken thread; waiting for it
        // to be scheduled measured slower with 64 threads).
        let syncer_takes_it = state.syncer == Syncer::Running && kind == WaiterKind::Async;
        match state.running {
            Some(round) if round.end >= target => {
                if kind == WaiterKind::Async {
                    state.running_waiters += 1;
                }
                Step::Wait(round.generation)
            }
            Some(_) => Step::Wait(self.want_next(state, kind)),
            None if syncer_takes_it => Step::Wait(self.want_next(state, kind)),
            None => Step::Lead,
        }
    }

    /// Registers a waiter for the next round; returns that round's generation. Wakes the
    /// sync thread when the round becomes wanted, and when as many async waiters are back
    /// as the last round woke (it may be holding the round back for them).
    fn want_next(&self, state: &mut CommitState, kind: WaiterKind) -> u64 {
        let newly_wanted = !state.next_wanted;
        state.next_wanted = true;
        if kind == WaiterKind::Async {
            state.next_waiters += 1;
        }
        let all_back = kind == WaiterKind::Async && state.next_waiters == state.last_woken;
        if state.running.is_none() && (newly_wanted || all_back) {
            self.commit.wake_syncer.notify_one();
        }
        state.next_generation
    }

    /// Runs one round with the state locked (unlocked during the sync). The caller then
    /// calls [`Self::after_round`].
    fn run_round(&self, state: &mut MutexGuard<'_, CommitState>) -> RoundResult {
        let generation = state.next_generation;
        state.next_generation += 1;
        state.next_wanted = false;
        state.running_waiters = std::mem::take(&mut state.next_waiters);
        if let Err(error) = self.check_not_failed() {
            return RoundResult {
                generation,
                failed: true,
                outcome: Err(error),
            };
        }
        // Writers finish before they wait, so this covers every waiter planned so far.
        let end = self.written_end.load(Ordering::Acquire);
        state.running = Some(Round { generation, end });
        let started = Instant::now();
        let synced = MutexGuard::unlocked(state, || self.sync_active());
        state.last_sync = started.elapsed();
        state.running = None;
        state.last_woken = std::mem::take(&mut state.running_waiters);
        match synced {
            Ok(()) => {
                state.synced_end = state.synced_end.max(end);
                self.publish_synced(state.synced_end);
                RoundResult {
                    generation,
                    failed: false,
                    outcome: Ok(()),
                }
            }
            Err(error) => {
                self.fail_stop(&error);
                RoundResult {
                    generation,
                    failed: true,
                    outcome: Err(error),
                }
            }
        }
    }

    /// After a round: hands the next round on if someone wants it, unlocks, and wakes the
    /// round's waiters (all waiters, if it failed: the log is now fail-stop).
    fn after_round(&self, state: MutexGuard<'_, CommitState>, generation: u64, failed: bool) {
        let commit = &self.commit;
        let wake_next = match (state.next_wanted, state.syncer) {
            (false, _) => false,
            (true, Syncer::Absent) => true,
            (true, Syncer::Running | Syncer::Stopping) => {
                commit.wake_syncer.notify_one();
                false
            }
        };
        drop(state);
        commit.notify_round(generation);
        if failed || wake_next {
            // Without a sync thread one of them leads the next round; after a failure
            // they all learn it.
            commit.notify_round(generation + 1);
        }
    }

    /// Writes out the writer's buffered records, then syncs the active segment. Every
    /// record below the end noted before the call was written before this takes the
    /// writer lock, so it is in the buffer flushed here, in this segment's file, or in an
    /// older segment, which its roll synced (a roll holds the writer lock throughout).
    ///
    /// Then it writes the synced mark (one small `pwrite`, not synced: see `mark.rs`) with
    /// what this sync made durable, before any waiter is answered: so after a process
    /// crash every confirmed record lies inside the mark, and recovery reads damage there
    /// as rot, not as a torn tail. It adds no `fdatasync` to the round.
    fn sync_active(&self) -> Result<(), StoreError> {
        let (segment, claim) = {
            let mut writer = self.writer.lock();
            if let Err(error) = self.flush_pending(&mut writer) {
                // Records confirmed under a relaxed policy stay: no cut then.
                self.fail_stop_cutting(&writer, &error, None);
                return Err(error);
            }
            // Before the sync, so the sync below makes the new zeros durable too.
            self.preallocate(&mut writer);
            let active = Arc::clone(&writer.active);
            // Under the writer lock the segment's meta is exactly what is in its file.
            let claim = {
                let meta = active.meta.lock();
                Claim {
                    base_offset: active.base_offset,
                    end_offset: meta.end_offset,
                    segment_bytes: meta.bytes,
                }
            };
            (active, claim)
        };
        if let Err(error) = self.segment_syncs.sync(&segment) {
            // Under Always the records of this round (and any written since) are cut
            // before their waiters learn of the failure; see `fail_stop_cutting`.
            let writer = self.writer.lock();
            self.fail_stop_cutting(&writer, &error, None);
            return Err(error);
        }
        self.note_synced_by_round(claim)?;
        // Rounds run one at a time, so claims are written in order. A failure only
        // leaves an older (still true) claim: the data is durable, so it fails nothing.
        if let Err(error) = self.mark.lock().write(claim) {
            tracing::warn!(%error, "could not write the synced mark");
        }
        Ok(())
    }

    /// After a round's sync returned: records its claim as what a fail-stop cut keeps,
    /// unless the log failed meanwhile. Both under the writer lock, which every cut holds
    /// (`fail_stop_cutting`), because the sync ran without it: a roll or write that
    /// failed during the sync may already have cut this round's records from the file
    /// (the sync then returns success for a file without them), and one that fails after
    /// this must find them in `synced` or it cuts records about to be confirmed.
    fn note_synced_by_round(&self, claim: Claim) -> Result<(), StoreError> {
        let _writer = self.writer.lock();
        self.check_not_failed()?;
        let mut synced = self.synced.lock();
        if synced.base_offset == claim.base_offset && claim.segment_bytes > synced.bytes {
            synced.bytes = claim.segment_bytes;
            synced.end_offset = claim.end_offset;
        }
        Ok(())
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

/// How a round went.
struct RoundResult {
    generation: u64,
    failed: bool,
    outcome: Result<(), StoreError>,
}

/// The sync thread of [`SyncPolicy::Always`]: runs rounds while waiters want them, until
/// stopped; then runs the rounds still wanted and exits.
///
/// Before a round it waits until as many futures want it as the last round woke, but no
/// longer than that round's sync took (at most [`HOLD_BACK_MAX`]). Without this, the
/// first task back after a round starts the next one alone, the other 63 write during
/// that sync and wait for the one after: rounds alternate between 1 and 63 records, two
/// syncs per 64 (measured: about 1.4x the records/s with it, 64 async tasks). Holding back costs at most one sync time, which is what
/// the lone-record round would have cost. This is a batching window, not a
/// synchronisation: no waiter's correctness depends on it.
pub(crate) fn run_syncer(shared: Arc<Shared>) {
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
            shared.after_round(state, result.generation, result.failed);
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

/// Spawns the sync thread of [`SyncPolicy::Always`].
pub(crate) fn spawn_syncer(shared: &Arc<Shared>) -> std::io::Result<std::thread::JoinHandle<()>> {
    shared.commit.syncer_starting();
    let thread_shared = Arc::clone(shared);
    std::thread::Builder::new()
        .name("mailroom-log-sync".into())
        .stack_size(SYNC_THREAD_STACK_BYTES)
        .spawn(move || run_syncer(thread_shared))
        .inspect_err(|_| shared.commit.state.lock().syncer = Syncer::Absent)
}
