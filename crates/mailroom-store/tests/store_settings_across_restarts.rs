//! Group settings and their effects on disk: expiries and dead letters survive restarts
//! exactly once, redrive touches one group only and survives retention, settings persist.

use std::sync::Arc;

use bytes::Bytes;
use mailroom::clock::ManualClock;
use mailroom::group::{Backoff, GroupConfig, NackKind, NackOptions};
use mailroom::topic::{DeliveryId, Nack, StartPosition, TopicError};
use mailroom_store::log::LogOptions;
use mailroom_store::storage::SimStorage;
use mailroom_store::{DurableTopic, Retention, Store, StoreError, StoreOptions};
use mailroom_testkit::store::open_topic;

struct Disk {
    sim: SimStorage,
    options: StoreOptions,
    clock: Arc<ManualClock>,
}

impl Disk {
    fn new(retention: Retention) -> Disk {
        let clock = Arc::new(ManualClock::new(10_000));
        let options = StoreOptions {
            log: LogOptions {
                segment_bytes_max: 512,
                index_interval_bytes: 128,
                ..LogOptions::default()
            },
            retention,
            checkpoint_every: 3,
            clock: clock.clone(),
            ..StoreOptions::default()
        };
        Disk {
            sim: SimStorage::new(),
            options,
            clock,
        }
    }

    /// Opens the store, after a power cut if `crash` is given.
    fn open(&mut self, crash: Option<u64>) -> (Store, DurableTopic) {
        if let Some(seed) = crash {
            self.sim = self.sim.crash(seed);
        }
        open_topic(&self.sim, &self.options)
    }
}

fn not_owned<T: std::fmt::Debug>(result: Result<T, StoreError>) -> bool {
    matches!(result, Err(StoreError::Topic(TopicError::NotOwned { .. })))
}

// Proves a poison message stops being redelivered after max_attempts even though the
// broker restarts (cleanly or by power cut) between every attempt, with failures from
// nacks and from expired leases alike, and is dead-lettered exactly once.
#[test]
fn poison_message_stops_after_max_attempts_across_restarts() {
    let mut disk = Disk::new(Retention::default());
    let (store, topic) = disk.open(None);
    let config = GroupConfig::new(4)
        .with_lease_ms(100)
        .with_backoff(Backoff::Fixed { delay_ms: 5 });
    topic
        .create_group_with("g", StartPosition::Earliest, config)
        .unwrap();
    topic.publish(Bytes::from_static(b"poison")).unwrap();
    topic.publish(Bytes::from_static(b"fine")).unwrap();
    drop((store, topic));
    for attempt in 1..=4u32 {
        let (store, topic) = disk.open(Some(u64::from(attempt)));
        disk.clock.advance_ms(5);
        let delivery = topic.poll("g").unwrap().unwrap();
        assert_eq!((delivery.offset, delivery.attempt), (0, attempt));
        if attempt % 2 == 0 {
            assert!(topic.nack("g", delivery.id()).is_ok());
        } else {
            // Let the lease run out, then restart before anyone looks.
            disk.clock.advance_ms(100);
        }
        drop((store, topic));
    }
    let (_store, topic) = disk.open(Some(99));
    disk.clock.advance_ms(5);
    let next = topic.poll("g").unwrap().unwrap();
    assert_eq!((next.offset, next.attempt), (1, 1));
    let dead = topic.dead_letter_info("g").unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!((dead[0].offset, dead[0].attempts), (0, 4));
    assert_eq!(dead[0].message, Bytes::from_static(b"poison"));
    let counters = topic.group_counters("g").unwrap();
    assert_eq!((counters.expired_leases, counters.redeliveries), (2, 3));
}

// Proves an expired owner's ack fails after a restart too, the next poll is the next
// attempt, and the lease, consumer and reason settings come back from disk.
#[test]
fn expiry_and_settings_survive_a_restart() {
    let mut disk = Disk::new(Retention::default());
    let (store, topic) = disk.open(None);
    let config = GroupConfig::new(3).with_lease_ms(50).with_max_in_flight(2);
    topic
        .create_group_with("g", StartPosition::Earliest, config)
        .unwrap();
    topic.publish(Bytes::from_static(b"a")).unwrap();
    topic.publish(Bytes::from_static(b"b")).unwrap();
    let first = topic.poll_as("g", "w1").unwrap().unwrap();
    let other = topic.poll_as("g", "w2").unwrap().unwrap();
    drop((store, topic));
    disk.clock.advance_ms(40);
    let (store, topic) = disk.open(Some(7));
    assert_eq!(topic.group_config("g").unwrap(), config);
    assert_eq!(topic.poll_as("g", "w2").unwrap().unwrap().id(), other.id());
    topic.touch("g", other.id()).unwrap();
    disk.clock.advance_ms(10);
    drop((store, topic));
    let (_store, topic) = disk.open(None);
    assert!(not_owned(topic.ack("g", first.id())));
    topic.ack("g", other.id()).unwrap();
    let second = topic.poll_as("g", "w3").unwrap().unwrap();
    assert_eq!((second.offset, second.attempt), (0, 2));
}

// Proves redrive touches one group only, across a restart, and that a redriven message
// is delivered from its dead letter's own copy after retention deleted the original.
#[test]
fn redrive_touches_one_group_only_and_outlives_retention() {
    let retention = Retention {
        bytes_max: Some(600),
        ..Retention::default()
    };
    let mut disk = Disk::new(retention);
    let (store, topic) = disk.open(None);
    topic.create_group("g", 1).unwrap();
    topic.create_group("h", 1).unwrap();
    for i in 0..40u64 {
        topic
            .publish(Bytes::from(format!("message {i:03} {}", "x".repeat(40))))
            .unwrap();
    }
    for group in ["g", "h"] {
        let first = topic.poll(group).unwrap().unwrap();
        let reject = NackOptions::new(NackKind::Reject).with_reason("bad");
        assert_eq!(
            topic.nack_with(group, first.id(), reject).unwrap(),
            Nack::DeadLettered
        );
        while let Some(delivery) = topic.poll(group).unwrap() {
            topic.ack(group, delivery.id()).unwrap();
        }
    }
    assert!(store.enforce_retention(10_000).unwrap() > 0);
    assert!(topic.read(0).unwrap().is_none(), "offset 0 still retained");
    let h_before = (
        topic.group_info("h").unwrap(),
        topic.dead_letter_info("h").unwrap(),
    );
    assert_eq!(topic.redrive("g", 0..1).unwrap(), 1);
    drop((store, topic));
    let (_store, topic) = disk.open(Some(3));
    assert_eq!(
        (
            topic.group_info("h").unwrap(),
            topic.dead_letter_info("h").unwrap()
        ),
        h_before
    );
    assert_eq!(topic.poll("h").unwrap(), None);
    let again = topic.poll("g").unwrap().unwrap();
    assert_eq!((again.offset, again.attempt), (0, 2));
    assert!(again.message.starts_with(b"message 000"));
    assert!(not_owned(topic.ack(
        "g",
        DeliveryId {
            offset: 0,
            attempt: 1
        }
    )));
    topic.ack("g", again.id()).unwrap();
    assert!(topic.dead_letters("g").unwrap().is_empty());
    assert_eq!(topic.purge("h", 0..u64::MAX).unwrap(), 1);
    assert!(topic.dead_letters("h").unwrap().is_empty());
}
