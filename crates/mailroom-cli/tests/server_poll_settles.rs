//! A `poll/batch` that settles the last round first, against the real `mailroom` binary:
//! nacks, then acks, then the poll, in one request, each settlement answered as its batch
//! route would answer it; and bad `nack` input refused before anything changes.

mod batch_support;
mod common;

use batch_support::{batch, id, post, publish, topic_with_group};
use common::{temp_dir, ServerProcess};
use mailroom_client::{
    BatchNack, BatchPoll, DeliveryId, NackKind, NackOptions, NackOutcome, SettledPoll,
};
use serde_json::json;

const POLL: &str = "/v1/topics/t/groups/g/poll/batch";

/// Nacks `nacks` with `options`, acks `acks`, then polls up to `max` as w1.
async fn settle_then_poll(
    server: &ServerProcess,
    nacks: &[DeliveryId],
    options: &NackOptions,
    acks: &[DeliveryId],
    max: u32,
) -> SettledPoll {
    let request = BatchPoll {
        ack: acks,
        ..batch(Some("w1"), max)
    };
    let nack = BatchNack {
        deliveries: nacks,
        options,
    };
    server
        .client()
        .settle_then_poll_batch("t", "g", &request, &nack)
        .await
        .unwrap()
}

// Proves the nacks go first, then the acks, then the poll, all in one request: a plain
// nack's message comes straight back in the same poll with its next attempt, a reject
// dead-letters at once, an ack after a nack of the same delivery fails (`not_owned`), a
// stale attempt fails alone, and the window the settlements move on is refilled.
// Each item reads as nack/batch and ack/batch read, and the metrics count them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poll_nacks_then_acks_then_polls() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "always"]);
    let client = server.client();
    topic_with_group(&client, 3).await;
    publish(&client, 5).await;
    let first = client
        .poll_batch("t", "g", &batch(Some("w1"), 3))
        .await
        .unwrap();
    let ids: Vec<DeliveryId> = first.iter().map(|d| d.id()).collect();
    assert_eq!(ids, [id(0, 1), id(1, 1), id(2, 1)]);
    // Offset 0 is nacked for a retry (and then acked: too late), 1 is acked, 2 stays in
    // flight, and a stale attempt of 2 is nacked.
    let nacks = [ids[0], id(2, 0)];
    let acks = [ids[1], ids[0]];
    let settled = settle_then_poll(&server, &nacks, &NackOptions::default(), &acks, 3).await;
    assert_eq!(settled.nacked[0], Ok(NackOutcome::Retry));
    assert_eq!(settled.nacked[1].as_ref().unwrap_err().code, "not_owned");
    assert!(settled.acked[0].is_ok());
    assert_eq!(settled.acked[1].as_ref().unwrap_err().code, "not_owned");
    // w1's own delivery in flight first, then the retry; the window (offsets 0..3 while
    // 0 is unfinished) holds nothing more.
    let polled: Vec<DeliveryId> = settled.deliveries.iter().map(|d| d.id()).collect();
    assert_eq!(polled, [id(2, 1), id(0, 2)]);
    // A reject dead-letters at once; with 2 acked too, the position moves to 3 and the
    // same poll fills the window from there.
    let reject = NackOptions {
        kind: NackKind::Reject,
        reason: Some("bad input".into()),
        ..NackOptions::default()
    };
    let settled = settle_then_poll(&server, &[id(0, 2)], &reject, &[id(2, 1)], 3).await;
    assert_eq!(settled.nacked, [Ok(NackOutcome::DeadLettered)]);
    assert_eq!(settled.acked, [Ok(())]);
    let polled: Vec<DeliveryId> = settled.deliveries.iter().map(|d| d.id()).collect();
    assert_eq!(polled, [id(3, 1), id(4, 1)]);
    let info = client.group_info("t", "g").await.unwrap();
    assert_eq!((info.position, info.dead_letters), (3, 1));
    let metrics = client.metrics().await.unwrap();
    for series in [
        r#"mailroom_nacks_total{topic="t",group="g",outcome="retry"} 1"#,
        r#"mailroom_nacks_total{topic="t",group="g",outcome="dead_lettered"} 1"#,
        r#"mailroom_acks_total{topic="t",group="g"} 2"#,
    ] {
        assert!(
            metrics.lines().any(|line| line == series),
            "{series}\n{metrics}"
        );
    }
}

// Proves bad `nack` input in a poll is a 400 naming the field, and that nothing was
// settled or handed out: an empty list, a bad id, bad options, an unknown field, and
// more than 65,536 acks and nacks together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_nack_in_a_poll_is_refused_whole() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "never"]);
    let client = server.client();
    topic_with_group(&client, 4).await;
    publish(&client, 2).await;
    let first = client
        .poll_batch("t", "g", &batch(Some("w1"), 1))
        .await
        .unwrap();
    let held = json!({"offset": first[0].offset, "attempt": first[0].attempt});
    let half = vec![held.clone(); 32_768];
    let cases = [
        (
            json!({"max": 1, "ack": [held], "nack": {"deliveries": []}}),
            "invalid_argument",
            "nack.deliveries",
        ),
        (
            json!({"max": 1, "nack": {"deliveries": [{"offset": 1u64 << 63, "attempt": 1}]}}),
            "invalid_argument",
            "nack.deliveries[0].offset",
        ),
        (
            json!({"max": 1, "ack": [held], "nack": {"deliveries": [held], "delay_ms": 604_800_001u64}}),
            "invalid_argument",
            "delay_ms",
        ),
        (
            json!({"max": 1, "nack": {"deliveries": [held], "kind": "drop"}}),
            "invalid_body",
            "kind",
        ),
        (
            json!({"max": 1, "nack": {"deliveries": [held], "why": "x"}}),
            "invalid_body",
            "why",
        ),
        (
            json!({"max": 1, "ack": half, "nack": {"deliveries": vec![held.clone(); 32_769]}}),
            "invalid_argument",
            "ack and nack",
        ),
    ];
    for (body, code, names) in cases {
        let shown = body.to_string();
        let (status, error) = post(&server, POLL, serde_json::to_vec(&body).unwrap()).await;
        let message = error["message"].as_str().unwrap_or_default();
        assert_eq!(
            (status, error["error"].as_str()),
            (400, Some(code)),
            "{shown:.120}: {error}"
        );
        assert!(message.contains(names), "{shown:.120}: {message}");
    }
    // Nothing was settled or handed out: w1 still holds its delivery, and the group's
    // other message is still there for another consumer.
    let info = client.group_info("t", "g").await.unwrap();
    assert_eq!((info.position, info.in_flight), (0, Some(id(0, 1))));
    let again = client
        .poll_batch("t", "g", &batch(Some("w1"), 4))
        .await
        .unwrap();
    assert_eq!(
        again.iter().map(|d| d.id()).collect::<Vec<_>>(),
        [id(0, 1), id(1, 1)]
    );
}
