//! Concurrency tests for `mailroom::topic` on real threads. Loops are bounded so that the
//! whole file runs in well under a second in a debug build.

use std::collections::BTreeMap;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use mailroom::topic::{Delivery, Nack, Topic, TopicError};

const MESSAGES: u64 = 3_000;
const GROUPS: usize = 4;

/// The payload for offset `offset`, so every consumer can check what it was given.
fn payload(offset: u64) -> u64 {
    offset.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// How long [`poll_until_some`] waits for a delivery before it fails the test: far
/// beyond what this file's bounded loops take.
const DELIVERY_WAIT_MAX: Duration = Duration::from_secs(30);

/// Polls until something is delivered, yielding while the group is caught up; fails the
/// test after [`DELIVERY_WAIT_MAX`].
fn poll_until_some(
    mut poll: impl FnMut() -> Result<Option<Delivery<u64>>, TopicError>,
) -> Delivery<u64> {
    let deadline = Instant::now() + DELIVERY_WAIT_MAX;
    loop {
        if let Some(delivery) = poll().unwrap() {
            return delivery;
        }
        assert!(
            Instant::now() < deadline,
            "nothing delivered in {DELIVERY_WAIT_MAX:?}"
        );
        thread::yield_now();
    }
}

// Proves that with a publisher running concurrently, each group, on its own thread, sees
// every offset exactly once and in order with the right payload, and that retries in one
// group (every message nacked once) do not disturb the others.
#[test]
fn each_group_sees_every_offset_once_in_order() {
    let topic = Arc::new(Topic::new());
    for group in 0..GROUPS {
        topic.create_group(&format!("g{group}"), 2).unwrap();
    }
    let start = Arc::new(Barrier::new(GROUPS + 1));
    let publisher = {
        let (topic, start) = (Arc::clone(&topic), Arc::clone(&start));
        thread::spawn(move || {
            start.wait();
            for expected in 0..MESSAGES {
                assert_eq!(topic.publish(payload(expected)), expected);
            }
        })
    };
    let consumers: Vec<_> = (0..GROUPS)
        .map(|group| {
            let (topic, start) = (Arc::clone(&topic), Arc::clone(&start));
            thread::spawn(move || {
                let name = format!("g{group}");
                let handle = topic.group(&name).unwrap();
                let retries = group % 2 == 1;
                let by_handle = group < GROUPS / 2;
                start.wait();
                let mut seen = Vec::with_capacity(MESSAGES as usize);
                while seen.len() < MESSAGES as usize {
                    let delivery = if by_handle {
                        poll_until_some(|| handle.poll())
                    } else {
                        poll_until_some(|| topic.poll(&name))
                    };
                    assert_eq!(delivery.message, payload(delivery.offset));
                    if retries && delivery.attempt == 1 {
                        assert_eq!(topic.nack(&name, delivery.id()).unwrap(), Nack::Retry);
                        continue;
                    }
                    assert_eq!(delivery.attempt, if retries { 2 } else { 1 });
                    topic.ack(&name, delivery.id()).unwrap();
                    seen.push(delivery.offset);
                }
                seen
            })
        })
        .collect();
    publisher.join().unwrap();
    for consumer in consumers {
        let seen = consumer.join().unwrap();
        assert!(seen.iter().copied().eq(0..MESSAGES), "offsets out of order");
    }
    for group in 0..GROUPS {
        let info = topic.group_info(&format!("g{group}")).unwrap();
        assert_eq!(
            (info.position, info.lag, info.dead_letters),
            (MESSAGES, 0, 0)
        );
    }
}

// Proves that two threads racing on one group, both acking whatever poll returns, finish
// every offset exactly once between them: for each delivery exactly one ack wins and the
// loser gets NotOwned.
#[test]
fn racing_acks_in_one_group_win_once_per_offset() {
    let topic = Arc::new(Topic::new());
    for offset in 0..MESSAGES {
        topic.publish(payload(offset));
    }
    topic.create_group("shared", 1).unwrap();
    let start = Arc::new(Barrier::new(2));
    let racers: Vec<_> = (0..2)
        .map(|racer| {
            let (topic, start) = (Arc::clone(&topic), Arc::clone(&start));
            thread::spawn(move || {
                let handle = topic.group("shared").unwrap();
                let (mut wins, mut losses) = (Vec::new(), 0u64);
                start.wait();
                loop {
                    let polled = if racer == 0 {
                        handle.poll()
                    } else {
                        topic.poll("shared")
                    };
                    let Some(delivery) = polled.unwrap() else {
                        return (wins, losses);
                    };
                    match handle.ack(delivery.id()) {
                        Ok(()) => wins.push(delivery.offset),
                        Err(TopicError::NotOwned { .. }) => losses += 1,
                        Err(other) => panic!("unexpected {other:?}"),
                    }
                }
            })
        })
        .collect();
    let mut wins_per_offset = BTreeMap::new();
    for racer in racers {
        let (wins, _losses) = racer.join().unwrap();
        for offset in wins {
            *wins_per_offset.entry(offset).or_insert(0u32) += 1;
        }
    }
    assert_eq!(wins_per_offset.len() as u64, MESSAGES);
    assert!(wins_per_offset.values().all(|&wins| wins == 1));
    assert_eq!(topic.position("shared").unwrap(), MESSAGES);
}

// Proves that two threads racing acks against nacks on one group finish every offset
// exactly once, by one winning ack or by one dead letter after exactly max_attempts
// deliveries, and never dead-letter anything twice.
#[test]
fn racing_acks_and_nacks_finish_each_offset_once() {
    const MAX_ATTEMPTS: u32 = 3;
    let topic = Arc::new(Topic::new());
    for offset in 0..MESSAGES {
        topic.publish(payload(offset));
    }
    topic.create_group("shared", MAX_ATTEMPTS).unwrap();
    let start = Arc::new(Barrier::new(2));
    let racers: Vec<_> = (0..2u64)
        .map(|racer| {
            let (topic, start) = (Arc::clone(&topic), Arc::clone(&start));
            thread::spawn(move || {
                let mut acked = Vec::new();
                start.wait();
                while let Some(delivery) = topic.poll("shared").unwrap() {
                    assert!(delivery.attempt <= MAX_ATTEMPTS);
                    // Racer 0 acks every third offset; racer 1 always nacks.
                    if racer == 0 && delivery.offset % 3 == 0 {
                        if topic.ack("shared", delivery.id()).is_ok() {
                            acked.push(delivery.offset);
                        }
                    } else {
                        let _ = topic.nack("shared", delivery.id());
                    }
                }
                acked
            })
        })
        .collect();
    let mut finished = BTreeMap::new();
    for racer in racers {
        for offset in racer.join().unwrap() {
            *finished.entry(offset).or_insert(0u32) += 1;
        }
    }
    let dead = topic.dead_letters("shared").unwrap();
    for letter in &dead {
        assert_eq!(letter.attempts, MAX_ATTEMPTS);
        assert_eq!(letter.message, payload(letter.offset));
        *finished.entry(letter.offset).or_insert(0) += 1;
    }
    assert!(dead.windows(2).all(|pair| pair[0].offset < pair[1].offset));
    assert_eq!(finished.len() as u64, MESSAGES);
    assert!(finished.values().all(|&count| count == 1));
    assert_eq!(topic.position("shared").unwrap(), MESSAGES);
}

// Proves that creating and deleting groups concurrently never disturbs a steady group's
// consumption, and that a deleted group's handle never acts after its delete returned.
#[test]
fn group_churn_does_not_disturb_other_groups() {
    let topic = Arc::new(Topic::new());
    for offset in 0..MESSAGES {
        topic.publish(payload(offset));
    }
    topic.create_group("steady", 1).unwrap();
    let churn = {
        let topic = Arc::clone(&topic);
        thread::spawn(move || {
            for round in 0..300 {
                topic.create_group("churn", 1).unwrap();
                let handle = topic.group("churn").unwrap();
                let delivery = handle.poll().unwrap().unwrap();
                assert_eq!(delivery.offset, 0);
                if round % 2 == 0 {
                    handle.ack(delivery.id()).unwrap();
                }
                topic.delete_group("churn").unwrap();
                assert!(matches!(
                    handle.poll(),
                    Err(TopicError::UnknownGroup { .. })
                ));
            }
        })
    };
    let steady = topic.group("steady").unwrap();
    for expected in 0..MESSAGES {
        let delivery = steady.poll().unwrap().unwrap();
        assert_eq!(delivery.offset, expected);
        steady.ack(delivery.id()).unwrap();
    }
    churn.join().unwrap();
    assert_eq!(topic.groups(), ["steady"]);
}
