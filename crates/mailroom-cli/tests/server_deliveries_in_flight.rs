//! The group view's deliveries in flight, as `GET /v1/topics/{topic}/groups/{group}`
//! answers them from a real `mailroom serve`: each with the consumer that polled it
//! (null for the anonymous consumer) and its lease deadline (null without a lease), on
//! the embedded store and on PostgreSQL.
//!
//! The PostgreSQL case takes its database from `MAILROOM_TEST_POSTGRES`
//! (`scripts/postgres.sh start DIR`); without it that test fails under `CI=true` and
//! elsewhere says it was not run.

mod common;

use std::time::{SystemTime, UNIX_EPOCH};

use common::{temp_dir, ServerProcess};
use mailroom_client::{Client, GroupOptions};
use serde_json::{json, Value};

const LEASE_MS: u64 = 60_000;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// The group view exactly as the server sends it.
async fn group_view(server: &ServerProcess, group: &str) -> Value {
    let response = reqwest::get(server.at(&format!("/v1/topics/t/groups/{group}")))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

/// A group on topic `t` with room for three deliveries in flight, leased or not.
async fn create_group(client: &Client, group: &str, lease_ms: Option<u64>) {
    let mut options = GroupOptions::new(3);
    options.max_in_flight = Some(3);
    options.lease_ms = lease_ms;
    client
        .create_group_with("t", group, &options)
        .await
        .unwrap();
}

/// Polls once as `consumer` (anonymous when `None`); answers the offset and the clock
/// just before and just after, which bound the lease deadline the broker set.
async fn poll(client: &Client, group: &str, consumer: Option<&str>) -> (u64, u64, u64) {
    let before = now_ms();
    let delivery = match consumer {
        Some(name) => client.poll_as("t", group, name).await,
        None => client.poll("t", group).await,
    };
    let offset = delivery.unwrap().expect("a message is ready").offset;
    (offset, before, now_ms())
}

/// Drives one server through the cases and checks every delivery the view lists.
async fn shows_consumer_and_lease_deadline(server: &ServerProcess) {
    let client = server.client();
    client.create_topic("t").await.unwrap();
    create_group(&client, "leased", Some(LEASE_MS)).await;
    create_group(&client, "plain", None).await;
    for n in 0..3 {
        client.publish("t", format!("m{n}")).await.unwrap();
    }

    let polls = [
        poll(&client, "leased", Some("c1")).await,
        poll(&client, "leased", Some("c2")).await,
        poll(&client, "leased", None).await,
    ];
    let view = group_view(server, "leased").await;
    let deliveries = view["deliveries"].as_array().unwrap();
    assert_eq!(deliveries.len(), 3, "{view}");
    for ((delivery, consumer), (offset, before, after)) in deliveries
        .iter()
        .zip([json!("c1"), json!("c2"), Value::Null])
        .zip(polls)
    {
        assert_eq!(delivery["offset"], offset, "{view}");
        assert_eq!(delivery["attempt"], 1, "{view}");
        assert_eq!(delivery["consumer"], consumer, "{view}");
        let deadline = delivery["lease_deadline_ms"].as_u64().expect("a deadline");
        assert!(
            (before + LEASE_MS..=after + LEASE_MS).contains(&deadline),
            "deadline {deadline} is not the poll's time ({before}..={after}) + the lease"
        );
    }

    // A touch renews the lease from the time of the touch: the deadline moves on.
    let touched_from = now_ms();
    let first = client.poll_as("t", "leased", "c1").await.unwrap().unwrap();
    client.touch("t", "leased", first.id()).await.unwrap();
    let view = group_view(server, "leased").await;
    let renewed = view["deliveries"][0]["lease_deadline_ms"].as_u64().unwrap();
    assert!(renewed >= touched_from + LEASE_MS, "{view}");

    // Without a lease the deadline is there, as null; the consumers are as polled.
    poll(&client, "plain", Some("c2")).await;
    poll(&client, "plain", None).await;
    let view = group_view(server, "plain").await;
    assert_eq!(
        view["deliveries"],
        json!([
            {"offset": 0, "attempt": 1, "consumer": "c2", "lease_deadline_ms": null},
            {"offset": 1, "attempt": 1, "consumer": null, "lease_deadline_ms": null},
        ])
    );

    // The Rust client reads the same.
    let detail = client.group_detail("t", "plain").await.unwrap();
    let consumers: Vec<_> = detail
        .deliveries
        .iter()
        .map(|d| d.consumer.clone())
        .collect();
    assert_eq!(consumers, [Some("c2".to_owned()), None]);
    assert!(detail
        .deliveries
        .iter()
        .all(|d| d.lease_deadline_ms.is_none()));
}

// Proves the embedded store's group view lists each delivery in flight with the
// consumer that polled it and its lease deadline (renewed by a touch), and nulls for the
// anonymous consumer and for a group without leases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_store_shows_consumer_and_lease_deadline() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &[]);
    shows_consumer_and_lease_deadline(&server).await;
}

// Proves the PostgreSQL store's group view shows the same as the embedded one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_store_shows_consumer_and_lease_deadline() {
    let Some(url) = common::fresh_postgres_database().await else {
        return;
    };
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--store", &url]);
    shows_consumer_and_lease_deadline(&server).await;
}
