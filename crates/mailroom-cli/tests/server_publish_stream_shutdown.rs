//! Publish streams across a graceful shutdown (SIGTERM) of the real binary: every frame
//! the server read is confirmed before its 1001 close, nothing unconfirmed is published,
//! confirmed offsets read back after a restart, and the server exits within its grace.

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{temp_dir, ServerProcess};
use futures_util::{SinkExt as _, StreamExt as _};
use mailroom_client::{BatchPoll, Client, ClientError, Confirmation, GroupOptions};
use mailroom_server::routes::publish_stream::SHUTDOWN_CLOSE_REASON;
use mailroom_server::server::SHUTDOWN_GRACE_MS_MAX;
use tokio::sync::watch;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;

/// Messages each stream must have confirmed before the SIGTERM: the streams are then in
/// full flow, with (up to the server's in-flight bound of) frames read and unconfirmed.
const CONFIRMED_BEFORE_TERM: u64 = 2_000;
/// The most frames a publisher sends: far more than it can get confirmed before the
/// SIGTERM lands, so frames are still in flight then.
const FRAMES_MAX: u64 = 60_000;
/// Frames a raw publisher feeds between two flushes.
const FLUSH_EVERY_FRAMES: u64 = 64;
/// How long the raw publisher stops reading once the SIGTERM is on its way: a slow
/// client, which the server must wait for (well within its close wait and its grace)
/// rather than exit with confirmations unread.
const SLOW_READER_PAUSE_MS: u64 = 500;
/// Messages read back per poll after the restart.
const READ_BACK_PAGE: u32 = 4_096;
/// How long one read or write of a stream may wait before the test fails: far beyond
/// the server's shutdown grace, so only a stream that never ends runs into it.
const STREAM_WAIT_MAX: Duration = Duration::from_secs(60);

/// `future`'s output; fails the test, naming `awaited`, after [`STREAM_WAIT_MAX`].
async fn awaited<T>(future: impl std::future::Future<Output = T>, awaited: &str) -> T {
    match tokio::time::timeout(STREAM_WAIT_MAX, future).await {
        Ok(output) => output,
        Err(_) => panic!("waited {STREAM_WAIT_MAX:?} for {awaited}"),
    }
}

/// Payload `seq` of publisher `name`: distinct bytes for every message.
fn payload(name: &str, seq: u64) -> Bytes {
    Bytes::from(format!("{name} message {seq:08} {}", "x".repeat(40)))
}

/// What a publisher saw: confirmations `(seq, count, offset)` in order, and how the
/// stream ended.
struct Outcome<E> {
    confirmations: Vec<(u64, u64, u64)>,
    end: E,
}

impl<E> Outcome<E> {
    /// Checks the confirmations cover seqs `0..n` in order, each published, and returns n.
    fn confirmed(&self) -> u64 {
        let mut next = 0;
        for &(seq, count, _) in &self.confirmations {
            assert_eq!(seq, next, "confirmations out of order or with a gap");
            next += count;
        }
        next
    }
}

/// Publishes over a raw WebSocket (to see the close code) as fast as TCP lets it,
/// until the server's close frame, reporting the number confirmed as it goes; pauses
/// its reading once `terminating`.
async fn raw_publisher(
    server_address: String,
    progress: watch::Sender<u64>,
    mut terminating: watch::Receiver<bool>,
) -> Outcome<String> {
    let url = format!("ws://{server_address}/v1/topics/raw/publish/ws");
    let (socket, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let (mut sink, mut stream) = socket.split();
    // The writer ends once a write fails: after the server's close, or at FRAMES_MAX.
    let writer = tokio::spawn(async move {
        for seq in 0..FRAMES_MAX {
            if sink
                .feed(Message::Binary(payload("raw", seq)))
                .await
                .is_err()
            {
                return;
            }
            if seq % FLUSH_EVERY_FRAMES == FLUSH_EVERY_FRAMES - 1 && sink.flush().await.is_err() {
                return;
            }
        }
        let _ = sink.flush().await;
    });
    let mut confirmations = Vec::new();
    let mut close: Option<CloseFrame> = None;
    let end = loop {
        let read = tokio::select! {
            read = awaited(stream.next(), "the stream's next frame") => read,
            Ok(()) = terminating.changed() => {
                tokio::time::sleep(Duration::from_millis(SLOW_READER_PAUSE_MS)).await;
                continue;
            }
        };
        match read {
            Some(Ok(Message::Text(text))) => {
                assert!(close.is_none(), "a confirmation after the close frame");
                let json: serde_json::Value = serde_json::from_str(text.as_str()).unwrap();
                let offset = json["offset"].as_u64();
                let offset = offset.unwrap_or_else(|| panic!("a refusal: {json}"));
                let seq = json["seq"].as_u64().unwrap();
                let count = json["count"].as_u64().unwrap();
                confirmations.push((seq, count, offset));
                progress.send_replace(seq + count);
            }
            Some(Ok(Message::Close(frame))) => close = frame,
            Some(Ok(_)) => {}
            // The end of the connection (after the close handshake, if there was one).
            None | Some(Err(_)) => {
                break match close {
                    Some(frame) if frame.code == CloseCode::Away => frame.reason.to_string(),
                    other => panic!("the stream ended without a 1001 close: {other:?}"),
                }
            }
        }
    };
    writer.await.unwrap();
    Outcome { confirmations, end }
}

/// Publishes with the client's `PublishStream` (the widest window) until it fails, then
/// takes the confirmations that arrived: each must be handed out before the error.
async fn client_publisher(client: Client, progress: watch::Sender<u64>) -> Outcome<ClientError> {
    let mut stream = client
        .publish_stream_with_window("client", mailroom_client::PUBLISH_WINDOW_MAX)
        .await
        .unwrap();
    let mut sent = 0;
    let failed = loop {
        if sent == FRAMES_MAX {
            panic!("the server never ended the stream");
        }
        match awaited(stream.feed(payload("client", sent)), "a feed").await {
            Ok(seq) => assert_eq!(seq, sent),
            Err(error) => break error,
        }
        sent += 1;
        progress.send_replace(sent - stream.in_flight());
    };
    let ClientError::StreamClosed { unconfirmed, .. } = failed else {
        panic!("expected StreamClosed, got {failed:?}");
    };
    // The confirmations that arrived come first; then the same error, unless every
    // message sent was confirmed (the server had read them all).
    let mut confirmations = Vec::new();
    loop {
        match awaited(stream.confirmed(), "the next confirmation").await {
            Ok(Some(Confirmation {
                seq,
                count,
                outcome,
            })) => confirmations.push((seq, count, outcome.expect("published"))),
            Ok(None) => {
                assert_eq!(unconfirmed, 0, "{failed:?}");
                break;
            }
            Err(error) => {
                assert_eq!(format!("{error:?}"), format!("{failed:?}"));
                break;
            }
        }
    }
    // Nothing is left to hand out.
    match stream.flush().await {
        Ok(rest) => assert!(rest.is_empty() && unconfirmed == 0, "{rest:?}"),
        Err(error) => assert_eq!(format!("{error:?}"), format!("{failed:?}")),
    }
    let outcome = Outcome {
        confirmations,
        end: failed,
    };
    assert_eq!(unconfirmed, sent - outcome.confirmed(), "unconfirmed count");
    outcome
}

/// Every message of `topic`, in offset order, read through a fresh group.
async fn read_all(client: &Client, topic: &str) -> Vec<Bytes> {
    let mut options = GroupOptions::new(1);
    options.max_in_flight = Some(READ_BACK_PAGE);
    client
        .create_group_with(topic, "reader", &options)
        .await
        .unwrap();
    let mut messages = Vec::new();
    let mut done = Vec::new();
    loop {
        let request = BatchPoll {
            consumer: None,
            max: READ_BACK_PAGE,
            wait_ms: 0,
            ack: &done,
        };
        let (_, deliveries) = client
            .ack_then_poll_batch(topic, "reader", &request)
            .await
            .unwrap();
        if deliveries.is_empty() {
            return messages;
        }
        for delivery in &deliveries {
            assert_eq!(delivery.offset, messages.len() as u64);
            messages.push(delivery.payload.clone());
        }
        done = deliveries.iter().map(|delivery| delivery.id()).collect();
    }
}

/// Checks `topic` holds exactly the confirmed messages of publisher `name`, each at
/// its confirmed offset: a frame read but not confirmed would show up as an extra.
async fn assert_exactly_confirmed<E>(client: &Client, name: &str, outcome: &Outcome<E>) {
    let stored = read_all(client, name).await;
    assert_eq!(stored.len() as u64, outcome.confirmed(), "{name}: stored");
    for &(seq, count, offset) in &outcome.confirmations {
        for i in 0..count {
            let at = usize::try_from(offset + i).unwrap();
            assert_eq!(
                stored[at],
                payload(name, seq + i),
                "{name}: seq {}",
                seq + i
            );
        }
    }
}

// Proves that on SIGTERM, publish streams with many frames in flight (a raw socket and
// the client's PublishStream) get a confirmation for every frame the server read and then
// a 1001 close; the client hands out each of those confirmations before StreamClosed;
// the server exits 0 within its grace; and after a restart the topics hold exactly the
// confirmed messages, each at its confirmed offset with its bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_confirms_what_was_read_then_closes_going_away() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "always"]);
    let client = server.client();
    client.create_topic("raw").await.unwrap();
    client.create_topic("client").await.unwrap();

    let (raw_progress, mut raw_confirmed) = watch::channel(0);
    let (client_progress, mut client_confirmed) = watch::channel(0);
    let (terminating, raw_terminating) = watch::channel(false);
    let raw = tokio::spawn(raw_publisher(
        server.address(),
        raw_progress,
        raw_terminating,
    ));
    let streamed = tokio::spawn(client_publisher(client.clone(), client_progress));
    let enough = |confirmed: &u64| *confirmed >= CONFIRMED_BEFORE_TERM;
    raw_confirmed.wait_for(enough).await.unwrap();
    client_confirmed.wait_for(enough).await.unwrap();

    terminating.send_replace(true);
    let (status, took) = tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        (server.terminate(), started.elapsed())
    })
    .await
    .unwrap();
    assert!(status.success(), "exit status {status}");
    assert!(
        took < Duration::from_millis(SHUTDOWN_GRACE_MS_MAX),
        "the server took {took:?} to exit"
    );
    let raw = raw.await.unwrap();
    let streamed = streamed.await.unwrap();
    assert_eq!(raw.end, SHUTDOWN_CLOSE_REASON);
    match &streamed.end {
        ClientError::StreamClosed { reason, .. } => assert_eq!(reason, SHUTDOWN_CLOSE_REASON),
        other => panic!("expected StreamClosed, got {other:?}"),
    }

    let server = ServerProcess::start(dir.path(), &[]);
    let client = server.client();
    assert_exactly_confirmed(&client, "raw", &raw).await;
    assert_exactly_confirmed(&client, "client", &streamed).await;
}
