//! The groups-log compaction threshold across reopens: a checkpoint compacts only when the
//! segments old dead letters pin hold more than `COMPACT_GARBAGE_FACTOR` times the live
//! dead letters' bytes, and that holds for the first checkpoint after a reopen too, not
//! only within one process.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use mailroom::group::{NackKind, NackOptions};
use mailroom::topic::Nack;
use mailroom_store::log::SyncPolicy;
use mailroom_store::storage::{SimStorage, Storage};
use mailroom_store::{DurableTopic, Store, StoreOptions};
use mailroom_testkit::store::{ack_traffic, compacting_options, open_store, STORE_DIR};

/// Dead letters of about 200 bytes each: 40 of them span about 8 one-KiB segments, well
/// past the 4 that compaction needs before it looks at bytes.
const DEAD_LETTERS: usize = 40;

/// Small segments, and checkpoints only when the test asks.
fn options() -> StoreOptions {
    compacting_options(u64::MAX, SyncPolicy::Always)
}

/// The groups log's segment files and their sizes.
fn groups_segments(sim: &SimStorage) -> BTreeMap<PathBuf, usize> {
    let dir = Path::new(STORE_DIR).join("topics/t/groups");
    sim.list_dir(&dir)
        .unwrap()
        .into_iter()
        .filter(|path| path.extension().is_some_and(|ext| ext == "log"))
        .map(|path| {
            let bytes = sim.file_bytes(&path).expect("a listed file").len();
            (path, bytes)
        })
        .collect()
}

/// Whether `store.checkpoint()` wrote dead-letter copies (about 9 KiB, in a segment of
/// their own); without them, a checkpoint only deletes old segments.
fn checkpoint_compacts(sim: &SimStorage, store: &Store) -> bool {
    let before = groups_segments(sim);
    store.checkpoint().unwrap();
    let after = groups_segments(sim);
    let unchanged = after
        .iter()
        .all(|(path, bytes)| before.get(path) == Some(bytes));
    !unchanged
}

fn payload(index: usize) -> Bytes {
    Bytes::from(format!("dead letter {index:03} {}", "x".repeat(180)))
}

fn dead_letter(topic: &DurableTopic, count: usize) {
    let reject = NackOptions::new(NackKind::Reject).with_reason("bad");
    for index in 0..count {
        topic.publish(payload(index)).unwrap();
        let delivery = topic
            .poll("g")
            .unwrap()
            .expect("the message just published");
        let nacked = topic.nack_with("g", delivery.id(), reject.clone()).unwrap();
        assert_eq!(nacked, Nack::DeadLettered);
    }
}

/// Publishes, polls and acks `count` messages: groups-log traffic that kills nothing.
fn traffic(topic: &DurableTopic, count: usize) {
    ack_traffic(topic, &["g"], b"traffic", count);
}

fn assert_dead_letters(topic: &DurableTopic) {
    let dead = topic.dead_letters("g").unwrap();
    let payloads: Vec<Bytes> = dead.into_iter().map(|dead| dead.message).collect();
    assert_eq!(payloads, (0..DEAD_LETTERS).map(payload).collect::<Vec<_>>());
}

// Proves the first checkpoint after a reopen does not copy the dead letters again when
// too little traffic came since the last compaction (as a checkpoint in the same process
// would not), and that it still compacts once enough traffic has come.
#[test]
fn a_reopen_does_not_reset_the_compaction_threshold() {
    let sim = SimStorage::new();
    let store = open_store(&sim, &options());
    store.create_topic("t").unwrap();
    let topic = store.topic("t").unwrap();
    topic.create_group("g", 1).unwrap();
    dead_letter(&topic, DEAD_LETTERS);
    traffic(&topic, 150);
    assert!(checkpoint_compacts(&sim, &store), "the first compaction");
    // The copies went to one segment in one append; this traffic adds a few more
    // segments (so compaction looks at bytes) but fewer bytes than the copies hold: not
    // worth copying them again.
    traffic(&topic, 50);
    assert!(!checkpoint_compacts(&sim, &store), "in the same process");
    drop(topic);
    drop(store);

    let store = open_store(&sim, &options());
    let topic = store.topic("t").unwrap();
    assert_dead_letters(&topic);
    assert!(
        !checkpoint_compacts(&sim, &store),
        "first checkpoint after reopen"
    );
    assert_dead_letters(&topic);
    traffic(&topic, 300);
    assert!(checkpoint_compacts(&sim, &store), "enough traffic came");
    assert_dead_letters(&topic);
}
