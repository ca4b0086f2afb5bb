//! Model test: random operation sequences run against the real broker and a tiny,
//! obviously-correct model (a list of subscriber deques), compared after every step,
//! with and without a byte budget beside the mailbox count.
#![cfg(not(loom))]

use mailroom::broadcast::{BroadcastError, Broker, Delivery, Subscription};
use proptest::prelude::*;
use std::collections::VecDeque;

const MAX_SUBSCRIBERS: usize = 3;
const CAPACITY: usize = 2;

#[derive(Debug, Clone)]
enum Op {
    Subscribe,
    Publish(u8),
    PublishBatch(Vec<u8>),
    Poll(usize),
    /// Batched drain of subscription `.0`, at most `.1` messages.
    PollMany(usize, usize),
    Unsubscribe(usize),
    Drop(usize),
    Close,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => Just(Op::Subscribe),
        4 => any::<u8>().prop_map(Op::Publish),
        2 => proptest::collection::vec(any::<u8>(), 0..4).prop_map(Op::PublishBatch),
        3 => (0..6usize).prop_map(Op::Poll),
        2 => (0..6usize, 0..=CAPACITY + 1).prop_map(|(i, max)| Op::PollMany(i, max)),
        1 => (0..6usize).prop_map(Op::Unsubscribe),
        1 => (0..6usize).prop_map(Op::Drop),
        1 => Just(Op::Close),
    ]
}

/// The model's view of one subscription handle the test still holds.
struct ModelSub {
    queue: VecDeque<u8>,
    registered: bool,
    received: u64,
    dropped: u64,
}

/// A message's weight against the byte budget: its value.
fn weigh(m: &u8) -> usize {
    usize::from(*m)
}

/// The mailbox limits under test: the count, and the byte budget if any.
#[derive(Debug, Clone, Copy)]
struct Limits {
    capacity: usize,
    bytes_max: Option<usize>,
}

impl Limits {
    /// Whether a mailbox holding `queue` takes `m`: room by count, and either empty or
    /// within the byte budget.
    fn admits(&self, queue: &VecDeque<u8>, m: u8) -> bool {
        let bytes: usize = queue.iter().map(weigh).sum();
        let within = self
            .bytes_max
            .is_none_or(|max| queue.is_empty() || bytes + weigh(&m) <= max);
        queue.len() < self.capacity && within
    }

    fn broker(&self) -> Broker<u8> {
        match self.bytes_max {
            None => Broker::new(MAX_SUBSCRIBERS, self.capacity).unwrap(),
            Some(max) => {
                Broker::with_mailbox_bytes(MAX_SUBSCRIBERS, self.capacity, max, weigh).unwrap()
            }
        }
    }
}

fn limits() -> impl Strategy<Value = Limits> {
    prop_oneof![
        Just(Limits {
            capacity: CAPACITY,
            bytes_max: None
        }),
        (1..=CAPACITY + 2, 1..600usize).prop_map(|(capacity, max)| Limits {
            capacity,
            bytes_max: Some(max)
        }),
    ]
}

/// Applies one publish to the model: drop-newest per registered subscriber.
fn publish_to_model(model: &mut [ModelSub], limits: Limits, m: u8) -> Delivery {
    let mut delivery = Delivery::default();
    for sub in model.iter_mut().filter(|s| s.registered) {
        if limits.admits(&sub.queue, m) {
            sub.queue.push_back(m);
            sub.received += 1;
            delivery.delivered += 1;
        } else {
            sub.dropped += 1;
            delivery.dropped += 1;
        }
    }
    delivery
}

proptest! {
    #[test]
    fn broker_matches_model(ops in proptest::collection::vec(op(), 1..60), limits in limits()) {
        // Proves publish/publish_batch/poll/poll_many/subscribe/unsubscribe/drop/close match the model's outcomes,
        // counters, queued bytes and closed flags at every step, and the byte budget
        // drops newest exactly where the model says.
        let broker = limits.broker();
        let mut real: Vec<Subscription<u8>> = Vec::new();
        let mut model: Vec<ModelSub> = Vec::new();
        let mut closed = false;
        for op in ops {
            let registered = model.iter().filter(|s| s.registered).count();
            match op {
                Op::Subscribe => {
                    let expected = if closed {
                        Err(BroadcastError::Closed)
                    } else if registered == MAX_SUBSCRIBERS {
                        Err(BroadcastError::SubscriberLimit { max_subscribers: MAX_SUBSCRIBERS })
                    } else {
                        Ok(())
                    };
                    let got = broker.subscribe();
                    prop_assert_eq!(got.as_ref().map(|_| ()).map_err(|e| *e), expected);
                    if let Ok(sub) = got {
                        real.push(sub);
                        model.push(ModelSub { queue: VecDeque::new(), registered: true, received: 0, dropped: 0 });
                    }
                }
                Op::Publish(m) => {
                    let got = broker.publish(m);
                    if closed {
                        prop_assert_eq!(got, Err(BroadcastError::Closed));
                        continue;
                    }
                    let expected = publish_to_model(&mut model, limits, m);
                    prop_assert_eq!(got, Ok(expected));
                }
                Op::PublishBatch(batch) => {
                    let got = broker.publish_batch(batch.iter().copied());
                    if closed {
                        prop_assert_eq!(got, Err(BroadcastError::Closed));
                        continue;
                    }
                    let mut expected = Delivery::default();
                    for &m in &batch {
                        let one = publish_to_model(&mut model, limits, m);
                        expected.delivered += one.delivered;
                        expected.dropped += one.dropped;
                    }
                    prop_assert_eq!(got, Ok(expected));
                }
                Op::Poll(i) if i < real.len() => {
                    prop_assert_eq!(real[i].poll(), model[i].queue.pop_front());
                }
                Op::PollMany(i, max) if i < real.len() => {
                    let mut got = Vec::new();
                    let moved = real[i].poll_many(&mut got, max);
                    let take = max.min(model[i].queue.len());
                    let expected: Vec<u8> = model[i].queue.drain(..take).collect();
                    prop_assert_eq!(moved, expected.len());
                    prop_assert_eq!(got, expected);
                }
                Op::Unsubscribe(i) if i < real.len() => {
                    real[i].unsubscribe();
                    model[i].registered = false;
                }
                Op::Drop(i) if i < real.len() => {
                    drop(real.remove(i));
                    model.remove(i);
                }
                Op::Close => {
                    broker.close();
                    closed = true;
                    model.iter_mut().for_each(|s| s.registered = false);
                }
                Op::Poll(_) | Op::PollMany(..) | Op::Unsubscribe(_) | Op::Drop(_) => {}
            }
            for (sub, expected) in real.iter().zip(&model) {
                let stats = sub.stats();
                prop_assert_eq!(sub.is_closed(), !expected.registered);
                prop_assert_eq!(stats.queued, expected.queue.len());
                let bytes: usize = match limits.bytes_max {
                    Some(_) => expected.queue.iter().map(weigh).sum(),
                    None => 0,
                };
                prop_assert_eq!(sub.queued_bytes(), bytes);
                prop_assert_eq!((stats.received, stats.dropped), (expected.received, expected.dropped));
            }
            let registered = model.iter().filter(|s| s.registered).count();
            prop_assert_eq!(broker.stats().subscribers, registered);
            let registered_bytes: usize = real.iter().zip(&model)
                .filter(|(_, expected)| expected.registered)
                .map(|(sub, _)| sub.queued_bytes())
                .sum();
            prop_assert_eq!(broker.queued_bytes(), registered_bytes);
        }
    }
}
