//! CORS for the `--cors-origin` list: `tower-http`'s layer, with the preflight answered
//! 204 and every `Access-Control-*` header kept from origins not on the list.

use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, HeaderName, Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use tower_http::cors::{AllowOrigin, CorsLayer};

use super::origins::is_listed;
use crate::state::AppState;

/// How long a browser may cache a preflight answer: ten minutes.
pub const PREFLIGHT_MAX_AGE_SECS: u64 = 600;

/// The request headers a listed origin may send: the token, the JSON content type, the
/// publish idempotency key, a raw publish's message key (`Mailroom-Key`), and
/// `Last-Event-ID` of a reconnecting `EventSource`. A page sets a message's headers
/// through the batch publish's JSON: an allow-list cannot name every
/// `Mailroom-Header-<name>`.
pub const ALLOWED_HEADERS: [HeaderName; 5] = [
    header::AUTHORIZATION,
    header::CONTENT_TYPE,
    HeaderName::from_static("idempotency-key"),
    HeaderName::from_static("mailroom-key"),
    HeaderName::from_static("last-event-id"),
];

/// The CORS layer for `origins` (already normalized), or `None` when the list is empty:
/// CORS is off by default.
///
/// ```
/// use mailroom_server::browser::cors::cors_layer;
/// assert!(cors_layer(&[]).is_none());
/// assert!(cors_layer(&["https://app.example".to_owned()]).is_some());
/// ```
pub fn cors_layer(origins: &[String]) -> Option<CorsLayer> {
    if origins.is_empty() {
        return None;
    }
    let values = origins.iter().filter_map(|origin| origin.parse().ok());
    let layer = CorsLayer::new()
        .allow_origin(AllowOrigin::list(values))
        .allow_methods([
            Method::GET,
            Method::HEAD,
            Method::POST,
            Method::PUT,
            Method::PATCH,
            Method::DELETE,
        ])
        .allow_headers(ALLOWED_HEADERS)
        .max_age(Duration::from_secs(PREFLIGHT_MAX_AGE_SECS));
    Some(layer)
}

/// Runs outside [`cors_layer`]: a preflight is answered 204 (`tower-http` says 200), and
/// a response to an origin that is not listed carries no `Access-Control-*` header
/// (`tower-http` sends the allowed methods and headers to any preflight).
pub async fn tidy_cors_answers(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let listed = is_listed(request.headers(), &state.config.cors_origins);
    let preflight = request.method() == Method::OPTIONS;
    let mut response = next.run(request).await;
    if preflight && response.status() == StatusCode::OK {
        *response.status_mut() = StatusCode::NO_CONTENT;
    }
    if !listed {
        let headers = response.headers_mut();
        let cors: Vec<HeaderName> = headers
            .keys()
            .filter(|name| name.as_str().starts_with("access-control-"))
            .cloned()
            .collect();
        for name in cors {
            headers.remove(name);
        }
    }
    response
}
