//! Requests the server takes as a person would write them by hand: an empty body on a
//! route whose fields are all optional, and the bearer scheme in any case.

use std::path::Path;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt as _;
use mailroom_server::{app::router, state::AppState, Config};
use mailroom_store::storage::SimStorage;
use mailroom_store::{Store, StoreOptions};
use tower::ServiceExt as _;

fn app(token: Option<&str>) -> Router {
    let storage = Arc::new(SimStorage::new());
    let store = Store::open_with(storage, Path::new("/data"), StoreOptions::default()).unwrap();
    let config = Config {
        token: token.map(str::to_owned),
        ..Config::default()
    };
    router(AppState::new(store, config))
}

async fn call(
    app: &Router,
    method: &str,
    uri: &str,
    body: &str,
    auth: Option<&str>,
) -> (StatusCode, String) {
    let mut request = Request::builder().method(method).uri(uri);
    if let Some(auth) = auth {
        request = request.header(header::AUTHORIZATION, auth);
    }
    let response = app
        .clone()
        .oneshot(request.body(Body::from(body.to_owned())).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

// Proves an empty body is taken as `{}` on the JSON routes whose fields are all
// optional, and still refused where a field is required.
#[tokio::test]
async fn empty_body_is_the_empty_object() {
    let app = app(None);
    assert_eq!(
        call(&app, "PUT", "/v1/topics/t", "", None).await.0,
        StatusCode::CREATED
    );
    let (status, body) = call(&app, "PUT", "/v1/channels/x", "", None).await;
    assert!(status.is_success(), "{status} {body}");
    let (status, body) = call(&app, "PUT", "/v1/topics/t/groups/g", "", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.contains("malformed_json"), "{body}");
    let group = r#"{"max_attempts": 3}"#;
    assert_eq!(
        call(&app, "PUT", "/v1/topics/t/groups/g", group, None)
            .await
            .0,
        StatusCode::CREATED
    );
    // (`poll/batch` has a required `max`, so it is not one of these.)
    for route in [
        "/v1/topics/t/groups/g/poll",
        "/v1/topics/t/groups/g/dead-letters/redrive",
        "/v1/topics/t/groups/g/dead-letters/purge",
    ] {
        let (status, body) = call(&app, "POST", route, "", None).await;
        assert!(status.is_success(), "{route}: {status} {body}");
        let (status, body) = call(&app, "POST", route, "  \n", None).await;
        assert!(status.is_success(), "{route} (whitespace): {status} {body}");
    }
}

// Proves the bearer scheme is matched without regard to case (RFC 7235), and a wrong
// token or scheme is still refused.
#[tokio::test]
async fn bearer_scheme_in_any_case() {
    let app = app(Some("s3cret"));
    for auth in ["Bearer s3cret", "bearer s3cret", "BEARER s3cret"] {
        assert_eq!(
            call(&app, "GET", "/v1/topics", "", Some(auth)).await.0,
            StatusCode::OK,
            "{auth}"
        );
    }
    for auth in ["bearer wrong", "Basic s3cret"] {
        let (status, _) = call(&app, "GET", "/v1/topics", "", Some(auth)).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{auth}");
    }
}
