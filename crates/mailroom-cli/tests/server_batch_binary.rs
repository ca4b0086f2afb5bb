//! The batch publish in the binary encoding (`application/vnd.mailroom.batch`) against
//! the real `mailroom` binary: what it carries is stored and read back (across a
//! kill -9), idempotency keys work in it, every breach of its layout or a limit is a 4xx
//! with a JSON body that stores nothing, and the Rust client publishes the same messages
//! in either encoding.

mod common;

use common::{temp_dir, ServerProcess};
use mailroom_client::api::batch_binary::{BatchWriter, CONTENT_TYPE};
use mailroom_client::api::metadata_block::write_block;
use mailroom_client::{BatchEncoding, NewMessage, ReadFrom};
use serde_json::{json, Value};

async fn publish(http: &reqwest::Client, server: &ServerProcess, body: Vec<u8>) -> (u16, Value) {
    let response = http
        .post(server.at("/v1/topics/t/messages/batch"))
        .header("content-type", CONTENT_TYPE)
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The log of topic `t` from offset 0, as the read route answers it, without times.
async fn log(http: &reqwest::Client, server: &ServerProcess) -> Vec<Value> {
    let page: Value = http
        .get(server.at("/v1/topics/t/messages?from=0"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut messages = page["messages"].as_array().unwrap().clone();
    for message in &mut messages {
        message.as_object_mut().unwrap().remove("published_at_ms");
    }
    messages
}

// Proves a binary batch stores its payloads (any bytes), keys, headers (sent out of
// name order) and idempotency keys, that a repeat (sent without the binary content
// type) is answered as a duplicate, and that all of it is there after a kill -9.
#[tokio::test]
async fn a_binary_batch_stores_what_it_carries() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &[]);
    let http = reqwest::Client::new();
    let created = http.put(server.at("/v1/topics/t")).send().await.unwrap();
    assert_eq!(created.status().as_u16(), 201);

    let mut writer = BatchWriter::new();
    writer.push_bare(b"plain").unwrap();
    let headers = [("b", "2"), ("a", "1")].into_iter();
    writer.push(b"\xff\x00", Some("k1"), None, headers).unwrap();
    writer
        .push(b"once", None, Some("i-1"), std::iter::empty())
        .unwrap();
    let body = writer.finish();
    assert_eq!(
        publish(&http, &server, body).await,
        (201, json!({"offsets": [0, 1, 2]}))
    );
    // The magic alone says the body is binary, whatever the content type says.
    let mut again = BatchWriter::new();
    again
        .push(b"once", None, Some("i-1"), std::iter::empty())
        .unwrap();
    let response = http
        .post(server.at("/v1/topics/t/messages/batch"))
        .header("content-type", "application/octet-stream")
        .body(again.finish())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 201);
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer, json!({"offsets": [2], "duplicates": [0]}));

    let expected = vec![
        json!({"offset": 0, "payload": "plain"}),
        json!({"offset": 1, "payload_base64": "/wA=", "key": "k1", "headers": {"a": "1", "b": "2"}}),
        json!({"offset": 2, "payload": "once"}),
    ];
    assert_eq!(log(&http, &server).await, expected);
    server.kill();
    let server = ServerProcess::start(dir.path(), &[]);
    assert_eq!(log(&http, &server).await, expected, "after kill -9");
}

/// A body of `count` and then `items` as they are.
fn raw(count: u32, items: &[u8]) -> Vec<u8> {
    let mut body = b"MRB2".to_vec();
    body.extend_from_slice(&count.to_le_bytes());
    body.extend_from_slice(items);
    body
}

/// One message: its length word, then `block` (if not empty) and `payload`.
fn message(block: &[u8], payload: &[u8]) -> Vec<u8> {
    let flag = if block.is_empty() { 0 } else { 1 << 31 };
    let word = (block.len() + payload.len()) as u32 | flag;
    [&word.to_le_bytes()[..], block, payload].concat()
}

/// The metadata block of a key and headers.
fn block(key: Option<&str>, headers: &[(&str, &str)]) -> Vec<u8> {
    let mut block = Vec::new();
    write_block(key, None, headers.iter().copied(), &mut block).unwrap();
    block
}

// Proves every breach of the layout and every limit is a 4xx with a JSON body naming
// the message and the part, and that none of those publishes stores anything.
#[tokio::test]
async fn bad_binary_bodies_are_refused_and_store_nothing() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--max-payload-bytes", "300"]);
    let http = reqwest::Client::new();
    http.put(server.at("/v1/topics/t")).send().await.unwrap();
    let long_key = "k".repeat(1025);
    let mut flagged = block(Some("k"), &[]);
    flagged[4] |= 0b1000;
    let mut not_utf8 = block(Some("k"), &[]);
    *not_utf8.last_mut().unwrap() = 0xff;
    let bare = message(&[], b"p");
    let cases: Vec<(Vec<u8>, u16, &str, String)> = vec![
        (
            br#"{"messages":["a"]}"#.to_vec(),
            400,
            "invalid_argument",
            "\"MRB2\"".into(),
        ),
        (
            [&b"MRB1"[..], &raw(1, &bare)[4..]].concat(),
            400,
            "invalid_argument",
            "version \"MRB1\"".into(),
        ),
        (
            raw(1, &[]),
            400,
            "invalid_argument",
            "messages[0]: the request body ends inside its length word".into(),
        ),
        (
            raw(0, &[]),
            400,
            "invalid_argument",
            "messages must list 1..=10000 messages, got 0".into(),
        ),
        (
            raw(1, &message(&flagged, b"p")),
            400,
            "invalid_argument",
            "messages[0]: unknown metadata flag bits 0x08".into(),
        ),
        (
            raw(1, &message(&not_utf8, b"p")),
            400,
            "invalid_argument",
            "messages[0]: the metadata's key is not UTF-8".into(),
        ),
        (
            raw(1, &message(&block(None, &[("h", "1"), ("h", "2")]), b"p")),
            400,
            "invalid_argument",
            "messages[0]: headers names \"h\" twice".into(),
        ),
        (
            raw(1, &message(&block(None, &[("z", "1"), ("a", "2")]), b"p")),
            400,
            "invalid_argument",
            "messages[0]: headers are not in name order".into(),
        ),
        (
            raw(
                2,
                &[bare.clone(), message(&block(Some(&long_key), &[]), b"p")].concat(),
            ),
            400,
            "invalid_argument",
            "messages[1].key must be 1..=1024 bytes long, got 1025".into(),
        ),
        (
            raw(1, &message(&[], &[b'x'; 301])),
            413,
            "payload_too_large",
            "messages[0] is 301 bytes".into(),
        ),
        (
            [raw(1, &bare), vec![0]].concat(),
            400,
            "invalid_argument",
            "1 bytes follow".into(),
        ),
    ];
    for (body, status, code, words) in cases {
        let (got, answer) = publish(&http, &server, body).await;
        assert_eq!(
            (got, answer["error"].as_str()),
            (status, Some(code)),
            "{answer}"
        );
        let message = answer["message"].as_str().unwrap();
        assert!(
            message.contains(&words),
            "{message:?} does not say {words:?}"
        );
    }
    assert_eq!(log(&http, &server).await, Vec::<Value>::new());
}

// Proves the Rust client stores the same messages whichever encoding it writes batches
// in, payloads that are not UTF-8 among them.
#[tokio::test]
async fn the_client_publishes_the_same_in_either_encoding() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &[]);
    let client = server.client();
    client.create_topic("t").await.unwrap();
    let messages = [
        NewMessage::new("text")
            .with_key("customer-1")
            .with_header("trace", "t1"),
        NewMessage::new(&b"\xff\xfe"[..])
            .with_header("z", "")
            .with_header("a", "é"),
        NewMessage::new("plain"),
    ];
    let payloads = [bytes::Bytes::from_static(b"\x00\xff"), "bare".into()];
    for encoding in [BatchEncoding::Binary, BatchEncoding::Json] {
        let client = client.clone().with_batch_encoding(encoding);
        client.publish_messages("t", &messages).await.unwrap();
        client.publish_batch("t", &payloads).await.unwrap();
    }
    let page = client.read("t", ReadFrom::Offset(0), 100, 0).await.unwrap();
    let stored: Vec<_> = page
        .messages
        .iter()
        .map(|m| (m.payload.clone(), m.key.clone(), m.headers.clone()))
        .collect();
    assert_eq!(stored.len(), 10);
    assert_eq!(stored[..5], stored[5..], "binary, then JSON");
    assert_eq!(stored[1].0, &b"\xff\xfe"[..]);
    assert_eq!(stored[3].0, &b"\x00\xff"[..]);
}
