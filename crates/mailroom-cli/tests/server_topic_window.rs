//! A topic's own idempotency window against the real `mailroom` binary: set at creation
//! (`PUT /v1/topics/{topic}` with `idempotency`, or `topic create
//! --idempotency-window-messages/--idempotency-window-ms`), shown in the topic's view
//! over the server's defaults, obeyed by repeats, kept across a kill -9 and a restart
//! with other defaults; bad values are 400s naming the field.

mod cli_support;
mod common;

use common::{temp_dir, ServerProcess};
use serde_json::{json, Value};

async fn send(request: reqwest::RequestBuilder) -> (u16, Value) {
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Publishes `payload` to topic `topic` with idempotency key `key`; answers the body.
async fn once(http: &reqwest::Client, server: &ServerProcess, topic: &str, key: &str) -> Value {
    let request = http
        .post(server.at(&format!("/v1/topics/{topic}/messages")))
        .header("Idempotency-Key", key)
        .body("pay");
    let (status, body) = send(request).await;
    assert_eq!(status, 201, "{body}");
    body
}

async fn bare(http: &reqwest::Client, server: &ServerProcess, topic: &str) {
    let request = http
        .post(server.at(&format!("/v1/topics/{topic}/messages")))
        .body("x");
    assert_eq!(send(request).await.0, 201);
}

async fn window(http: &reqwest::Client, server: &ServerProcess, topic: &str) -> Value {
    let (status, view) = send(http.get(server.at(&format!("/v1/topics/{topic}")))).await;
    assert_eq!(status, 200, "{view}");
    view["idempotency"].clone()
}

// Proves a topic's own window by count holds for it alone (a key past it is stored
// again, while the default-window topic still answers a duplicate), is shown in the
// view over the defaults, and survives a kill -9 and a restart whose defaults differ.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_window_is_obeyed_shown_and_kept_across_a_restart() {
    let dir = temp_dir();
    let http = reqwest::Client::new();
    let server = ServerProcess::start(dir.path(), &["--fsync", "always"]);
    let body = json!({"idempotency": {"window_messages": 2}});
    let created = send(http.put(server.at("/v1/topics/small")).json(&body)).await;
    assert_eq!(created, (201, json!({"topic": "small", "created": true})));
    assert_eq!(send(http.put(server.at("/v1/topics/plain"))).await.0, 201);
    assert_eq!(
        window(&http, &server, "small").await,
        json!({"window_messages": 2, "window_ms": 120_000})
    );
    assert_eq!(
        window(&http, &server, "plain").await,
        json!({"window_messages": 10_000, "window_ms": 120_000})
    );
    for topic in ["small", "plain"] {
        assert_eq!(once(&http, &server, topic, "k").await, json!({"offset": 0}));
        bare(&http, &server, topic).await;
    }
    let repeat = json!({"offset": 0, "duplicate": true});
    assert_eq!(once(&http, &server, "small", "k").await, repeat);
    server.kill();

    let args = ["--fsync", "always", "--idempotency-window-ms", "60000"];
    let server = ServerProcess::start(dir.path(), &args);
    assert_eq!(
        window(&http, &server, "small").await,
        json!({"window_messages": 2, "window_ms": 60_000})
    );
    assert_eq!(once(&http, &server, "small", "k").await, repeat);
    bare(&http, &server, "small").await;
    // Offset 0 is no longer among small's last 2 messages: stored again.
    assert_eq!(
        once(&http, &server, "small", "k").await,
        json!({"offset": 3})
    );
    bare(&http, &server, "plain").await;
    assert_eq!(once(&http, &server, "plain", "k").await, repeat);
}

// Proves every bad window is a 400 `invalid_argument` (or `invalid_body` for a wrong
// type or unknown field) naming the field, and creates nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_windows_are_refused_by_name() {
    let dir = temp_dir();
    let http = reqwest::Client::new();
    let server = ServerProcess::start(dir.path(), &[]);
    let cases = [
        (json!({"window_messages": 0}), "idempotency.window_messages"),
        (
            json!({"window_messages": 1_000_001}),
            "idempotency.window_messages",
        ),
        (json!({"window_ms": 0}), "idempotency.window_ms"),
        (
            json!({"window_ms": 604_800_001_u64}),
            "idempotency.window_ms",
        ),
        (json!({"window_ms": "soon"}), "idempotency.window_ms"),
        (json!({"window_ms": 1.5}), "idempotency.window_ms"),
        (json!({"window": 5}), "window"),
        (json!([5]), "idempotency"),
    ];
    for (window, field) in cases {
        let body = json!({"idempotency": window});
        let (status, error) = send(http.put(server.at("/v1/topics/t")).json(&body)).await;
        assert_eq!(status, 400, "{body}: {error}");
        let code = error["error"].as_str().unwrap();
        assert!(
            code == "invalid_argument" || code == "invalid_body",
            "{body}: {error}"
        );
        let message = error["message"].as_str().unwrap();
        assert!(message.contains(field), "{body}: {message}");
    }
    let (status, _) = send(http.get(server.at("/v1/topics/t"))).await;
    assert_eq!(status, 404, "nothing was created");
}

// Proves `topic create --idempotency-window-messages/--idempotency-window-ms` sets the
// topic's window, `topic info` shows it (as JSON and in words), and a value out of range
// fails naming the field.
#[test]
fn the_cli_creates_a_topic_with_its_window() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "never"]);
    let run = |args: &[&str]| cli_support::mailroom(&server.url, None, args, b"");
    let created = run(&[
        "--json",
        "topic",
        "create",
        "t",
        "--idempotency-window-messages",
        "50",
        "--idempotency-window-ms",
        "9000",
    ]);
    assert_eq!(
        cli_support::documents(&created),
        [json!({"topic": "t", "created": true})]
    );
    let info = cli_support::documents(&run(&["--json", "topic", "info", "t"]));
    assert_eq!(
        info[0]["idempotency"],
        json!({"window_messages": 50, "window_ms": 9000})
    );
    let words = String::from_utf8(run(&["topic", "info", "t"]).stdout).unwrap();
    assert!(
        words.contains("idempotency window 50 messages, 9000 ms"),
        "{words}"
    );
    let bad = run(&["topic", "create", "u", "--idempotency-window-ms", "0"]);
    assert!(!bad.status.success());
    let stderr = String::from_utf8_lossy(&bad.stderr).into_owned();
    assert!(stderr.contains("idempotency.window_ms"), "{stderr}");
}
