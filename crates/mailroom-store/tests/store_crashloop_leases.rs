//! Kill -9 loop over leases, nack kinds, redrive and purge: the child
//! (`mailroom-store-crashloop leases`) runs a publisher, consumers that poll with short
//! leases (so some run out and are redelivered to another consumer), touch, ack, nack
//! with a delay or the group's backoff, release and reject, and a thread that redrives and purges dead letters, all at
//! once, and is SIGKILLed at random moments. After each kill the store must hold exactly
//! what the child was told, give or take what its unconfirmed calls may have done.
//!
//! # Time
//!
//! The child's store reads a clock the child moves by hand, a tick at a time, while no
//! store call is running; each tick is printed (`tick <ms>`) before any call is made at
//! that time. So every confirmed line has an exact time, and every call cut short by the
//! kill was made at the last tick printed (the kill time). Deadlines, delays and
//! dead-letter times are checked exactly. The next child starts a few ticks after the
//! kill, so some leases run out while no process is running.
//!
//! # What may have happened without a confirmation
//!
//! Each child thread prints a call's lines before it starts its next call, so at the kill
//! each thread has at most one call that may have landed unconfirmed. Per message and
//! group, on top of the confirmed history (replayed in attempt order, since threads' lines
//! interleave; an expiry is no one's call: a lease whose deadline has come has run out,
//! dated at its deadline):
//! - before a confirmed delivery, redrive or purge that does not follow: its owner's
//!   unconfirmed retry, release or dead letter, then the redriver's unconfirmed redrive;
//! - after the last confirmed fact, at the kill time: its owner's touch, ack, nack (with
//!   any delay the child uses), release or reject; then a redrive or purge; then one more
//!   delivery by another thread.
//!
//! # How the state is read
//!
//! Each check copies the killed store's directory and opens the copy with a clock at the
//! kill time (the real directory is left for the next child). It reads the dead letters
//! (attempts, reason, time, payload), the counters and the deliveries in flight; then it
//! moves the copy's clock a tick at a time: a delivery's deadline is the first tick at
//! which it is no longer in flight, and whatever becomes deliverable is delivered and
//! nacked (with no delay) until it is dead-lettered. The number of those nacks gives its
//! failures, the first delivery's attempt gives its attempt, and the tick of that first
//! delivery bounds its delay: no earlier than its own not-before time, and later only if
//! something else (a lower message's delivery, a lease running out) held it up then. A
//! second copy, polled as each of the child's consumers (a consumer's batch poll hands
//! back its own deliveries first), shows who owns each delivery in flight.
//!
//! # What it cannot see
//!
//! A kill -9 keeps whatever reached the kernel, so a store that skipped `fdatasync`
//! entirely would pass; power cuts are the job of the `SimStorage` crash tests. The
//! per-message rules allow each message its own unconfirmed calls, though a thread has at
//! most one in all; and a dead-letter read is always preceded by a call that writes the
//! expiries due (the child's redriver and the probe do so to step around a store bug, see
//! `dead_letters` in `probe.rs`).
//!
//! The number of cycles is `MAILROOM_CRASHLOOP_CYCLES` (default 30; a new directory every
//! `EPOCH_CYCLES`); the seed of the first cycle is `MAILROOM_CRASHLOOP_SEED` (default 1).
//! Thread interleaving and the kill moment are not reproducible from a seed.
//! `scripts/crashloop.sh` runs a long one.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use mailroom::group::Backoff;
use mailroom_store::clock::{Clock, ManualClock};
use mailroom_store::log::{LogOptions, SyncPolicy};
use mailroom_store::{Store, StoreOptions};

/// Running and killing the child, shared by the kill -9 loops.
mod crashloop_support;
/// The child's lines, parsed into timed facts.
#[path = "store_crashloop_leases/lines.rs"]
mod lines;
/// The per-message model: states, facts and what they allow.
#[path = "store_crashloop_leases/model.rs"]
mod model;
/// Reading a group's state out of a copy of the killed store.
#[path = "store_crashloop_leases/probe.rs"]
mod probe;

use crashloop_support::{check_messages, copy_dir, env_u64, run_child_until_killed, Draws};
use lines::Cycle;
use model::{allowed, Phase, Rules, Slot, FRESH};
use probe::{observe, owners, Observed, Owners, Seen};

/// Store milliseconds per tick of the child's clock.
const STEP_MS: u64 = 10;
/// The clock of the first child.
const START_MS: u64 = 1_000_000;
/// The most ticks between a kill and the next child's start.
const DOWNTIME_TICKS_MAX: u64 = 4;
/// The most messages in one publish batch of the child.
const PUBLISH_BATCH_MAX: u64 = 4;
/// The most lines a child prints before it is killed.
const LINES_BEFORE_KILL_MAX: u64 = 400;
/// A long run starts over on a new directory this often (the groups log grows while old
/// dead letters pin it, and every check copies all of it).
const EPOCH_CYCLES: u64 = 200;

/// One group of the child, as it creates it.
pub struct GroupSpec {
    name: &'static str,
    max_in_flight: usize,
    rules: Rules,
    /// Its consumers, as the child names them.
    consumers: &'static [&'static str],
}

/// The child's groups (`crashloop/leases.rs`).
const GROUPS: [GroupSpec; 2] = [
    GroupSpec {
        name: "gl",
        max_in_flight: 4,
        consumers: &["c0", "c1", "c2"],
        rules: Rules {
            max_attempts: 3,
            lease_ms: 60,
            backoff: Backoff::Fixed { delay_ms: 20 },
        },
    },
    GroupSpec {
        name: "gd",
        max_in_flight: 1,
        consumers: &["d0"],
        rules: Rules {
            max_attempts: 2,
            lease_ms: 40,
            backoff: Backoff::Exponential {
                base_ms: 10,
                cap_ms: 40,
            },
        },
    },
];

/// What the confirmed operations and the probes say, carried from cycle to cycle.
#[derive(Default)]
struct Model {
    messages: Vec<Bytes>,
    /// The clock at the last kill.
    kill_ms: u64,
    /// Per group, the states each message may be in (absent: never delivered).
    groups: [BTreeMap<u64, Vec<Slot>>; 2],
    /// Per group, the consumer of each confirmed delivery: (offset, attempt) → name.
    delivered_to: [BTreeMap<(u64, u32), String>; 2],
    /// Per group, the counters of redrives and purges the store showed.
    redrives_purges: [(u64, u64); 2],
    /// Every kind of line seen so far, so the test knows the loop did what it says.
    kinds: BTreeSet<String>,
}

fn options(clock: Arc<dyn Clock>) -> StoreOptions {
    StoreOptions {
        log: LogOptions {
            segment_bytes_max: 4 << 10,
            index_interval_bytes: 512,
            sync: SyncPolicy::Never,
            ..LogOptions::default()
        },
        checkpoint_every: 16,
        clock,
        ..StoreOptions::default()
    }
}

/// Runs the child from `start_ms` until it has printed `lines_before_kill` lines, SIGKILLs
/// it, and returns every complete line it printed, parsed.
fn run_child(
    dir: &Path,
    seed: u64,
    start_ms: u64,
    lines_before_kill: u64,
    model: &mut Model,
) -> Result<Cycle, String> {
    let args = [
        "leases".to_owned(),
        dir.display().to_string(),
        seed.to_string(),
        start_ms.to_string(),
    ];
    let mut cycle = Cycle {
        kill_ms: start_ms,
        ..Cycle::default()
    };
    run_child_until_killed(&args, lines_before_kill, |line| cycle.take(line, model))?;
    Ok(cycle)
}

/// Whether the probe's sight of a message fits the allowed state `state`.
fn fits(state: &Slot, seen: &Seen, kill_ms: u64, observed: &Observed) -> bool {
    let Some(first_ms) = seen.first_ms else {
        return *state == seen.state;
    };
    let same = (state.phase, state.attempt, state.failures)
        == (seen.state.phase, seen.state.attempt, seen.state.failures);
    // Deliverable from `due`; later only if something else held the drain up.
    let due = state.time_ms.max(kill_ms);
    same && first_ms >= due && (first_ms == due || observed.released_by_another(first_ms, true))
}

/// What kind of state the probe found, for the test's closing check.
fn found(seen: &Seen, kill_ms: u64) -> String {
    match seen.state.phase {
        Phase::Ready if seen.first_ms > Some(kill_ms) => "found ready later".to_owned(),
        phase => format!("found {phase:?}"),
    }
}

/// Checks one group's observed states against the model and the cycle's facts, and
/// moves the model to what fits.
fn check_group(
    g: usize,
    observed: &Observed,
    model: &mut Model,
    cycle: &Cycle,
) -> Result<(), String> {
    let spec = &GROUPS[g];
    let len = model.messages.len() as u64;
    if let Some((offset, _)) = cycle.facts[g].range(len..).next() {
        return Err(format!(
            "{}: confirmed operation on offset {offset} beyond the log ({len})",
            spec.name
        ));
    }
    for offset in 0..len {
        let bases = model.groups[g]
            .get(&offset)
            .map_or(&[FRESH][..], Vec::as_slice);
        let facts = cycle.facts[g].get(&offset).map_or(&[][..], Vec::as_slice);
        let allowed = allowed(&spec.rules, bases, facts, cycle.kill_ms)
            .map_err(|e| format!("{} {offset}: {e}", spec.name))?;
        let seen = &observed.seen[&offset];
        model.kinds.insert(found(seen, cycle.kill_ms));
        let fitting: Vec<Slot> = allowed
            .iter()
            .filter(|state| fits(state, seen, cycle.kill_ms, observed))
            .copied()
            .collect();
        if fitting.is_empty() {
            return Err(format!(
                "{} {offset}: store has {seen:?} at {}; from {bases:?} with confirmed {facts:?} \
                 only {allowed:?} may be",
                spec.name, cycle.kill_ms
            ));
        }
        model.groups[g].insert(offset, fitting);
    }
    let counters = (observed.counters.redrives, observed.counters.purged);
    let (base, confirmed) = (model.redrives_purges[g], cycle.redrives_purges[g]);
    let low = (base.0 + confirmed.0, base.1 + confirmed.1);
    // The redriver's one unconfirmed call may have redriven or purged one more.
    if counters.0 < low.0 || counters.1 < low.1 || counters.0 + counters.1 > low.0 + low.1 + 1 {
        return Err(format!(
            "{}: redrives and purges {counters:?}, confirmed {low:?}",
            spec.name
        ));
    }
    model.redrives_purges[g] = counters;
    Ok(())
}

/// Checks that each delivery in flight is owned by the consumer it was confirmed to (any
/// of the group's, for one made by a cut-short poll), and remembers them.
fn check_owners(g: usize, owners: &Owners, model: &mut Model) -> Result<(), String> {
    for (&key, owner) in owners {
        let confirmed = model.delivered_to[g].entry(key).or_insert(owner.clone());
        if confirmed != owner {
            let name = GROUPS[g].name;
            return Err(format!(
                "{name} {key:?}: owned by {owner}, delivered to {confirmed}"
            ));
        }
    }
    Ok(())
}

/// Copies the killed store, checks the copy against the model and the cycle, and moves
/// the model to what the store holds.
fn check(dir: &Path, model: &mut Model, cycle: &Cycle) -> Result<(), String> {
    let copy = tempfile::tempdir().expect("a scratch directory");
    copy_dir(dir, copy.path());
    let clock = Arc::new(ManualClock::new(cycle.kill_ms));
    let store =
        Store::open(copy.path(), options(clock.clone())).map_err(|e| format!("reopen: {e}"))?;
    let topic = store.topic("t").map_err(|e| format!("the topic: {e}"))?;
    check_messages(
        &topic,
        &mut model.messages,
        &cycle.published,
        PUBLISH_BATCH_MAX,
    )?;
    // A second copy for finding owners, since that makes deliveries of its own.
    let copy_for_owners = tempfile::tempdir().expect("a scratch directory");
    copy_dir(dir, copy_for_owners.path());
    let clock_for_owners = Arc::new(ManualClock::new(cycle.kill_ms));
    let store_for_owners = Store::open(copy_for_owners.path(), options(clock_for_owners))
        .map_err(|e| format!("reopen: {e}"))?;
    let topic_for_owners = store_for_owners
        .topic("t")
        .map_err(|e| format!("the topic: {e}"))?;
    for (g, spec) in GROUPS.iter().enumerate() {
        let owners = owners(&topic_for_owners, spec)?;
        check_owners(g, &owners, model)?;
        let observed = observe(&topic, &clock, spec, cycle.kill_ms, &model.messages)?;
        check_group(g, &observed, model, cycle)?;
    }
    model.kill_ms = cycle.kill_ms;
    Ok(())
}

// Proves that after SIGKILL at random moments, with leases running out, touches, delayed
// nacks, backoff, releases, rejects, redrives and purges of several threads at once, every
// confirmed publish is readable at gap-free offsets, and every message of each group is in
// a state its confirmed, timed history allows (plus at most one unconfirmed call per
// thread): attempts, failures, lease deadlines, not-before times, and dead letters with
// their attempts, reasons, times and payloads; each delivery in flight is owned by the
// consumer it went to; and the redrive and purge counters agree.
#[test]
fn kill_minus_nine_with_leases_and_redrives_keeps_what_was_confirmed() {
    let cycles = env_u64("MAILROOM_CRASHLOOP_CYCLES", 30);
    let first_seed = env_u64("MAILROOM_CRASHLOOP_SEED", 1);
    let mut dir = tempfile::tempdir().unwrap();
    let mut model = Model {
        kill_ms: START_MS,
        ..Model::default()
    };
    let mut draws = Draws::new(first_seed);
    for cycle_number in 0..cycles {
        if cycle_number > 0 && cycle_number % EPOCH_CYCLES == 0 {
            dir = tempfile::tempdir().unwrap();
            let kinds = std::mem::take(&mut model.kinds);
            model = Model {
                kill_ms: model.kill_ms,
                kinds,
                ..Model::default()
            };
        }
        let draw = draws.next_draw();
        let lines_before_kill = 1 + draw % LINES_BEFORE_KILL_MAX;
        let start_ms = model.kill_ms + STEP_MS * (draw >> 32).rem_euclid(DOWNTIME_TICKS_MAX + 1);
        let seed = first_seed + cycle_number;
        let result = run_child(dir.path(), seed, start_ms, lines_before_kill, &mut model)
            .and_then(|cycle| check(dir.path(), &mut model, &cycle));
        if let Err(error) = result {
            panic!(
                "cycle {cycle_number} (child seed {seed}, MAILROOM_CRASHLOOP_SEED={first_seed}, \
                 start {start_ms} ms, kill after {lines_before_kill} lines): {error}"
            );
        }
    }
    // The loop did what it says: every kind of call was confirmed at least once, and the
    // probes found deliveries in flight, messages waiting out a delay, and dead letters of
    // every cause.
    let expected = [
        "poll",
        "touch",
        "ack",
        "nack - retry",
        "nack 30 retry",
        "release",
        "reject",
        "refused",
        "redrive",
        "purge",
        "tick",
        "pub",
        "found InFlight",
        "found ready later",
        "found Dead(Nack)",
        "found Dead(Reject)",
        "found Dead(Expired)",
    ];
    let missing: Vec<&str> = expected
        .into_iter()
        .filter(|kind| !model.kinds.contains(*kind))
        .collect();
    assert!(
        missing.is_empty(),
        "never seen: {missing:?} (saw {:?})",
        model.kinds
    );
}
