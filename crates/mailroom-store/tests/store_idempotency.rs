//! Idempotent publish in the durable store: a repeated idempotency key answers the first
//! publish's offset and stores nothing, while the key is in the window by count and by
//! time; past it the message is stored again; the window is rebuilt from the log at open;
//! of concurrent publishes of one key exactly one stores.

use std::sync::{Arc, Barrier};

use bytes::Bytes;
use mailroom::topic::Metadata;
use mailroom_store::clock::ManualClock;
use mailroom_store::{
    DurableTopic, IdempotencyWindow, NewMessage, Store, StoreError, StoreOptions, Stored,
    TopicIdempotency, TopicRetention,
};

fn once(payload: &'static str, key: &str) -> NewMessage {
    NewMessage {
        payload: Bytes::from_static(payload.as_bytes()),
        metadata: Metadata::new().with_idempotency_key(key),
    }
}

fn stored(offset: u64) -> Stored {
    Stored {
        offset,
        duplicate: false,
    }
}

fn repeat(offset: u64) -> Stored {
    Stored {
        offset,
        duplicate: true,
    }
}

fn options(clock: &Arc<ManualClock>, messages_max: u64, age_ms_max: u64) -> StoreOptions {
    StoreOptions {
        clock: clock.clone(),
        idempotency: IdempotencyWindow {
            messages_max,
            age_ms_max,
        },
        ..StoreOptions::default()
    }
}

fn topic_in(store: &Store) -> DurableTopic {
    if store.topic("t").is_err() {
        store.create_topic("t").unwrap();
    }
    store.topic("t").unwrap()
}

// Proves a repeat answers the first offset with duplicate set and stores nothing, in
// later publishes and inside one batch, beside messages without keys.
#[test]
fn a_repeated_key_is_stored_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    let topic = topic_in(&store);
    let bare = NewMessage::bare(Bytes::from_static(b"bare"));
    let first = topic
        .publish_once(&[once("a", "k1"), bare.clone(), once("a again", "k1")])
        .unwrap();
    assert_eq!(first, [stored(0), stored(1), repeat(0)]);
    let again = topic
        .publish_once(&[once("b", "k2"), once("a", "k1")])
        .unwrap();
    assert_eq!(again, [stored(2), repeat(0)]);
    assert_eq!(topic.len(), 3);
    assert_eq!(&topic.read(0).unwrap().unwrap()[..], b"a");
    // publish_messages goes through the window too; its range covers what it stored.
    assert_eq!(topic.publish_messages(&[once("c", "k1")]).unwrap(), 3..3);
    assert_eq!(topic.publish_messages(&[once("c", "k3")]).unwrap(), 3..4);
}

// Proves the window by count: a key is remembered while its publish is among the last
// `messages_max` messages, and stored again once it is not.
#[test]
fn the_window_by_count() {
    let clock = Arc::new(ManualClock::new(1_000));
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), options(&clock, 3, 60_000)).unwrap();
    let topic = topic_in(&store);
    assert_eq!(topic.publish_once(&[once("a", "k")]).unwrap(), [stored(0)]);
    topic
        .publish_batch(&vec![Bytes::from_static(b"x"); 2])
        .unwrap();
    // Offset 0 is among the last 3 of 0..3.
    assert_eq!(topic.publish_once(&[once("a", "k")]).unwrap(), [repeat(0)]);
    topic.publish(Bytes::from_static(b"y")).unwrap();
    // Not among the last 3 of 0..4: stored again, and that publish is the one repeats answer.
    assert_eq!(topic.publish_once(&[once("a", "k")]).unwrap(), [stored(4)]);
    assert_eq!(topic.publish_once(&[once("a", "k")]).unwrap(), [repeat(4)]);
}

// Proves the window by time: a key is remembered for `age_ms_max` after its publish
// (the simulated clock), and stored again after that.
#[test]
fn the_window_by_time() {
    let clock = Arc::new(ManualClock::new(1_000));
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), options(&clock, 1000, 500)).unwrap();
    let topic = topic_in(&store);
    assert_eq!(topic.publish_once(&[once("a", "k")]).unwrap(), [stored(0)]);
    clock.advance_ms(500);
    assert_eq!(topic.publish_once(&[once("a", "k")]).unwrap(), [repeat(0)]);
    clock.advance_ms(1);
    assert_eq!(topic.publish_once(&[once("a", "k")]).unwrap(), [stored(1)]);
}

// Proves the window is rebuilt at open from the log's records (by count and by time), so
// a retry after a restart is still a repeat, and one past the window is not.
#[test]
fn the_window_survives_a_restart() {
    let clock = Arc::new(ManualClock::new(1_000));
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::open(dir.path(), options(&clock, 3, 500)).unwrap();
        let topic = topic_in(&store);
        topic.publish_once(&[once("a", "old")]).unwrap();
        clock.advance_ms(100);
        topic
            .publish_once(&[once("b", "new"), once("c", "far")])
            .unwrap();
        topic
            .publish_batch(&vec![Bytes::from_static(b"x"); 2])
            .unwrap();
    }
    clock.advance_ms(450);
    let store = Store::open(dir.path(), options(&clock, 3, 500)).unwrap();
    let topic = topic_in(&store);
    // 0..5 written: "old" at 0 (too far and too old), "new" at 1 (too far), "far" at 2.
    let answers = topic
        .publish_once(&[once("a", "old"), once("b", "new"), once("c", "far")])
        .unwrap();
    assert_eq!(answers, [stored(5), stored(6), repeat(2)]);
}

// Proves of many concurrent publishes of one key exactly one stores and all answer its
// offset.
#[test]
fn concurrent_repeats_store_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    let topic = topic_in(&store);
    let threads = 8;
    let barrier = Arc::new(Barrier::new(threads));
    let answers: Vec<Stored> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let (topic, barrier) = (topic.clone(), barrier.clone());
                scope.spawn(move || {
                    barrier.wait();
                    topic.publish_once(&[once("a", "same")]).unwrap()[0]
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(topic.len(), 1);
    assert_eq!(answers.iter().filter(|a| !a.duplicate).count(), 1);
    assert!(answers.iter().all(|a| a.offset == 0));
}

// Proves a window outside its limits is refused at open, naming the field.
#[test]
fn a_window_out_of_range_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    for (options, field) in [
        (options(&clock, 0, 1), "messages_max"),
        (options(&clock, 1, u64::MAX), "age_ms_max"),
    ] {
        match Store::open(dir.path(), options) {
            Err(StoreError::InvalidArgument { reason }) => assert!(reason.contains(field)),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
}

// Proves a topic's own window (by count here, by time in the store's default) holds
// for that topic only, is kept across a restart (in force and as the topic's own, with
// the rebuilt keys following it), a topic without one follows the store's default even
// when that changes, and a window out of range is refused before anything is created.
#[test]
fn a_topic_window_of_its_own_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_000));
    let own = TopicIdempotency {
        messages_max: Some(2),
        age_ms_max: None,
    };
    let store = Store::open(dir.path(), options(&clock, 100, 60_000)).unwrap();
    store
        .create_topic_with_window("small", &TopicRetention::default(), &own)
        .unwrap();
    store.create_topic("plain").unwrap();
    for name in ["small", "plain"] {
        let topic = store.topic(name).unwrap();
        assert_eq!(topic.publish_once(&[once("a", "k")]).unwrap(), [stored(0)]);
        topic.publish_batch(&[Bytes::from_static(b"x")]).unwrap();
    }
    let small = store.topic("small").unwrap();
    assert_eq!(
        small.idempotency_window(),
        IdempotencyWindow {
            messages_max: 2,
            age_ms_max: 60_000
        }
    );
    assert_eq!(small.publish_once(&[once("a", "k")]).unwrap(), [repeat(0)]);
    drop((small, store));

    // The store's default changes; the topic's own count stays, its time follows.
    let store = Store::open(dir.path(), options(&clock, 50, 30_000)).unwrap();
    let small = store.topic("small").unwrap();
    assert_eq!(small.own_idempotency(), own);
    assert_eq!(
        small.idempotency_window(),
        IdempotencyWindow {
            messages_max: 2,
            age_ms_max: 30_000
        }
    );
    assert_eq!(small.publish_once(&[once("a", "k")]).unwrap(), [repeat(0)]);
    small.publish_batch(&[Bytes::from_static(b"y")]).unwrap();
    // Offset 0 is no longer among the last 2 of 3: the key is stored again.
    assert_eq!(small.publish_once(&[once("a", "k")]).unwrap(), [stored(3)]);
    let plain = store.topic("plain").unwrap();
    assert_eq!(plain.own_idempotency(), TopicIdempotency::default());
    assert_eq!(plain.idempotency_window().messages_max, 50);
    plain.publish_batch(&[Bytes::from_static(b"y")]).unwrap();
    assert_eq!(plain.publish_once(&[once("a", "k")]).unwrap(), [repeat(0)]);

    let zero = TopicIdempotency {
        messages_max: None,
        age_ms_max: Some(0),
    };
    let refused = store.create_topic_with_window("bad", &TopicRetention::default(), &zero);
    assert!(
        matches!(&refused, Err(StoreError::InvalidArgument { reason }) if reason.contains("age_ms_max")),
        "{refused:?}"
    );
    assert!(store.topic("bad").is_err(), "nothing was created");
}
