//! Operations: health, Prometheus metrics and the OpenAPI document. None of these needs
//! the token, so probes and scrapers work without secrets.

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
pub use mailroom_api::ops::Health;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::ApiError;
use crate::metrics::exposition::{
    wants_openmetrics, OPENMETRICS_CONTENT_TYPE, PROMETHEUS_TEXT_CONTENT_TYPE,
};
use crate::metrics::{Metrics, TopicLabels};
use crate::state::AppState;

/// Health: 200 `ok` while every topic serves; 200 `degraded` with the failed topics
/// while some are failed (damaged, unreadable, or stopped after a failed write) and the
/// others serve; 503 `unhealthy` with the reason once the whole store is fail-stop.
#[utoipa::path(get, path = "/healthz", tag = "operations",
    responses(
        (status = 200, description = "Serving: `status` is `ok`, or `degraded` with \
            `failed_topics` (each with `topic`, `kind` and `reason`) while some topics are \
            failed and the others serve", body = Health),
        (status = 503, description = "The whole store is fail-stop: `status` is `unhealthy` \
            and `reason` says why", body = Health),
    ))]
pub async fn healthz(State(state): State<AppState>) -> (StatusCode, Json<Health>) {
    let health = state.backend.health();
    match health.failure {
        Some(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(Health::unhealthy(reason)),
        ),
        None if health.failed_topics.is_empty() => (StatusCode::OK, Json(Health::ok())),
        None => (StatusCode::OK, Json(Health::degraded(health.failed_topics))),
    }
}

/// Prometheus metrics: the text format 0.0.4, or OpenMetrics 1.0 when the `Accept`
/// header asks for `application/openmetrics-text` (as Prometheus does).
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses(
        (status = 200, description = "Prometheus text 0.0.4 (`text/plain; version=0.0.4`), \
            or OpenMetrics text when `Accept` asks for `application/openmetrics-text`",
            content_type = "text/plain", body = String),
        (status = 500, description = "The store could not be read: `internal`",
            body = crate::error::ErrorBody),
        (status = 503, description = "The store is fail-stop: `store_failed`",
            body = crate::error::ErrorBody),
    ))]
pub async fn metrics(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<impl IntoResponse, ApiError> {
    refresh_gauges(&state).await?;
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|value| value.to_str().ok());
    let (content_type, text) = if wants_openmetrics(accept) {
        (OPENMETRICS_CONTENT_TYPE, state.metrics.render())
    } else {
        (
            PROMETHEUS_TEXT_CONTENT_TYPE,
            state.metrics.render_prometheus(),
        )
    };
    Ok(([(header::CONTENT_TYPE, content_type)], text))
}

/// Sets the store's and the process's gauges, and makes every topic's and group's
/// counters exist (at zero until something happens).
async fn refresh_store(state: &AppState) -> Result<(), ApiError> {
    let metrics = &state.metrics;
    let health = state.backend.health();
    let healthy = health.failure.is_none() && health.failed_topics.is_empty();
    metrics.store_healthy.set(i64::from(healthy));
    metrics.set_failed_topics(&health.failed_topics);
    metrics.refresh_process();
    for topic in state.backend.list_topics().await? {
        metrics.ensure_series(&topic.name, &topic.groups);
        let removed = topic.retention.removed;
        metrics.catch_up_retention(
            &topic.name,
            removed.messages,
            removed.bytes,
            removed.segments,
        );
    }
    if let Some(usage) = state.backend.disk_usage().await? {
        let clamp = |bytes: u64| i64::try_from(bytes).unwrap_or(i64::MAX);
        metrics.store_disk_bytes.set(clamp(usage.total_bytes));
        metrics.topic_disk_bytes.clear();
        for (topic, bytes) in usage.topics {
            metrics
                .topic_disk_bytes
                .get_or_create(&TopicLabels { topic })
                .set(clamp(bytes));
        }
    }
    Ok(())
}

/// Sets the gauges that describe current state rather than count events (the lag of
/// every group, the waiting long polls and the subscribers of every channel), and catches the per-group event
/// counters up with the store.
async fn refresh_gauges(state: &AppState) -> Result<(), ApiError> {
    refresh_store(state).await?;
    let gauges = state.backend.group_gauges().await?;
    // Rebuilt from scratch so deleted groups and channels stop being reported.
    state.metrics.lag.clear();
    for gauge in gauges {
        let labels = Metrics::group(&gauge.topic, &gauge.group);
        let lag = i64::try_from(gauge.lag).unwrap_or(i64::MAX);
        state.metrics.lag.get_or_create(&labels).set(lag);
        state
            .metrics
            .catch_up_group_counters(&labels, gauge.counters);
    }
    crate::metrics::limits::refresh(state).await?;
    let waiting = state.long_polls.waiting();
    let waiting = i64::try_from(waiting).unwrap_or(i64::MAX);
    state.metrics.long_polls_waiting.set(waiting);
    state.metrics.channel_subscribers.clear();
    for channel in state.channels.list() {
        let subscribers = channel.stats().subscribers;
        state.metrics.ensure_channel_series(&channel.name);
        state
            .metrics
            .channel_subscribers
            .get_or_create(&Metrics::channel(&channel.name))
            .set(i64::try_from(subscribers).unwrap_or(i64::MAX));
    }
    if let Some(counts) = state.channels.relay_counts() {
        state.metrics.catch_up_relay(counts);
    }
    Ok(())
}

/// The OpenAPI 3.1 document of this API.
#[utoipa::path(get, path = "/openapi.json", tag = "operations",
    responses((status = 200, description = "The OpenAPI document", content_type = "application/json", body = Object)))]
pub async fn openapi() -> Json<&'static utoipa::openapi::OpenApi> {
    Json(crate::openapi::document())
}

/// The operations' routes: health, metrics, the OpenAPI document.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(metrics))
        .routes(routes!(openapi))
}
