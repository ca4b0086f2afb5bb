//! Per-topic retention: settings kept with the topic survive restarts and power cuts,
//! each topic is held to its own limits over the store-wide defaults, and nothing a
//! group has not finished is removed unless the topic allows it.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use mailroom_store::clock::ManualClock;
use mailroom_store::log::LogOptions;
use mailroom_store::storage::{SimStorage, Storage};
use mailroom_store::{
    DurableTopic, FailureKind, Limit, Retention, RetentionRemoved, StoreError, StoreOptions,
    TopicRetention,
};
use mailroom_testkit::store::{open_store, try_open_store};

fn options(retention: Retention) -> StoreOptions {
    StoreOptions {
        log: LogOptions {
            segment_bytes_max: 512,
            index_interval_bytes: 128,
            ..LogOptions::default()
        },
        retention,
        checkpoint_every: 8,
        clock: Arc::new(ManualClock::new(1_000)),
        ..StoreOptions::default()
    }
}

fn publish(topic: &DurableTopic, count: u64) {
    for _ in 0..count {
        topic
            .publish(Bytes::from(format!("message {}", "x".repeat(40))))
            .unwrap();
    }
}

fn keep(messages: u64) -> TopicRetention {
    TopicRetention {
        messages_max: Limit::Max(messages),
        ..TopicRetention::default()
    }
}

// Proves settings given at creation and changed later are on disk when the calls
// return: every power-cut image taken after them reopens with exactly those settings,
// and a topic without settings follows the (changed) store-wide defaults.
#[test]
fn settings_survive_restarts_and_power_cuts() {
    let sim = SimStorage::new();
    let options = options(Retention::default());
    let store = open_store(&sim, &options);
    let created = TopicRetention {
        age_ms_max: Limit::Max(60_000),
        bytes_max: Limit::Unlimited,
        messages_max: Limit::Default,
        keep_unconsumed: Some(false),
    };
    assert!(store.create_topic_with("kept", &created).unwrap());
    assert!(store.create_topic("plain").unwrap());
    for seed in 0..16 {
        let store = try_open_store(&sim.crash(seed), &options).unwrap();
        assert_eq!(store.topic("kept").unwrap().retention(), created);
        assert_eq!(
            store.topic("plain").unwrap().retention(),
            TopicRetention::default()
        );
    }
    let changed = keep(10);
    store.topic("kept").unwrap().set_retention(changed).unwrap();
    // A second create of an existing topic changes nothing.
    assert!(!store.create_topic_with("kept", &created).unwrap());
    for seed in 0..16 {
        let store = try_open_store(&sim.crash(seed), &options).unwrap();
        assert_eq!(store.topic("kept").unwrap().retention(), changed);
    }
    drop(store);
    let defaults = Retention {
        bytes_max: Some(4096),
        ..Retention::default()
    };
    let store = open_store(&sim, &self::options(defaults));
    let kept = store.topic("kept").unwrap().effective_retention();
    assert_eq!((kept.messages_max, kept.bytes_max), (Some(10), Some(4096)));
    let plain = store.topic("plain").unwrap().effective_retention();
    assert_eq!(plain, defaults);
}

// Proves a damaged settings file stops the open loudly instead of being read as other
// settings or as none.
#[test]
fn damaged_settings_file_is_corrupt() {
    let sim = SimStorage::new();
    let options = options(Retention::default());
    let store = open_store(&sim, &options);
    store.create_topic_with("t", &keep(3)).unwrap();
    drop(store);
    let path = Path::new("/store/topics/t/SETTINGS");
    let file = sim.open(path, false).unwrap();
    file.write_at(&[0xff], 30).unwrap();
    file.sync().unwrap();
    drop(file);
    // The store opens; the topic is failed as damaged, naming the file.
    let store = try_open_store(&sim, &options).unwrap();
    let failures = store.topic_failures();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0].kind, FailureKind::Damaged);
    assert_eq!(failures[0].path.as_deref(), Some(path));
    assert!(matches!(
        store.topic("t"),
        Err(StoreError::TopicFailed { .. })
    ));
}

// Proves each topic is held to its own limits over the store-wide default, and the
// counters of what was removed add up to what left the log.
#[test]
fn each_topic_keeps_its_own_limits() {
    let sim = SimStorage::new();
    let store = open_store(
        &sim,
        &options(Retention {
            bytes_max: Some(2_000),
            ..Retention::default()
        }),
    );
    store.create_topic("defaults").unwrap();
    store.create_topic_with("few", &keep(20)).unwrap();
    let unlimited = TopicRetention {
        bytes_max: Limit::Unlimited,
        ..TopicRetention::default()
    };
    store.create_topic_with("all", &unlimited).unwrap();
    let topics: Vec<DurableTopic> = ["defaults", "few", "all"]
        .iter()
        .map(|name| store.topic(name).unwrap())
        .collect();
    for topic in &topics {
        publish(topic, 200);
    }
    let before: Vec<u64> = topics.iter().map(DurableTopic::bytes).collect();
    assert!(store.enforce_retention(1_000).unwrap() > 0);

    let [defaults, few, all] = &topics[..] else {
        unreachable!()
    };
    // Whole segments go, so a limit is met to within one segment (512 bytes here).
    assert!(defaults.bytes() <= 2_000, "{}", defaults.bytes());
    assert!(defaults.bytes() > 2_000 - 512 - 100);
    assert!(few.len() - few.start() <= 20);
    assert!(few.len() - few.start() > 20 - 10);
    assert_eq!((all.start(), all.bytes()), (0, before[2]));
    for (topic, before) in topics.iter().zip(&before) {
        let removed = topic.retention_removed();
        assert_eq!(removed.messages, topic.start());
        assert_eq!(removed.bytes, before - topic.bytes());
        assert_eq!(removed.segments == 0, topic.start() == 0);
    }
    // A second pass at the same time finds nothing more.
    assert_eq!(store.enforce_retention(1_000).unwrap(), 0);
}

// Proves retention never passes the lowest group position by default, whatever the
// limits, and passes it only for a topic whose settings allow it.
#[test]
fn never_past_the_lowest_group_unless_allowed() {
    let sim = SimStorage::new();
    let store = open_store(&sim, &options(Retention::default()));
    store.create_topic_with("held", &keep(5)).unwrap();
    let passing = TopicRetention {
        keep_unconsumed: Some(false),
        ..keep(5)
    };
    store.create_topic_with("passed", &passing).unwrap();
    for name in ["held", "passed"] {
        let topic = store.topic(name).unwrap();
        topic.create_group("slow", 1).unwrap();
        publish(&topic, 100);
        let delivery = topic.poll("slow").unwrap().unwrap();
        topic.ack("slow", delivery.id()).unwrap();
    }
    store.enforce_retention(1_000).unwrap();
    let held = store.topic("held").unwrap();
    assert_eq!(held.start(), 0, "position 1 holds segment 0");
    assert_eq!(held.retention_removed(), RetentionRemoved::default());
    let passed = store.topic("passed").unwrap();
    assert!(passed.start() > 50, "start {}", passed.start());
    // Once the group moves on, the held topic catches up.
    while held.position("slow").unwrap() < 90 {
        let delivery = held.poll("slow").unwrap().unwrap();
        held.ack("slow", delivery.id()).unwrap();
    }
    held.enforce_retention(1_000).unwrap();
    assert!(held.start() > 50 && held.start() <= 90, "{}", held.start());
}
