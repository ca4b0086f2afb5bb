//! The browser rules for origins: CORS for the `--cors-origin` list (preflight, headers
//! on every kind of route, none for other origins), and the 403 `forbidden_origin`
//! refusal of cross-site writes and stream opens, on every writing route of the API
//! (taken from the OpenAPI document, so a new route is covered without a new test),
//! with nothing changed afterwards. Requests without `Origin` (curl) still work.
//!
//! The router runs in-process over a temporary store (`tower::ServiceExt::oneshot`).

mod embedded_support;

use axum::body::Body;
use axum::http::{header, HeaderMap, Method, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt as _;
use mailroom_server::Config;
use serde_json::Value;
use tower::ServiceExt as _;

/// The origin the servers under test allow.
const ALLOWED: &str = "http://app.example:8080";
/// An origin they do not.
const FOREIGN: &str = "http://evil.example";

/// A server over a fresh store allowing `origins`, with topic `t` (one message), group
/// `g` and channel `c`.
async fn server(origins: &[&str]) -> (tempfile::TempDir, Router) {
    let (dir, app) = embedded_support::router_over(Config {
        cors_origins: origins.iter().map(|origin| (*origin).to_owned()).collect(),
        ..embedded_support::config()
    });
    for (method, uri, body) in [
        (Method::PUT, "/v1/topics/t", ""),
        (Method::POST, "/v1/topics/t/messages", "first"),
        (
            Method::PUT,
            "/v1/topics/t/groups/g",
            r#"{"max_attempts": 3}"#,
        ),
        (Method::PUT, "/v1/channels/c", "{}"),
    ] {
        let (status, _, _) = send(&app, request(method, uri, &[], body)).await;
        assert!(status.is_success(), "{uri}: {status}");
    }
    (dir, app)
}

fn request(method: Method, uri: &str, headers: &[(&str, &str)], body: &str) -> Request<Body> {
    let mut builder = Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder = builder.header(header::CONTENT_LENGTH, body.len());
    builder.body(Body::from(body.to_owned())).unwrap()
}

/// Sends and returns the status, the headers and the JSON body (`Null` if none). A
/// stream's body is not read.
async fn send(app: &Router, request: Request<Body>) -> (StatusCode, HeaderMap, Value) {
    let response = app.clone().oneshot(request).await.unwrap();
    let (status, headers) = (response.status(), response.headers().clone());
    let streaming = headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|value| value.as_bytes().starts_with(b"text/event-stream"));
    if streaming {
        return (status, headers, Value::Null);
    }
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, headers, body)
}

fn cors_headers(headers: &HeaderMap) -> Vec<String> {
    headers
        .keys()
        .map(|name| name.as_str().to_owned())
        .filter(|name| name.starts_with("access-control-"))
        .collect()
}

/// Every writing operation of the document, with its path's names filled in.
fn writing_routes() -> Vec<(Method, String)> {
    let routes: Vec<(Method, String)> = embedded_support::operations()
        .into_iter()
        .filter(|operation| operation.method != Method::GET)
        .map(|operation| (operation.method, operation.uri))
        .collect();
    assert!(
        routes.len() > 15,
        "the document lists the writes: {routes:?}"
    );
    routes
}

/// What a write could change: the topic (its end offset and groups), the group and the
/// channels, as the API shows them.
async fn observed(app: &Router) -> Vec<Value> {
    let mut seen = Vec::new();
    for uri in [
        "/v1/topics/t",
        "/v1/topics/t/groups/g",
        "/v1/channels",
        "/v1/topics",
    ] {
        let (status, _, body) = send(app, request(Method::GET, uri, &[], "")).await;
        assert_eq!(status, StatusCode::OK, "{uri}");
        seen.push(body);
    }
    seen
}

// Proves the preflight of a listed origin is answered 204 with the methods, headers and
// max-age a browser needs, and that of any other origin without a CORS header.
#[tokio::test]
async fn preflights_answer_listed_origins_only() {
    let (_dir, app) = server(&[ALLOWED]).await;
    let preflight = |origin| {
        let headers = [
            ("origin", origin),
            ("access-control-request-method", "POST"),
            (
                "access-control-request-headers",
                "authorization, content-type, idempotency-key",
            ),
        ];
        request(Method::OPTIONS, "/v1/topics/t/messages", &headers, "")
    };
    let (status, headers, _) = send(&app, preflight(ALLOWED)).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(headers["access-control-allow-origin"], ALLOWED);
    let methods = headers["access-control-allow-methods"].to_str().unwrap();
    for method in ["GET", "POST", "PUT", "PATCH", "DELETE"] {
        assert!(methods.contains(method), "{methods}");
    }
    let allowed = headers["access-control-allow-headers"].to_str().unwrap();
    for name in ["authorization", "content-type", "idempotency-key"] {
        assert!(allowed.contains(name), "{allowed}");
    }
    assert_eq!(headers["access-control-max-age"], "600");

    let (status, headers, _) = send(&app, preflight(FOREIGN)).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(cors_headers(&headers), Vec::<String>::new());
}

// Proves a listed origin gets the CORS headers on /v1 routes, the operations routes and
// the SSE stream, and error answers too; another origin gets none; without a list there
// is no CORS at all.
#[tokio::test]
async fn listed_origins_get_cors_headers_everywhere() {
    let (_dir, app) = server(&[ALLOWED]).await;
    for uri in [
        "/v1/topics",
        "/v1/topics/t",
        "/v1/topics/missing",
        "/metrics",
        "/healthz",
        "/openapi.json",
        "/v1/channels/c/events",
    ] {
        let listed = request(Method::GET, uri, &[("origin", ALLOWED)], "");
        let (status, headers, _) = send(&app, listed).await;
        assert_eq!(
            headers["access-control-allow-origin"], ALLOWED,
            "{uri}: {status}"
        );
        let foreign = request(Method::GET, uri, &[("origin", FOREIGN)], "");
        let (_, headers, _) = send(&app, foreign).await;
        assert_eq!(cors_headers(&headers), Vec::<String>::new(), "{uri}");
    }
    let (_dir, closed) = server(&[]).await;
    let (_, headers, _) = send(
        &closed,
        request(Method::GET, "/v1/topics", &[("origin", ALLOWED)], ""),
    )
    .await;
    assert_eq!(cors_headers(&headers), Vec::<String>::new());
}

// Proves every writing route refuses a simple cross-site request (text/plain, a form,
// or only Sec-Fetch-Site) with 403 forbidden_origin and that nothing changed.
#[tokio::test]
async fn simple_cross_site_writes_change_nothing() {
    let (_dir, app) = server(&[ALLOWED]).await;
    let before = observed(&app).await;
    let simple: [&[(&str, &str)]; 4] = [
        &[("origin", FOREIGN), ("content-type", "text/plain")],
        &[
            ("origin", FOREIGN),
            ("content-type", "application/x-www-form-urlencoded"),
        ],
        &[
            ("origin", "null"),
            ("content-type", "multipart/form-data; boundary=x"),
        ],
        &[
            ("sec-fetch-site", "cross-site"),
            ("content-type", "text/plain"),
        ],
    ];
    for (method, uri) in writing_routes() {
        for headers in simple {
            let attempt = request(method.clone(), &uri, headers, r#"{"offset":0,"attempt":1}"#);
            let (status, _, body) = send(&app, attempt).await;
            assert_eq!(
                status,
                StatusCode::FORBIDDEN,
                "{method} {uri} {headers:?}: {body}"
            );
            assert_eq!(body["error"], "forbidden_origin", "{method} {uri}");
        }
    }
    assert_eq!(observed(&app).await, before);
}

// Proves writes from a listed origin, the server's own origin and without any Origin
// (curl -d) go through.
#[tokio::test]
async fn allowed_and_originless_writes_go_through() {
    let (_dir, app) = server(&[ALLOWED]).await;
    let publishers: [&[(&str, &str)]; 4] = [
        &[("origin", ALLOWED), ("content-type", "text/plain")],
        &[
            ("host", "broker.example:7070"),
            ("origin", "http://broker.example:7070"),
        ],
        &[("sec-fetch-site", "same-origin")],
        &[],
    ];
    for (index, headers) in publishers.into_iter().enumerate() {
        let publish = request(Method::POST, "/v1/topics/t/messages", headers, "x");
        let (status, _, body) = send(&app, publish).await;
        assert_eq!(status, StatusCode::CREATED, "{headers:?}: {body}");
        assert_eq!(body["offset"], index + 1);
    }
}

// Proves stream opens (SSE, and the WebSocket handshakes of channels and publish
// streams) are refused from a foreign origin and let through from a listed one.
#[tokio::test]
async fn streams_check_the_origin() {
    let (_dir, app) = server(&[ALLOWED]).await;
    let handshake = [
        ("connection", "upgrade"),
        ("upgrade", "websocket"),
        ("sec-websocket-version", "13"),
        ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
    ];
    for uri in [
        "/v1/channels/c/ws",
        "/v1/topics/t/publish/ws",
        "/v1/channels/c/events",
    ] {
        for origin in [FOREIGN, "null"] {
            let mut headers = handshake.to_vec();
            headers.push(("origin", origin));
            let (status, _, body) = send(&app, request(Method::GET, uri, &headers, "")).await;
            assert_eq!(
                (status, &body["error"]),
                (StatusCode::FORBIDDEN, &Value::from("forbidden_origin")),
                "{uri}"
            );
        }
        let sneaky = [("sec-fetch-site", "cross-site")];
        let (status, _, _) = send(&app, request(Method::GET, uri, &sneaky, "")).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{uri}");
        let mut headers = handshake.to_vec();
        headers.push(("origin", ALLOWED));
        let (status, _, _) = send(&app, request(Method::GET, uri, &headers, "")).await;
        assert_ne!(status, StatusCode::FORBIDDEN, "{uri}");
    }
    let events = request(
        Method::GET,
        "/v1/channels/c/events",
        &[("origin", ALLOWED)],
        "",
    );
    let (status, _, _) = send(&app, events).await;
    assert_eq!(status, StatusCode::OK);
    // Reads that open nothing stay readable (their answers reach no foreign page).
    let read = request(Method::GET, "/v1/topics/t", &[("origin", FOREIGN)], "");
    assert_eq!(send(&app, read).await.0, StatusCode::OK);
}

// Proves the document lists the 403 answer on every write and stream, and the ticket
// parameter on the streams.
#[test]
fn the_document_names_the_rules() {
    let document = serde_json::to_value(mailroom_server::openapi::document()).unwrap();
    for (method, uri) in writing_routes() {
        let path = document["paths"]
            .as_object()
            .unwrap()
            .iter()
            .find(|(path, _)| {
                path.replace("{topic}", "t")
                    .replace("{group}", "g")
                    .replace("{channel}", "c")
                    == uri
            })
            .unwrap()
            .1;
        let operation = &path[method.as_str().to_ascii_lowercase()];
        assert!(operation["responses"]["403"].is_object(), "{method} {uri}");
    }
    for stream in mailroom_server::browser::origins::STREAM_ROUTES {
        let get = &document["paths"][stream]["get"];
        assert!(get["responses"]["403"].is_object(), "{stream}");
        let parameters = get["parameters"].as_array().unwrap();
        assert!(parameters.iter().any(|p| p["name"] == "ticket"), "{stream}");
    }
}
