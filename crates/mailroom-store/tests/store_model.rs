//! Model test: a durable topic behaves exactly like the in-memory `mailroom::topic::Topic`
//! through random operations, clean restarts and power cuts.

use std::collections::HashMap;

use bytes::Bytes;
use mailroom::topic::{DeliveryId, Topic};
use mailroom_store::storage::SimStorage;
use mailroom_testkit::store::{model_options, rules, RestartableTopic};
use proptest::prelude::*;

const GROUPS: [&str; 3] = ["a", "b", "c"];

#[derive(Debug, Clone)]
enum Op {
    Publish(Vec<u8>),
    PublishBatch(u8),
    Create(usize, u32),
    Delete(usize),
    Poll(usize),
    Ack(usize, Pick),
    Nack(usize, Pick),
    /// Drop the store and reopen the same files.
    Reopen,
    /// Reopen what a power cut at this moment could leave (seeded).
    Crash(u64),
}

/// Which delivery id an ack or nack names.
#[derive(Debug, Clone, Copy)]
enum Pick {
    /// The last delivery this group's poll returned.
    Last,
    /// An earlier attempt at it (stale).
    Stale,
    /// A made-up id.
    MadeUp(u64, u32),
}

fn any_op() -> impl Strategy<Value = Op> {
    let group = 0..GROUPS.len();
    let pick = prop_oneof![
        6 => Just(Pick::Last),
        1 => Just(Pick::Stale),
        1 => (0..6u64, 0..4u32).prop_map(|(offset, attempt)| Pick::MadeUp(offset, attempt)),
    ];
    prop_oneof![
        4 => proptest::collection::vec(any::<u8>(), 0..40).prop_map(Op::Publish),
        1 => (1..4u8).prop_map(Op::PublishBatch),
        2 => (group.clone(), 0..4u32).prop_map(|(g, max)| Op::Create(g, max)),
        1 => group.clone().prop_map(Op::Delete),
        6 => group.clone().prop_map(Op::Poll),
        4 => (group.clone(), pick.clone()).prop_map(|(g, p)| Op::Ack(g, p)),
        4 => (group, pick).prop_map(|(g, p)| Op::Nack(g, p)),
        1 => Just(Op::Reopen),
        1 => any::<u64>().prop_map(Op::Crash),
    ]
}

struct Harness {
    disk: RestartableTopic,
    model: Topic<Bytes>,
    /// Every message published, by offset: the in-memory topic does not read them back.
    published: Vec<Bytes>,
    last: HashMap<usize, DeliveryId>,
}

impl Harness {
    fn new(checkpoint_every: u64) -> Self {
        Harness {
            disk: RestartableTopic::open(SimStorage::new(), model_options(checkpoint_every)),
            model: Topic::new(),
            published: Vec::new(),
            last: HashMap::new(),
        }
    }

    fn pick(&self, group: usize, pick: Pick) -> DeliveryId {
        let last = self.last.get(&group).copied();
        match (pick, last) {
            (Pick::Last, Some(id)) => id,
            (Pick::Stale, Some(id)) if id.attempt > 1 => DeliveryId {
                attempt: id.attempt - 1,
                ..id
            },
            (Pick::Stale, Some(id)) => DeliveryId {
                offset: id.offset.wrapping_sub(1),
                ..id
            },
            (Pick::MadeUp(offset, attempt), _) => DeliveryId { offset, attempt },
            (_, None) => DeliveryId {
                offset: 0,
                attempt: 1,
            },
        }
    }

    fn step(&mut self, op: &Op) {
        let (topic, model) = (self.disk.topic(), &self.model);
        let published = &mut self.published;
        match *op {
            Op::Publish(ref payload) => {
                let payload = Bytes::from(payload.clone());
                assert_eq!(
                    topic.publish(payload.clone()).unwrap(),
                    model.publish(payload.clone())
                );
                published.push(payload);
            }
            Op::PublishBatch(count) => {
                let payloads: Vec<Bytes> = (0..count)
                    .map(|i| Bytes::from(vec![i; usize::from(i)]))
                    .collect();
                let offsets = topic.publish_batch(&payloads).unwrap();
                let expected: Vec<u64> = payloads
                    .into_iter()
                    .map(|p| {
                        published.push(p.clone());
                        model.publish(p)
                    })
                    .collect();
                assert_eq!(offsets.collect::<Vec<_>>(), expected);
            }
            Op::Create(g, max) => assert_eq!(
                rules(topic.create_group(GROUPS[g], max)),
                model.create_group(GROUPS[g], max)
            ),
            Op::Delete(g) => assert_eq!(
                rules(topic.delete_group(GROUPS[g])),
                model.delete_group(GROUPS[g])
            ),
            Op::Poll(g) => {
                let got = rules(topic.poll(GROUPS[g]));
                assert_eq!(got, model.poll(GROUPS[g]));
                if let Ok(Some(delivery)) = got {
                    self.last.insert(g, delivery.id());
                }
            }
            Op::Ack(g, pick) => {
                let id = self.pick(g, pick);
                assert_eq!(rules(topic.ack(GROUPS[g], id)), model.ack(GROUPS[g], id));
            }
            Op::Nack(g, pick) => {
                let id = self.pick(g, pick);
                assert_eq!(rules(topic.nack(GROUPS[g], id)), model.nack(GROUPS[g], id));
            }
            Op::Reopen => self.disk.restart(),
            Op::Crash(seed) => self.disk.power_cut(seed),
        }
        self.compare();
    }

    fn compare(&self) {
        let (topic, model) = (self.disk.topic(), &self.model);
        assert_eq!(topic.len(), model.len());
        assert_eq!(topic.groups(), model.groups());
        for group in model.groups() {
            assert_eq!(rules(topic.group_info(&group)), model.group_info(&group));
            assert_eq!(
                rules(topic.dead_letters(&group)),
                model.dead_letters(&group)
            );
        }
        assert_eq!(model.len(), self.published.len() as u64);
        for (offset, payload) in (0..).zip(&self.published) {
            assert_eq!(
                topic.read(offset).unwrap().as_ref(),
                Some(payload),
                "offset {offset}"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    // Proves every result, position, attempt, in-flight delivery and dead letter matches
    // the in-memory topic, across clean restarts and power cuts under SyncPolicy::Always,
    // with checkpoints taken often enough that replay starts from one.
    #[test]
    fn durable_topic_matches_in_memory_topic(
        checkpoint_every in 1..12u64,
        ops in proptest::collection::vec(any_op(), 1..120),
    ) {
        let mut harness = Harness::new(checkpoint_every);
        for op in &ops {
            harness.step(op);
        }
    }
}
