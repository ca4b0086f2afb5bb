//! Consumer groups: create, describe and delete, and what the other group routes share
//! (the JSON form of a group's state).
//!
//! A group's deliveries (poll, ack, nack and their batch forms) are in
//! [`crate::routes::deliveries`], its leases in [`crate::routes::leases`] and its dead
//! letters (listing, redrive, purge) in [`crate::routes::dead_letters`].
//!
//! Every transition goes through the store, which runs the one group state machine
//! (`mailroom::group`) and makes the event durable before the response is sent (the hot
//! calls awaited without blocking a worker; see [`crate::backend`]).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use mailroom::group::{Backoff, GroupConfig};
use mailroom::topic::{GroupInfo, StartPosition};
pub use mailroom_api::groups::{
    Backoff as BackoffBody, CreateGroup, DeadLetterNote as DeadLetterNoteBody,
    GroupCounters as CountersBody, GroupCreated, GroupDeleted, GroupDetail as GroupDetailBody,
    GroupInfo as GroupInfoBody, Start, StartName,
};
/// The largest `max_attempts` a group may have.
pub use mailroom_api::limits::MAX_ATTEMPTS_MAX as MAX_ATTEMPTS_LIMIT;
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouterExt as _};
use utoipa_axum::routes;

use crate::backend::GroupDetail;
use crate::body::JsonBody;
use crate::error::{ApiError, ErrorBody};
use crate::paths::GroupPath;
use crate::routes::arguments::check_group_settings;
use crate::routes::deliveries::DeliveryRef;
use crate::routes::BodyLimits;
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
        paused: info.pause.is_some(),
        paused_until_ms: info.pause.and_then(|pause| pause.until_ms),
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

/// The optional settings of a new group besides `max_attempts`; `None` when none is set,
/// and the group then has the defaults (`GroupConfig::new(max_attempts)`).
pub fn group_config(
    max_attempts: u32,
    lease_ms: Option<u64>,
    backoff: Option<BackoffBody>,
    max_in_flight: Option<u32>,
) -> Option<GroupConfig> {
    if lease_ms.is_none() && backoff.is_none() && max_in_flight.is_none() {
        return None;
    }
    let mut config = GroupConfig::new(max_attempts);
    config.lease_ms = lease_ms;
    config.backoff = backoff.map(Backoff::from);
    if let Some(window) = max_in_flight {
        config.max_in_flight = window;
    }
    Some(config)
}

/// Reads everything [`GroupDetailBody`] shows.
pub async fn group_detail(
    state: &AppState,
    topic: String,
    group: String,
) -> Result<GroupDetailBody, ApiError> {
    let detail = state.backend.group_detail(&topic, &group).await?;
    let GroupDetail {
        info,
        config,
        counters,
        in_flight,
        dead_letters,
    } = detail;
    Ok(GroupDetailBody {
        info: group_info_body(info),
        lease_ms: config.lease_ms,
        backoff: config.backoff.map(BackoffBody::from),
        max_in_flight: config.max_in_flight,
        counters: counters.into(),
        deliveries: in_flight.into_iter().map(Into::into).collect(),
        dead_letter_notes: dead_letters.iter().map(DeadLetterNoteBody::from).collect(),
    })
}

/// The group routes: create, describe, delete.
pub fn router(limits: BodyLimits) -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create_group, group_info, delete_group).layer(limits.json))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a group with no optional setting maps to no config (the defaults), and one
    // with any setting keeps the others at their defaults.
    #[test]
    fn group_config_only_when_asked() {
        assert_eq!(group_config(3, None, None, None), None);
        let config = group_config(3, Some(500), None, Some(4)).unwrap();
        assert_eq!(config.lease_ms, Some(500));
        assert_eq!(config.backoff, None);
        assert_eq!(config.max_in_flight, 4);
    }
}
