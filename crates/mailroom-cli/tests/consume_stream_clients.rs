//! The consume stream through the Rust client (`Client::consume_stream`) and the CLI
//! (`mailroom consume --stream`), against the real binary.

mod cli_support;
mod common;

use bytes::Bytes;
use cli_support::documents;
use common::{temp_dir, ServerProcess};
use mailroom_client::{
    Client, GroupOptions, NackKind, NackOptions, NewMessage, SettledOutcome, StreamEvent,
};

/// A server with topic `t` and group `g` (max_attempts 2, max_in_flight 16).
async fn setup() -> (tempfile::TempDir, ServerProcess, Client) {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "never"]);
    let client = server.client();
    client.create_topic("t").await.unwrap();
    let mut options = GroupOptions::new(2);
    options.max_in_flight = Some(16);
    client.create_group_with("t", "g", &options).await.unwrap();
    (dir, server, client)
}

// Proves the client's stream hands out deliveries with their metadata, sends acks,
// nacks and touches, and hands out the answers in seq order with their outcomes; a
// settlement of a delivery already settled comes back not_owned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_stream_settles_in_order() {
    let (_dir, _server, client) = setup().await;
    let keyed = NewMessage::new(Bytes::from_static(b"first")).with_key("k1");
    client.publish_messages("t", &[keyed]).await.unwrap();
    client
        .publish("t", Bytes::from_static(b"second"))
        .await
        .unwrap();
    let mut stream = client
        .consume_stream("t", "g", 4, Some("c1"))
        .await
        .unwrap();
    assert_eq!((stream.consumer(), stream.window()), ("c1", 4));
    let mut deliveries = Vec::new();
    while deliveries.len() < 2 {
        match stream.next().await.unwrap().unwrap() {
            StreamEvent::Delivery(delivery) => deliveries.push(delivery),
            other => panic!("expected a delivery, got {other:?}"),
        }
    }
    assert_eq!(deliveries[0].key.as_deref(), Some("k1"));
    assert!(deliveries[0].published_at_ms.is_some());
    assert_eq!(deliveries[1].payload, Bytes::from_static(b"second"));
    let seqs = [
        stream.touch(deliveries[0].id()).await.unwrap(),
        stream.ack(deliveries[0].id()).await.unwrap(),
        stream
            .nack(
                deliveries[1].id(),
                &NackOptions {
                    kind: NackKind::Reject,
                    ..NackOptions::default()
                },
            )
            .await
            .unwrap(),
        stream.ack(deliveries[0].id()).await.unwrap(),
    ];
    assert_eq!(seqs, [0, 1, 2, 3]);
    let mut answers = Vec::new();
    while answers.len() < 4 {
        if let StreamEvent::Settled(answer) = stream.next().await.unwrap().unwrap() {
            answers.push(answer);
        }
    }
    let outcomes: Vec<_> = answers
        .iter()
        .map(|a| (a.seq, a.outcome.clone().ok()))
        .collect();
    assert_eq!(
        outcomes,
        [
            (0, Some(SettledOutcome::Touched)),
            (1, Some(SettledOutcome::Acked)),
            (2, Some(SettledOutcome::DeadLettered)),
            (3, None),
        ]
    );
    assert_eq!(answers[3].outcome.as_ref().unwrap_err().code, "not_owned");
    stream.close().await.unwrap();
}

// Proves `mailroom consume --stream --window N` consumes and acks everything, printing
// each message once its ack is answered, and ends once the group is caught up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_consumes_over_the_stream() {
    let (_dir, server, client) = setup().await;
    for n in 0..20 {
        client
            .publish("t", Bytes::from(format!("job {n}")))
            .await
            .unwrap();
    }
    let url = server.url.clone();
    let output = tokio::task::spawn_blocking(move || {
        let args = ["--json", "consume", "t", "g", "--stream", "--window", "8"];
        cli_support::mailroom(&url, None, &args, b"")
    })
    .await
    .unwrap();
    let printed = documents(&output);
    assert_eq!(printed.len(), 20);
    for (n, document) in printed.iter().enumerate() {
        assert_eq!(document["offset"], n as u64, "{document}");
        assert_eq!(document["outcome"], "acked", "{document}");
    }
    let info = client.group_info("t", "g").await.unwrap();
    assert_eq!(info.lag, 0, "{info:?}");
}
