//! The `leases` child of `tests/store_crashloop_leases.rs`: leases that run out and are
//! redelivered to another consumer, touch, nacks with a delay or the group's backoff,
//! release, reject, redrive and purge on topic `t`, all at once, on a clock the child
//! moves itself.
//!
//! # Time
//!
//! The store reads a [`ManualClock`](mailroom_store::clock::ManualClock) that only the
//! clock thread moves, by `STEP_MS` a tick. Every other thread makes each store call, and
//! prints its lines, while holding the read side of one lock; the clock thread moves the
//! clock and prints `tick <ms>` while holding the write side. So every line after
//! `tick T` (and before the next tick) is about a call made at exactly `T`, and a call cut
//! short by the kill was made at the time of the last tick printed. The parent checks
//! leases, delays and dead-letter times exactly, with no guessing about when something
//! happened.
//!
//! # Lines
//!
//! ```text
//! tick <ms>                                   the clock now reads <ms>
//! pub <offset> <payload>                      publish confirmed
//! poll <group> <consumer> <offset> <attempt>  delivery returned (again, if it was its own)
//! touch <group> <offset> <attempt>            lease extended
//! ack <group> <offset> <attempt>              ack confirmed
//! nack <group> <offset> <attempt> <delay|-> retry|dead
//! release <group> <offset> <attempt> <delay|->
//! reject <group> <offset> <attempt>           dead-lettered at once
//! refused <group> <offset> <attempt>          an ack, nack, release, reject or touch was
//!                                             refused: not owned (its lease had run out)
//! redrive <group> <offset> <attempts>         that dead letter went back to the group
//! purge <group> <offset> <attempts>           that dead letter was deleted
//! ```
//!
//! A thread prints a call's lines before it starts its next call, so at the kill each
//! thread has at most one call whose lines are missing.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use mailroom::group::{Backoff, DeliveryId, GroupConfig, NackKind, NackOptions};
use mailroom::topic::{Nack, StartPosition, TopicError};
use mailroom_store::clock::{Clock, ManualClock};
use mailroom_store::{DurableTopic, Store, StoreError, StoreOptions};
use parking_lot::RwLock;

use super::{confirm, options, Rng};

/// Store milliseconds per clock tick.
const STEP_MS: u64 = 10;
/// Real time between two ticks. Pacing only: no check depends on it.
const TICK_PAUSE: Duration = Duration::from_millis(2);
/// How long a thread with nothing to do waits before it asks again. Pacing only.
const IDLE: Duration = Duration::from_millis(1);

/// One group of the child, as it creates it.
struct GroupSpec {
    name: &'static str,
    max_attempts: u32,
    max_in_flight: u32,
    lease_ms: u64,
    backoff: Backoff,
}

/// The wide group: leases of 6 ticks, a fixed backoff, 4 in flight.
const WIDE: GroupSpec = GroupSpec {
    name: "gl",
    max_attempts: 3,
    max_in_flight: 4,
    lease_ms: 60,
    backoff: Backoff::Fixed { delay_ms: 20 },
};
/// The ordered group: one in flight, exponential backoff.
const ORDERED: GroupSpec = GroupSpec {
    name: "gd",
    max_attempts: 2,
    max_in_flight: 1,
    lease_ms: 40,
    backoff: Backoff::Exponential {
        base_ms: 10,
        cap_ms: 40,
    },
};
/// The delays a nack may carry (`None`: the group's backoff).
const NACK_DELAYS_MS: [Option<u64>; 3] = [None, Some(0), Some(30)];
/// The delays a release may carry (`None`: at once).
const RELEASE_DELAYS_MS: [Option<u64>; 2] = [None, Some(30)];
/// The most messages in one publish batch.
const PUBLISH_BATCH_MAX: u64 = 4;
/// The most deliveries one batch poll asks for.
const POLL_BATCH_MAX: u64 = 3;
/// The publisher waits while a group has more unfinished messages than this, so the
/// parent's probe of the state stays small.
const BACKLOG_MAX: u64 = 24;
/// How many touches in a row a consumer may make on one delivery.
const TOUCHES_MAX: u32 = 3;

/// What the threads share: the topic, the clock and the lock that pins it.
struct World {
    topic: DurableTopic,
    clock: Arc<ManualClock>,
    time: RwLock<()>,
}

impl World {
    /// Runs `call` (store calls) at one clock reading, and prints the lines it returns
    /// before the clock can move.
    fn at_one_time<R>(
        &self,
        call: impl FnOnce() -> Result<(R, String), String>,
    ) -> Result<R, String> {
        let _pinned = self.time.read();
        let (result, lines) = call()?;
        confirm(&lines);
        Ok(result)
    }
}

/// Opens the store with a clock reading `start_ms`, creates what is missing and runs the
/// threads until killed.
pub(super) fn run(dir: &str, seed: u64, start_ms: u64) -> Result<(), StoreError> {
    // A panic in any thread ends the process, so the parent sees it (a scoped thread's
    // panic would otherwise surface only when every thread ends, which is never).
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        std::process::exit(2);
    }));
    let clock = Arc::new(ManualClock::new(start_ms));
    let store_clock: Arc<dyn Clock> = clock.clone();
    let store = Store::open(
        dir,
        StoreOptions {
            clock: store_clock,
            ..options()
        },
    )?;
    store.create_topic("t")?;
    let topic = store.topic("t")?;
    for spec in [&WIDE, &ORDERED] {
        let config = GroupConfig::new(spec.max_attempts)
            .with_max_in_flight(spec.max_in_flight)
            .with_lease_ms(spec.lease_ms)
            .with_backoff(spec.backoff);
        match topic.create_group_with(spec.name, StartPosition::Earliest, config) {
            Ok(()) | Err(StoreError::Topic(TopicError::GroupExists { .. })) => {}
            Err(error) => return Err(error),
        }
    }
    let world = World {
        topic,
        clock,
        time: RwLock::new(()),
    };
    std::thread::scope(|scope| {
        let world = &world;
        scope.spawn(move || guard(ticker(world)));
        scope.spawn(move || guard(publisher(world, thread_rng(seed, 0))));
        let consumers = [
            (&WIDE, "c0", false),
            (&WIDE, "c1", false),
            (&WIDE, "c2", true),
            (&ORDERED, "d0", false),
        ];
        for (index, (spec, name, batch)) in consumers.into_iter().enumerate() {
            let rng = thread_rng(seed, 1 + index as u64);
            scope.spawn(move || guard(consumer(world, spec, name, batch, rng)));
        }
        scope.spawn(move || guard(redriver(world, thread_rng(seed, 9))));
    });
    Ok(())
}

fn thread_rng(seed: u64, thread: u64) -> Rng {
    Rng((seed ^ thread.wrapping_mul(0xa076_1d64_78bd_642f)).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
}

/// Ends the whole process on a thread's error (see `exit_on_error`).
fn guard(result: Result<(), String>) {
    super::exit_on_error("leases", result);
}

fn ticker(world: &World) -> Result<(), String> {
    loop {
        std::thread::sleep(TICK_PAUSE);
        let _moving = world.time.write();
        world.clock.advance_ms(STEP_MS);
        confirm(&format!("tick {}\n", world.clock.now_ms()));
    }
}

fn publisher(world: &World, mut rng: Rng) -> Result<(), String> {
    let topic = &world.topic;
    let mut sequence = 0u64;
    loop {
        let count = 1 + rng.below(PUBLISH_BATCH_MAX);
        let published = world.at_one_time(|| {
            // Reading the positions may write due lease expiries, so it is pinned too.
            let slowest = [&WIDE, &ORDERED]
                .iter()
                .map(|spec| topic.position(spec.name))
                .try_fold(u64::MAX, |low, position| position.map(|p| low.min(p)))
                .map_err(|error| error.to_string())?;
            if topic.len() - slowest > BACKLOG_MAX {
                return Ok((false, String::new()));
            }
            let payloads: Vec<Bytes> = (sequence..sequence + count)
                .map(|n| Bytes::from(format!("p{n}-{}", rng.below(1 << 20))))
                .collect();
            let offsets = topic.publish_batch(&payloads).map_err(|e| e.to_string())?;
            let mut lines = String::new();
            for (offset, payload) in offsets.zip(&payloads) {
                let payload = std::str::from_utf8(payload).expect("ASCII payload");
                lines.push_str(&format!("pub {offset} {payload}\n"));
            }
            Ok((true, lines))
        })?;
        if published {
            sequence += count;
        } else {
            std::thread::sleep(IDLE);
        }
    }
}

/// A consumer of `spec`'s group named `name`: polls one (or, with `batch`, a few)
/// deliveries at a time and deals with each before it polls again.
fn consumer(
    world: &World,
    spec: &GroupSpec,
    name: &str,
    batch: bool,
    mut rng: Rng,
) -> Result<(), String> {
    let group = spec.name;
    loop {
        let max = if batch {
            1 + rng.below(POLL_BATCH_MAX)
        } else {
            1
        } as usize;
        let ids = world.at_one_time(|| {
            let polled = if batch {
                world.topic.poll_batch(group, Some(name), max)
            } else {
                world
                    .topic
                    .poll_as(group, name)
                    .map(|one| one.into_iter().collect())
            };
            let ids: Vec<DeliveryId> = polled
                .map_err(|e| e.to_string())?
                .iter()
                .map(|delivery| delivery.id())
                .collect();
            let lines = ids
                .iter()
                .map(|id| format!("poll {group} {name} {} {}\n", id.offset, id.attempt))
                .collect();
            Ok((ids, lines))
        })?;
        if ids.is_empty() {
            std::thread::sleep(IDLE);
        }
        for id in ids {
            handle(world, spec, id, &mut rng)?;
        }
    }
}

/// What a consumer does with one delivery it owns.
enum Settle {
    Ack,
    Nack(Option<u64>),
    Release(Option<u64>),
    Reject,
    /// Extend the lease, wait a little, then choose again.
    Touch,
    /// Do nothing until the lease has run out, then ack (which must be refused).
    Forget,
}

fn choose(rng: &mut Rng, touches: u32) -> Settle {
    let pick =
        |rng: &mut Rng, delays: &[Option<u64>]| delays[rng.below(delays.len() as u64) as usize];
    match rng.below(100) {
        0..=29 => Settle::Ack,
        30..=49 => Settle::Nack(pick(rng, &NACK_DELAYS_MS)),
        50..=59 => Settle::Release(pick(rng, &RELEASE_DELAYS_MS)),
        60..=67 => Settle::Reject,
        68..=81 if touches < TOUCHES_MAX => Settle::Touch,
        68..=81 => Settle::Ack,
        _ => Settle::Forget,
    }
}

fn handle(world: &World, spec: &GroupSpec, id: DeliveryId, rng: &mut Rng) -> Result<(), String> {
    let mut touches = 0;
    loop {
        let settle = choose(rng, touches);
        match settle {
            Settle::Touch => {
                touches += 1;
                // Wait up to a little over a lease, so some touches come late and are refused.
                let target = world.clock.now_ms() + rng.below(spec.lease_ms + STEP_MS);
                wait_until(world, target);
            }
            Settle::Forget => wait_until(world, world.clock.now_ms() + spec.lease_ms + STEP_MS),
            _ => {}
        }
        let owned = world.at_one_time(|| settle_now(&world.topic, spec.name, id, &settle))?;
        if !owned || !matches!(settle, Settle::Touch) {
            return Ok(());
        }
    }
}

fn wait_until(world: &World, target_ms: u64) {
    while world.clock.now_ms() < target_ms {
        std::thread::sleep(IDLE);
    }
}

/// Makes one settling call; returns whether the delivery was still owned, and its line.
fn settle_now(
    topic: &DurableTopic,
    group: &str,
    id: DeliveryId,
    settle: &Settle,
) -> Result<(bool, String), String> {
    let at = format!("{group} {} {}", id.offset, id.attempt);
    let word = |delay: &Option<u64>| delay.map_or("-".to_owned(), |d| d.to_string());
    let with_delay = |options: NackOptions, delay: &Option<u64>| match delay {
        Some(delay) => options.with_delay_ms(*delay),
        None => options,
    };
    let result = match settle {
        Settle::Ack | Settle::Forget => topic.ack(group, id).map(|()| format!("ack {at}\n")),
        Settle::Touch => topic.touch(group, id).map(|()| format!("touch {at}\n")),
        Settle::Nack(delay) => {
            let options = with_delay(
                NackOptions::new(NackKind::Nack).with_reason("failed"),
                delay,
            );
            topic.nack_with(group, id, options).map(|outcome| {
                let outcome = if outcome == Nack::Retry {
                    "retry"
                } else {
                    "dead"
                };
                format!("nack {at} {} {outcome}\n", word(delay))
            })
        }
        Settle::Release(delay) => {
            let options = with_delay(NackOptions::new(NackKind::Release), delay);
            topic
                .nack_with(group, id, options)
                .and_then(|outcome| match outcome {
                    Nack::Retry => Ok(format!("release {at} {}\n", word(delay))),
                    Nack::DeadLettered => Err(StoreError::Topic(TopicError::InvalidArgument(
                        mailroom::group::ArgumentError::Unsupported {
                            reason: "a release dead-lettered",
                        },
                    ))),
                })
        }
        Settle::Reject => {
            let options = NackOptions::new(NackKind::Reject).with_reason("rejected");
            topic
                .nack_with(group, id, options)
                .and_then(|outcome| match outcome {
                    Nack::DeadLettered => Ok(format!("reject {at}\n")),
                    Nack::Retry => Err(StoreError::Topic(TopicError::InvalidArgument(
                        mailroom::group::ArgumentError::Unsupported {
                            reason: "a reject did not dead-letter",
                        },
                    ))),
                })
        }
    };
    match result {
        Ok(line) => Ok((true, line)),
        Err(StoreError::Topic(TopicError::NotOwned { .. })) => {
            Ok((false, format!("refused {at}\n")))
        }
        Err(error) => Err(format!("{at}: {error}")),
    }
}

/// Now and then takes one dead letter of a group and redrives or purges it. Nobody else
/// removes dead letters, so the one it saw must still be there.
fn redriver(world: &World, mut rng: Rng) -> Result<(), String> {
    let topic = &world.topic;
    loop {
        std::thread::sleep(TICK_PAUSE);
        let spec = if rng.below(2) == 0 { &WIDE } else { &ORDERED };
        let (pick, redrive) = (rng.below(1 << 16), rng.below(100) < 70);
        world.at_one_time(|| {
            // This read may itself expire a lease on its last failure and read back the
            // dead letter that makes (`tests/store_expiry_reads.rs`).
            let dead = topic.dead_letters(spec.name).map_err(|e| e.to_string())?;
            if dead.is_empty() {
                return Ok(((), String::new()));
            }
            let chosen = &dead[pick as usize % dead.len()];
            let (offset, attempts) = (chosen.offset, chosen.attempts);
            let range = offset..offset + 1;
            let (taken, word) = if redrive {
                (topic.redrive(spec.name, range), "redrive")
            } else {
                (topic.purge(spec.name, range), "purge")
            };
            match taken.map_err(|e| e.to_string())? {
                1 => Ok(((), format!("{word} {} {offset} {attempts}\n", spec.name))),
                other => Err(format!("{word} of dead letter {offset} took {other}")),
            }
        })?;
    }
}
