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

/// One bad request and what its answer must say.
struct Case {
    method: Method,
    uri: String,
    body: Vec<u8>,
    status: u16,
    code: &'static str,
    /// Texts the message must contain: the field, the offending value, the limit.
    says: Vec<String>,
}

fn case(
    method: Method,
    uri: impl Into<String>,
    body: impl Into<Vec<u8>>,
    (status, code): (u16, &'static str),
    says: &[&str],
) -> Case {
    Case {
        method,
        uri: uri.into(),
        body: body.into(),
        status,
        code,
        says: says.iter().map(|text| (*text).to_owned()).collect(),
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

/// Every bad request a client can send to the group routes, with what it must say.
fn group_cases() -> Vec<Case> {
    let g = GROUP;
    let long = "c".repeat(129);
    let put = |body: &str, says: &[&str]| {
        case(
            Method::PUT,
            "/v1/topics/t/groups/h",
            body.to_owned(),
            (400, "invalid_argument"),
            says,
        )
    };
    vec![
        put(
            r#"{"max_attempts":0}"#,
            &["max_attempts", "1..=1000000", "got 0"],
        ),
        put(r#"{"max_attempts":1000001}"#, &["max_attempts", "1000001"]),
        put(
            r#"{"max_attempts":1,"start":99}"#,
            &["start", "0..=1", "99"],
        ),
        put(
            r#"{"max_attempts":1,"lease_ms":0}"#,
            &["lease_ms", "604800000", "7 days", "got 0"],
        ),
        put(
            r#"{"max_attempts":1,"max_in_flight":0}"#,
            &["max_in_flight", "1..=65536", "got 0"],
        ),
        put(
            r#"{"max_attempts":1,"max_in_flight":65537}"#,
            &["max_in_flight", "65537"],
        ),
        put(
            r#"{"max_attempts":1,"backoff":{"kind":"fixed","delay_ms":604800001}}"#,
            &["backoff.delay_ms", "604800000", "604800001"],
        ),
        put(
            r#"{"max_attempts":1,"backoff":{"kind":"exponential","base_ms":10,"cap_ms":5}}"#,
            &["backoff.base_ms", "backoff.cap_ms", "10", "5"],
        ),
        put(
            r#"{"max_attempts":1,"backoff":{"kind":"exponential","base_ms":1,"cap_ms":604800001}}"#,
            &["backoff.cap_ms", "604800001"],
        ),
        case(
            Method::PUT,
            "/v1/topics/t/groups/h",
            r#"{"max_attempts":"3"}"#,
            (400, "invalid_body"),
            &["max_attempts", "\"3\""],
        ),
        case(
            Method::PUT,
            "/v1/topics/t/groups/h",
            r#"{"max_attempts":-1}"#,
            (400, "invalid_body"),
            &["max_attempts", "-1"],
        ),
        case(
            Method::PUT,
            "/v1/topics/t/groups/h",
            r#"{"max_attempts":1,"start":"middle"}"#,
            (400, "invalid_body"),
            &["start", "earliest"],
        ),
        case(
            Method::PUT,
            "/v1/topics/t/groups/h",
            r#"{"max_attempts":1,"colour":1}"#,
            (400, "invalid_body"),
            &["colour"],
        ),
        case(
            Method::PUT,
            "/v1/topics/t/groups/h",
            r#"{"max_attempts":1,"backoff":{"kind":"linear"}}"#,
            (400, "invalid_body"),
            &["backoff.kind", "linear"],
        ),
        case(
            Method::PUT,
            "/v1/topics/t/groups/h",
            "{",
            (400, "malformed_json"),
            &["request body"],
        ),
        case(
            Method::PUT,
            g,
            r#"{"max_attempts":2}"#,
            (409, "group_exists"),
            &["\"g\""],
        ),
        case(
            Method::PUT,
            "/v1/topics/nope/groups/h",
            r#"{"max_attempts":2}"#,
            (404, "unknown_topic"),
            &["\"nope\""],
        ),
        case(
            Method::POST,
            "/v1/topics/t/groups/nope/poll",
            "",
            (404, "unknown_group"),
            &["\"nope\""],
        ),
        case(
            Method::POST,
            format!("{g}/poll?consumer={long}"),
            "",
            (400, "invalid_argument"),
            &["consumer", "1..=128", "got 129"],
        ),
        case(
            Method::POST,
            format!("{g}/poll?consumer=a"),
            r#"{"consumer":"b"}"#,
            (400, "invalid_argument"),
            &["consumer", "\"a\"", "\"b\""],
        ),
        case(
            Method::POST,
            format!("{g}/poll?who=a"),
            "",
            (400, "bad_request"),
            &["who=a"],
        ),
        case(
            Method::POST,
            format!("{g}/poll/batch"),
            r#"{"max":0}"#,
            (400, "invalid_argument"),
            &["max", "1..=65536", "got 0"],
        ),
        case(
            Method::POST,
            format!("{g}/poll/batch"),
            r#"{"max":1,"wait_ms":30001}"#,
            (400, "invalid_argument"),
            &["wait_ms", "30 seconds", "30001"],
        ),
        case(
            Method::POST,
            format!("{g}/poll/batch"),
            r#"{"max":1,"ack":[{"offset":9223372036854775808,"attempt":1}]}"#,
            (400, "invalid_argument"),
            &["ack[0].offset", "9223372036854775808"],
        ),
        case(
            Method::POST,
            format!("{g}/poll/batch"),
            r#"{"max":1,"ack":[{"offset":"0"}]}"#,
            (400, "invalid_body"),
            &["ack[0].offset", "\"0\""],
        ),
        case(
            Method::POST,
            format!("{g}/ack"),
            r#"{"offset":0,"attempt":2}"#,
            (409, "not_owned"),
            &["offset 0 attempt 2", "offset 0 attempt 1"],
        ),
        case(
            Method::POST,
            format!("{g}/ack"),
            r#"{"offset":0}"#,
            (400, "invalid_body"),
            &["attempt"],
        ),
        case(
            Method::POST,
            format!("{g}/ack"),
            vec![b' '; 70_000],
            (413, "payload_too_large"),
            &["70000", "65536"],
        ),
        case(
            Method::POST,
            format!("{g}/nack"),
            r#"{"offset":0,"attempt":1,"kind":"maybe"}"#,
            (400, "invalid_body"),
            &["kind", "maybe"],
        ),
        case(
            Method::POST,
            format!("{g}/touch"),
            r#"{"offset":0,"attempt":2}"#,
            (409, "not_owned"),
            &["offset 0 attempt 2"],
        ),
        case(
            Method::POST,
            format!("{g}/ack/batch"),
            r#"{"deliveries":[]}"#,
            (400, "invalid_argument"),
            &["deliveries", "1..=65536", "got 0"],
        ),
        case(
            Method::POST,
            format!("{g}/nack/batch"),
            r#"{"deliveries":[{"offset":0,"attempt":2147483648}]}"#,
            (400, "invalid_argument"),
            &["deliveries[0].attempt", "2147483648"],
        ),
        case(
            Method::GET,
            format!("{g}/dead-letters?limit=0"),
            "",
            (400, "invalid_argument"),
            &["limit", "1..=10000", "got 0"],
        ),
        case(
            Method::GET,
            format!("{g}/dead-letters?limit=abc"),
            "",
            (400, "bad_request"),
            &["limit=abc"],
        ),
        case(
            Method::GET,
            format!("{g}/dead-letters?page=2"),
            "",
            (400, "bad_request"),
            &["page=2"],
        ),
        case(
            Method::POST,
            format!("{g}/dead-letters/redrive"),
            r#"{"from":5,"to":2}"#,
            (400, "invalid_argument"),
            &["from", "to", "5", "2"],
        ),
        case(
            Method::POST,
            format!("{g}/dead-letters/purge"),
            r#"{"to":9223372036854775808}"#,
            (400, "invalid_argument"),
            &["to", "9223372036854775808"],
        ),
        case(
            Method::DELETE,
            "/v1/topics/t/groups/nope",
            "",
            (404, "unknown_group"),
            &["\"nope\""],
        ),
    ]
}

/// Every bad request a client can send to the topic, channel and other routes.
fn other_cases() -> Vec<Case> {
    let batch = "/v1/topics/t/messages/batch";
    vec![
        case(
            Method::PUT,
            "/v1/topics/bad%20name",
            "",
            (400, "invalid_name"),
            &["topic name", "\"bad name\"", "1..=128"],
        ),
        case(
            Method::PUT,
            format!("/v1/topics/{}", "x".repeat(129)),
            "",
            (400, "invalid_name"),
            &["longer than 128 bytes", "…"],
        ),
        case(
            Method::GET,
            "/v1/topics/nope",
            "",
            (404, "unknown_topic"),
            &["\"nope\""],
        ),
        case(
            Method::DELETE,
            "/v1/topics/nope",
            "",
            (404, "unknown_topic"),
            &["\"nope\""],
        ),
        case(
            Method::POST,
            "/v1/topics/t/messages",
            vec![b'x'; 1025],
            (413, "payload_too_large"),
            &["1025", "1024"],
        ),
        case(
            Method::POST,
            batch,
            r#"{"messages":[]}"#,
            (400, "invalid_argument"),
            &["messages", "1..=10000", "got 0"],
        ),
        case(
            Method::POST,
            batch,
            r#"{"messages":[{"base64":"!"}]}"#,
            (400, "invalid_argument"),
            &["messages[0].base64"],
        ),
        case(
            Method::POST,
            batch,
            r#"{"messages":["a",7]}"#,
            (400, "invalid_body"),
            &["messages[1]", "base64"],
        ),
        case(
            Method::POST,
            batch,
            format!(r#"{{"messages":["{}"]}}"#, "y".repeat(1025)),
            (413, "payload_too_large"),
            &["messages[0]", "1025", "1024"],
        ),
        case(
            Method::POST,
            batch,
            "[1]",
            (400, "invalid_body"),
            &["array"],
        ),
        case(
            Method::PUT,
            "/v1/channels/d",
            r#"{"max_subscribers":0}"#,
            (400, "invalid_argument"),
            &["max_subscribers", "1..=10000", "got 0"],
        ),
        case(
            Method::PUT,
            "/v1/channels/d",
            r#"{"mailbox_capacity":65537}"#,
            (400, "invalid_argument"),
            &["mailbox_capacity", "65537"],
        ),
        case(
            Method::PUT,
            "/v1/channels/c",
            r#"{"max_subscribers":2}"#,
            (409, "channel_exists"),
            &["\"c\"", "max_subscribers 1"],
        ),
        case(
            Method::POST,
            "/v1/channels/c/messages",
            vec![b'x'; 1025],
            (413, "payload_too_large"),
            &["1025", "1024"],
        ),
        case(
            Method::POST,
            "/v1/channels/nope/messages",
            "x",
            (404, "unknown_channel"),
            &["\"nope\""],
        ),
        case(
            Method::GET,
            "/v1/channels/c/ws",
            "",
            (400, "not_websocket"),
            &["WebSocket"],
        ),
        case(
            Method::DELETE,
            "/v1/channels/nope",
            "",
            (404, "unknown_channel"),
            &["\"nope\""],
        ),
        case(
            Method::GET,
            "/v2/anything",
            "",
            (404, "not_found"),
            &["GET /v2/anything"],
        ),
        case(
            Method::DELETE,
            "/v1/topics",
            "",
            (405, "method_not_allowed"),
            &["DELETE", "/v1/topics"],
        ),
    ]
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
