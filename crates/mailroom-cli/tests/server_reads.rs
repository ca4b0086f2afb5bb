//! Reading a topic's log without a group (`GET /v1/topics/{topic}/messages`) against the
//! real binary: paging by `next` reads every message once with its metadata and exact
//! bytes while no group changes, the byte cap, a start by time, a start below the
//! retained log, the long poll at the end of the log, every bad parameter's 400, and
//! seeking a group by time.

mod common;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use common::{temp_dir, Deadline, ServerProcess};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// One request with an optional JSON body; the status and the JSON answer.
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

/// A read of topic `t` with `query`, which must answer 200.
async fn read(server: &ServerProcess, query: &str) -> Value {
    let (status, page) = call(
        server,
        Method::GET,
        &format!("/v1/topics/t/messages?{query}"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{query}: {page}");
    page
}

/// A raw publish of `payload` to `t` with request `headers`; its offset.
async fn publish_raw(server: &ServerProcess, payload: Vec<u8>, headers: &[(&str, &str)]) -> u64 {
    let mut request = reqwest::Client::new()
        .post(server.at("/v1/topics/t/messages"))
        .body(payload);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let answer: Value = request.send().await.unwrap().json().await.unwrap();
    answer["offset"].as_u64().expect("an offset")
}

/// The bytes of a read message, from its text or base64 form (exactly one present).
fn payload_of(message: &Value) -> Vec<u8> {
    match (message.get("payload"), message.get("payload_base64")) {
        (Some(Value::String(text)), None) => text.as_bytes().to_vec(),
        (None, Some(Value::String(base64))) => base64::engine::general_purpose::STANDARD
            .decode(base64)
            .expect("base64"),
        _ => panic!("exactly one payload form: {message}"),
    }
}

/// The page cap a read answers by (`PAGE_BYTES_MAX`).
const CAP: usize = 16 << 20;

/// The payload limit of the servers of these tests: room for one message above the cap.
const PAYLOAD_LIMIT: &str = "16778240";

/// Topic `t` with group `g`.
async fn topic_and_group(server: &ServerProcess) {
    for (method, path, body) in [
        (Method::PUT, "/v1/topics/t", None),
        (
            Method::PUT,
            "/v1/topics/t/groups/g",
            Some(json!({"max_attempts": 3})),
        ),
    ] {
        let (status, answer) = call(server, method, path, body).await;
        assert!(status.is_success(), "{path}: {answer}");
    }
}

/// With `metadata`, every message carries a header and every other one a key.
async fn check_paging_reads_every_message_once_and_moves_no_group(
    server: &ServerProcess,
    metadata: bool,
) {
    topic_and_group(server).await;
    let before_ms = now_ms();
    let mut sent: Vec<(Vec<u8>, Option<&str>)> = Vec::new();
    for i in 0..7u8 {
        let payload = match i % 3 {
            0 => format!("text {i}").into_bytes(),
            1 => vec![0xff, i, 0x00, 0xfe],
            _ => Vec::new(),
        };
        let key = (metadata && i % 2 == 0).then_some("customer-7");
        let mut headers = Vec::new();
        if metadata {
            headers.push(("mailroom-header-origin", "web"));
        }
        if let Some(key) = key {
            headers.push(("mailroom-key", key));
        }
        publish_raw(server, payload.clone(), &headers).await;
        sent.push((payload, key));
    }
    let after_ms = now_ms();
    let (_, polled) = call(server, Method::POST, "/v1/topics/t/groups/g/poll", None).await;
    assert_eq!(polled["offset"], 0, "{polled}");
    let (_, group_before) = call(server, Method::GET, "/v1/topics/t/groups/g", None).await;

    let mut read_back = Vec::new();
    let mut from = 0;
    loop {
        let page = read(server, &format!("from={from}&limit=3")).await;
        assert_eq!(
            (page["first"].as_u64(), page["end"].as_u64()),
            (Some(from), Some(7))
        );
        let messages = page["messages"].as_array().unwrap();
        assert!(messages.len() <= 3, "{page}");
        read_back.extend(messages.iter().cloned());
        let next = page["next"].as_u64().unwrap();
        if messages.is_empty() {
            assert_eq!(next, 7);
            break;
        }
        from = next;
    }
    assert_eq!(read_back.len(), sent.len());
    for (offset, (message, (payload, key))) in read_back.iter().zip(&sent).enumerate() {
        assert_eq!(message["offset"], offset as u64, "{message}");
        assert_eq!(&payload_of(message), payload, "{message}");
        assert_eq!(
            message.get("key").and_then(Value::as_str),
            *key,
            "{message}"
        );
        let headers = metadata.then(|| json!({"origin": "web"}));
        assert_eq!(message.get("headers"), headers.as_ref(), "{message}");
        let at = message["published_at_ms"].as_u64().expect("a publish time");
        assert!(
            (before_ms..=after_ms).contains(&at),
            "{at} in {before_ms}..={after_ms}"
        );
    }
    let (_, group_after) = call(server, Method::GET, "/v1/topics/t/groups/g", None).await;
    assert_eq!(group_before, group_after);
    // Without `from` a read starts at the oldest retained message.
    assert_eq!(read(server, "limit=1").await["messages"][0]["offset"], 0);
}

async fn check_pages_stop_at_the_byte_cap_but_hold_one_message(server: &ServerProcess) {
    topic_and_group(server).await;
    for size in [CAP + 1, CAP / 2, CAP / 2, 1] {
        publish_raw(server, vec![b'x'; size], &[]).await;
    }
    let mut pages = Vec::new();
    let mut from = 0;
    while from < 4 {
        let page = read(server, &format!("from={from}&limit=100")).await;
        let sizes: Vec<usize> = page["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|message| payload_of(message).len())
            .collect();
        from = page["next"].as_u64().unwrap();
        pages.push(sizes);
    }
    assert_eq!(pages, vec![vec![CAP + 1], vec![CAP / 2, CAP / 2], vec![1]]);
}

async fn check_a_read_can_start_by_publish_time(server: &ServerProcess) {
    topic_and_group(server).await;
    for i in 0..5 {
        publish_raw(server, format!("m{i}").into_bytes(), &[]).await;
    }
    let page = read(server, "").await;
    let times: Vec<u64> = page["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message["published_at_ms"].as_u64().unwrap())
        .collect();
    for (index, time) in times.iter().enumerate() {
        let expected = times.iter().position(|at| at >= time).unwrap() as u64;
        assert!(expected <= index as u64);
        let page = read(server, &format!("from_time_ms={time}")).await;
        assert_eq!(page["first"], expected, "{page}");
        assert_eq!(page["messages"][0]["offset"], expected, "{page}");
    }
    let late = read(server, &format!("from_time_ms={}", times[4] + 1)).await;
    assert_eq!(
        late,
        json!({"messages": [], "first": 5, "next": 5, "end": 5})
    );
    assert_eq!(read(server, "from_time_ms=0").await["first"], 0);
}

// Proves a read below the retained start begins at the oldest retained message and
// says so in `first`, rather than failing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_below_the_retained_start_begins_at_the_start() {
    let dir = temp_dir();
    let flags = ["--segment-bytes", "4096", "--retention-interval-ms", "50"];
    let server = ServerProcess::start(dir.path(), &flags);
    let retention = json!({"retention": {"max_messages": 10, "keep_unconsumed": false}});
    let (status, _) = call(&server, Method::PUT, "/v1/topics/t", Some(retention)).await;
    assert_eq!(status, StatusCode::CREATED);
    for chunk in 0..25 {
        let messages: Vec<String> = (0..4)
            .map(|i| format!("{chunk}-{i}-{}", "x".repeat(200)))
            .collect();
        let body = json!({ "messages": messages });
        let (status, _) = call(
            &server,
            Method::POST,
            "/v1/topics/t/messages/batch",
            Some(body),
        )
        .await;
        assert_eq!(status, StatusCode::CREATED);
    }
    let deadline = Deadline::new("retention to remove the oldest segments");
    let start = loop {
        let (_, view) = call(&server, Method::GET, "/v1/topics/t", None).await;
        let start = view["start"].as_u64().expect("a start");
        if start > 0 {
            break start;
        }
        deadline.check();
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let page = read(&server, "from=0&limit=1").await;
    let first = page["first"].as_u64().unwrap();
    assert!(first >= start, "{page}");
    assert_eq!(page["messages"][0]["offset"], first, "{page}");
    assert_eq!(page["next"], first + 1);
}

async fn check_a_read_at_the_end_waits_for_a_publish(server: &ServerProcess) {
    topic_and_group(server).await;
    publish_raw(server, b"before".to_vec(), &[]).await;

    let started = Instant::now();
    let empty = read(server, "from=1&wait_ms=300").await;
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(
        empty,
        json!({"messages": [], "first": 1, "next": 1, "end": 1})
    );

    let url = server.at("/v1/topics/t/messages?from=1&wait_ms=30000");
    let started = Instant::now();
    let waiting = tokio::spawn(async move {
        let response = reqwest::get(url).await.unwrap();
        response.json::<Value>().await.unwrap()
    });
    let deadline = Deadline::new("the read to wait as a long poll");
    while long_polls_waiting(server).await == 0 {
        deadline.check();
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    publish_raw(server, b"after".to_vec(), &[]).await;
    let page = waiting.await.unwrap();
    assert_eq!(page["messages"][0]["payload"], "after", "{page}");
    assert_eq!(page["next"], 2);
    // Woken by the publish, not by the 5 s re-check.
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
}

/// How many long polls the server holds open, from its metrics.
async fn long_polls_waiting(server: &ServerProcess) -> u64 {
    let text = server.client().metrics().await.expect("metrics");
    text.lines()
        .find_map(|line| line.strip_prefix("mailroom_long_polls_waiting "))
        .map_or(0, |value| value.trim().parse().expect("a count"))
}

async fn check_bad_read_parameters_are_refused_by_name(server: &ServerProcess) {
    topic_and_group(server).await;
    publish_raw(server, b"x".to_vec(), &[]).await;
    for (query, named) in [
        ("from=abc", "from"),
        ("from=-1", "from"),
        ("from=2", "from"),
        ("from=9223372036854775808", "from"),
        ("from_time_ms=soon", "from_time_ms"),
        ("from=0&from_time_ms=0", "from_time_ms"),
        ("limit=0", "limit"),
        ("limit=10001", "limit"),
        ("wait_ms=30001", "wait_ms"),
        ("wait_ms=x", "wait_ms"),
        ("group=g", "group"),
    ] {
        let path = format!("/v1/topics/t/messages?{query}");
        let (status, answer) = call(server, Method::GET, &path, None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {answer}");
        let message = answer["message"].as_str().unwrap_or_default();
        assert!(answer["error"].is_string(), "{query}: {answer}");
        assert!(message.contains(named), "{query}: {answer}");
    }
    let (status, answer) = call(server, Method::GET, "/v1/topics/nope/messages", None).await;
    assert_eq!(
        (status, &answer["error"]),
        (StatusCode::NOT_FOUND, &json!("unknown_topic"))
    );
    let (status, answer) = call(server, Method::GET, "/v1/topics/a%20b/messages", None).await;
    assert_eq!(
        (status, &answer["error"]),
        (StatusCode::BAD_REQUEST, &json!("invalid_name"))
    );
}

async fn check_a_group_seeks_by_time(server: &ServerProcess) {
    topic_and_group(server).await;
    for i in 0..4 {
        publish_raw(server, format!("m{i}").into_bytes(), &[]).await;
    }
    let page = read(server, "").await;
    let time_of = |offset: usize| {
        page["messages"][offset]["published_at_ms"]
            .as_u64()
            .unwrap()
    };
    let times: Vec<u64> = (0..4).map(time_of).collect();
    let expected = times.iter().position(|at| *at >= times[2]).unwrap() as u64;
    let seek = "/v1/topics/t/groups/g/seek";
    let (status, answer) = call(
        server,
        Method::POST,
        seek,
        Some(json!({"time_ms": times[2]})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["position"], expected);
    let (_, delivery) = call(server, Method::POST, "/v1/topics/t/groups/g/poll", None).await;
    assert_eq!(delivery["offset"], expected, "{delivery}");
    let (_, answer) = call(
        server,
        Method::POST,
        seek,
        Some(json!({"time_ms": times[3] + 1})),
    )
    .await;
    assert_eq!(answer["position"], 4, "{answer}");
    let (status, answer) = call(
        server,
        Method::POST,
        seek,
        Some(json!({"time_ms": 9223372036854775808u64})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        answer["message"].as_str().unwrap().contains("time_ms"),
        "{answer}"
    );
}

/// Starts the binary over a fresh data directory with the payload limit of these tests
/// and `extra` flags; keep the directory for the server's life.
fn start(extra: &[&str]) -> (tempfile::TempDir, ServerProcess) {
    let dir = temp_dir();
    let mut flags = vec!["--max-payload-bytes", PAYLOAD_LIMIT, "--fsync", "never"];
    flags.extend_from_slice(extra);
    let server = ServerProcess::start(dir.path(), &flags);
    (dir, server)
}

// Proves paging by `next` with a small limit reads every message exactly once, in
// offset order, with its key, headers, publish time and byte-exact payload (text and
// binary), ends with `next == end`, and leaves a group's view exactly as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_reads_every_message_once_and_moves_no_group() {
    let (_dir, server) = start(&[]);
    check_paging_reads_every_message_once_and_moves_no_group(&server, true).await;
}

// Proves the 16 MiB page cap: a message larger than the cap is read alone (so reading
// never gets stuck), two that fill the cap exactly share a page, and the page stops
// before a message that would pass it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_stop_at_the_byte_cap_but_hold_one_message() {
    let (_dir, server) = start(&[]);
    check_pages_stop_at_the_byte_cap_but_hold_one_message(&server).await;
}

// Proves `from_time_ms` starts at the first message published at or after the time
// (by the publish times the read itself reports), the end of the log past the last
// one, and the oldest message for a time before all of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_can_start_by_publish_time() {
    let (_dir, server) = start(&[]);
    check_a_read_can_start_by_publish_time(&server).await;
}

// Proves a read at the end of the log with `wait_ms` answers as soon as a message is
// published (woken, long before the wait or the server's re-check), and that one with
// nothing published answers an empty page when its wait ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_at_the_end_waits_for_a_publish() {
    let (_dir, server) = start(&[]);
    check_a_read_at_the_end_waits_for_a_publish(&server).await;
}

// Proves every bad parameter is a 400 whose JSON names it, an unknown topic a 404, and
// a bad topic name a 400 invalid_name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_read_parameters_are_refused_by_name() {
    let (_dir, server) = start(&[]);
    check_bad_read_parameters_are_refused_by_name(&server).await;
}

// Proves `{"time_ms"}` seeks a group to the first message published at or after the
// time (then delivered next), to the end past the last one, and that a time above the
// int64 range is a 400 naming time_ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_seeks_by_time() {
    let (_dir, server) = start(&[]);
    check_a_group_seeks_by_time(&server).await;
}

// Proves the PostgreSQL backend answers every scenario above as the embedded store does
// (paging with metadata, the byte cap, a start by time, the long poll woken by a
// publish, the refusals, seek by time), each over a fresh database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_reads_as_the_embedded_store() {
    for scenario in 0..6 {
        let Some(url) = common::fresh_postgres_database().await else {
            return;
        };
        let (_dir, server) = start(&["--store", &url]);
        match scenario {
            0 => check_paging_reads_every_message_once_and_moves_no_group(&server, true).await,
            1 => check_pages_stop_at_the_byte_cap_but_hold_one_message(&server).await,
            2 => check_a_read_can_start_by_publish_time(&server).await,
            3 => check_a_read_at_the_end_waits_for_a_publish(&server).await,
            4 => check_bad_read_parameters_are_refused_by_name(&server).await,
            _ => check_a_group_seeks_by_time(&server).await,
        }
    }
}
