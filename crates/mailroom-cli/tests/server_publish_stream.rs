//! The pipelined publish stream (`GET /v1/topics/{topic}/publish/ws`) against the real
//! binary: confirmation order and offsets, batching, durability across a kill, oversize
//! frames, handshake refusals, topic deletion, and a randomized comparison with a model.

mod common;

use std::collections::BTreeMap;

use bytes::Bytes;
use common::{temp_dir, ServerProcess};
use futures_util::{SinkExt as _, StreamExt as _};
use mailroom_client::{BatchPoll, Client, ClientError, Confirmation, GroupOptions, StartPosition};
use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, TestRunner};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message;

/// Every payload published to `topic`, by offset, read through a fresh group.
async fn read_back(client: &Client, topic: &str, count: u32) -> BTreeMap<u64, Bytes> {
    let mut options = GroupOptions::new(1);
    options.start = StartPosition::Earliest;
    options.max_in_flight = Some(count.max(1));
    client
        .create_group_with(topic, "reader", &options)
        .await
        .unwrap();
    let request = BatchPoll {
        consumer: None,
        max: count.max(1),
        wait_ms: 0,
        ack: &[],
    };
    let deliveries = client.poll_batch(topic, "reader", &request).await.unwrap();
    deliveries
        .into_iter()
        .map(|d| (d.offset, d.payload))
        .collect()
}

/// Checks that `confirmations` cover seqs `0..sent` in order without gap or overlap,
/// and returns each seq's outcome.
fn by_seq(confirmations: &[Confirmation], sent: u64) -> Vec<Result<u64, String>> {
    let mut outcomes = Vec::new();
    for confirmation in confirmations {
        assert_eq!(confirmation.seq, outcomes.len() as u64, "{confirmations:?}");
        for seq in confirmation.seqs() {
            outcomes.push(match &confirmation.outcome {
                Ok(_) => Ok(confirmation.offset_of(seq).unwrap()),
                Err(refusal) => Err(refusal.code.to_string()),
            });
        }
    }
    assert_eq!(outcomes.len() as u64, sent);
    outcomes
}

/// A raw WebSocket to the publish stream of `topic`.
async fn raw_stream(
    server: &ServerProcess,
    topic: &str,
) -> tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>> {
    let url = format!("ws://{}/v1/topics/{topic}/publish/ws", server.address());
    tokio_tungstenite::connect_async(url).await.unwrap().0
}

/// The next confirmation frame as JSON.
async fn next_json<S>(socket: &mut S) -> serde_json::Value
where
    S: futures_util::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    match socket.next().await.unwrap().unwrap() {
        Message::Text(text) => serde_json::from_str(text.as_str()).unwrap(),
        other => panic!("expected a confirmation, got {other:?}"),
    }
}

// Proves confirmations arrive in seq order, cover every message once, and name offsets
// that read back the exact bytes sent (text and binary), with the window respected; and
// that the messages count in the publish metric like HTTP publishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirmations_are_in_order_and_read_back() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &[]);
    let client = server.client();
    client.create_topic("t").await.unwrap();
    let mut stream = client.publish_stream_with_window("t", 16).await.unwrap();
    let mut sent = Vec::new();
    let mut confirmations = Vec::new();
    for n in 0..200u32 {
        let payload = if n % 3 == 0 {
            Bytes::from(vec![0xff, n as u8, 0x00])
        } else {
            Bytes::from(format!("message {n}"))
        };
        assert_eq!(stream.feed(payload.clone()).await.unwrap(), u64::from(n));
        assert!(stream.in_flight() <= 16);
        sent.push(payload);
        if n % 50 == 0 {
            confirmations.extend(stream.confirmed().await.unwrap());
        }
    }
    confirmations.extend(stream.flush().await.unwrap());
    assert_eq!(stream.in_flight(), 0);
    assert_eq!(stream.confirmed().await.unwrap(), None);
    stream.close().await.unwrap();

    let outcomes = by_seq(&confirmations, sent.len() as u64);
    let stored = read_back(&client, "t", 200).await;
    for (seq, outcome) in outcomes.into_iter().enumerate() {
        let offset = outcome.unwrap();
        assert_eq!(stored[&offset], sent[seq], "seq {seq}");
    }
    let metrics = client.metrics().await.unwrap();
    assert!(
        metrics.contains("mailroom_publishes_total{topic=\"t\"} 200"),
        "{metrics}"
    );
}

// Proves the server keeps many frames in flight and writes what arrived together as one
// batch: a burst of 1,000 frames sent in one write comes back as far fewer confirmations
// (a server that confirmed frame by frame would send 1,000), covering all of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_is_confirmed_in_few_batches() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "always"]);
    server.client().create_topic("t").await.unwrap();
    let mut socket = raw_stream(&server, "t").await;
    for n in 0..1_000 {
        socket
            .feed(Message::Binary(Bytes::from(format!("m{n}"))))
            .await
            .unwrap();
    }
    socket.flush().await.unwrap();
    let (mut covered, mut frames) = (0u64, 0);
    while covered < 1_000 {
        let confirmation = next_json(&mut socket).await;
        assert_eq!(confirmation["seq"], covered);
        assert_eq!(confirmation["offset"], covered);
        covered += confirmation["count"].as_u64().unwrap();
        frames += 1;
    }
    assert_eq!(covered, 1_000);
    assert!(frames < 100, "{frames} confirmations for one burst");
}

// Proves every confirmed message survives a SIGKILL of a server under `--fsync always`
// right after the confirmations: same offsets, same bytes after the restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirmed_messages_survive_a_kill() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "always"]);
    let client = server.client();
    client.create_topic("t").await.unwrap();
    let mut stream = client.publish_stream("t").await.unwrap();
    let sent: Vec<Bytes> = (0..300)
        .map(|n| Bytes::from(format!("durable {n}")))
        .collect();
    for payload in &sent {
        stream.feed(payload.clone()).await.unwrap();
    }
    let outcomes = by_seq(&stream.flush().await.unwrap(), 300);
    tokio::task::spawn_blocking(move || server.kill())
        .await
        .unwrap();

    let server = ServerProcess::start(dir.path(), &[]);
    let stored = read_back(&server.client(), "t", 300).await;
    for (seq, outcome) in outcomes.into_iter().enumerate() {
        assert_eq!(stored[&outcome.unwrap()], sent[seq], "seq {seq}");
    }
}

// Proves a frame over --max-payload-bytes gets its own payload_too_large entry, frames
// around it (including one of exactly the limit) are published, and the stream goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversize_frame_is_refused_alone() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--max-payload-bytes", "16"]);
    let client = server.client();
    client.create_topic("t").await.unwrap();
    let mut stream = client.publish_stream("t").await.unwrap();
    let frames = [
        vec![b'a'; 3],
        vec![b'b'; 17],
        vec![b'c'; 16],
        vec![b'd'; 1_000],
        vec![b'e'; 1],
    ];
    for frame in &frames {
        stream.feed(Bytes::from(frame.clone())).await.unwrap();
    }
    let confirmations = stream.flush().await.unwrap();
    let outcomes = by_seq(&confirmations, frames.len() as u64);
    let too_large = Err("payload_too_large".to_owned());
    assert_eq!(
        outcomes,
        [Ok(0), too_large.clone(), Ok(1), too_large, Ok(2)]
    );
    for refused in confirmations.iter().filter(|c| c.outcome.is_err()) {
        assert_eq!(refused.count, 1);
    }
    // Still open: the next message is published.
    stream.send(Bytes::from_static(b"after")).await.unwrap();
    let after = stream.confirmed().await.unwrap().unwrap();
    assert_eq!((after.seq, after.outcome), (5, Ok(3)));
}

// Proves the handshake is refused before any upgrade, with the JSON error shape: 404
// for an unknown topic, 400 for a plain GET, 401 without the server's token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshakes_are_checked_before_the_upgrade() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--token", "sesame"]);
    let client = server.client().with_token("sesame");
    client.create_topic("t").await.unwrap();

    let unknown = client.publish_stream("nope").await.unwrap_err();
    assert_eq!(
        (unknown.status(), unknown.code()),
        (Some(404), Some("unknown_topic"))
    );
    let anonymous = server.client().publish_stream("t").await.unwrap_err();
    assert_eq!(anonymous.status(), Some(401));
    let plain = reqwest::Client::new()
        .get(server.at("/v1/topics/t/publish/ws"))
        .bearer_auth("sesame")
        .send()
        .await
        .unwrap();
    assert_eq!(plain.status().as_u16(), 400);
    let body: serde_json::Value = plain.json().await.unwrap();
    assert_eq!(body["error"], "not_websocket");
    // The right token opens it.
    let mut stream = client.publish_stream("t").await.unwrap();
    stream.send(Bytes::from_static(b"x")).await.unwrap();
    assert_eq!(stream.confirmed().await.unwrap().unwrap().outcome, Ok(0));
}

// Proves deleting the topic mid-stream ends it: the next frame gets an unknown_topic
// entry, then the server closes with 1011 and the code as reason; the client reports
// the refusal and then that the stream is closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_topic_ends_the_stream() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &[]);
    let client = server.client();
    client.create_topic("t").await.unwrap();
    client.create_topic("u").await.unwrap();

    let mut socket = raw_stream(&server, "t").await;
    socket
        .send(Message::Binary(Bytes::from_static(b"one")))
        .await
        .unwrap();
    assert_eq!(
        next_json(&mut socket).await,
        serde_json::json!({"seq": 0, "count": 1, "offset": 0})
    );
    client.delete_topic("t").await.unwrap();
    socket
        .send(Message::Binary(Bytes::from_static(b"two")))
        .await
        .unwrap();
    let refusal = next_json(&mut socket).await;
    assert_eq!(
        (refusal["seq"].as_u64(), refusal["count"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(refusal["error"]["code"], "unknown_topic");
    match socket.next().await.unwrap().unwrap() {
        Message::Close(Some(frame)) => {
            assert_eq!(frame.code, CloseCode::Error);
            assert_eq!(frame.reason.as_str(), "unknown_topic");
        }
        other => panic!("expected a close frame, got {other:?}"),
    }

    let mut stream = client.publish_stream("u").await.unwrap();
    stream.send(Bytes::from_static(b"one")).await.unwrap();
    assert_eq!(stream.confirmed().await.unwrap().unwrap().outcome, Ok(0));
    client.delete_topic("u").await.unwrap();
    stream.send(Bytes::from_static(b"two")).await.unwrap();
    let refused = stream.confirmed().await.unwrap().unwrap();
    assert_eq!(refused.outcome.unwrap_err().code, "unknown_topic");
    // Whatever is sent now is never confirmed: the stream says it is closed (or, if
    // the write raced the server's goodbye, that the connection failed).
    let later = match stream.send(Bytes::from_static(b"three")).await {
        Ok(_) => stream.confirmed().await.unwrap_err(),
        Err(error) => error,
    };
    assert!(
        matches!(
            &later,
            ClientError::StreamClosed { reason, .. } if reason == "unknown_topic"
        ) || matches!(later, ClientError::WebSocket(_)),
        "{later:?}"
    );
}

/// The payload lengths of one random case: some over the 64-byte limit.
fn frame_lengths() -> impl Strategy<Value = (Vec<usize>, usize)> {
    (prop::collection::vec(0usize..100, 1..120), 1usize..40)
}

// Proves, for random frame sizes, counts and windows, that the confirmations equal a
// model's: each frame over the limit refused alone, the others published in seq order
// with consecutive offsets, and every published frame reads back byte for byte.
#[test]
fn random_frames_match_the_model() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--max-payload-bytes", "64"]);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let client = server.client();
    let case = std::sync::atomic::AtomicU32::new(0);
    let mut runner = TestRunner::new(ProptestConfig::with_cases(12));
    runner
        .run(&frame_lengths(), |(lengths, window)| {
            let n = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let topic = format!("case{n}");
            runtime.block_on(async {
                client.create_topic(&topic).await.unwrap();
                let mut stream = client
                    .publish_stream_with_window(&topic, window)
                    .await
                    .unwrap();
                let mut sent = Vec::new();
                for (seq, length) in lengths.iter().enumerate() {
                    let payload = Bytes::from(vec![seq as u8; *length]);
                    stream.feed(payload.clone()).await.unwrap();
                    sent.push(payload);
                }
                let outcomes = by_seq(&stream.flush().await.unwrap(), sent.len() as u64);
                let mut next_offset = 0;
                let model: Vec<Result<u64, String>> = lengths
                    .iter()
                    .map(|length| {
                        if *length > 64 {
                            return Err("payload_too_large".to_owned());
                        }
                        next_offset += 1;
                        Ok(next_offset - 1)
                    })
                    .collect();
                prop_assert_eq!(&outcomes, &model);
                let stored = read_back(&client, &topic, sent.len() as u32).await;
                prop_assert_eq!(stored.len() as u64, next_offset);
                for (seq, outcome) in outcomes.iter().enumerate() {
                    if let Ok(offset) = outcome {
                        prop_assert_eq!(&stored[offset], &sent[seq]);
                    }
                }
                Ok(())
            })
        })
        .unwrap();
}
