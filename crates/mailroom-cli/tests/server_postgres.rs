//! `mailroom serve --store postgres://...` as a user runs it: two broker processes over
//! one database serve the same topics and groups, one killed with SIGKILL mid-delivery
//! changes nothing confirmed, `MAILROOM_STORE` selects the store as the flag does, a
//! topic's own idempotency window holds on every broker and across a restart, and a
//! database that cannot be reached stops the start with a message naming the store.
//!
//! The database comes from `MAILROOM_TEST_POSTGRES` (`scripts/postgres.sh start DIR`);
//! without it the tests fail under `CI=true` and elsewhere say they were not run.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{temp_dir, two_brokers, ServerProcess};
use mailroom_client::{
    ConsumeStream, Delivery, GroupOptions, NackKind, NackOptions, SettledOutcome, StartPosition,
    StreamEvent,
};

/// A fresh database on the test cluster, or `None` where the test may be skipped.
async fn fresh_database() -> Option<String> {
    common::fresh_postgres_database().await
}

// Proves two broker processes share one database: a delivery made by A is polled again
// (same attempt) and acked through B after A is killed with SIGKILL, A restarted sees
// the ack, and the data directory given beside --store holds no messages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_broker_processes_share_one_database() {
    let Some(url) = fresh_database().await else {
        return;
    };
    let (dir_a, dir_b) = (temp_dir(), temp_dir());
    let a = ServerProcess::start(dir_a.path(), &["--store", &url]);
    let b = ServerProcess::start_with_env(dir_b.path(), &[], &[("MAILROOM_STORE", &url)]);
    let (client_a, client_b) = (a.client(), b.client());
    client_a.create_topic("orders").await.unwrap();
    client_b
        .create_group("orders", "billing", 3, StartPosition::Earliest)
        .await
        .unwrap();
    for n in 0..3 {
        client_b
            .publish("orders", format!("order {n}"))
            .await
            .unwrap();
    }
    let delivery = client_a.poll("orders", "billing").await.unwrap().unwrap();
    a.kill();
    let again = client_b.poll("orders", "billing").await.unwrap().unwrap();
    assert_eq!(
        (again.offset, again.attempt),
        (delivery.offset, delivery.attempt)
    );
    client_b.ack("orders", "billing", again.id()).await.unwrap();
    let a = ServerProcess::start(dir_a.path(), &["--store", &url]);
    let next = a.client().poll("orders", "billing").await.unwrap().unwrap();
    assert_eq!((next.offset, next.attempt), (1, 1));
    assert!(
        a.client()
            .ack("orders", "billing", delivery.id())
            .await
            .is_err(),
        "the acked attempt is refused on the restarted broker too"
    );
    let files: Vec<_> = std::fs::read_dir(dir_a.path())
        .map(|entries| entries.flatten().map(|entry| entry.file_name()).collect())
        .unwrap_or_default();
    assert!(
        files.is_empty(),
        "--data is not used with --store: {files:?}"
    );
}

// Proves a store URL whose database cannot be reached stops `serve` with an error that
// names the store, instead of starting a broker that cannot answer.
#[test]
fn unreachable_store_stops_the_start() {
    let dir = temp_dir();
    // Port 1 on loopback: nothing listens there.
    let output = Command::new(env!("CARGO_BIN_EXE_mailroom"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data"])
        .arg(dir.path())
        .args(["--store", "postgres://mailroom@127.0.0.1:1/postgres"])
        .stdin(Stdio::null())
        .output()
        .expect("run mailroom");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("store"), "{stderr}");
}

// Proves the publish stream works over the PostgreSQL store: 300 messages pipelined into
// broker A are confirmed in order with consecutive offsets, and broker B reads every one
// back at its confirmed offset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_stream_on_one_broker_reads_back_on_the_other() {
    let Some(url) = fresh_database().await else {
        return;
    };
    let (a, b, _dirs) = two_brokers(&url);
    a.client().create_topic("t").await.unwrap();
    let mut stream = a
        .client()
        .publish_stream_with_window("t", 32)
        .await
        .unwrap();
    let mut confirmations = Vec::new();
    for n in 0..300u32 {
        stream
            .feed(bytes::Bytes::from(format!("m{n}")))
            .await
            .unwrap();
    }
    confirmations.extend(stream.flush().await.unwrap());
    stream.close().await.unwrap();
    let mut offsets = Vec::new();
    for confirmation in &confirmations {
        for seq in confirmation.seqs() {
            offsets.push(confirmation.offset_of(seq).expect("confirmed"));
        }
    }
    assert_eq!(offsets, (0..300).collect::<Vec<u64>>());
    let mut options = mailroom_client::GroupOptions::new(1);
    options.max_in_flight = Some(300);
    let reader = b.client();
    reader
        .create_group_with("t", "reader", &options)
        .await
        .unwrap();
    let request = mailroom_client::BatchPoll {
        consumer: None,
        max: 300,
        wait_ms: 0,
        ack: &[],
    };
    let deliveries = reader.poll_batch("t", "reader", &request).await.unwrap();
    assert_eq!(deliveries.len(), 300);
    for delivery in deliveries {
        assert_eq!(delivery.payload, format!("m{}", delivery.offset).as_bytes());
    }
}

// Proves idempotency keys survive a broker's kill -9: a key published on broker A, which
// is then killed with SIGKILL, is a duplicate on broker B and on A restarted, and the
// topic holds one copy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_keys_outlive_a_killed_broker() {
    let Some(url) = fresh_database().await else {
        return;
    };
    let (dir_a, dir_b) = (temp_dir(), temp_dir());
    let a = ServerProcess::start(dir_a.path(), &["--store", &url]);
    let b = ServerProcess::start(dir_b.path(), &["--store", &url]);
    let http = reqwest::Client::new();
    let publish = |server: &ServerProcess| {
        http.post(server.at("/v1/topics/t/messages"))
            .header("Idempotency-Key", "invoice-7")
            .body("pay invoice 7")
    };
    let created = http.put(a.at("/v1/topics/t")).send().await.unwrap();
    assert_eq!(created.status().as_u16(), 201);
    let first: serde_json::Value = publish(&a).send().await.unwrap().json().await.unwrap();
    assert_eq!(first, serde_json::json!({"offset": 0}));
    a.kill();
    let again: serde_json::Value = publish(&b).send().await.unwrap().json().await.unwrap();
    assert_eq!(again, serde_json::json!({"offset": 0, "duplicate": true}));
    let a = ServerProcess::start(dir_a.path(), &["--store", &url]);
    let third: serde_json::Value = publish(&a).send().await.unwrap().json().await.unwrap();
    assert_eq!(third, serde_json::json!({"offset": 0, "duplicate": true}));
    let topic: serde_json::Value = http
        .get(b.at("/v1/topics/t"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(topic["end"], 1, "{topic}");
}

/// Sends `request`; answers the status and the JSON body (`Null` if none).
async fn send(request: reqwest::RequestBuilder) -> (u16, serde_json::Value) {
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or_default())
}

/// Publishes to `topic` on `server`, with idempotency key `key` if given; answers the body.
async fn publish_to(
    http: &reqwest::Client,
    server: &ServerProcess,
    topic: &str,
    key: Option<&str>,
) -> serde_json::Value {
    let mut request = http.post(server.at(&format!("/v1/topics/{topic}/messages")));
    if let Some(key) = key {
        request = request.header("Idempotency-Key", key);
    }
    let (status, body) = send(request.body("pay")).await;
    assert_eq!(status, 201, "{body}");
    body
}

/// The `idempotency` of `topic`'s view on `server`.
async fn window_of(
    http: &reqwest::Client,
    server: &ServerProcess,
    topic: &str,
) -> serde_json::Value {
    let (status, view) = send(http.get(server.at(&format!("/v1/topics/{topic}")))).await;
    assert_eq!(status, 200, "{view}");
    view["idempotency"].clone()
}

// Proves a topic's own idempotency window on PostgreSQL: created on broker A, shown by
// both brokers over their defaults, obeyed by both (a repeated key inside the count
// window is a duplicate, past it is stored again, while a default-window topic still
// answers a duplicate; a key past the time window is stored again), and kept across a
// kill -9 and a restart whose defaults differ.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_window_is_obeyed_by_every_broker_and_kept_across_a_restart() {
    use serde_json::json;
    let Some(url) = fresh_database().await else {
        return;
    };
    let (dir_a, dir_b) = (temp_dir(), temp_dir());
    let a = ServerProcess::start(dir_a.path(), &["--store", &url]);
    let b = ServerProcess::start(dir_b.path(), &["--store", &url]);
    let http = reqwest::Client::new();
    let small = json!({"idempotency": {"window_messages": 2}});
    let created = send(http.put(a.at("/v1/topics/small")).json(&small)).await;
    assert_eq!(created, (201, json!({"topic": "small", "created": true})));
    let brief = json!({"idempotency": {"window_ms": 1500}});
    assert_eq!(
        send(http.put(b.at("/v1/topics/brief")).json(&brief))
            .await
            .0,
        201
    );
    assert_eq!(send(http.put(b.at("/v1/topics/plain"))).await.0, 201);
    for server in [&a, &b] {
        assert_eq!(
            window_of(&http, server, "small").await,
            json!({"window_messages": 2, "window_ms": 120_000})
        );
        assert_eq!(
            window_of(&http, server, "brief").await,
            json!({"window_messages": 10_000, "window_ms": 1500})
        );
        assert_eq!(
            window_of(&http, server, "plain").await,
            json!({"window_messages": 10_000, "window_ms": 120_000})
        );
    }
    for topic in ["small", "plain"] {
        assert_eq!(
            publish_to(&http, &a, topic, Some("k")).await,
            json!({"offset": 0})
        );
        publish_to(&http, &a, topic, None).await;
    }
    let repeat = json!({"offset": 0, "duplicate": true});
    assert_eq!(publish_to(&http, &b, "small", Some("k")).await, repeat);
    publish_to(&http, &b, "small", None).await;
    // Offset 0 is no longer among small's last 2 messages: stored again, on either broker.
    assert_eq!(
        publish_to(&http, &a, "small", Some("k")).await,
        json!({"offset": 3})
    );
    publish_to(&http, &b, "plain", None).await;
    assert_eq!(publish_to(&http, &b, "plain", Some("k")).await, repeat);

    assert_eq!(
        publish_to(&http, &a, "brief", Some("t")).await,
        json!({"offset": 0})
    );
    let started = std::time::Instant::now();
    assert_eq!(publish_to(&http, &b, "brief", Some("t")).await, repeat);
    // The condition is time itself: the key's publish must be older than the window.
    tokio::time::sleep(std::time::Duration::from_millis(1600).saturating_sub(started.elapsed()))
        .await;
    assert_eq!(
        publish_to(&http, &b, "brief", Some("t")).await,
        json!({"offset": 1})
    );

    a.kill();
    let defaults = ["--store", &url, "--idempotency-window-ms", "60000"];
    let a = ServerProcess::start(dir_a.path(), &defaults);
    assert_eq!(
        window_of(&http, &a, "small").await,
        json!({"window_messages": 2, "window_ms": 60_000})
    );
    let third = json!({"offset": 3, "duplicate": true});
    assert_eq!(publish_to(&http, &a, "small", Some("k")).await, third);
    assert_eq!(publish_to(&http, &b, "small", Some("k")).await, third);
}

/// The lease of the group the consume stream test makes, and the delay of its release.
const STREAM_LEASE: Duration = Duration::from_millis(1_000);
const STREAM_DELAY: Duration = Duration::from_millis(800);
/// How late past its due time a stream may wake and still count as woken by it: well
/// under the 5 s after which a waiting stream polls again anyway.
const WAKE_SLACK: Duration = Duration::from_millis(2_500);

// Proves the consume stream runs over the PostgreSQL store and wakes by the clock across
// brokers: a delivery whose lease another consumer let run out on broker A reaches a
// stream on broker B once the lease ends (not at the stream's 5 s recheck), as the next
// attempt; a release with a delay sent up the stream comes back once the delay is over;
// each settlement is answered; an ack and a reject sent together are answered in order
// and refill the window; and A sees the group where the stream left it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consume_stream_wakes_for_leases_and_delays_across_brokers() {
    let Some(url) = fresh_database().await else {
        return;
    };
    let (a, b, _dirs) = two_brokers(&url);
    let (client_a, client_b) = (a.client(), b.client());
    client_a.create_topic("t").await.unwrap();
    let mut options = GroupOptions::new(5);
    options.lease_ms = Some(STREAM_LEASE.as_millis() as u64);
    options.max_in_flight = Some(2);
    client_a
        .create_group_with("t", "g", &options)
        .await
        .unwrap();
    client_a.publish("t", "only").await.unwrap();
    // Taken before the poll: the lease starts when the database runs it, after this and
    // before the answer, so only this instant bounds its end from below.
    let leased_at = Instant::now();
    let held = client_a.poll_as("t", "g", "elsewhere").await.unwrap();
    let held = held.expect("the message");

    let mut stream = client_b
        .consume_stream("t", "g", 2, Some("streamer"))
        .await
        .unwrap();
    let (again, _) = next_delivery(&mut stream).await;
    let waited = leased_at.elapsed();
    assert_eq!(
        (again.offset, again.attempt),
        (held.offset, held.attempt + 1)
    );
    assert!(
        waited >= STREAM_LEASE && waited < STREAM_LEASE + WAKE_SLACK,
        "delivered {waited:?} after the lease began ({STREAM_LEASE:?} long)"
    );

    let release = NackOptions {
        kind: NackKind::Release,
        delay_ms: Some(STREAM_DELAY.as_millis() as u64),
        reason: None,
    };
    let released_at = Instant::now();
    let released = stream.nack(again.id(), &release).await.unwrap();
    let (back, settled) = next_delivery(&mut stream).await;
    let waited = released_at.elapsed();
    assert_eq!(settled, vec![(released, SettledOutcome::Released)]);
    assert_eq!(back.offset, held.offset);
    assert!(back.attempt > again.attempt, "{back:?} after {again:?}");
    assert!(
        waited >= STREAM_DELAY && waited < STREAM_DELAY + WAKE_SLACK,
        "delivered {waited:?} after a release delayed by {STREAM_DELAY:?}"
    );

    let acked = stream.ack(back.id()).await.unwrap();
    match stream.next().await.unwrap() {
        Some(StreamEvent::Settled(answer)) => {
            assert_eq!(
                (answer.seq, answer.outcome),
                (acked, Ok(SettledOutcome::Acked))
            );
        }
        other => panic!("expected the ack's answer, got {other:?}"),
    }

    // An ack and a reject sent in one write are one round: both answered in order, and
    // the poll that goes with them refills the window with the third message.
    for n in 1..=3 {
        client_a.publish("t", format!("m{n}")).await.unwrap();
    }
    let (first, _) = next_delivery(&mut stream).await;
    let (second, _) = next_delivery(&mut stream).await;
    let reject = NackOptions {
        kind: NackKind::Reject,
        delay_ms: None,
        reason: Some("bad".into()),
    };
    let ack_seq = stream.feed_ack(first.id()).await.unwrap();
    let reject_seq = stream.feed_nack(second.id(), &reject).await.unwrap();
    stream.flush().await.unwrap();
    let (third, settled) = next_delivery(&mut stream).await;
    assert_eq!(
        settled,
        vec![
            (ack_seq, SettledOutcome::Acked),
            (reject_seq, SettledOutcome::DeadLettered)
        ]
    );
    assert_eq!((first.offset, second.offset, third.offset), (1, 2, 3));
    stream.close().await.unwrap();
    let info = client_a.group_info("t", "g").await.unwrap();
    assert_eq!(
        (info.position, info.in_flight, info.dead_letters),
        (3, Some(third.id()), 1),
        "the third in flight, the second dead-lettered: {info:?}"
    );
}

/// The stream's next delivery, with the settlement answers read before it.
async fn next_delivery(stream: &mut ConsumeStream) -> (Delivery, Vec<(u64, SettledOutcome)>) {
    let mut settled = Vec::new();
    loop {
        match stream.next().await.unwrap() {
            Some(StreamEvent::Delivery(delivery)) => return (delivery, settled),
            Some(StreamEvent::Settled(answer)) => {
                let outcome = answer.outcome.expect("the settlement succeeds");
                settled.push((answer.seq, outcome));
            }
            None => panic!("the stream closed: {:?}", stream.closed()),
        }
    }
}
