//! The token rule on every route of the OpenAPI document (so a new route is covered
//! without a new test): with a token configured, every operation of a `/v1` route
//! answers 401 without it and gets past the check with it, and the operations routes
//! stay open. The router finds the token's routes by their `/v1/` prefix
//! (`mailroom_server::app::V1_PREFIX`), so the split of the routes is checked too.
//!
//! The router runs in-process over a temporary store (`tower::ServiceExt::oneshot`).

mod embedded_support;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use axum::Router;
use mailroom_server::app::V1_PREFIX;
use mailroom_server::routes::routes;
use mailroom_server::Config;
use tower::ServiceExt as _;

const TOKEN: &str = "s3cret";

fn server() -> (tempfile::TempDir, Router) {
    embedded_support::router_over(Config {
        token: Some(TOKEN.to_owned()),
        ..embedded_support::config()
    })
}

/// Every operation of the document, with its path's names filled in, and whether it is
/// a `/v1` route (one the token guards).
fn operations() -> Vec<(Method, String, bool)> {
    embedded_support::operations()
        .into_iter()
        .map(|operation| {
            let guarded = operation.path.starts_with(V1_PREFIX);
            (operation.method, operation.uri, guarded)
        })
        .collect()
}

async fn status(app: &Router, method: Method, uri: &str, token: Option<&str>) -> StatusCode {
    let mut request = Request::builder().method(method).uri(uri);
    if let Some(token) = token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let request = request.body(Body::empty()).unwrap();
    app.clone().oneshot(request).await.unwrap().status()
}

// Proves the prefix names exactly the token's routes: every `/v1` route starts with it,
// and no operations route does.
#[test]
fn the_prefix_is_the_v1_routes() {
    let split = routes(1 << 20);
    let v1 = split.v1.get_openapi().paths.paths.clone();
    let open = split.operations.get_openapi().paths.paths.clone();
    assert!(v1.len() > 20, "{:?}", v1.keys());
    for path in v1.keys() {
        assert!(path.starts_with(V1_PREFIX), "{path}");
    }
    assert!(!open.is_empty());
    for path in open.keys() {
        assert!(!path.starts_with(V1_PREFIX), "{path}");
    }
}

// Proves every `/v1` operation refuses a request without the token or with a wrong one
// (401) and lets the right one through (whatever the handler then answers, not 401),
// and that the operations routes answer without it.
#[tokio::test]
async fn every_v1_operation_needs_the_token() {
    let (_dir, app) = server();
    let found = operations();
    assert!(found.iter().filter(|(.., guarded)| *guarded).count() > 30);
    for (method, uri, guarded) in found {
        let anonymous = status(&app, method.clone(), &uri, None).await;
        let wrong = status(&app, method.clone(), &uri, Some("wrong")).await;
        let right = status(&app, method.clone(), &uri, Some(TOKEN)).await;
        assert_ne!(right, StatusCode::UNAUTHORIZED, "{method} {uri}");
        if guarded {
            assert_eq!(anonymous, StatusCode::UNAUTHORIZED, "{method} {uri}");
            assert_eq!(wrong, StatusCode::UNAUTHORIZED, "{method} {uri}");
        } else {
            assert_eq!(anonymous, StatusCode::OK, "{method} {uri}");
        }
    }
}
