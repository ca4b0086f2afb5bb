//! Restarts: SIGKILL mid-traffic and SIGTERM, each followed by a restart on the same data
//! directory.

mod common;

use std::sync::{Arc, Mutex};

use common::{temp_dir, Deadline, ServerProcess};
use mailroom_client::{Client, StartPosition};

/// Confirmed publishes needed before the kill: enough that the kill lands mid-stream.
const CONFIRMED_BEFORE_KILL: usize = 40;

// Proves a SIGKILL in the middle of publishing loses nothing that was confirmed (every
// confirmed offset reads back with its payload after restart), and that a delivery in
// flight before the kill is still in flight afterwards, with the same attempt, ackable
// exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_mid_traffic_loses_nothing_confirmed() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "always"]);
    let client = server.client();
    client.create_topic("ledger").await.unwrap();
    client
        .create_group("ledger", "billing", 3, StartPosition::Earliest)
        .await
        .unwrap();
    client.publish("ledger", "first").await.unwrap();
    let nacked = client.poll("ledger", "billing").await.unwrap().unwrap();
    client.nack("ledger", "billing", nacked.id()).await.unwrap();
    let in_flight = client.poll("ledger", "billing").await.unwrap().unwrap();
    assert_eq!((in_flight.offset, in_flight.attempt), (0, 2));

    // A publisher records every publish the server confirmed, until the server dies.
    let confirmed = Arc::new(Mutex::new(vec![(0u64, b"first".to_vec())]));
    let publisher = {
        let (client, confirmed) = (client.clone(), confirmed.clone());
        tokio::spawn(async move {
            for n in 1u64.. {
                let payload = format!("message {n}").into_bytes();
                match client.publish("ledger", payload.clone()).await {
                    Ok(offset) => confirmed.lock().unwrap().push((offset, payload)),
                    Err(_) => return,
                }
            }
        })
    };
    let deadline = Deadline::new("the publisher's first confirmations");
    while confirmed.lock().unwrap().len() < CONFIRMED_BEFORE_KILL {
        // A publisher that stopped (its publish failed) will confirm no more.
        assert!(
            !publisher.is_finished(),
            "the publisher stopped before the kill"
        );
        deadline.check();
        tokio::task::yield_now().await;
    }
    tokio::task::spawn_blocking(move || server.kill())
        .await
        .unwrap();
    publisher.await.unwrap();

    let server = ServerProcess::start(dir.path(), &[]);
    let client = server.client();
    let confirmed = confirmed.lock().unwrap().clone();
    assert!(confirmed.len() >= CONFIRMED_BEFORE_KILL);
    let info = client.topic_info("ledger").await.unwrap();
    assert!(
        info.end >= confirmed.len() as u64,
        "offsets lost: end {}",
        info.end
    );

    // The in-flight delivery survived with its attempt; a stale attempt stays refused.
    assert_eq!(
        client.poll("ledger", "billing").await.unwrap().unwrap(),
        in_flight
    );
    let stale = client
        .ack("ledger", "billing", nacked.id())
        .await
        .unwrap_err();
    assert_eq!(stale.code(), Some("not_owned"));
    client
        .ack("ledger", "billing", in_flight.id())
        .await
        .unwrap();
    let again = client
        .ack("ledger", "billing", in_flight.id())
        .await
        .unwrap_err();
    assert_eq!(again.code(), Some("not_owned"));

    // Every confirmed publish reads back, at its offset, with its bytes.
    assert_confirmed_readable(&client, &confirmed, info.end).await;
}

async fn assert_confirmed_readable(client: &Client, confirmed: &[(u64, Vec<u8>)], end: u64) {
    client
        .create_group("ledger", "verify", 1, StartPosition::Earliest)
        .await
        .unwrap();
    let mut seen = Vec::new();
    while let Some(delivery) = client.poll("ledger", "verify").await.unwrap() {
        assert_eq!(delivery.offset, seen.len() as u64, "offsets are gap-free");
        seen.push(delivery.payload.to_vec());
        client.ack("ledger", "verify", delivery.id()).await.unwrap();
    }
    assert_eq!(seen.len() as u64, end);
    for (offset, payload) in confirmed {
        assert_eq!(&seen[*offset as usize], payload, "offset {offset}");
    }
}

// Proves SIGTERM shuts down gracefully with exit status 0, and that everything, including
// group state, is there after a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_exits_zero_and_keeps_state() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "never"]);
    let client = server.client();
    client.create_topic("t").await.unwrap();
    client
        .create_group("t", "g", 2, StartPosition::Earliest)
        .await
        .unwrap();
    for n in 0..5 {
        client.publish("t", format!("m{n}")).await.unwrap();
    }
    let delivery = client.poll("t", "g").await.unwrap().unwrap();
    client.ack("t", "g", delivery.id()).await.unwrap();
    let status = tokio::task::spawn_blocking(move || server.terminate())
        .await
        .unwrap();
    assert!(status.success(), "exit status {status}");

    // With fsync never, only the shutdown sync made this durable.
    let server = ServerProcess::start(dir.path(), &[]);
    let client = server.client();
    let info = client.group_info("t", "g").await.unwrap();
    assert_eq!((info.position, info.lag), (1, 4));
    let next = client.poll("t", "g").await.unwrap().unwrap();
    assert_eq!((next.offset, &next.payload[..]), (1, &b"m1"[..]));
}

// Proves what the README says of live channels: they live in memory only, so after a
// restart on the same data directory the channel is gone (and can be made again) while
// the topic beside it stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channels_vanish_on_restart() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "never"]);
    let client = server.client();
    client.create_topic("t").await.unwrap();
    client.create_channel("live", 4, 16).await.unwrap();
    assert_eq!(client.list_channels().await.unwrap().len(), 1);
    let status = tokio::task::spawn_blocking(move || server.terminate())
        .await
        .unwrap();
    assert!(status.success(), "exit status {status}");

    let server = ServerProcess::start(dir.path(), &[]);
    let client = server.client();
    assert!(client.list_channels().await.unwrap().is_empty());
    assert_eq!(client.topic_info("t").await.unwrap().name, "t");
    assert!(client.create_channel("live", 4, 16).await.unwrap());
}
