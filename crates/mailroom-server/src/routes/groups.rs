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
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::body::JsonBody;
use crate::error::{ApiError, ErrorBody};
use crate::paths::GroupPath;
use crate::routes::arguments::check_group_settings;
use crate::routes::deliveries::DeliveryRef;
use crate::routes::group_control::{group_config, group_detail, BackoffBody, GroupDetailBody};
use crate::state::AppState;

/// The largest `max_attempts` a group may have.
pub const MAX_ATTEMPTS_LIMIT: u32 = 1_000_000;

/// The body of `PUT /v1/topics/{topic}/groups/{group}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateGroup {
    /// Total deliveries allowed per message, 1 to 1,000,000.
    #[serde(deserialize_with = "crate::body::whole::deserialize")]
    #[schema(minimum = 1, maximum = 1_000_000)]
    pub max_attempts: u32,
    /// Where the group starts: `"earliest"` (the default: the oldest retained message),
    /// `"latest"` (after the last message published so far), or an offset within the
    /// retained log or at its end.
    #[serde(default)]
    pub start: Option<Start>,
    /// Each delivery's lease in milliseconds (1 to 7 days); an expired lease counts as a
    /// failure. Absent: owned until acked or nacked.
    #[serde(default, deserialize_with = "crate::body::whole::deserialize_option")]
    pub lease_ms: Option<u64>,
    /// Delay before a failed message is redelivered. Absent: ready at once.
    #[serde(default)]
    pub backoff: Option<BackoffBody>,
    /// Deliveries in flight at once, W (1 to 65,536; default 1).
    #[serde(default, deserialize_with = "crate::body::whole::deserialize_option")]
    #[schema(minimum = 1, maximum = 65_536)]
    pub max_in_flight: Option<u32>,
}

/// Where a new group starts.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(
    untagged,
    expecting = "expected \"earliest\", \"latest\" or a whole-number offset"
)]
pub enum Start {
    /// A named position.
    Named(StartName),
    /// An offset.
    Offset(#[serde(deserialize_with = "crate::body::whole::deserialize")] u64),
}

/// A named start position.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StartName {
    /// The oldest retained message.
    Earliest,
    /// After the last message published so far.
    Latest,
}

/// The answer to a group creation.
#[derive(Debug, Serialize, ToSchema)]
pub struct GroupCreated {
    /// The topic.
    pub topic: String,
    /// The new group.
    pub group: String,
}

/// A group's state, as `GET .../groups/{group}` returns it.
#[derive(Debug, Serialize, ToSchema)]
pub struct GroupInfoBody {
    /// The group's name.
    pub name: String,
    /// The offset of the next message the group has to finish.
    pub position: u64,
    /// Deliveries made so far of the message at `position` (0 if none).
    pub attempt: u32,
    /// The delivery in flight, or null.
    pub in_flight: Option<DeliveryRef>,
    /// Total deliveries allowed per message.
    pub max_attempts: u32,
    /// Messages published but not finished by this group.
    pub lag: u64,
    /// How many messages this group dead-lettered.
    pub dead_letters: u64,
}

/// The answer to `DELETE /v1/topics/{topic}/groups/{group}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct GroupDeleted {
    /// The topic's name.
    pub topic: String,
    /// The group's name.
    pub group: String,
    /// Always `true`: an unknown group is a 404.
    pub deleted: bool,
}

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
