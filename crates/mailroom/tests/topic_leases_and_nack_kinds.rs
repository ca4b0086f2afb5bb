//! One test per rule of the group settings (docs/semantics.md): leases, nack kinds,
//! delays and backoff, redrive and purge, `max_in_flight` > 1 and its ordering guarantee.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::thread;

use mailroom::clock::ManualClock;
use mailroom::group::{Backoff, GroupConfig, NackKind, NackOptions};
use mailroom::topic::{DeliveryId, Nack, StartPosition, Topic, TopicError};
use proptest::prelude::*;

fn timed(config: GroupConfig) -> (Arc<ManualClock>, Topic<&'static str>) {
    let clock = Arc::new(ManualClock::new(0));
    let topic = Topic::with_clock(clock.clone());
    topic
        .create_group_with("g", StartPosition::Earliest, config)
        .unwrap();
    (clock, topic)
}

fn not_owned<T: std::fmt::Debug>(result: Result<T, TopicError>) -> bool {
    matches!(result, Err(TopicError::NotOwned { .. }))
}

// Proves an owner whose lease ran out cannot ack, nack or touch, and that the next poll
// is the next attempt, which can be acked.
#[test]
fn expired_owners_ack_fails_and_next_poll_is_next_attempt() {
    let (clock, topic) = timed(GroupConfig::new(3).with_lease_ms(100));
    topic.publish("job");
    let first = topic.poll_as("g", "slow").unwrap().unwrap();
    clock.advance_ms(99);
    assert_eq!(topic.in_flight("g").unwrap(), [first.id()]);
    clock.advance_ms(1);
    assert!(not_owned(topic.ack("g", first.id())));
    assert!(not_owned(topic.touch("g", first.id())));
    assert!(not_owned(topic.nack("g", first.id())));
    let second = topic.poll_as("g", "fast").unwrap().unwrap();
    assert_eq!((second.offset, second.attempt), (0, 2));
    assert!(not_owned(topic.ack("g", first.id())));
    topic.ack("g", second.id()).unwrap();
    let counters = topic.group_counters("g").unwrap();
    assert_eq!((counters.expired_leases, counters.redeliveries), (1, 1));
}

// Proves touch extends a lease from now, so a long job keeps its delivery.
#[test]
fn touch_extends_the_lease() {
    let (clock, topic) = timed(GroupConfig::new(1).with_lease_ms(100));
    topic.publish("long");
    let delivery = topic.poll("g").unwrap().unwrap();
    for _ in 0..5 {
        clock.advance_ms(80);
        topic.touch("g", delivery.id()).unwrap();
    }
    clock.advance_ms(99);
    topic.ack("g", delivery.id()).unwrap();
    assert_eq!(topic.group_counters("g").unwrap().expired_leases, 0);
}

// Proves a message whose every lease runs out is dead-lettered once, after max_attempts,
// with reason "lease expired" and the deadline as its time, and is not delivered again.
#[test]
fn poison_message_stops_after_max_attempts_of_expired_leases() {
    let (clock, topic) = timed(GroupConfig::new(3).with_lease_ms(10));
    topic.publish("poison");
    topic.publish("next");
    for attempt in 1..=3 {
        let delivery = topic.poll("g").unwrap().unwrap();
        assert_eq!((delivery.offset, delivery.attempt), (0, attempt));
        clock.advance_ms(10);
    }
    let next = topic.poll("g").unwrap().unwrap();
    assert_eq!((next.offset, next.attempt), (1, 1));
    let dead = topic.dead_letter_info("g").unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!((dead[0].offset, dead[0].attempts), (0, 3));
    assert_eq!(dead[0].reason.as_deref(), Some("lease expired"));
    assert_eq!(dead[0].at_ms, 30);
}

// Proves release does not count as a failure, reject dead-letters at once with its
// reason, and both are fenced like a nack.
#[test]
fn release_is_not_a_failure_and_reject_dead_letters_at_once() {
    let (_clock, topic) = timed(GroupConfig::new(2));
    topic.publish("a");
    topic.publish("b");
    let release = NackOptions::new(NackKind::Release).with_reason("shutting down");
    for attempt in 1..=5 {
        let delivery = topic.poll("g").unwrap().unwrap();
        assert_eq!(delivery.attempt, attempt);
        assert_eq!(
            topic
                .nack_with("g", delivery.id(), release.clone())
                .unwrap(),
            Nack::Retry
        );
        assert!(not_owned(topic.nack_with(
            "g",
            delivery.id(),
            release.clone()
        )));
    }
    let delivery = topic.poll("g").unwrap().unwrap();
    assert_eq!(topic.nack("g", delivery.id()).unwrap(), Nack::Retry);
    let delivery = topic.poll("g").unwrap().unwrap();
    assert_eq!(topic.nack("g", delivery.id()).unwrap(), Nack::DeadLettered);
    let b = topic.poll("g").unwrap().unwrap();
    let reject = NackOptions::new(NackKind::Reject).with_reason("malformed");
    assert_eq!(
        topic.nack_with("g", b.id(), reject).unwrap(),
        Nack::DeadLettered
    );
    let dead = topic.dead_letter_info("g").unwrap();
    let summary: Vec<_> = dead
        .iter()
        .map(|d| (d.offset, d.attempts, d.reason.as_deref()))
        .collect();
    assert_eq!(summary, [(0, 7, None), (1, 1, Some("malformed"))]);
    assert_eq!(topic.group_counters("g").unwrap().releases, 5);
}

// Proves a delayed message is not redelivered before its time, and that the group
// delivers no later message meanwhile (head-of-line order).
#[test]
fn a_delay_holds_the_message_and_everything_after_it() {
    let (clock, topic) = timed(GroupConfig::new(5).with_max_in_flight(4));
    topic.publish("first");
    topic.publish("second");
    let first = topic.poll_as("g", "a").unwrap().unwrap();
    let delayed = NackOptions::new(NackKind::Nack).with_delay_ms(50);
    topic.nack_with("g", first.id(), delayed).unwrap();
    clock.advance_ms(49);
    assert_eq!(topic.poll_as("g", "a").unwrap(), None);
    assert_eq!(topic.poll_as("g", "b").unwrap(), None);
    clock.advance_ms(1);
    let again = topic.poll_as("g", "b").unwrap().unwrap();
    assert_eq!((again.offset, again.attempt), (0, 2));
    assert_eq!(topic.poll_as("g", "a").unwrap().unwrap().offset, 1);
}

// Proves exponential backoff doubles up to its cap, and a per-nack delay overrides it.
#[test]
fn backoff_doubles_to_its_cap_and_a_nack_delay_overrides_it() {
    let backoff = Backoff::Exponential {
        base_ms: 10,
        cap_ms: 25,
    };
    let (clock, topic) = timed(GroupConfig::new(10).with_backoff(backoff));
    topic.publish("flaky");
    let mut waits = Vec::new();
    for round in 0..4 {
        let delivery = topic.poll("g").unwrap().unwrap();
        let options = if round == 3 {
            NackOptions::new(NackKind::Nack).with_delay_ms(3)
        } else {
            NackOptions::default()
        };
        topic.nack_with("g", delivery.id(), options).unwrap();
        let mut waited = 0;
        while topic.poll("g").unwrap().is_none() {
            clock.advance_ms(1);
            waited += 1;
        }
        // That poll made a delivery; give it back without counting, to measure the next.
        let current = topic.poll("g").unwrap().unwrap();
        waits.push(waited);
        topic
            .nack_with("g", current.id(), NackOptions::new(NackKind::Release))
            .unwrap();
    }
    assert_eq!(waits, [10, 20, 25, 3]);
}

// Proves redrive puts dead letters back to one group only, with a fresh budget and the
// next attempt number, so a late ack from the dead delivery cannot settle the new one;
// and purge deletes them.
#[test]
fn redrive_touches_one_group_only() {
    let topic = Topic::new();
    topic.create_group("g", 1).unwrap();
    topic.create_group("h", 1).unwrap();
    for message in ["m0", "m1", "m2"] {
        topic.publish(message);
    }
    for group in ["g", "h"] {
        for _ in 0..3 {
            let delivery = topic.poll(group).unwrap().unwrap();
            topic.nack(group, delivery.id()).unwrap();
        }
    }
    let h_before = (
        topic.group_info("h").unwrap(),
        topic.dead_letter_info("h").unwrap(),
    );
    assert_eq!(topic.redrive("g", 1..3).unwrap(), 2);
    assert_eq!(
        (
            topic.group_info("h").unwrap(),
            topic.dead_letter_info("h").unwrap()
        ),
        h_before
    );
    assert_eq!(topic.poll("h").unwrap(), None);
    let old = DeliveryId {
        offset: 1,
        attempt: 1,
    };
    let again = topic.poll("g").unwrap().unwrap();
    assert_eq!((again.offset, again.attempt), (1, 2));
    assert!(not_owned(topic.ack("g", old)));
    topic.ack("g", again.id()).unwrap();
    let last = topic.poll("g").unwrap().unwrap();
    assert_eq!(last.offset, 2);
    // The budget is fresh: max_attempts 1, so this nack dead-letters it again.
    assert_eq!(topic.nack("g", last.id()).unwrap(), Nack::DeadLettered);
    let offsets: Vec<u64> = topic
        .dead_letters("g")
        .unwrap()
        .iter()
        .map(|d| d.offset)
        .collect();
    assert_eq!(offsets, [0, 2]);
    assert_eq!(topic.purge("g", 0..u64::MAX).unwrap(), 2);
    assert!(topic.dead_letters("g").unwrap().is_empty());
    assert_eq!(topic.dead_letters("h").unwrap().len(), 3);
    assert_eq!(topic.group_counters("g").unwrap().redrives, 2);
}

// Proves a topic without a clock refuses leases, backoff and delays instead of letting
// them wait for ever, and checks settings and consumers against their limits.
#[test]
fn settings_that_need_time_or_exceed_limits_are_refused() {
    let topic: Topic<u8> = Topic::new();
    let start = StartPosition::Earliest;
    let invalid =
        |result: Result<(), TopicError>| matches!(result, Err(TopicError::InvalidArgument { .. }));
    assert!(invalid(topic.create_group_with(
        "a",
        start,
        GroupConfig::new(1).with_lease_ms(5)
    )));
    let backoff = Backoff::Fixed { delay_ms: 5 };
    assert!(invalid(topic.create_group_with(
        "a",
        start,
        GroupConfig::new(1).with_backoff(backoff)
    )));
    assert!(invalid(topic.create_group_with(
        "a",
        start,
        GroupConfig::new(1).with_max_in_flight(0)
    )));
    topic.create_group("g", 1).unwrap();
    topic.publish(1);
    let delivery = topic.poll("g").unwrap().unwrap();
    let delayed = NackOptions::new(NackKind::Release).with_delay_ms(5);
    assert!(matches!(
        topic.nack_with("g", delivery.id(), delayed),
        Err(TopicError::InvalidArgument { .. })
    ));
    assert!(matches!(
        topic.poll_as("g", ""),
        Err(TopicError::InvalidArgument { .. })
    ));
    let long = "r".repeat(mailroom::group::REASON_BYTES_MAX + 1);
    let options = NackOptions::default().with_reason(long);
    assert!(matches!(
        topic.nack_with("g", delivery.id(), options),
        Err(TopicError::InvalidArgument { .. })
    ));
}

proptest! {
    // Proves the W > 1 ordering guarantee under random polls, acks and nacks by several
    // consumers: first deliveries happen in offset order, every delivery lies below
    // position + W, each consumer owns at most one delivery and gets it back on a
    // repeated poll, and with W = 1 every delivery is at the position.
    #[test]
    fn w_deliveries_keep_the_ordering_guarantee(
        w in 1..5u32,
        actions in proptest::collection::vec((0..4usize, 0..4u8), 1..200),
    ) {
        let topic = Topic::new();
        topic.create_group_with("g", StartPosition::Earliest, GroupConfig::new(3).with_max_in_flight(w)).unwrap();
        for i in 0..30u32 {
            topic.publish(i);
        }
        let consumers = ["c0", "c1", "c2", "c3"];
        let mut owned: [Option<DeliveryId>; 4] = [None; 4];
        let mut first_seen = BTreeSet::new();
        let mut highest_first = None;
        for (c, action) in actions {
            let position = topic.position("g").unwrap();
            if action < 2 || owned[c].is_none() {
                let Some(delivery) = topic.poll_as("g", consumers[c]).unwrap() else { continue };
                prop_assert!(delivery.offset < position + u64::from(w));
                if w == 1 {
                    prop_assert_eq!(delivery.offset, position);
                }
                if let Some(mine) = owned[c] {
                    prop_assert_eq!(delivery.id(), mine);
                }
                if first_seen.insert(delivery.offset) {
                    prop_assert!(highest_first.is_none_or(|h| delivery.offset > h));
                    highest_first = Some(delivery.offset);
                }
                owned[c] = Some(delivery.id());
                prop_assert!(topic.in_flight("g").unwrap().len() <= w as usize);
            } else if let Some(id) = owned[c].take() {
                if action == 2 {
                    topic.ack("g", id).unwrap();
                } else {
                    topic.nack("g", id).unwrap();
                }
            }
        }
    }
}

// Proves that with W = 8 and four threads racing in one group, each delivery is fenced:
// every offset is acked exactly once and the group finishes the log.
#[test]
fn parallel_consumers_finish_every_offset_exactly_once() {
    const MESSAGES: u64 = 2_000;
    let topic = Arc::new(Topic::new());
    topic
        .create_group_with(
            "g",
            StartPosition::Earliest,
            GroupConfig::new(u32::MAX).with_max_in_flight(8),
        )
        .unwrap();
    let acked = Arc::new(Mutex::new(Vec::new()));
    let publisher = {
        let topic = Arc::clone(&topic);
        thread::spawn(move || {
            for i in 0..MESSAGES {
                topic.publish(i);
            }
        })
    };
    let workers: Vec<_> = (0..4)
        .map(|worker| {
            let (topic, acked) = (Arc::clone(&topic), Arc::clone(&acked));
            thread::spawn(move || {
                let me = format!("worker-{worker}");
                let group = topic.group("g").unwrap();
                let mut round = 0u64;
                while group.position().unwrap() < MESSAGES {
                    let Some(delivery) = group.poll_as(&me).unwrap() else {
                        thread::yield_now();
                        continue;
                    };
                    round += 1;
                    if round.is_multiple_of(7) {
                        group.nack(delivery.id()).unwrap();
                    } else {
                        group.ack(delivery.id()).unwrap();
                        acked.lock().unwrap().push(delivery.message);
                    }
                }
            })
        })
        .collect();
    publisher.join().unwrap();
    workers
        .into_iter()
        .for_each(|worker| worker.join().unwrap());
    let mut acked = acked.lock().unwrap().clone();
    acked.sort_unstable();
    assert_eq!(acked, (0..MESSAGES).collect::<Vec<_>>());
    assert!(topic.dead_letters("g").unwrap().is_empty());
}
