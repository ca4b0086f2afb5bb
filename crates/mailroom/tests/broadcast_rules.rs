//! Black-box tests of `mailroom::broadcast`: the worked example of its module docs, the
//! partial fan-out recipe, and one test per rule of the contract.
#![cfg(not(loom))]

mod broadcast_support;

use broadcast_support::{delivery, drain};
use mailroom::broadcast::{
    BroadcastError, Broker, BrokerStats, Subscription, SubscriptionStats, MAILBOX_CAPACITY_MAX,
    SUBSCRIBERS_MAX,
};

#[test]
fn worked_example_of_the_module_docs() {
    // Proves the module docs' worked example step by step: cap, (2,0), then (1,1) with m2 lost to s2.
    let broker = Broker::new(2, 1).unwrap();
    let s1 = broker.subscribe().unwrap();
    let s2 = broker.subscribe().unwrap();
    assert_eq!(
        broker.subscribe().unwrap_err(),
        BroadcastError::SubscriberLimit { max_subscribers: 2 }
    );
    assert_eq!(broker.publish("m1").unwrap(), delivery(2, 0));
    assert_eq!(s1.poll(), Some("m1"));
    assert_eq!(broker.publish("m2").unwrap(), delivery(1, 1));
    assert_eq!(s2.poll(), Some("m1"));
    assert_eq!(s2.poll(), None);
    assert_eq!(s1.poll(), Some("m2"));
}

#[test]
fn partial_fan_out_recipe() {
    // Proves the "partial fan-out" recipe: one delivery + one drop, then
    // unsubscribe/drain/terminal closure of the full one, then close and drain the other.
    let broker = Broker::new(2, 1).unwrap();
    let drained = broker.subscribe().unwrap();
    let full = broker.subscribe().unwrap();
    assert_eq!(broker.publish(1).unwrap(), delivery(2, 0));
    assert_eq!(drained.poll(), Some(1));

    assert_eq!(broker.publish(2).unwrap(), delivery(1, 1));
    assert_eq!(full.stats().dropped, 1);

    full.unsubscribe();
    assert!(full.is_closed());
    assert_eq!(drain(&full), [1]);
    // Only `drained` is left, and it still holds 2: 3 is dropped, and `full` is not visited.
    assert_eq!(broker.publish(3).unwrap(), delivery(0, 1));
    assert_eq!(full.poll(), None, "no enqueue after unsubscribe");
    assert_eq!(
        futures::executor::block_on(full.recv()),
        None,
        "terminal closure"
    );

    broker.close();
    assert!(drained.is_closed());
    assert_eq!(
        drain(&drained),
        [2],
        "3 was dropped: the mailbox still held 2"
    );
}

#[test]
fn new_rejects_zero_limits() {
    // Proves both limits must be > 0 (InvalidConfig names the field).
    let zero_subs = Broker::<u8>::new(0, 1).unwrap_err();
    let zero_cap = Broker::<u8>::new(1, 0).unwrap_err();
    assert!(matches!(
        zero_subs,
        BroadcastError::InvalidConfig {
            name: "max_subscribers",
            value: 0,
            ..
        }
    ));
    assert!(matches!(
        zero_cap,
        BroadcastError::InvalidConfig {
            name: "mailbox_capacity",
            value: 0,
            ..
        }
    ));
    assert!(Broker::<u8>::new(1, 1).is_ok());
}

#[test]
fn new_rejects_limits_above_their_named_maximum() {
    // Proves oversized limits are a typed error, not an allocation panic.
    let subs = Broker::<u8>::new(SUBSCRIBERS_MAX + 1, 1).unwrap_err();
    let cap = Broker::<u8>::new(1, usize::MAX).unwrap_err();
    assert!(matches!(
        subs,
        BroadcastError::InvalidConfig {
            name: "max_subscribers",
            ..
        }
    ));
    assert!(matches!(
        cap,
        BroadcastError::InvalidConfig {
            name: "mailbox_capacity",
            max: MAILBOX_CAPACITY_MAX,
            ..
        }
    ));
    assert!(Broker::<u8>::new(SUBSCRIBERS_MAX, MAILBOX_CAPACITY_MAX).is_ok());
}

#[test]
fn subscribe_fails_at_the_cap() {
    // Proves subscribe returns SubscriberLimit once max_subscribers are active.
    let broker = Broker::<u8>::new(3, 1).unwrap();
    let _subs: Vec<_> = (0..3).map(|_| broker.subscribe().unwrap()).collect();
    assert_eq!(
        broker.subscribe().unwrap_err(),
        BroadcastError::SubscriberLimit { max_subscribers: 3 }
    );
}

#[test]
fn subscribe_fails_after_close() {
    // Proves subscribe returns Closed after close, even below the cap.
    let broker = Broker::<u8>::new(3, 1).unwrap();
    broker.close();
    assert_eq!(broker.subscribe().unwrap_err(), BroadcastError::Closed);
}

#[test]
fn unsubscribe_frees_a_slot() {
    // Proves an explicit unsubscribe (and a second, idempotent one) frees exactly one slot.
    let broker = Broker::<u8>::new(1, 1).unwrap();
    let sub = broker.subscribe().unwrap();
    sub.unsubscribe();
    sub.unsubscribe();
    let again = broker.subscribe().unwrap();
    assert!(broker.subscribe().is_err());
    assert_eq!(broker.stats().subscribers, 1);
    drop((sub, again));
}

#[test]
fn dropping_a_subscription_unsubscribes() {
    // Proves Drop frees the slot and stops delivery.
    let broker = Broker::<u8>::new(1, 1).unwrap();
    drop(broker.subscribe().unwrap());
    assert_eq!(broker.publish(1).unwrap(), delivery(0, 0));
    assert!(broker.subscribe().is_ok());
}

#[test]
fn publish_delivers_when_there_is_room() {
    // Proves every subscriber with room gets its own clone of the message.
    let broker = Broker::new(3, 2).unwrap();
    let subs: Vec<_> = (0..3).map(|_| broker.subscribe().unwrap()).collect();
    assert_eq!(broker.publish(String::from("x")).unwrap(), delivery(3, 0));
    for sub in &subs {
        assert_eq!(sub.poll().as_deref(), Some("x"));
    }
}

#[test]
fn full_mailbox_drops_the_newest_for_that_subscriber_only() {
    // Proves drop-newest: the full subscriber keeps its old messages, the others get the new one.
    let broker = Broker::new(2, 2).unwrap();
    let slow = broker.subscribe().unwrap();
    let fast = broker.subscribe().unwrap();
    for n in 0..2 {
        assert_eq!(broker.publish(n).unwrap(), delivery(2, 0));
    }
    assert_eq!(drain(&fast), [0, 1]);
    assert_eq!(broker.publish(2).unwrap(), delivery(1, 1));
    assert_eq!(drain(&slow), [0, 1]);
    assert_eq!(drain(&fast), [2]);
}

#[test]
fn delivered_plus_dropped_is_the_subscriber_count() {
    // Proves delivered + dropped == subscribers at that moment, through growth and shrinkage.
    let broker = Broker::new(8, 1).unwrap();
    let mut subs = Vec::new();
    for round in 0..8 {
        subs.push(broker.subscribe().unwrap());
        let d = broker.publish(round).unwrap();
        assert_eq!(d.delivered + d.dropped, subs.len());
        assert_eq!(d.delivered, 1, "only the newest subscriber has room");
    }
    while let Some(sub) = subs.pop() {
        drop(sub);
        let d = broker.publish(0).unwrap();
        assert_eq!(d.delivered + d.dropped, subs.len());
    }
}

#[test]
fn publish_with_no_subscribers_succeeds_with_zero() {
    // Proves a publish to nobody is Ok((0, 0)) and is still counted as published.
    let broker = Broker::new(1, 1).unwrap();
    assert_eq!(broker.publish(1).unwrap(), delivery(0, 0));
    assert_eq!(
        broker.stats(),
        BrokerStats {
            subscribers: 0,
            published: 1,
            delivered: 0,
            dropped: 0
        }
    );
}

#[test]
fn publish_fails_after_close() {
    // Proves publish returns Closed after close and counts nothing.
    let broker = Broker::new(1, 1).unwrap();
    let _sub = broker.subscribe().unwrap();
    broker.close();
    assert_eq!(broker.publish(1).unwrap_err(), BroadcastError::Closed);
    assert_eq!(broker.stats().published, 0);
}

#[test]
fn each_subscriber_sees_publish_order() {
    // Proves per-subscriber FIFO: messages come out in publish order, gaps only from drops.
    let broker = Broker::new(2, 4).unwrap();
    let a = broker.subscribe().unwrap();
    let b = broker.subscribe().unwrap();
    let mut got_b = Vec::new();
    for n in 0..20 {
        broker.publish(n).unwrap();
        if n % 3 == 0 {
            got_b.extend(drain(&b));
        }
    }
    got_b.extend(drain(&b));
    assert_eq!(drain(&a), [0, 1, 2, 3]);
    assert!(got_b.windows(2).all(|w| w[0] < w[1]), "{got_b:?}");
    assert_eq!(got_b.len() as u64, b.stats().received);
}

#[test]
fn unsubscribe_is_idempotent_and_closes() {
    // Proves unsubscribe twice is harmless, is_closed becomes true, queued messages stay.
    let broker = Broker::new(2, 4).unwrap();
    let sub = broker.subscribe().unwrap();
    let other = broker.subscribe().unwrap();
    broker.publish(1).unwrap();
    sub.unsubscribe();
    sub.unsubscribe();
    assert!(sub.is_closed());
    assert!(
        !other.is_closed(),
        "unsubscribe touches only its own subscription"
    );
    assert_eq!(broker.publish(2).unwrap(), delivery(1, 0));
    assert_eq!(drain(&sub), [1]);
    assert_eq!(drain(&other), [1, 2]);
}

#[test]
fn empty_poll_is_not_closure() {
    // Proves an empty poll on a live subscription leaves it open and able to receive.
    let broker = Broker::new(1, 1).unwrap();
    let sub = broker.subscribe().unwrap();
    assert_eq!(sub.poll(), None);
    assert!(!sub.is_closed());
    broker.publish(9).unwrap();
    assert_eq!(sub.poll(), Some(9));
}

#[test]
fn close_is_idempotent_closes_everything_and_keeps_queues() {
    // Proves close: idempotent, closes every subscription, clears the registry, keeps queues.
    let broker = Broker::new(3, 2).unwrap();
    let subs: Vec<_> = (0..3).map(|_| broker.subscribe().unwrap()).collect();
    broker.publish('a').unwrap();
    broker.close();
    broker.close();
    assert!(broker.is_closed());
    assert_eq!(broker.stats().subscribers, 0);
    for sub in &subs {
        assert!(sub.is_closed());
        assert_eq!(drain(sub), ['a']);
        sub.unsubscribe(); // harmless after close
    }
}

#[test]
fn dropping_the_last_broker_handle_closes() {
    // Proves clones share one broker and only the last handle's drop closes it.
    let broker = Broker::new(1, 2).unwrap();
    let sub = broker.subscribe().unwrap();
    let clone = broker.clone();
    drop(broker);
    assert!(!sub.is_closed());
    clone.publish(1).unwrap();
    drop(clone);
    assert!(sub.is_closed());
    assert_eq!(sub.recv_blocking(), Some(1));
    assert_eq!(sub.recv_blocking(), None);
}

#[test]
fn counters_add_up() {
    // Proves per-subscription and broker counters agree with what happened.
    let broker = Broker::new(2, 3).unwrap();
    let keeps_up = broker.subscribe().unwrap();
    let stalled = broker.subscribe().unwrap();
    for n in 0..10 {
        broker.publish(n).unwrap();
        keeps_up.poll();
    }
    assert_eq!(
        keeps_up.stats(),
        SubscriptionStats {
            received: 10,
            dropped: 0,
            queued: 0
        }
    );
    assert_eq!(
        stalled.stats(),
        SubscriptionStats {
            received: 3,
            dropped: 7,
            queued: 3
        }
    );
    assert_eq!(
        broker.stats(),
        BrokerStats {
            subscribers: 2,
            published: 10,
            delivered: 13,
            dropped: 7
        }
    );
}

#[test]
fn handles_are_send_and_sync() {
    // Proves (at compile time) Broker and Subscription are Send + Sync for a Send payload
    // that is not Sync.
    fn assert_send_sync<X: Send + Sync>() {}
    assert_send_sync::<Broker<std::cell::Cell<u8>>>();
    assert_send_sync::<Subscription<std::cell::Cell<u8>>>();
}

#[test]
fn errors_render_their_details() {
    // Proves error messages name what went wrong.
    let err = Broker::<u8>::new(0, 1).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("invalid broadcast config: max_subscribers = 0, must be in 1..={SUBSCRIBERS_MAX}")
    );
    let err = BroadcastError::SubscriberLimit { max_subscribers: 4 };
    assert_eq!(err.to_string(), "the subscriber limit (4) is reached");
}

#[test]
fn weightless_messages_keep_the_mailbox_from_counting_as_empty() {
    // Proves a message past the byte budget is dropped whenever the mailbox holds
    // anything, also messages that weigh nothing: only an empty mailbox takes one alone
    // (the model test found a zero-weight message let an over-budget one in).
    let broker = Broker::with_mailbox_bytes(1, 4, 10, |m: &Vec<u8>| m.len()).unwrap();
    let sub = broker.subscribe().unwrap();
    assert_eq!(broker.publish(Vec::new()), Ok(delivery(1, 0)));
    assert_eq!(broker.publish(vec![7; 11]), Ok(delivery(0, 1)));
    assert_eq!(sub.poll(), Some(Vec::new()));
    assert_eq!(broker.publish(vec![7; 11]), Ok(delivery(1, 0)));
    assert_eq!(sub.queued_bytes(), 11);
}
