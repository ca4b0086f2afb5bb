//! Faults and bad input around a store: locks, foreign and corrupt files, failed syncs,
//! full and read-only disks. Each gets a clear error, and nothing confirmed is lost.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use mailroom_store::log::LogOptions;
use mailroom_store::storage::{SimStorage, Storage};
use mailroom_store::{FailureKind, Store, StoreError, StoreOptions};
use mailroom_testkit::store::try_open_store;

fn small_segments(checkpoint_every: u64) -> StoreOptions {
    StoreOptions {
        log: LogOptions {
            segment_bytes_max: 256,
            index_interval_bytes: 64,
            ..LogOptions::default()
        },
        checkpoint_every,
        ..StoreOptions::default()
    }
}

/// A store with topic `t`, group `g` (max 2 attempts), 20 messages, 5 acked, one
/// dead letter at offset 5 and a delivery of offset 6 in flight.
fn populated(sim: &SimStorage, options: &StoreOptions) -> Store {
    let store = try_open_store(sim, options).unwrap();
    store.create_topic("t").unwrap();
    let topic = store.topic("t").unwrap();
    topic.create_group("g", 2).unwrap();
    for i in 0..20u8 {
        topic.publish(Bytes::from(vec![i; 10])).unwrap();
    }
    for _ in 0..5 {
        let delivery = topic.poll("g").unwrap().unwrap();
        topic.ack("g", delivery.id()).unwrap();
    }
    for _ in 0..2 {
        let delivery = topic.poll("g").unwrap().unwrap();
        topic.nack("g", delivery.id()).unwrap();
    }
    topic.poll("g").unwrap().unwrap();
    store
}

fn files_in(sim: &SimStorage, dir: &Path) -> Vec<PathBuf> {
    let mut files = sim.list_dir(dir).unwrap();
    files.sort();
    files
}

/// Asserts that the store opened with topic `t` failed as damaged in a file whose path
/// holds `file_part` (damage in a topic's files stays local to the topic).
fn assert_topic_corrupt(result: Result<Store, StoreError>, file_part: &str) {
    let store = result.unwrap_or_else(|e| panic!("the store must open: {e}"));
    let failures = store.topic_failures();
    assert_eq!(failures.len(), 1, "{failures:?}");
    let failure = &failures[0];
    assert_eq!(
        (failure.topic.as_str(), failure.kind),
        ("t", FailureKind::Damaged)
    );
    let path = failure.path.as_ref().expect("the failure names its file");
    assert!(
        path.to_string_lossy().contains(file_part),
        "corruption reported in {path:?}, expected {file_part}"
    );
    assert!(matches!(
        store.topic("t"),
        Err(StoreError::TopicFailed { .. })
    ));
}

fn assert_corrupt(result: Result<Store, StoreError>, file_part: &str) {
    match result {
        Err(StoreError::Corrupt { path, .. }) => assert!(
            path.to_string_lossy().contains(file_part),
            "corruption reported in {path:?}, expected {file_part}"
        ),
        other => panic!("expected Corrupt in {file_part}, got {other:?}"),
    }
}

// Proves a second opener of a directory gets Locked while the first holds it, and that
// the lock goes with the last handle.
#[test]
fn lock_file_refuses_a_second_opener() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    let clone = store.clone();
    drop(store);
    assert!(matches!(
        Store::open(dir.path(), StoreOptions::default()),
        Err(StoreError::Locked { .. })
    ));
    drop(clone);
    Store::open(dir.path(), StoreOptions::default()).unwrap();
}

// Proves a directory holding foreign files, or a store whose marker is not ours, is
// refused with an error naming the file, and nothing is written into it.
#[test]
fn foreign_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), b"mine").unwrap();
    assert_corrupt(
        Store::open(dir.path(), StoreOptions::default()),
        "notes.txt",
    );
    assert!(!dir.path().join("topics").exists());

    let dir = tempfile::tempdir().unwrap();
    drop(Store::open(dir.path(), StoreOptions::default()).unwrap());
    std::fs::write(dir.path().join("topics").join("stray"), b"?").unwrap();
    assert_corrupt(Store::open(dir.path(), StoreOptions::default()), "stray");

    let dir = tempfile::tempdir().unwrap();
    drop(Store::open(dir.path(), StoreOptions::default()).unwrap());
    std::fs::write(dir.path().join("STORE"), b"SOMEONE-ELSE").unwrap();
    assert_corrupt(Store::open(dir.path(), StoreOptions::default()), "STORE");
}

// Proves a damaged checkpoint fails its topic with an error naming it, rather than
// being ignored (which would replay from a compacted log) or trusted.
#[test]
fn corrupt_checkpoint_is_reported() {
    let sim = SimStorage::new();
    let options = small_segments(1_000);
    let store = populated(&sim, &options);
    store.checkpoint().unwrap();
    drop(store);
    let checkpoint = Path::new("/store/topics/t/CHECKPOINT");
    assert!(sim.corrupt_file(checkpoint, |bytes| {
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x10;
    }));
    assert_topic_corrupt(try_open_store(&sim, &options), "CHECKPOINT");
}

// Proves a bit flip inside a sealed segment of the groups log is reported as corruption
// when opening replays it, never skipped.
#[test]
fn bit_flip_in_groups_log_is_reported() {
    let sim = SimStorage::new();
    // No checkpoint: opening replays every group record.
    let options = small_segments(1_000_000);
    drop(populated(&sim, &options));
    let segments: Vec<PathBuf> = files_in(&sim, Path::new("/store/topics/t/groups"))
        .into_iter()
        .filter(|path| path.extension().is_some_and(|ext| ext == "log"))
        .collect();
    assert!(
        segments.len() >= 2,
        "want a sealed segment, have {segments:?}"
    );
    assert!(sim.corrupt_file(&segments[0], |bytes| {
        let last = bytes.len() - 3;
        bytes[last] ^= 0x01;
    }));
    assert_topic_corrupt(try_open_store(&sim, &options), "groups");
}

// Proves that after an injected sync failure the topic is fail-stop (publish and group
// transitions refused with FailStopped), and that a reopen after a power cut still
// holds everything confirmed before the failure.
#[test]
fn failed_sync_makes_the_store_fail_stop() {
    let sim = SimStorage::new();
    let options = small_segments(1_000);
    let store = populated(&sim, &options);
    let topic = store.topic("t").unwrap();
    let in_flight = topic.poll("g").unwrap().unwrap();

    sim.fail_next_syncs(1);
    assert!(matches!(
        topic.publish(Bytes::from_static(b"lost?")),
        Err(StoreError::Io { .. })
    ));
    assert!(matches!(
        topic.publish(Bytes::from_static(b"refused")),
        Err(StoreError::FailStopped { .. })
    ));

    sim.fail_next_syncs(1);
    assert!(matches!(
        topic.ack("g", in_flight.id()),
        Err(StoreError::Io { .. })
    ));
    assert!(matches!(
        topic.ack("g", in_flight.id()),
        Err(StoreError::FailStopped { .. })
    ));
    assert!(matches!(
        topic.create_group("other", 1),
        Err(StoreError::FailStopped { .. })
    ));
    // Reads keep working.
    assert_eq!(topic.read(0).unwrap().unwrap(), Bytes::from(vec![0; 10]));
    drop((store, topic));

    for seed in 0..8 {
        let store = try_open_store(&sim.crash(seed), &options).unwrap();
        let topic = store.topic("t").unwrap();
        // The publish whose sync failed may or may not have reached the disk; the one
        // refused after it never did.
        let len = topic.len();
        assert!(len == 20 || len == 21, "log has {len}");
        for i in 0..20u8 {
            assert_eq!(topic.read(u64::from(i)).unwrap().unwrap(), vec![i; 10]);
        }
        if len == 21 {
            assert_eq!(
                topic.read(20).unwrap().unwrap(),
                Bytes::from_static(b"lost?")
            );
        }
        let info = topic.group_info("g").unwrap();
        // The failed ack may or may not have reached the disk; nothing else changed.
        let acked = info.position == 7 && info.in_flight.is_none();
        let not_acked = info.position == 6 && info.in_flight == Some(in_flight.id());
        assert!(acked || not_acked, "{info:?}");
        assert_eq!(topic.dead_letters("g").unwrap().len(), 1);
    }
}

// Proves a full disk gives an I/O error of kind StorageFull, then fail-stop, and that
// the data confirmed before it is intact after reopening.
#[test]
fn full_disk_is_a_clear_error() {
    let sim = SimStorage::new();
    let options = small_segments(1_000);
    let store = populated(&sim, &options);
    let topic = store.topic("t").unwrap();
    sim.set_full(true);
    let mut refused = None;
    for _ in 0..100 {
        if let Err(error) = topic.publish(Bytes::from(vec![7; 100])) {
            refused = Some(error);
            break;
        }
    }
    match refused {
        Some(StoreError::Io { source, .. }) => assert_eq!(source.kind(), ErrorKind::StorageFull),
        other => panic!("expected a StorageFull error, got {other:?}"),
    }
    sim.set_full(false);
    assert!(matches!(
        topic.publish(Bytes::from_static(b"x")),
        Err(StoreError::FailStopped { .. })
    ));
    let confirmed = topic.len();
    drop((store, topic));
    let store = try_open_store(&sim, &options).unwrap();
    let topic = store.topic("t").unwrap();
    assert_eq!(topic.len(), confirmed);
    assert_eq!(topic.position("g").unwrap(), 6);
    topic.publish(Bytes::from_static(b"after")).unwrap();
}

// Proves a read-only file system gives a clear I/O error, both when creating a store
// and when writing to an open one.
#[test]
fn read_only_directory_is_a_clear_error() {
    let sim = SimStorage::new();
    sim.set_read_only(true);
    match try_open_store(&sim, &StoreOptions::default()) {
        Err(StoreError::Io { source, .. }) => {
            assert_eq!(source.kind(), ErrorKind::ReadOnlyFilesystem)
        }
        other => panic!("expected a read-only error, got {other:?}"),
    }

    let sim = SimStorage::new();
    let options = small_segments(1_000);
    let store = populated(&sim, &options);
    sim.set_read_only(true);
    let topic = store.topic("t").unwrap();
    assert!(matches!(
        topic.publish(Bytes::from_static(b"x")),
        Err(StoreError::Io { .. })
    ));
    assert!(matches!(
        store.create_topic("u"),
        Err(StoreError::Io { .. })
    ));
    drop((store, topic));
    assert!(matches!(
        try_open_store(&sim, &options),
        Err(StoreError::Io { .. })
    ));
}
