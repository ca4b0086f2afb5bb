//! The router: every route, its body limit, the token check, latency metrics and the
//! JSON error shape for whatever the framework rejects.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouterExt as _};
use utoipa_axum::routes;

use crate::body::{body_limit, JSON_BODY_BYTES_MAX};
use crate::error::{errors_as_json, ApiError, ErrorCode};
use crate::metrics::RequestLabels;
use crate::routes::batch_bodies::BATCH_JSON_BODY_BYTES_MAX;
use crate::routes::topics::BATCH_BODY_PAYLOADS_MAX;
use crate::routes::{
    batch, channels, dead_letters, deliveries, group_control, groups, ops, publish_stream, topics,
};
use crate::state::AppState;

/// The whole API as an axum router over `state`.
pub fn router(state: AppState) -> Router {
    let Routes { v1, operations } = routes(state.config.payload_bytes_max);
    let v1 = v1.route_layer(middleware::from_fn_with_state(state.clone(), require_token));
    let (app, _document) = v1
        .merge(operations)
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            record_latency,
        ))
        .split_for_parts();
    app.fallback(not_found)
        .layer(middleware::from_fn(errors_as_json))
        .with_state(state)
}

/// Every route of the API with its OpenAPI description, before the middleware: the one
/// list that both the router and the document ([`crate::openapi::document`]) are built
/// from.
pub(crate) struct Routes {
    /// The `/v1` routes, which need the token when one is configured.
    pub(crate) v1: OpenApiRouter<AppState>,
    /// Health, metrics and the document, open to probes and scrapers.
    pub(crate) operations: OpenApiRouter<AppState>,
}

/// The [`Routes`], with body limits for messages of up to `payload_bytes_max` bytes.
pub(crate) fn routes(payload_bytes_max: u64) -> Routes {
    let payload_limit = usize::try_from(payload_bytes_max).unwrap_or(usize::MAX);
    let payload = body_limit(payload_limit, "the server's payload limit");
    let message_batch = body_limit(
        payload_limit.saturating_mul(BATCH_BODY_PAYLOADS_MAX),
        "this route's limit",
    );
    let json = body_limit(JSON_BODY_BYTES_MAX, "this route's limit");
    let delivery_list = body_limit(BATCH_JSON_BODY_BYTES_MAX, "this route's limit");

    let v1 = OpenApiRouter::new()
        .routes(routes!(topics::list_topics))
        .routes(routes!(
            topics::create_topic,
            topics::topic_info,
            topics::delete_topic
        ))
        .routes(routes!(topics::publish).layer(payload))
        .routes(routes!(topics::publish_batch).layer(message_batch))
        .routes(routes!(publish_stream::publish_stream))
        .routes(
            routes!(
                groups::create_group,
                groups::group_info,
                groups::delete_group
            )
            .layer(json),
        )
        .routes(routes!(deliveries::poll).layer(json))
        .routes(routes!(deliveries::poll_raw).layer(json))
        .routes(routes!(group_control::touch).layer(json))
        .routes(routes!(group_control::redrive).layer(json))
        .routes(routes!(group_control::purge).layer(json))
        .routes(routes!(deliveries::ack).layer(json))
        .routes(routes!(deliveries::nack).layer(json))
        .routes(routes!(batch::poll_batch).layer(delivery_list))
        .routes(routes!(batch::ack_batch).layer(delivery_list))
        .routes(routes!(batch::nack_batch).layer(delivery_list))
        .routes(routes!(dead_letters::dead_letters))
        .routes(routes!(channels::list_channels))
        .routes(
            routes!(
                channels::create_channel,
                channels::channel_info_route,
                channels::close_channel
            )
            .layer(json),
        )
        .routes(routes!(channels::publish_channel).layer(payload))
        .routes(routes!(channels::subscribe_ws))
        .routes(routes!(channels::subscribe_events));
    let operations = OpenApiRouter::new()
        .routes(routes!(ops::healthz))
        .routes(routes!(ops::metrics))
        .routes(routes!(ops::openapi));
    Routes { v1, operations }
}

async fn not_found(request: Request) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        ErrorCode::NotFound,
        format!("no route for {} {}", request.method(), request.uri().path()),
    )
}

/// Refuses `/v1` calls without the configured bearer token.
async fn require_token(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(expected) = state.config.token.as_deref() else {
        return next.run(request).await;
    };
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    match presented {
        Some(token) if same_secret(token.as_bytes(), expected.as_bytes()) => {
            next.run(request).await
        }
        Some(_) => unauthorized("wrong bearer token"),
        None => unauthorized("this server requires Authorization: Bearer <token>"),
    }
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

/// Records each request's latency under its route pattern.
async fn record_latency(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().to_string();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |path| path.as_str().to_owned());
    let response = next.run(request).await;
    let labels = RequestLabels {
        method,
        route,
        status: response.status().as_u16().to_string(),
    };
    state
        .metrics
        .request_seconds
        .get_or_create(&labels)
        .observe(started.elapsed().as_secs_f64());
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
}
