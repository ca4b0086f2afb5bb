//! What one step of a simulated workload does: [`Action`], and how it is drawn.

use std::collections::BTreeMap;
use std::ops::Range;

use bytes::Bytes;
use mailroom::group::{Backoff, GroupConfig, NackKind, NackOptions};
use mailroom::topic::DeliveryId;
use mailroom_store::{Limit, TopicRetention};

use crate::rng::Rng;

/// The topic names a workload uses.
pub const TOPICS: [&str; 3] = ["t0", "t1", "t2"];
/// The group names a workload uses in every topic.
pub const GROUPS: [&str; 2] = ["a", "b"];
/// The consumers a workload polls as: the anonymous one and two named ones.
pub const CONSUMERS: [Option<&str>; 3] = [None, Some("x"), Some("y")];

/// One operation on the store, with every argument fixed, so the model can replay it.
/// Topics, groups and consumers are indices into [`TOPICS`], [`GROUPS`], [`CONSUMERS`].
#[derive(Debug, Clone)]
#[allow(missing_docs)] // the variants are named after the store calls they make
pub enum Action {
    CreateTopic(usize),
    DeleteTopic(usize),
    Publish(usize, Bytes),
    PublishBatch(usize, Vec<Bytes>),
    /// Topic, group, settings, and whether it starts at the earliest offset (else latest).
    CreateGroup(usize, usize, GroupConfig, bool),
    DeleteGroup(usize, usize),
    /// Topic, group, consumer.
    Poll(usize, usize, usize),
    Ack(usize, usize, DeliveryId),
    Nack(usize, usize, DeliveryId, NackOptions),
    Touch(usize, usize, DeliveryId),
    /// Topic, group, consumer, max.
    PollBatch(usize, usize, usize, usize),
    AckBatch(usize, usize, Vec<DeliveryId>),
    NackBatch(usize, usize, Vec<DeliveryId>, NackOptions),
    /// Topic, group, acks, consumer, max.
    AckThenPoll(usize, usize, Vec<DeliveryId>, usize, usize),
    Redrive(usize, usize, Range<u64>),
    Purge(usize, usize, Range<u64>),
    SetRetention(usize, TopicRetention),
    /// `Store::enforce_retention` at the simulated now.
    Retention,
    /// `Store::checkpoint`: every topic's groups checkpointed (and their log compacted).
    Checkpoint,
    /// `Store::sync`.
    Sync,
    /// The simulated clock moves on (leases run out, delays end).
    Advance(u64),
}

/// The delivery ids a workload has seen, to name in acks, nacks and touches (a real
/// client names what it was given; a stale or made-up id now and then tests the rules).
#[derive(Debug, Default)]
pub struct Seen {
    /// The last batch (or single delivery) each (topic, group, consumer) was handed.
    last: BTreeMap<(usize, usize, usize), Vec<DeliveryId>>,
}

impl Seen {
    /// Notes what `(topic, group, consumer)` was just handed.
    pub fn handed(&mut self, key: (usize, usize, usize), ids: Vec<DeliveryId>) {
        if !ids.is_empty() {
            self.last.insert(key, ids);
        }
    }

    fn pick(&self, rng: &mut Rng, t: usize, g: usize) -> DeliveryId {
        let c = rng.index(CONSUMERS.len());
        let id = match self.last.get(&(t, g, c)) {
            Some(ids) => ids[rng.index(ids.len())],
            None => DeliveryId {
                offset: rng.below(6),
                attempt: 1,
            },
        };
        if rng.chance(100) {
            // Stale: an earlier attempt.
            DeliveryId {
                attempt: id.attempt.saturating_sub(1),
                ..id
            }
        } else {
            id
        }
    }

    fn picks(&self, rng: &mut Rng, t: usize, g: usize) -> Vec<DeliveryId> {
        (0..rng.below(5)).map(|_| self.pick(rng, t, g)).collect()
    }
}

fn payload(rng: &mut Rng) -> Bytes {
    let len = rng.below(40) as usize;
    Bytes::from((0..len).map(|_| rng.next_u64() as u8).collect::<Vec<u8>>())
}

fn group_config(rng: &mut Rng) -> GroupConfig {
    let backoff = match rng.below(3) {
        0 => None,
        1 => Some(Backoff::Fixed {
            delay_ms: rng.below(60),
        }),
        _ => Some(Backoff::Exponential {
            base_ms: 1 + rng.below(20),
            cap_ms: 20 + rng.below(70),
        }),
    };
    GroupConfig {
        max_attempts: 1 + rng.below(3) as u32,
        lease_ms: rng.chance(700).then(|| 20 + rng.below(100)),
        backoff,
        max_in_flight: 1 + rng.below(3) as u32,
    }
}

fn nack_options(rng: &mut Rng) -> NackOptions {
    NackOptions {
        kind: [NackKind::Nack, NackKind::Release, NackKind::Reject][rng.index(3)],
        delay_ms: rng.chance(400).then(|| rng.below(80)),
        reason: rng.chance(300).then(|| "r".repeat(rng.index(6))),
    }
}

fn limit(rng: &mut Rng, max: u64) -> Limit {
    match rng.below(3) {
        0 => Limit::Default,
        1 => Limit::Unlimited,
        _ => Limit::Max(rng.below(max)),
    }
}

/// Retention settings for a topic. `keep_unconsumed` stays on: the in-memory model has
/// no retention, and with it on no group ever sees a message go (see `docs/simulation.md`).
fn retention(rng: &mut Rng) -> TopicRetention {
    TopicRetention {
        age_ms_max: limit(rng, 400),
        bytes_max: limit(rng, 2048),
        messages_max: limit(rng, 30),
        keep_unconsumed: rng.chance(500).then_some(true),
    }
}

fn range(rng: &mut Rng) -> Range<u64> {
    let start = rng.below(8);
    start..start + rng.below(8)
}

/// Draws the next action. `earliest_allowed` says, per topic, whether a group may start
/// at the earliest offset (only while retention has removed nothing: the model starts
/// such a group at 0).
pub fn draw(rng: &mut Rng, seen: &Seen, earliest_allowed: impl Fn(usize) -> bool) -> Action {
    let t = rng.index(TOPICS.len());
    let g = rng.index(GROUPS.len());
    let c = rng.index(CONSUMERS.len());
    // Weights out of 100.
    match rng.below(100) {
        0..=2 => Action::CreateTopic(t),
        3 => Action::DeleteTopic(t),
        4..=15 => Action::Publish(t, payload(rng)),
        16..=19 => Action::PublishBatch(t, (0..1 + rng.below(4)).map(|_| payload(rng)).collect()),
        20..=23 => Action::CreateGroup(
            t,
            g,
            group_config(rng),
            earliest_allowed(t) && rng.chance(800),
        ),
        24 => Action::DeleteGroup(t, g),
        25..=36 => Action::Poll(t, g, c),
        37..=44 => Action::Ack(t, g, seen.pick(rng, t, g)),
        45..=50 => Action::Nack(t, g, seen.pick(rng, t, g), nack_options(rng)),
        51..=52 => Action::Touch(t, g, seen.pick(rng, t, g)),
        53..=59 => Action::PollBatch(t, g, c, rng.index(6)),
        60..=64 => Action::AckBatch(t, g, seen.picks(rng, t, g)),
        65..=67 => Action::NackBatch(t, g, seen.picks(rng, t, g), nack_options(rng)),
        68..=72 => Action::AckThenPoll(t, g, seen.picks(rng, t, g), c, rng.index(6)),
        73..=74 => Action::Redrive(t, g, range(rng)),
        75 => Action::Purge(t, g, range(rng)),
        76..=77 => Action::SetRetention(t, retention(rng)),
        78..=80 => Action::Retention,
        81..=82 => Action::Checkpoint,
        83 => Action::Sync,
        _ => Action::Advance(rng.below(70)),
    }
}
