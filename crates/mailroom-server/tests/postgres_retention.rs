//! Retention on the PostgreSQL backend, across two brokers sharing one database: a topic's
//! own limits (by count, by age, by payload bytes) move its start, never past a message
//! a group has not finished unless the topic says so (then the group moves up and its
//! delivery of a removed message is dropped); passes on two brokers at once remove each
//! message once; segments wholly below the start are dropped as tables.

mod postgres_support;

use axum::http::Method;
use mailroom_server::backend::postgres::SEGMENT_OFFSETS;
use mailroom_server::backend::Backend;
use postgres_support::{broker, cluster_url, database, fresh_database, ok, send};
use serde_json::{json, Value};

async fn topic(app: &axum::Router) -> Value {
    ok(app, Method::GET, "/v1/topics/t", "").await
}

/// Publishes `count` messages of `payload` to `t` in one batch.
async fn publish(app: &axum::Router, count: usize, payload: &str) {
    let messages: Vec<&str> = vec![payload; count];
    let body = json!({ "messages": messages }).to_string();
    ok(app, Method::POST, "/v1/topics/t/messages/batch", &body).await;
}

// Proves a count limit set on broker A is enforced by broker B's pass, only down to the
// lowest message a group has not finished; that with keep_unconsumed turned off the next
// pass moves the group up, drops its delivery of a removed message, and the group goes on
// from the new start on either broker; and that the view counts what went.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_move_the_start_and_the_groups_left_behind() {
    let Some(cluster) = cluster_url() else { return };
    let url = fresh_database(&cluster).await;
    let ((backend_a, a), (backend_b, b)) = (broker(&url).await, broker(&url).await);
    let created = json!({"retention": {"max_messages": 3}}).to_string();
    ok(&a, Method::PUT, "/v1/topics/t", &created).await;
    assert_eq!(topic(&b).await["retention"]["max_messages"], 3);
    ok(
        &a,
        Method::PUT,
        "/v1/topics/t/groups/g",
        r#"{"max_attempts":3}"#,
    )
    .await;
    publish(&a, 10, "abcd").await;
    for offset in 0..2 {
        let delivery = ok(&b, Method::POST, "/v1/topics/t/groups/g/poll", "").await;
        assert_eq!(delivery["offset"], offset);
        let id = json!({"offset": offset, "attempt": 1}).to_string();
        ok(&a, Method::POST, "/v1/topics/t/groups/g/ack", &id).await;
    }
    let pass = backend_b.enforce_retention().await.unwrap();
    assert_eq!(pass.removed.len(), 1, "{pass:?}");
    assert_eq!(pass.removed[0].1.messages, 2);
    let view = topic(&a).await;
    assert_eq!(
        (view["start"].clone(), view["end"].clone()),
        (json!(2), json!(10))
    );
    assert_eq!(
        (view["bytes"].clone(), view["removed"]["messages"].clone()),
        (json!(32), json!(2))
    );

    let delivery = ok(&a, Method::POST, "/v1/topics/t/groups/g/poll", "").await;
    assert_eq!(delivery["offset"], 2);
    let keep_nothing = json!({"retention": {"keep_unconsumed": false}}).to_string();
    let changed = ok(&b, Method::PATCH, "/v1/topics/t", &keep_nothing).await;
    assert_eq!(changed["retention"]["keep_unconsumed"], false);
    backend_a.enforce_retention().await.unwrap();
    let view = topic(&b).await;
    assert_eq!(
        (view["start"].clone(), view["removed"]["messages"].clone()),
        (json!(7), json!(7))
    );
    assert_eq!(view["bytes"], 12);
    let id = json!({"offset": 2, "attempt": 1}).to_string();
    let (status, _) = send(&b, Method::POST, "/v1/topics/t/groups/g/ack", &id).await;
    assert_eq!(status, 409, "the delivery of a removed message was dropped");
    let next = ok(&b, Method::POST, "/v1/topics/t/groups/g/poll", "").await;
    assert_eq!(
        (next["offset"].clone(), next["attempt"].clone()),
        (json!(7), json!(1))
    );
    let again = ok(&a, Method::POST, "/v1/topics/t/groups/g/poll", "").await;
    assert_eq!(again, next, "broker A serves the moved group as B does");
}

// Proves the age and byte limits: messages published more than max_age_ms ago (by the
// database's clock) go, and the oldest go while the retained payload bytes exceed
// max_bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn age_and_bytes_limits_remove_the_oldest() {
    let Some(cluster) = cluster_url() else { return };
    let url = fresh_database(&cluster).await;
    let ((backend_a, a), (_, b)) = (broker(&url).await, broker(&url).await);
    let created = json!({"retention": {"max_age_ms": 60000}}).to_string();
    ok(&a, Method::PUT, "/v1/topics/t", &created).await;
    publish(&a, 5, "abcd").await;
    let client = database(&url).await;
    client
        .execute(
            "UPDATE mailroom_messages SET published_at_ms = published_at_ms - 60001 \
             WHERE \"offset\" < 2",
            &[],
        )
        .await
        .unwrap();
    backend_a.enforce_retention().await.unwrap();
    assert_eq!(topic(&b).await["start"], 2);
    let by_bytes = json!({"retention": {"max_bytes": 10}}).to_string();
    ok(&b, Method::PATCH, "/v1/topics/t", &by_bytes).await;
    backend_a.enforce_retention().await.unwrap();
    let view = topic(&b).await;
    // 3 messages of 4 bytes left were 12 > 10: one more goes, 8 bytes stay.
    assert_eq!(
        (view["start"].clone(), view["bytes"].clone()),
        (json!(3), json!(8))
    );
}

// Proves passes run by two brokers at the same time remove every message once: the
// counts of both passes add up to what left, round after round.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn passes_on_two_brokers_at_once_remove_each_message_once() {
    let Some(cluster) = cluster_url() else { return };
    let url = fresh_database(&cluster).await;
    let ((backend_a, a), (backend_b, _)) = (broker(&url).await, broker(&url).await);
    let created = json!({"retention": {"max_messages": 5}}).to_string();
    ok(&a, Method::PUT, "/v1/topics/t", &created).await;
    let mut removed = 0;
    for round in 1..=5u64 {
        publish(&a, 20, "m").await;
        let (pass_a, pass_b) =
            tokio::join!(backend_a.enforce_retention(), backend_b.enforce_retention());
        for pass in [pass_a.unwrap(), pass_b.unwrap()] {
            assert!(pass.failed.is_empty(), "{pass:?}");
            removed += pass.removed.iter().map(|(_, r)| r.messages).sum::<u64>();
        }
        let view = topic(&a).await;
        assert_eq!(view["start"], round * 20 - 5);
        assert_eq!(removed, round * 20 - 5, "round {round}");
        assert_eq!(view["removed"]["messages"], removed);
    }
}

// Proves a segment wholly below the start is dropped as a table and the segment holding
// the start loses only its rows below it, and a group created at the earliest offset
// starts there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn segments_below_the_start_are_dropped_whole() {
    let Some(cluster) = cluster_url() else { return };
    let url = fresh_database(&cluster).await;
    let ((backend_a, a), (_, b)) = (broker(&url).await, broker(&url).await);
    let created = json!({"retention": {"max_messages": 2}}).to_string();
    ok(&a, Method::PUT, "/v1/topics/t", &created).await;
    let client = database(&url).await;
    // A topic with a long history: its log ends two offsets before the second segment.
    let near = (SEGMENT_OFFSETS - 2) as i64;
    client
        .execute(
            "UPDATE mailroom_topics SET next_offset = $1, start_offset = $1",
            &[&near],
        )
        .await
        .unwrap();
    publish(&b, 5, "m").await;
    let segments = "SELECT count(*) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
                    WHERE c.relkind = 'r' AND c.relname LIKE 'mailroom_messages_%'";
    let count = |sql: &'static str| {
        let client = &client;
        async move { client.query_one(sql, &[]).await.unwrap().get::<_, i64>(0) }
    };
    assert_eq!(count(segments).await, 2);
    let pass = backend_a.enforce_retention().await.unwrap();
    assert_eq!(pass.removed[0].1.segments, 1, "{pass:?}");
    assert_eq!(
        count(segments).await,
        1,
        "the first segment's table is gone"
    );
    assert_eq!(count("SELECT count(*) FROM mailroom_messages").await, 2);
    let view = topic(&b).await;
    let start = SEGMENT_OFFSETS + 1;
    assert_eq!(
        (view["start"].clone(), view["removed"]["segments"].clone()),
        (json!(start), json!(1))
    );
    ok(
        &b,
        Method::PUT,
        "/v1/topics/t/groups/g",
        r#"{"max_attempts":3}"#,
    )
    .await;
    let delivery = ok(&a, Method::POST, "/v1/topics/t/groups/g/poll", "").await;
    assert_eq!(delivery["offset"], start);
}

// A publish is one statement while the topic's segments hold its offsets, and a
// transaction that makes the next segment first when they do not. Proves publishes that
// reach past a segment's end, one message or a batch straddling it, are each stored once,
// at consecutive offsets, with the segment made once.
#[tokio::test]
async fn publishes_past_a_segments_end_are_stored_once() {
    let Some(cluster) = cluster_url() else { return };
    let url = fresh_database(&cluster).await;
    let (_, a) = broker(&url).await;
    ok(&a, Method::PUT, "/v1/topics/t", "").await;
    publish(&a, 1, "first").await;
    let client = database(&url).await;
    // The first segment exists; the log now ends two offsets before its end.
    let near = (SEGMENT_OFFSETS - 2) as i64;
    client
        .execute("UPDATE mailroom_topics SET next_offset = $1", &[&near])
        .await
        .unwrap();
    for n in 0..2 {
        ok(
            &a,
            Method::POST,
            "/v1/topics/t/messages",
            &format!("single{n}"),
        )
        .await;
    }
    publish(&a, 3, "batch").await;
    ok(&a, Method::POST, "/v1/topics/t/messages", "after").await;
    let rows = client
        .query(
            "SELECT \"offset\", convert_from(payload, 'UTF8') FROM mailroom_messages \
             ORDER BY \"offset\"",
            &[],
        )
        .await
        .unwrap();
    let found: Vec<(i64, String)> = rows.iter().map(|row| (row.get(0), row.get(1))).collect();
    let expected: Vec<(i64, String)> = [(0, "first"), (near, "single0"), (near + 1, "single1")]
        .into_iter()
        .chain((0..3).map(|n| (near + 2 + n, "batch")))
        .chain([(near + 5, "after")])
        .map(|(offset, payload)| (offset, payload.to_owned()))
        .collect();
    assert_eq!(found, expected);
    let segments = client
        .query_one(
            "SELECT count(*) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
             WHERE c.relkind = 'r' AND c.relname LIKE 'mailroom_messages_%'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(segments.get::<_, i64>(0), 2);
    let view = ok(&a, Method::GET, "/v1/topics/t", "").await;
    assert_eq!(view["end"], near + 6, "{view}");
}
