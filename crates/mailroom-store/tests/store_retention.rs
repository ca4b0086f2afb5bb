//! Retention: by bytes and by age, deleting whole segments, never past what a group still
//! needs (by default), and never taking dead letters with it.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use mailroom_store::clock::ManualClock;
use mailroom_store::log::LogOptions;
use mailroom_store::storage::{SimStorage, Storage};
use mailroom_store::{DurableTopic, Retention, StoreOptions};
use mailroom_testkit::store::open_topic;

fn options(retention: Retention, clock: Arc<ManualClock>) -> StoreOptions {
    StoreOptions {
        log: LogOptions {
            segment_bytes_max: 512,
            index_interval_bytes: 128,
            ..LogOptions::default()
        },
        retention,
        checkpoint_every: 8,
        clock,
        ..StoreOptions::default()
    }
}

fn payload(i: u64) -> Bytes {
    Bytes::from(format!("message {i:04} {}", "x".repeat(40)))
}

fn publish(topic: &DurableTopic, range: std::ops::Range<u64>) {
    for i in range {
        assert_eq!(topic.publish(payload(i)).unwrap(), i);
    }
}

fn ack_until(topic: &DurableTopic, group: &str, position: u64) {
    while topic.position(group).unwrap() < position {
        let delivery = topic.poll(group).unwrap().unwrap();
        topic.ack(group, delivery.id()).unwrap();
    }
}

// Proves size retention deletes whole segments but never a message some group has not
// finished, then catches up once the group moves on; dead letters keep their payload
// after their messages are gone, also across a power cut.
#[test]
fn retention_by_bytes_keeps_unconsumed_messages_and_dead_letters() {
    let sim = SimStorage::new();
    let clock = Arc::new(ManualClock::new(1_000));
    let retention = Retention {
        bytes_max: Some(600),
        ..Retention::default()
    };
    let options = options(retention, clock);
    let (store, topic) = open_topic(&sim, &options);
    topic.create_group("slow", 1).unwrap();
    topic.create_group("fast", 1).unwrap();
    publish(&topic, 0..100);
    // "fast" dead-letters offset 3 (max_attempts 1) and finishes everything.
    ack_until(&topic, "fast", 3);
    let third = topic.poll("fast").unwrap().unwrap();
    topic.nack("fast", third.id()).unwrap();
    ack_until(&topic, "fast", 100);
    ack_until(&topic, "slow", 10);

    let deleted = store.enforce_retention(1_000).unwrap();
    assert!(deleted > 0, "nothing below offset 10 was deleted");
    assert!(
        topic.start() > 0 && topic.start() <= 10,
        "start {}",
        topic.start()
    );
    for offset in 10..100 {
        assert_eq!(topic.read(offset).unwrap().unwrap(), payload(offset));
    }
    assert_eq!(topic.read(0).unwrap(), None);

    ack_until(&topic, "slow", 100);
    store.enforce_retention(1_000).unwrap();
    assert!(
        topic.start() > 50,
        "start {} after every group finished",
        topic.start()
    );
    assert_eq!(topic.read(3).unwrap(), None);
    let dead = topic.dead_letters("fast").unwrap();
    assert_eq!(
        (dead.len(), dead[0].offset, &dead[0].message),
        (1, 3, &payload(3))
    );
    let start = topic.start();
    drop((store, topic));

    let (_store, topic) = open_topic(&sim.crash(9), &options);
    assert_eq!(topic.start(), start);
    assert_eq!(topic.dead_letters("fast").unwrap()[0].message, payload(3));
    assert_eq!(topic.len(), 100);
}

// Proves age retention deletes exactly the segments whose newest record is older than
// the limit, keeping newer ones and everything a group has not finished.
#[test]
fn retention_by_age_deletes_only_old_segments() {
    let sim = SimStorage::new();
    let clock = Arc::new(ManualClock::new(0));
    let retention = Retention {
        age_ms_max: Some(5_000),
        ..Retention::default()
    };
    let options = options(retention, clock.clone());
    let (store, topic) = open_topic(&sim, &options);
    topic.create_group("g", 1).unwrap();
    publish(&topic, 0..40);
    clock.set_ms(10_000);
    publish(&topic, 40..80);
    ack_until(&topic, "g", 20);

    assert!(store.enforce_retention(12_000).unwrap() > 0);
    let start_held = topic.start();
    assert!(start_held > 0 && start_held <= 20, "start {start_held}");

    ack_until(&topic, "g", 80);
    store.enforce_retention(12_000).unwrap();
    let start = topic.start();
    assert!(
        (20..=40).contains(&start),
        "old segments only: start {start}"
    );
    for offset in 40..80 {
        assert_eq!(topic.read(offset).unwrap().unwrap(), payload(offset));
    }
    // Once the new records are old too, all but the active segment go.
    store.enforce_retention(20_000).unwrap();
    assert!(topic.start() > 40);
    assert_eq!(topic.read(79).unwrap().unwrap(), payload(79));
}

// Proves that with keep_unconsumed off a group left behind by retention skips to the
// oldest retained message on its next poll, durably.
#[test]
fn without_keep_unconsumed_a_lagging_group_skips_ahead() {
    let sim = SimStorage::new();
    let clock = Arc::new(ManualClock::new(0));
    let retention = Retention {
        bytes_max: Some(600),
        keep_unconsumed: false,
        ..Retention::default()
    };
    let options = options(retention, clock);
    let (store, topic) = open_topic(&sim, &options);
    topic.create_group("g", 3).unwrap();
    publish(&topic, 0..60);
    let first = topic.poll("g").unwrap().unwrap();
    store.enforce_retention(0).unwrap();
    let start = topic.start();
    assert!(start > 0);
    let next = topic.poll("g").unwrap().unwrap();
    assert_eq!(
        (next.offset, next.attempt, &next.message),
        (start, 1, &payload(start))
    );
    assert!(topic.ack("g", first.id()).is_err());
    drop((store, topic));
    let (_store, topic) = open_topic(&sim.crash(3), &options);
    assert_eq!(topic.group_info("g").unwrap().in_flight, Some(next.id()));
}

// Proves the groups log is compacted behind checkpoints (old segments deleted) while a
// dead letter's payload is kept (copied forward, so it pins no old segments).
#[test]
fn groups_log_is_compacted_but_keeps_dead_letters() {
    let sim = SimStorage::new();
    let clock = Arc::new(ManualClock::new(0));
    let options = options(Retention::default(), clock);
    let (store, topic) = open_topic(&sim, &options);
    topic.create_group("g", 1).unwrap();
    topic.create_group("h", 1).unwrap();
    publish(&topic, 0..300);
    let first = topic.poll("h").unwrap().unwrap();
    topic.nack("h", first.id()).unwrap();
    ack_until(&topic, "g", 300);
    let groups_dir = Path::new("/store/topics/t/groups");
    let segments = |sim: &SimStorage| {
        sim.list_dir(groups_dir)
            .unwrap()
            .into_iter()
            .filter(|path| path.extension().is_some_and(|ext| ext == "log"))
            .count()
    };
    // Now h moves on, so nothing pins the old records except its dead letter.
    ack_until(&topic, "h", 300);
    store.checkpoint().unwrap();
    let with_dead_letter = segments(&sim);
    assert!(
        with_dead_letter <= 4,
        "the groups log has {with_dead_letter} segments"
    );
    assert_eq!(topic.dead_letters("h").unwrap()[0].message, payload(0));

    topic.delete_group("h").unwrap();
    for _ in 0..3 {
        publish(&topic, topic.len()..topic.len() + 20);
        ack_until(&topic, "g", topic.len());
    }
    store.checkpoint().unwrap();
    let compacted = segments(&sim);
    assert!(
        compacted <= with_dead_letter,
        "{compacted} of {with_dead_letter} left"
    );
    drop((store, topic));
    let (_store, topic) = open_topic(&sim.crash(5), &options);
    assert_eq!(topic.position("g").unwrap(), topic.len());
    assert_eq!(topic.groups(), ["g"]);
}
