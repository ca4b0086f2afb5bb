//! The web console: a small static app (plain JavaScript modules and one stylesheet,
//! no framework, no build step) over the JSON API, compiled into the binary.
//!
//! - `GET /` and `GET /ui` redirect to `ui/` (a relative `Location`, so the redirect
//!   stays under whatever path prefix a reverse proxy serves the broker at).
//! - `GET /ui/console.json` answers `{"token_required": bool}`, so the page knows
//!   whether to ask for the token before its first call.
//! - `GET /ui/` answers the page and `GET /ui/{asset}` each file of [`ASSETS`], with
//!   its content type, `Cache-Control: no-cache` and a `Content-Security-Policy` that
//!   lets the page load and connect to its own origin only (nothing from the internet).
//! - Every URL the page uses is relative (`../v1/...` from `ui/`), for the same reason.
//!
//! The console's routes need no token and are not in the OpenAPI document: they serve
//! the same files to everyone, and the page asks for the token (when the server has
//! one) before it calls `/v1`, sending it as `Authorization: Bearer` from
//! `sessionStorage`; its live tail opens `EventSource` with a ticket from
//! `POST /v1/tickets` ([`crate::browser::tickets`]).

use axum::extract::{Path, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::{Json, Router};

use crate::error::{ApiError, ErrorCode};
use crate::state::AppState;

/// One file of the console: its name under `/ui/`, content type and bytes.
#[derive(Debug, Clone, Copy)]
pub struct Asset {
    /// The file's name, as requested under `/ui/`.
    pub name: &'static str,
    /// The `Content-Type` it is served with.
    pub content_type: &'static str,
    /// The file itself, compiled in from `src/console/assets/`.
    pub body: &'static str,
}

macro_rules! asset {
    ($name:literal, $content_type:expr) => {
        Asset {
            name: $name,
            content_type: $content_type,
            body: include_str!(concat!("assets/", $name)),
        }
    };
}

const JS: &str = "text/javascript; charset=utf-8";

/// Every file of the console; `index.html` is also the answer to `/ui/`.
pub const ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("console.css", "text/css; charset=utf-8"),
    asset!("favicon.svg", "image/svg+xml"),
    asset!("app.js", JS),
    asset!("api.js", JS),
    asset!("format.js", JS),
    asset!("chart.js", JS),
    asset!("view.js", JS),
    asset!("overview.js", JS),
    asset!("topic.js", JS),
    asset!("messages.js", JS),
    asset!("group.js", JS),
    asset!("dead_letters.js", JS),
    asset!("channel.js", JS),
];

/// Only this origin's scripts, styles, images and API; no inline script, no frames.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
    style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
    form-action 'none'; frame-ancestors 'none'";

/// The console's routes: the redirects, the page and its assets.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use axum::body::Body;
/// use axum::http::{header, Request, StatusCode};
/// use tower::ServiceExt as _;
/// let store = mailroom_store::Store::open_with(
///     std::sync::Arc::new(mailroom_store::storage::SimStorage::new()),
///     std::path::Path::new("/data"),
///     Default::default(),
/// )
/// .unwrap();
/// let state = mailroom_server::state::AppState::new(store, Default::default());
/// let app = mailroom_server::console::router().with_state(state);
/// let request = Request::get("/ui/app.js").body(Body::empty()).unwrap();
/// let response = app.oneshot(request).await.unwrap();
/// assert_eq!(response.status(), StatusCode::OK);
/// assert!(response.headers()[header::CONTENT_TYPE].to_str().unwrap().starts_with("text/javascript"));
/// # }
/// ```
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(|| async { Redirect::to("ui/") }))
        .route("/ui", get(|| async { Redirect::to("ui/") }))
        .route("/ui/", get(|| async { serve("index.html") }))
        .route("/ui/console.json", get(settings))
        .route(
            "/ui/{asset}",
            get(|Path(name): Path<String>| async move { serve(&name) }),
        )
}

/// What the page needs to know before its first call: whether to ask for a token
/// (so it need not provoke a 401 to find out). Nothing secret: a 401 says the same.
async fn settings(State(state): State<AppState>) -> Response {
    let body = Json(serde_json::json!({ "token_required": state.config.token.is_some() }));
    (
        [(header::CACHE_CONTROL, HeaderValue::from_static("no-store"))],
        body,
    )
        .into_response()
}

/// The asset called `name`, or a JSON 404 like any unknown route.
fn serve(name: &str) -> Response {
    let Some(asset) = ASSETS.iter().find(|asset| asset.name == name) else {
        return ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            format!("the console has no file {}", crate::error::shown(name)),
        )
        .into_response();
    };
    let headers = [
        (
            header::CONTENT_TYPE,
            HeaderValue::from_static(asset.content_type),
        ),
        // The files change with the binary; revalidating each load is cheap and keeps
        // an upgraded server from running yesterday's script.
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        ),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        (
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ),
    ];
    (headers, asset.body).into_response()
}
