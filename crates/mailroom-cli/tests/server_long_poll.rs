//! The long poll against the real `mailroom` binary: wake-ups by a publish, an ack and a
//! backoff delay running out, and time-outs.

mod batch_support;
mod cli_support;
mod common;

use std::time::{Duration, Instant};

use batch_support::{
    batch, id, publish, topic_with_group, until_waiting, WAIT_MS_LONG, WAIT_MS_SHORT,
};
use common::{temp_dir, ServerProcess};
use mailroom_client::{BatchPoll, GroupOptions, NackOptions, NackOutcome};

// Proves a long poll on a caught-up group waits, and answers with the message a later
// publish brings (well before its own wait ends); and that an ack waking a long poll on
// a full window hands the freed slot to the waiter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_poll_is_answered_by_a_publish_and_an_ack() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "never"]);
    let client = server.client();
    topic_with_group(&client, 1).await;

    let waiter = {
        let client = client.clone();
        tokio::spawn(async move {
            let request = BatchPoll {
                consumer: Some("w1"),
                max: 4,
                wait_ms: WAIT_MS_LONG,
                ack: &[],
            };
            client.poll_batch("t", "g", &request).await.unwrap()
        })
    };
    until_waiting(&client, 1.0).await;
    client.publish("t", "wake").await.unwrap();
    client.publish("t", "later").await.unwrap();
    let woken = waiter.await.unwrap();
    assert_eq!(woken.len(), 1, "W = 1");
    assert_eq!((woken[0].offset, &woken[0].payload[..]), (0, &b"wake"[..]));
    until_waiting(&client, 0.0).await;

    // The window is full (w1 holds offset 0): w2 waits until w1's ack frees it.
    let waiter = {
        let client = client.clone();
        tokio::spawn(async move {
            let request = BatchPoll {
                consumer: Some("w2"),
                max: 4,
                wait_ms: WAIT_MS_LONG,
                ack: &[],
            };
            client.poll_batch("t", "g", &request).await.unwrap()
        })
    };
    until_waiting(&client, 1.0).await;
    client.ack_batch("t", "g", &[woken[0].id()]).await.unwrap();
    let freed = waiter.await.unwrap();
    assert_eq!(freed.iter().map(|d| d.id()).collect::<Vec<_>>(), [id(1, 1)]);
}

/// The backoff of `backoff_delay_reaches_a_waiting_long_poll`: short, but longer than a
/// round trip, so the message is surely not ready when the long poll starts.
const BACKOFF_DELAY_MS: u64 = 200;

// Proves a message held back by a backoff delay (which no request signals) still reaches
// a waiting long poll once the delay is over, long before the wait ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backoff_delay_reaches_a_waiting_long_poll() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "never"]);
    let client = server.client();
    client.create_topic("t").await.unwrap();
    let mut options = GroupOptions::new(3);
    options.backoff = Some(mailroom_client::Backoff::Fixed {
        delay_ms: BACKOFF_DELAY_MS,
    });
    client.create_group_with("t", "g", &options).await.unwrap();
    publish(&client, 1).await;
    let first = client.poll_batch("t", "g", &batch(None, 1)).await.unwrap();
    let nacked = client
        .nack_batch("t", "g", &[first[0].id()], &NackOptions::default())
        .await
        .unwrap();
    assert_eq!(nacked, vec![Ok(NackOutcome::Retry)]);

    let started = Instant::now();
    let request = BatchPoll {
        consumer: None,
        max: 1,
        wait_ms: WAIT_MS_LONG,
        ack: &[],
    };
    let retried = client.poll_batch("t", "g", &request).await.unwrap();
    assert_eq!(
        retried.iter().map(|d| d.id()).collect::<Vec<_>>(),
        [id(0, 2)]
    );
    assert!(
        started.elapsed() < Duration::from_millis(WAIT_MS_LONG / 2),
        "answered only at the end of the wait: {:?}",
        started.elapsed()
    );
}

// Proves a long poll that finds nothing answers an empty list once its wait is over
// (not before), and that a long poll whose client goes away stops waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_poll_times_out_empty_and_ends_with_its_client() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "never"]);
    let client = server.client();
    topic_with_group(&client, 4).await;

    let started = Instant::now();
    let request = BatchPoll {
        consumer: None,
        max: 4,
        wait_ms: WAIT_MS_SHORT,
        ack: &[],
    };
    let polled = client.poll_batch("t", "g", &request).await.unwrap();
    assert!(polled.is_empty());
    assert!(started.elapsed() >= Duration::from_millis(WAIT_MS_SHORT));

    let abandoned = {
        let client = client.clone();
        tokio::spawn(async move {
            let request = BatchPoll {
                consumer: None,
                max: 4,
                wait_ms: WAIT_MS_LONG,
                ack: &[],
            };
            client.poll_batch("t", "g", &request).await
        })
    };
    until_waiting(&client, 1.0).await;
    abandoned.abort();
    // Dropping the request closes its connection; the server drops the waiter.
    until_waiting(&client, 0.0).await;
}
