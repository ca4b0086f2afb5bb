//! A publish stream told to stop (the server's shutdown), watched in-process over an
//! in-memory socket with every `fdatasync` held back: it confirms nothing and does not
//! close while the batches it wrote await their sync, the shutdown wait does not end
//! meanwhile, and once the sync passes it confirms every frame it read, then closes with
//! 1001; the store holds exactly the confirmed frames.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{close_code, Message};
use bytes::Bytes;
use mailroom_server::routes::publish_stream::{serve_publish_stream, SHUTDOWN_CLOSE_REASON};
use mailroom_store::storage::SyncGate;
use tokio::sync::mpsc;

/// The in-memory socket and the gated server state.
mod memory_stream;

use memory_stream::{gated_state, MemorySocket};

/// How long a test waits for a condition that must come true.
const CONDITION_WAIT_MS_MAX: u64 = 10_000;
/// How long the test watches for an answer or an end that must not come yet.
const EARLY_WATCH_MS: u64 = 300;
/// Frames read (and written, awaiting their sync) before the stop.
const FRAMES_BEFORE_STOP: u64 = 3;
/// Frames sent after the stop.
const FRAMES_AFTER_STOP: u64 = 2;

/// Waits until the frames queued on `frames` have all been read.
async fn until_read(frames: &mpsc::Sender<Result<Message, axum::Error>>) {
    let read = async {
        while frames.capacity() < frames.max_capacity() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    };
    let wait = Duration::from_millis(CONDITION_WAIT_MS_MAX);
    tokio::time::timeout(wait, read).await.expect("frames read");
}

// Proves a stopped stream waits for the sync of what it wrote before confirming or
// closing (and the shutdown wait with it), then confirms every frame it read, in order,
// and closes with 1001 `shutting_down`; the topic holds exactly the confirmed frames.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_stream_confirms_what_it_wrote_then_closes_going_away() {
    let gate = Arc::new(SyncGate::default());
    let state = gated_state(&gate);
    let capacity = (FRAMES_BEFORE_STOP + FRAMES_AFTER_STOP) as usize;
    let (frames, incoming) = mpsc::channel(capacity);
    let (outgoing, mut answers) = mpsc::unbounded_channel();
    let socket = MemorySocket { incoming, outgoing };
    let held = gate.hold();
    let serving = tokio::spawn(serve_publish_stream(state.clone(), "t".into(), socket));
    for n in 0..FRAMES_BEFORE_STOP {
        let payload = Bytes::from(format!("before {n}"));
        frames.try_send(Ok(Message::Binary(payload))).unwrap();
    }
    until_read(&frames).await;
    assert_eq!(state.publish_streams.running(), 1);

    state.publish_streams.stop();
    // The stream may or may not read these before it sees the stop; either way, what it
    // read is confirmed and what it did not is not published.
    for n in 0..FRAMES_AFTER_STOP {
        let payload = Bytes::from(format!("after {n}"));
        frames.try_send(Ok(Message::Binary(payload))).unwrap();
    }
    let early = Duration::from_millis(EARLY_WATCH_MS);
    let finished = tokio::time::timeout(early, state.publish_streams.finished()).await;
    assert!(finished.is_err(), "the stream ended before its sync");
    assert!(answers.try_recv().is_err(), "an answer before the sync");

    drop(held);
    let mut confirmed = 0;
    let close = loop {
        let wait = Duration::from_millis(CONDITION_WAIT_MS_MAX);
        let answer = tokio::time::timeout(wait, answers.recv()).await;
        match answer.expect("an answer in time").expect("a close frame") {
            Message::Text(text) => {
                let frame: serde_json::Value = serde_json::from_str(text.as_str()).unwrap();
                assert_eq!(frame["seq"], confirmed, "{frame}");
                assert_eq!(frame["offset"], confirmed, "{frame}");
                confirmed += frame["count"].as_u64().unwrap();
            }
            Message::Close(close) => break close.expect("a close code"),
            other => panic!("unexpected {other:?}"),
        }
    };
    assert_eq!(close.code, close_code::AWAY);
    assert_eq!(close.reason.as_str(), SHUTDOWN_CLOSE_REASON);
    assert!(
        (FRAMES_BEFORE_STOP..=FRAMES_BEFORE_STOP + FRAMES_AFTER_STOP).contains(&confirmed),
        "{confirmed} frames confirmed"
    );
    let topic = state.backend.topic_state("t").await.unwrap();
    assert_eq!(topic.end, confirmed);

    // The client's end of the connection ends the server's wait for its close frame.
    drop(frames);
    let wait = Duration::from_millis(CONDITION_WAIT_MS_MAX);
    tokio::time::timeout(wait, state.publish_streams.finished())
        .await
        .expect("the stream ended");
    serving.await.unwrap().unwrap();
    assert_eq!(state.publish_streams.running(), 0);
}
