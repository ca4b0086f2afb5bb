//! Topics and consumer groups end to end: the real binary, driven through the client.

mod common;

use bytes::Bytes;
use common::{temp_dir, ServerProcess};
use mailroom_client::{DeliveryId, NackOutcome, StartPosition};

// Proves the basic delivery semantics over HTTP: a repeated poll is the same attempt,
// acks and nacks are fenced to the exact (offset, attempt), a nack retries until the
// final attempt, which dead-letters once, and groups never affect each other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivery_semantics_end_to_end() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &[]);
    let client = server.client();

    assert!(client.create_topic("orders").await.unwrap());
    assert!(
        !client.create_topic("orders").await.unwrap(),
        "second create is 200"
    );
    client
        .create_group("orders", "billing", 2, StartPosition::Earliest)
        .await
        .unwrap();
    client
        .create_group("orders", "audit", 5, StartPosition::Earliest)
        .await
        .unwrap();
    let exists = client
        .create_group("orders", "billing", 2, StartPosition::Earliest)
        .await;
    assert_eq!(exists.unwrap_err().code(), Some("group_exists"));

    assert_eq!(
        client.poll("orders", "billing").await.unwrap(),
        None,
        "empty topic: 204"
    );
    assert_eq!(client.publish("orders", "m0").await.unwrap(), 0);
    assert_eq!(
        client
            .publish("orders", Bytes::from_static(&[0xff, 0xfe]))
            .await
            .unwrap(),
        1
    );

    // In flight, then a repeated poll returns the same attempt.
    let first = client.poll("orders", "billing").await.unwrap().unwrap();
    assert_eq!(
        (first.offset, first.attempt, &first.payload[..]),
        (0, 1, &b"m0"[..])
    );
    assert_eq!(
        client.poll("orders", "billing").await.unwrap().unwrap(),
        first
    );

    // A made-up delivery is not owned; the nack retries.
    let wrong = DeliveryId {
        offset: 0,
        attempt: 2,
    };
    assert_eq!(
        client
            .ack("orders", "billing", wrong)
            .await
            .unwrap_err()
            .code(),
        Some("not_owned")
    );
    assert_eq!(
        client.nack("orders", "billing", first.id()).await.unwrap(),
        NackOutcome::Retry
    );
    // Between the nack and the next poll nothing is in flight: the old attempt is stale.
    let stale = client
        .ack("orders", "billing", first.id())
        .await
        .unwrap_err();
    assert_eq!(
        (stale.status(), stale.code()),
        (Some(409), Some("not_owned"))
    );

    let second = client.poll("orders", "billing").await.unwrap().unwrap();
    assert_eq!((second.offset, second.attempt), (0, 2));
    // The final attempt's nack dead-letters, exactly once.
    assert_eq!(
        client.nack("orders", "billing", second.id()).await.unwrap(),
        NackOutcome::DeadLettered
    );
    let again = client
        .nack("orders", "billing", second.id())
        .await
        .unwrap_err();
    assert_eq!(again.code(), Some("not_owned"));
    let letters = client.dead_letters("orders", "billing").await.unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(
        (
            letters[0].offset,
            letters[0].attempts,
            &letters[0].payload[..]
        ),
        (0, 2, &b"m0"[..])
    );

    // The binary payload round-trips through base64; ack moves the cursor.
    let binary = client.poll("orders", "billing").await.unwrap().unwrap();
    assert_eq!((binary.offset, &binary.payload[..]), (1, &[0xff, 0xfe][..]));
    client.ack("orders", "billing", binary.id()).await.unwrap();
    assert_eq!(client.poll("orders", "billing").await.unwrap(), None);

    let info = client.group_info("orders", "billing").await.unwrap();
    assert_eq!(
        (info.position, info.lag, info.dead_letters, info.in_flight),
        (2, 0, 1, None)
    );
    // The other group saw none of that.
    let audit = client.group_info("orders", "audit").await.unwrap();
    assert_eq!((audit.position, audit.lag, audit.attempt), (0, 2, 0));
    let audit_first = client.poll("orders", "audit").await.unwrap().unwrap();
    assert_eq!((audit_first.offset, audit_first.attempt), (0, 1));
}

// Proves batch publish returns consecutive offsets in order, that its text and base64
// messages read back intact, that the raw poll carries offset and attempt in headers,
// and that listings show topics and groups.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_raw_poll_and_listings() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &[]);
    let client = server.client();
    client.create_topic("events").await.unwrap();
    client.publish("events", "zero").await.unwrap();
    let payloads = vec![
        Bytes::from("one"),
        Bytes::from_static(&[0, 159, 146, 150]),
        Bytes::new(),
    ];
    assert_eq!(
        client.publish_batch("events", &payloads).await.unwrap(),
        vec![1, 2, 3]
    );
    client
        .create_group("events", "late", 1, StartPosition::Latest)
        .await
        .unwrap();
    client
        .create_group("events", "mid", 1, StartPosition::Offset(2))
        .await
        .unwrap();
    assert_eq!(
        client.poll("events", "late").await.unwrap(),
        None,
        "latest starts at the end"
    );

    let http = reqwest::Client::new();
    let raw = http
        .post(server.at("/v1/topics/events/groups/mid/poll/raw"))
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status(), 200);
    assert_eq!(raw.headers()["mailroom-offset"], "2");
    assert_eq!(raw.headers()["mailroom-attempt"], "1");
    assert_eq!(raw.bytes().await.unwrap(), payloads[1]);
    // The raw poll and the JSON poll see the same in-flight delivery.
    let same = client.poll("events", "mid").await.unwrap().unwrap();
    assert_eq!(
        (same.offset, same.attempt, same.payload.clone()),
        (2, 1, payloads[1].clone())
    );
    client.ack("events", "mid", same.id()).await.unwrap();
    let empty = client.poll("events", "mid").await.unwrap().unwrap();
    assert_eq!((empty.offset, empty.payload.len()), (3, 0));

    let topics = client.list_topics().await.unwrap();
    assert_eq!(topics.len(), 1);
    assert_eq!(
        (topics[0].start, topics[0].end, topics[0].groups.clone()),
        (0, 4, vec!["late".into(), "mid".into()])
    );
    let info = client.topic_info("events").await.unwrap();
    assert_eq!(
        info.groups.iter().map(|g| g.lag).collect::<Vec<_>>(),
        vec![0, 1]
    );

    let metrics = client.metrics().await.unwrap();
    assert!(
        metrics.contains("mailroom_publishes_total{topic=\"events\"} 4"),
        "{metrics}"
    );
    assert!(
        metrics.contains("mailroom_group_lag{topic=\"events\",group=\"mid\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("mailroom_acks_total{topic=\"events\",group=\"mid\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("mailroom_http_request_duration_seconds_bucket"),
        "{metrics}"
    );
}

// Proves /openapi.json documents every route the server serves, and /healthz answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_documents_every_endpoint() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &[]);
    server.client().health().await.unwrap();
    let doc: serde_json::Value = reqwest::get(server.at("/openapi.json"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let paths = doc["paths"].as_object().unwrap();
    let expected = [
        ("/v1/topics", "get"),
        ("/v1/topics/{topic}", "put"),
        ("/v1/topics/{topic}", "get"),
        ("/v1/topics/{topic}", "patch"),
        ("/v1/topics/{topic}", "delete"),
        ("/v1/topics/{topic}/messages", "post"),
        ("/v1/topics/{topic}/messages", "get"),
        ("/v1/topics/{topic}/messages/batch", "post"),
        ("/v1/topics/{topic}/publish/ws", "get"),
        ("/v1/topics/{topic}/recover", "post"),
        ("/v1/topics/{topic}/repair", "post"),
        ("/v1/topics/{topic}/groups/{group}", "put"),
        ("/v1/topics/{topic}/groups/{group}", "get"),
        ("/v1/topics/{topic}/groups/{group}", "delete"),
        ("/v1/topics/{topic}/groups/{group}/poll", "post"),
        ("/v1/topics/{topic}/groups/{group}/poll/raw", "post"),
        ("/v1/topics/{topic}/groups/{group}/ack", "post"),
        ("/v1/topics/{topic}/groups/{group}/nack", "post"),
        ("/v1/topics/{topic}/groups/{group}/dead-letters", "get"),
        ("/v1/topics/{topic}/groups/{group}/touch", "post"),
        ("/v1/topics/{topic}/groups/{group}/poll/batch", "post"),
        ("/v1/topics/{topic}/groups/{group}/ack/batch", "post"),
        ("/v1/topics/{topic}/groups/{group}/nack/batch", "post"),
        ("/v1/topics/{topic}/groups/{group}/consume/ws", "get"),
        (
            "/v1/topics/{topic}/groups/{group}/dead-letters/redrive",
            "post",
        ),
        (
            "/v1/topics/{topic}/groups/{group}/dead-letters/purge",
            "post",
        ),
        ("/v1/topics/{topic}/groups/{group}/seek", "post"),
        ("/v1/topics/{topic}/groups/{group}/pause", "post"),
        ("/v1/topics/{topic}/groups/{group}/resume", "post"),
        ("/v1/channels", "get"),
        ("/v1/channels/{channel}", "put"),
        ("/v1/channels/{channel}", "get"),
        ("/v1/channels/{channel}", "delete"),
        ("/v1/channels/{channel}/messages", "post"),
        ("/v1/channels/{channel}/ws", "get"),
        ("/v1/channels/{channel}/events", "get"),
        ("/v1/tickets", "post"),
        ("/healthz", "get"),
        ("/metrics", "get"),
        ("/openapi.json", "get"),
    ];
    for (path, method) in expected {
        assert!(
            paths.get(path).and_then(|p| p.get(method)).is_some(),
            "{method} {path} undocumented"
        );
    }
    let operations: usize = paths.values().map(|p| p.as_object().unwrap().len()).sum();
    assert_eq!(
        operations,
        expected.len(),
        "documented operations the test does not know"
    );
}

/// Messages raced over in `racing_consumers_settle_each_offset_once`.
const RACE_MESSAGES: u64 = 60;
/// Consumers racing on one group.
const RACE_CONSUMERS: usize = 4;

// Proves fencing under real concurrency over HTTP: several consumers poll and ack one
// group at once (a poll hands the in-flight delivery to whoever asks, so they collide);
// exactly one ack wins per offset, every loser gets 409 not_owned, and the group ends
// past every message with nothing dead-lettered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_consumers_settle_each_offset_once() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "never"]);
    let client = server.client();
    client.create_topic("race").await.unwrap();
    client
        .create_group("race", "g", 1, StartPosition::Earliest)
        .await
        .unwrap();
    let payloads: Vec<Bytes> = (0..RACE_MESSAGES)
        .map(|n| Bytes::from(format!("m{n}")))
        .collect();
    client.publish_batch("race", &payloads).await.unwrap();

    let mut consumers = Vec::new();
    for _ in 0..RACE_CONSUMERS {
        let client = client.clone();
        consumers.push(tokio::spawn(async move {
            let (mut won, mut lost) = (Vec::new(), 0);
            while let Some(delivery) = client.poll("race", "g").await.unwrap() {
                assert_eq!(delivery.payload, format!("m{}", delivery.offset));
                match client.ack("race", "g", delivery.id()).await {
                    Ok(()) => won.push(delivery.offset),
                    Err(error) => {
                        assert_eq!(error.code(), Some("not_owned"), "{error}");
                        lost += 1;
                    }
                }
            }
            (won, lost)
        }));
    }
    let mut won = Vec::new();
    for consumer in consumers {
        won.extend(consumer.await.unwrap().0);
    }
    won.sort_unstable();
    assert_eq!(
        won,
        (0..RACE_MESSAGES).collect::<Vec<_>>(),
        "each offset acked exactly once"
    );
    let info = client.group_info("race", "g").await.unwrap();
    assert_eq!(
        (info.position, info.lag, info.dead_letters),
        (RACE_MESSAGES, 0, 0)
    );
}
