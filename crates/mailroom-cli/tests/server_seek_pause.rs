//! Seek, pause and resume over HTTP against the real binary, via the client and raw
//! requests: what each does to deliveries in flight and to attempt numbers, that a pause
//! holds polls (long polls too) until a resume or its time, that both survive a restart,
//! every bad input's 4xx, and the CLI's `group seek`, `group pause` and `group resume`.

mod cli_support;
mod common;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{temp_dir, ServerProcess};
use mailroom_client::{BatchPoll, Client, GroupOptions, NackKind, NackOptions, StartPosition};
use reqwest::Method;
use serde_json::Value;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

async fn setup(server: &ServerProcess, messages: usize) -> Client {
    let client = server.client();
    client.create_topic("t").await.unwrap();
    client
        .create_group("t", "g", 2, StartPosition::Earliest)
        .await
        .unwrap();
    for i in 0..messages {
        client.publish("t", format!("m{i}")).await.unwrap();
    }
    client
}

/// A long poll of up to `wait_ms` for one delivery.
async fn long_poll(client: &Client, wait_ms: u64) -> Option<(u64, u32)> {
    let request = BatchPoll {
        consumer: None,
        max: 1,
        wait_ms,
        ack: &[],
    };
    let batch = client.poll_batch("t", "g", &request).await.unwrap();
    batch.first().map(|d| (d.offset, d.attempt))
}

// Proves a seek back drops the delivery in flight (its ack is 409 not_owned), delivers
// the acked message again with a higher attempt, leaves dead letters where they are, and
// that seeks to "latest" and to an offset answer the new position.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seek_moves_the_group_and_fences_old_deliveries() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &[]);
    let client = setup(&server, 3).await;
    let first = client.poll("t", "g").await.unwrap().unwrap();
    let reject = NackOptions {
        kind: NackKind::Reject,
        ..NackOptions::default()
    };
    client
        .nack_with("t", "g", first.id(), &reject)
        .await
        .unwrap();
    let second = client.poll("t", "g").await.unwrap().unwrap();
    client.ack("t", "g", second.id()).await.unwrap();
    let third = client.poll("t", "g").await.unwrap().unwrap();
    assert_eq!((third.offset, third.attempt), (2, 1));

    assert_eq!(
        client
            .seek("t", "g", StartPosition::Earliest)
            .await
            .unwrap(),
        0
    );
    let stale = client.ack("t", "g", third.id()).await.unwrap_err();
    assert_eq!(
        (stale.status(), stale.code()),
        (Some(409), Some("not_owned"))
    );
    let again = client.poll("t", "g").await.unwrap().unwrap();
    assert_eq!((again.offset, again.attempt), (0, 2));
    assert_eq!(client.dead_letters("t", "g").await.unwrap().len(), 1);
    client.ack("t", "g", again.id()).await.unwrap();
    let again = client.poll("t", "g").await.unwrap().unwrap();
    assert_eq!((again.offset, again.attempt), (1, 2));

    assert_eq!(
        client.seek("t", "g", StartPosition::Latest).await.unwrap(),
        3
    );
    assert_eq!(client.poll("t", "g").await.unwrap(), None);
    assert_eq!(
        client
            .seek("t", "g", StartPosition::Offset(2))
            .await
            .unwrap(),
        2
    );
    let detail = client.group_detail("t", "g").await.unwrap();
    assert_eq!((detail.info.position, detail.info.lag), (2, 1));
    assert!(detail.deliveries.is_empty());
    // Offset 2 lies below the group's frontier (3): it comes back above the highest
    // attempt the group has handed out (2), whatever its own count was.
    let next = client.poll("t", "g").await.unwrap().unwrap();
    assert_eq!((next.offset, next.attempt), (2, 3));
}

// Proves a paused group hands out nothing (a long poll waits on), still takes the ack
// of a delivery in flight, shows paused in its view, and that a resume wakes the
// waiting long poll; a timed pause ends by itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_holds_polls_until_resume_or_its_time() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &[]);
    let client = setup(&server, 3).await;
    let mut options = GroupOptions::new(2);
    options.max_in_flight = Some(4);
    client.create_group_with("t", "w", &options).await.unwrap();
    let held = client.poll("t", "g").await.unwrap().unwrap();

    let paused = client.pause("t", "g", None).await.unwrap();
    assert!(paused.paused && paused.changed);
    assert_eq!(paused.paused_until_ms, None);
    let info = client.group_detail("t", "g").await.unwrap().info;
    assert!(info.paused);
    client.ack("t", "g", held.id()).await.unwrap();
    assert_eq!(client.poll("t", "g").await.unwrap(), None);
    // Another group of the topic is not paused.
    assert!(client.poll("t", "w").await.unwrap().is_some());

    let waiter = {
        let client = client.clone();
        tokio::spawn(async move { long_poll(&client, 20_000).await })
    };
    let started = Instant::now();
    let resumed = client.resume("t", "g").await.unwrap();
    assert!(!resumed.paused && resumed.changed);
    assert_eq!(waiter.await.unwrap(), Some((1, 1)));
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "the resume woke no one"
    );
    let woken = mailroom_client::DeliveryId {
        offset: 1,
        attempt: 1,
    };
    client.ack("t", "g", woken).await.unwrap();
    assert!(!client.resume("t", "g").await.unwrap().changed);

    let until_ms = now_ms() + 400;
    let paused = client.pause("t", "g", Some(until_ms)).await.unwrap();
    assert_eq!(paused.paused_until_ms, Some(until_ms));
    let info = client.group_detail("t", "g").await.unwrap().info;
    assert_eq!((info.paused, info.paused_until_ms), (true, Some(until_ms)));
    // The long poll waits out the pause, then gets the next message.
    assert_eq!(long_poll(&client, 20_000).await, Some((2, 1)));
    assert!(now_ms() >= until_ms);
    let info = client.group_detail("t", "g").await.unwrap().info;
    assert_eq!((info.paused, info.paused_until_ms), (false, None));
}

// Proves a seek and a pause are durable: after a kill -9 and a restart the group is
// still paused at the position it was moved to, and a pause until a time keeps its time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seek_and_pause_survive_a_restart() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "always"]);
    let client = setup(&server, 3).await;
    client
        .seek("t", "g", StartPosition::Offset(2))
        .await
        .unwrap();
    client.pause("t", "g", None).await.unwrap();
    tokio::task::spawn_blocking(move || server.kill())
        .await
        .unwrap();

    let server = ServerProcess::start(dir.path(), &["--fsync", "always"]);
    let client = server.client();
    let info = client.group_detail("t", "g").await.unwrap().info;
    assert_eq!((info.position, info.paused), (2, true));
    assert_eq!(client.poll("t", "g").await.unwrap(), None);
    client.resume("t", "g").await.unwrap();
    let next = client.poll("t", "g").await.unwrap().unwrap();
    assert_eq!((next.offset, next.attempt), (2, 1));

    // A pause until a time keeps its time across a kill -9 (with nothing in flight, so
    // a poll's answer is only what the pause allows).
    client.ack("t", "g", next.id()).await.unwrap();
    let until_ms = now_ms() + 3_600_000;
    client.pause("t", "g", Some(until_ms)).await.unwrap();
    tokio::task::spawn_blocking(move || server.kill())
        .await
        .unwrap();
    let server = ServerProcess::start(dir.path(), &["--fsync", "always"]);
    let client = server.client();
    let info = client.group_detail("t", "g").await.unwrap().info;
    assert_eq!((info.paused, info.paused_until_ms), (true, Some(until_ms)));
    assert_eq!(client.poll("t", "g").await.unwrap(), None);
}

// Proves every bad seek, pause and resume input is a 4xx with the JSON error shape
// naming what was wrong.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_seek_and_pause_input_is_refused() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &[]);
    let _client = setup(&server, 2).await;
    let http = reqwest::Client::new();
    let far = (now_ms() + 8 * 24 * 60 * 60 * 1000).to_string();
    let far = format!(r#"{{"until_ms": {far}}}"#);
    let cases: Vec<(&str, String, u16, &str, &str)> = vec![
        (
            "seek",
            r#"{"offset": 3}"#.into(),
            400,
            "invalid_argument",
            "offset",
        ),
        (
            "seek",
            r#"{}"#.into(),
            400,
            "invalid_argument",
            "exactly one",
        ),
        (
            "seek",
            r#"{"offset": 0, "to": "latest"}"#.into(),
            400,
            "invalid_argument",
            "exactly one",
        ),
        (
            "seek",
            // Seeking by time works (server_reads.rs); past the int64 range it is refused.
            r#"{"time_ms": 9223372036854775808}"#.into(),
            400,
            "invalid_argument",
            "time_ms",
        ),
        (
            "seek",
            r#"{"to": "middle"}"#.into(),
            400,
            "invalid_body",
            "to",
        ),
        (
            "seek",
            r#"{"offset": -1}"#.into(),
            400,
            "invalid_body",
            "offset",
        ),
        (
            "seek",
            r#"{"offset": 1, "extra": 1}"#.into(),
            400,
            "invalid_body",
            "extra",
        ),
        ("seek", "{".into(), 400, "malformed_json", ""),
        (
            "pause",
            r#"{"until_ms": 5}"#.into(),
            400,
            "invalid_argument",
            "until_ms",
        ),
        ("pause", far, 400, "invalid_argument", "until_ms"),
        (
            "pause",
            r#"{"until": 5}"#.into(),
            400,
            "invalid_body",
            "until",
        ),
    ];
    for (verb, body, status, code, names) in cases {
        let url = server.at(&format!("/v1/topics/t/groups/g/{verb}"));
        let response = http.post(url).body(body.clone()).send().await.unwrap();
        assert_eq!(response.status().as_u16(), status, "{verb} {body}");
        let error: Value = response.json().await.unwrap();
        assert_eq!(error["error"], code, "{verb} {body}: {error}");
        let message = error["message"].as_str().unwrap();
        assert!(message.contains(names), "{verb} {body}: {message}");
    }
    for verb in ["seek", "pause", "resume"] {
        let body = if verb == "seek" {
            r#"{"offset": 0}"#
        } else {
            ""
        };
        let unknown = [
            ("/v1/topics/t/groups/nope", "unknown_group"),
            ("/v1/topics/nope/groups/g", "unknown_topic"),
        ];
        for (path, code) in unknown {
            let url = server.at(&format!("{path}/{verb}"));
            let response = http
                .request(Method::POST, url)
                .body(body)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status().as_u16(), 404, "{verb} {path}");
            let error: Value = response.json().await.unwrap();
            assert_eq!(error["error"], code, "{verb} {path}");
        }
    }
}

/// Runs `mailroom --json ARGS` against `server` and returns its JSON answer.
fn mailroom_json(server: &ServerProcess, args: &[&str]) -> Value {
    let args = [&["--json"], args].concat();
    let output = cli_support::mailroom(&server.url, None, &args, b"");
    assert!(output.status.success(), "{args:?}: {output:?}");
    serde_json::from_slice(&output.stdout).unwrap()
}

// Proves the CLI's seek, pause and resume reach the server and print their answers, and
// that the group's line shows the pause.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_seeks_pauses_and_resumes() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &[]);
    let client = setup(&server, 3).await;
    let server = std::sync::Arc::new(server);
    let run = |args: &'static [&'static str]| {
        let server = server.clone();
        tokio::task::spawn_blocking(move || mailroom_json(&server, args))
    };
    let seeked = run(&["group", "seek", "t", "g", "latest"]).await.unwrap();
    assert_eq!(seeked["position"], 3);
    let seeked = run(&["group", "seek", "t", "g", "1"]).await.unwrap();
    assert_eq!(seeked["position"], 1);
    let paused = run(&["group", "pause", "t", "g"]).await.unwrap();
    assert_eq!(
        (paused["paused"].clone(), paused["paused_until_ms"].clone()),
        (Value::Bool(true), Value::Null)
    );
    assert_eq!(client.poll("t", "g").await.unwrap(), None);
    let paused = run(&["group", "pause", "t", "g", "--for-ms", "60000"])
        .await
        .unwrap();
    assert!(paused["paused_until_ms"].as_u64().unwrap() > now_ms());
    let text = {
        let server = server.clone();
        tokio::task::spawn_blocking(move || {
            cli_support::mailroom(&server.url, None, &["group", "info", "t", "g"], b"")
        })
        .await
        .unwrap()
    };
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("paused until"), "{text}");
    let resumed = run(&["group", "resume", "t", "g"]).await.unwrap();
    assert_eq!(resumed["changed"], true);
    let next = client.poll("t", "g").await.unwrap().unwrap();
    assert_eq!(next.offset, 1);
}
