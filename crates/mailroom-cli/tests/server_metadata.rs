//! Message keys, headers and publish times against the real `mailroom` binary: every
//! publish path takes them (raw publish request headers, batch items as objects), every
//! read path returns them (poll, batch poll, raw poll headers, dead letters), they survive
//! a kill -9, and bad metadata is a 400 naming the field.

mod common;

use std::time::{SystemTime, UNIX_EPOCH};

use common::{temp_dir, ServerProcess};
use serde_json::{json, Value};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

async fn send(request: reqwest::RequestBuilder) -> (u16, Value) {
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Topic `t` with group `g` (max_attempts 1, 8 in flight).
async fn topic_and_group(http: &reqwest::Client, server: &ServerProcess) {
    let (status, _) = send(http.put(server.at("/v1/topics/t"))).await;
    assert_eq!(status, 201);
    let group = json!({"max_attempts": 1, "max_in_flight": 8});
    let (status, _) = send(http.put(server.at("/v1/topics/t/groups/g")).json(&group)).await;
    assert_eq!(status, 201);
}

/// Publishes offset 0 raw with a key and headers, then offsets 1..=3 as a batch.
async fn publish_all(http: &reqwest::Client, server: &ServerProcess) {
    let raw = http
        .post(server.at("/v1/topics/t/messages"))
        .header("Mailroom-Key", "customer-1")
        .header("Mailroom-Header-Trace", "t-1")
        .header("Mailroom-Header-Origin", "web")
        .body("raw one");
    assert_eq!(send(raw).await, (201, json!({"offset": 0})));
    let batch = json!({"messages": [
        "plain",
        {"payload": "with key", "key": "customer-2"},
        {"payload_base64": "/wA=", "headers": {"Content-Type": "application/x", "empty": ""}},
    ]});
    let request = http
        .post(server.at("/v1/topics/t/messages/batch"))
        .json(&batch);
    assert_eq!(send(request).await, (201, json!({"offsets": [1, 2, 3]})));
}

/// Checks `deliveries` (JSON deliveries or dead letters of offsets 0, 1, ... in order)
/// carry what `publish_all` published, with publish times between `before` and `after`.
fn check_published(deliveries: &[Value], before: u64, after: u64) {
    for delivery in deliveries {
        let at = delivery["published_at_ms"]
            .as_u64()
            .expect("a publish time");
        assert!(
            (before..=after).contains(&at),
            "{at} not in {before}..={after}"
        );
    }
    let without_times: Vec<Value> = deliveries
        .iter()
        .map(|delivery| {
            let mut delivery = delivery.clone();
            let object = delivery.as_object_mut().unwrap();
            object.retain(|name, _| {
                ["offset", "payload", "payload_base64", "key", "headers"].contains(&name.as_str())
            });
            delivery
        })
        .collect();
    let expected = [
        json!({"offset": 0, "payload": "raw one", "key": "customer-1",
                   "headers": {"trace": "t-1", "origin": "web"}}),
        json!({"offset": 1, "payload": "plain"}),
        json!({"offset": 2, "payload": "with key", "key": "customer-2"}),
        json!({"offset": 3, "payload_base64": "/wA=",
                   "headers": {"Content-Type": "application/x", "empty": ""}}),
    ];
    assert_eq!(without_times, expected[..deliveries.len()]);
}

// Proves both publish paths store keys and headers, the batch poll and the dead letters
// return them with the publish time, and all of it survives a kill -9.
#[tokio::test]
async fn metadata_goes_round_every_path_and_survives_a_kill() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "always"]);
    let http = reqwest::Client::new();
    topic_and_group(&http, &server).await;
    let before = now_ms();
    publish_all(&http, &server).await;
    let after = now_ms();
    let poll = json!({"max": 8});
    let (status, polled) = send(
        http.post(server.at("/v1/topics/t/groups/g/poll/batch"))
            .json(&poll),
    )
    .await;
    assert_eq!(status, 200);
    check_published(polled["deliveries"].as_array().unwrap(), before, after);
    for offset in 0..4 {
        let nack = json!({"offset": offset, "attempt": 1});
        let (status, _) = send(
            http.post(server.at("/v1/topics/t/groups/g/nack"))
                .json(&nack),
        )
        .await;
        assert_eq!(status, 200);
    }
    server.kill();

    let server = ServerProcess::start(dir.path(), &[]);
    let (status, page) = send(http.get(server.at("/v1/topics/t/groups/g/dead-letters"))).await;
    assert_eq!(status, 200);
    check_published(page["dead_letters"].as_array().unwrap(), before, after);
}

// Proves the single JSON poll returns the metadata, and the raw poll returns it as
// response headers (and leaves them out for a message without any).
#[tokio::test]
async fn single_and_raw_polls_return_metadata() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &[]);
    let http = reqwest::Client::new();
    topic_and_group(&http, &server).await;
    let before = now_ms();
    publish_all(&http, &server).await;
    let after = now_ms();
    let (status, first) = send(http.post(server.at("/v1/topics/t/groups/g/poll"))).await;
    assert_eq!(status, 200);
    check_published(&[first][..], before, after);

    let response = http
        .post(server.at("/v1/topics/t/groups/g/poll/raw"))
        .send()
        .await
        .unwrap();
    let headers = response.headers().clone();
    let header = |name: &str| headers.get(name).map(|v| v.to_str().unwrap().to_owned());
    assert_eq!(
        header("mailroom-offset").as_deref(),
        Some("0"),
        "the one in flight first"
    );
    assert_eq!(header("mailroom-key").as_deref(), Some("customer-1"));
    assert_eq!(header("mailroom-header-trace").as_deref(), Some("t-1"));
    assert_eq!(header("mailroom-header-origin").as_deref(), Some("web"));
    let at: u64 = header("mailroom-published-at-ms").unwrap().parse().unwrap();
    assert!((before..=after).contains(&at));
    assert_eq!(&response.bytes().await.unwrap()[..], b"raw one");

    let ack = json!({"offset": 0, "attempt": 1});
    assert_eq!(
        send(http.post(server.at("/v1/topics/t/groups/g/ack")).json(&ack))
            .await
            .0,
        200
    );
    let response = http
        .post(server.at("/v1/topics/t/groups/g/poll/raw"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers().get("mailroom-offset").unwrap(), "1");
    assert!(
        response.headers().get("mailroom-key").is_none(),
        "no key, no header"
    );
    assert!(response.headers().get("mailroom-published-at-ms").is_some());
}

// Proves bad metadata on either publish path is a 400 invalid_argument naming the field,
// and stores nothing.
#[tokio::test]
async fn bad_metadata_is_refused_naming_the_field() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &[]);
    let http = reqwest::Client::new();
    topic_and_group(&http, &server).await;
    let raw = |name: &str, value: Vec<u8>| {
        http.post(server.at("/v1/topics/t/messages"))
            .header(
                name,
                reqwest::header::HeaderValue::from_bytes(&value).unwrap(),
            )
            .body("x")
    };
    let long_key = "k".repeat(1025).into_bytes();
    let cases = [
        (
            raw("Mailroom-Key", long_key.clone()),
            "mailroom-key must be 1..=1024 bytes long, got 1025",
        ),
        (
            raw("Mailroom-Key", Vec::new()),
            "mailroom-key must be 1..=1024 bytes long, got 0",
        ),
        (
            raw("Mailroom-Header-X", vec![0xff, 0xfe]),
            "request header mailroom-header-x is not UTF-8",
        ),
        (
            raw("Mailroom-Header-X", vec![b'v'; 4097]),
            "a mailroom-header-* request header must be at most 4096 bytes long, got 4097",
        ),
    ];
    for (request, message) in cases {
        let (status, body) = send(request).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (400, Some("invalid_argument")),
            "{body}"
        );
        assert_eq!(body["message"].as_str(), Some(message));
    }
    let many: serde_json::Map<String, Value> =
        (0..65).map(|i| (format!("h{i}"), json!(""))).collect();
    let batches = [
        (
            json!([ "ok", {"payload": "x", "key": "k".repeat(1025)}]),
            "messages[1].key must be 1..=1024 bytes long, got 1025",
        ),
        (
            json!([{"payload": "x", "headers": many}]),
            "messages[0].headers must list at most 64 headers, got 65",
        ),
        (
            json!([{"payload": "x", "headers": {"": "v"}}]),
            "messages[0].headers.name must be 1..=256 bytes long, got 0",
        ),
        (
            json!([{"payload": "x", "payload_base64": "eA=="}]),
            "messages[0] must have exactly one of payload and payload_base64",
        ),
    ];
    for (messages, message) in batches {
        let body = json!({ "messages": messages });
        let (status, body) = send(
            http.post(server.at("/v1/topics/t/messages/batch"))
                .json(&body),
        )
        .await;
        assert_eq!(
            (status, body["error"].as_str()),
            (400, Some("invalid_argument")),
            "{body}"
        );
        assert_eq!(body["message"].as_str(), Some(message));
    }
    let (_, topic) = send(http.get(server.at("/v1/topics/t"))).await;
    assert_eq!(topic["end"], json!(0), "nothing was stored");
}

// Proves the Rust client publishes keys and headers (header names keep their case, binary
// payloads travel as base64) and reads them back from polls and dead letters.
#[tokio::test]
async fn rust_client_publishes_and_reads_metadata() {
    use mailroom_client::{GroupOptions, NewMessage};
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &[]);
    let client = server.client();
    client.create_topic("t").await.unwrap();
    client
        .create_group_with("t", "g", &GroupOptions::new(1))
        .await
        .unwrap();
    let messages = [
        NewMessage::new("a")
            .with_key("k")
            .with_header("Trace-Id", "t1"),
        NewMessage::new(vec![0xffu8, 0]),
    ];
    let before = now_ms();
    assert_eq!(
        client.publish_messages("t", &messages).await.unwrap(),
        [0, 1]
    );
    let after = now_ms();
    for message in &messages {
        let delivery = client.poll("t", "g").await.unwrap().expect("a delivery");
        assert_eq!(delivery.payload, message.payload);
        assert_eq!(
            (&delivery.key, &delivery.headers),
            (&message.key, &message.headers)
        );
        let at = delivery.published_at_ms.expect("a publish time");
        assert!((before..=after).contains(&at));
        client.nack("t", "g", delivery.id()).await.unwrap();
    }
    let dead = client.dead_letters("t", "g").await.unwrap();
    assert_eq!(dead[0].key.as_deref(), Some("k"));
    assert_eq!(dead[0].headers, messages[0].headers);
    assert!(dead[1].key.is_none() && dead[1].headers.is_empty());
}

// Proves the publish stream takes keys and headers in JSON text frames (binary frames stay
// bare payloads), and refuses a frame with a bad key alone, naming it, while the stream
// goes on.
#[tokio::test]
async fn publish_stream_carries_metadata_in_text_frames() {
    use mailroom_client::NewMessage;
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &[]);
    let client = server.client();
    client.create_topic("t").await.unwrap();
    let options = mailroom_client::GroupOptions::new(1);
    client.create_group_with("t", "g", &options).await.unwrap();
    let mut stream = client.publish_stream("t").await.unwrap();
    stream
        .send(bytes::Bytes::from_static(b"bare"))
        .await
        .unwrap();
    let keyed = NewMessage::new("keyed")
        .with_key("k")
        .with_header("Trace", "t1");
    stream.send_message(&keyed).await.unwrap();
    stream
        .send_message(&NewMessage::new("bad").with_key(""))
        .await
        .unwrap();
    stream
        .send_message(&NewMessage::new(vec![0xffu8]))
        .await
        .unwrap();
    let confirmations = stream.flush().await.unwrap();
    let outcome = |seq: u64| {
        let confirmation = confirmations
            .iter()
            .find(|c| c.seqs().contains(&seq))
            .unwrap();
        confirmation
            .offset_of(seq)
            .ok_or_else(|| match &confirmation.outcome {
                Err(refusal) => refusal.message.clone(),
                Ok(_) => unreachable!("published frames have offsets"),
            })
    };
    assert_eq!((outcome(0), outcome(1)), (Ok(0), Ok(1)));
    let refusal = outcome(2).unwrap_err();
    assert!(
        refusal.starts_with("frame 2.key must be 1..=1024"),
        "{refusal}"
    );
    assert_eq!(outcome(3), Ok(2));

    let expected = [(&b"bare"[..], None), (b"keyed", Some("k")), (&[0xff], None)];
    for (payload, key) in expected {
        let delivery = client.poll("t", "g").await.unwrap().expect("a delivery");
        assert_eq!(
            (&delivery.payload[..], delivery.key.as_deref()),
            (payload, key)
        );
        if key.is_some() {
            assert_eq!(delivery.headers, keyed.headers);
        }
        client.ack("t", "g", delivery.id()).await.unwrap();
    }
}
