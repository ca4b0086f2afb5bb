//! The web console is served from the binary: `GET /` and `GET /ui` redirect to `ui/`
//! (relative, for a path prefix), `/ui/` is the page, every asset has its content type
//! and the page's security headers, and the page learns whether to ask for a token.

use std::path::Path;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{header, HeaderMap, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt as _;
use mailroom_server::console::ASSETS;
use mailroom_server::{app::router, state::AppState, Config};
use mailroom_store::storage::SimStorage;
use mailroom_store::{Store, StoreOptions};
use tower::ServiceExt as _;

fn app(config: Config) -> Router {
    let storage = Arc::new(SimStorage::new());
    let store = Store::open_with(storage, Path::new("/data"), StoreOptions::default()).unwrap();
    router(AppState::new(store, config))
}

async fn get(app: &Router, uri: &str) -> (StatusCode, HeaderMap, Vec<u8>) {
    let request = Request::get(uri).body(Body::empty()).unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let body = response
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    (status, headers, body)
}

fn content_type(headers: &HeaderMap) -> &str {
    headers[header::CONTENT_TYPE].to_str().unwrap()
}

// Proves the root and /ui redirect to ui/ with a relative Location.
#[tokio::test]
async fn root_redirects_to_the_console() {
    let app = app(Config::default());
    for uri in ["/", "/ui"] {
        let (status, headers, _) = get(&app, uri).await;
        assert_eq!(status, StatusCode::SEE_OTHER, "{uri}");
        assert_eq!(headers[header::LOCATION], "ui/", "{uri}");
    }
}

// Proves /ui/ is the page and each asset is served whole with its content type, a
// policy that keeps the page to its own origin, and no sniffing.
#[tokio::test]
async fn every_asset_has_its_content_type() {
    let app = app(Config::default());
    let (status, headers, body) = get(&app, "/ui/").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type(&headers), "text/html; charset=utf-8");
    assert!(String::from_utf8(body)
        .unwrap()
        .contains(r#"<script type="module" src="app.js">"#));
    let expected = [
        ("html", "text/html; charset=utf-8"),
        ("css", "text/css; charset=utf-8"),
        ("js", "text/javascript; charset=utf-8"),
        ("svg", "image/svg+xml"),
    ];
    for asset in ASSETS {
        let (status, headers, body) = get(&app, &format!("/ui/{}", asset.name)).await;
        assert_eq!(status, StatusCode::OK, "{}", asset.name);
        let extension = asset.name.rsplit('.').next().unwrap();
        let wanted = expected.iter().find(|(e, _)| *e == extension).unwrap().1;
        assert_eq!(content_type(&headers), wanted, "{}", asset.name);
        assert_eq!(body, asset.body.as_bytes(), "{}", asset.name);
        let policy = headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
        assert!(policy.contains("default-src 'none'") && policy.contains("connect-src 'self'"));
        assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    }
}

// Proves every module the page imports is one the server serves (a missing file would
// fail only in a browser).
#[test]
fn every_import_is_served() {
    for asset in ASSETS.iter().filter(|asset| asset.name.ends_with(".js")) {
        for line in asset
            .body
            .lines()
            .filter(|line| line.starts_with("import "))
        {
            let imported = line.rsplit("\"./").next().unwrap().trim_end_matches("\";");
            assert!(
                ASSETS.iter().any(|served| served.name == imported),
                "{} imports {imported}, which is not served",
                asset.name
            );
        }
    }
}

// Proves the console's files need no token, /v1 still does, and the page is told so.
#[tokio::test]
async fn the_console_needs_no_token_but_says_one_is_needed() {
    let guarded = app(Config {
        token: Some("secret".into()),
        ..Config::default()
    });
    let (status, _, _) = get(&guarded, "/ui/app.js").await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, _) = get(&guarded, "/v1/topics").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, headers, body) = get(&guarded, "/ui/console.json").await;
    assert_eq!(status, StatusCode::OK);
    assert!(content_type(&headers).starts_with("application/json"));
    assert_eq!(body, br#"{"token_required":true}"#);
    let (_, _, body) = get(&app(Config::default()), "/ui/console.json").await;
    assert_eq!(body, br#"{"token_required":false}"#);
}

// Proves an unknown console file is a JSON 404 like any unknown route.
#[tokio::test]
async fn an_unknown_file_is_a_json_404() {
    let (status, headers, body) = get(&app(Config::default()), "/ui/secrets.txt").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(content_type(&headers).starts_with("application/json"));
    assert!(String::from_utf8(body).unwrap().contains("not_found"));
}
