//! Group settings over HTTP: leases, nack kinds, redrive and purge, W > 1 with consumer
//! identities, and their metrics. The real binary, via the client.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{temp_dir, ServerProcess};
use mailroom_client::{
    Client, DeliveryId, GroupDetail, GroupOptions, NackKind, NackOptions, NackOutcome,
};
use serde_json::{json, Value};

/// How long any test waits for a lease to run out before failing.
const LEASE_WAIT_MAX: Duration = Duration::from_secs(10);
/// The lease of `expired_lease_fences_the_old_owner`'s group (ms).
const LEASE_MS: u64 = 1_000;

async fn publish(client: &Client, topic: &str, messages: &[&'static str]) {
    for message in messages {
        client
            .publish(topic, Bytes::from_static(message.as_bytes()))
            .await
            .unwrap();
    }
}

// Proves a delivery whose lease ran out loses its owner: the old attempt's ack is 409
// not_owned, the next poll is attempt + 1, and the expiry shows in the group's counters
// and in /metrics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_lease_fences_the_old_owner() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &[]);
    let client = server.client();
    client.create_topic("jobs").await.unwrap();
    let mut options = GroupOptions::new(3);
    // Long enough that the steps after the second poll (an ack, a read, a touch) finish
    // inside the second lease even on a loaded CI machine's debug build: at 200 ms it ran
    // out there once, and the second expiry was counted too.
    options.lease_ms = Some(LEASE_MS);
    client
        .create_group_with("jobs", "workers", &options)
        .await
        .unwrap();
    publish(&client, "jobs", &["job"]).await;

    let first = client.poll("jobs", "workers").await.unwrap().unwrap();
    assert_eq!((first.offset, first.attempt), (0, 1));
    // Poll until the lease has run out: until then a poll returns the same attempt.
    let started = Instant::now();
    let second = loop {
        let delivery = client.poll("jobs", "workers").await.unwrap().unwrap();
        if delivery.attempt != first.attempt {
            break delivery;
        }
        assert!(
            started.elapsed() < LEASE_WAIT_MAX,
            "the lease never ran out"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!((second.offset, second.attempt), (0, 2));
    let stale = client.ack("jobs", "workers", first.id()).await.unwrap_err();
    assert_eq!(stale.status(), Some(409));
    assert_eq!(stale.code(), Some("not_owned"));
    let detail = client.group_detail("jobs", "workers").await.unwrap();
    assert_eq!(detail.lease_ms, Some(LEASE_MS));
    assert_eq!(detail.counters.expired_leases, 1);
    assert_eq!(detail.counters.redeliveries, 1);
    assert_eq!(in_flight_ids(&detail), vec![second.id()]);
    client.touch("jobs", "workers", second.id()).await.unwrap();
    client.ack("jobs", "workers", second.id()).await.unwrap();

    let metrics = client.metrics().await.unwrap();
    for series in [
        "mailroom_expired_leases_total{topic=\"jobs\",group=\"workers\"} 1",
        "mailroom_redeliveries_total{topic=\"jobs\",group=\"workers\"} 1",
    ] {
        assert!(metrics.contains(series), "{series} missing:\n{metrics}");
    }
}

// Proves a release hands a message back without spending its one allowed failure, and a
// reject dead-letters at once with its reason and a time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_is_not_a_failure_and_reject_dead_letters_now() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &[]);
    let client = server.client();
    client.create_topic("t").await.unwrap();
    client
        .create_group_with("t", "g", &GroupOptions::new(1))
        .await
        .unwrap();
    publish(&client, "t", &["a", "b"]).await;

    let first = client.poll("t", "g").await.unwrap().unwrap();
    let release = NackOptions {
        kind: NackKind::Release,
        ..NackOptions::default()
    };
    let outcome = client.nack_with("t", "g", first.id(), &release).await;
    assert_eq!(outcome.unwrap(), NackOutcome::Released);
    let again = client.poll("t", "g").await.unwrap().unwrap();
    assert_eq!((again.offset, again.attempt), (0, 2), "released, not dead");
    let reject = NackOptions {
        kind: NackKind::Reject,
        reason: Some("schema mismatch".into()),
        ..NackOptions::default()
    };
    let outcome = client.nack_with("t", "g", again.id(), &reject).await;
    assert_eq!(outcome.unwrap(), NackOutcome::DeadLettered);

    let detail = client.group_detail("t", "g").await.unwrap();
    assert_eq!(detail.counters.releases, 1);
    assert_eq!(detail.info.dead_letters, 1);
    let note = &detail.dead_letter_notes[0];
    assert_eq!((note.offset, note.attempts), (0, 2));
    assert_eq!(note.reason.as_deref(), Some("schema mismatch"));
    assert!(note.at_ms > 0, "dated by the server's clock");
    let next = client.poll("t", "g").await.unwrap().unwrap();
    assert_eq!(next.offset, 1);
    let metrics = client.metrics().await.unwrap();
    let series = "mailroom_releases_total{topic=\"t\",group=\"g\"} 1";
    assert!(metrics.contains(series), "{series} missing:\n{metrics}");
    let series = "mailroom_nacks_total{topic=\"t\",group=\"g\",outcome=\"released\"} 1";
    assert!(metrics.contains(series), "{series} missing:\n{metrics}");
}

// Proves a nack with a delay is not redelivered before its time and holds back the
// message above it (the poll answers 204 meanwhile), then comes back as attempt 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_nack_waits_and_holds_the_group() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &[]);
    let client = server.client();
    client.create_topic("t").await.unwrap();
    client
        .create_group_with("t", "g", &GroupOptions::new(3))
        .await
        .unwrap();
    publish(&client, "t", &["slow", "next"]).await;
    let first = client.poll("t", "g").await.unwrap().unwrap();
    let delay = NackOptions {
        delay_ms: Some(300),
        ..NackOptions::default()
    };
    let nacked_at = Instant::now();
    let outcome = client.nack_with("t", "g", first.id(), &delay).await;
    assert_eq!(outcome.unwrap(), NackOutcome::Retry);
    let retry = loop {
        if let Some(delivery) = client.poll("t", "g").await.unwrap() {
            break delivery;
        }
        assert!(nacked_at.elapsed() < LEASE_WAIT_MAX, "never redelivered");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        nacked_at.elapsed() >= Duration::from_millis(300),
        "too early"
    );
    assert_eq!(
        (retry.offset, retry.attempt),
        (0, 2),
        "offset 1 was held back"
    );
}

// Proves bad settings and options are 400 with a stable code, and that a nack with the
// plain body (an id and nothing else) still means a plain nack.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_settings_and_options_are_refused() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &[]);
    let client = server.client();
    client.create_topic("t").await.unwrap();
    let http = reqwest::Client::new();
    let group = server.at("/v1/topics/t/groups/g");
    let bad_groups = [
        json!({"max_attempts": 3, "lease_ms": 0}),
        json!({"max_attempts": 3, "max_in_flight": 0}),
        json!({"max_attempts": 3, "max_in_flight": 65_537}),
        json!({"max_attempts": 3, "backoff": {"kind": "exponential", "base_ms": 9, "cap_ms": 1}}),
        json!({"max_attempts": 3, "backoff": {"kind": "sometimes"}}),
    ];
    for body in bad_groups {
        let response = http.put(&group).json(&body).send().await.unwrap();
        assert_eq!(response.status(), 400, "{body}");
        let error: Value = response.json().await.unwrap();
        assert!(error["error"].is_string(), "{body}: {error}");
    }
    client
        .create_group_with("t", "g", &GroupOptions::new(2))
        .await
        .unwrap();
    publish(&client, "t", &["m"]).await;
    let delivery = client.poll("t", "g").await.unwrap().unwrap();
    let nack = server.at("/v1/topics/t/groups/g/nack");
    let id = json!({"offset": delivery.offset, "attempt": delivery.attempt});
    let bad_nacks = [
        json!({"offset": 0, "attempt": 1, "kind": "drop"}),
        json!({"offset": 0, "attempt": 1, "delay_ms": 604_800_001u64}),
        json!({"offset": 0, "attempt": 1, "reason": "x".repeat(1025)}),
        json!({"offset": 0, "attempt": 1, "why": "unknown field"}),
    ];
    for body in bad_nacks {
        let response = http.post(&nack).json(&body).send().await.unwrap();
        assert_eq!(response.status(), 400, "{body}");
    }
    let long = "c".repeat(129);
    let poll = server.at(&format!("/v1/topics/t/groups/g/poll?consumer={long}"));
    assert_eq!(http.post(&poll).send().await.unwrap().status(), 400);
    let redrive = server.at("/v1/topics/t/groups/g/dead-letters/redrive");
    let inverted = http
        .post(&redrive)
        .json(&json!({"from": 5, "to": 1}))
        .send();
    assert_eq!(inverted.await.unwrap().status(), 400);

    let response = http.post(&nack).json(&id).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body,
        json!({"outcome": "retry"}),
        "the plain body is a plain nack"
    );
}

/// Runs `mailroom --server URL --json ARGS` and returns its one JSON document.
fn mailroom_json(server: &ServerProcess, args: &[&str]) -> Value {
    let output = Command::new(env!("CARGO_BIN_EXE_mailroom"))
        .args(["--server", &server.url, "--json"])
        .args(args)
        .env_remove("MAILROOM_TOKEN")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

// Proves the CLI drives the new API: create with settings, poll as a consumer, reject
// with a reason, read it back in `group info`, and redrive it.
#[test]
fn cli_drives_settings_nack_kinds_and_redrive() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "never"]);
    mailroom_json(&server, &["topic", "create", "t"]);
    let create = [
        "group",
        "create",
        "t",
        "g",
        "--lease-ms",
        "60000",
        "--backoff",
        "exp:10:1000",
        "--max-in-flight",
        "4",
    ];
    mailroom_json(&server, &create);
    mailroom_json(&server, &["publish", "t", "bad"]);
    let polled = mailroom_json(&server, &["group", "poll", "t", "g", "--consumer", "c1"]);
    assert_eq!(
        (polled["offset"].clone(), polled["attempt"].clone()),
        (json!(0), json!(1))
    );
    mailroom_json(&server, &["group", "touch", "t", "g", "0", "1"]);
    let reject = [
        "group",
        "nack",
        "t",
        "g",
        "0",
        "1",
        "--kind",
        "reject",
        "--reason",
        "bad input",
    ];
    assert_eq!(mailroom_json(&server, &reject)["outcome"], "dead_lettered");
    let info = mailroom_json(&server, &["group", "info", "t", "g"]);
    assert_eq!(info["max_in_flight"], 4);
    assert_eq!(info["lease_ms"], 60000);
    assert_eq!(
        info["backoff"],
        json!({"kind": "exponential", "base_ms": 10, "cap_ms": 1000})
    );
    assert_eq!(info["dead_letter_notes"][0]["reason"], "bad input");
    let redrive = ["group", "redrive", "t", "g", "--from", "0", "--to", "1"];
    assert_eq!(mailroom_json(&server, &redrive)["count"], 1);
    let again = mailroom_json(&server, &["group", "poll", "t", "g", "--consumer", "c2"]);
    assert_eq!(again["attempt"], 2);
}

// Proves redrive puts dead letters back to the one group named, as the next attempt,
// while another group with the same dead letter keeps it; purge then deletes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redrive_touches_one_group_only() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &[]);
    let client = server.client();
    client.create_topic("t").await.unwrap();
    for group in ["g1", "g2"] {
        client
            .create_group_with("t", group, &GroupOptions::new(1))
            .await
            .unwrap();
    }
    publish(&client, "t", &["poison"]).await;
    for group in ["g1", "g2"] {
        let delivery = client.poll("t", group).await.unwrap().unwrap();
        let outcome = client.nack("t", group, delivery.id()).await.unwrap();
        assert_eq!(outcome, NackOutcome::DeadLettered);
    }

    assert_eq!(client.redrive("t", "g1", None).await.unwrap(), 1);
    let redriven = client.poll("t", "g1").await.unwrap().unwrap();
    assert_eq!((redriven.offset, redriven.attempt), (0, 2));
    assert!(client.dead_letters("t", "g1").await.unwrap().is_empty());
    assert_eq!(client.poll("t", "g2").await.unwrap(), None, "g2 untouched");
    assert_eq!(client.dead_letters("t", "g2").await.unwrap().len(), 1);

    assert_eq!(client.purge("t", "g2", Some(1..5)).await.unwrap(), 0);
    assert_eq!(client.purge("t", "g2", Some(0..1)).await.unwrap(), 1);
    assert!(client.dead_letters("t", "g2").await.unwrap().is_empty());
    let detail = client.group_detail("t", "g1").await.unwrap();
    assert_eq!(detail.counters.redrives, 1);
}

// Proves W = 2 with two consumers: two deliveries in flight at once, each consumer's
// repeated poll returns its own delivery, a third consumer waits while the window is
// full, and no message at or beyond position + W is delivered before the position moves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_consumers_share_a_window_of_two() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &[]);
    let client = server.client();
    client.create_topic("t").await.unwrap();
    let mut options = GroupOptions::new(3);
    options.max_in_flight = Some(2);
    client.create_group_with("t", "w", &options).await.unwrap();
    publish(&client, "t", &["m0", "m1", "m2"]).await;

    let c1 = client.poll_as("t", "w", "c1").await.unwrap().unwrap();
    let c2 = client.poll_as("t", "w", "c2").await.unwrap().unwrap();
    assert_eq!((c1.offset, c2.offset), (0, 1));
    let repeat = client.poll_as("t", "w", "c1").await.unwrap().unwrap();
    assert_eq!(repeat.id(), c1.id(), "a repeated poll is the same attempt");
    assert_eq!(client.poll_as("t", "w", "c3").await.unwrap(), None, "full");

    client.ack("t", "w", c2.id()).await.unwrap();
    let detail = client.group_detail("t", "w").await.unwrap();
    assert_eq!(detail.info.position, 0, "offset 0 is not finished");
    assert_eq!(in_flight_ids(&detail), vec![c1.id()]);
    assert_eq!(detail.deliveries[0].consumer.as_deref(), Some("c1"));
    assert_eq!(
        client.poll_as("t", "w", "c2").await.unwrap(),
        None,
        "offset 2 is not below position + W"
    );
    client.ack("t", "w", c1.id()).await.unwrap();
    let last = client.poll_as("t", "w", "c2").await.unwrap().unwrap();
    assert_eq!(
        last.id(),
        DeliveryId {
            offset: 2,
            attempt: 1
        }
    );
    assert_eq!(
        client.group_detail("t", "w").await.unwrap().info.position,
        2
    );
}

/// The ids of the group's deliveries in flight, in the order it lists them.
fn in_flight_ids(detail: &GroupDetail) -> Vec<DeliveryId> {
    detail.deliveries.iter().map(|d| d.id()).collect()
}
