//! The consume stream (`GET /v1/topics/{topic}/groups/{group}/consume/ws`) against the
//! real binary, over raw WebSockets: the window, every settlement kind answered in
//! order, fencing, disconnect and reconnect, lease expiry while away, prompt wake-ups,
//! bad frames and handshake refusals.

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{temp_dir, ServerProcess};
use futures_util::{SinkExt as _, StreamExt as _};
use mailroom_client::{Client, GroupOptions};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message;

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// How long a test waits for a frame that must come.
const FRAME_WAIT: Duration = Duration::from_secs(10);
/// How long a test watches for a frame that must not come.
const QUIET_WATCH: Duration = Duration::from_millis(300);

/// A server with topic `t` and group `g` (max_attempts 2, max_in_flight 64,
/// `lease_ms`), and `count` messages published.
async fn setup(lease_ms: Option<u64>, count: u32) -> (tempfile::TempDir, ServerProcess, Client) {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &[]);
    let client = server.client();
    client.create_topic("t").await.unwrap();
    let mut options = GroupOptions::new(2);
    options.max_in_flight = Some(64);
    options.lease_ms = lease_ms;
    client.create_group_with("t", "g", &options).await.unwrap();
    for n in 0..count {
        client
            .publish("t", Bytes::from(format!("m{n}")))
            .await
            .unwrap();
    }
    (dir, server, client)
}

/// Opens the stream with `query` and reads its `opened` frame.
async fn open(server: &ServerProcess, query: &str) -> (Socket, Value) {
    let url = format!(
        "ws://{}/v1/topics/t/groups/g/consume/ws?{query}",
        server.address()
    );
    let mut socket = tokio_tungstenite::connect_async(url).await.unwrap().0;
    let opened = next(&mut socket).await;
    assert_eq!(opened["type"], "opened", "{opened}");
    (socket, opened)
}

/// The next text frame as JSON.
async fn next(socket: &mut Socket) -> Value {
    let read = tokio::time::timeout(FRAME_WAIT, socket.next()).await;
    match read.expect("a frame in time").unwrap().unwrap() {
        Message::Text(text) => serde_json::from_str(text.as_str()).unwrap(),
        other => panic!("expected a text frame, got {other:?}"),
    }
}

/// Asserts no frame arrives for [`QUIET_WATCH`].
async fn quiet(socket: &mut Socket) {
    if let Ok(frame) = tokio::time::timeout(QUIET_WATCH, socket.next()).await {
        panic!("expected no frame, got {frame:?}");
    }
}

async fn send(socket: &mut Socket, frame: Value) {
    socket
        .send(Message::Text(frame.to_string().into()))
        .await
        .unwrap();
}

/// Reads `count` delivery frames.
async fn deliveries(socket: &mut Socket, count: usize) -> Vec<Value> {
    let mut frames = Vec::new();
    for _ in 0..count {
        let frame = next(socket).await;
        assert_eq!(frame["type"], "delivery", "{frame}");
        frames.push(frame);
    }
    frames
}

fn ack(delivery: &Value) -> Value {
    json!({"op": "ack", "offset": delivery["offset"], "attempt": delivery["attempt"]})
}

// Proves the stream never has more than the window unsettled: with 10 messages and a
// window of 3, exactly 3 come, then one more per ack, in offset order, with payloads and
// publish times as a batch poll gives them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn window_is_never_exceeded() {
    let (_dir, server, _client) = setup(None, 10).await;
    let (mut socket, opened) = open(&server, "window=3&consumer=c1").await;
    assert_eq!(
        opened,
        json!({"type": "opened", "consumer": "c1", "window": 3})
    );
    let first = deliveries(&mut socket, 3).await;
    quiet(&mut socket).await;
    let offsets: Vec<u64> = first
        .iter()
        .map(|d| d["offset"].as_u64().unwrap())
        .collect();
    assert_eq!(offsets, [0, 1, 2]);
    assert_eq!(first[0]["payload"], "m0");
    assert!(
        first[0]["published_at_ms"].as_u64().is_some(),
        "{}",
        first[0]
    );
    let mut next_offset = 3;
    let mut held: Vec<Value> = first;
    while !held.is_empty() {
        let settling = held.remove(0);
        send(&mut socket, ack(&settling)).await;
        let answer = next(&mut socket).await;
        assert_eq!(answer["type"], "settled", "{answer}");
        assert_eq!(answer["outcome"], "acked");
        assert_eq!(answer["offset"], settling["offset"]);
        if next_offset < 10 {
            let refill = deliveries(&mut socket, 1).await.remove(0);
            assert_eq!(refill["offset"], next_offset);
            held.push(refill);
            next_offset += 1;
        }
        quiet_if_full(&mut socket, held.len()).await;
    }
    quiet(&mut socket).await;
}

/// With the window full (3 held), nothing more arrives.
async fn quiet_if_full(socket: &mut Socket, held: usize) {
    if held == 3 {
        if let Ok(frame) = tokio::time::timeout(Duration::from_millis(50), socket.next()).await {
            panic!("window exceeded: {frame:?}");
        }
    }
}

// Proves, over a long mixed run (acks, nacks, releases and touches, several at once,
// chosen by a fixed pseudo-random sequence), that a stream with window W never has more
// than W unsettled, never sends a delivery (offset, attempt) twice, and finishes the log:
// its refills poll new deliveries only, with those it holds counted against the window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn window_holds_and_no_delivery_comes_twice() {
    const WINDOW: usize = 4;
    const MESSAGES: u32 = 60;
    let (_dir, server, client) = setup(None, MESSAGES).await;
    let (mut socket, _) = open(&server, &format!("window={WINDOW}&consumer=c1")).await;
    let mut seen = std::collections::HashSet::new();
    let mut held: Vec<Value> = Vec::new();
    let mut asked = 0usize;
    let mut random: u64 = 0x9e37_79b9_7f4a_7c15;
    let deadline = Instant::now() + Duration::from_secs(60);
    while client.group_info("t", "g").await.unwrap().position < u64::from(MESSAGES) {
        assert!(
            Instant::now() < deadline,
            "the log was not finished in time"
        );
        // Settle some of what is held (touches keep theirs), or wait for more.
        if !held.is_empty() && asked == 0 {
            random = random
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            let count = 1 + (random >> 33) as usize % held.len();
            for (index, delivery) in held.iter().take(count).enumerate() {
                let (offset, attempt) = (&delivery["offset"], &delivery["attempt"]);
                let frame = match (random >> (40 + index * 2)) % 8 {
                    0 => json!({"op": "nack", "offset": offset, "attempt": attempt}),
                    1 => json!({"op": "nack", "offset": offset, "attempt": attempt,
                        "kind": "release"}),
                    2 => json!({"op": "touch", "offset": offset, "attempt": attempt}),
                    _ => json!({"op": "ack", "offset": offset, "attempt": attempt}),
                };
                send(&mut socket, frame).await;
            }
            asked = count;
        }
        let frame = match tokio::time::timeout(Duration::from_millis(500), socket.next()).await {
            Ok(read) => match read.unwrap().unwrap() {
                Message::Text(text) => serde_json::from_str::<Value>(text.as_str()).unwrap(),
                other => panic!("expected a text frame, got {other:?}"),
            },
            // Everything left is dead-lettered or acked: the position catches up.
            Err(_) => continue,
        };
        match frame["type"].as_str() {
            Some("delivery") => {
                let id = (
                    frame["offset"].as_u64().unwrap(),
                    frame["attempt"].as_u64().unwrap(),
                );
                assert!(seen.insert(id), "delivery {id:?} sent twice");
                held.push(frame);
                assert!(
                    held.len() <= WINDOW,
                    "{} unsettled, window {WINDOW}",
                    held.len()
                );
            }
            Some("settled") => {
                asked -= 1;
                if frame["outcome"] != "touched" {
                    let position = held.iter().position(|d| {
                        d["offset"] == frame["offset"] && d["attempt"] == frame["attempt"]
                    });
                    held.remove(position.expect("a settled delivery was held"));
                }
            }
            _ => panic!("unexpected frame {frame}"),
        }
    }
    assert!(seen.len() >= MESSAGES as usize, "{} deliveries", seen.len());
}

// Proves every settlement kind takes effect and is answered in seq order in one round:
// ack, nack (retry), release with delay, reject with reason (dead-lettered), touch, a
// settlement of a delivery not in flight (not_owned), and a stale attempt (not_owned).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_settlement_kind_is_answered_in_order() {
    let (_dir, server, client) = setup(None, 5).await;
    let (mut socket, _) = open(&server, "window=5&consumer=c1").await;
    let d = deliveries(&mut socket, 5).await;
    let frames = [
        ack(&d[0]),
        json!({"op": "nack", "offset": d[1]["offset"], "attempt": 1}),
        json!({"op": "nack", "offset": d[2]["offset"], "attempt": 1, "kind": "release",
            "delay_ms": 60000}),
        json!({"op": "nack", "offset": d[3]["offset"], "attempt": 1, "kind": "reject",
            "reason": "poison"}),
        json!({"op": "touch", "offset": d[4]["offset"], "attempt": 1}),
        ack(&d[0]),
        json!({"op": "ack", "offset": d[4]["offset"], "attempt": 7}),
    ];
    for frame in &frames {
        send(&mut socket, frame.clone()).await;
    }
    let mut answers = Vec::new();
    while answers.len() < frames.len() {
        let frame = next(&mut socket).await;
        if frame["type"] != "delivery" {
            answers.push(frame);
        }
    }
    let seqs: Vec<u64> = answers.iter().map(|a| a["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [0, 1, 2, 3, 4, 5, 6]);
    let outcomes: Vec<&Value> = answers[..5].iter().map(|a| &a["outcome"]).collect();
    assert_eq!(
        outcomes,
        ["acked", "retry", "released", "dead_lettered", "touched"]
    );
    for refused in &answers[5..] {
        assert_eq!(refused["type"], "error", "{refused}");
        assert_eq!(refused["error"]["code"], "not_owned", "{refused}");
    }
    let detail: Value = reqwest::get(server.at("/v1/topics/t/groups/g"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let notes = detail["dead_letter_notes"].as_array().unwrap();
    assert_eq!(notes.len(), 1, "{detail}");
    assert_eq!(notes[0]["reason"], "poison", "{detail}");
    assert_eq!(client.dead_letters("t", "g").await.unwrap().len(), 1);
}

// Proves a disconnect leaves the deliveries in flight: another consumer gets nothing
// of them, and a stream reopened with the same identity gets the same attempts back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnect_with_same_identity_gets_in_flight_back() {
    let (_dir, server, _client) = setup(None, 2).await;
    let (mut socket, _) = open(&server, "window=2&consumer=worker-a").await;
    let before = deliveries(&mut socket, 2).await;
    drop(socket);
    let (mut other, _) = open(&server, "window=2&consumer=worker-b").await;
    quiet(&mut other).await;
    let (mut again, _) = open(&server, "window=2&consumer=worker-a").await;
    let after = deliveries(&mut again, 2).await;
    assert_eq!(before, after);
    send(&mut again, ack(&after[0])).await;
    assert_eq!(next(&mut again).await["outcome"], "acked");
}

// Proves a lease that runs out while the consumer is away hands the message to
// another consumer, with the next attempt, and fences the old one's ack.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_runs_out_while_disconnected() {
    let (_dir, server, _client) = setup(Some(300), 1).await;
    let (mut socket, _) = open(&server, "window=1&consumer=gone").await;
    let first = deliveries(&mut socket, 1).await.remove(0);
    drop(socket);
    let (mut other, _) = open(&server, "window=1&consumer=other").await;
    let second = deliveries(&mut other, 1).await.remove(0);
    assert_eq!(
        (second["offset"].clone(), second["attempt"].clone()),
        (json!(0), json!(2))
    );
    send(&mut other, ack(&first)).await;
    let stale = next(&mut other).await;
    assert_eq!(stale["error"]["code"], "not_owned", "{stale}");
    send(&mut other, ack(&second)).await;
    assert_eq!(next(&mut other).await["outcome"], "acked");
}

// Proves an idle stream is woken by a publish, promptly (well under the 5 s re-check).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_wakes_an_idle_stream() {
    let (_dir, server, client) = setup(None, 0).await;
    let (mut socket, _) = open(&server, "window=4").await;
    quiet(&mut socket).await;
    let started = Instant::now();
    client
        .publish("t", Bytes::from_static(b"late"))
        .await
        .unwrap();
    let delivery = deliveries(&mut socket, 1).await.remove(0);
    assert_eq!(delivery["payload"], "late");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

// Proves a frame that does not parse gets its own invalid_argument answer and the
// stream goes on; a binary frame closes it with 1003.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_frames_are_answered_or_close() {
    let (_dir, server, _client) = setup(None, 1).await;
    let (mut socket, _) = open(&server, "window=1").await;
    let d = deliveries(&mut socket, 1).await.remove(0);
    for bad in [
        json!({"op": "settle", "offset": 0, "attempt": 1}),
        json!({"op": "nack", "offset": 0, "attempt": 1, "delay_ms": 999_999_999_999u64}),
    ] {
        send(&mut socket, bad).await;
    }
    socket.send(Message::Text("not json".into())).await.unwrap();
    for seq in 0..3 {
        let answer = next(&mut socket).await;
        assert_eq!(answer["seq"], seq, "{answer}");
        assert_eq!(answer["error"]["code"], "invalid_argument", "{answer}");
    }
    send(&mut socket, ack(&d)).await;
    assert_eq!(next(&mut socket).await["seq"], 3);
    socket
        .send(Message::Binary(Bytes::from_static(b"x")))
        .await
        .unwrap();
    let read = tokio::time::timeout(FRAME_WAIT, socket.next())
        .await
        .unwrap();
    match read {
        Some(Ok(Message::Close(Some(frame)))) => {
            assert_eq!(frame.code, CloseCode::Unsupported);
            assert_eq!(frame.reason.as_str(), "binary_frame");
        }
        other => panic!("expected a close, got {other:?}"),
    }
}

// Proves the handshake refusals: window out of range or above max_in_flight and a bad
// consumer are 400 naming the field; an unknown group is 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_refusals_name_the_field() {
    let (_dir, server, _client) = setup(None, 0).await;
    let http = reqwest::Client::new();
    let cases = [
        ("/v1/topics/t/groups/g/consume/ws?window=0", 400, "window"),
        (
            "/v1/topics/t/groups/g/consume/ws?window=65",
            400,
            "max_in_flight",
        ),
        (
            "/v1/topics/t/groups/g/consume/ws?window=4097",
            400,
            "window",
        ),
        (
            "/v1/topics/t/groups/g/consume/ws?consumer=",
            400,
            "consumer",
        ),
        ("/v1/topics/t/groups/nope/consume/ws", 404, "nope"),
    ];
    for (path, status, names) in cases {
        let response = http
            .get(server.at(path))
            .header("connection", "upgrade")
            .header("upgrade", "websocket")
            .header("sec-websocket-version", "13")
            .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), status, "{path}");
        let body: Value = response.json().await.unwrap();
        let message = body["message"].as_str().unwrap();
        assert!(message.contains(names), "{path}: {body}");
    }
}
