use std::collections::BTreeMap;

use base64::Engine as _;
use mailroom::topic::{HEADERS_MAX, HEADER_VALUE_BYTES_MAX, KEY_BYTES_MAX};
use mailroom_api::batch_binary::BatchWriter;
use mailroom_api::topics::BatchRequest;
use mailroom_store::NewMessage;
use proptest::prelude::*;
use serde_json::{json, Map, Value};

use super::*;
use crate::body::parse;
use crate::routes::topics::decode_batch;

/// The payload limit the tests run with: small, so that some payloads pass it.
const PAYLOAD_BYTES_MAX: u64 = 24;

/// A message as a client would send it.
#[derive(Debug, Clone)]
struct Message {
    payload: Vec<u8>,
    key: Option<String>,
    idempotency_key: Option<String>,
    headers: BTreeMap<String, String>,
}

/// A string: short, empty, non-ASCII, or past a limit.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => "[a-z0-9 \"\\\\-]{1,10}",
        1 => Just(String::new()),
        1 => Just("é漢🦀".to_owned()),
        1 => Just("k".repeat(KEY_BYTES_MAX + 1)),
        1 => Just("v".repeat(HEADER_VALUE_BYTES_MAX + 1)),
    ]
}

fn message() -> impl Strategy<Value = Message> {
    (
        proptest::collection::vec(any::<u8>(), 0..30),
        proptest::option::weighted(0.4, text()),
        proptest::option::weighted(0.3, text()),
        prop_oneof![
            4 => proptest::collection::btree_map(text(), text(), 0..3),
            1 => (HEADERS_MAX - 1..HEADERS_MAX + 2).prop_map(|count| {
                (0..count).map(|i| (format!("h{i}"), String::new())).collect()
            }),
        ],
    )
        .prop_map(|(payload, key, idempotency_key, headers)| Message {
            payload,
            key,
            idempotency_key,
            headers,
        })
}

fn binary_body(messages: &[Message]) -> Bytes {
    let mut writer = BatchWriter::new();
    for message in messages {
        let headers = message.headers.iter();
        let pushed = writer.push(
            &message.payload,
            message.key.as_deref(),
            message.idempotency_key.as_deref(),
            headers.map(|(name, value)| (name.as_str(), value.as_str())),
        );
        pushed.unwrap();
    }
    Bytes::from(writer.finish())
}

/// The same messages as a JSON body: text payloads as `payload`, others as base64.
fn json_body(messages: &[Message]) -> Bytes {
    let items: Vec<Value> = messages
        .iter()
        .map(|message| {
            let mut object = Map::new();
            match std::str::from_utf8(&message.payload) {
                Ok(text) => object.insert("payload".into(), json!(text)),
                Err(_) => object.insert(
                    "payload_base64".into(),
                    json!(base64::engine::general_purpose::STANDARD.encode(&message.payload)),
                ),
            };
            if let Some(key) = &message.key {
                object.insert("key".into(), json!(key));
            }
            if let Some(key) = &message.idempotency_key {
                object.insert("idempotency_key".into(), json!(key));
            }
            if !message.headers.is_empty() {
                object.insert("headers".into(), json!(message.headers));
            }
            Value::Object(object)
        })
        .collect();
    Bytes::from(json!({ "messages": items }).to_string())
}

/// What the JSON body's general decoder makes of `body`: its messages, or its
/// refusal's code and text.
fn general(body: &[u8]) -> Result<Vec<NewMessage>, (String, String)> {
    let request = parse::<BatchRequest>(body);
    let messages = request.and_then(|request| decode_batch(request, PAYLOAD_BYTES_MAX));
    messages.map_err(|error| (error.code.to_string(), error.message))
}

fn binary(body: &Bytes) -> Result<Vec<NewMessage>, (String, String)> {
    match binary_batch(body, PAYLOAD_BYTES_MAX) {
        Ok(FastBatch::Bare(payloads)) => Ok(payloads.into_iter().map(NewMessage::bare).collect()),
        Ok(FastBatch::Encoded(batch)) => Ok(batch.to_messages()),
        Err(error) => Err((error.code.to_string(), error.message)),
    }
}

proptest! {
    // Proves a binary body is read as its JSON form is: the same messages stored, or
    // the same refusal (code and words) when a payload, key, header or count is past
    // its limit.
    #[test]
    fn a_binary_body_reads_as_its_json_form(
        messages in proptest::collection::vec(message(), 0..5)
    ) {
        let binary = binary(&binary_body(&messages));
        prop_assert_eq!(binary, general(&json_body(&messages)));
    }
}

// Proves bare payloads are slices of the body, not copies (in a bare batch and beside
// messages with metadata), and that a binary body is recognized by its content type
// (whatever its case and parameters) or by its magic.
#[test]
fn bare_payloads_are_borrowed_and_the_content_type_is_recognized() {
    let mut writer = BatchWriter::new();
    writer.push_bare(b"one").unwrap();
    writer.push_bare(b"\xfftwo").unwrap();
    let body = Bytes::from(writer.finish());
    let Ok(FastBatch::Bare(payloads)) = binary_batch(&body, 1024) else {
        panic!("not bare")
    };
    assert_eq!(payloads, [&b"one"[..], &b"\xfftwo"[..]]);
    assert!(
        body.as_ptr_range().contains(&payloads[0].as_ptr()),
        "copied"
    );

    // Beside a message with metadata too.
    let mut writer = BatchWriter::new();
    writer.push_bare(b"bare").unwrap();
    let headers = std::iter::empty();
    writer.push(b"keyed", Some("k"), None, headers).unwrap();
    let mixed = Bytes::from(writer.finish());
    let Ok(FastBatch::Encoded(batch)) = binary_batch(&mixed, 1024) else {
        panic!("not encoded")
    };
    let bare = &batch.to_messages()[0].payload;
    assert_eq!(bare, &b"bare"[..]);
    assert!(
        mixed.as_ptr_range().contains(&bare.as_ptr()),
        "copied beside metadata"
    );

    let with = |value: &str, body: &[u8]| {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, value.parse().unwrap());
        is_binary(&headers, body)
    };
    let json = br#"{"messages":["a"]}"#;
    assert!(with("application/vnd.mailroom.batch", json));
    assert!(with("Application/VND.Mailroom.Batch; version=1", json));
    assert!(!with("application/json", json));
    assert!(!with("application/vnd.mailroom.batchx", json));
    assert!(!is_binary(&HeaderMap::new(), json));
    // The magic says it whatever the type.
    assert!(with("application/octet-stream", &body));
    assert!(is_binary(&HeaderMap::new(), &body));
}

#[test]
fn a_broken_layout_is_a_400_naming_the_place() {
    let cut = b"MRB2\x01\x00\x00\x00\x05\x00\x00\x00abc";
    let error = binary_batch(&Bytes::from_static(cut), 1024).unwrap_err();
    assert_eq!(error.code.to_string(), "invalid_argument");
    assert_eq!(
        error.message,
        "messages[0]: the request body ends inside its record body"
    );
    let error = binary_batch(&Bytes::from_static(b"[\"a\"]"), 1024).unwrap_err();
    assert!(error.message.contains("MRB2"), "{}", error.message);
    // The version before is named as such, and read as binary whatever the type says.
    let old = b"MRB1\x01\x00\x00\x00\x00\x01\x00\x00\x00p";
    assert!(is_binary(&HeaderMap::new(), old));
    let error = binary_batch(&Bytes::from_static(old), 1024).unwrap_err();
    assert_eq!(error.code.to_string(), "invalid_argument");
    assert!(
        error.message.contains("version \"MRB1\""),
        "{}",
        error.message
    );
}
