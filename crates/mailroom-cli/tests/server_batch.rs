//! Batch poll, ack and nack against the real `mailroom` binary: item results, the
//! window, acks carried by the next poll, bad input, restarts, and the CLI flags built on
//! them.

mod batch_support;
mod cli_support;
mod common;

use std::process::Output;

use batch_support::{batch, id, post, publish, topic_with_group, until_waiting, WAIT_MS_LONG};
use cli_support::documents;
use common::{temp_dir, ServerProcess};
use mailroom_client::{BatchPoll, DeliveryId, NackKind, NackOptions, NackOutcome};
use serde_json::{json, Value};

/// Runs `mailroom --server URL --json ARGS`.
fn mailroom(server: &ServerProcess, args: &[&str]) -> Output {
    let args = [&["--json"], args].concat();
    cli_support::mailroom(&server.url, None, &args, b"")
}

// Proves a batch poll hands out up to `max` deliveries in offset order, gives a consumer
// its own in-flight deliveries back first, and that batch ack and nack settle item by
// item: a stale, duplicate or foreign delivery fails alone while the rest take effect,
// each nack kind reports its outcome, and the metrics count messages, not requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_poll_ack_nack_with_partial_results() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "never"]);
    let client = server.client();
    topic_with_group(&client, 8).await;
    publish(&client, 5).await;

    let first = client
        .poll_batch("t", "g", &batch(Some("w1"), 3))
        .await
        .unwrap();
    let offsets: Vec<(u64, u32)> = first.iter().map(|d| (d.offset, d.attempt)).collect();
    assert_eq!(offsets, vec![(0, 1), (1, 1), (2, 1)]);
    assert_eq!(&first[1].payload[..], b"m1");
    let second = client
        .poll_batch("t", "g", &batch(Some("w2"), 10))
        .await
        .unwrap();
    let offsets: Vec<u64> = second.iter().map(|d| d.offset).collect();
    assert_eq!(offsets, vec![3, 4]);
    // w1 polls again: its own three come back, the same attempts, and nothing else.
    let again = client
        .poll_batch("t", "g", &batch(Some("w1"), 10))
        .await
        .unwrap();
    assert_eq!(again, first);

    let acks = [id(0, 1), id(1, 1), id(0, 1), id(3, 9)];
    let results = client.ack_batch("t", "g", &acks).await.unwrap();
    assert!(results[0].is_ok() && results[1].is_ok());
    for refused in &results[2..] {
        assert_eq!(refused.as_ref().unwrap_err().code, "not_owned");
    }
    let release = NackOptions {
        kind: NackKind::Release,
        ..NackOptions::default()
    };
    let released = client
        .nack_batch("t", "g", &[id(2, 1), id(3, 1), id(0, 1)], &release)
        .await
        .unwrap();
    assert_eq!(released[0], Ok(NackOutcome::Released));
    assert_eq!(released[1], Ok(NackOutcome::Released));
    assert_eq!(released[2].as_ref().unwrap_err().code, "not_owned");
    let reject = NackOptions {
        kind: NackKind::Reject,
        reason: Some("bad schema".into()),
        ..NackOptions::default()
    };
    let rejected = client
        .nack_batch("t", "g", &[id(4, 1)], &reject)
        .await
        .unwrap();
    assert_eq!(rejected, vec![Ok(NackOutcome::DeadLettered)]);

    let detail = client.group_detail("t", "g").await.unwrap();
    assert_eq!(detail.info.position, 2);
    assert!(detail.deliveries.is_empty());
    assert_eq!(detail.dead_letter_notes[0].offset, 4);
    assert_eq!(
        detail.dead_letter_notes[0].reason.as_deref(),
        Some("bad schema")
    );
    let text = client.metrics().await.unwrap();
    for series in [
        "mailroom_deliveries_total{topic=\"t\",group=\"g\"} 8",
        "mailroom_acks_total{topic=\"t\",group=\"g\"} 2",
        "mailroom_nacks_total{topic=\"t\",group=\"g\",outcome=\"released\"} 2",
        "mailroom_nacks_total{topic=\"t\",group=\"g\",outcome=\"dead_lettered\"} 1",
    ] {
        assert!(text.contains(series), "{series} missing from\n{text}");
    }
}

// Proves a batch poll respects the group's window: with W = 1 it returns at most one
// delivery, another consumer gets nothing while it is in flight, and acking it frees
// the window for the next message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn window_of_one_hands_out_one() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "never"]);
    let client = server.client();
    topic_with_group(&client, 1).await;
    publish(&client, 3).await;

    let polled = client.poll_batch("t", "g", &batch(None, 10)).await.unwrap();
    assert_eq!(polled.len(), 1);
    assert_eq!(polled[0].id(), id(0, 1));
    let other = client
        .poll_batch("t", "g", &batch(Some("w2"), 10))
        .await
        .unwrap();
    assert!(other.is_empty());
    let acked = client.ack_batch("t", "g", &[id(0, 1)]).await.unwrap();
    assert_eq!(acked, vec![Ok(())]);
    let next = client
        .poll_batch("t", "g", &batch(Some("w2"), 10))
        .await
        .unwrap();
    assert_eq!(next.iter().map(|d| d.id()).collect::<Vec<_>>(), [id(1, 1)]);
}

// Proves a poll/batch carrying `ack` acks first and refills the freed window slots in
// the same request (item results as ack/batch gives them, refusals included), that a
// long poll does its acks once, at the start (an ack list that empties the window still
// gets the next publish), and that more than 65,536 acks is a 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poll_batch_acks_the_previous_round_first() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "always"]);
    let client = server.client();
    topic_with_group(&client, 2).await;
    publish(&client, 4).await;
    let first = client
        .poll_batch("t", "g", &batch(Some("w1"), 2))
        .await
        .unwrap();
    let ids: Vec<DeliveryId> = first.iter().map(|d| d.id()).collect();
    let acks = [ids[0], ids[1], ids[0]];
    let request = BatchPoll {
        ack: &acks,
        ..batch(Some("w1"), 2)
    };
    let (acked, next) = client
        .ack_then_poll_batch("t", "g", &request)
        .await
        .unwrap();
    assert!(acked[0].is_ok() && acked[1].is_ok());
    assert_eq!(acked[2].as_ref().unwrap_err().code, "not_owned");
    let offsets: Vec<u64> = next.iter().map(|d| d.offset).collect();
    assert_eq!(offsets, [2, 3]);
    assert_eq!(&next[1].payload[..], b"m3");
    // Acking the last round under a long poll: the acks happen once, then it waits, and
    // a publish answers it.
    let last: Vec<DeliveryId> = next.iter().map(|d| d.id()).collect();
    let waiting = tokio::spawn({
        let client = client.clone();
        async move {
            let request = BatchPoll {
                consumer: Some("w1"),
                max: 2,
                wait_ms: WAIT_MS_LONG,
                ack: &last,
            };
            client
                .ack_then_poll_batch("t", "g", &request)
                .await
                .unwrap()
        }
    });
    until_waiting(&client, 1.0).await;
    assert_eq!(client.group_info("t", "g").await.unwrap().position, 4);
    assert_eq!(client.publish("t", "m4").await.unwrap(), 4);
    let (acked, woken) = waiting.await.unwrap();
    assert_eq!(acked, [Ok(()), Ok(())]);
    assert_eq!(woken.iter().map(|d| d.offset).collect::<Vec<_>>(), [4]);
    // The plain poll_batch drops the ack results but still acks.
    let request = BatchPoll {
        ack: &[woken[0].id()],
        ..batch(Some("w1"), 2)
    };
    assert!(client
        .poll_batch("t", "g", &request)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(client.group_info("t", "g").await.unwrap().position, 5);
    let too_many = json!({ "max": 1, "ack": vec![json!({"offset": 0, "attempt": 1}); 65_537] });
    let (status, body) = post(
        &server,
        "/v1/topics/t/groups/g/poll/batch",
        serde_json::to_vec(&too_many).unwrap(),
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_argument"))
    );
}

// Proves bad batch input is refused with a 4xx JSON error and the documented code:
// ranges of max, wait_ms, consumer and list length, unknown fields, bad JSON, unknown
// names, and a body over the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_batch_input_is_a_json_4xx() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "never"]);
    let client = server.client();
    topic_with_group(&client, 4).await;
    let poll = "/v1/topics/t/groups/g/poll/batch";
    let ack = "/v1/topics/t/groups/g/ack/batch";
    let nack = "/v1/topics/t/groups/g/nack/batch";
    let too_many = json!({ "deliveries": vec![json!({"offset": 0, "attempt": 1}); 65_537] });
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        (poll, br#"{"max":0}"#.to_vec(), 400, "invalid_argument"),
        (poll, br#"{"max":65537}"#.to_vec(), 400, "invalid_argument"),
        (
            poll,
            br#"{"max":1,"wait_ms":30001}"#.to_vec(),
            400,
            "invalid_argument",
        ),
        (
            poll,
            br#"{"max":1,"consumer":""}"#.to_vec(),
            400,
            "invalid_argument",
        ),
        (
            poll,
            br#"{"max":1,"who":"w1"}"#.to_vec(),
            400,
            "invalid_body",
        ),
        (poll, br#"{}"#.to_vec(), 400, "invalid_body"),
        (poll, br#"{"max":"#.to_vec(), 400, "malformed_json"),
        (
            "/v1/topics/t/groups/nope/poll/batch",
            br#"{"max":1}"#.to_vec(),
            404,
            "unknown_group",
        ),
        (
            ack,
            br#"{"deliveries":[]}"#.to_vec(),
            400,
            "invalid_argument",
        ),
        (
            ack,
            serde_json::to_vec(&too_many).unwrap(),
            400,
            "invalid_argument",
        ),
        (
            ack,
            br#"{"deliveries":[{"offset":-1,"attempt":1}]}"#.to_vec(),
            400,
            "invalid_body",
        ),
        (
            "/v1/topics/nope/groups/g/ack/batch",
            br#"{"deliveries":[{"offset":0,"attempt":1}]}"#.to_vec(),
            404,
            "unknown_topic",
        ),
        (
            nack,
            br#"{"deliveries":[]}"#.to_vec(),
            400,
            "invalid_argument",
        ),
        (
            nack,
            br#"{"deliveries":[{"offset":0,"attempt":1}],"kind":"drop"}"#.to_vec(),
            400,
            "invalid_body",
        ),
        (nack, vec![b' '; 5 << 20], 413, "payload_too_large"),
    ];
    for (path, body, status, code) in cases {
        let shown = String::from_utf8_lossy(&body[..body.len().min(80)]).into_owned();
        let (got_status, error) = post(&server, path, body).await;
        assert_eq!(
            (got_status, error["error"].as_str()),
            (status, Some(code)),
            "{path} {shown}: {error}"
        );
    }
    // Still serving, nothing changed.
    publish(&client, 1).await;
    let polled = client.poll_batch("t", "g", &batch(None, 4)).await.unwrap();
    assert_eq!(polled.len(), 1);
}

// Proves batch-acked and batch-nacked state survives a SIGKILL under fsync always: after
// a restart the acked messages stay finished, the delivery still in flight comes back
// to its consumer with the same attempt, and a stale ack is still refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_keeps_batch_acked_state() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "always"]);
    let client = server.client();
    topic_with_group(&client, 8).await;
    publish(&client, 5).await;
    let polled = client
        .poll_batch("t", "g", &batch(Some("w1"), 8))
        .await
        .unwrap();
    assert_eq!(polled.len(), 5);
    let acked = client
        .ack_batch("t", "g", &[id(0, 1), id(1, 1), id(2, 1)])
        .await
        .unwrap();
    assert!(acked.iter().all(Result::is_ok));
    let nacked = client
        .nack_batch("t", "g", &[id(3, 1)], &NackOptions::default())
        .await
        .unwrap();
    assert_eq!(nacked, vec![Ok(NackOutcome::Retry)]);
    tokio::task::spawn_blocking(move || server.kill())
        .await
        .unwrap();

    let server = ServerProcess::start(dir.path(), &["--fsync", "always"]);
    let client = server.client();
    let detail = client.group_detail("t", "g").await.unwrap();
    assert_eq!(detail.info.position, 3);
    let ids: Vec<_> = detail.deliveries.iter().map(|d| d.id()).collect();
    assert_eq!(ids, vec![id(4, 1)]);
    let again = client
        .poll_batch("t", "g", &batch(Some("w1"), 8))
        .await
        .unwrap();
    let ids: Vec<DeliveryId> = again.iter().map(|d| d.id()).collect();
    assert_eq!(ids, vec![id(4, 1), id(3, 2)]);
    let stale = client.ack_batch("t", "g", &[id(0, 1)]).await.unwrap();
    assert_eq!(stale[0].as_ref().unwrap_err().code, "not_owned");
}

// Proves the CLI's batch flags end to end: `group poll --max` hands out several
// deliveries at once as a consumer, and `consume --batch --consumer` then gets those
// back first, acks the good ones and rejects the bad one (--nack --nack-kind reject)
// straight into the dead letters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_batch_flags() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "never"]);
    let client = server.client();
    topic_with_group(&client, 16).await;
    for payload in ["ok 0", "poison", "ok 2", "ok 3", "ok 4"] {
        client.publish("t", payload).await.unwrap();
    }

    let polled = documents(&mailroom(
        &server,
        &["group", "poll", "t", "g", "--max", "2", "--consumer", "w1"],
    ));
    let offsets: Vec<&Value> = polled.iter().map(|doc| &doc["offset"]).collect();
    assert_eq!(offsets, [&json!(0), &json!(1)]);

    let consumed = documents(&mailroom(
        &server,
        &[
            "consume",
            "t",
            "g",
            "--batch",
            "2",
            "--consumer",
            "w1",
            "--exec",
            "! grep -q poison",
            "--nack",
            "--nack-kind",
            "reject",
        ],
    ));
    let outcomes: Vec<(u64, u64, String)> = consumed
        .iter()
        .map(|doc| {
            (
                doc["offset"].as_u64().unwrap(),
                doc["attempt"].as_u64().unwrap(),
                doc["outcome"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let acked = "acked".to_owned();
    assert_eq!(
        outcomes,
        vec![
            (0, 1, acked.clone()),
            (1, 1, "nacked (dead-lettered)".to_owned()),
            (2, 1, acked.clone()),
            (3, 1, acked.clone()),
            (4, 1, acked),
        ]
    );
    let detail = client.group_detail("t", "g").await.unwrap();
    assert_eq!(detail.info.position, 5);
    assert_eq!(detail.dead_letter_notes.len(), 1);
    assert_eq!(detail.dead_letter_notes[0].offset, 1);
    assert_eq!(
        detail.counters.redeliveries, 0,
        "w1 got its own back, same attempt"
    );
}
