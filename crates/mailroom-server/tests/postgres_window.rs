//! A poll on the PostgreSQL backend reads its window once, in the call's first pipeline:
//! the sizes and keys its plan needs and, whole, the messages it will likely hand out;
//! the second pipeline reads only the payloads that guess missed. These tests pin the
//! edges of that guess: the byte cap on a poll's answer (the rows taken whole stop at
//! it, the plan still decides from the sizes), a first message larger than the cap, and
//! keyed messages handed out past the rows taken whole.

mod postgres_support;

use bytes::Bytes;
use mailroom::group::{DeliveryId, GroupConfig};
use mailroom::topic::{Metadata, StartPosition};
use mailroom_server::backend::Backend;
use mailroom_store::{MessageDelivery, NewMessage, PollScope, POLL_BATCH_BYTES_MAX_DEFAULT};
use postgres_support::{broker, cluster_url, fresh_database};

const TOPIC: &str = "t";
const GROUP: &str = "g";

/// A payload of `len` bytes, each `fill`, so a mixed-up delivery shows.
fn payload(len: usize, fill: u8) -> Bytes {
    Bytes::from(vec![fill; len])
}

/// The (offset, payload length, first byte) of each delivery.
fn shown(deliveries: &[MessageDelivery]) -> Vec<(u64, usize, u8)> {
    deliveries
        .iter()
        .map(|d| (d.offset, d.message.payload.len(), d.message.payload[0]))
        .collect()
}

fn ids(deliveries: &[MessageDelivery]) -> Vec<DeliveryId> {
    deliveries.iter().map(|d| d.id()).collect()
}

// Proves a batch poll's answer stops at the byte cap: three messages of 7/16 of the cap
// each, polled for three, come as two (the third would pass the cap), and the third
// comes with the next poll, acked then polled in one call; a message larger than the
// cap alone still goes out, as a poll's first.
#[tokio::test]
async fn a_batch_stops_at_the_byte_cap_and_its_first_message_may_pass_it() {
    let Some(cluster) = cluster_url() else { return };
    let url = fresh_database(&cluster).await;
    let (backend, _) = broker(&url).await;
    backend.create_topic(TOPIC).await.unwrap();
    let config = GroupConfig::new(3).with_max_in_flight(8);
    backend
        .create_group(TOPIC, GROUP, StartPosition::Earliest, config)
        .await
        .unwrap();
    // The backend's cap is the embedded store's default.
    let cap = POLL_BATCH_BYTES_MAX_DEFAULT;
    let part = cap / 16 * 7;
    let big = cap + 1;
    let payloads = [
        payload(part, 1),
        payload(part, 2),
        payload(part, 3),
        payload(big, 4),
        payload(1, 5),
    ];
    backend.publish_batch(TOPIC, &payloads).await.unwrap();
    let first = backend
        .poll_batch(TOPIC, GROUP, None, 3, PollScope::All)
        .await
        .unwrap();
    assert_eq!(shown(&first), [(0, part, 1), (1, part, 2)]);
    let (acked, second) = backend
        .ack_then_poll_batch(TOPIC, GROUP, &ids(&first), None, 3, PollScope::All)
        .await
        .unwrap();
    assert!(acked.iter().all(Result::is_ok), "{acked:?}");
    assert_eq!(shown(&second), [(2, part, 3)]);
    let (_, third) = backend
        .ack_then_poll_batch(TOPIC, GROUP, &ids(&second), None, 3, PollScope::All)
        .await
        .unwrap();
    assert_eq!(shown(&third), [(3, big, 4)]);
    let (_, fourth) = backend
        .ack_then_poll_batch(TOPIC, GROUP, &ids(&third), None, 3, PollScope::All)
        .await
        .unwrap();
    assert_eq!(shown(&fourth), [(4, 1, 5)]);
}

// Proves keyed messages handed out past the rows read whole come with their own
// payloads and keys: with W = 2, offsets 0 and 1 (key a) are read whole, 1 is held
// behind 0, and the poll hands out 0 and 4 (key b, past the first W), then, acked,
// 1 and 5, each with its own message.
#[tokio::test]
async fn keyed_messages_past_the_rows_read_whole_come_with_their_own_payloads() {
    let Some(cluster) = cluster_url() else { return };
    let url = fresh_database(&cluster).await;
    let (backend, _) = broker(&url).await;
    backend.create_topic(TOPIC).await.unwrap();
    let config = GroupConfig::new(3).with_max_in_flight(2);
    backend
        .create_group(TOPIC, GROUP, StartPosition::Earliest, config)
        .await
        .unwrap();
    let keys = ["a", "a", "a", "a", "b", "b"];
    let messages: Vec<NewMessage> = keys
        .iter()
        .enumerate()
        .map(|(i, key)| NewMessage {
            payload: payload(10 + i, i as u8),
            metadata: Metadata::new().with_key(*key),
        })
        .collect();
    backend.publish_messages(TOPIC, &messages).await.unwrap();
    let key_of = |d: &MessageDelivery| d.message.metadata.key.clone().unwrap();
    let first = backend
        .poll_batch(TOPIC, GROUP, None, 2, PollScope::All)
        .await
        .unwrap();
    assert_eq!(shown(&first), [(0, 10, 0), (4, 14, 4)]);
    assert_eq!(first.iter().map(key_of).collect::<Vec<_>>(), ["a", "b"]);
    let (_, second) = backend
        .ack_then_poll_batch(TOPIC, GROUP, &ids(&first), None, 2, PollScope::All)
        .await
        .unwrap();
    assert_eq!(shown(&second), [(1, 11, 1), (5, 15, 5)]);
    assert_eq!(second.iter().map(key_of).collect::<Vec<_>>(), ["a", "b"]);
}

// Proves the acks a poll carries leave only slots they finish for sure out of its
// window's read: with W = 4, acked with the next poll, deliveries 0 and 1 (no lease) are
// finished and 2 and 3 come whole; with a lease that ran out, the same acks are refused
// and the poll hands 0 and 1 out again, attempt 2, each with its own payload (a window
// that had left them out would have no size to plan them with).
#[tokio::test]
async fn acks_with_the_next_poll_leave_out_only_the_slots_they_finish() {
    let Some(cluster) = cluster_url() else { return };
    let url = fresh_database(&cluster).await;
    let (backend, _) = broker(&url).await;
    backend.create_topic(TOPIC).await.unwrap();
    let leased = "leased";
    for (group, config) in [
        (GROUP, GroupConfig::new(3).with_max_in_flight(4)),
        (
            leased,
            GroupConfig::new(3).with_max_in_flight(4).with_lease_ms(300),
        ),
    ] {
        backend
            .create_group(TOPIC, group, StartPosition::Earliest, config)
            .await
            .unwrap();
    }
    let payloads: Vec<Bytes> = (0..4).map(|i| payload(10 + i, i as u8)).collect();
    backend.publish_batch(TOPIC, &payloads).await.unwrap();
    let attempts = |deliveries: &[MessageDelivery]| -> Vec<(u64, u32)> {
        deliveries.iter().map(|d| (d.offset, d.attempt)).collect()
    };

    let first = backend
        .poll_batch(TOPIC, GROUP, None, 2, PollScope::All)
        .await
        .unwrap();
    let (acked, second) = backend
        .ack_then_poll_batch(TOPIC, GROUP, &ids(&first), None, 4, PollScope::All)
        .await
        .unwrap();
    assert!(acked.iter().all(Result::is_ok), "{acked:?}");
    assert_eq!(shown(&second), [(2, 12, 2), (3, 13, 3)]);

    let first = backend
        .poll_batch(TOPIC, leased, None, 2, PollScope::All)
        .await
        .unwrap();
    assert_eq!(attempts(&first), [(0, 1), (1, 1)]);
    // Until the leases have run out by the group's clock.
    while let Some(due) = backend.next_due_in(TOPIC, leased).await.unwrap() {
        if due.is_zero() {
            break;
        }
        tokio::time::sleep(due).await;
    }
    let (acked, second) = backend
        .ack_then_poll_batch(TOPIC, leased, &ids(&first), None, 4, PollScope::All)
        .await
        .unwrap();
    assert!(acked.iter().all(Result::is_err), "{acked:?}");
    assert_eq!(attempts(&second), [(0, 2), (1, 2), (2, 1), (3, 1)]);
    assert_eq!(
        shown(&second),
        [(0, 10, 0), (1, 11, 1), (2, 12, 2), (3, 13, 3)]
    );
}
