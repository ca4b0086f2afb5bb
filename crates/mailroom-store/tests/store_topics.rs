//! Topics and groups of a store: durable creation and deletion, names, handles, start
//! positions, and concurrent groups on real threads.

use std::path::Path;

use bytes::Bytes;
use mailroom::topic::{StartPosition, TopicError};
use mailroom_store::storage::{SimStorage, Storage};
use mailroom_store::{Store, StoreError, StoreOptions};
use mailroom_testkit::store::open_store;

// Proves topic and group creation and deletion are durable the moment they return: a
// power cut right after each leaves exactly what was confirmed.
#[test]
fn topic_and_group_changes_survive_a_power_cut() {
    let sim = SimStorage::new();
    let store = open_store(&sim, &StoreOptions::default());
    assert!(store.create_topic("orders").unwrap());
    assert!(!store.create_topic("orders").unwrap());
    store.create_topic("audit").unwrap();
    let orders = store.topic("orders").unwrap();
    orders.create_group("billing", 3).unwrap();
    orders.create_group("shipping", 1).unwrap();
    orders.publish(Bytes::from_static(b"o1")).unwrap();
    let crashed = sim.crash(1);
    let after = open_store(&crashed, &StoreOptions::default());
    assert_eq!(after.topics(), ["audit", "orders"]);
    assert_eq!(
        after.topic("orders").unwrap().groups(),
        ["billing", "shipping"]
    );

    orders.delete_group("billing").unwrap();
    store.delete_topic("audit").unwrap();
    let after = open_store(&sim.crash(2), &StoreOptions::default());
    assert_eq!(after.topics(), ["orders"]);
    let orders_after = after.topic("orders").unwrap();
    assert_eq!(orders_after.groups(), ["shipping"]);
    assert_eq!(orders_after.read(0).unwrap().unwrap(), &b"o1"[..]);
}

// Proves a deleted name can be reused and starts empty, even across a restart, and that
// old handles are refused rather than acting on the new topic or group.
#[test]
fn deleted_names_start_fresh_and_old_handles_are_refused() {
    let sim = SimStorage::new();
    let store = open_store(&sim, &StoreOptions::default());
    store.create_topic("t").unwrap();
    let old = store.topic("t").unwrap();
    old.create_group("g", 2).unwrap();
    old.publish(Bytes::from_static(b"x")).unwrap();
    let delivery = old.poll("g").unwrap().unwrap();
    old.delete_group("g").unwrap();
    assert!(matches!(
        old.ack("g", delivery.id()),
        Err(StoreError::Topic(TopicError::UnknownGroup { .. }))
    ));
    old.create_group("g", 2).unwrap();
    assert_eq!(old.group_info("g").unwrap().attempt, 0);

    store.delete_topic("t").unwrap();
    assert!(matches!(
        old.publish(Bytes::new()),
        Err(StoreError::UnknownTopic { .. })
    ));
    assert!(matches!(
        store.topic("t"),
        Err(StoreError::UnknownTopic { .. })
    ));
    assert!(matches!(
        store.delete_topic("t"),
        Err(StoreError::UnknownTopic { .. })
    ));
    store.create_topic("t").unwrap();
    assert!(store.topic("t").unwrap().is_empty());
    drop((store, old));
    let store = open_store(&sim, &StoreOptions::default());
    let topic = store.topic("t").unwrap();
    assert!(topic.is_empty());
    assert!(topic.groups().is_empty());
}

// Proves names outside the store's alphabet are refused with InvalidName and the
// in-memory topic's argument rules give the same errors as there.
#[test]
fn names_and_arguments_are_checked() {
    let sim = SimStorage::new();
    let store = open_store(&sim, &StoreOptions::default());
    for bad in ["", ".", "..", "a/b", "x y", &"n".repeat(129)] {
        assert!(
            matches!(store.create_topic(bad), Err(StoreError::InvalidName { .. })),
            "{bad:?}"
        );
    }
    store.create_topic("t").unwrap();
    let topic = store.topic("t").unwrap();
    let invalid = |result| {
        matches!(
            result,
            Err(StoreError::Topic(TopicError::InvalidArgument { .. }))
        )
    };
    assert!(invalid(topic.create_group("", 1)));
    assert!(invalid(topic.create_group("g", 0)));
    assert!(matches!(
        topic.create_group("g/h", 1),
        Err(StoreError::InvalidName { .. })
    ));
    topic.create_group("g", 1).unwrap();
    assert!(matches!(
        topic.create_group("g", 1),
        Err(StoreError::Topic(TopicError::GroupExists { .. }))
    ));
    assert!(matches!(
        topic.poll("nope"),
        Err(StoreError::Topic(TopicError::UnknownGroup { .. }))
    ));
}

// Proves the start positions: earliest, latest, a given offset, and an offset past the
// end refused.
#[test]
fn groups_start_where_asked() {
    let sim = SimStorage::new();
    let store = open_store(&sim, &StoreOptions::default());
    store.create_topic("t").unwrap();
    let topic = store.topic("t").unwrap();
    for i in 0..3u8 {
        topic.publish(Bytes::from(vec![i])).unwrap();
    }
    topic
        .create_group_at("early", 1, StartPosition::Earliest)
        .unwrap();
    topic
        .create_group_at("late", 1, StartPosition::Latest)
        .unwrap();
    topic
        .create_group_at("mid", 1, StartPosition::Offset(2))
        .unwrap();
    assert!(matches!(
        topic.create_group_at("future", 1, StartPosition::Offset(4)),
        Err(StoreError::Topic(TopicError::InvalidArgument { .. }))
    ));
    drop((store, topic));
    let topic = open_store(&sim, &StoreOptions::default())
        .topic("t")
        .unwrap();
    assert_eq!(topic.position("early").unwrap(), 0);
    assert_eq!(topic.position("late").unwrap(), 3);
    assert_eq!(topic.poll("mid").unwrap().unwrap().message, vec![2u8]);
    assert_eq!(topic.poll("late").unwrap(), None);
}

// Proves a topic directory without its marker (an interrupted create or delete) is
// removed on open instead of being half-trusted.
#[test]
fn unfinished_topic_directories_are_cleaned_up() {
    let sim = SimStorage::new();
    drop(open_store(&sim, &StoreOptions::default()));
    sim.create_dir_all(Path::new("/store/topics/half/messages"))
        .unwrap();
    let store = open_store(&sim, &StoreOptions::default());
    assert!(store.topics().is_empty());
    assert!(!sim.exists(Path::new("/store/topics/half")).unwrap());
}

// Proves groups are independent under real concurrency: one thread per group polls and
// acks while another thread publishes, and every group sees every offset exactly once,
// in order, with group commit shared between them.
#[test]
fn concurrent_groups_each_see_every_message_once_in_order() {
    const MESSAGES: u64 = 150;
    const GROUPS: usize = 4;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    store.create_topic("t").unwrap();
    let topic = store.topic("t").unwrap();
    for g in 0..GROUPS {
        topic.create_group(&format!("g{g}"), 1).unwrap();
    }
    std::thread::scope(|scope| {
        let publisher = topic.clone();
        scope.spawn(move || {
            for i in 0..MESSAGES {
                publisher
                    .publish(Bytes::from(i.to_le_bytes().to_vec()))
                    .unwrap();
            }
        });
        for g in 0..GROUPS {
            let topic = topic.clone();
            scope.spawn(move || {
                let group = format!("g{g}");
                let mut next = 0;
                while next < MESSAGES {
                    // Spin until the publisher gets ahead; poll is the condition itself.
                    let Some(delivery) = topic.poll(&group).unwrap() else {
                        std::thread::yield_now();
                        continue;
                    };
                    assert_eq!(delivery.offset, next);
                    assert_eq!(delivery.message, next.to_le_bytes().to_vec());
                    topic.ack(&group, delivery.id()).unwrap();
                    next += 1;
                }
            });
        }
    });
    drop((store, topic));
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    let topic = store.topic("t").unwrap();
    for g in 0..GROUPS {
        assert_eq!(topic.position(&format!("g{g}")).unwrap(), MESSAGES);
    }
}

// Proves two threads racing on one group settle each offset exactly once: of the two
// acks for the same delivery, exactly one wins.
#[test]
fn racing_consumers_ack_each_offset_once() {
    const MESSAGES: u64 = 60;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    store.create_topic("t").unwrap();
    let topic = store.topic("t").unwrap();
    topic.create_group("g", 1).unwrap();
    let payloads: Vec<Bytes> = (0..MESSAGES).map(|i| Bytes::from(vec![i as u8])).collect();
    topic.publish_batch(&payloads).unwrap();
    let wins: Vec<Vec<u64>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let topic = topic.clone();
                scope.spawn(move || {
                    let mut won = Vec::new();
                    while let Some(delivery) = topic.poll("g").unwrap() {
                        match topic.ack("g", delivery.id()) {
                            Ok(()) => won.push(delivery.offset),
                            Err(StoreError::Topic(TopicError::NotOwned { .. })) => {}
                            Err(other) => panic!("{other}"),
                        }
                    }
                    won
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let mut all: Vec<u64> = wins.concat();
    all.sort_unstable();
    assert_eq!(all, (0..MESSAGES).collect::<Vec<_>>());
}

// Proves the store caps groups per topic at the in-memory topic's GROUPS_MAX, with the same
// error, and that deleting one frees a place.
#[test]
fn groups_per_topic_are_capped_like_the_in_memory_topic() {
    let sim = SimStorage::new();
    let mut options = StoreOptions::default();
    options.log.sync = mailroom_store::log::SyncPolicy::Never;
    options.checkpoint_every = u64::MAX;
    let store = open_store(&sim, &options);
    store.create_topic("t").unwrap();
    let topic = store.topic("t").unwrap();
    for n in 0..mailroom::topic::GROUPS_MAX {
        topic.create_group(&format!("g{n}"), 1).unwrap();
    }
    let refused = topic.create_group("one-too-many", 1).unwrap_err();
    assert!(
        matches!(
            refused,
            StoreError::Topic(TopicError::InvalidArgument { .. })
        ),
        "{refused:?}"
    );
    topic.delete_group("g0").unwrap();
    topic.create_group("one-too-many", 1).unwrap();
}
