//! What the batch and long-poll tests share: a topic with a group, publishes, batch polls
//! and the server's long-poll gauge, and raw JSON posts for what the client cannot send.

#![allow(dead_code)] // Each test file uses a different subset.

use std::time::{Duration, Instant};

use mailroom_client::{BatchPoll, Client, DeliveryId, GroupOptions};

use serde_json::Value;

use crate::common::{ServerProcess, PROCESS_WAIT_MS_MAX};

/// A long poll long enough never to end by itself during a test.
pub const WAIT_MS_LONG: u64 = 30_000;
/// A long poll short enough to time out in a test.
pub const WAIT_MS_SHORT: u64 = 300;

pub fn id(offset: u64, attempt: u32) -> DeliveryId {
    DeliveryId { offset, attempt }
}

pub fn batch(consumer: Option<&str>, max: u32) -> BatchPoll<'_> {
    BatchPoll {
        consumer,
        max,
        wait_ms: 0,
        ack: &[],
    }
}

/// A topic `t` with group `g` allowing `window` deliveries in flight and 2 attempts.
pub async fn topic_with_group(client: &Client, window: u32) {
    client.create_topic("t").await.unwrap();
    let mut options = GroupOptions::new(2);
    options.max_in_flight = Some(window);
    client.create_group_with("t", "g", &options).await.unwrap();
}

pub async fn publish(client: &Client, count: u64) {
    for n in 0..count {
        assert_eq!(client.publish("t", format!("m{n}")).await.unwrap(), n);
    }
}

/// The value of an unlabelled series in the server's metrics.
pub async fn metric(client: &Client, name: &str) -> Option<f64> {
    let text = client.metrics().await.unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// Waits until the server reports `count` long polls waiting.
pub async fn until_waiting(client: &Client, count: f64) {
    let deadline = Instant::now() + Duration::from_millis(PROCESS_WAIT_MS_MAX);
    while metric(client, "mailroom_long_polls_waiting").await != Some(count) {
        assert!(
            Instant::now() < deadline,
            "never {count} long polls waiting"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Sends `body` to `path` and returns the status and the JSON body.
pub async fn post(server: &ServerProcess, path: &str, body: Vec<u8>) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(server.at(path))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let is_json = response
        .headers()
        .get("content-type")
        .is_some_and(|value| value.as_bytes().starts_with(b"application/json"));
    let text = response.text().await.unwrap();
    assert!(is_json, "{status}: {text}");
    (status, serde_json::from_str(&text).unwrap())
}
