//! Broker faults over the PostgreSQL store, against real `mailroom serve` processes: a
//! broker killed with SIGKILL mid-load while the other keeps serving loses nothing
//! confirmed and never hands one (offset, attempt) to two consumers; a broker frozen
//! with SIGSTOP inside a transaction past `idle_in_transaction_session_timeout` answers
//! an error once resumed, and the other broker's state stands.
//!
//! The database comes from `MAILROOM_TEST_POSTGRES` (`scripts/postgres.sh start DIR`);
//! without it the tests fail under `CI=true` and elsewhere say they were not run.

mod common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::group_load::{consume, fixed, Rules, Seen, ACK_ALL};
use common::{fresh_postgres_database, two_brokers};
use mailroom_client::{GroupOptions, StartPosition};
use serde_json::Value;

// Proves a broker killed with SIGKILL mid-load changes nothing confirmed: publishers and
// consumers run on both brokers, broker A is killed while they do, and through broker B
// every confirmed message is acked, no (offset, attempt) went to two consumers, and the
// group ends exactly at the log's end with no dead letters.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_broker_killed_mid_load_loses_nothing_confirmed() {
    let Some(url) = fresh_postgres_database().await else {
        return;
    };
    let (a, b, _dirs) = two_brokers(&url);
    let (client_a, client_b) = (a.client(), b.client());
    client_a.create_topic("t").await.unwrap();
    let mut options = GroupOptions::new(100);
    options.lease_ms = Some(1_000);
    options.max_in_flight = Some(32);
    options.start = StartPosition::Earliest;
    client_b
        .create_group_with("t", "g", &options)
        .await
        .unwrap();

    let confirmed: Arc<Mutex<BTreeSet<u64>>> = Arc::default();
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let mut publishers = Vec::new();
    for (name, client) in [("a", client_a.clone()), ("b", client_b.clone())] {
        let confirmed = Arc::clone(&confirmed);
        publishers.push(tokio::spawn(async move {
            for n in 0..150 {
                match client.publish("t", format!("{name}-{n}")).await {
                    Ok(offset) => {
                        confirmed.lock().unwrap().insert(offset);
                    }
                    Err(_) if name == "a" => return,
                    Err(error) => panic!("the surviving broker refused a publish: {error}"),
                }
            }
        }));
    }
    let mut consumers = Vec::new();
    for (consumer, client, gives_up) in [
        ("a1", &client_a, true),
        ("b1", &client_b, false),
        ("b2", &client_b, false),
    ] {
        let rules = Rules {
            gives_up,
            ..ACK_ALL
        };
        let task = consume(
            fixed(client),
            consumer.to_owned(),
            Arc::clone(&seen),
            Arc::clone(&stop),
            rules,
        );
        consumers.push(tokio::spawn(task));
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while confirmed.lock().unwrap().len() < 60 || seen.lock().unwrap().acked.len() < 20 {
        assert!(Instant::now() < deadline, "the load did not get going");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::task::spawn_blocking(move || a.kill()).await.unwrap();
    for publisher in publishers {
        publisher.await.unwrap();
    }
    let end = client_b.topic_info("t").await.unwrap().end;
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    let group = loop {
        let group: Value = http
            .get(b.at("/v1/topics/t/groups/g"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if group["position"].as_u64() == Some(end) {
            break group;
        }
        assert!(
            Instant::now() < deadline,
            "the group never finished: {group}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    stop.store(true, Ordering::SeqCst);
    for consumer in consumers {
        consumer.await.unwrap();
    }
    let seen = seen.lock().unwrap();
    seen.assert_exact("one kill");
    let delivered = seen.delivered();
    let confirmed = confirmed.lock().unwrap();
    assert!(
        confirmed.is_subset(&delivered),
        "a confirmed message was never delivered"
    );
    // Every message was acked with a confirmed answer, except those whose last holder was
    // on the killed broker: its ack may have committed with the answer lost.
    let on_a: BTreeSet<u64> = seen
        .handed
        .iter()
        .filter(|(_, consumer)| consumer.as_str() == "a1")
        .map(|(&(offset, _), _)| offset)
        .collect();
    let unconfirmed: Vec<u64> = (0..end)
        .filter(|offset| !seen.acked.contains(offset) && !on_a.contains(offset))
        .collect();
    assert!(
        unconfirmed.is_empty(),
        "finished without an ack: {unconfirmed:?}"
    );
    assert_eq!(group["dead_letters"], 0, "{group}");
}

/// Sends SIGSTOP or SIGCONT to `pid`.
fn signal(pid: u32, name: &str) {
    let status = std::process::Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{name} {pid}");
}

// Proves a broker frozen inside a transaction never makes a delivery twice: broker A's
// poll (consumer `a`) waits on the group's row lock (held by a test session), A is
// frozen with SIGSTOP, the lock is released, and broker B polls (consumer `b`). Either
// A's transaction had more to send, idles past idle_in_transaction_session_timeout and
// PostgreSQL ends it, so B delivers attempt 1 and A resumed answers an error or nothing;
// or the transaction completes without A (its statements were all sent before the
// stop; 7 runs in 120 beside three CPU hogs), and B finds nothing. Never both: exactly
// one of them delivers (0, 1), and that one is the delivery in flight. The consumers
// differ so that a repeated poll cannot pass for a second delivery.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_frozen_broker_loses_its_transaction() {
    let Some(url) = fresh_postgres_database().await else {
        return;
    };
    // Every broker session ends an idle transaction after 500 ms.
    let short = format!("{url}?options=-c%20idle_in_transaction_session_timeout%3D500");
    let (a, b, _dirs) = two_brokers(&short);
    let client_b = b.client();
    client_b.create_topic("t").await.unwrap();
    client_b
        .create_group("t", "g", 3, StartPosition::Earliest)
        .await
        .unwrap();
    client_b.publish("t", "m").await.unwrap();
    let (mut holder, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let held = holder.transaction().await.unwrap();
    held.execute(
        "SELECT 1 FROM mailroom_groups WHERE name = 'g' FOR UPDATE",
        &[],
    )
    .await
    .unwrap();
    let http = reqwest::Client::new();
    let frozen_poll = tokio::spawn(
        http.post(a.at("/v1/topics/t/groups/g/poll?consumer=a"))
            .send(),
    );
    let (watcher, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let waiting: i64 = watcher
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'mailroom' \
                 AND datname = current_database() AND wait_event_type = 'Lock'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if waiting == 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "broker A's poll never waited on the lock"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    signal(a.pid(), "STOP");
    held.commit().await.unwrap();
    // B's poll waits for the row lock until A's transaction ends, one way or the other.
    let (b_status, b_body) = answer_of(
        http.post(b.at("/v1/topics/t/groups/g/poll?consumer=b"))
            .send()
            .await,
    )
    .await;
    signal(a.pid(), "CONT");
    let (a_status, a_body) = answer_of(frozen_poll.await.unwrap()).await;
    let delivered = |status: u16, body: &str| {
        status == 200
            && serde_json::from_str::<Value>(body)
                .is_ok_and(|v| v["offset"] == 0 && v["attempt"] == 1)
    };
    let by_a = delivered(a_status, &a_body);
    let by_b = delivered(b_status, &b_body);
    let outcome = format!("A answered {a_status} {a_body}; B answered {b_status} {b_body}");
    // Which of the two ways it went, for a reader of `--nocapture`.
    eprintln!("{outcome}");
    assert!(by_a != by_b, "exactly one delivery of (0, 1): {outcome}");
    let other = if by_a { b_status } else { a_status };
    assert!(other == 204 || (500..600).contains(&other), "{outcome}");
    let group: Value = http
        .get(a.at("/v1/topics/t/groups/g"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        group["in_flight"],
        serde_json::json!({"offset": 0, "attempt": 1}),
        "{group}"
    );
    let ack = http
        .post(b.at("/v1/topics/t/groups/g/ack"))
        .json(&serde_json::json!({"offset": 0, "attempt": 1}))
        .send()
        .await
        .unwrap();
    assert!(ack.status().is_success(), "{outcome}: ack {}", ack.status());
}

/// The status and body text of a request's answer.
async fn answer_of(sent: reqwest::Result<reqwest::Response>) -> (u16, String) {
    let response = sent.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}
