//! Nested objects in request bodies are objects only: serde's derive would also fill a
//! struct (or an internally tagged enum) from an array, field by field, which the
//! documented schema does not allow. Each such field answers 400 `invalid_body` naming
//! it, and the object form is taken.

use std::path::Path;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt as _;
use mailroom_server::{app::router, state::AppState, Config};
use mailroom_store::storage::SimStorage;
use mailroom_store::{Store, StoreOptions};
use tower::ServiceExt as _;

fn app() -> Router {
    let storage = Arc::new(SimStorage::new());
    let store = Store::open_with(storage, Path::new("/data"), StoreOptions::default()).unwrap();
    store.create_topic("t").unwrap();
    store.topic("t").unwrap().create_group("g", 3).unwrap();
    router(AppState::new(store, Config::default()))
}

async fn call(app: &Router, method: &str, uri: &str, body: &str) -> (StatusCode, String) {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .body(Body::from(body.to_owned()))
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// Asserts `body` is refused with 400 `invalid_body` and a message naming `field`.
async fn refused(app: &Router, method: &str, uri: &str, body: &str, field: &str) {
    let (status, answer) = call(app, method, uri, body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
    assert!(answer.contains("\"invalid_body\""), "{body}: {answer}");
    assert!(
        answer.contains(&format!("field {field}")),
        "{body}: {answer} should name {field}"
    );
}

// Proves a group's backoff is an object only: `["fixed", 5]` is refused, naming
// `backoff`, and the object form is taken.
#[tokio::test]
async fn backoff_is_an_object_only() {
    let app = app();
    let uri = "/v1/topics/t/groups/b";
    for array in [r#"["fixed",5]"#, r#"["exponential",1,2]"#] {
        let body = format!(r#"{{"max_attempts":3,"backoff":{array}}}"#);
        refused(&app, "PUT", uri, &body, "backoff").await;
    }
    let body = r#"{"max_attempts":3,"backoff":{"kind":"fixed","delay_ms":5}}"#;
    let (status, answer) = call(&app, "PUT", uri, body).await;
    assert!(status.is_success(), "{status} {answer}");
}

// Proves delivery ids in batch bodies are objects only: `[offset, attempt]` is refused
// in ack/batch, nack/batch and poll/batch's `ack`, naming the item.
#[tokio::test]
async fn delivery_ids_are_objects_only() {
    let app = app();
    let base = "/v1/topics/t/groups/g";
    let ack = format!("{base}/ack/batch");
    let nack = format!("{base}/nack/batch");
    let poll = format!("{base}/poll/batch");
    refused(
        &app,
        "POST",
        &ack,
        r#"{"deliveries":[[0,1]]}"#,
        "deliveries[0]",
    )
    .await;
    refused(
        &app,
        "POST",
        &nack,
        r#"{"deliveries":[[0,1]]}"#,
        "deliveries[0]",
    )
    .await;
    refused(&app, "POST", &poll, r#"{"max":1,"ack":[[0,1]]}"#, "ack[0]").await;
    // The object forms get past decoding (to the state machine's own answer).
    let one = r#"{"deliveries":[{"offset":0,"attempt":1}]}"#;
    for uri in [&ack, &nack] {
        let (status, answer) = call(&app, "POST", uri, one).await;
        assert!(!answer.contains("invalid_body"), "{status} {answer}");
    }
    let body = r#"{"max":1,"ack":[{"offset":0,"attempt":1}]}"#;
    let (status, answer) = call(&app, "POST", &poll, body).await;
    assert!(status.is_success(), "{status} {answer}");
}

// Proves a batch message given as bytes is `{"base64": ...}` only: `["aGk="]` is refused,
// naming the message, and the object form is published.
#[tokio::test]
async fn base64_messages_are_objects_only() {
    let app = app();
    let uri = "/v1/topics/t/messages/batch";
    let (status, answer) = call(&app, "POST", uri, r#"{"messages":["a",["aGk="]]}"#).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert!(answer.contains("\"invalid_body\""), "{answer}");
    assert!(answer.contains("messages[1]"), "{answer}");
    let (status, answer) = call(&app, "POST", uri, r#"{"messages":[{"base64":"aGk="}]}"#).await;
    assert!(status.is_success(), "{status} {answer}");
}

// Proves retention stays an object only, on creation and on change.
#[tokio::test]
async fn retention_is_an_object_only() {
    let app = app();
    refused(
        &app,
        "PUT",
        "/v1/topics/r",
        r#"{"retention":[null]}"#,
        "retention",
    )
    .await;
    refused(
        &app,
        "PATCH",
        "/v1/topics/t",
        r#"{"retention":[null]}"#,
        "retention",
    )
    .await;
}
