//! The topic limit (`StoreOptions::topics_max`): a store refuses a topic past it before
//! it makes any file, still opens every topic already on disk, and each open topic holds
//! exactly `TOPIC_FILES_OPEN` file descriptors (what the server sizes the limit from).

use mailroom_store::{Store, StoreError, StoreOptions, TOPIC_FILES_OPEN};

fn options(topics_max: usize) -> StoreOptions {
    StoreOptions {
        topics_max,
        ..StoreOptions::default()
    }
}

// Proves the limit is checked before anything is spent: the refused topic leaves no
// directory, an existing name still answers "exists", a delete makes room, and the
// error names the limit.
#[test]
fn topic_past_the_limit_is_refused_before_any_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), options(2)).unwrap();
    assert!(store.create_topic("a").unwrap());
    assert!(store.create_topic("b").unwrap());
    let refused = store.create_topic("c").unwrap_err();
    assert!(
        matches!(refused, StoreError::TopicLimit { topics_max: 2 }),
        "{refused:?}"
    );
    assert!(refused.to_string().contains("topics_max"), "{refused}");
    assert!(!dir.path().join("topics/c").exists());
    assert!(
        !store.create_topic("a").unwrap(),
        "an existing topic is no new one"
    );
    assert_eq!((store.topic_count(), store.topics_max()), (2, 2));
    store.delete_topic("a").unwrap();
    assert!(store.create_topic("c").unwrap());
}

// Proves a store reopened with a lower limit than it holds opens every topic (what was
// created stays readable) and refuses new ones.
#[test]
fn reopening_below_the_count_keeps_every_topic() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), options(3)).unwrap();
    for name in ["a", "b", "c"] {
        store.create_topic(name).unwrap();
    }
    drop(store);
    let store = Store::open(dir.path(), options(1)).unwrap();
    assert_eq!(store.topics(), ["a", "b", "c"]);
    assert!(matches!(
        store.create_topic("d"),
        Err(StoreError::TopicLimit { topics_max: 1 })
    ));
    assert!(matches!(
        Store::open(tempfile::tempdir().unwrap().path(), options(0)),
        Err(StoreError::InvalidArgument { .. })
    ));
}

/// File descriptors of this process open on files under `dir`.
#[cfg(target_os = "linux")]
fn fds_under(dir: &std::path::Path) -> usize {
    let dir = dir.canonicalize().unwrap();
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .filter(|target| target.starts_with(&dir))
        .count()
}

// Proves `TOPIC_FILES_OPEN` is what a topic really holds, with and without groups and
// messages, so the server's fd budget is sized from the truth. Counting only fds on the
// store's own directory keeps other tests' files out of the count.
#[cfg(target_os = "linux")]
#[test]
fn each_topic_holds_its_documented_file_count() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    let base = fds_under(dir.path());
    for (index, name) in ["a", "b", "c"].into_iter().enumerate() {
        store.create_topic(name).unwrap();
        assert_eq!(fds_under(dir.path()), base + (index + 1) * TOPIC_FILES_OPEN);
    }
    let topic = store.topic("a").unwrap();
    topic.create_group("g", 1).unwrap();
    topic.publish(bytes::Bytes::from_static(b"m")).unwrap();
    assert_eq!(fds_under(dir.path()), base + 3 * TOPIC_FILES_OPEN);
    drop((topic, store));
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    assert_eq!(fds_under(dir.path()), base + 3 * TOPIC_FILES_OPEN);
    drop(store);
}
