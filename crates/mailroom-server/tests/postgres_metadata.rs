//! Message metadata and idempotent publish on the PostgreSQL backend, across two brokers
//! sharing one database: a key, headers and the publish time come back on every
//! delivery (JSON, raw and batch polls) and dead letter, whichever broker published; a
//! repeated idempotency key inside the window answers the first offset as a duplicate
//! and stores nothing, on either broker, through the raw publish, the batch and the
//! publish stream; two brokers racing one key store one copy; past the window (by count
//! or by time) a key is stored again.

mod postgres_support;

use std::sync::Arc;

use axum::http::Method;
use bytes::Bytes;
use mailroom::topic::Metadata;
use mailroom_server::backend::postgres::PgOptions;
use mailroom_server::backend::Backend;
use mailroom_store::{IdempotencyWindow, NewMessage};
use postgres_support::{
    broker, broker_with, cluster_url, database, fresh_database, ok, send, send_raw,
};
use serde_json::{json, Value};

/// How many messages topic `t` holds, as `app` reads it.
async fn end(app: &axum::Router) -> u64 {
    ok(app, Method::GET, "/v1/topics/t", "").await["end"]
        .as_u64()
        .unwrap()
}

/// The raw publish of `payload` with idempotency key `key`; answers status and body.
async fn publish_keyed(app: &axum::Router, key: &str, payload: &str) -> (u16, Value) {
    let (status, _, body) = send_raw(
        app,
        Method::POST,
        "/v1/topics/t/messages",
        &[("idempotency-key", key)],
        payload,
    )
    .await;
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

// Proves a key, headers and the publish time stored by broker A come back from broker B
// on a JSON poll, a raw poll, a batch poll and a dead-letter page, and that a message
// without metadata still carries its publish time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_comes_back_on_every_broker() {
    let Some(cluster) = cluster_url() else { return };
    let url = fresh_database(&cluster).await;
    let ((_, a), (_, b)) = (broker(&url).await, broker(&url).await);
    ok(&a, Method::PUT, "/v1/topics/t", "").await;
    for group in ["json", "raw", "dead"] {
        let body = r#"{"max_attempts":1,"max_in_flight":8}"#;
        ok(
            &a,
            Method::PUT,
            &format!("/v1/topics/t/groups/{group}"),
            body,
        )
        .await;
    }
    let (status, _, _) = send_raw(
        &a,
        Method::POST,
        "/v1/topics/t/messages",
        &[
            ("mailroom-key", "customer-7"),
            ("mailroom-header-trace", "abc"),
        ],
        "first",
    )
    .await;
    assert_eq!(status, 201);
    let batch = json!({"messages": [
        {"payload": "second", "key": "customer-8", "headers": {"origin": "batch"}},
        "plain",
    ]});
    ok(
        &a,
        Method::POST,
        "/v1/topics/t/messages/batch",
        &batch.to_string(),
    )
    .await;

    let first = ok(&b, Method::POST, "/v1/topics/t/groups/json/poll", "").await;
    assert_eq!(
        (&first["key"], &first["headers"]),
        (&json!("customer-7"), &json!({"trace": "abc"})),
        "{first}"
    );
    let published_at_ms = first["published_at_ms"].as_u64().expect("a publish time");
    let (status, headers, body) = send_raw(
        &b,
        Method::POST,
        "/v1/topics/t/groups/raw/poll/raw",
        &[],
        "",
    )
    .await;
    assert_eq!((status, body.as_ref()), (200, b"first".as_ref()));
    assert_eq!(headers["mailroom-key"], "customer-7");
    assert_eq!(headers["mailroom-header-trace"], "abc");
    assert_eq!(
        headers["mailroom-published-at-ms"].to_str().unwrap(),
        published_at_ms.to_string()
    );
    let polled = ok(
        &b,
        Method::POST,
        "/v1/topics/t/groups/dead/poll/batch",
        r#"{"max":8}"#,
    )
    .await;
    let deliveries = polled["deliveries"].as_array().expect("deliveries").clone();
    assert_eq!(deliveries.len(), 3, "{polled}");
    assert_eq!(
        (&deliveries[1]["key"], &deliveries[1]["headers"]),
        (&json!("customer-8"), &json!({"origin": "batch"}))
    );
    assert!(deliveries[2].get("key").is_none() && deliveries[2].get("headers").is_none());
    assert!(deliveries[2]["published_at_ms"].as_u64().unwrap() >= published_at_ms);
    let delivery = &deliveries[1];
    let nack = json!({"offset": delivery["offset"], "attempt": delivery["attempt"]});
    ok(
        &b,
        Method::POST,
        "/v1/topics/t/groups/dead/nack",
        &nack.to_string(),
    )
    .await;
    let page = ok(&a, Method::GET, "/v1/topics/t/groups/dead/dead-letters", "").await;
    let letter = &page["dead_letters"][0];
    assert_eq!(
        (&letter["offset"], &letter["key"], &letter["headers"]),
        (&json!(1), &json!("customer-8"), &json!({"origin": "batch"})),
        "{page}"
    );
    assert_eq!(letter["published_at_ms"], deliveries[1]["published_at_ms"]);
}

// Proves a repeated idempotency key answers the first offset as a duplicate and stores
// nothing, whichever broker the repeat lands on, in a raw publish, a batch (a key
// repeated inside it stored once) and a publish stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeats_on_either_broker_store_nothing() {
    let Some(cluster) = cluster_url() else { return };
    let url = fresh_database(&cluster).await;
    let ((_, a), (backend_b, b)) = (broker(&url).await, broker(&url).await);
    ok(&a, Method::PUT, "/v1/topics/t", "").await;
    assert_eq!(
        publish_keyed(&a, "k1", "pay").await,
        (201, json!({"offset": 0}))
    );
    assert_eq!(
        publish_keyed(&b, "k1", "pay").await,
        (201, json!({"offset": 0, "duplicate": true}))
    );
    let batch = json!({"messages": [
        "plain",
        {"payload": "again", "idempotency_key": "k1"},
        {"payload": "new", "idempotency_key": "k2"},
        {"payload": "new again", "idempotency_key": "k2"},
    ]});
    let answer = ok(
        &b,
        Method::POST,
        "/v1/topics/t/messages/batch",
        &batch.to_string(),
    )
    .await;
    assert_eq!(
        answer,
        json!({"offsets": [1, 0, 2, 2], "duplicates": [1, 3]})
    );
    assert_eq!(end(&a).await, 3);
    let publisher = backend_b.publisher("t").unwrap();
    let keyed = |key: &str| NewMessage {
        payload: Bytes::from("streamed"),
        metadata: Metadata::new().with_idempotency_key(key),
    };
    let answers = publisher
        .publish_once(&[keyed("k2"), keyed("k3")])
        .unwrap()
        .await
        .unwrap();
    let answers: Vec<(u64, bool)> = answers.iter().map(|a| (a.offset, a.duplicate)).collect();
    assert_eq!(answers, [(2, true), (3, false)]);
    assert_eq!(end(&a).await, 4);
}

// Proves two brokers racing many publishes of one key store exactly one copy, and every
// publish answers its offset.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_brokers_store_one_copy() {
    let Some(cluster) = cluster_url() else { return };
    let url = fresh_database(&cluster).await;
    let ((backend_a, a), (backend_b, _)) = (broker(&url).await, broker(&url).await);
    ok(&a, Method::PUT, "/v1/topics/t", "").await;
    let backends: [Arc<dyn Backend>; 2] = [backend_a, backend_b];
    for round in 0..5 {
        let key = format!("race-{round}");
        let mut racers = Vec::new();
        for n in 0..8 {
            let backend = Arc::clone(&backends[n % 2]);
            let message = NewMessage {
                payload: Bytes::from(format!("{round}/{n}")),
                metadata: Metadata::new().with_idempotency_key(key.clone()),
            };
            racers.push(tokio::spawn(async move {
                backend.publish_once("t", &[message]).await.unwrap()[0]
            }));
        }
        let mut answers = Vec::new();
        for racer in racers {
            answers.push(racer.await.unwrap());
        }
        let stored: Vec<_> = answers.iter().filter(|a| !a.duplicate).collect();
        assert_eq!(stored.len(), 1, "round {round}: {answers:?}");
        assert!(
            answers.iter().all(|a| a.offset == stored[0].offset),
            "{answers:?}"
        );
        assert_eq!(end(&a).await, round + 1);
    }
}

// Proves the window's two limits: a key whose first publish is no longer among the last
// `messages_max` messages, or older than `age_ms_max` by the database's clock, is stored
// again, and later repeats answer the new copy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_past_the_window_are_stored_again() {
    let Some(cluster) = cluster_url() else { return };
    let url = fresh_database(&cluster).await;
    let options = PgOptions {
        idempotency: IdempotencyWindow {
            messages_max: 3,
            age_ms_max: 60_000,
        },
        ..PgOptions::default()
    };
    let ((_, a), (_, b)) = (
        broker_with(&url, options).await,
        broker_with(&url, options).await,
    );
    ok(&a, Method::PUT, "/v1/topics/t", "").await;
    assert_eq!(publish_keyed(&a, "k", "m").await.1, json!({"offset": 0}));
    for _ in 0..2 {
        ok(&b, Method::POST, "/v1/topics/t/messages", "filler").await;
    }
    // Offset 0 is among the last 3 of 3 messages: still a duplicate.
    assert_eq!(publish_keyed(&b, "k", "m").await.1["duplicate"], true);
    ok(&b, Method::POST, "/v1/topics/t/messages", "filler").await;
    // Offset 0 is not among the last 3 of 4: stored again, at 4.
    assert_eq!(publish_keyed(&b, "k", "m").await.1, json!({"offset": 4}));
    assert_eq!(
        publish_keyed(&a, "k", "m").await.1,
        json!({"offset": 4, "duplicate": true})
    );
    // By time: the key's publish made older than the window in the database.
    database(&url)
        .await
        .execute(
            "UPDATE mailroom_idempotency_keys SET at_ms = at_ms - 60001",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(publish_keyed(&a, "k", "m").await.1, json!({"offset": 5}));
    let (status, body) = send(&a, Method::GET, "/v1/topics/t", "").await;
    assert_eq!((status, body["end"].clone()), (200, json!(6)));
}
