//! The router: every route, its body limit, the token check, latency metrics and the
//! JSON error shape for whatever the framework rejects.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::Router;

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
    let payload_limit = usize::try_from(state.config.payload_bytes_max).unwrap_or(usize::MAX);
    let payload = body_limit(payload_limit, "the server's payload limit");
    let message_batch = body_limit(
        payload_limit.saturating_mul(BATCH_BODY_PAYLOADS_MAX),
        "this route's limit",
    );
    let json = body_limit(JSON_BODY_BYTES_MAX, "this route's limit");
    let delivery_list = body_limit(BATCH_JSON_BODY_BYTES_MAX, "this route's limit");
    let group = "/topics/{topic}/groups/{group}";

    let v1 = Router::new()
        .route("/topics", get(topics::list_topics))
        .route(
            "/topics/{topic}",
            put(topics::create_topic)
                .get(topics::topic_info)
                .delete(topics::delete_topic),
        )
        .route(
            "/topics/{topic}/messages",
            post(topics::publish).layer(payload),
        )
        .route(
            "/topics/{topic}/messages/batch",
            post(topics::publish_batch).layer(message_batch),
        )
        .route(
            "/topics/{topic}/publish/ws",
            get(publish_stream::publish_stream),
        )
        .route(
            group,
            put(groups::create_group)
                .get(groups::group_info)
                .delete(groups::delete_group)
                .layer(json),
        )
        .route(&format!("{group}/poll"), post(deliveries::poll).layer(json))
        .route(
            &format!("{group}/poll/raw"),
            post(deliveries::poll_raw).layer(json),
        )
        .route(
            &format!("{group}/touch"),
            post(group_control::touch).layer(json),
        )
        .route(
            &format!("{group}/dead-letters/redrive"),
            post(group_control::redrive).layer(json),
        )
        .route(
            &format!("{group}/dead-letters/purge"),
            post(group_control::purge).layer(json),
        )
        .route(&format!("{group}/ack"), post(deliveries::ack).layer(json))
        .route(&format!("{group}/nack"), post(deliveries::nack).layer(json))
        .route(
            &format!("{group}/poll/batch"),
            post(batch::poll_batch).layer(delivery_list),
        )
        .route(
            &format!("{group}/ack/batch"),
            post(batch::ack_batch).layer(delivery_list),
        )
        .route(
            &format!("{group}/nack/batch"),
            post(batch::nack_batch).layer(delivery_list),
        )
        .route(
            &format!("{group}/dead-letters"),
            get(dead_letters::dead_letters),
        )
        .route("/channels", get(channels::list_channels))
        .route(
            "/channels/{channel}",
            put(channels::create_channel)
                .get(channels::channel_info_route)
                .delete(channels::close_channel)
                .layer(json),
        )
        .route(
            "/channels/{channel}/messages",
            post(channels::publish_channel).layer(payload),
        )
        .route("/channels/{channel}/ws", get(channels::subscribe_ws))
        .route(
            "/channels/{channel}/events",
            get(channels::subscribe_events),
        )
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token));

    Router::new()
        .nest("/v1", v1)
        .route("/healthz", get(ops::healthz))
        .route("/metrics", get(ops::metrics))
        .route("/openapi.json", get(ops::openapi))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            record_latency,
        ))
        .fallback(not_found)
        .layer(middleware::from_fn(errors_as_json))
        .with_state(state)
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
