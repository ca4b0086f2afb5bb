//! Model test for ordering keys on disk: a durable group behaves exactly like the one
//! state machine `mailroom::group::GroupState` planning with the keys of the published
//! messages (both reading one `ManualClock`), through random publishes with and without
//! keys, batch polls by several consumers, acks, nacks (all kinds, with delays) and lease
//! expiries, mixed with clean restarts and power cuts; and after every step at most one
//! delivery per key is in flight.

use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use mailroom::clock::{Clock, ManualClock};
use mailroom::group::{
    key_hash, plan_batch, BatchHome, BatchPoll, Change, DeliveryId, GroupConfig, GroupState,
    NackKind, NackOptions, NewDelivery, Offer, PollStep,
};
use mailroom::topic::{Metadata, StartPosition};
use mailroom_store::storage::SimStorage;
use mailroom_store::{NewMessage, StoreOptions};
use mailroom_testkit::store::{model_options, RestartableTopic};
use proptest::prelude::*;

const CONSUMERS: [&str; 3] = ["c0", "c1", "c2"];

#[derive(Debug, Clone)]
enum Op {
    /// A message with key `k{n}`, or without one.
    Publish(Option<u8>),
    /// Consumer, max.
    PollBatch(usize, usize),
    /// Which delivery in flight (modulo their number).
    Ack(usize),
    Nack(usize, NackKind, Option<u64>),
    Advance(u64),
    Reopen,
    Crash(u64),
}

fn any_op() -> impl Strategy<Value = Op> {
    let kind = prop_oneof![
        Just(NackKind::Nack),
        Just(NackKind::Release),
        Just(NackKind::Reject)
    ];
    prop_oneof![
        5 => proptest::option::weighted(0.8, 0..4u8).prop_map(Op::Publish),
        5 => (0..CONSUMERS.len(), 1..5usize).prop_map(|(c, m)| Op::PollBatch(c, m)),
        4 => any::<usize>().prop_map(Op::Ack),
        3 => (any::<usize>(), kind, proptest::option::of(0..50u64))
            .prop_map(|(p, k, d)| Op::Nack(p, k, d)),
        2 => (0..60u64).prop_map(Op::Advance),
        1 => Just(Op::Reopen),
        1 => any::<u64>().prop_map(Op::Crash),
    ]
}

fn config() -> impl Strategy<Value = GroupConfig> {
    (1..4u32, proptest::option::of(10..80u64), 1..6u32).prop_map(|(attempts, lease, w)| {
        let config = GroupConfig::new(attempts).with_max_in_flight(w);
        match lease {
            Some(lease_ms) => config.with_lease_ms(lease_ms),
            None => config,
        }
    })
}

/// The model's batch home: applies every step at once, planning with the log's keys.
struct Model<'a> {
    state: &'a mut GroupState,
    keys: &'a [Option<u64>],
    consumer: &'a str,
    out: Vec<DeliveryId>,
}

impl BatchHome for Model<'_> {
    type Error = Infallible;

    fn state(&self) -> &GroupState {
        self.state
    }

    fn plan_new(&mut self, log_end: u64, now_ms: u64) -> Result<PollStep, Infallible> {
        let keys = self.keys;
        let mut lookup = |offset: u64| keys[offset as usize];
        Ok(self.state.plan_poll_new_keyed(log_end, now_ms, &mut lookup))
    }

    fn expire(&mut self, change: Change) -> Result<(), Infallible> {
        self.state.apply_change(&change).unwrap();
        Ok(())
    }

    fn owned(&mut self, id: DeliveryId) -> Result<Offer, Infallible> {
        self.out.push(id);
        Ok(Offer::Taken)
    }

    fn deliver(&mut self, new: NewDelivery) -> Result<Offer, Infallible> {
        self.state.apply_delivery(new, Some(self.consumer)).unwrap();
        self.out.push(new.id);
        Ok(Offer::Taken)
    }
}

struct Harness {
    clock: Arc<ManualClock>,
    disk: RestartableTopic,
    model: GroupState,
    keys: Vec<Option<u64>>,
}

impl Harness {
    fn new(config: GroupConfig) -> Self {
        let clock = Arc::new(ManualClock::new(5_000));
        let options = StoreOptions {
            clock: clock.clone(),
            ..model_options(4)
        };
        let disk = RestartableTopic::open(SimStorage::new(), options);
        disk.topic()
            .create_group_with("g", StartPosition::Earliest, config)
            .unwrap();
        Harness {
            clock,
            disk,
            model: GroupState::with_config(config, 0).unwrap(),
            keys: Vec::new(),
        }
    }

    fn now(&self) -> u64 {
        self.clock.now_ms()
    }

    /// Applies every expiry due now to the model, as the store does before any call.
    fn expire_model(&mut self) {
        while let Some(change) = self.model.plan_expiry(self.now()) {
            self.model.apply_change(&change).unwrap();
        }
    }

    fn pick(&self, pick: usize) -> Option<DeliveryId> {
        let ids: Vec<DeliveryId> = self.model.owned_by_anyone().collect();
        (!ids.is_empty()).then(|| ids[pick % ids.len()])
    }

    fn step(&mut self, op: &Op) {
        match *op {
            Op::Publish(key) => {
                let metadata = match key {
                    Some(key) => Metadata::new().with_key(format!("k{key}")),
                    None => Metadata::new(),
                };
                let message = NewMessage {
                    payload: Bytes::from(format!("m{}", self.keys.len())),
                    metadata,
                };
                self.disk.topic().publish_messages(&[message]).unwrap();
                self.keys
                    .push(key.map(|key| key_hash(format!("k{key}").as_bytes())));
            }
            Op::PollBatch(consumer, max) => {
                let disk: Vec<DeliveryId> = self
                    .disk
                    .topic()
                    .poll_batch("g", Some(CONSUMERS[consumer]), max)
                    .unwrap()
                    .iter()
                    .map(|delivery| delivery.id())
                    .collect();
                let mut home = Model {
                    state: &mut self.model,
                    keys: &self.keys,
                    consumer: CONSUMERS[consumer],
                    out: Vec::new(),
                };
                let poll = BatchPoll {
                    consumer: Some(CONSUMERS[consumer]),
                    max,
                    log_end: self.keys.len() as u64,
                    now_ms: self.clock.now_ms(),
                };
                plan_batch(&mut home, &poll).unwrap();
                assert_eq!(disk, home.out, "batch of {}", CONSUMERS[consumer]);
            }
            Op::Ack(pick) => {
                self.expire_model();
                if let Some(id) = self.pick(pick) {
                    self.disk.topic().ack("g", id).unwrap();
                    let change = self.model.plan_ack(id, self.now()).unwrap();
                    self.model.apply_change(&change).unwrap();
                }
            }
            Op::Nack(pick, kind, delay_ms) => {
                self.expire_model();
                if let Some(id) = self.pick(pick) {
                    let options = NackOptions {
                        kind,
                        delay_ms,
                        reason: None,
                    };
                    self.disk
                        .topic()
                        .nack_with("g", id, options.clone())
                        .unwrap();
                    let change = self.model.plan_nack(id, &options, self.now()).unwrap();
                    self.model.apply_change(&change).unwrap();
                }
            }
            Op::Advance(ms) => self.clock.advance_ms(ms),
            Op::Reopen => self.disk.restart(),
            Op::Crash(seed) => self.disk.power_cut(seed),
        }
        self.compare();
    }

    fn compare(&mut self) {
        self.expire_model();
        let disk = self.disk.topic().in_flight("g").unwrap();
        let model: Vec<DeliveryId> = self.model.owned_by_anyone().collect();
        assert_eq!(disk, model, "in flight");
        let mut keys = HashSet::new();
        for id in &model {
            if let Some(key) = self.keys[id.offset as usize] {
                assert!(keys.insert(key), "two deliveries of one key in flight");
            }
        }
        let info = self.disk.topic().group_info("g").unwrap();
        assert_eq!(info.position, self.model.position());
    }
}

/// Every delivery in flight, by offset (the order `in_flight` answers).
trait InFlight {
    fn owned_by_anyone(&self) -> Box<dyn Iterator<Item = DeliveryId> + '_>;
}

impl InFlight for GroupState {
    fn owned_by_anyone(&self) -> Box<dyn Iterator<Item = DeliveryId> + '_> {
        let mut ids: Vec<DeliveryId> = self
            .slots()
            .filter(|slot| matches!(slot.phase, mailroom::group::SlotPhase::InFlight { .. }))
            .map(|slot| DeliveryId {
                offset: slot.offset,
                attempt: slot.attempt,
            })
            .collect();
        ids.sort();
        Box::new(ids.into_iter())
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    // Proves the durable group delivers exactly what the state machine plans with the
    // messages' keys, step by step, across restarts and power cuts (held messages come
    // back from the checkpoint or the replayed records, keys from the log), and that at
    // most one delivery per key is ever in flight.
    #[test]
    fn durable_keys_match_the_state_machine(
        config in config(),
        ops in proptest::collection::vec(any_op(), 1..70),
    ) {
        let mut harness = Harness::new(config);
        for op in &ops {
            harness.step(op);
        }
    }
}
