//! Regression test for issue 18's "the same flip in the groups log undid a confirmed
//! ack": a flipped bit in a confirmed groups-log record fails the topic naming the
//! place; a repair keeps every group change before the damaged record, drops only the
//! records from there on, and says which.

use std::path::Path;

use bytes::Bytes;
use mailroom::topic::StartPosition;
use mailroom_store::{Store, StoreError, StoreOptions};

fn options() -> StoreOptions {
    StoreOptions {
        // No checkpoint: every group change stays in the groups log.
        checkpoint_every: 1_000_000,
        ..StoreOptions::default()
    }
}

fn poll_and_ack(store: &Store) -> u64 {
    let topic = store.topic("t").unwrap();
    let delivery = topic.poll("g").unwrap().expect("a message is waiting");
    topic.ack("g", delivery.id()).unwrap();
    delivery.offset
}

fn groups_segment(dir: &Path) -> std::path::PathBuf {
    dir.join("topics/t/groups/00000000000000000000.log")
}

// Proves a repair of a damaged groups-log record keeps the groups' state up to it (the
// acks before it stay acked), drops exactly the records from it on (named in the
// report), and the topic serves again without reusing a confirmed message offset.
#[test]
fn a_damaged_groups_record_keeps_every_change_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let kept_bytes = {
        let store = Store::open(dir.path(), options()).unwrap();
        store.create_topic("t").unwrap();
        let topic = store.topic("t").unwrap();
        topic
            .create_group_at("g", 3, StartPosition::Earliest)
            .unwrap();
        for n in 0..4u8 {
            topic.publish(Bytes::from(vec![b'm', n])).unwrap();
        }
        assert_eq!(poll_and_ack(&store), 0);
        assert_eq!(poll_and_ack(&store), 1);
        std::fs::metadata(groups_segment(dir.path())).unwrap().len()
    };
    {
        // The changes that the damage will cost: the poll and ack of offset 2.
        let store = Store::open(dir.path(), options()).unwrap();
        assert_eq!(poll_and_ack(&store), 2);
    }
    let segment = groups_segment(dir.path());
    let mut bytes = std::fs::read(&segment).unwrap();
    assert!(bytes.len() as u64 > kept_bytes + 30);
    bytes[kept_bytes as usize + 30] ^= 0x10;
    std::fs::write(&segment, bytes).unwrap();

    let store = Store::open(dir.path(), options()).expect("damage stays in its topic");
    match store.topic("t") {
        Err(StoreError::TopicFailed { reason, .. }) => {
            assert!(reason.contains("groups"), "{reason}");
            assert!(reason.contains("00000000000000000000.log"), "{reason}");
        }
        other => panic!("the topic must fail, got {other:?}"),
    }

    let repaired = store.repair_topic("t").unwrap().expect("it was damaged");
    assert_eq!(repaired.actions.len(), 1, "{repaired:?}");
    let action = &repaired.actions[0];
    assert!(action.contains("cut the groups log"), "{action}");
    let records = |word: &str| -> (u64, u64) {
        let after = action.split(word).nth(1).expect("the range is named");
        let range = after.split_whitespace().next().unwrap();
        let (start, end) = range.split_once("..").unwrap();
        (start.parse().unwrap(), end.parse().unwrap())
    };
    let (kept_start, kept_end) = records("kept records ");
    let (dropped_start, dropped_end) = records("dropped records ");
    assert_eq!(kept_start, 0);
    assert_eq!(kept_end, dropped_start);
    // The poll and the ack of offset 2, and nothing else.
    assert_eq!(dropped_end - dropped_start, 2, "{action}");

    let topic = store.topic("t").expect("the topic serves again");
    // The acks of 0 and 1 are kept: the group goes on at 2, whose ack was dropped.
    assert_eq!(poll_and_ack(&store), 2);
    assert_eq!(poll_and_ack(&store), 3);
    assert_eq!(topic.publish(Bytes::from_static(b"next")).unwrap(), 4);
    drop(topic);
    drop(store);
    // The repair is durable.
    let store = Store::open(dir.path(), options()).unwrap();
    assert!(store.topic("t").is_ok());
    assert_eq!(
        store.topic("t").unwrap().group_info("g").unwrap().position,
        4
    );
}
