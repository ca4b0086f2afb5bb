//! Model test: random operation sequences run against the real broker and a tiny,
//! obviously-correct model (a list of subscriber deques), compared after every step.
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
    Poll(usize),
    Unsubscribe(usize),
    Drop(usize),
    Close,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => Just(Op::Subscribe),
        4 => any::<u8>().prop_map(Op::Publish),
        3 => (0..6usize).prop_map(Op::Poll),
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

proptest! {
    #[test]
    fn broker_matches_model(ops in proptest::collection::vec(op(), 1..60)) {
        // Proves publish/poll/subscribe/unsubscribe/drop/close match the model's outcomes,
        // counters and closed flags at every step.
        let broker = Broker::new(MAX_SUBSCRIBERS, CAPACITY).unwrap();
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
                    let mut expected = Delivery::default();
                    for sub in model.iter_mut().filter(|s| s.registered) {
                        if sub.queue.len() < CAPACITY {
                            sub.queue.push_back(m);
                            sub.received += 1;
                            expected.delivered += 1;
                        } else {
                            sub.dropped += 1;
                            expected.dropped += 1;
                        }
                    }
                    prop_assert_eq!(got, Ok(expected));
                }
                Op::Poll(i) if i < real.len() => {
                    prop_assert_eq!(real[i].poll(), model[i].queue.pop_front());
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
                Op::Poll(_) | Op::Unsubscribe(_) | Op::Drop(_) => {}
            }
            for (sub, expected) in real.iter().zip(&model) {
                let stats = sub.stats();
                prop_assert_eq!(sub.is_closed(), !expected.registered);
                prop_assert_eq!(stats.queued, expected.queue.len());
                prop_assert_eq!((stats.received, stats.dropped), (expected.received, expected.dropped));
            }
            let registered = model.iter().filter(|s| s.registered).count();
            prop_assert_eq!(broker.stats().subscribers, registered);
        }
    }
}
