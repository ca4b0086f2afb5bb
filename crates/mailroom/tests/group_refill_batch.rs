//! The refill batch poll (`mailroom::group::plan_batch_new`: the deliveries the consumer
//! does not hold yet, with those it holds counted against `max`), held to `plan_batch`:
//! from any state, it hands out exactly what `plan_batch` hands out after the consumer's
//! own deliveries, leaves the same state, and never lets the consumer hold more than `max`.

use mailroom::group::{
    plan_batch, plan_batch_new, BatchEnd, BatchHome, BatchPoll, Change, DeliveryId, GroupConfig,
    GroupState, NackKind, NackOptions, NewDelivery, Offer,
};
use proptest::prelude::*;

/// A home that applies every step at once and records what it handed out, split into
/// the consumer's own deliveries and new ones.
struct Memory<'a> {
    state: GroupState,
    consumer: Option<&'a str>,
    owned: Vec<DeliveryId>,
    new: Vec<DeliveryId>,
}

impl<'a> Memory<'a> {
    fn new(state: GroupState, consumer: Option<&'a str>) -> Memory<'a> {
        Memory {
            state,
            consumer,
            owned: Vec::new(),
            new: Vec::new(),
        }
    }
}

impl BatchHome for Memory<'_> {
    type Error = std::convert::Infallible;

    fn state(&self) -> &GroupState {
        &self.state
    }

    fn expire(&mut self, change: Change) -> Result<(), Self::Error> {
        self.state
            .apply_change(&change)
            .expect("a planned expiry applies");
        Ok(())
    }

    fn owned(&mut self, id: DeliveryId) -> Result<Offer, Self::Error> {
        self.owned.push(id);
        Ok(Offer::Taken)
    }

    fn deliver(&mut self, new: NewDelivery) -> Result<Offer, Self::Error> {
        self.state
            .apply_delivery(new, self.consumer)
            .expect("a planned delivery applies");
        self.new.push(new.id);
        Ok(Offer::Taken)
    }
}

const CONSUMERS: [Option<&str>; 3] = [Some("a"), Some("b"), None];

#[derive(Debug, Clone)]
enum Op {
    /// A full batch poll by consumer `n`, of `max`.
    Poll(usize, usize),
    /// A new-only batch poll by consumer `n`, of `max`, checked against `plan_batch`.
    PollNew(usize, usize),
    /// Settles the `n`th delivery in flight (modulo), by kind.
    Settle(usize, u8),
    /// The clock moves on.
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..3usize, 1..6usize).prop_map(|(c, max)| Op::Poll(c, max)),
        (0..3usize, 1..6usize).prop_map(|(c, max)| Op::PollNew(c, max)),
        (0..8usize, 0..4u8).prop_map(|(n, kind)| Op::Settle(n, kind)),
        (0..40u64).prop_map(Op::Advance),
    ]
}

fn poll(consumer: Option<&str>, max: usize, log_end: u64, now_ms: u64) -> BatchPoll<'_> {
    BatchPoll {
        consumer,
        max,
        log_end,
        now_ms,
    }
}

/// Settles the `n`th delivery in flight (if any) by `kind`: ack, nack, release, reject.
fn settle(state: &mut GroupState, n: usize, kind: u8, now_ms: u64) {
    let in_flight: Vec<DeliveryId> = CONSUMERS
        .iter()
        .flat_map(|consumer| state.owned(*consumer).collect::<Vec<_>>())
        .collect();
    if in_flight.is_empty() {
        return;
    }
    let id = in_flight[n % in_flight.len()];
    let planned = match kind {
        0 => state.plan_ack(id, now_ms),
        1 => state.plan_nack(id, &NackOptions::new(NackKind::Nack), now_ms),
        2 => state.plan_nack(id, &NackOptions::new(NackKind::Release), now_ms),
        _ => state.plan_nack(id, &NackOptions::new(NackKind::Reject), now_ms),
    };
    // A lease that ran out refuses the settlement, as it would a consumer's.
    if let Ok(change) = planned {
        state
            .apply_change(&change)
            .expect("a planned settlement applies");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    // Proves `plan_batch_new` is `plan_batch` without the owned part: the same new
    // deliveries and the same state after, from every state random polls, settlements
    // and lease expiries reach; and the consumer never holds more than `max` after it
    // (unless it already did).
    #[test]
    fn new_only_polls_are_batch_polls_without_the_owned_part(
        ops in proptest::collection::vec(op(), 1..80),
        max_in_flight in 1..8u32,
        log_end in 0..24u64,
    ) {
        let config = GroupConfig::new(3).with_max_in_flight(max_in_flight).with_lease_ms(50);
        let mut state = GroupState::with_config(config, 0).unwrap();
        let mut now_ms = 0;
        for op in ops {
            match op {
                Op::Poll(c, max) => {
                    let mut home = Memory::new(state, CONSUMERS[c]);
                    let end = plan_batch(&mut home, &poll(CONSUMERS[c], max, log_end, now_ms));
                    prop_assert_eq!(end, Ok(BatchEnd::Done));
                    state = home.state;
                }
                Op::PollNew(c, max) => {
                    let consumer = CONSUMERS[c];
                    let held = state.owned(consumer).count();
                    let batch = poll(consumer, max, log_end, now_ms);
                    let mut full = Memory::new(state.clone(), consumer);
                    plan_batch(&mut full, &batch).unwrap();
                    let mut fresh = Memory::new(state, consumer);
                    prop_assert_eq!(plan_batch_new(&mut fresh, &batch), Ok(BatchEnd::Done));
                    prop_assert!(fresh.owned.is_empty(), "nothing owned is handed back");
                    prop_assert_eq!(&fresh.new, &full.new);
                    prop_assert_eq!(&fresh.state, &full.state);
                    let holds = fresh.state.owned(consumer).count();
                    prop_assert!(holds <= max.max(held), "holds {} of a window of {}", holds, max);
                    state = fresh.state;
                }
                Op::Settle(n, kind) => settle(&mut state, n, kind, now_ms),
                Op::Advance(ms) => now_ms += ms,
            }
        }
    }
}

#[test]
fn a_full_window_gets_nothing_and_a_freed_slot_gets_one() {
    // Proves a consumer holding its whole window gets no delivery (not even its own
    // back), and after one ack exactly one new one.
    let config = GroupConfig::new(3).with_max_in_flight(8);
    let state = GroupState::with_config(config, 0).unwrap();
    let mut home = Memory::new(state, Some("a"));
    plan_batch(&mut home, &poll(Some("a"), 3, 10, 0)).unwrap();
    assert_eq!(home.new.len(), 3);
    home.new.clear();
    plan_batch_new(&mut home, &poll(Some("a"), 3, 10, 0)).unwrap();
    assert!(home.owned.is_empty() && home.new.is_empty());
    let ack = home
        .state
        .plan_ack(
            DeliveryId {
                offset: 1,
                attempt: 1,
            },
            0,
        )
        .unwrap();
    home.state.apply_change(&ack).unwrap();
    plan_batch_new(&mut home, &poll(Some("a"), 3, 10, 0)).unwrap();
    assert_eq!(
        home.new,
        [DeliveryId {
            offset: 3,
            attempt: 1
        }]
    );
}

#[test]
fn another_consumers_deliveries_do_not_count_against_the_window() {
    // Proves only the polling consumer's own deliveries fill its window.
    let config = GroupConfig::new(3).with_max_in_flight(8);
    let state = GroupState::with_config(config, 0).unwrap();
    let mut home = Memory::new(state, Some("b"));
    plan_batch(&mut home, &poll(Some("b"), 3, 10, 0)).unwrap();
    let mut home = Memory::new(home.state, Some("a"));
    plan_batch_new(&mut home, &poll(Some("a"), 2, 10, 0)).unwrap();
    let offsets: Vec<u64> = home.new.iter().map(|id| id.offset).collect();
    assert_eq!(offsets, [3, 4]);
}
