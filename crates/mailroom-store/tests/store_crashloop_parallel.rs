//! Kill -9 loop with batches and parallel consumers: the child (`mailroom-store-crashloop
//! parallel`) runs a publisher, batch and single consumers on a group with
//! `max_in_flight` 8 and a plain consumer on a group with `max_in_flight` 1, all at once,
//! and is SIGKILLed at random moments. After each kill the store must hold exactly what the
//! child was told, give or take what its unconfirmed calls may have done.
//!
//! # What may have happened without a confirmation
//!
//! A child thread prints its call's lines before it starts its next call, so at the kill
//! each thread has at most one call that may have landed unconfirmed. For one message in
//! one group that allows, on top of the confirmed history (replayed in attempt order,
//! since threads' lines interleave):
//! - before a confirmed delivery of attempt a + 1 while attempt a was never confirmed
//!   settled: the owner's retry or release of attempt a (only those make a redelivery);
//! - after the last confirmed fact: if in flight, its owner's ack, nack (retry or dead
//!   letter, as the failures so far decide) or release; then, if that left it ready (or it
//!   was ready or never delivered), one more delivery by another thread, which is then
//!   stuck on printing it, so nothing further.
//!
//! Nothing else: a confirmed ack or dead letter is final, a confirmed delivery stays in
//! flight with its attempt and its consumer unless its owner settled it, attempts never
//! go back, and a message is dead-lettered once. The child restarts on the same directory
//! each cycle and learns the state from the store: each consumer's batch poll hands back
//! its own deliveries first. A child that prints nothing for
//! `crashloop_support::CHILD_SILENCE_MAX` (say,
//! because deliveries lost their owner and nobody can settle them) fails the test.
//!
//! # How the state is read
//!
//! The public API shows deliveries in flight and dead letters, but not a ready message's
//! attempt or any message's failure count. So each check copies the killed store's
//! directory, opens the copy (the real directory is left for the next child to recover)
//! and probes it: it nacks every delivery until it is dead-lettered (the number of nacks
//! that takes gives the failures so far) and acks the never-delivered ones; what a probe
//! poll first hands out gives a ready message's attempt. Before that, a batch poll as each
//! of the child's consumers shows who owns which delivery.
//!
//! # What it cannot see
//!
//! A kill -9 keeps whatever reached the kernel, so a store that skipped `fdatasync`
//! entirely would pass; power cuts are the job of the `SimStorage` crash tests
//! (`log_crash.rs`, `store_faults.rs`, `store_model.rs`). It does catch an answer given
//! before the records reached the kernel (the log buffers them in the process until the
//! sync under `SyncPolicy::Always`), records lost or reordered between concurrent
//! transitions, and recovery that rebuilds a different state.
//!
//! The number of cycles is `MAILROOM_CRASHLOOP_CYCLES` (default 40; a new directory every
//! `EPOCH_CYCLES`); the seed of the first cycle is `MAILROOM_CRASHLOOP_SEED` (default 1).
//! Thread interleaving and the kill moment are not reproducible from a seed; the choice of
//! operations per thread is. `scripts/crashloop.sh` runs a long one.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::path::Path;

use bytes::Bytes;
use mailroom::group::{DeliveryId, NackKind, NackOptions};
use mailroom_store::log::{LogOptions, SyncPolicy};
use mailroom_store::{DurableTopic, Store, StoreOptions};

/// Running and killing the child, shared by the kill -9 loops.
mod crashloop_support;
/// The per-message model: states, facts and what they allow.
#[path = "store_crashloop_parallel/model.rs"]
mod model;

use crashloop_support::{check_messages, copy_dir, env_u64, run_child_until_killed, Draws};
use model::{allowed, slot, Fact, Outcome, Phase, Slot, ACKED, FRESH};

/// The groups (name, `max_attempts`, `max_in_flight`), as the child creates them.
const GROUPS: [(&str, u32, u32); 2] = [("gw", 3, 8), ("gs", 2, 1)];
/// Per group, its consumers as the child names them ("-": anonymous).
const CONSUMERS: [&[&str]; 2] = [&["c0", "c1", "c2", "s0"], &["-"]];
/// The most messages in one publish batch of the child.
const PUBLISH_BATCH_MAX: u64 = 5;
/// A long run starts over on a new directory this often. The oldest dead letter pins
/// the groups log behind it (docs/storage.md, compaction), so it grows by about a segment
/// a cycle, and every check copies and reopens all of it.
const EPOCH_CYCLES: u64 = 200;
/// The most probe rounds (poll and settle) per group before the probe gives up.
const PROBE_ROUNDS_MAX: usize = 10_000;

/// What the confirmed operations say, carried from cycle to cycle.
#[derive(Default)]
struct Model {
    messages: Vec<Bytes>,
    /// Per group, the state of each message below `messages.len()` that is not fresh.
    groups: [BTreeMap<u64, Slot>; 2],
    /// Per group, the owner of each delivery in flight: offset → (attempt, consumer).
    owners: [Owners; 2],
}

/// What the probe met: offset → (state before the probe, the probe's nacks of it).
type Seen = BTreeMap<u64, (Slot, u32)>;

/// Who owns deliveries in flight: offset → (attempt, consumer).
type Owners = BTreeMap<u64, (u32, String)>;

/// The lines of one cycle, parsed.
#[derive(Default)]
struct Cycle {
    published: BTreeMap<u64, Bytes>,
    facts: [BTreeMap<u64, Vec<Fact>>; 2],
    /// Per group, the consumer each confirmed delivery went to: (offset, attempt) → name.
    delivered_to: [BTreeMap<(u64, u32), String>; 2],
}

impl Cycle {
    fn take(&mut self, line: &str) -> Result<(), String> {
        let fields: Vec<&str> = line.split(' ').collect();
        let number = |i: usize| -> Result<u64, String> {
            let field = fields.get(i).ok_or(format!("short line {line:?}"))?;
            field.parse().map_err(|_| format!("bad number in {line:?}"))
        };
        if fields[0] == "pub" {
            let payload = Bytes::from(fields.get(2).ok_or("no payload")?.to_string());
            if self.published.insert(number(1)?, payload).is_some() {
                return Err(format!("offset published twice: {line:?}"));
            }
            return Ok(());
        }
        let g = GROUPS
            .iter()
            .position(|(name, ..)| Some(name) == fields.get(1))
            .ok_or(format!("unknown group in {line:?}"))?;
        let (offset, fact) = match fields[0] {
            "poll" => {
                let (offset, attempt) = (number(3)?, number(4)? as u32);
                let consumer = fields.get(2).ok_or("no consumer")?.to_string();
                let known = self.delivered_to[g].insert((offset, attempt), consumer.clone());
                if known.is_some_and(|known| known != consumer) {
                    return Err(format!("{line:?}: delivered to two consumers"));
                }
                (offset, Fact::Deliver(attempt))
            }
            "ack" => (number(2)?, Fact::Ack(number(3)? as u32)),
            "nack" => {
                let outcome = match fields.get(4).copied() {
                    Some("retry") => Outcome::Retry,
                    Some("released") => Outcome::Released,
                    Some("dead") => Outcome::Dead,
                    _ => return Err(format!("bad outcome in {line:?}")),
                };
                (number(2)?, Fact::Nack(number(3)? as u32, outcome))
            }
            _ => return Err(format!("unknown line {line:?}")),
        };
        self.facts[g].entry(offset).or_default().push(fact);
        Ok(())
    }
}

fn options(sync: SyncPolicy) -> StoreOptions {
    StoreOptions {
        log: LogOptions {
            segment_bytes_max: 4 << 10,
            index_interval_bytes: 512,
            sync,
            ..LogOptions::default()
        },
        checkpoint_every: 16,
        ..StoreOptions::default()
    }
}

/// Runs the child until it has printed `lines_before_kill` lines, SIGKILLs it, and
/// returns every complete line it printed (a line cut by the kill is no confirmation).
fn run_child(dir: &Path, seed: u64, lines_before_kill: u64) -> Result<Cycle, String> {
    let args = [
        "parallel".to_owned(),
        dir.display().to_string(),
        seed.to_string(),
    ];
    let mut cycle = Cycle::default();
    run_child_until_killed(&args, lines_before_kill, |line| cycle.take(line))?;
    Ok(cycle)
}

/// The state of every message in `group` of the (copied) store, found by probing it to
/// the end (see the module docs). Checks the dead letters' payloads on the way.
fn observe(
    topic: &DurableTopic,
    (group, max_attempts, max_in_flight): (&str, u32, u32),
    consumers: &[&str],
    messages: &[Bytes],
) -> Result<(BTreeMap<u64, Slot>, Owners), String> {
    let err = |e: mailroom_store::StoreError| format!("probe of {group}: {e}");
    let mut states = BTreeMap::new();
    for dead in topic.dead_letters(group).map_err(err)? {
        if messages.get(dead.offset as usize) != Some(&dead.message) {
            return Err(format!(
                "{group}: dead letter {} has the wrong payload",
                dead.offset
            ));
        }
        let state = slot(Phase::Dead, dead.attempts, 0);
        if states.insert(dead.offset, state).is_some() {
            return Err(format!(
                "{group}: offset {} dead-lettered twice",
                dead.offset
            ));
        }
    }
    let in_flight = topic.in_flight(group).map_err(err)?;
    if in_flight.len() > max_in_flight as usize {
        return Err(format!("{group}: {} in flight", in_flight.len()));
    }
    let (first, owners) = probe(topic, group, consumers, in_flight)?;
    let (position, len) = (topic.position(group).map_err(err)?, topic.len());
    if position != len {
        return Err(format!("{group}: the probe stopped at {position} of {len}"));
    }
    for (offset, (mut state, nacks)) in first {
        if state.phase != Phase::Fresh {
            // It took `max_attempts - failures` nacks to dead-letter it.
            state.failures = max_attempts
                .checked_sub(nacks)
                .ok_or("too many probe nacks")?;
        }
        if states.insert(offset, state).is_some() {
            return Err(format!("{group}: offset {offset} both dead and unfinished"));
        }
    }
    for offset in 0..len {
        states.entry(offset).or_insert(ACKED);
    }
    Ok((states, owners))
}

/// Settles every message of `group` in the copy: nacks each delivery until it is
/// dead-lettered and acks never-delivered ones. Returns, per offset it met, its state
/// before the probe (failures not known yet) and how many nacks dead-lettered it; and the
/// owner of each delivery that was in flight.
fn probe(
    topic: &DurableTopic,
    group: &str,
    consumers: &[&str],
    in_flight: Vec<DeliveryId>,
) -> Result<(Seen, Owners), String> {
    let err = |e: mailroom_store::StoreError| format!("probe of {group}: {e}");
    let mut first: Seen = BTreeMap::new();
    for id in &in_flight {
        first.insert(id.offset, (slot(Phase::InFlight, id.attempt, 0), 0));
    }
    let (mut to_nack, mut fresh) = (in_flight, Vec::new());
    let owners = find_owners(
        topic,
        group,
        consumers,
        &mut first,
        &mut to_nack,
        &mut fresh,
    )?;
    for _ in 0..PROBE_ROUNDS_MAX {
        for result in topic.ack_batch(group, &fresh).map_err(err)? {
            result.map_err(|refused| format!("{group}: probe ack refused: {refused}"))?;
        }
        let nack = NackOptions::new(NackKind::Nack);
        let nacked = topic.nack_batch(group, &to_nack, &nack).map_err(err)?;
        for (id, result) in to_nack.iter().zip(nacked) {
            result.map_err(|refused| format!("{group}: probe nack refused: {refused}"))?;
            first.get_mut(&id.offset).expect("seen").1 += 1;
        }
        let batch = topic.poll_batch(group, Some("probe"), 64).map_err(err)?;
        if batch.is_empty() {
            break;
        }
        (to_nack, fresh) = (Vec::new(), Vec::new());
        for delivery in batch {
            take(&mut first, delivery.id(), &mut to_nack, &mut fresh);
        }
    }
    Ok((first, owners))
}

/// Finds who owns each delivery in flight: a consumer's batch poll hands out its own
/// deliveries first. New deliveries it makes on the way are taken on like the probe's.
fn find_owners(
    topic: &DurableTopic,
    group: &str,
    consumers: &[&str],
    first: &mut Seen,
    to_nack: &mut Vec<DeliveryId>,
    fresh: &mut Vec<DeliveryId>,
) -> Result<Owners, String> {
    let mut owners = Owners::new();
    let max = to_nack.len().max(1);
    for &name in consumers {
        let consumer = (name != "-").then_some(name);
        let batch = topic
            .poll_batch(group, consumer, max)
            .map_err(|e| format!("probe of {group} as {name}: {e}"))?;
        for delivery in batch {
            let id = delivery.id();
            match first.get(&id.offset) {
                Some((state, _)) if *state == slot(Phase::InFlight, id.attempt, 0) => {
                    if owners
                        .insert(id.offset, (id.attempt, name.to_owned()))
                        .is_some()
                    {
                        return Err(format!("{group}: {id:?} owned by two consumers"));
                    }
                }
                _ => take(first, id, to_nack, fresh),
            }
        }
    }
    let unowned = |(offset, (state, _)): (&u64, &(Slot, u32))| {
        (state.phase == Phase::InFlight && !owners.contains_key(offset)).then_some(*offset)
    };
    if let Some(lost) = first.iter().find_map(unowned) {
        return Err(format!(
            "{group}: {lost} in flight, owned by none of {consumers:?}"
        ));
    }
    Ok(owners)
}

/// Takes on a delivery the probe made: its first sight tells what it was before.
fn take(
    first: &mut Seen,
    id: DeliveryId,
    to_nack: &mut Vec<DeliveryId>,
    fresh: &mut Vec<DeliveryId>,
) {
    match first.entry(id.offset) {
        Entry::Occupied(_) => to_nack.push(id),
        Entry::Vacant(new) if id.attempt == 1 => {
            new.insert((FRESH, 0));
            fresh.push(id);
        }
        Entry::Vacant(new) => {
            new.insert((slot(Phase::Ready, id.attempt - 1, 0), 0));
            to_nack.push(id);
        }
    }
}

/// Checks one group's observed states against the model and the cycle's facts.
fn check_group(
    g: usize,
    (observed, owners): (&BTreeMap<u64, Slot>, &Owners),
    model: &Model,
    cycle: &Cycle,
) -> Result<(), String> {
    let (name, max_attempts, _) = GROUPS[g];
    let len = model.messages.len() as u64;
    if let Some((offset, _)) = cycle.facts[g].range(len..).next() {
        return Err(format!(
            "{name}: confirmed operation on offset {offset} beyond the log ({len})"
        ));
    }
    for offset in 0..len {
        let base = model.groups[g].get(&offset).copied().unwrap_or(FRESH);
        let facts = cycle.facts[g].get(&offset).map_or(&[][..], Vec::as_slice);
        let found = observed[&offset];
        if found.phase != Phase::Acked && found.attempt < base.attempt {
            return Err(format!(
                "{name} {offset}: attempt went back from {base:?} to {found:?}"
            ));
        }
        let allowed =
            allowed(base, facts, max_attempts).map_err(|e| format!("{name} {offset}: {e}"))?;
        if !allowed.contains(&found) {
            return Err(format!(
                "{name} {offset}: store has {found:?}; from {base:?} with confirmed {facts:?} \
                 only {allowed:?} may be"
            ));
        }
        if found.phase == Phase::InFlight {
            let owner = &owners[&offset].1;
            let confirmed = cycle.delivered_to[g].get(&(offset, found.attempt));
            let before = model.owners[g].get(&offset);
            let before = before.filter(|(attempt, _)| *attempt == found.attempt);
            let expected = confirmed.or(before.map(|(_, name)| name));
            if expected.is_some_and(|expected| expected != owner) {
                return Err(format!(
                    "{name} {offset}: {found:?} owned by {owner}, delivered to {expected:?}"
                ));
            }
        }
    }
    Ok(())
}

/// Copies the killed store, checks the copy against the model and the cycle, and moves
/// the model to what the store holds.
fn check(dir: &Path, model: &mut Model, cycle: &Cycle) -> Result<(), String> {
    let copy = tempfile::tempdir().expect("a scratch directory");
    copy_dir(dir, copy.path());
    let store =
        Store::open(copy.path(), options(SyncPolicy::Never)).map_err(|e| format!("reopen: {e}"))?;
    let topic = store.topic("t").map_err(|e| format!("the topic: {e}"))?;
    check_messages(
        &topic,
        &mut model.messages,
        &cycle.published,
        PUBLISH_BATCH_MAX,
    )?;
    for (g, group) in GROUPS.into_iter().enumerate() {
        let (observed, owners) = observe(&topic, group, CONSUMERS[g], &model.messages)?;
        check_group(g, (&observed, &owners), model, cycle)?;
        model.owners[g] = owners;
        model.groups[g] = observed
            .into_iter()
            .filter(|(_, state)| *state != FRESH)
            .collect();
    }
    Ok(())
}

// Proves that after SIGKILL at random moments, with batch and single calls of several
// threads in flight on groups of max_in_flight 8 and 1, every confirmed publish is
// readable at gap-free offsets with its bytes, every confirmed ack and dead letter is
// final (each dead letter once, with its attempts), every confirmed delivery not
// confirmed settled is still in flight with its attempt and consumer or was settled (and at
// most once redelivered) by the unconfirmed calls, and attempts never go back.
#[test]
fn kill_minus_nine_with_parallel_batches_loses_nothing_confirmed() {
    let cycles = env_u64("MAILROOM_CRASHLOOP_CYCLES", 40);
    let first_seed = env_u64("MAILROOM_CRASHLOOP_SEED", 1);
    let mut dir = tempfile::tempdir().unwrap();
    let mut model = Model::default();
    let mut draws = Draws::new(first_seed);
    let mut settled = [0usize; 2];
    for cycle_number in 0..cycles {
        if cycle_number > 0 && cycle_number % EPOCH_CYCLES == 0 {
            dir = tempfile::tempdir().unwrap();
            model = Model::default();
        }
        let lines_before_kill = 1 + draws.next_draw() % 150;
        let seed = first_seed + cycle_number;
        let result = run_child(dir.path(), seed, lines_before_kill)
            .and_then(|cycle| check(dir.path(), &mut model, &cycle));
        if let Err(error) = result {
            panic!(
                "cycle {cycle_number} (child seed {seed}, MAILROOM_CRASHLOOP_SEED={first_seed}, \
                 kill after {lines_before_kill} lines): {error}"
            );
        }
        for (g, count) in settled.iter_mut().enumerate() {
            *count = model.groups[g]
                .values()
                .filter(|s| s.phase >= Phase::Acked)
                .count();
        }
    }
    // The loop did real work: messages, and settled ones in both groups.
    assert!(!model.messages.is_empty());
    assert!(
        settled.iter().all(|&count| count > 0),
        "settled per group: {settled:?}"
    );
}
