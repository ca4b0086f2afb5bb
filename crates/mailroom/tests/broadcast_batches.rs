//! Black-box tests of `mailroom::broadcast`'s batch calls: `poll_many` (oldest first, at
//! most `max`, counters exact, drains after close) and `publish_batch` (the same as
//! consecutive publishes).
#![cfg(not(loom))]

mod broadcast_support;

use broadcast_support::{delivery, drain};
use mailroom::broadcast::{BroadcastError, Broker, BrokerStats, SubscriptionStats};

#[test]
fn poll_many_takes_the_oldest_in_order_and_respects_max() {
    // Proves poll_many moves at most `max` messages, oldest first, appends to the buffer,
    // interleaves with poll in one FIFO, and reports 0 (not closure) when nothing is buffered.
    let broker = Broker::new(1, 8).unwrap();
    let sub = broker.subscribe().unwrap();
    for n in 0..6 {
        broker.publish(n).unwrap();
    }
    let mut buf = vec![-1];
    assert_eq!(sub.poll_many(&mut buf, 0), 0);
    assert_eq!(sub.poll_many(&mut buf, 2), 2);
    assert_eq!(buf, [-1, 0, 1]);
    assert_eq!(sub.poll(), Some(2));
    assert_eq!(sub.poll_many(&mut buf, 10), 3);
    assert_eq!(buf, [-1, 0, 1, 3, 4, 5]);
    assert_eq!(sub.poll_many(&mut buf, 10), 0);
    assert!(!sub.is_closed(), "an empty batch is not closure");
    broker.publish(6).unwrap();
    assert_eq!(sub.poll_many(&mut buf, 10), 1);
    assert_eq!(buf.last(), Some(&6));
}

#[test]
fn poll_many_keeps_drop_newest_and_counters_exact() {
    // Proves that a batch drain frees exactly the room it took: drop-newest still drops the
    // new message only while full, and received/dropped/queued and the broker's counters
    // stay exact across batched drains.
    let broker = Broker::new(2, 3).unwrap();
    let batched = broker.subscribe().unwrap();
    let idle = broker.subscribe().unwrap();
    for n in 0..5 {
        broker.publish(n).unwrap(); // 0,1,2 fit; 3,4 are dropped for both
    }
    let mut buf = Vec::new();
    assert_eq!(batched.poll_many(&mut buf, 2), 2);
    assert_eq!(
        batched.stats(),
        SubscriptionStats {
            received: 3,
            dropped: 2,
            queued: 1
        }
    );
    // Two slots were freed in `batched` only: 5 and 6 land there, 7 is dropped; `idle` is
    // still full and drops all three.
    assert_eq!(broker.publish(5).unwrap(), delivery(1, 1));
    assert_eq!(broker.publish(6).unwrap(), delivery(1, 1));
    assert_eq!(broker.publish(7).unwrap(), delivery(0, 2));
    assert_eq!(batched.poll_many(&mut buf, usize::MAX), 3);
    assert_eq!(buf, [0, 1, 2, 5, 6]);
    assert_eq!(
        batched.stats(),
        SubscriptionStats {
            received: 5,
            dropped: 3,
            queued: 0
        }
    );
    assert_eq!(drain(&idle), [0, 1, 2]);
    assert_eq!(
        broker.stats(),
        BrokerStats {
            subscribers: 2,
            published: 8,
            delivered: 8,
            dropped: 8
        }
    );
}

#[test]
fn poll_many_drains_after_unsubscribe_and_close() {
    // Proves batched draining works on a closed subscription: queued messages stay
    // drainable after unsubscribe / close, and nothing new arrives.
    let broker = Broker::new(2, 4).unwrap();
    let left = broker.subscribe().unwrap();
    let stayed = broker.subscribe().unwrap();
    broker.publish(1).unwrap();
    broker.publish(2).unwrap();
    left.unsubscribe();
    broker.publish(3).unwrap();
    broker.close();
    let mut buf = Vec::new();
    assert_eq!(left.poll_many(&mut buf, usize::MAX), 2);
    assert_eq!(buf, [1, 2]);
    buf.clear();
    assert_eq!(stayed.poll_many(&mut buf, usize::MAX), 3);
    assert_eq!(buf, [1, 2, 3]);
    assert!(left.is_closed() && stayed.is_closed());
}

#[test]
fn publish_batch_equals_consecutive_publishes() {
    // Proves a batch gives every subscriber exactly what the same publishes in a row give
    // (order, drop-newest per message), returns the summed counts, and updates the broker's
    // counters per message.
    let batched = Broker::new(2, 3).unwrap();
    let single = Broker::new(2, 3).unwrap();
    let batched_subs = [batched.subscribe().unwrap(), batched.subscribe().unwrap()];
    let single_subs = [single.subscribe().unwrap(), single.subscribe().unwrap()];
    batched.publish(0).unwrap();
    single.publish(0).unwrap();
    assert_eq!(batched_subs[0].poll(), Some(0));
    assert_eq!(single_subs[0].poll(), Some(0));

    let messages = [1, 2, 3, 4];
    let mut expected = delivery(0, 0);
    for m in messages {
        let one = single.publish(m).unwrap();
        expected.delivered += one.delivered;
        expected.dropped += one.dropped;
    }
    assert_eq!(batched.publish_batch(messages).unwrap(), expected);
    assert_eq!(
        expected,
        delivery(5, 3),
        "sub 0 takes 1,2,3; sub 1 takes 1,2"
    );
    for (b, s) in batched_subs.iter().zip(&single_subs) {
        assert_eq!(b.stats(), s.stats());
        assert_eq!(drain(b), drain(s));
    }
    assert_eq!(batched.stats(), single.stats());
    assert_eq!(batched.stats().published, 5);
}

#[test]
fn publish_batch_edge_cases() {
    // Proves an empty batch and a batch to no subscribers succeed with (0, 0) but still
    // count as published, and that a batch after close fails with Closed and enqueues nothing.
    let broker = Broker::new(1, 4).unwrap();
    assert_eq!(
        broker.publish_batch(Vec::<u8>::new()).unwrap(),
        delivery(0, 0)
    );
    assert_eq!(broker.publish_batch([1, 2]).unwrap(), delivery(0, 0));
    assert_eq!(broker.stats().published, 2);
    let sub = broker.subscribe().unwrap();
    broker.close();
    assert_eq!(broker.publish_batch([3]), Err(BroadcastError::Closed));
    assert_eq!(sub.poll(), None);
    assert_eq!(broker.stats().published, 2);
}
