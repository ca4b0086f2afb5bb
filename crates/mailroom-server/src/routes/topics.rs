//! Topics: create, list, describe, change, delete, publish one message, publish a batch.
//!
//! A topic's retention is set by `PUT` (an optional body; an empty one keeps the
//! server's defaults) and changed by `PATCH`: each limit absent (at creation the
//! server's default, in a change unchanged), `null` (unlimited) or a number within the
//! bounds of `mailroom_api::limits` (else 400 `invalid_argument` naming the field). A
//! `PUT` of a topic that exists changes nothing, its retention included. The background
//! task (`crate::retention`) applies the limits. `PUT` also takes the topic's own
//! idempotency window (`{"idempotency": {"window_messages", "window_ms"}}`, each absent
//! for the server's default), kept durably with its retention and shown in its view.
//!
//! Deleting a topic is the store's `delete_topic`: durable, and from then on every call
//! on it (in flight or new) answers 404 `unknown_topic`. Its long polls are woken and so
//! end with that 404, and its notifier and metric series are dropped.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
pub use mailroom_api::limits::{BATCH_BODY_PAYLOADS_MAX, BATCH_MESSAGES_MAX};
use mailroom_api::topic_health::TopicCondition;
pub use mailroom_api::topics::{
    Base64Message, BatchMessage, BatchPublished, BatchRequest, IdempotencyInForce,
    IdempotencySettings, Published, RetentionInForce, RetentionRemoved, RetentionSettings,
    TopicCreateRequest, TopicCreated, TopicDeleted, TopicInfo, TopicList, TopicSummary,
    TopicUpdateRequest,
};
use mailroom_store::{IdempotencyWindow, Limit, TopicIdempotency, TopicRetention};
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouterExt as _};
use utoipa_axum::routes;

use crate::backend::{RetentionChange, RetentionState, TopicFailureState, TopicState};
use crate::body::{parse, JsonBody, RawBody};
use crate::error::{ApiError, ErrorBody};
use crate::paths::TopicPath;
use crate::routes::groups::group_info_body;
use crate::routes::BodyLimits;
use crate::state::AppState;

mod publishing;

#[cfg(test)]
pub(crate) use publishing::decode_batch;
pub use publishing::{publish, publish_batch};

/// Creates a topic (idempotent), optionally with its own retention and idempotency
/// window.
#[utoipa::path(put, path = "/v1/topics/{topic}", tag = "topics",
    params(("topic" = crate::names::Name, Path, description = "1-128 characters of [A-Za-z0-9._-]")),
    request_body(content = TopicCreateRequest,
        description = "Optional: an empty body creates the topic with the server's retention defaults"),
    responses(
        (status = 201, description = "Created", body = TopicCreated),
        (status = 200, description = "Already existed (nothing changed, retention included)", body = TopicCreated),
        (status = 400, description = "Invalid name, bad JSON, or a retention or idempotency window limit out of range", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 409, description = "The server holds `--max-topics` topics: `topic_limit`", body = ErrorBody),
        (status = 501, description = "A window of the topic's own on a backend that keeps none: `not_supported`", body = ErrorBody),
    ))]
pub async fn create_topic(
    State(state): State<AppState>,
    TopicPath { topic }: TopicPath,
    body: Result<RawBody, ApiError>,
) -> Result<Response, ApiError> {
    let RawBody(bytes) = body?;
    // An empty body is today's create: every limit the server's default.
    let request = if bytes.iter().all(u8::is_ascii_whitespace) {
        TopicCreateRequest::default()
    } else {
        parse::<TopicCreateRequest>(&bytes)?
    };
    let settings = request.retention.unwrap_or_default();
    settings
        .check()
        .map_err(|error| ApiError::invalid_argument(error.to_string()))?;
    let window = request.idempotency.unwrap_or_default();
    window
        .check()
        .map_err(|error| ApiError::invalid_argument(error.to_string()))?;
    let own_window = TopicIdempotency {
        messages_max: window.window_messages,
        age_ms_max: window.window_ms,
    };
    let created = state
        .backend
        .create_topic_with_window(&topic, &own_retention(&settings), &own_window)
        .await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(TopicCreated { topic, created })).into_response())
}

/// Changes a topic's retention: absent limits stay, `null` is unlimited.
#[utoipa::path(patch, path = "/v1/topics/{topic}", tag = "topics",
    params(("topic" = crate::names::Name, Path, description = "Topic name")),
    request_body(content = TopicUpdateRequest, description = "The limits to change"),
    responses(
        (status = 200, description = "Changed (durably); the topic as it is now", body = TopicInfo),
        (status = 400, description = "Invalid name, bad JSON or a retention limit out of range", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "Unknown topic", body = ErrorBody),
    ))]
pub async fn update_topic(
    State(state): State<AppState>,
    TopicPath { topic }: TopicPath,
    JsonBody(request): JsonBody<TopicUpdateRequest>,
) -> Result<Json<TopicInfo>, ApiError> {
    let settings = request.retention;
    settings
        .check()
        .map_err(|error| ApiError::invalid_argument(error.to_string()))?;
    let change = RetentionChange {
        age_ms_max: limit(settings.max_age_ms),
        bytes_max: limit(settings.max_bytes),
        messages_max: limit(settings.max_messages),
        keep_unconsumed: settings.keep_unconsumed,
    };
    let topic = state.backend.change_retention(&topic, change).await?;
    Ok(Json(topic_info_body(topic, window_defaults(&state))))
}

/// One wire limit as the store's: absent `None`, `null` unlimited, a number the limit.
fn limit(value: Option<Option<u64>>) -> Option<Limit> {
    value.map(|value| value.map_or(Limit::Unlimited, Limit::Max))
}

/// A topic's own retention at creation: absent limits follow the server's defaults.
fn own_retention(settings: &RetentionSettings) -> TopicRetention {
    TopicRetention {
        age_ms_max: limit(settings.max_age_ms).unwrap_or_default(),
        bytes_max: limit(settings.max_bytes).unwrap_or_default(),
        messages_max: limit(settings.max_messages).unwrap_or_default(),
        keep_unconsumed: settings.keep_unconsumed,
    }
}

/// The view's retention fields: the limits in force, the bytes held, what was removed.
fn retention_view(state: &RetentionState) -> (RetentionInForce, u64, RetentionRemoved) {
    let in_force = RetentionInForce {
        max_age_ms: state.in_force.age_ms_max,
        max_bytes: state.in_force.bytes_max,
        max_messages: state.in_force.messages_max,
        keep_unconsumed: state.in_force.keep_unconsumed,
    };
    let removed = RetentionRemoved {
        messages: state.removed.messages,
        bytes: state.removed.bytes,
        segments: state.removed.segments,
    };
    (in_force, state.bytes, removed)
}

/// A topic's view, as `GET /v1/topics/{topic}` and `PATCH` answer it; a topic whose
/// backend keeps no window of its own shows the server's defaults.
fn topic_info_body(topic: TopicState, defaults: IdempotencyWindow) -> TopicInfo {
    let window = topic.idempotency.unwrap_or(defaults);
    let (retention, bytes, removed) = retention_view(&topic.retention);
    TopicInfo {
        name: topic.name,
        start: topic.start,
        end: topic.end,
        groups: topic.groups.into_iter().map(group_info_body).collect(),
        retention,
        bytes,
        removed,
        state: condition(topic.failure.as_ref()),
        failure_kind: topic.failure.as_ref().map(|f| f.kind.to_owned()),
        failure: topic.failure.map(|f| f.reason),
        idempotency: Some(IdempotencyInForce {
            window_messages: window.messages_max,
            window_ms: window.age_ms_max,
        }),
    }
}

/// The server's idempotency window defaults (`--idempotency-window-*`).
fn window_defaults(state: &AppState) -> IdempotencyWindow {
    IdempotencyWindow {
        messages_max: state.config.idempotency_window_messages,
        age_ms_max: state.config.idempotency_window_ms,
    }
}

// The wire's window bounds are the store's.
const _: () = assert!(
    mailroom_api::limits::IDEMPOTENCY_WINDOW_MESSAGES_MAX
        == mailroom_store::IDEMPOTENCY_WINDOW_MESSAGES_MAX
);
const _: () = assert!(
    mailroom_api::limits::IDEMPOTENCY_WINDOW_MS_MAX
        == mailroom_store::IDEMPOTENCY_WINDOW_AGE_MS_MAX
);

/// A topic's `state`: failed while it has a failure.
fn condition(failure: Option<&TopicFailureState>) -> TopicCondition {
    match failure {
        None => TopicCondition::Ok,
        Some(_) => TopicCondition::Failed,
    }
}

/// Deletes a topic with its messages and groups, durably.
#[utoipa::path(delete, path = "/v1/topics/{topic}", tag = "topics",
    params(("topic" = crate::names::Name, Path, description = "Topic name")),
    responses(
        (status = 200, description = "Deleted; waiting long polls on it end with 404", body = TopicDeleted),
        (status = 400, description = "Invalid name", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "Unknown topic", body = ErrorBody),
    ))]
pub async fn delete_topic(
    State(state): State<AppState>,
    TopicPath { topic }: TopicPath,
) -> Result<Json<TopicDeleted>, ApiError> {
    // The backend ends the topic's long polls too.
    let groups = state.backend.delete_topic(&topic).await?;
    state.metrics.forget_topic(&topic, &groups);
    Ok(Json(TopicDeleted {
        topic,
        deleted: true,
    }))
}

/// Lists topics with their offsets, group names and retention.
#[utoipa::path(get, path = "/v1/topics", tag = "topics",
    responses(
        (status = 200, description = "Every topic", body = TopicList),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
    ))]
pub async fn list_topics(State(state): State<AppState>) -> Result<Json<TopicList>, ApiError> {
    let topics = state.backend.list_topics().await?;
    let topics = topics
        .into_iter()
        .map(|topic| {
            let (retention, bytes, removed) = retention_view(&topic.retention);
            TopicSummary {
                name: topic.name,
                start: topic.start,
                end: topic.end,
                groups: topic.groups,
                retention,
                bytes,
                removed,
                state: condition(topic.failure.as_ref()),
                failure_kind: topic.failure.as_ref().map(|f| f.kind.to_owned()),
                failure: topic.failure.map(|f| f.reason),
            }
        })
        .collect();
    Ok(Json(TopicList { topics }))
}

/// Describes one topic and every group on it.
#[utoipa::path(get, path = "/v1/topics/{topic}", tag = "topics",
    params(("topic" = crate::names::Name, Path, description = "Topic name")),
    responses(
        (status = 200, description = "The topic", body = TopicInfo),
        (status = 400, description = "Invalid name", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "Unknown topic", body = ErrorBody),
    ))]
pub async fn topic_info(
    State(state): State<AppState>,
    TopicPath { topic }: TopicPath,
) -> Result<Json<TopicInfo>, ApiError> {
    let topic = state.backend.topic_state(&topic).await?;
    Ok(Json(topic_info_body(topic, window_defaults(&state))))
}

/// The topic routes: list, create, describe, change, delete, publish one, publish a
/// batch.
pub fn router(limits: BodyLimits) -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_topics))
        .routes(routes!(create_topic, topic_info, update_topic, delete_topic).layer(limits.json))
        .routes(routes!(publishing::publish).layer(limits.payload))
        // The read shares the publish's path; it has no body.
        .routes(routes!(super::reads::read_messages))
        .routes(routes!(publishing::publish_batch).layer(limits.message_batch))
}
