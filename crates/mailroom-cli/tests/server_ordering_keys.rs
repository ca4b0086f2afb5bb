//! Ordering keys against the real `mailroom` binary: with W > 1 a batch poll hands out at
//! most one message per key, a key's later messages wait for its earlier ones (across a
//! delayed release, which holds back only its own key), and held messages stay held
//! across a kill -9.

mod common;

use common::{temp_dir, ServerProcess};
use serde_json::{json, Value};

async fn send(request: reqwest::RequestBuilder) -> (u16, Value) {
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The offsets a batch poll by `consumer` hands out.
async fn poll(http: &reqwest::Client, server: &ServerProcess, consumer: &str) -> Vec<u64> {
    let url = server.at("/v1/topics/t/groups/g/poll/batch");
    let body = json!({"max": 8, "consumer": consumer});
    let (status, polled) = send(http.post(url).json(&body)).await;
    assert_eq!(status, 200, "{polled}");
    polled["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|delivery| delivery["offset"].as_u64().unwrap())
        .collect()
}

async fn settle(http: &reqwest::Client, server: &ServerProcess, verb: &str, body: Value) {
    let url = server.at(&format!("/v1/topics/t/groups/g/{verb}"));
    let (status, answer) = send(http.post(url).json(&body)).await;
    assert_eq!(status, 200, "{verb} {body}: {answer}");
}

// Proves a batch poll skips messages whose key is in flight, hands them out in offset
// order once the key is free, that a delayed release holds back only its own key, and
// that a held message is still held after a kill -9.
#[tokio::test]
async fn keys_go_one_at_a_time_in_order_and_survive_a_kill() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "always"]);
    let http = reqwest::Client::new();
    assert_eq!(send(http.put(server.at("/v1/topics/t"))).await.0, 201);
    let group = json!({"max_attempts": 3, "max_in_flight": 8});
    let (status, _) = send(http.put(server.at("/v1/topics/t/groups/g")).json(&group)).await;
    assert_eq!(status, 201);
    let batch = json!({"messages": [
        {"payload": "a0", "key": "a"},
        {"payload": "a1", "key": "a"},
        {"payload": "b2", "key": "b"},
        "none3",
        {"payload": "a4", "key": "a"},
        {"payload": "b5", "key": "b"},
    ]});
    let publish = http
        .post(server.at("/v1/topics/t/messages/batch"))
        .json(&batch);
    assert_eq!(send(publish).await.0, 201);

    // One per key, and the unkeyed one: 1, 4 and 5 wait for their keys.
    assert_eq!(poll(&http, &server, "c1").await, [0, 2, 3]);
    settle(&http, &server, "ack", json!({"offset": 0, "attempt": 1})).await;
    assert_eq!(poll(&http, &server, "c2").await, [1]);
    // A release of b2 for a minute holds back b5 only.
    let release = json!({"offset": 2, "attempt": 1, "kind": "release", "delay_ms": 60_000});
    settle(&http, &server, "nack", release).await;
    settle(&http, &server, "ack", json!({"offset": 1, "attempt": 1})).await;
    assert_eq!(poll(&http, &server, "c3").await, [4]);
    server.kill();

    let server = ServerProcess::start(dir.path(), &[]);
    // b5 is still held behind b2's delay; a4 and none3 are still in flight.
    assert_eq!(poll(&http, &server, "c4").await, Vec::<u64>::new());
    assert_eq!(poll(&http, &server, "c3").await, [4]);
}
