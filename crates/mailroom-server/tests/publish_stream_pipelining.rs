//! The publish stream's pipelining and its in-flight bound, watched in-process over an
//! in-memory socket with every `fdatasync` held back: the server goes on reading frames
//! while earlier ones wait for durability, stops reading at exactly
//! `PUBLISH_STREAM_IN_FLIGHT_MAX` unconfirmed frames, and confirms nothing before the sync.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::ws::Message;
use bytes::Bytes;
use mailroom_server::routes::publish_stream::{serve_publish_stream, PUBLISH_STREAM_IN_FLIGHT_MAX};
use mailroom_store::storage::SyncGate;
use tokio::sync::mpsc;

/// The in-memory socket and the gated server state.
mod memory_stream;

use memory_stream::{gated_state, MemorySocket};

/// How long a test waits for a condition that must come true.
const CONDITION_WAIT_MS_MAX: u64 = 10_000;
/// How long the bound test watches for reads beyond the bound (which must not happen).
const BOUND_WATCH_MS: u64 = 300;

/// The test's end of the socket.
struct Client {
    frames: mpsc::Sender<Result<Message, axum::Error>>,
    answers: mpsc::UnboundedReceiver<Message>,
}

impl Client {
    /// Queues one frame (the queue holds everything the test sends).
    fn send(&self, payload: Bytes) {
        self.frames.try_send(Ok(Message::Binary(payload))).unwrap();
    }

    /// Frames queued and not yet read by the server.
    fn unread(&self) -> usize {
        self.frames.max_capacity() - self.frames.capacity()
    }

    /// Waits until the server has read all but `unread` of the queued frames.
    async fn until_unread(&self, unread: usize) {
        let deadline = Instant::now() + Duration::from_millis(CONDITION_WAIT_MS_MAX);
        while self.unread() > unread {
            assert!(Instant::now() < deadline, "{} frames unread", self.unread());
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// Reads confirmations until they cover `count` frames, each checked to follow on
    /// from the last with offsets equal to seqs; returns them as JSON.
    async fn confirmations(&mut self, count: u64) -> Vec<serde_json::Value> {
        let mut covered = 0;
        let mut frames = Vec::new();
        while covered < count {
            let Some(Message::Text(text)) = self.answers.recv().await else {
                panic!("expected a confirmation");
            };
            let frame: serde_json::Value = serde_json::from_str(text.as_str()).unwrap();
            assert_eq!(frame["seq"], covered, "{frame}");
            assert_eq!(frame["offset"], covered, "{frame}");
            covered += frame["count"].as_u64().unwrap();
            frames.push(frame);
        }
        assert_eq!(covered, count);
        frames
    }
}

/// A stream to topic `t` of a store under `--fsync always` whose syncs wait at `gate`,
/// served on a task; the socket's queue holds `capacity` frames.
fn gated_stream(gate: &Arc<SyncGate>, capacity: usize) -> Client {
    let (frames, incoming) = mpsc::channel(capacity);
    let (outgoing, answers) = mpsc::unbounded_channel();
    let socket = MemorySocket { incoming, outgoing };
    let state = gated_state(gate);
    tokio::spawn(async move { serve_publish_stream(state, "t".into(), socket).await });
    Client { frames, answers }
}

// Proves the server pipelines: with the first frame's sync held back, it still reads a
// second frame (and writes it: the two batches then await durability together), sends no
// confirmation before the sync, and confirms both, in order, as separate batches after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_are_read_while_earlier_ones_await_durability() {
    let gate = Arc::new(SyncGate::default());
    let mut client = gated_stream(&gate, 2);
    let held = gate.hold();
    client.send(Bytes::from_static(b"a"));
    client.until_unread(0).await;
    client.send(Bytes::from_static(b"b"));
    client.until_unread(0).await;
    assert!(
        client.answers.try_recv().is_err(),
        "a confirmation before the sync"
    );
    drop(held);
    let frames = client.confirmations(2).await;
    assert_eq!(frames.len(), 2, "{frames:?}");
}

// Proves the in-flight bound: with syncs held back, the server reads exactly
// PUBLISH_STREAM_IN_FLIGHT_MAX frames of a larger burst and stops there (the rest stays
// unread), then reads, publishes and confirms everything, in order, once syncs pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_stops_at_the_in_flight_bound() {
    let gate = Arc::new(SyncGate::default());
    let beyond = 50;
    let total = PUBLISH_STREAM_IN_FLIGHT_MAX + beyond;
    let mut client = gated_stream(&gate, total);
    let held = gate.hold();
    for n in 0..total {
        client.send(Bytes::from(n.to_le_bytes().to_vec()));
    }
    client.until_unread(beyond).await;
    // Reading past the bound is what must not happen; give it time to show up.
    tokio::time::sleep(Duration::from_millis(BOUND_WATCH_MS)).await;
    assert_eq!(client.unread(), beyond);
    assert!(client.answers.try_recv().is_err());
    drop(held);
    client.confirmations(total as u64).await;
    assert_eq!(client.unread(), 0);
}
