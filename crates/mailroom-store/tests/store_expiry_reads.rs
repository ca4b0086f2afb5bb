//! Reads that make a due lease expiry durable first (`dead_letters`, `dead_letter_info`,
//! `dead_letter_page`, `group_info`, `in_flight`, ...) when that expiry dead-letters the
//! message: they must see the new dead letter with its payload, not read its record back
//! before it is written (which panicked in debug builds and fail-stopped the topic's
//! groups in release builds).

use std::sync::Arc;

use bytes::Bytes;
use mailroom::clock::ManualClock;
use mailroom::group::GroupConfig;
use mailroom::topic::StartPosition;
use mailroom_store::{DurableTopic, Store, StoreError, StoreOptions};

/// A topic whose group `g` (one attempt, 10 ms leases) has just let its only delivery's
/// lease run out on the final attempt; nothing has written that expiry yet.
fn expired_on_final_attempt(dir: &std::path::Path) -> (Store, DurableTopic) {
    let clock = Arc::new(ManualClock::new(0));
    let options = StoreOptions {
        clock: clock.clone(),
        ..StoreOptions::default()
    };
    let store = Store::open(dir, options).unwrap();
    store.create_topic("t").unwrap();
    let topic = store.topic("t").unwrap();
    let config = GroupConfig::new(1).with_lease_ms(10);
    topic
        .create_group_with("g", StartPosition::Earliest, config)
        .unwrap();
    topic.publish(Bytes::from_static(b"job")).unwrap();
    topic.poll_as("g", "c").unwrap().expect("a delivery");
    clock.advance_ms(10);
    (store, topic)
}

type Read = fn(&DurableTopic) -> Result<usize, StoreError>;

// Proves each read that applies due expiries reports the dead letter the expiry made
// (count 1, payload intact) and leaves the groups working.
#[test]
fn reads_see_the_dead_letter_an_expiry_makes() {
    let reads: [(&str, Read); 6] = [
        ("dead_letters", |t| Ok(t.dead_letters("g")?.len())),
        ("dead_letter_info", |t| Ok(t.dead_letter_info("g")?.len())),
        ("dead_letter_page", |t| {
            Ok(t.dead_letter_page("g", 0, 10)?.letters.len())
        }),
        ("group_info", |t| {
            Ok(t.group_info("g")?.dead_letters as usize)
        }),
        ("in_flight", |t| Ok(1 - t.in_flight("g")?.len())),
        ("position", |t| Ok(t.position("g")? as usize)),
    ];
    for (name, read) in reads {
        let dir = tempfile::tempdir().unwrap();
        let (_store, topic) = expired_on_final_attempt(dir.path());
        assert_eq!(read(&topic).unwrap(), 1, "{name}");
        let letters = topic.dead_letter_info("g").unwrap();
        assert_eq!(letters.len(), 1, "{name}");
        assert_eq!(letters[0].message, Bytes::from_static(b"job"), "{name}");
        // Still working: a publish and a poll after it.
        topic.publish(Bytes::from_static(b"next")).unwrap();
        assert!(topic.poll("g").unwrap().is_some(), "{name}");
    }
}
