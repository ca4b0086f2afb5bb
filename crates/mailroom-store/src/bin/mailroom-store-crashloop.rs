//! The child process of the kill -9 crash test (`tests/store_crashloop.rs`).
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

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (Some(dir), Some(Ok(seed))) = (args.get(1), args.get(2).map(|s| s.parse::<u64>())) else {
        eprintln!("usage: mailroom-store-crashloop <dir> <seed>");
        return ExitCode::from(2);
    };
    match run(dir, seed) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("crashloop child: {error}");
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
