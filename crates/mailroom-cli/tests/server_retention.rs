//! Retention over HTTP against the real binary: a topic's own limits set by `PUT` and
//! changed by `PATCH`, bounds refused with 400s naming the field, the server's defaults
//! from flags, the topic view's figures, and the background task keeping a topic (and
//! the data directory) within its limit while messages keep coming.

mod cli_support;
mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{temp_dir, ServerProcess};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

/// How long a test waits for the background task to reach a condition.
const RETENTION_WAIT_MS_MAX: u64 = 15_000;

async fn call(
    server: &ServerProcess,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut request = reqwest::Client::new().request(method, server.at(path));
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("request");
    let status = response.status();
    let text = response.text().await.expect("body");
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Publishes `count` messages of `bytes` bytes each, in batches of 4 (one append is
/// never split across segments, so a batch must fit in a small segment).
async fn publish(server: &ServerProcess, topic: &str, count: usize, bytes: usize) {
    let path = format!("/v1/topics/{topic}/messages/batch");
    for chunk in (0..count).collect::<Vec<_>>().chunks(4) {
        let messages: Vec<String> = chunk
            .iter()
            .map(|i| format!("{i:08}{}", "x".repeat(bytes - 8)))
            .collect();
        let (status, _) = call(
            server,
            Method::POST,
            &path,
            Some(json!({ "messages": messages })),
        )
        .await;
        assert_eq!(status, StatusCode::CREATED);
    }
}

/// Waits until the topic's view satisfies `done`, or fails after the deadline.
async fn await_view(server: &ServerProcess, topic: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_millis(RETENTION_WAIT_MS_MAX);
    loop {
        let (status, view) = call(server, Method::GET, &format!("/v1/topics/{topic}"), None).await;
        assert_eq!(status, StatusCode::OK);
        if done(&view) {
            return view;
        }
        assert!(
            Instant::now() < deadline,
            "retention did not get there: {view}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let entry = entry.expect("entry");
        let meta = entry.metadata().expect("metadata");
        total += if meta.is_dir() {
            dir_bytes(&entry.path())
        } else {
            meta.len()
        };
    }
    total
}

// Proves PUT takes an optional retention body (an empty body still creates), the view
// shows the limits in force over the server's defaults from flags, PATCH changes only
// the fields given (null = unlimited) durably across a restart, and a PUT of an
// existing topic changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_and_patch_set_retention_shown_in_the_view() {
    let dir = temp_dir();
    let flags = [
        "--retention-max-age-ms",
        "3600000",
        "--retention-max-bytes",
        "1048576",
    ];
    let server = ServerProcess::start(dir.path(), &flags);
    let (status, _) = call(&server, Method::PUT, "/v1/topics/plain", None).await;
    assert_eq!(status, StatusCode::CREATED);
    let body =
        json!({"retention": {"max_bytes": 65536, "max_messages": 100, "keep_unconsumed": false}});
    let (status, created) = call(&server, Method::PUT, "/v1/topics/own", Some(body)).await;
    assert_eq!(
        (status, &created),
        (
            StatusCode::CREATED,
            &json!({"topic": "own", "created": true})
        )
    );

    let (_, plain) = call(&server, Method::GET, "/v1/topics/plain", None).await;
    let defaults = json!({"max_age_ms": 3600000, "max_bytes": 1048576, "max_messages": null, "keep_unconsumed": true});
    assert_eq!(plain["retention"], defaults);
    assert_eq!(
        plain["removed"],
        json!({"messages": 0, "bytes": 0, "segments": 0})
    );
    assert_eq!(
        (
            plain["start"].as_u64(),
            plain["end"].as_u64(),
            plain["bytes"].as_u64()
        ),
        (Some(0), Some(0), Some(0))
    );
    let (_, own) = call(&server, Method::GET, "/v1/topics/own", None).await;
    let own_limits = json!({"max_age_ms": 3600000, "max_bytes": 65536, "max_messages": 100, "keep_unconsumed": false});
    assert_eq!(own["retention"], own_limits);

    let change = json!({"retention": {"max_age_ms": null, "max_messages": 5}});
    let (status, changed) = call(&server, Method::PATCH, "/v1/topics/own", Some(change)).await;
    assert_eq!(status, StatusCode::OK);
    let changed_limits = json!({"max_age_ms": null, "max_bytes": 65536, "max_messages": 5, "keep_unconsumed": false});
    assert_eq!(changed["retention"], changed_limits);
    // A second PUT with other limits answers 200 and changes nothing.
    let again = json!({"retention": {"max_bytes": 1}});
    let (status, _) = call(&server, Method::PUT, "/v1/topics/own", Some(again)).await;
    assert_eq!(status, StatusCode::OK);
    publish(&server, "own", 3, 100).await;
    let (_, listed) = call(&server, Method::GET, "/v1/topics", None).await;
    let own = listed["topics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "own")
        .unwrap()
        .clone();
    assert_eq!(own["retention"], changed_limits);
    assert!(own["bytes"].as_u64().unwrap() >= 300, "{own}");

    assert!(server.terminate().success());
    let server = ServerProcess::start(dir.path(), &[]);
    let (_, own) = call(&server, Method::GET, "/v1/topics/own", None).await;
    let (_, plain) = call(&server, Method::GET, "/v1/topics/plain", None).await;
    assert_eq!(
        own["retention"],
        json!({"max_age_ms": null, "max_bytes": 65536, "max_messages": 5, "keep_unconsumed": false})
    );
    assert_eq!(
        plain["retention"],
        json!({"max_age_ms": null, "max_bytes": null, "max_messages": null, "keep_unconsumed": true})
    );
}

// Proves every retention value out of bounds, of the wrong type or unknown is refused
// with a 400 that names the field, and changes nothing; an unknown topic is a 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_retention_is_refused_by_name() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &[]);
    let cases = [
        (
            json!({"retention": {"max_bytes": 0}}),
            "invalid_argument",
            "max_bytes",
        ),
        (
            json!({"retention": {"max_age_ms": 400_000_000_000u64}}),
            "invalid_argument",
            "max_age_ms",
        ),
        (
            json!({"retention": {"max_messages": 9_007_199_254_740_993u64}}),
            "invalid_argument",
            "max_messages",
        ),
        (
            json!({"retention": {"max_bytes": -1}}),
            "invalid_body",
            "max_bytes",
        ),
        (
            json!({"retention": {"max_bytes": "1GiB"}}),
            "invalid_body",
            "max_bytes",
        ),
        (
            json!({"retention": {"max_size": 1}}),
            "invalid_body",
            "max_size",
        ),
        // serde's derive would take an array for the object, field by field (found by
        // schemathesis): refused like any other wrong type.
        (
            json!({"retention": [null, null]}),
            "invalid_body",
            "retention",
        ),
    ];
    for (body, code, field) in &cases {
        for method in [Method::PUT, Method::PATCH] {
            let (status, error) =
                call(&server, method.clone(), "/v1/topics/t", Some(body.clone())).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{method} {body}: {error}");
            assert_eq!(error["error"], *code, "{method} {body}: {error}");
            let message = error["message"].as_str().unwrap();
            assert!(message.contains(field), "{method} {body}: {message}");
        }
    }
    let (_, listed) = call(&server, Method::GET, "/v1/topics", None).await;
    assert_eq!(listed["topics"], json!([]));
    let patch = json!({"retention": {"max_bytes": 10}});
    let (status, error) = call(&server, Method::PATCH, "/v1/topics/missing", Some(patch)).await;
    assert_eq!(
        (status, &error["error"]),
        (StatusCode::NOT_FOUND, &json!("unknown_topic"))
    );
}

// Proves the background task deletes old segments by itself, soon after they pass the
// limit, counts what it removed in the view, and keeps the data directory under a bound
// while many times the limit is published (the short form of scripts/retention-soak.sh).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_retention_keeps_disk_use_flat() {
    let dir = temp_dir();
    let flags = ["--segment-bytes", "4096", "--retention-interval-ms", "50"];
    let server = ServerProcess::start(dir.path(), &flags);
    let limit = 16_384u64;
    let body = json!({"retention": {"max_bytes": limit}});
    let (status, _) = call(&server, Method::PUT, "/v1/topics/soak", Some(body)).await;
    assert_eq!(status, StatusCode::CREATED);
    // 20 rounds of ~50 KB: 60 times the limit in all.
    let mut published = 0u64;
    for _ in 0..20 {
        publish(&server, "soak", 50, 1000).await;
        published += 50;
        let view = await_view(&server, "soak", |view| {
            view["bytes"].as_u64().unwrap() <= limit
        })
        .await;
        assert_eq!(view["end"].as_u64(), Some(published));
        // The bound: the limit, a segment, and the index files, store markers and
        // the groups log beside them.
        let on_disk = dir_bytes(dir.path());
        assert!(
            on_disk <= limit + 4 * 4096 + 8192,
            "{on_disk} bytes in the data dir"
        );
    }
    // The view reads `start` and `removed` one after the other while the background task
    // may be between them, so wait for a view taken while retention was idle.
    let view = await_view(&server, "soak", |view| {
        view["start"].as_u64().unwrap() > 0 && view["removed"]["messages"] == view["start"]
    })
    .await;
    let removed = &view["removed"];
    assert!(removed["segments"].as_u64().unwrap() > 10, "{view}");
    assert!(
        removed["bytes"].as_u64().unwrap() > 20 * 50 * 1000 - limit - 8192,
        "{view}"
    );
}

// Proves the CLI sets retention in human units at creation and changes it later
// (`none` = unlimited, limits left out unchanged), as the server's view then shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_sets_retention_in_human_units() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &[]);
    let create = [
        "topic",
        "create",
        "t",
        "--retention-max-age",
        "7d",
        "--retention-max-bytes",
        "1GiB",
    ];
    let created = cli_support::mailroom(&server.url, None, &create, b"");
    assert!(created.status.success(), "{created:?}");
    let (_, view) = call(&server, Method::GET, "/v1/topics/t", None).await;
    let week = json!({"max_age_ms": 604800000, "max_bytes": 1073741824, "max_messages": null, "keep_unconsumed": true});
    assert_eq!(view["retention"], week);

    let change = [
        "--json",
        "topic",
        "retention",
        "t",
        "--retention-max-age",
        "none",
        "--retention-max-messages",
        "1000",
    ];
    let changed = cli_support::mailroom(&server.url, None, &change, b"");
    assert!(changed.status.success(), "{changed:?}");
    let documents = cli_support::documents(&changed);
    let expected = json!({"max_age_ms": null, "max_bytes": 1073741824, "max_messages": 1000, "keep_unconsumed": true});
    assert_eq!(documents[0]["retention"], expected);
    let shown = cli_support::mailroom(&server.url, None, &["topic", "retention", "t"], b"");
    let text = String::from_utf8(shown.stdout).unwrap();
    assert!(
        text.contains("max age unlimited, max size 1GiB, max messages 1000"),
        "{text}"
    );
    let bad = cli_support::mailroom(
        &server.url,
        None,
        &[
            "topic",
            "retention",
            "t",
            "--retention-max-bytes",
            "1 parsec",
        ],
        b"",
    );
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
}
