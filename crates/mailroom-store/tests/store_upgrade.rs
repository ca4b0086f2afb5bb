//! A store written by the release before message metadata opens, reads back everything it
//! held, and takes new messages (with metadata) beside the old ones.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use mailroom::clock::ManualClock;
use mailroom::topic::Metadata;
use mailroom_store::{NewMessage, Store, StoreOptions};

/// Copies the fixture `name` into a fresh directory, so the test never changes it.
fn fixture_copy(name: &str) -> tempfile::TempDir {
    fn copy_dir(from: &Path, to: &Path) {
        fs::create_dir_all(to).unwrap();
        for entry in fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let target = to.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                copy_dir(&entry.path(), &target);
            } else {
                fs::copy(entry.path(), target).unwrap();
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    copy_dir(&fixture, dir.path());
    dir
}

/// When the fixture was written (the publish time in its records), in Unix ms.
const FIXTURE_WRITTEN_MS: u64 = 1_796_127_428_166;

/// Store options whose clock stands one second after the fixture was written: its
/// `workers` delivery has a one-hour lease, which the system clock would see run out.
fn fixture_options() -> StoreOptions {
    StoreOptions {
        clock: Arc::new(ManualClock::new(FIXTURE_WRITTEN_MS + 1_000)),
        ..StoreOptions::default()
    }
}

/// Checks everything the fixture `store-format-1` holds (see `tests/fixtures/README.md`).
fn check_format_1_contents(store: &Store) {
    let mut topics = store.topics();
    topics.sort();
    assert_eq!(topics, ["binary", "empty", "orders"]);

    let orders = store.topic("orders").unwrap();
    for offset in 0..5 {
        let message = orders.read(offset).unwrap().expect("retained");
        assert_eq!(message, Bytes::from(format!("order {offset}")));
    }
    let mut groups = orders.groups();
    groups.sort();
    assert_eq!(groups, ["audit", "billing", "workers"]);
    let billing = orders.group_info("billing").unwrap();
    assert_eq!((billing.position, billing.max_attempts), (2, 3));
    assert_eq!(billing.lag, orders.len() - 2);
    let audit = orders.dead_letter_info("audit").unwrap();
    assert_eq!(audit.len(), 1);
    assert_eq!((audit[0].offset, audit[0].attempts), (0, 1));
    assert_eq!(audit[0].reason.as_deref(), Some("bad order"));
    assert_eq!(audit[0].message, Bytes::from_static(b"order 0"));
    let workers = orders.in_flight("workers").unwrap();
    assert_eq!(workers.len(), 1);
    assert_eq!((workers[0].offset, workers[0].attempt), (0, 1));
    assert_eq!(orders.group_config("workers").unwrap().max_in_flight, 4);

    assert_eq!(store.topic("empty").unwrap().len(), 0);
    let binary = store.topic("binary").unwrap();
    let all_bytes: Vec<u8> = (0..=255).collect();
    assert_eq!(binary.read(0).unwrap().unwrap(), Bytes::from(all_bytes));
    assert_eq!(binary.read(1).unwrap().unwrap(), Bytes::new());
}

// Proves a store of the previous format opens and reads back every topic, message, group,
// position, in-flight delivery and dead letter, and again after a restart.
#[test]
fn format_1_store_opens_and_reads_everything() {
    let dir = fixture_copy("store-format-1");
    {
        let store = Store::open(dir.path(), fixture_options()).unwrap();
        check_format_1_contents(&store);
    }
    let store = Store::open(dir.path(), fixture_options()).unwrap();
    check_format_1_contents(&store);
    // The old deliveries keep working: billing goes on from where it was.
    let orders = store.topic("orders").unwrap();
    let delivery = orders.poll("billing").unwrap().expect("offset 2 waits");
    assert_eq!(
        (delivery.offset, &delivery.message[..]),
        (2, &b"order 2"[..])
    );
    orders.ack("billing", delivery.id()).unwrap();
}

// Proves a store of the previous format takes messages with metadata beside its old
// ones, and after a restart reads both: old messages without metadata, new ones with it,
// through reads, group deliveries and dead letters.
#[test]
fn format_1_store_takes_messages_with_metadata() {
    let dir = fixture_copy("store-format-1");
    let metadata = Metadata::new()
        .with_key("customer-9")
        .with_header("traceparent", "00-abc-def-01")
        .with_idempotency_key("publish-5");
    {
        let store = Store::open(dir.path(), fixture_options()).unwrap();
        let orders = store.topic("orders").unwrap();
        let message = NewMessage {
            payload: Bytes::from_static(b"order 5"),
            metadata: metadata.clone(),
        };
        assert_eq!(orders.publish_messages(&[message]).unwrap(), 5..6);
    }
    let store = Store::open(dir.path(), fixture_options()).unwrap();
    check_format_1_contents(&store);
    let orders = store.topic("orders").unwrap();
    let old = orders.read_message(4).unwrap().unwrap();
    assert_eq!(
        (&old.payload[..], old.metadata.is_empty()),
        (&b"order 4"[..], true)
    );
    assert!(
        old.published_at_ms.is_some(),
        "format 1 kept the append time"
    );
    let new = orders.read_message(5).unwrap().unwrap();
    assert_eq!(
        (&new.payload[..], &new.metadata),
        (&b"order 5"[..], &metadata)
    );
    // `audit` (max_attempts 1) dead-letters what it is nacked: its dead letter of the new
    // message shows the metadata.
    for _ in 1..6 {
        let delivery = orders.poll("audit").unwrap().unwrap();
        orders.nack("audit", delivery.id()).unwrap();
    }
    let dead = orders.dead_letter_info("audit").unwrap();
    let last = dead.last().unwrap();
    assert_eq!(last.offset, 5);
    let message = orders
        .message_at(last.offset, last.message.clone())
        .unwrap();
    assert_eq!(
        (&message.payload[..], message.metadata),
        (&b"order 5"[..], metadata)
    );
}
