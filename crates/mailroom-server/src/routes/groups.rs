//! Consumer groups: create, describe and delete, and what the other group routes share
//! (the JSON form of a group's state).
//!
//! A group's deliveries (poll, ack, nack) are in [`crate::routes::deliveries`], their
//! batch forms in [`crate::routes::batch`], its dead letters in
//! [`crate::routes::dead_letters`] and its leases and redrives in
//! [`crate::routes::group_control`].
//!
//! Every transition goes through the store, which runs the one group state machine
//! (`mailroom::group`) and makes the event durable before the response is sent (the hot
//! calls awaited without blocking a worker; see [`crate::backend`]).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use mailroom::group::GroupConfig;
use mailroom::topic::{GroupInfo, StartPosition};
pub use mailroom_api::groups::{
    CreateGroup, GroupCreated, GroupDeleted, GroupInfo as GroupInfoBody, Start, StartName,
};
/// The largest `max_attempts` a group may have.
pub use mailroom_api::limits::MAX_ATTEMPTS_MAX as MAX_ATTEMPTS_LIMIT;

use crate::body::JsonBody;
use crate::error::{ApiError, ErrorBody};
use crate::paths::GroupPath;
use crate::routes::arguments::check_group_settings;
use crate::routes::deliveries::DeliveryRef;
use crate::routes::group_control::{group_config, group_detail, GroupDetailBody};
use crate::state::AppState;

/// The JSON form of a group's state.
pub fn group_info_body(info: GroupInfo) -> GroupInfoBody {
    GroupInfoBody {
        name: info.name,
        position: info.position,
        attempt: info.attempt,
        in_flight: info.in_flight.map(|id| DeliveryRef {
            offset: id.offset,
            attempt: id.attempt,
        }),
        max_attempts: info.max_attempts,
        lag: info.lag,
        dead_letters: info.dead_letters,
    }
}

/// Creates a consumer group on a topic.
#[utoipa::path(put, path = "/v1/topics/{topic}/groups/{group}", tag = "groups",
    params(("topic" = crate::names::Name, Path, description = "Topic name"),
           ("group" = crate::names::Name, Path, description = "Group name")),
    request_body = CreateGroup,
    responses(
        (status = 201, description = "Created", body = GroupCreated),
        (status = 400, description = "Invalid name, max_attempts, start or JSON", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "Unknown topic", body = ErrorBody),
        (status = 409, description = "The group exists", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
    ))]
pub async fn create_group(
    State(state): State<AppState>,
    GroupPath { topic, group }: GroupPath,
    JsonBody(request): JsonBody<CreateGroup>,
) -> Result<Response, ApiError> {
    if request.max_attempts == 0 || request.max_attempts > MAX_ATTEMPTS_LIMIT {
        return Err(ApiError::out_of_range(
            "max_attempts",
            1..=u64::from(MAX_ATTEMPTS_LIMIT),
            u64::from(request.max_attempts),
        ));
    }
    check_group_settings(request.lease_ms, request.backoff, request.max_in_flight)?;
    let start = match request.start {
        None | Some(Start::Named(StartName::Earliest)) => StartPosition::Earliest,
        Some(Start::Named(StartName::Latest)) => StartPosition::Latest,
        Some(Start::Offset(offset)) => StartPosition::Offset(offset),
    };
    let body = GroupCreated {
        topic: topic.clone(),
        group: group.clone(),
    };
    let config = group_config(
        request.max_attempts,
        request.lease_ms,
        request.backoff,
        request.max_in_flight,
    )
    .unwrap_or_else(|| GroupConfig::new(request.max_attempts));
    state
        .backend
        .create_group(&topic, &group, start, config)
        .await?;
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

/// Describes one group.
#[utoipa::path(get, path = "/v1/topics/{topic}/groups/{group}", tag = "groups",
    params(("topic" = crate::names::Name, Path, description = "Topic name"),
           ("group" = crate::names::Name, Path, description = "Group name")),
    responses(
        (status = 200, description = "The group's state, settings, counters, deliveries in \
            flight and dead-letter reasons", body = GroupDetailBody),
        (status = 400, description = "Invalid name", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "Unknown topic or group", body = ErrorBody),
    ))]
pub async fn group_info(
    State(state): State<AppState>,
    GroupPath { topic, group }: GroupPath,
) -> Result<Json<GroupDetailBody>, ApiError> {
    Ok(Json(group_detail(&state, topic, group).await?))
}

/// Deletes a consumer group, durably. The topic and its messages stay.
#[utoipa::path(delete, path = "/v1/topics/{topic}/groups/{group}", tag = "groups",
    params(("topic" = crate::names::Name, Path, description = "Topic name"),
           ("group" = crate::names::Name, Path, description = "Group name")),
    responses(
        (status = 200, description = "Deleted; waiting long polls on it end with 404", body = GroupDeleted),
        (status = 400, description = "Invalid name", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "Unknown topic or group", body = ErrorBody),
    ))]
pub async fn delete_group(
    State(state): State<AppState>,
    GroupPath { topic, group }: GroupPath,
) -> Result<Json<GroupDeleted>, ApiError> {
    // The backend wakes the group's long polls, which then answer 404 `unknown_group`.
    state.backend.delete_group(&topic, &group).await?;
    state.metrics.forget_group(&topic, &group);
    Ok(Json(GroupDeleted {
        topic,
        group,
        deleted: true,
    }))
}
