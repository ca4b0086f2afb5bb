//! How the server's refusals read: every 4xx a client can cause with bad input answers
//! its stable code with one sentence that says what was wrong and what is allowed, names
//! the field as the client sent it, shows the offending value, never says a prefix twice
//! ("invalid argument: invalid argument: ...") and never names a Rust constant or type.
//! The same mistake reads the same on every route that can make it.
//!
//! The router runs in-process over a temporary store; requests go through it with
//! `tower::ServiceExt::oneshot`, as HTTP would deliver them (with a Content-Length).

use axum::body::Body;
use axum::http::{header, Method, Request};
use axum::Router;
use http_body_util::BodyExt as _;
use mailroom_server::config::FsyncPolicy;
use mailroom_server::state::AppState;
use mailroom_server::{app::router, server::store_options, Config};
use serde_json::Value;
use tower::ServiceExt as _;

// A crate root looks for its modules beside it; this one keeps its own in its own folder.
#[path = "server_messages/cases.rs"]
mod cases;

use cases::{group_cases, other_cases};

/// The payload limit of the server under test, small so a test can exceed it cheaply.
const PAYLOAD_BYTES_MAX: u64 = 1024;

/// The group every case uses: topic `t`, group `g`, offset 0 in flight at attempt 1.
const GROUP: &str = "/v1/topics/t/groups/g";

/// A server over a fresh store with `token`, if any; keep the directory for the test.
fn app(token: Option<&str>) -> (tempfile::TempDir, Router) {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        fsync: FsyncPolicy::Never,
        payload_bytes_max: PAYLOAD_BYTES_MAX,
        token: token.map(str::to_owned),
        ..Config::default()
    };
    let store = mailroom_store::Store::open(dir.path(), store_options(&config)).unwrap();
    (dir, router(AppState::new(store, config)))
}

/// Sends a request (with a Content-Length when it has a body, as HTTP clients do) and
/// returns the status and the JSON body.
async fn send(app: &Router, method: Method, uri: &str, body: Vec<u8>) -> (u16, Value) {
    let mut request = Request::builder().method(method).uri(uri);
    if !body.is_empty() {
        request = request.header(header::CONTENT_LENGTH, body.len());
    }
    let response = app
        .clone()
        .oneshot(request.body(Body::from(body)).unwrap())
        .await
        .unwrap();
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// Topic `t` with one message, group `g` with it in flight, channel `c` with one slot.
async fn populate(app: &Router) {
    let steps = [
        (Method::PUT, "/v1/topics/t".to_owned(), ""),
        (Method::PUT, GROUP.to_owned(), r#"{"max_attempts":2}"#),
        (Method::POST, "/v1/topics/t/messages".to_owned(), "x"),
        (Method::POST, format!("{GROUP}/poll"), ""),
        (
            Method::PUT,
            "/v1/channels/c".to_owned(),
            r#"{"max_subscribers":1}"#,
        ),
    ];
    for (method, uri, body) in steps {
        let (status, value) = send(app, method, &uri, body.into()).await;
        assert!(status < 300, "populating {uri}: {status} {value}");
    }
}

/// Checks the rules every message keeps, whatever the route.
fn check_reads_well(what: &str, code: &str, message: &str) {
    assert!(!message.is_empty(), "{what}: empty message");
    // One sentence: no line break, and no second sentence after a full stop.
    assert!(!message.contains('\n'), "{what}: {message}");
    let second_sentence = message
        .split(". ")
        .skip(1)
        .any(|rest| rest.starts_with(|c: char| c.is_ascii_uppercase()));
    assert!(!second_sentence, "{what}: two sentences: {message}");
    // No prefix said twice, and none that only repeats the code in words.
    let lower = message.to_lowercase();
    assert!(
        !lower.contains("invalid argument: invalid argument"),
        "{what}: {message}"
    );
    assert!(
        !lower.starts_with(&format!("{}:", code.replace('_', " "))),
        "{what}: the message repeats its code: {message}"
    );
    let parts: Vec<&str> = message.split(": ").collect();
    assert!(
        !parts.windows(2).any(|pair| pair[0] == pair[1]),
        "{what}: {message}"
    );
    // No internals: constants, paths, type names.
    for internal in ["_MAX", "::", "Error", "enum ", "struct ", "Option<", "Vec<"] {
        assert!(
            !message.contains(internal),
            "{what}: {internal:?} in {message}"
        );
    }
    let constant = message
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .any(|word| {
            word.contains('_')
                && word.chars().any(|c| c.is_ascii_uppercase())
                && !word.chars().any(|c| c.is_ascii_lowercase())
        });
    assert!(!constant, "{what}: a constant's name in {message}");
}

// Proves each bad request gets its documented status and stable code, and a message that
// reads as one sentence, repeats no prefix, names no internal constant or type, and
// contains the field, the limit and the offending value.
#[tokio::test]
async fn every_refusal_reads_well() {
    let (_dir, app) = app(None);
    populate(&app).await;
    for case in group_cases().into_iter().chain(other_cases()) {
        let what = format!("{} {}", case.method, case.uri);
        let (status, value) = send(&app, case.method, &case.uri, case.body).await;
        assert_eq!(
            (status, value["error"].as_str()),
            (case.status, Some(case.code)),
            "{what}: {value}"
        );
        let message = value["message"].as_str().unwrap_or_default();
        check_reads_well(&what, case.code, message);
        for text in &case.says {
            assert!(
                message.contains(text.as_str()),
                "{what}: no {text:?} in {message}"
            );
        }
    }
}

// Proves a refusal the library makes (a consumer, a nack's options) reads the same on
// every route that can make it: poll by query, poll by body, raw poll and batch poll;
// nack and nack/batch.
#[tokio::test]
async fn one_mistake_reads_the_same_on_every_route() {
    let (_dir, app) = app(None);
    populate(&app).await;
    let g = GROUP;
    let long = "c".repeat(129);
    let consumer_body = format!(r#"{{"consumer":"{long}"}}"#);
    let batch_body = format!(r#"{{"max":1,"consumer":"{long}"}}"#);
    let reason = "r".repeat(1025);
    let groups: Vec<Vec<(String, String)>> = vec![
        vec![
            (format!("{g}/poll?consumer={long}"), String::new()),
            (format!("{g}/poll"), consumer_body.clone()),
            (format!("{g}/poll/raw?consumer={long}"), String::new()),
            (format!("{g}/poll/raw"), consumer_body),
            (format!("{g}/poll/batch"), batch_body),
        ],
        vec![
            (format!("{g}/poll?consumer="), String::new()),
            (
                format!("{g}/poll/batch"),
                r#"{"max":1,"consumer":""}"#.to_owned(),
            ),
        ],
        vec![
            (
                format!("{g}/nack"),
                r#"{"offset":0,"attempt":1,"delay_ms":604800001}"#.into(),
            ),
            (
                format!("{g}/nack/batch"),
                r#"{"deliveries":[{"offset":0,"attempt":1}],"delay_ms":604800001}"#.into(),
            ),
        ],
        vec![
            (
                format!("{g}/nack"),
                format!(r#"{{"offset":0,"attempt":1,"reason":"{reason}"}}"#),
            ),
            (
                format!("{g}/nack/batch"),
                format!(r#"{{"deliveries":[{{"offset":0,"attempt":1}}],"reason":"{reason}"}}"#),
            ),
        ],
    ];
    for routes in groups {
        let mut messages = Vec::new();
        for (uri, body) in &routes {
            let (status, value) = send(&app, Method::POST, uri, body.clone().into()).await;
            assert_eq!(
                (status, value["error"].as_str()),
                (400, Some("invalid_argument")),
                "{uri}: {value}"
            );
            let message = value["message"].as_str().unwrap().to_owned();
            check_reads_well(uri, "invalid_argument", &message);
            messages.push(message);
        }
        assert!(
            messages.iter().all(|message| *message == messages[0]),
            "{routes:?}: {messages:#?}"
        );
    }
    // Nothing above changed the delivery in flight.
    let (status, value) = send(&app, Method::GET, g, Vec::new()).await;
    assert_eq!(
        (status, &value["in_flight"]["attempt"]),
        (200, &Value::from(1))
    );
}

// Proves an oversized body sent without a Content-Length (chunked, say) is refused with
// the route's limit in the message, though its own length is unknown.
#[tokio::test]
async fn oversized_body_of_unknown_length_states_the_limit() {
    let (_dir, app) = app(None);
    populate(&app).await;
    let uri = format!("{GROUP}/ack");
    let request = Request::post(&uri)
        .body(Body::from(vec![b' '; 70_000]))
        .unwrap();
    assert!(request.headers().get(header::CONTENT_LENGTH).is_none());
    let response = app.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), 413);
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let value: Value = serde_json::from_slice(&bytes).unwrap();
    let message = value["message"].as_str().unwrap();
    check_reads_well(&uri, "payload_too_large", message);
    assert!(message.contains("65536 bytes"), "{message}");
}

// Proves the refusals outside the request's own values read well too: a missing or wrong
// token, and a channel whose subscriber slots are taken.
#[tokio::test]
async fn refusals_of_the_caller_read_well() {
    let (_dir, app) = app(Some("s3cret"));
    let (status, value) = send(&app, Method::GET, "/v1/topics", Vec::new()).await;
    assert_eq!(
        (status, value["error"].as_str()),
        (401, Some("unauthorized"))
    );
    check_reads_well(
        "no token",
        "unauthorized",
        value["message"].as_str().unwrap(),
    );

    let (_dir, app) = app_without_token_with_channel().await;
    // The first subscriber holds the only slot for as long as its stream is open.
    let first = Request::get("/v1/channels/c/events")
        .body(Body::empty())
        .unwrap();
    let held = app.clone().oneshot(first).await.unwrap();
    assert_eq!(held.status(), 200);
    let (status, value) = send(&app, Method::GET, "/v1/channels/c/events", Vec::new()).await;
    assert_eq!(
        (status, value["error"].as_str()),
        (409, Some("subscriber_limit"))
    );
    let message = value["message"].as_str().unwrap();
    check_reads_well("second subscriber", "subscriber_limit", message);
    assert!(message.contains("(1)"), "{message}");
    drop(held);
}

/// A server without a token, with channel `c` of one subscriber slot.
async fn app_without_token_with_channel() -> (tempfile::TempDir, Router) {
    let (dir, app) = app(None);
    let body = r#"{"max_subscribers":1}"#;
    let (status, _) = send(&app, Method::PUT, "/v1/channels/c", body.into()).await;
    assert_eq!(status, 201);
    (dir, app)
}
