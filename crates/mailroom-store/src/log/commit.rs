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
//! - A waiter that may block (the owner of a [`super::Durable`] on an executor that can
//!   hand its other tasks on, see `Durable::lead_or_listen`) leads only a round it would
//!   have to itself: none running and none wanted. The round is begun in the step that
//!   decides it and handed out as a [`LeadRound`] whose sync the caller runs; any other
//!   time it listens as a future does. One step, so no other waiter can come between
//!   the decision and the round.
//! - Under [`SyncPolicy::Always`](crate::log::SyncPolicy::Always) a per-log sync thread
//!   runs the rounds that futures wait for (a future must not block its executor in
//!   `fdatasync`), and any round still wanted when a leader finishes.
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

use super::Shared;
use crate::StoreError;

mod syncer;

pub(crate) use self::syncer::spawn_syncer;

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
    /// The round being synced now, or begun for a [`LeadRound`] that has yet to sync.
    running: Option<Round>,
    /// The generation the next round will get.
    next_generation: u64,
    /// Whether someone waits for the next round (it must run even if a roll made
    /// everything durable meanwhile: that round's event is what wakes its waiters).
    next_wanted: bool,
    /// How many listening waiters (futures, and may-block waiters that did not lead)
    /// wait for the running round / for the next one.
    running_waiters: usize,
    next_waiters: usize,
    /// How many listeners the last round woke: the sync thread expects about as many to
    /// come back with new records (see [`syncer::run_syncer`]). Threads are not counted: a
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

/// How a waiter waits, which decides whether it runs a round itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WaiterKind {
    /// A thread that can run a round itself.
    Blocking,
    /// A future: hands rounds to the sync thread while there is one.
    Async,
    /// A future's owner that may block its thread: runs a round itself only when it
    /// would have its sync to itself, else listens as a future does.
    MayBlock,
}

impl WaiterKind {
    /// Whether the waiter listens for round events (and counts for the sync thread's
    /// batching window, see [`syncer::run_syncer`]) rather than waiting on a condition
    /// variable.
    fn listens(self) -> bool {
        self != WaiterKind::Blocking
    }

    /// Whether, finding no round running, the waiter runs the next round itself.
    fn leads(self, state: &CommitState) -> bool {
        match self {
            // The sync thread competes for the CPU with every woken thread; waiting for
            // it to be scheduled measured slower with 64 threads.
            WaiterKind::Blocking => true,
            WaiterKind::Async => state.syncer != Syncer::Running,
            // Alone, it spares the sync thread's two hand-offs (waking it, being woken
            // by it); if others want the next round, it joins the one the sync thread
            // is about to run instead of blocking its executor thread for them.
            WaiterKind::MayBlock => state.syncer != Syncer::Running || !state.next_wanted,
        }
    }
}

/// What a future does next.
pub(crate) enum Plan {
    /// Its records are durable (or the wait failed).
    Done(Result<(), StoreError>),
    /// Wait for this round's event, then plan again.
    Listen(EventListener),
}

/// What a waiter that may block does next.
pub(crate) enum LeadPlan {
    /// Its records are durable (or the wait failed).
    Done(Result<(), StoreError>),
    /// Wait for this round's event, then plan again as a future.
    Listen(EventListener),
    /// Run the sync of this begun round on the calling thread.
    Lead(LeadRound),
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
                    self.after_round(state, result.generation, result.outcome.is_err());
                    state = commit.state.lock();
                    if let Err(error) = result.outcome {
                        answer_failed_round(&state, target, error)?;
                    }
                }
            }
        }
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
                    self.after_round(state, result.generation, result.outcome.is_err());
                    state = commit.state.lock();
                    if let Err(error) = result.outcome {
                        if let Err(error) = answer_failed_round(&state, target, error) {
                            return Plan::Done(Err(error));
                        }
                    }
                }
            }
        }
    }

    /// What a waiter for `target` that may block its thread does next, decided in one
    /// locked step: lead a round it would have to itself (begun here, so every waiter
    /// that comes later shares it or waits for the next), or listen as a future does.
    pub(crate) fn lead_or_listen(self: &Arc<Self>, target: u64) -> LeadPlan {
        let commit = &self.commit;
        let mut state = commit.state.lock();
        match self.step(&mut state, target, WaiterKind::MayBlock) {
            Step::Done(result) => LeadPlan::Done(result),
            // As in `plan_wait`: listening before unlocking, no round end is missed.
            Step::Wait(generation) => LeadPlan::Listen(commit.event(generation).listen()),
            Step::Lead => LeadPlan::Lead(LeadRound {
                round: Some(self.begin_round(&mut state)),
                shared: Arc::clone(self),
                target,
            }),
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
        match state.running {
            Some(round) if round.end >= target => {
                if kind.listens() {
                    state.running_waiters += 1;
                }
                Step::Wait(round.generation)
            }
            Some(_) => Step::Wait(self.want_next(state, kind)),
            None if kind.leads(state) => Step::Lead,
            None => Step::Wait(self.want_next(state, kind)),
        }
    }

    /// Registers a waiter for the next round; returns that round's generation. Wakes the
    /// sync thread when the round becomes wanted, and when as many listening waiters are
    /// back as the last round woke (it may be holding the round back for them).
    fn want_next(&self, state: &mut CommitState, kind: WaiterKind) -> u64 {
        let newly_wanted = !state.next_wanted;
        state.next_wanted = true;
        if kind.listens() {
            state.next_waiters += 1;
        }
        let all_back = kind.listens() && state.next_waiters == state.last_woken;
        if state.running.is_none() && (newly_wanted || all_back) {
            self.commit.wake_syncer.notify_one();
        }
        state.next_generation
    }

    /// Runs one round with the state locked (unlocked during the sync). The caller then
    /// calls [`Self::after_round`].
    fn run_round(&self, state: &mut MutexGuard<'_, CommitState>) -> RoundResult {
        let round = self.begin_round(state);
        let started = Instant::now();
        let synced = MutexGuard::unlocked(state, || self.sync_unless_failed());
        self.end_round(state, round, synced, started.elapsed())
    }

    /// Starts the next round with the state locked: it covers everything written so far,
    /// and the waiters registered for the next round now wait for it. Until it ends,
    /// every other waiter treats it as running.
    fn begin_round(&self, state: &mut CommitState) -> Round {
        let generation = state.next_generation;
        state.next_generation += 1;
        state.next_wanted = false;
        state.running_waiters = std::mem::take(&mut state.next_waiters);
        // Writers finish before they wait, so this covers every waiter planned so far.
        let end = self.written_end.load(Ordering::Acquire);
        let round = Round { generation, end };
        state.running = Some(round);
        round
    }

    /// The disk part of a round, run unlocked: nothing is synced once the log is
    /// fail-stop (its waiters then get the failure).
    fn sync_unless_failed(&self) -> Result<(), StoreError> {
        self.check_not_failed()?;
        self.sync_active()
    }

    /// Ends `round` (state locked again) with its sync's outcome, which took `took`. The
    /// caller then calls [`Self::after_round`].
    fn end_round(
        &self,
        state: &mut CommitState,
        round: Round,
        synced: Result<(), StoreError>,
        took: Duration,
    ) -> RoundResult {
        state.running = None;
        state.last_woken = std::mem::take(&mut state.running_waiters);
        match &synced {
            Ok(()) => {
                state.last_sync = took;
                state.synced_end = state.synced_end.max(round.end);
                self.publish_synced(state.synced_end);
            }
            // Already fail-stop if the sync failed; this covers a failed check too.
            Err(error) => self.fail_stop(error),
        }
        RoundResult {
            generation: round.generation,
            outcome: synced,
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

    /// Records that everything below `end` is durable because a roll synced it. Called
    /// with the writer lock held.
    pub(crate) fn note_synced_by_roll(&self, end: u64) {
        let mut state = self.commit.state.lock();
        state.synced_end = state.synced_end.max(end);
        self.publish_synced(state.synced_end);
    }
}

/// How a round went.
struct RoundResult {
    generation: u64,
    outcome: Result<(), StoreError>,
}

/// A round begun for a waiter that runs its sync on its own thread ([`LeadPlan::Lead`]).
/// Until then every other waiter treats it as the running round. Dropped unrun, it ends
/// the round unsynced and wakes its waiters, who plan again (so the sync thread, or one
/// of them, runs the next round): none is stranded.
#[derive(Debug)]
pub(crate) struct LeadRound {
    shared: Arc<Shared>,
    /// Taken when the round ends.
    round: Option<Round>,
    /// The end the leader waits for.
    target: u64,
}

/// What a waiter for `target` that led a round whose sync failed (`error`) is told:
/// `Ok` if a roll synced its records meanwhile (they are published, and an error answer
/// must mean they are not), else the error.
fn answer_failed_round(
    state: &CommitState,
    target: u64,
    error: StoreError,
) -> Result<(), StoreError> {
    if state.synced_end >= target {
        return Ok(());
    }
    Err(error)
}

impl LeadRound {
    /// Runs the round's sync here (blocking) and ends it. A failed sync answers the
    /// fail-stop error (which names the sync's error), as every other waiter of the round
    /// is answered, so a caller is told the same whichever thread ran the sync.
    pub(crate) fn run(mut self) -> Result<(), StoreError> {
        let round = self.round.take().expect("a lead round is only taken here");
        let shared = &self.shared;
        let started = Instant::now();
        let synced = shared.sync_unless_failed();
        let took = started.elapsed();
        let mut state = shared.commit.state.lock();
        let result = shared.end_round(&mut state, round, synced, took);
        shared.after_round(state, result.generation, result.outcome.is_err());
        let Err(error) = result.outcome else {
            return Ok(());
        };
        // Bound first, so the state lock is released before the failure is read.
        let answer = answer_failed_round(&shared.commit.state.lock(), self.target, error);
        // The round covered everything written when it began, the caller's records too:
        // it answers the fail-stop error, as the round's other waiters get.
        answer.map_err(|error| shared.check_not_failed().err().unwrap_or(error))
    }
}

impl Drop for LeadRound {
    fn drop(&mut self) {
        let Some(round) = self.round.take() else {
            return;
        };
        let shared = &self.shared;
        let mut state = shared.commit.state.lock();
        state.running = None;
        state.last_woken = std::mem::take(&mut state.running_waiters);
        // Nothing became durable: woken, the round's waiters find their records still
        // pending and want the next round, which wakes the sync thread; the next round's
        // waiters are handed on as after any round.
        shared.after_round(state, round.generation, false);
    }
}
