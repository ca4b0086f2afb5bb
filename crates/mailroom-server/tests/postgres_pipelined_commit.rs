//! The PostgreSQL backend sends a group call's `COMMIT` in the same pipeline as its
//! writes and its payload read; a statement that fails there must leave nothing
//! committed (PostgreSQL turns the `COMMIT` of an aborted transaction into a rollback)
//! and fail the call. A message missing from the log (the database holding what no
//! broker wrote) is such a failure, raised in the SQL: these tests take a message row
//! away behind the broker's back and put it back.

mod postgres_support;

use axum::http::Method;
use postgres_support::{broker, cluster_url, database, fresh_database, ok, send};
use serde_json::json;
use tokio_postgres::Client;

const GROUP: &str = "/v1/topics/t/groups/g";

/// The group's row version and its dead-letter rows.
async fn committed(db: &Client) -> (i64, i64) {
    let row = db
        .query_one(
            "SELECT (SELECT version FROM mailroom_groups WHERE name = 'g'), \
             (SELECT count(*) FROM mailroom_dead_letters)",
            &[],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

/// Moves every message row aside (into `kept`), or back.
async fn hide_messages(db: &Client, hide: bool) {
    let statements = if hide {
        "CREATE TABLE kept AS SELECT * FROM mailroom_messages; DELETE FROM mailroom_messages"
    } else {
        "INSERT INTO mailroom_messages SELECT * FROM kept; DROP TABLE kept"
    };
    db.batch_execute(statements).await.unwrap();
}

// Proves a poll that would hand out a message missing from the log fails (500) and
// commits nothing: the group's version is unchanged, and once the row is back the
// message is delivered as attempt 1, not 2.
#[tokio::test]
async fn a_poll_of_a_missing_message_fails_and_commits_nothing() {
    let Some(cluster) = cluster_url() else { return };
    let url = fresh_database(&cluster).await;
    let (_, app) = broker(&url).await;
    ok(&app, Method::PUT, "/v1/topics/t", "").await;
    ok(&app, Method::PUT, GROUP, r#"{"max_attempts":3}"#).await;
    ok(&app, Method::POST, "/v1/topics/t/messages", "m").await;
    let db = database(&url).await;
    let before = committed(&db).await;
    hide_messages(&db, true).await;
    for (uri, request) in [("poll", ""), ("poll/batch", r#"{"max":4}"#)] {
        let uri = format!("{GROUP}/{uri}");
        let (status, body) = send(&app, Method::POST, &uri, request).await;
        assert_eq!(status, 500, "{uri}: {body}");
        assert_eq!(committed(&db).await, before, "{uri} committed");
    }
    hide_messages(&db, false).await;
    let delivery = ok(&app, Method::POST, &format!("{GROUP}/poll"), "").await;
    assert_eq!(
        (delivery["offset"].clone(), delivery["attempt"].clone()),
        (json!(0), json!(1))
    );
}

// Proves a final nack whose message is missing from the log fails (500) before its
// dead letter or the group's new state commits; with the row back, the same nack
// dead-letters the message once.
#[tokio::test]
async fn a_dead_letter_of_a_missing_message_fails_and_commits_nothing() {
    let Some(cluster) = cluster_url() else { return };
    let url = fresh_database(&cluster).await;
    let (_, app) = broker(&url).await;
    ok(&app, Method::PUT, "/v1/topics/t", "").await;
    ok(&app, Method::PUT, GROUP, r#"{"max_attempts":1}"#).await;
    ok(&app, Method::POST, "/v1/topics/t/messages", "m").await;
    let delivery = ok(&app, Method::POST, &format!("{GROUP}/poll"), "").await;
    let reject = json!({"offset": delivery["offset"], "attempt": 1, "kind": "reject"});
    let db = database(&url).await;
    let before = committed(&db).await;
    hide_messages(&db, true).await;
    let (status, body) = send(
        &app,
        Method::POST,
        &format!("{GROUP}/nack"),
        &reject.to_string(),
    )
    .await;
    assert_eq!(status, 500, "{body}");
    assert_eq!(committed(&db).await, before, "the failed nack committed");
    hide_messages(&db, false).await;
    let nacked = ok(
        &app,
        Method::POST,
        &format!("{GROUP}/nack"),
        &reject.to_string(),
    )
    .await;
    assert_eq!(nacked["outcome"], "dead_lettered");
    assert_eq!(committed(&db).await, (before.0 + 1, 1));
}

// Proves a call dropped mid-transaction (its client went away while it waited for the
// group's row lock) leaves no transaction open on a pooled connection: once the lock's
// holder lets go, no broker session sits idle in a transaction (holding the row, as
// one returned to the pool with its BEGIN would until PostgreSQL's 10 s timeout), and
// the next poll delivers attempt 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_dropped_mid_transaction_leaves_no_transaction_open() {
    let Some(cluster) = cluster_url() else { return };
    let url = fresh_database(&cluster).await;
    let (_, app) = broker(&url).await;
    ok(&app, Method::PUT, "/v1/topics/t", "").await;
    ok(&app, Method::PUT, GROUP, r#"{"max_attempts":3}"#).await;
    ok(&app, Method::POST, "/v1/topics/t/messages", "m").await;
    let mut holder = database(&url).await;
    let holding = holder.transaction().await.unwrap();
    holding
        .execute(
            "SELECT 1 FROM mailroom_groups WHERE name = 'g' FOR UPDATE",
            &[],
        )
        .await
        .unwrap();
    let uri = format!("{GROUP}/poll");
    let poll = send(&app, Method::POST, &uri, "");
    let waited = tokio::time::timeout(std::time::Duration::from_millis(300), poll).await;
    assert!(waited.is_err(), "the poll did not wait for the row lock");
    holding.rollback().await.unwrap();
    let db = database(&url).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let open: i64 = db
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'mailroom' \
                 AND state LIKE 'idle in transaction%'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if open == 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "a broker session stayed in a transaction"
        );
        tokio::task::yield_now().await;
    }
    let delivery = ok(&app, Method::POST, &format!("{GROUP}/poll"), "").await;
    assert_eq!(delivery["attempt"], 1, "{delivery}");
}
