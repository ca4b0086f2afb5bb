//! Model test for the group settings: `Topic` (with a `ManualClock`) against a reference
//! model written here from the rules in docs/semantics.md (it does not use
//! `mailroom::group`), driven by random publishes, polls by several consumers, acks,
//! nacks of every kind with delays and reasons, touches, clock advances, redrives and
//! purges over groups with leases, backoff and `max_in_flight` > 1, and batch polls,
//! acks and nacks (which the model performs as the single operations, one after
//! another), seeks and pauses. Every result and the whole observable state of every
//! group are compared after every step, and no `(offset, attempt)` may be handed out
//! twice by one group.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::sync::Arc;

use mailroom::clock::ManualClock;
use mailroom::group::NotOwned;
use mailroom::group::{GroupConfig, GroupCounters, NackKind, NackOptions, Pause};
use mailroom::topic::{
    DeadLetterInfo, Delivery, DeliveryId, GroupInfo, Nack, StartPosition, Topic, TopicError,
    BATCH_DELIVERIES_MAX,
};
use mailroom_testkit::model::backoff_ms;
use mailroom_testkit::strategy::{
    group_config, nack_delay_ms, nack_kind, nack_reason, offset_range, pause_ms, seek_target,
    CONSUMERS,
};
use proptest::prelude::*;

const NAMES: [&str; 3] = ["a", "b", "ghost"];

#[derive(Debug, Clone)]
enum Pick {
    /// The last delivery this consumer got from this group.
    Last(usize),
    /// Any delivery seen so far.
    Seen(usize),
    MadeUp(u64, u32),
}

/// What a batch ack or nack names.
#[derive(Debug, Clone)]
enum BatchPick {
    One(Pick),
    /// Every delivery of the last batch this consumer polled from this group.
    LastBatch(usize),
}

#[derive(Debug, Clone)]
enum Op {
    Publish(u32),
    Create(usize, GroupConfig),
    Poll(usize, usize),
    Ack(usize, Pick),
    Nack(usize, Pick, NackKind, Option<u64>, Option<String>),
    Touch(usize, Pick),
    Advance(u64),
    Redrive(usize, Range<u64>),
    Purge(usize, Range<u64>),
    PollBatch(usize, usize, usize),
    AckBatch(usize, Vec<BatchPick>),
    NackBatch(usize, Vec<BatchPick>, NackKind, Option<u64>, Option<String>),
    Seek(usize, StartPosition),
    /// Group, and the pause's length from now (`None`: until a resume).
    Pause(usize, Option<u64>),
    Resume(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let name = 0..NAMES.len();
    let pick = prop_oneof![
        4 => (0..CONSUMERS.len()).prop_map(Pick::Last),
        2 => any::<usize>().prop_map(Pick::Seen),
        1 => (0..8u64, 0..6u32).prop_map(|(o, a)| Pick::MadeUp(o, a)),
    ];
    let kind = nack_kind();
    let range = offset_range(0..8, 0..10);
    let max = prop_oneof![
        12 => 1..4usize,
        1 => Just(0usize),
        1 => Just(BATCH_DELIVERIES_MAX),
        1 => Just(BATCH_DELIVERIES_MAX + 1),
    ];
    let batch_pick = prop_oneof![
        3 => pick.clone().prop_map(BatchPick::One),
        2 => (0..CONSUMERS.len()).prop_map(BatchPick::LastBatch),
    ];
    let picks = proptest::collection::vec(batch_pick, 0..4);
    prop_oneof![
        3 => any::<u32>().prop_map(Op::Publish),
        1 => (0..2usize, group_config()).prop_map(|(n, c)| Op::Create(n, c)),
        6 => (name.clone(), 0..CONSUMERS.len()).prop_map(|(n, c)| Op::Poll(n, c)),
        4 => (name.clone(), pick.clone()).prop_map(|(n, p)| Op::Ack(n, p)),
        4 => (name.clone(), pick.clone(), kind.clone(), nack_delay_ms(), nack_reason())
            .prop_map(|(n, p, k, d, r)| Op::Nack(n, p, k, d, r)),
        1 => (name.clone(), pick.clone()).prop_map(|(n, p)| Op::Touch(n, p)),
        3 => (0..70u64).prop_map(Op::Advance),
        1 => (name.clone(), range.clone()).prop_map(|(n, r)| Op::Redrive(n, r)),
        1 => (name.clone(), range).prop_map(|(n, r)| Op::Purge(n, r)),
        4 => (name.clone(), 0..CONSUMERS.len(), max).prop_map(|(n, c, m)| Op::PollBatch(n, c, m)),
        2 => (name.clone(), picks.clone()).prop_map(|(n, p)| Op::AckBatch(n, p)),
        2 => (name, picks, kind.clone(), nack_delay_ms(), nack_reason())
            .prop_map(|(n, p, k, d, r)| Op::NackBatch(n, p, k, d, r)),
    ]
}

/// [`op`] with seeks, pauses and resumes mixed in. A strategy of its own, so that the
/// saved regression seeds of [`op`] keep reproducing their cases.
fn op_with_moves() -> impl Strategy<Value = Op> {
    let name = 0..NAMES.len();
    prop_oneof![
        12 => op(),
        1 => (name.clone(), seek_target(10)).prop_map(|(n, t)| Op::Seek(n, t)),
        1 => (name.clone(), pause_ms()).prop_map(|(n, d)| Op::Pause(n, d)),
        1 => name.prop_map(Op::Resume),
    ]
}

#[derive(Debug, Clone, PartialEq)]
enum Phase {
    Ready(u64),
    Owned(Option<String>, Option<u64>),
    Done,
}

#[derive(Debug, Clone)]
struct MSlot {
    attempt: u32,
    failures: u32,
    phase: Phase,
}

#[derive(Debug, Clone)]
struct MGroup {
    config: GroupConfig,
    position: u64,
    /// Every delivered, unfinished slot: redriven ones below `position`, the window
    /// (with finished ones marked Done) from `position` on.
    slots: BTreeMap<u64, MSlot>,
    dead: Vec<(u64, u32, Option<String>, u64)>,
    counters: GroupCounters,
    /// Every offset below this was delivered (or lay below the start) at some time.
    frontier: u64,
    /// The highest attempt number handed out.
    high: u32,
    /// After a seek back: offsets below `.0` come back after attempt `.1`.
    rewound: (u64, u32),
    pause: Option<Option<u64>>,
    /// Every delivery ever made, which must never repeat.
    handed: BTreeSet<DeliveryId>,
}

#[derive(Debug, PartialEq, Eq)]
enum Refused {
    Invalid,
    Unknown,
    Exists,
    NotOwned(DeliveryId, Option<DeliveryId>),
}

fn refused(error: TopicError) -> Refused {
    match error {
        TopicError::InvalidArgument { .. } => Refused::Invalid,
        TopicError::UnknownGroup { .. } => Refused::Unknown,
        TopicError::GroupExists { .. } => Refused::Exists,
        TopicError::NotOwned { source, .. } => Refused::NotOwned(source.requested, source.current),
        other => panic!("unexpected error {other:?}"),
    }
}

impl MGroup {
    fn in_flight(&self) -> Vec<DeliveryId> {
        self.slots
            .iter()
            .filter(|(_, s)| matches!(s.phase, Phase::Owned(..)))
            .map(|(&offset, s)| DeliveryId {
                offset,
                attempt: s.attempt,
            })
            .collect()
    }

    fn finish(&mut self, offset: u64) {
        if offset < self.position {
            self.slots.remove(&offset);
        } else {
            self.slots.get_mut(&offset).unwrap().phase = Phase::Done;
        }
        while self
            .slots
            .get(&self.position)
            .is_some_and(|s| s.phase == Phase::Done)
        {
            self.slots.remove(&self.position);
            self.position += 1;
        }
    }

    fn kill(&mut self, offset: u64, reason: Option<String>, at: u64) {
        let attempt = self.slots[&offset].attempt;
        self.dead.push((offset, attempt, reason, at));
        self.finish(offset);
    }

    /// Expires every lease that ran out by `now`, lowest offset first.
    fn expire(&mut self, now: u64) {
        loop {
            let due = self.slots.iter().find_map(|(&offset, s)| match s.phase {
                Phase::Owned(_, Some(deadline)) if deadline <= now => Some((offset, deadline)),
                _ => None,
            });
            let Some((offset, deadline)) = due else {
                return;
            };
            self.counters.expired_leases += 1;
            let slot = self.slots.get_mut(&offset).unwrap();
            slot.failures += 1;
            if slot.failures >= self.config.max_attempts {
                self.kill(offset, Some("lease expired".into()), deadline);
            } else {
                let failures = slot.failures;
                slot.phase = Phase::Ready(deadline + backoff_ms(self.config.backoff, failures));
            }
        }
    }

    /// The deliveries `consumer` has in flight, by offset.
    fn owned(&self, consumer: Option<&str>) -> Vec<DeliveryId> {
        self.slots
            .iter()
            .filter(
                |(_, s)| matches!(&s.phase, Phase::Owned(owner, _) if owner.as_deref() == consumer),
            )
            .map(|(&offset, s)| DeliveryId {
                offset,
                attempt: s.attempt,
            })
            .collect()
    }

    fn poll(&mut self, log_len: u64, now: u64, consumer: Option<&str>) -> Option<DeliveryId> {
        match self.owned(consumer).first() {
            Some(&own) => Some(own),
            None => self.poll_new(log_len, now, consumer),
        }
    }

    /// The documented batch order: the consumer's own deliveries, then new ones one by
    /// one until `max` or none is left.
    fn poll_batch(
        &mut self,
        log_len: u64,
        now: u64,
        consumer: Option<&str>,
        max: usize,
    ) -> Vec<DeliveryId> {
        let mut batch: Vec<DeliveryId> = self.owned(consumer).into_iter().take(max).collect();
        while batch.len() < max {
            match self.poll_new(log_len, now, consumer) {
                Some(id) => batch.push(id),
                None => break,
            }
        }
        batch
    }

    /// A poll for a new delivery, whatever `consumer` owns already.
    fn poll_new(&mut self, log_len: u64, now: u64, consumer: Option<&str>) -> Option<DeliveryId> {
        if self.pause_at(now).is_some() {
            return None;
        }
        if self.in_flight().len() as u32 >= self.config.max_in_flight {
            return None;
        }
        let mut chosen = None;
        for (&offset, s) in &self.slots {
            match s.phase {
                Phase::Ready(at) if at <= now => {
                    chosen = Some(offset);
                    break;
                }
                Phase::Ready(_) => return None,
                _ => {}
            }
        }
        let fresh = self.position + self.slots.range(self.position..).count() as u64;
        let offset = match chosen {
            Some(offset) => offset,
            None if fresh < log_len && fresh - self.position < self.config.max_in_flight as u64 => {
                let (below, floor) = self.rewound;
                self.slots.insert(
                    fresh,
                    MSlot {
                        attempt: if fresh < below { floor } else { 0 },
                        failures: 0,
                        phase: Phase::Ready(0),
                    },
                );
                fresh
            }
            None => return None,
        };
        let lease = self.config.lease_ms.map(|l| now + l);
        let slot = self.slots.get_mut(&offset).unwrap();
        if slot.attempt > 0 {
            self.counters.redeliveries += 1;
        }
        slot.attempt += 1;
        slot.phase = Phase::Owned(consumer.map(str::to_owned), lease);
        self.high = self.high.max(slot.attempt);
        self.frontier = self.frontier.max(offset + 1);
        let id = DeliveryId {
            offset,
            attempt: slot.attempt,
        };
        assert!(self.handed.insert(id), "{id} handed out twice");
        Some(id)
    }

    fn check(&self, id: DeliveryId) -> Result<(), Refused> {
        match self.slots.get(&id.offset) {
            Some(s) if s.attempt == id.attempt && matches!(s.phase, Phase::Owned(..)) => Ok(()),
            Some(s) if matches!(s.phase, Phase::Owned(..)) => Err(Refused::NotOwned(
                id,
                Some(DeliveryId {
                    offset: id.offset,
                    attempt: s.attempt,
                }),
            )),
            _ => Err(Refused::NotOwned(id, self.in_flight().first().copied())),
        }
    }

    fn nack(
        &mut self,
        id: DeliveryId,
        kind: NackKind,
        delay: Option<u64>,
        reason: Option<String>,
        now: u64,
    ) -> Result<Nack, Refused> {
        self.check(id)?;
        let config = self.config;
        let slot = self.slots.get_mut(&id.offset).unwrap();
        let ready_at = match kind {
            NackKind::Reject => None,
            NackKind::Release => {
                self.counters.releases += 1;
                Some(now + delay.unwrap_or(0))
            }
            NackKind::Nack => {
                slot.failures += 1;
                (slot.failures < config.max_attempts).then(|| {
                    now + delay.unwrap_or_else(|| backoff_ms(config.backoff, slot.failures))
                })
            }
        };
        match ready_at {
            Some(at) => {
                slot.phase = Phase::Ready(at);
                Ok(Nack::Retry)
            }
            None => {
                self.kill(id.offset, reason, now);
                Ok(Nack::DeadLettered)
            }
        }
    }

    fn take_dead(&mut self, range: &Range<u64>) -> Vec<(u64, u32, Option<String>, u64)> {
        let (taken, kept) = self.dead.drain(..).partition(|d| range.contains(&d.0));
        self.dead = kept;
        taken
    }

    fn info(&self, name: &str, log_len: u64, now: u64) -> GroupInfo {
        GroupInfo {
            name: name.to_owned(),
            position: self.position,
            attempt: self.slots.get(&self.position).map_or(0, |s| s.attempt),
            in_flight: self.in_flight().first().copied(),
            max_attempts: self.config.max_attempts,
            lag: log_len - self.position,
            dead_letters: self.dead.len() as u64,
            pause: self.pause_at(now),
        }
    }

    fn pause_at(&self, now: u64) -> Option<Pause> {
        match self.pause {
            Some(until_ms) if until_ms.is_none_or(|until| now < until) => Some(Pause { until_ms }),
            _ => None,
        }
    }

    /// The documented seek: everything unfinished is dropped; a seek below the frontier
    /// makes the offsets below it come back after the highest attempt used.
    fn seek(&mut self, position: u64) {
        if position < self.frontier {
            self.rewound = (self.frontier, self.high);
        }
        self.slots.clear();
        self.position = position;
    }

    /// The documented redrive of one dead letter: back after the highest attempt used if
    /// a seek may have delivered it again, and only where nothing unfinished holds it.
    fn revive(&mut self, offset: u64, attempts: u32) {
        self.counters.redrives += 1;
        let attempt = if offset < self.rewound.0 {
            attempts.max(self.high)
        } else {
            attempts
        };
        let revived = MSlot {
            attempt,
            failures: 0,
            phase: Phase::Ready(0),
        };
        match self.slots.get_mut(&offset) {
            None if offset < self.position => {
                self.slots.insert(offset, revived);
            }
            Some(slot) if offset >= self.position && slot.phase == Phase::Done => *slot = revived,
            _ => {}
        }
    }
}

struct Harness {
    clock: Arc<ManualClock>,
    topic: Topic<u32>,
    log: Vec<u32>,
    groups: BTreeMap<String, MGroup>,
    last: BTreeMap<(usize, usize), DeliveryId>,
    last_batch: BTreeMap<(usize, usize), Vec<DeliveryId>>,
    seen: Vec<DeliveryId>,
}

impl Harness {
    fn new() -> Harness {
        let clock = Arc::new(ManualClock::new(1_000));
        Harness {
            topic: Topic::with_clock(clock.clone()),
            clock,
            log: Vec::new(),
            groups: BTreeMap::new(),
            last: BTreeMap::new(),
            last_batch: BTreeMap::new(),
            seen: Vec::new(),
        }
    }

    fn now(&self) -> u64 {
        use mailroom::clock::Clock;
        self.clock.now_ms()
    }

    fn pick(&self, name: usize, pick: &Pick) -> DeliveryId {
        match pick {
            Pick::Last(consumer) => {
                self.last
                    .get(&(name, *consumer))
                    .copied()
                    .unwrap_or(DeliveryId {
                        offset: 0,
                        attempt: 1,
                    })
            }
            Pick::Seen(i) if !self.seen.is_empty() => self.seen[i % self.seen.len()],
            Pick::Seen(_) => DeliveryId {
                offset: 0,
                attempt: 0,
            },
            Pick::MadeUp(offset, attempt) => DeliveryId {
                offset: *offset,
                attempt: *attempt,
            },
        }
    }

    fn pick_many(&self, name: usize, picks: &[BatchPick]) -> Vec<DeliveryId> {
        picks
            .iter()
            .flat_map(|pick| match pick {
                BatchPick::One(pick) => vec![self.pick(name, pick)],
                BatchPick::LastBatch(consumer) => self
                    .last_batch
                    .get(&(name, *consumer))
                    .cloned()
                    .unwrap_or_default(),
            })
            .collect()
    }

    /// The model group `name` after expiring its due leases, or `Unknown`.
    fn group(&mut self, name: &str) -> Result<&mut MGroup, Refused> {
        let now = self.now();
        let group = self.groups.get_mut(name).ok_or(Refused::Unknown)?;
        group.expire(now);
        Ok(group)
    }

    fn step(&mut self, op: &Op) {
        let now = self.now();
        match op {
            Op::Publish(message) => {
                assert_eq!(self.topic.publish(*message), self.log.len() as u64);
                self.log.push(*message);
            }
            Op::Create(n, config) => {
                let name = NAMES[*n];
                let expected = if self.groups.contains_key(name) {
                    Err(Refused::Exists)
                } else {
                    let group = MGroup {
                        config: *config,
                        position: 0,
                        slots: BTreeMap::new(),
                        dead: Vec::new(),
                        counters: GroupCounters::default(),
                        frontier: 0,
                        high: 0,
                        rewound: (0, 0),
                        pause: None,
                        handed: BTreeSet::new(),
                    };
                    self.groups.insert(name.to_owned(), group);
                    Ok(())
                };
                let real = self
                    .topic
                    .create_group_with(name, StartPosition::Earliest, *config);
                assert_eq!(real.map_err(refused), expected);
            }
            Op::Poll(n, c) => {
                let name = NAMES[*n];
                let log_len = self.log.len() as u64;
                let expected = self
                    .group(name)
                    .map(|g| g.poll(log_len, now, CONSUMERS[*c]))
                    .map(|id| {
                        id.map(|id| Delivery {
                            offset: id.offset,
                            attempt: id.attempt,
                            message: self.log[id.offset as usize],
                        })
                    });
                let real = match CONSUMERS[*c] {
                    None => self.topic.poll(name),
                    Some(consumer) => self.topic.poll_as(name, consumer),
                };
                let real = real.map_err(refused);
                assert_eq!(real, expected);
                if let Ok(Some(delivery)) = real {
                    self.last.insert((*n, *c), delivery.id());
                    self.seen.push(delivery.id());
                }
            }
            Op::Ack(n, pick) => {
                let name = NAMES[*n];
                let id = self.pick(*n, pick);
                let expected = self.group(name).and_then(|g| {
                    g.check(id)?;
                    g.finish(id.offset);
                    Ok(())
                });
                assert_eq!(self.topic.ack(name, id).map_err(refused), expected);
            }
            Op::Nack(n, pick, kind, delay, reason) => {
                let name = NAMES[*n];
                let id = self.pick(*n, pick);
                let expected = self
                    .group(name)
                    .and_then(|g| g.nack(id, *kind, *delay, reason.clone(), now));
                let options = NackOptions {
                    kind: *kind,
                    delay_ms: *delay,
                    reason: reason.clone(),
                };
                assert_eq!(
                    self.topic.nack_with(name, id, options).map_err(refused),
                    expected
                );
            }
            Op::Touch(n, pick) => {
                let name = NAMES[*n];
                let id = self.pick(*n, pick);
                let expected = self.group(name).and_then(|g| {
                    g.check(id)?;
                    let lease = g.config.lease_ms;
                    if let Phase::Owned(_, deadline) =
                        &mut g.slots.get_mut(&id.offset).unwrap().phase
                    {
                        *deadline = lease.map(|l| now + l);
                    }
                    Ok(())
                });
                assert_eq!(self.topic.touch(name, id).map_err(refused), expected);
            }
            Op::Advance(ms) => self.clock.advance_ms(*ms),
            Op::PollBatch(n, c, max) => self.poll_batch(*n, *c, *max),
            Op::AckBatch(n, picks) => {
                let name = NAMES[*n];
                let ids = self.pick_many(*n, picks);
                let expected = self.group(name).map(|g| {
                    ids.iter()
                        .map(|&id| {
                            g.check(id)?;
                            g.finish(id.offset);
                            Ok(())
                        })
                        .collect::<Vec<_>>()
                });
                let real = self.topic.ack_batch(name, &ids);
                assert_eq!(batch_results(real), expected);
            }
            Op::NackBatch(n, picks, kind, delay, reason) => {
                let name = NAMES[*n];
                let ids = self.pick_many(*n, picks);
                let expected = self.group(name).map(|g| {
                    ids.iter()
                        .map(|&id| g.nack(id, *kind, *delay, reason.clone(), now))
                        .collect::<Vec<_>>()
                });
                let options = NackOptions {
                    kind: *kind,
                    delay_ms: *delay,
                    reason: reason.clone(),
                };
                let real = self.topic.nack_batch(name, &ids, &options);
                assert_eq!(batch_results(real), expected);
            }
            Op::Redrive(n, range) => {
                let name = NAMES[*n];
                let expected = self.group(name).map(|g| {
                    let taken = g.take_dead(range);
                    for (offset, attempts, _, _) in &taken {
                        g.revive(*offset, *attempts);
                    }
                    taken.len() as u64
                });
                assert_eq!(
                    self.topic.redrive(name, range.clone()).map_err(refused),
                    expected
                );
            }
            Op::Seek(..) | Op::Pause(..) | Op::Resume(_) => self.step_move(op),
            Op::Purge(n, range) => {
                let name = NAMES[*n];
                let expected = self.group(name).map(|g| {
                    let taken = g.take_dead(range).len() as u64;
                    g.counters.purged += taken;
                    taken
                });
                assert_eq!(
                    self.topic.purge(name, range.clone()).map_err(refused),
                    expected
                );
            }
        }
        self.compare_all();
    }

    fn step_move(&mut self, op: &Op) {
        let now = self.now();
        let log_len = self.log.len() as u64;
        match op {
            Op::Seek(n, to) => {
                let name = NAMES[*n];
                let position = match *to {
                    StartPosition::Earliest => Some(0),
                    StartPosition::Latest => Some(log_len),
                    StartPosition::Offset(offset) => (offset <= log_len).then_some(offset),
                };
                let expected = self.group(name).and_then(|g| {
                    let position = position.ok_or(Refused::Invalid)?;
                    g.seek(position);
                    Ok(position)
                });
                assert_eq!(self.topic.seek(name, *to).map_err(refused), expected);
            }
            Op::Pause(n, length) => {
                let name = NAMES[*n];
                let until = length.map(|l| now + l);
                let expected = self.group(name).and_then(|g| match until {
                    Some(until) if until <= now => Err(Refused::Invalid),
                    _ => {
                        g.pause = Some(until);
                        Ok(())
                    }
                });
                assert_eq!(self.topic.pause(name, until).map_err(refused), expected);
            }
            Op::Resume(n) => {
                let name = NAMES[*n];
                let expected = self.group(name).map(|g| g.pause.take().is_some());
                assert_eq!(self.topic.resume(name).map_err(refused), expected);
            }
            _ => unreachable!("step_move of {op:?}"),
        }
    }

    fn poll_batch(&mut self, n: usize, c: usize, max: usize) {
        let (name, consumer) = (NAMES[n], CONSUMERS[c]);
        let log_len = self.log.len() as u64;
        let now = self.now();
        let expected = if max == 0 || max > BATCH_DELIVERIES_MAX {
            Err(Refused::Invalid)
        } else {
            self.group(name)
                .map(|g| g.poll_batch(log_len, now, consumer, max))
        };
        let expected = expected.map(|ids| {
            ids.into_iter()
                .map(|id| Delivery {
                    offset: id.offset,
                    attempt: id.attempt,
                    message: self.log[id.offset as usize],
                })
                .collect::<Vec<_>>()
        });
        let real = self.topic.poll_batch(name, consumer, max).map_err(refused);
        assert_eq!(real, expected);
        if let Ok(batch) = real {
            let ids: Vec<DeliveryId> = batch.iter().map(Delivery::id).collect();
            if let Some(&last) = ids.last() {
                self.last.insert((n, c), last);
            }
            self.seen.extend(&ids);
            self.last_batch.insert((n, c), ids);
        }
    }

    fn compare_all(&mut self) {
        let log_len = self.log.len() as u64;
        let names: Vec<String> = self.groups.keys().cloned().collect();
        for name in names {
            let log = self.log.clone();
            let group = self.group(&name).unwrap().clone();
            assert_eq!(
                self.topic.group_info(&name).unwrap(),
                group.info(&name, log_len, self.now()),
                "group {name}"
            );
            assert_eq!(
                self.topic.in_flight(&name).unwrap(),
                group.in_flight(),
                "group {name}"
            );
            assert_eq!(
                self.topic.group_counters(&name).unwrap(),
                group.counters,
                "group {name}"
            );
            let dead: Vec<DeadLetterInfo<u32>> = group
                .dead
                .iter()
                .map(|(offset, attempts, reason, at_ms)| DeadLetterInfo {
                    offset: *offset,
                    attempts: *attempts,
                    reason: reason.clone(),
                    at_ms: *at_ms,
                    message: log[*offset as usize],
                })
                .collect();
            assert_eq!(
                self.topic.dead_letter_info(&name).unwrap(),
                dead,
                "group {name}"
            );
        }
    }
}

/// A batch's answer in the model's terms.
fn batch_results<T>(
    real: Result<Vec<Result<T, NotOwned>>, TopicError>,
) -> Result<Vec<Result<T, Refused>>, Refused> {
    real.map_err(refused).map(|results| {
        results
            .into_iter()
            .map(|r| r.map_err(|n| Refused::NotOwned(n.requested, n.current)))
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 384, ..ProptestConfig::default() })]

    // Proves the topic follows the reference model of leases, nack kinds, delays,
    // backoff, redrive, purge, max_in_flight and batches step by step.
    #[test]
    fn topic_matches_the_settings_model(ops in proptest::collection::vec(op(), 1..120)) {
        let mut harness = Harness::new();
        for op in &ops {
            harness.step(op);
        }
    }

    // Proves the same with seeks (by offset, to either end, past the end), pauses (timed
    // and until a resume) and resumes mixed in: attempt numbers never repeat.
    #[test]
    fn topic_matches_the_settings_model_with_seeks_and_pauses(
        ops in proptest::collection::vec(op_with_moves(), 1..120),
    ) {
        let mut harness = Harness::new();
        for op in &ops {
            harness.step(op);
        }
    }
}
