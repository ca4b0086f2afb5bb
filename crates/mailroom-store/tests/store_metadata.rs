//! Messages with keys, headers and idempotency keys in the durable store: they come back
//! whole after a restart, beside bare messages in the same batch, bad metadata is refused
//! naming its field, and a message without metadata costs no byte more than before.

use bytes::Bytes;
use mailroom::group::ArgumentError;
use mailroom::topic::{Metadata, TopicError, HEADERS_MAX, KEY_BYTES_MAX};
use mailroom_store::{NewMessage, Store, StoreError, StoreOptions};

fn message(payload: &'static str, metadata: Metadata) -> NewMessage {
    NewMessage {
        payload: Bytes::from_static(payload.as_bytes()),
        metadata,
    }
}

// Proves a batch mixing bare messages and messages with metadata reads back exactly,
// before and after a restart, and that deliveries carry the same payloads.
#[test]
fn metadata_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let keyed = Metadata::new()
        .with_key("k")
        .with_header("a", "1")
        .with_header("b", "");
    let batch = [
        message("bare", Metadata::new()),
        message("keyed", keyed.clone()),
        message("", Metadata::new().with_idempotency_key("once")),
    ];
    {
        let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
        store.create_topic("t").unwrap();
        let topic = store.topic("t").unwrap();
        topic.create_group("g", 3).unwrap();
        assert_eq!(topic.publish_messages(&batch).unwrap(), 0..3);
    }
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    let topic = store.topic("t").unwrap();
    for (offset, expected) in batch.iter().enumerate() {
        let read = topic.read_message(offset as u64).unwrap().unwrap();
        assert_eq!(read.payload, expected.payload);
        assert_eq!(read.metadata, expected.metadata);
        let delivery = topic.poll("g").unwrap().unwrap();
        assert_eq!(delivery.message, expected.payload);
        let message = topic
            .message_at(delivery.offset, delivery.message.clone())
            .unwrap();
        assert_eq!(message.metadata, expected.metadata);
        assert_eq!(message.published_at_ms, read.published_at_ms);
        topic.ack("g", delivery.id()).unwrap();
    }
}

// Proves metadata past a limit is refused naming its field, and nothing is written.
#[test]
fn metadata_past_a_limit_is_refused_by_field() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    store.create_topic("t").unwrap();
    let topic = store.topic("t").unwrap();
    let mut many = Metadata::new();
    for i in 0..=HEADERS_MAX {
        many = many.with_header(format!("h{i}"), "v");
    }
    let cases = [
        (
            Metadata::new().with_key("k".repeat(KEY_BYTES_MAX + 1)),
            "key",
        ),
        (many, "headers"),
        (Metadata::new().with_header("", "v"), "headers.name"),
    ];
    for (metadata, field) in cases {
        let batch = [message("fine", Metadata::new()), message("bad", metadata)];
        match topic.publish_messages(&batch) {
            Err(StoreError::Topic(TopicError::InvalidArgument(
                ArgumentError::LengthOutOfRange { field: got, .. }
                | ArgumentError::CountOutOfRange { field: got, .. },
            ))) => assert_eq!(got, field),
            other => panic!("{field}: {other:?}"),
        }
    }
    assert_eq!(topic.len(), 0, "a refused batch writes nothing");
}

// Proves a message without metadata takes the same bytes on disk as a plain publish: the
// metadata block exists only when there is metadata.
#[test]
fn bare_messages_cost_no_extra_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    store.create_topic("plain").unwrap();
    store.create_topic("messages").unwrap();
    let plain = store.topic("plain").unwrap();
    let messages = store.topic("messages").unwrap();
    plain.publish(Bytes::from_static(b"payload")).unwrap();
    messages
        .publish_messages(&[message("payload", Metadata::new())])
        .unwrap();
    assert_eq!(plain.bytes(), messages.bytes());
    messages
        .publish_messages(&[message("payload", Metadata::new().with_key("k"))])
        .unwrap();
    // 24-byte header + 7-byte payload, then the same plus a 4 + 1 + 2 + 1 byte block.
    assert_eq!(messages.bytes(), 31 + 39);
}
