//! The byte cap of a batch poll (`StoreOptions::poll_batch_bytes_max`): a batch stops
//! before the payload that would take it past the cap, never before its first delivery,
//! and makes no delivery it does not hand out.

use bytes::Bytes;
use mailroom::group::{DeliveryId, GroupConfig};
use mailroom::topic::{Delivery, StartPosition};
use mailroom_store::log::{LogOptions, SyncPolicy};
use mailroom_store::{DurableTopic, Store, StoreError, StoreOptions};
use proptest::prelude::*;

const WINDOW: u32 = 64;

fn open(dir: &std::path::Path, bytes_max: usize) -> (Store, DurableTopic) {
    let options = StoreOptions {
        log: LogOptions {
            sync: SyncPolicy::Never,
            ..LogOptions::default()
        },
        poll_batch_bytes_max: bytes_max,
        ..StoreOptions::default()
    };
    let store = Store::open(dir, options).unwrap();
    store.create_topic("t").unwrap();
    let topic = store.topic("t").unwrap();
    let config = GroupConfig::new(3).with_max_in_flight(WINDOW);
    topic
        .create_group_with("g", StartPosition::Earliest, config)
        .unwrap();
    (store, topic)
}

fn bytes_of(batch: &[Delivery<Bytes>]) -> usize {
    batch.iter().map(|d| d.message.len()).sum()
}

fn ids(batch: &[Delivery<Bytes>]) -> Vec<DeliveryId> {
    batch.iter().map(Delivery::id).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    // Proves every batch is as large as the cap allows and no larger: under the cap (or a
    // single delivery), and stopped only by `max`, the window, the end of the log or a next
    // payload that would not fit; and that, acking each batch, every message is delivered
    // once, in order.
    #[test]
    fn batches_fill_up_to_the_cap_and_no_further(
        sizes in prop::collection::vec(0usize..300, 1..60),
        bytes_max in 1usize..1000,
        max in 1usize..20,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let (_store, topic) = open(dir.path(), bytes_max);
        let payloads: Vec<Bytes> = sizes.iter().map(|&n| Bytes::from(vec![7u8; n])).collect();
        topic.publish_batch(&payloads).unwrap();
        let mut next = 0usize;
        while next < payloads.len() {
            let batch = topic.poll_batch("g", None, max).unwrap();
            prop_assert!(!batch.is_empty(), "a batch came back empty with messages left");
            prop_assert!(batch.len() == 1 || bytes_of(&batch) <= bytes_max);
            for delivery in &batch {
                prop_assert_eq!(delivery.offset, next as u64);
                prop_assert_eq!(&delivery.message, &payloads[next]);
                next += 1;
            }
            let stopped_by_bytes = next < payloads.len()
                && bytes_of(&batch) + payloads[next].len() > bytes_max;
            prop_assert!(
                batch.len() == max || next == payloads.len() || stopped_by_bytes,
                "batch of {} stopped early", batch.len()
            );
            // Nothing was made in flight beyond what the batch handed out.
            prop_assert_eq!(topic.in_flight("g").unwrap(), ids(&batch));
            for result in topic.ack_batch("g", &ids(&batch)).unwrap() {
                prop_assert!(result.is_ok());
            }
        }
    }
}

// Proves a consumer's own deliveries count against the cap too: polling again without
// acking hands back the same capped batch (and makes nothing new), and acking makes room
// for the rest of its own deliveries first, then new ones.
#[test]
fn owned_deliveries_come_back_within_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let (_store, topic) = open(dir.path(), 250);
    let payloads: Vec<Bytes> = (0..6u8).map(|i| Bytes::from(vec![i; 100])).collect();
    topic.publish_batch(&payloads).unwrap();

    let first = topic.poll_batch("g", Some("w1"), 8).unwrap();
    assert_eq!(first.iter().map(|d| d.offset).collect::<Vec<_>>(), [0, 1]);
    assert_eq!(topic.poll_batch("g", Some("w1"), 8).unwrap(), first);
    assert_eq!(topic.in_flight("g").unwrap().len(), 2);

    topic.ack("g", first[0].id()).unwrap();
    let second = topic.poll_batch("g", Some("w1"), 8).unwrap();
    assert_eq!(second.iter().map(|d| d.offset).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(second[0], first[1], "its own delivery first, same attempt");
}

// Proves a message larger than the cap is still delivered, alone, and that a cap of
// zero is refused when the store opens.
#[test]
fn a_message_over_the_cap_comes_alone_and_a_zero_cap_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (_store, topic) = open(dir.path(), 10);
    topic
        .publish_batch(&[Bytes::from(vec![1u8; 50]), Bytes::from(vec![2u8; 5])])
        .unwrap();
    let batch = topic.poll_batch("g", None, 8).unwrap();
    assert_eq!(batch.len(), 1);
    assert_eq!(batch[0].message.len(), 50);

    let other = tempfile::tempdir().unwrap();
    let options = StoreOptions {
        poll_batch_bytes_max: 0,
        ..StoreOptions::default()
    };
    let refused = Store::open(other.path(), options).map(drop);
    assert!(
        matches!(refused, Err(StoreError::InvalidArgument { .. })),
        "{refused:?}"
    );
}
