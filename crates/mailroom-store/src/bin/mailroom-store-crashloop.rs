//! The child process of the kill -9 crash tests (`tests/store_crashloop.rs`, and in
//! `parallel` mode `tests/store_crashloop_parallel.rs`).
//!
//! Usage: `mailroom-store-crashloop <dir> <seed>`. Opens the store in `<dir>` and runs
//! random publishes, polls, acks and nacks on topic `t` (groups `g0`, `g1`) until killed.
//! After each call returns `Ok`, and only then, it prints the confirmed operation as one
//! line and flushes it:
//!
//! ```text
//! P <offset> <payload>              publish confirmed
//! D <group> <offset> <attempt>      poll returned this delivery
//! A <group> <offset> <attempt>      ack confirmed
//! N <group> <offset> <attempt> R|X  nack confirmed: retry, or dead-lettered
//! ```
//!
//! Anything unexpected makes it exit with status 2 and a message on stderr.
//!
//! Usage: `mailroom-store-crashloop parallel <dir> <seed>` is the child of
//! `tests/store_crashloop_parallel.rs`: several threads at once on topic `t` (see
//! the `parallel` module), each printing every confirmed operation as one line.
//!
//! Usage: `mailroom-store-crashloop leases <dir> <seed> <start_ms>` is the child of
//! `tests/store_crashloop_leases.rs`: leases, touch, delayed nacks, release, reject,
//! redrive and purge at once, on a clock that starts at `<start_ms>` and that the child
//! moves itself (see `crashloop/leases.rs`).

use std::io::Write;
use std::process::ExitCode;

use bytes::Bytes;
use mailroom::topic::{DeliveryId, Nack, TopicError};
use mailroom_store::log::LogOptions;
use mailroom_store::{DurableTopic, Store, StoreError, StoreOptions};

/// The groups and their `max_attempts`.
const GROUPS: [(&str, u32); 2] = [("g0", 2), ("g1", 3)];

/// xorshift64*: enough randomness for choosing operations, with no dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % bound
    }
}

/// The `leases` mode's child, in its own file.
#[path = "crashloop/leases.rs"]
mod leases;

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().collect();
    if args.get(1).is_some_and(|mode| mode == "leases") {
        return leases_main(&args[2..]);
    }
    let parallel_mode = args.get(1).is_some_and(|mode| mode == "parallel");
    if parallel_mode {
        args.remove(1);
    }
    let (Some(dir), Some(Ok(seed))) = (args.get(1), args.get(2).map(|s| s.parse::<u64>())) else {
        eprintln!("usage: mailroom-store-crashloop [parallel] <dir> <seed>");
        return ExitCode::from(2);
    };
    let result = if parallel_mode {
        parallel::run(dir, seed)
    } else {
        run(dir, seed)
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("crashloop child: {error}");
            ExitCode::from(2)
        }
    }
}

fn leases_main(args: &[String]) -> ExitCode {
    let number = |i: usize| args.get(i).and_then(|s| s.parse::<u64>().ok());
    let (Some(dir), Some(seed), Some(start_ms)) = (args.first(), number(1), number(2)) else {
        eprintln!("usage: mailroom-store-crashloop leases <dir> <seed> <start_ms>");
        return ExitCode::from(2);
    };
    match leases::run(dir, seed, start_ms) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("crashloop child (leases): {error}");
            ExitCode::from(2)
        }
    }
}

fn options() -> StoreOptions {
    StoreOptions {
        // Small segments and frequent checkpoints so kills land in rolls and checkpoints.
        log: LogOptions {
            segment_bytes_max: 4 << 10,
            index_interval_bytes: 512,
            ..LogOptions::default()
        },
        checkpoint_every: 16,
        ..StoreOptions::default()
    }
}

fn run(dir: &str, seed: u64) -> Result<(), StoreError> {
    let store = Store::open(dir, options())?;
    store.create_topic("t")?;
    let topic = store.topic("t")?;
    for (group, max_attempts) in GROUPS {
        match topic.create_group(group, max_attempts) {
            Ok(()) | Err(StoreError::Topic(TopicError::GroupExists { .. })) => {}
            Err(error) => return Err(error),
        }
    }
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut current: [Option<DeliveryId>; 2] = [None, None];
    let mut out = std::io::stdout().lock();
    for sequence in 0u64.. {
        let g = rng.below(2) as usize;
        let line = step(&topic, &mut rng, &mut current, g, seed, sequence)?;
        if let Some(line) = line {
            // A closed pipe means the parent is gone: stop quietly.
            if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
                break;
            }
        }
    }
    Ok(())
}

fn step(
    topic: &DurableTopic,
    rng: &mut Rng,
    current: &mut [Option<DeliveryId>; 2],
    g: usize,
    seed: u64,
    sequence: u64,
) -> Result<Option<String>, StoreError> {
    let group = GROUPS[g].0;
    let roll = rng.below(100);
    if roll < 35 {
        let payload = format!("s{seed}-n{sequence}");
        let offset = topic.publish(Bytes::from(payload.clone()))?;
        return Ok(Some(format!("P {offset} {payload}")));
    }
    if roll < 60 || current[g].is_none() {
        let Some(delivery) = topic.poll(group)? else {
            return Ok(None);
        };
        current[g] = Some(delivery.id());
        return Ok(Some(format!(
            "D {group} {} {}",
            delivery.offset, delivery.attempt
        )));
    }
    let id = current[g].take().expect("checked above");
    if roll < 67 {
        // A made-up attempt must be refused and change nothing.
        let stale = DeliveryId {
            attempt: id.attempt + 1,
            ..id
        };
        match topic.ack(group, stale) {
            Err(StoreError::Topic(TopicError::NotOwned { .. })) => {}
            other => panic!("ack of {stale:?} should be NotOwned, got {other:?}"),
        }
        current[g] = Some(id);
        return Ok(None);
    }
    let (offset, attempt) = (id.offset, id.attempt);
    if roll < 85 {
        topic.ack(group, id)?;
        return Ok(Some(format!("A {group} {offset} {attempt}")));
    }
    let outcome = match topic.nack(group, id)? {
        Nack::Retry => "R",
        Nack::DeadLettered => "X",
    };
    Ok(Some(format!("N {group} {offset} {attempt} {outcome}")))
}

/// Prints one call's confirmation lines in one write. A closed pipe means the parent is
/// gone: stop quietly.
fn confirm(lines: &str) {
    if lines.is_empty() {
        return;
    }
    let mut out = std::io::stdout().lock();
    if out
        .write_all(lines.as_bytes())
        .and_then(|()| out.flush())
        .is_err()
    {
        std::process::exit(0);
    }
}

/// Ends the whole process on a thread's error: status 2, which the parent reports.
fn exit_on_error(mode: &str, result: Result<(), String>) {
    if let Err(error) = result {
        eprintln!("crashloop child ({mode}): {error}");
        std::process::exit(2);
    }
}

/// The parallel child: on topic `t`, one publisher (single and batch publishes), batch
/// consumers and a single-delivery consumer on group `gw` (`max_in_flight` 8), and a plain
/// consumer (`poll`, `ack`, `nack`) on group `gs` (`max_in_flight` 1), all at once. Each thread prints a line for
/// every operation after its call returned `Ok`, and only then starts its next one, so at
/// a kill each thread has at most one operation whose lines are missing. Lines:
///
/// ```text
/// pub <offset> <payload>                                publish confirmed
/// poll <group> <consumer> <offset> <attempt>            delivery returned (- = anonymous)
/// ack <group> <offset> <attempt>                        ack confirmed
/// nack <group> <offset> <attempt> retry|released|dead   nack or release confirmed
/// ```
///
/// A thread's lines of one call go out in one write. No lease, backoff or delay is used,
/// so nothing changes without a call (the parent's check relies on that).
mod parallel {
    use std::time::Duration;

    use bytes::Bytes;
    use mailroom::group::{DeliveryId, GroupConfig, NackKind, NackOptions};
    use mailroom::topic::{Nack, StartPosition, TopicError};
    use mailroom_store::{DurableTopic, Store, StoreError};

    use super::{confirm, options, Rng};

    /// The wide group: name, `max_attempts`, `max_in_flight`.
    const WIDE: (&str, u32, u32) = ("gw", 3, 8);
    /// The plain group (`max_in_flight` 1, no lease or backoff): name, `max_attempts`.
    const PLAIN: (&str, u32) = ("gs", 2);
    /// The consumers of `gw` that use `poll_batch`, `ack_batch` and `nack_batch`.
    const BATCH_CONSUMERS: [&str; 3] = ["c0", "c1", "c2"];
    /// The consumer of `gw` that uses `poll_as`, `ack` and `nack_with`.
    const SINGLE_CONSUMER: &str = "s0";
    /// The most messages in one publish batch.
    const PUBLISH_BATCH_MAX: u64 = 5;
    /// The publisher waits while a group has more unfinished messages than this, so the
    /// parent's probe of the state stays small.
    const BACKLOG_MAX: u64 = 32;
    /// How long a thread with nothing to do waits before it asks again. Pacing only: no
    /// check depends on it.
    const IDLE_MS: u64 = 1;

    /// Opens the store, creates what is missing and runs the threads until killed.
    pub(super) fn run(dir: &str, seed: u64) -> Result<(), StoreError> {
        let store = Store::open(dir, options())?;
        store.create_topic("t")?;
        let topic = store.topic("t")?;
        let wide = GroupConfig::new(WIDE.1).with_max_in_flight(WIDE.2);
        ignore_exists(topic.create_group_with(WIDE.0, StartPosition::Earliest, wide))?;
        ignore_exists(topic.create_group(PLAIN.0, PLAIN.1))?;
        std::thread::scope(|scope| {
            let topic = &topic;
            scope.spawn(move || guard(publisher(topic, seed)));
            for (index, name) in BATCH_CONSUMERS.into_iter().enumerate() {
                let rng = thread_rng(seed, 1 + index as u64);
                scope.spawn(move || guard(batch_consumer(topic, name, rng)));
            }
            scope.spawn(move || guard(single_consumer(topic, thread_rng(seed, 10))));
            scope.spawn(move || guard(plain_consumer(topic, thread_rng(seed, 11))));
        });
        Ok(())
    }

    fn ignore_exists(result: Result<(), StoreError>) -> Result<(), StoreError> {
        match result {
            Err(StoreError::Topic(TopicError::GroupExists { .. })) => Ok(()),
            other => other,
        }
    }

    fn thread_rng(seed: u64, thread: u64) -> Rng {
        Rng(
            (seed ^ thread.wrapping_mul(0xd1b5_4a32_d192_ed03)).wrapping_mul(0x9e37_79b9_7f4a_7c15)
                | 1,
        )
    }

    /// Ends the whole process on a thread's error (see `exit_on_error`).
    fn guard(result: Result<(), String>) {
        super::exit_on_error("parallel", result);
    }

    fn idle() {
        std::thread::sleep(Duration::from_millis(IDLE_MS));
    }

    fn publisher(topic: &DurableTopic, seed: u64) -> Result<(), String> {
        let mut rng = thread_rng(seed, 0);
        let mut sequence = 0u64;
        loop {
            let slowest = topic
                .position(WIDE.0)
                .and_then(|wide| Ok(wide.min(topic.position(PLAIN.0)?)))
                .map_err(|error| error.to_string())?;
            if topic.len() - slowest > BACKLOG_MAX {
                idle();
                continue;
            }
            let count = 1 + rng.below(PUBLISH_BATCH_MAX);
            let payloads: Vec<Bytes> = (sequence..sequence + count)
                .map(|n| Bytes::from(format!("s{seed}-p{n}")))
                .collect();
            sequence += count;
            let offsets = if count == 1 {
                let offset = topic.publish(payloads[0].clone());
                offset.map(|offset| offset..offset + 1)
            } else {
                topic.publish_batch(&payloads)
            }
            .map_err(|error| error.to_string())?;
            let mut lines = String::new();
            for (offset, payload) in offsets.zip(&payloads) {
                let payload = std::str::from_utf8(payload).expect("ASCII payload");
                lines.push_str(&format!("pub {offset} {payload}\n"));
            }
            confirm(&lines);
        }
    }

    /// What a consumer does with one delivery it owns.
    enum Settle {
        Ack,
        Nack,
        Release,
        Keep,
    }

    fn choose(rng: &mut Rng) -> Settle {
        match rng.below(100) {
            0..=54 => Settle::Ack,
            55..=79 => Settle::Nack,
            80..=89 => Settle::Release,
            _ => Settle::Keep,
        }
    }

    fn poll_line(group: &str, consumer: &str, id: DeliveryId) -> String {
        format!("poll {group} {consumer} {} {}\n", id.offset, id.attempt)
    }

    fn nack_line(group: &str, id: DeliveryId, release: bool, outcome: Nack) -> String {
        let word = match (release, outcome) {
            (true, Nack::Retry) => "released",
            (false, Nack::Retry) => "retry",
            (_, Nack::DeadLettered) => "dead",
        };
        format!("nack {group} {} {} {word}\n", id.offset, id.attempt)
    }

    fn batch_consumer(topic: &DurableTopic, name: &str, mut rng: Rng) -> Result<(), String> {
        let group = WIDE.0;
        loop {
            let max = 1 + rng.below(u64::from(WIDE.2)) as usize;
            let batch = topic
                .poll_batch(group, Some(name), max)
                .map_err(|error| error.to_string())?;
            let ids: Vec<DeliveryId> = batch.iter().map(|delivery| delivery.id()).collect();
            confirm(
                &ids.iter()
                    .map(|&id| poll_line(group, name, id))
                    .collect::<String>(),
            );
            if ids.is_empty() {
                idle();
                continue;
            }
            let (mut acks, mut nacks, mut releases) = (Vec::new(), Vec::new(), Vec::new());
            for id in ids {
                match choose(&mut rng) {
                    Settle::Ack => acks.push(id),
                    Settle::Nack => nacks.push(id),
                    Settle::Release => releases.push(id),
                    Settle::Keep => {}
                }
            }
            ack_all(topic, group, &acks)?;
            nack_all(topic, group, &nacks, false)?;
            nack_all(topic, group, &releases, true)?;
        }
    }

    fn ack_all(topic: &DurableTopic, group: &str, ids: &[DeliveryId]) -> Result<(), String> {
        if ids.is_empty() {
            return Ok(());
        }
        let results = topic.ack_batch(group, ids).map_err(|e| e.to_string())?;
        let mut lines = String::new();
        for (id, result) in ids.iter().zip(results) {
            // Nobody else settles this consumer's deliveries, and there are no leases.
            result.map_err(|refused| format!("own delivery refused: {refused}"))?;
            lines.push_str(&format!("ack {group} {} {}\n", id.offset, id.attempt));
        }
        confirm(&lines);
        Ok(())
    }

    fn nack_all(
        topic: &DurableTopic,
        group: &str,
        ids: &[DeliveryId],
        release: bool,
    ) -> Result<(), String> {
        if ids.is_empty() {
            return Ok(());
        }
        let kind = if release {
            NackKind::Release
        } else {
            NackKind::Nack
        };
        let results = topic
            .nack_batch(group, ids, &NackOptions::new(kind))
            .map_err(|e| e.to_string())?;
        let mut lines = String::new();
        for (&id, result) in ids.iter().zip(results) {
            let outcome = result.map_err(|refused| format!("own delivery refused: {refused}"))?;
            lines.push_str(&nack_line(group, id, release, outcome));
        }
        confirm(&lines);
        Ok(())
    }

    fn single_consumer(topic: &DurableTopic, mut rng: Rng) -> Result<(), String> {
        let group = WIDE.0;
        loop {
            let polled = topic.poll_as(group, SINGLE_CONSUMER);
            let Some(delivery) = polled.map_err(|e| e.to_string())? else {
                idle();
                continue;
            };
            let id = delivery.id();
            confirm(&poll_line(group, SINGLE_CONSUMER, id));
            settle_one(topic, group, id, choose(&mut rng))?;
        }
    }

    fn settle_one(
        topic: &DurableTopic,
        group: &str,
        id: DeliveryId,
        settle: Settle,
    ) -> Result<(), String> {
        let line = match settle {
            Settle::Ack => {
                topic.ack(group, id).map_err(|e| e.to_string())?;
                format!("ack {group} {} {}\n", id.offset, id.attempt)
            }
            Settle::Nack => {
                let outcome = topic.nack(group, id).map_err(|e| e.to_string())?;
                nack_line(group, id, false, outcome)
            }
            Settle::Release => {
                let release = NackOptions::new(NackKind::Release);
                let outcome = topic
                    .nack_with(group, id, release)
                    .map_err(|e| e.to_string())?;
                nack_line(group, id, true, outcome)
            }
            Settle::Keep => String::new(),
        };
        confirm(&line);
        Ok(())
    }

    fn plain_consumer(topic: &DurableTopic, mut rng: Rng) -> Result<(), String> {
        let group = PLAIN.0;
        loop {
            let Some(delivery) = topic.poll(group).map_err(|e| e.to_string())? else {
                idle();
                continue;
            };
            let id = delivery.id();
            confirm(&poll_line(group, "-", id));
            let settle = match rng.below(100) {
                0..=64 => Settle::Ack,
                65..=89 => Settle::Nack,
                _ => Settle::Keep,
            };
            settle_one(topic, group, id, settle)?;
        }
    }
}
