//! Regression tests for issue 18's "one damaged file stops every topic": damage in a
//! topic's own files fails that topic only, says where and why, and a repair brings it
//! back without handing out an offset that was confirmed.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use mailroom::topic::StartPosition;
use mailroom_store::{FailureKind, Limit, Store, StoreError, StoreOptions, TopicRetention};

/// The per-topic files a flipped byte can damage, with the byte to flip.
#[derive(Debug, Clone, Copy)]
enum Damaged {
    /// A confirmed record of the message log.
    MessageRecord,
    /// The groups' checkpoint.
    Checkpoint,
    /// The topic's marker.
    TopicMarker,
    /// A confirmed record of the groups log.
    GroupsRecord,
    /// The topic's own retention.
    Settings,
}

impl Damaged {
    const ALL: [Damaged; 5] = [
        Damaged::MessageRecord,
        Damaged::Checkpoint,
        Damaged::TopicMarker,
        Damaged::GroupsRecord,
        Damaged::Settings,
    ];

    /// The file and the byte in it to flip (past the first record's 21-byte header,
    /// for the logs: inside a payload).
    fn target(self, topic: &Path) -> (PathBuf, usize) {
        let segment = "00000000000000000000.log";
        match self {
            Damaged::MessageRecord => (topic.join("messages").join(segment), 30),
            Damaged::Checkpoint => (topic.join("CHECKPOINT"), 12),
            Damaged::TopicMarker => (topic.join("TOPIC"), 1),
            Damaged::GroupsRecord => (topic.join("groups").join(segment), 30),
            Damaged::Settings => (topic.join("SETTINGS"), 10),
        }
    }

    /// The name the failure's reason must carry.
    fn named_in_reason(self) -> &'static str {
        match self {
            Damaged::MessageRecord => "messages",
            Damaged::Checkpoint => "CHECKPOINT",
            Damaged::TopicMarker => "TOPIC",
            Damaged::GroupsRecord => "groups",
            Damaged::Settings => "SETTINGS",
        }
    }
}

fn flip(path: &Path, at: usize) {
    let mut bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        at < bytes.len(),
        "{} has {} bytes",
        path.display(),
        bytes.len()
    );
    bytes[at] ^= 0x10;
    std::fs::write(path, bytes).unwrap();
}

/// A store with topics `healthy` and `hurt`, each with three confirmed messages and a
/// group `g` that acked the first; `hurt` keeps its own retention (a SETTINGS file) and a
/// checkpoint.
fn build(dir: &Path) {
    let store = Store::open(dir, StoreOptions::default()).unwrap();
    let retention = TopicRetention {
        messages_max: Limit::Max(1_000),
        ..TopicRetention::default()
    };
    store.create_topic("healthy").unwrap();
    store.create_topic_with("hurt", &retention).unwrap();
    for name in ["healthy", "hurt"] {
        let topic = store.topic(name).unwrap();
        topic
            .create_group_at("g", 1, StartPosition::Earliest)
            .unwrap();
        for i in 0..3u8 {
            topic.publish(Bytes::from(vec![b'a' + i; 64])).unwrap();
        }
        let delivery = topic.poll("g").unwrap().unwrap();
        topic.ack("g", delivery.id()).unwrap();
    }
    store.checkpoint().unwrap();
    // Group records after the checkpoint too, so the groups log is replayed.
    let hurt = store.topic("hurt").unwrap();
    let delivery = hurt.poll("g").unwrap().unwrap();
    hurt.ack("g", delivery.id()).unwrap();
}

// Proves a flipped byte in each kind of per-topic file fails only that topic: the
// store opens, the healthy topic reads and publishes, the damaged one answers
// TopicFailed naming the file, and a repair brings it back without reusing a confirmed
// offset.
#[test]
fn a_damaged_topic_beside_healthy_ones() {
    for damaged in Damaged::ALL {
        let dir = tempfile::tempdir().unwrap();
        build(dir.path());
        let (path, at) = damaged.target(&dir.path().join("topics/hurt"));
        flip(&path, at);

        let store = Store::open(dir.path(), StoreOptions::default())
            .unwrap_or_else(|e| panic!("{damaged:?}: the store must open: {e}"));
        let healthy = store.topic("healthy").unwrap();
        assert_eq!(healthy.read(0).unwrap().unwrap(), vec![b'a'; 64]);
        assert_eq!(healthy.publish(Bytes::from_static(b"more")).unwrap(), 3);
        assert_eq!(store.topics(), ["healthy", "hurt"], "{damaged:?}");

        let failures = store.topic_failures();
        assert_eq!(failures.len(), 1, "{damaged:?}: {failures:?}");
        assert_eq!(failures[0].topic, "hurt");
        assert_eq!(failures[0].kind, FailureKind::Damaged, "{damaged:?}");
        let reason = &failures[0].reason;
        assert!(
            reason.contains(damaged.named_in_reason()),
            "{damaged:?}: {reason}"
        );
        match store.topic("hurt") {
            Err(StoreError::TopicFailed { topic, reason: r }) => {
                assert_eq!((topic.as_str(), &r), ("hurt", reason));
            }
            other => panic!("{damaged:?}: {other:?}"),
        }
        // A failed topic's name is not free: creating it again is refused, not a wipe.
        assert!(matches!(
            store.create_topic("hurt"),
            Err(StoreError::TopicFailed { .. })
        ));
        // Reopening does not cure damage.
        assert!(store.recover_topic("hurt").is_err(), "{damaged:?}");

        let repaired = store.repair_topic("hurt").unwrap().expect("it was damaged");
        assert!(!repaired.actions.is_empty(), "{damaged:?}");
        assert!(store.topic_failures().is_empty(), "{damaged:?}");
        let hurt = store.topic("hurt").unwrap();
        let next = hurt.publish(Bytes::from_static(b"after repair")).unwrap();
        assert!(next >= 3, "{damaged:?}: offset {next} was confirmed before");
        drop((hurt, healthy, store));
        // The repair is durable: the store opens with both topics serving.
        let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
        assert!(store.topic_failures().is_empty(), "{damaged:?}");
        assert_eq!(store.topic("hurt").unwrap().len(), next + 1, "{damaged:?}");
    }
}

// Proves a checkpoint's damage costs nothing when the groups log still holds the whole
// history: the repair replays it and the group keeps its position.
#[test]
fn a_damaged_checkpoint_is_rebuilt_from_the_groups_log() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let (path, at) = Damaged::Checkpoint.target(&dir.path().join("topics/hurt"));
    flip(&path, at);
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    store.repair_topic("hurt").unwrap().expect("it was damaged");
    assert_eq!(store.topic("hurt").unwrap().position("g").unwrap(), 2);
}

// Proves a file the store cannot read (here a directory where CHECKPOINT should be) fails
// its topic as unreadable, not damaged, and reopening heals it once the file is back.
#[test]
fn an_unreadable_file_fails_its_topic_until_it_is_fixed() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let checkpoint = dir.path().join("topics/hurt/CHECKPOINT");
    let elsewhere = tempfile::tempdir().unwrap();
    let kept = elsewhere.path().join("CHECKPOINT");
    std::fs::rename(&checkpoint, &kept).unwrap();
    std::fs::create_dir(&checkpoint).unwrap();
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    let failures = store.topic_failures();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0].kind, FailureKind::Unreadable, "{failures:?}");
    assert!(store.topic("healthy").is_ok());
    assert_eq!(store.recover_topics(), Vec::<String>::new());

    std::fs::remove_dir(&checkpoint).unwrap();
    std::fs::rename(&kept, &checkpoint).unwrap();
    assert_eq!(store.recover_topics(), ["hurt"]);
    assert_eq!(store.topic("hurt").unwrap().position("g").unwrap(), 2);
}

// Proves damage to a store-wide file still stops the whole store, with a message that
// says what to do.
#[test]
fn damage_to_the_store_marker_stops_the_store_and_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    flip(&dir.path().join("STORE"), 0);
    let error = Store::open(dir.path(), StoreOptions::default()).unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("STORE") && text.contains("store-wide"),
        "{text}"
    );
}
