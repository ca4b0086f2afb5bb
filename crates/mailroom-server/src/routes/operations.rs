//! Operations: health, Prometheus metrics and the OpenAPI document. None of these needs
//! the token, so probes and scrapers work without secrets.

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::Json;
pub use mailroom_api::ops::Health;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::state::AppState;

/// Liveness: 200 while the server accepts requests.
#[utoipa::path(get, path = "/healthz", tag = "operations",
    responses((status = 200, description = "Serving", body = Health)))]
pub async fn healthz() -> Json<Health> {
    Json(Health {
        status: "ok".to_owned(),
    })
}

/// Prometheus metrics in the text exposition format.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "OpenMetrics text, which Prometheus scrapes",
        content_type = "application/openmetrics-text", body = String)))]
pub async fn metrics(State(state): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    refresh_gauges(&state).await?;
    Ok((
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.render(),
    ))
}

/// Sets the gauges that describe current state rather than count events (the lag of
/// every group, the waiting long polls and the subscribers of every channel), and catches the per-group event
/// counters up with the store.
async fn refresh_gauges(state: &AppState) -> Result<(), ApiError> {
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
    let waiting = state.long_polls.waiting();
    let waiting = i64::try_from(waiting).unwrap_or(i64::MAX);
    state.metrics.long_polls_waiting.set(waiting);
    state.metrics.channel_subscribers.clear();
    for channel in state.channels.list() {
        let subscribers = channel.stats().subscribers;
        state
            .metrics
            .channel_subscribers
            .get_or_create(&Metrics::channel(&channel.name))
            .set(i64::try_from(subscribers).unwrap_or(i64::MAX));
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
