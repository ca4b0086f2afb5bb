//! Healing failed topics: `POST /v1/topics/{topic}/recover` reopens a stopped or
//! unreadable topic from what is durable, `POST /v1/topics/{topic}/repair` moves a
//! damaged topic's damaged files aside and reopens it (`docs/storage.md`, "Damage stays
//! local"). The server also retries `recover` by itself (`crate::topic_healing`).

use axum::extract::State;
use axum::Json;
use mailroom_api::topic_health::{TopicRecovered, TopicRepairReport};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::{ApiError, ErrorBody};
use crate::paths::TopicPath;
use crate::state::AppState;

/// Reopens a failed topic from what is durable: one that stopped after a failed write
/// or fsync (a full disk), or whose files could not be read, once the cause is fixed.
#[utoipa::path(post, path = "/v1/topics/{topic}/recover", tag = "topics",
    params(("topic" = crate::names::Name, Path, description = "Topic name")),
    responses(
        (status = 200, description = "Serving: `recovered` says whether it was failed", body = TopicRecovered),
        (status = 400, description = "Invalid name", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "Unknown topic", body = ErrorBody),
        (status = 503, description = "Still failed: `topic_failed` with where and why \
            (damage needs `repair`)", body = ErrorBody),
    ))]
pub async fn recover_topic(
    State(state): State<AppState>,
    TopicPath { topic }: TopicPath,
) -> Result<Json<TopicRecovered>, ApiError> {
    let recovered = state.backend.recover_topic(&topic).await?;
    Ok(Json(TopicRecovered { topic, recovered }))
}

/// Repairs a damaged topic: moves each damaged file aside (kept for salvage) and reopens
/// the topic; no offset that was confirmed is handed out again.
#[utoipa::path(post, path = "/v1/topics/{topic}/repair", tag = "topics",
    params(("topic" = crate::names::Name, Path, description = "Topic name")),
    responses(
        (status = 200, description = "Serving: `repaired` says whether it was damaged, \
            `actions` what was moved where", body = TopicRepairReport),
        (status = 400, description = "Invalid name", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "Unknown topic", body = ErrorBody),
        (status = 503, description = "Still failed: `topic_failed` with where and why",
            body = ErrorBody),
    ))]
pub async fn repair_topic(
    State(state): State<AppState>,
    TopicPath { topic }: TopicPath,
) -> Result<Json<TopicRepairReport>, ApiError> {
    let report = match state.backend.repair_topic(&topic).await? {
        Some(repaired) => TopicRepairReport {
            topic,
            repaired: true,
            damage: repaired.damage,
            actions: repaired.actions,
        },
        None => TopicRepairReport {
            topic,
            repaired: false,
            damage: Vec::new(),
            actions: Vec::new(),
        },
    };
    Ok(Json(report))
}

/// The healing routes: recover, repair.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(recover_topic))
        .routes(routes!(repair_topic))
}
