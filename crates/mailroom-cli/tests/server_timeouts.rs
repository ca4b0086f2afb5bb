//! The client's time limits against the real `mailroom` binary: a long poll longer than
//! the request limit still answers normally (its wait is added to the limit), and open
//! streams are not timed at all.

mod common;

use std::time::{Duration, Instant};

use common::{temp_dir, ServerProcess};
use mailroom_client::{BatchPoll, Client, StartPosition, Timeouts};

/// The request limit under test, shorter than the waits below.
const REQUEST_TIMEOUT: Duration = Duration::from_millis(200);

/// A client of `server` with the short request limit.
fn short_client(server: &ServerProcess) -> Client {
    let timeouts = Timeouts {
        connect: Duration::from_secs(5),
        request: REQUEST_TIMEOUT,
    };
    Client::with_timeouts(&server.url, timeouts).expect("valid url")
}

// Proves a long poll of 500 ms on an empty topic, with a 200 ms request limit, returns
// normally (no deliveries) after the server held it the whole wait.
#[tokio::test]
async fn a_long_poll_longer_than_the_request_limit_answers() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "never"]);
    let client = short_client(&server);
    client.create_topic("t").await.unwrap();
    client
        .create_group("t", "g", 3, StartPosition::Earliest)
        .await
        .unwrap();
    let request = BatchPoll {
        consumer: None,
        max: 8,
        wait_ms: 500,
        ack: &[],
    };
    let started = Instant::now();
    let deliveries = client.poll_batch("t", "g", &request).await.unwrap();
    assert!(deliveries.is_empty(), "{deliveries:?}");
    // The server held the request past the request limit, so the wait was added.
    assert!(started.elapsed() >= Duration::from_millis(500));
}

// Proves an open subscription and an open publish stream outlive the request limit:
// after idling three limits long, both still carry messages.
#[tokio::test]
async fn open_streams_are_not_timed() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "never"]);
    let client = short_client(&server);
    client.create_topic("t").await.unwrap();
    client.create_channel("c", 4, 16).await.unwrap();
    let mut subscription = client.subscribe("c").await.unwrap();
    let mut stream = client.publish_stream("t").await.unwrap();
    // Idling is the point here: the time passing is what a timed stream would fail on.
    tokio::time::sleep(REQUEST_TIMEOUT * 3).await;
    client.publish_channel("c", "late").await.unwrap();
    let message = subscription.next().await.expect("open").unwrap();
    assert_eq!(&message[..], b"late");
    stream.send("late".into()).await.unwrap();
    let confirmations = stream.flush().await.unwrap();
    let offsets: Vec<_> = confirmations.iter().map(|c| c.offsets()).collect();
    assert_eq!(offsets, vec![Some(0..1)]);
}
