//! `DurableTopic::next_due_in`: how long until a poll finds something by the clock alone
//! (a retry delay ending, a lease running out), read on the store's own clock from the
//! group's state in memory, and the same after a restart.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use mailroom::clock::ManualClock;
use mailroom::group::{Backoff, GroupConfig, NackKind, NackOptions};
use mailroom::topic::{StartPosition, TopicError};
use mailroom_store::storage::SimStorage;
use mailroom_store::{DurableTopic, Store, StoreError, StoreOptions};
use mailroom_testkit::store::open_topic;

fn ms(ms: u64) -> Option<Duration> {
    Some(Duration::from_millis(ms))
}

/// The store and topic `t` on `sim`, reading `clock` (the tests start it at 10,000 ms).
fn open(sim: &SimStorage, clock: &Arc<ManualClock>) -> (Store, DurableTopic) {
    let options = StoreOptions {
        clock: clock.clone(),
        ..StoreOptions::default()
    };
    open_topic(sim, &options)
}

// Proves a nack's retry delay is reported counting down on the store's clock, as zero
// once over (not None: the message is due), and not at all once it is delivered again.
#[test]
fn retry_delay_counts_down_to_zero() {
    let (sim, clock) = (SimStorage::new(), Arc::new(ManualClock::new(10_000)));
    let (_store, topic) = open(&sim, &clock);
    topic.create_group("g", 3).unwrap();
    assert_eq!(topic.next_due_in("g").unwrap(), None);
    topic.publish(Bytes::from_static(b"m")).unwrap();
    assert_eq!(
        topic.next_due_in("g").unwrap(),
        None,
        "a publish is not a due time"
    );
    let first = topic.poll("g").unwrap().unwrap();
    let nack = NackOptions::new(NackKind::Nack).with_delay_ms(700);
    topic.nack_with("g", first.id(), nack).unwrap();
    assert_eq!(topic.next_due_in("g").unwrap(), ms(700));
    clock.advance_ms(699);
    assert_eq!(topic.next_due_in("g").unwrap(), ms(1));
    assert!(topic.poll("g").unwrap().is_none());
    clock.advance_ms(1);
    assert_eq!(topic.next_due_in("g").unwrap(), ms(0));
    clock.advance_ms(5_000);
    assert_eq!(topic.next_due_in("g").unwrap(), ms(0));
    let again = topic.poll("g").unwrap().unwrap();
    assert_eq!(again.attempt, 2);
    assert_eq!(
        topic.next_due_in("g").unwrap(),
        None,
        "no lease: nothing due"
    );
}

// Proves a lease's deadline is reported; once it has run out it is reported as due now
// (next_due_in expires nothing: it writes nothing), and after the poll that expires it,
// the expired message's backoff end (a time still ahead).
#[test]
fn lease_deadline_then_backoff_after_expiry() {
    let (sim, clock) = (SimStorage::new(), Arc::new(ManualClock::new(10_000)));
    let (_store, topic) = open(&sim, &clock);
    let config = GroupConfig::new(3)
        .with_lease_ms(1_000)
        .with_backoff(Backoff::Fixed { delay_ms: 700 });
    topic
        .create_group_with("g", StartPosition::Earliest, config)
        .unwrap();
    topic.publish(Bytes::from_static(b"m")).unwrap();
    topic.poll("g").unwrap().unwrap();
    clock.advance_ms(400);
    assert_eq!(topic.next_due_in("g").unwrap(), ms(600));
    // Run out at 11,000; ready again at 11,700; asked at 11,500.
    clock.advance_ms(1_100);
    assert_eq!(topic.next_due_in("g").unwrap(), ms(0));
    assert!(
        topic.poll("g").unwrap().is_none(),
        "expired, waiting out its backoff"
    );
    assert_eq!(topic.group_counters("g").unwrap().expired_leases, 1);
    assert_eq!(topic.next_due_in("g").unwrap(), ms(200));
    clock.advance_ms(200);
    assert_eq!(topic.poll("g").unwrap().unwrap().attempt, 2);
}

// Proves the earliest of several due times wins, per group: a second group's sooner
// lease does not leak into the first's answer.
#[test]
fn earliest_due_time_of_the_group_itself() {
    let (sim, clock) = (SimStorage::new(), Arc::new(ManualClock::new(10_000)));
    let (_store, topic) = open(&sim, &clock);
    let slow = GroupConfig::new(3)
        .with_lease_ms(5_000)
        .with_max_in_flight(2);
    let fast = GroupConfig::new(3).with_lease_ms(100);
    for (group, config) in [("slow", slow), ("fast", fast)] {
        topic
            .create_group_with(group, StartPosition::Earliest, config)
            .unwrap();
    }
    topic.publish(Bytes::from_static(b"a")).unwrap();
    topic.publish(Bytes::from_static(b"b")).unwrap();
    let a = topic.poll("slow").unwrap().unwrap();
    clock.advance_ms(1_000);
    topic.poll("slow").unwrap().unwrap();
    topic.poll("fast").unwrap().unwrap();
    assert_eq!(topic.next_due_in("slow").unwrap(), ms(4_000));
    assert_eq!(topic.next_due_in("fast").unwrap(), ms(100));
    // Offset 0 released with a delay of 1,500: sooner than offset 1's lease.
    let release = NackOptions::new(NackKind::Release).with_delay_ms(1_500);
    topic.nack_with("slow", a.id(), release).unwrap();
    assert_eq!(topic.next_due_in("slow").unwrap(), ms(1_500));
}

// Proves the due times come back after a restart (they are part of the durable state,
// replayed from the groups log).
#[test]
fn due_time_survives_a_restart() {
    let (sim, clock) = (SimStorage::new(), Arc::new(ManualClock::new(10_000)));
    {
        let (_store, topic) = open(&sim, &clock);
        let config = GroupConfig::new(3).with_lease_ms(2_000);
        topic
            .create_group_with("g", StartPosition::Earliest, config)
            .unwrap();
        topic.publish(Bytes::from_static(b"m")).unwrap();
        topic.poll("g").unwrap().unwrap();
    }
    clock.advance_ms(500);
    let (_store, topic) = open(&sim, &clock);
    assert_eq!(topic.next_due_in("g").unwrap(), ms(1_500));
}

// Proves an unknown group is a typed error, not a panic or a `None`.
#[test]
fn unknown_group_is_an_error() {
    let (sim, clock) = (SimStorage::new(), Arc::new(ManualClock::new(10_000)));
    let (_store, topic) = open(&sim, &clock);
    let error = topic.next_due_in("nope").unwrap_err();
    assert!(
        matches!(error, StoreError::Topic(TopicError::UnknownGroup { ref group }) if group == "nope"),
        "{error:?}"
    );
}
