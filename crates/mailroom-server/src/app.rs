//! The router: every route, its body limit, the token check, the browser rules (CORS,
//! cross-site refusal: [`crate::browser`]), latency metrics and the JSON error shape for
//! whatever the framework rejects.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;

use crate::browser::{self, credentials};
use crate::error::{errors_as_json, ApiError, ErrorCode};
use crate::metrics::{method_label, RequestLabels};
use crate::routes::{routes, Routes};
use crate::state::AppState;

/// What every route of [`Routes::v1`] starts with, and no other route: the routes the
/// token guards.
pub const V1_PREFIX: &str = "/v1/";

/// The whole API as an axum router over `state`.
pub fn router(state: AppState) -> Router {
    let Routes { v1, operations } = routes(state.config.payload_bytes_max);
    // The document is served from `crate::openapi::document`, built from the same routes.
    // One route layer for every route: the token check of the `/v1` routes is part of it
    // (by their `/v1/` prefix, which `routes` guarantees), not a layer of its own.
    let (app, _document) = v1
        .merge(operations)
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            guard_and_record,
        ))
        .split_for_parts();
    // The web console's page and files: no token (the page asks for it), no OpenAPI entry.
    let app = app
        .merge(crate::console::router())
        .fallback(not_found)
        .layer(middleware::from_fn(errors_as_json));
    // Outside the error shaping, so that error answers carry the CORS headers too.
    let app = match browser::cors::cors_layer(&state.config.cors_origins) {
        Some(cors) => app.layer(cors).layer(middleware::from_fn_with_state(
            state.clone(),
            browser::cors::tidy_cors_answers,
        )),
        None => app,
    };
    app.with_state(state)
}

async fn not_found(request: Request) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        ErrorCode::NotFound,
        format!("no route for {} {}", request.method(), request.uri().path()),
    )
}

/// Refuses `/v1` calls without the configured bearer token: in `Authorization`, or for
/// a browser stream a ticket (`GET` only) or the WebSocket bearer subprotocol
/// ([`crate::browser`]). A `?ticket=` is taken out of the URI first, token or not.
async fn require_token(state: &AppState, mut request: Request, next: Next) -> Response {
    let ticket = credentials::take_ticket(&mut request);
    let Some(expected) = state.config.token.as_deref() else {
        // A browser client written for a server with a token offers the bearer
        // subprotocol here too, and fails the handshake unless one is named back.
        let offered = credentials::subprotocol_token(&request).is_some();
        let mut response = next.run(request).await;
        if offered {
            credentials::accept_bearer_protocol(&mut response);
        }
        return response;
    };
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(bearer_credentials);
    match presented {
        Some(token) if same_secret(token.as_bytes(), expected.as_bytes()) => {
            return next.run(request).await
        }
        Some(_) => return unauthorized("wrong bearer token"),
        None => {}
    }
    if let Some(ticket) = ticket.filter(|_| request.method() == Method::GET) {
        return match state.tickets.redeem(&ticket, request.uri().path()) {
            Ok(()) => next.run(request).await,
            Err(refused) => unauthorized(&refused.to_string()),
        };
    }
    match credentials::subprotocol_token(&request) {
        Some(token) if same_secret(token.as_bytes(), expected.as_bytes()) => {
            let mut response = next.run(request).await;
            credentials::accept_bearer_protocol(&mut response);
            response
        }
        Some(_) => unauthorized("wrong bearer token in the WebSocket subprotocol"),
        None => unauthorized("this server requires Authorization: Bearer <token>"),
    }
}

/// The credentials of an `Authorization: Bearer <token>` header: the scheme is matched
/// without regard to case (RFC 7235, section 2.1), so `bearer` and `BEARER` work too.
fn bearer_credentials(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then_some(token)
}

fn unauthorized(message: &str) -> Response {
    ApiError::new(StatusCode::UNAUTHORIZED, ErrorCode::Unauthorized, message).into_response()
}

/// Compares secrets in time independent of where they differ, so response timing does
/// not reveal how much of a guessed token was right.
fn same_secret(presented: &[u8], expected: &[u8]) -> bool {
    if presented.len() != expected.len() {
        return false;
    }
    presented
        .iter()
        .zip(expected)
        .fold(0u8, |difference, (a, b)| difference | (a ^ b))
        == 0
}

/// Refuses a cross-site request ([`browser::origins::cross_site_refusal`]), then a
/// `/v1` request without the token ([`require_token`]), or runs it; then records its
/// latency under its route pattern and writes its access-log line at INFO (target
/// `mailroom::access`, off in `mailroom serve` unless `RUST_LOG` turns it on): method,
/// route pattern, status and duration. Never the raw path or query string, which may
/// carry a ticket or names a log reader should not need, and never a header. One layer
/// for all three: each layer boxes the request's future and clones its service again
/// (the token's own layer cost about 2,500 of a relaxed 1 KiB publish's 43,000
/// instructions, BENCHMARKS.md).
async fn guard_and_record(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = method_label(request.method());
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |path| path.as_str().to_owned());
    let refused = browser::origins::cross_site_refusal(&request, &state.config.cors_origins);
    let response = match refused {
        Some(refused) => refused,
        None if route.starts_with(V1_PREFIX) => require_token(&state, request, next).await,
        None => next.run(request).await,
    };
    let elapsed = started.elapsed();
    let status = response.status().as_u16();
    tracing::info!(
        target: "mailroom::access",
        method = %method,
        route = %route,
        status,
        duration_ms = elapsed.as_micros() as f64 / 1000.0,
        "request"
    );
    let labels = RequestLabels {
        method,
        route,
        status,
    };
    state
        .metrics
        .request_seconds
        .get_or_create(&labels)
        .observe(elapsed.as_secs_f64());
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the secret comparison accepts only the exact token.
    #[test]
    fn same_secret_is_exact() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abd", b"abc"));
        assert!(!same_secret(b"ab", b"abc"));
        assert!(!same_secret(b"", b"abc"));
    }

    // Proves the bearer scheme is matched in any case, and nothing else is taken.
    #[test]
    fn bearer_scheme_in_any_case() {
        for header in ["Bearer abc", "bearer abc", "BEARER abc", "bEaReR abc"] {
            assert_eq!(bearer_credentials(header), Some("abc"), "{header}");
        }
        assert_eq!(bearer_credentials("Basic abc"), None);
        assert_eq!(bearer_credentials("Bearerabc"), None);
        assert_eq!(bearer_credentials("abc"), None);
    }
}
