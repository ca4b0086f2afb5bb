//! Idempotent publish against the real `mailroom` binary: a repeated `Idempotency-Key`
//! (raw publish), `idempotency_key` (batch items, publish stream JSON frames) answers the
//! first offset as a duplicate and stores nothing; across a kill -9 before or after the
//! answer a retry leaves exactly one copy; a key past its limit is a 400 naming it.

mod common;

use common::{temp_dir, ServerProcess};
use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

async fn send(request: reqwest::RequestBuilder) -> (u16, Value) {
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The raw publish of `payload` with idempotency key `key`.
fn raw(http: &reqwest::Client, server: &ServerProcess, key: &str) -> reqwest::RequestBuilder {
    http.post(server.at("/v1/topics/t/messages"))
        .header("Idempotency-Key", key)
        .body("pay invoice 7")
}

/// How many messages topic `t` holds.
async fn end(http: &reqwest::Client, server: &ServerProcess) -> u64 {
    let (status, topic) = send(http.get(server.at("/v1/topics/t"))).await;
    assert_eq!(status, 200);
    topic["end"].as_u64().unwrap()
}

// Proves a raw publish and batch items with a repeated key answer the first offset as
// duplicates (in `duplicate` and `duplicates`) and store nothing, beside messages without
// keys, whose answers keep today's shape.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeats_answer_the_first_offset() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &[]);
    let http = reqwest::Client::new();
    assert_eq!(send(http.put(server.at("/v1/topics/t"))).await.0, 201);
    assert_eq!(
        send(raw(&http, &server, "k1")).await,
        (201, json!({"offset": 0}))
    );
    assert_eq!(
        send(raw(&http, &server, "k1")).await,
        (201, json!({"offset": 0, "duplicate": true}))
    );
    let batch = json!({"messages": [
        "plain",
        {"payload": "again", "idempotency_key": "k1"},
        {"payload": "new", "idempotency_key": "k2"},
        {"payload": "new again", "idempotency_key": "k2"},
    ]});
    let request = http
        .post(server.at("/v1/topics/t/messages/batch"))
        .json(&batch);
    assert_eq!(
        send(request).await,
        (201, json!({"offsets": [1, 0, 2, 2], "duplicates": [1, 3]}))
    );
    assert_eq!(end(&http, &server).await, 3);
}

// Proves the publish stream's JSON frames take `idempotency_key`: a repeat is confirmed
// alone with the first offset and `duplicate: true`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_publish_stream_takes_idempotency_keys() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &[]);
    let http = reqwest::Client::new();
    assert_eq!(send(http.put(server.at("/v1/topics/t"))).await.0, 201);
    let url = format!("ws://{}/v1/topics/t/publish/ws?text=json", server.address());
    let mut socket = tokio_tungstenite::connect_async(url).await.unwrap().0;
    let mut confirmations = Vec::new();
    for frame in [
        json!({"payload": "a", "idempotency_key": "s1"}),
        json!({"payload": "a", "idempotency_key": "s1"}),
    ] {
        let text = frame.to_string();
        socket.send(Message::Text(text.into())).await.unwrap();
        match socket.next().await.unwrap().unwrap() {
            Message::Text(text) => {
                confirmations.push(serde_json::from_str::<Value>(text.as_str()).unwrap())
            }
            other => panic!("expected a confirmation, got {other:?}"),
        }
    }
    assert_eq!(
        confirmations,
        [
            json!({"seq": 0, "count": 1, "offset": 0}),
            json!({"seq": 1, "count": 1, "offset": 0, "duplicate": true}),
        ]
    );
    assert_eq!(end(&http, &server).await, 1);
}

// Proves a retry after a kill -9 leaves exactly one copy, whether the kill came after
// the answer (the retry is a duplicate) or while the publish was in flight (the retry
// is a duplicate if the first write was durable, else it stores the one copy).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_a_kill_stores_one_copy() {
    let dir = temp_dir();
    let http = reqwest::Client::new();
    let server = ServerProcess::start(dir.path(), &[]);
    assert_eq!(send(http.put(server.at("/v1/topics/t"))).await.0, 201);
    assert_eq!(
        send(raw(&http, &server, "after")).await,
        (201, json!({"offset": 0}))
    );
    server.kill();
    let mut server = ServerProcess::start(dir.path(), &[]);
    assert_eq!(
        send(raw(&http, &server, "after")).await,
        (201, json!({"offset": 0, "duplicate": true}))
    );
    // Killed while publishing: the answers are lost with the process.
    for round in 0..5 {
        let key = format!("during-{round}");
        // Read before the publish starts: nothing else publishes, so the one copy, the
        // first write's if it was durable or the retry's if not, lands at this offset.
        let before = end(&http, &server).await;
        let in_flight = tokio::spawn(raw(&http, &server, &key).send());
        tokio::task::yield_now().await;
        server.kill();
        let _ = in_flight.await;
        server = ServerProcess::start(dir.path(), &[]);
        let (status, answer) = send(raw(&http, &server, &key)).await;
        assert_eq!(status, 201);
        assert_eq!(answer["offset"].as_u64(), Some(before), "{answer}");
        assert_eq!(end(&http, &server).await, before + 1, "{answer}");
        assert_eq!(
            send(raw(&http, &server, &key)).await.1["duplicate"],
            json!(true)
        );
    }
}

// Proves keys past their limits are 400s naming the request header or the item's field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_keys_are_refused_by_name() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &[]);
    let http = reqwest::Client::new();
    assert_eq!(send(http.put(server.at("/v1/topics/t"))).await.0, 201);
    // One byte past IDEMPOTENCY_KEY_BYTES_MAX (256).
    let long = "k".repeat(257);
    let (status, body) = send(raw(&http, &server, &long)).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_argument"))
    );
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("Idempotency-Key"),
        "{body}"
    );
    let batch = json!({"messages": [{"payload": "x", "idempotency_key": ""}]});
    let (status, body) = send(
        http.post(server.at("/v1/topics/t/messages/batch"))
            .json(&batch),
    )
    .await;
    assert_eq!(status, 400);
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("messages[0].idempotency_key"), "{body}");
    assert_eq!(end(&http, &server).await, 0);
}
