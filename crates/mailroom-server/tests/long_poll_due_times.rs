//! Long polls wake exactly when a retry delay ends or a lease runs out, with no call to
//! signal it, and an idle long poll does not poll while it waits.
//!
//! Every test runs on a paused tokio clock, and the store reads a clock that follows it,
//! so time moves only when every task waits, straight to the next timer: a waiter that
//! armed the right time answers at exactly that time, and one that polls on a period, or
//! sleeps past the event, answers at a different one.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use axum::Router;
use http_body_util::BodyExt as _;
use mailroom::clock::Clock;
use mailroom::group::GroupConfig;
use mailroom::topic::StartPosition;
use mailroom_server::app::router;
use mailroom_server::config::{Config, FsyncPolicy};
use mailroom_server::server::store_options;
use mailroom_server::state::AppState;
use mailroom_store::Store;
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tower::ServiceExt as _;

/// The store's clock at the test's start, in ms.
const EPOCH_MS: u64 = 1_000_000;

/// A store clock that follows tokio's (paused) clock.
#[derive(Debug)]
struct TokioClock {
    origin: Instant,
}

impl Clock for TokioClock {
    fn now_ms(&self) -> u64 {
        EPOCH_MS + self.origin.elapsed().as_millis() as u64
    }
}

/// A server over a fresh store on tokio's clock, with topic `t` and group `g` set up by
/// `config`, and the store behind it; keep the directory alive for the test's length.
fn app(config: GroupConfig) -> (tempfile::TempDir, AppState, Router, Store) {
    let dir = tempfile::tempdir().unwrap();
    let server_config = Config {
        fsync: FsyncPolicy::Never,
        ..Config::default()
    };
    let mut options = store_options(&server_config);
    options.clock = Arc::new(TokioClock {
        origin: Instant::now(),
    });
    let store = mailroom_store::Store::open(dir.path(), options).unwrap();
    store.create_topic("t").unwrap();
    let topic = store.topic("t").unwrap();
    topic
        .create_group_with("g", StartPosition::Earliest, config)
        .unwrap();
    let state = AppState::new(store.clone(), server_config);
    let app = router(state.clone());
    (dir, state, app, store)
}

async fn call(app: &Router, path: &str, body: &str) -> Value {
    let request = Request::post(path)
        .body(Body::from(body.to_owned()))
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    assert!(
        response.status().is_success(),
        "{path}: {}",
        response.status()
    );
    let body = response.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&body).unwrap_or(Value::Null)
}

/// Starts a long poll of `g` by `consumer` and returns once it waits.
async fn start_long_poll(
    state: &AppState,
    app: &Router,
    consumer: &str,
    wait_ms: u64,
) -> JoinHandle<Value> {
    let body = format!(r#"{{"max":4,"consumer":"{consumer}","wait_ms":{wait_ms}}}"#);
    let app = app.clone();
    let waiter =
        tokio::spawn(async move { call(&app, "/v1/topics/t/groups/g/poll/batch", &body).await });
    while state.long_polls.waiting() == 0 {
        tokio::task::yield_now().await;
    }
    waiter
}

/// The (offset, attempt) of each delivery in a `poll/batch` answer.
fn delivered(answer: &Value) -> Vec<(u64, u64)> {
    answer["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["offset"].as_u64().unwrap(),
                d["attempt"].as_u64().unwrap(),
            )
        })
        .collect()
}

// Proves a waiting long poll gets a message whose retry delay ends while it waits at the
// delay's very end (1,100 ms: a 250 ms re-check would answer at 1,250), having polled
// once more, at that time.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn long_poll_answers_when_a_retry_delay_ends() {
    let (_dir, state, app, _store) = app(GroupConfig::new(3));
    call(&app, "/v1/topics/t/messages", "m").await;
    let first = call(&app, "/v1/topics/t/groups/g/poll/batch", r#"{"max":1}"#).await;
    assert_eq!(delivered(&first), [(0, 1)]);
    let nack = r#"{"offset":0,"attempt":1,"delay_ms":1100}"#;
    call(&app, "/v1/topics/t/groups/g/nack", nack).await;

    let started = Instant::now();
    let waiter = start_long_poll(&state, &app, "w", 30_000).await;
    let answer = waiter.await.unwrap();
    assert_eq!(delivered(&answer), [(0, 2)]);
    assert_eq!(started.elapsed(), Duration::from_millis(1_100));
    assert_eq!(state.long_polls.repolls(), 1);
}

// Proves a waiting long poll gets a delivery whose lease was made by another consumer
// AFTER it started waiting, at the moment that lease runs out: the other poll's lease
// wakes it (without that it would sleep to its 3 s deadline), it re-arms for the
// deadline, and answers at exactly 200 + 1,100 ms.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn long_poll_answers_when_a_lease_made_after_it_runs_out() {
    let config = GroupConfig::new(3)
        .with_lease_ms(1_100)
        .with_max_in_flight(1);
    let (_dir, state, app, store) = app(config);
    let started = Instant::now();
    let waiter = start_long_poll(&state, &app, "w", 3_000).await;
    // Published straight into the store, so no wake-up reaches the waiter: the message
    // stands for one it has not seen, which "b" then polls.
    let topic = store.topic("t").unwrap();
    topic.publish(bytes::Bytes::from_static(b"m")).unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let polled = r#"{"max":1,"consumer":"b"}"#;
    let by_b = call(&app, "/v1/topics/t/groups/g/poll/batch", polled).await;
    assert_eq!(delivered(&by_b), [(0, 1)]);

    let answer = waiter.await.unwrap();
    assert_eq!(delivered(&answer), [(0, 2)]);
    assert_eq!(started.elapsed(), Duration::from_millis(1_300));
    assert_eq!(
        state.long_polls.repolls(),
        2,
        "woken by the lease, then at its end"
    );
}

// Proves a touch (which only moves a lease later) needs no wake-up: the waiter wakes at
// the old deadline, finds the lease extended, re-arms, and answers at the new deadline.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn long_poll_follows_a_touched_lease() {
    let config = GroupConfig::new(3)
        .with_lease_ms(1_100)
        .with_max_in_flight(1);
    let (_dir, state, app, _store) = app(config);
    call(&app, "/v1/topics/t/messages", "m").await;
    let polled = r#"{"max":1,"consumer":"b"}"#;
    let by_b = call(&app, "/v1/topics/t/groups/g/poll/batch", polled).await;
    assert_eq!(delivered(&by_b), [(0, 1)]);
    let started = Instant::now();
    let waiter = start_long_poll(&state, &app, "w", 10_000).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let touch = r#"{"offset":0,"attempt":1}"#;
    call(&app, "/v1/topics/t/groups/g/touch", touch).await;

    let answer = waiter.await.unwrap();
    assert_eq!(delivered(&answer), [(0, 2)]);
    assert_eq!(started.elapsed(), Duration::from_millis(1_600));
    assert_eq!(
        state.long_polls.repolls(),
        2,
        "at the old deadline, at the new one"
    );
}

// Proves an idle long poll (nothing published, nothing due) does not poll while it
// waits: one re-poll, at its deadline (a 250 ms re-check would make 16).
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn idle_long_poll_does_not_poll_until_its_deadline() {
    let (_dir, state, app, _store) = app(GroupConfig::new(3).with_lease_ms(1_000));
    let started = Instant::now();
    let waiter = start_long_poll(&state, &app, "w", 4_000).await;
    let answer = waiter.await.unwrap();
    assert!(delivered(&answer).is_empty());
    assert_eq!(started.elapsed(), Duration::from_millis(4_000));
    assert_eq!(state.long_polls.repolls(), 1);
}

/// Messages the stress test publishes.
const STRESS_MESSAGES: u64 = 40;
/// Consumers long-polling at once in the stress test.
const STRESS_CONSUMERS: usize = 6;
/// How long the stress test may take before it counts as hung.
const STRESS_SECONDS_MAX: u64 = 60;

// Proves, on real threads and the real clock, that long polls racing publishes, acks and
// expiring leases made by each other (some deliveries are dropped, to run out) get every
// message acked, and leave no waiter, arm or notifier behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_long_polls_and_leases_settle_and_clean_up() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        fsync: FsyncPolicy::Never,
        ..Config::default()
    };
    let store = mailroom_store::Store::open(dir.path(), store_options(&config)).unwrap();
    store.create_topic("t").unwrap();
    let group = GroupConfig::new(1_000)
        .with_lease_ms(20)
        .with_max_in_flight(4);
    let topic = store.topic("t").unwrap();
    topic
        .create_group_with("g", StartPosition::Earliest, group)
        .unwrap();
    let state = AppState::new(store, config);
    let app = router(state.clone());
    let acked = Arc::new(parking_lot::Mutex::new(std::collections::BTreeSet::new()));

    let consumers: Vec<_> = (0..STRESS_CONSUMERS)
        .map(|index| {
            let (app, acked) = (app.clone(), acked.clone());
            tokio::spawn(async move { consume(&app, &acked, index).await })
        })
        .collect();
    for offset in 0..STRESS_MESSAGES {
        call(&app, "/v1/topics/t/messages", &offset.to_string()).await;
        tokio::time::sleep(Duration::from_millis(offset % 3)).await;
    }
    let all = tokio::time::timeout(Duration::from_secs(STRESS_SECONDS_MAX), async {
        for consumer in consumers {
            consumer.await.unwrap();
        }
    });
    all.await.expect("every message acked in time");
    assert_eq!(acked.lock().len() as u64, STRESS_MESSAGES);
    assert_eq!(state.long_polls.waiting(), 0);
    assert_eq!(state.long_polls.topics(), 0);
}

/// Long-polls as consumer `index` until every message is acked, dropping every third
/// delivery (so its lease runs out and another consumer gets it).
async fn consume(
    app: &Router,
    acked: &parking_lot::Mutex<std::collections::BTreeSet<u64>>,
    index: usize,
) {
    let body = format!(r#"{{"max":2,"consumer":"c{index}","wait_ms":200}}"#);
    while (acked.lock().len() as u64) < STRESS_MESSAGES {
        let answer = call(app, "/v1/topics/t/groups/g/poll/batch", &body).await;
        for (offset, attempt) in delivered(&answer) {
            if (offset + attempt) % 3 == 0 {
                continue;
            }
            let ack = format!(r#"{{"offset":{offset},"attempt":{attempt}}}"#);
            let request = Request::post("/v1/topics/t/groups/g/ack")
                .body(Body::from(ack))
                .unwrap();
            let response = app.clone().oneshot(request).await.unwrap();
            // 409: the lease ran out first; another consumer will get it.
            if response.status().is_success() {
                acked.lock().insert(offset);
            } else {
                assert_eq!(response.status(), 409);
            }
        }
    }
}
