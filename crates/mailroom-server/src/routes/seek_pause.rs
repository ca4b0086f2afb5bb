//! Moving and pausing a group: `POST .../groups/{group}/seek`, `.../pause` and
//! `.../resume`. The rules are the group state machine's (`mailroom::group`): a seek
//! drops the deliveries in flight (their acks answer 409 `not_owned`) and keeps attempt
//! numbers unique; a paused group hands out nothing new while deliveries in flight can
//! still be acked, nacked and touched. Each change is one durable record of the store.

use axum::body::Bytes;
use axum::extract::State;
use axum::Json;
use mailroom::topic::StartPosition;
pub use mailroom_api::groups::{GroupPause, GroupSeeked, PauseGroup, SeekGroup};
use mailroom_api::limits::OFFSET_MAX;
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouterExt as _};
use utoipa_axum::routes;

use crate::body::{parse, JsonBody};
use crate::error::{ApiError, ErrorBody};
use crate::paths::GroupPath;
use crate::routes::groups::StartName;
use crate::routes::BodyLimits;
use crate::state::AppState;

/// Where a seek body asks to go, checked: a position, or a time still to be looked up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SeekTarget {
    /// An offset, `"earliest"` or `"latest"`.
    Position(StartPosition),
    /// The first retained message published at or after this time (Unix ms).
    Time(u64),
}

/// Where a seek body asks to go, checked: exactly one of its fields.
fn seek_target(body: &SeekGroup) -> Result<SeekTarget, ApiError> {
    let position = match (body.offset, body.to, body.time_ms) {
        (Some(offset), None, None) if offset > OFFSET_MAX => {
            return Err(ApiError::out_of_range("offset", 0..=OFFSET_MAX, offset))
        }
        (Some(offset), None, None) => StartPosition::Offset(offset),
        (None, Some(StartName::Earliest), None) => StartPosition::Earliest,
        (None, Some(StartName::Latest), None) => StartPosition::Latest,
        (None, None, Some(time_ms)) if time_ms > OFFSET_MAX => {
            return Err(ApiError::out_of_range("time_ms", 0..=OFFSET_MAX, time_ms))
        }
        (None, None, Some(time_ms)) => return Ok(SeekTarget::Time(time_ms)),
        _ => {
            return Err(ApiError::invalid_argument(
                "give exactly one of offset, to (\"earliest\" or \"latest\") and time_ms",
            ))
        }
    };
    Ok(SeekTarget::Position(position))
}

/// Moves the group: to an offset within the retained log or at its end, to
/// `"earliest"` or `"latest"`, or to the first message published at or after `time_ms`
/// (the end of the log if none is). Deliveries in flight are no longer owned; a message
/// delivered again after a seek back gets an attempt number above every one the group
/// has used; dead letters stay.
#[utoipa::path(post, path = "/v1/topics/{topic}/groups/{group}/seek", tag = "groups",
    params(("topic" = crate::names::Name, Path, description = "Topic name"),
           ("group" = crate::names::Name, Path, description = "Group name")),
    request_body = SeekGroup,
    responses(
        (status = 200, description = "Moved", body = GroupSeeked),
        (status = 400, description = "Invalid name, offset (outside the retained log), time_ms, target or JSON", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "Unknown topic or group", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
    ))]
pub async fn seek(
    State(state): State<AppState>,
    GroupPath { topic, group }: GroupPath,
    JsonBody(body): JsonBody<SeekGroup>,
) -> Result<Json<GroupSeeked>, ApiError> {
    let to = match seek_target(&body)? {
        SeekTarget::Position(to) => to,
        // Looked up first, then an ordinary seek: retention moving the start in between
        // makes the seek refuse the offset (400) rather than land elsewhere.
        SeekTarget::Time(time_ms) => {
            StartPosition::Offset(state.backend.offset_at_time(&topic, time_ms).await?)
        }
    };
    let position = state.backend.seek(&topic, &group, to).await?;
    Ok(Json(GroupSeeked {
        topic,
        group,
        position,
    }))
}

/// Pauses the group, until `until_ms` or (without it) until `.../resume`: polls answer
/// as if nothing waited (a long poll waits on), while deliveries in flight can still be
/// acked, nacked and touched and their leases keep running. A pause replaces an earlier
/// one.
#[utoipa::path(post, path = "/v1/topics/{topic}/groups/{group}/pause", tag = "groups",
    params(("topic" = crate::names::Name, Path, description = "Topic name"),
           ("group" = crate::names::Name, Path, description = "Group name")),
    request_body(content = PauseGroup, description = "Optional; absent pauses until a resume"),
    responses(
        (status = 200, description = "Paused", body = GroupPause),
        (status = 400, description = "Invalid name, until_ms (not after now, or more than a week ahead) or JSON", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "Unknown topic or group", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
    ))]
pub async fn pause(
    State(state): State<AppState>,
    GroupPath { topic, group }: GroupPath,
    body: Bytes,
) -> Result<Json<GroupPause>, ApiError> {
    let body = if body.iter().all(u8::is_ascii_whitespace) {
        PauseGroup::default()
    } else {
        parse::<PauseGroup>(&body)?
    };
    state.backend.pause(&topic, &group, body.until_ms).await?;
    Ok(Json(GroupPause {
        topic,
        group,
        paused: true,
        paused_until_ms: body.until_ms,
        changed: true,
    }))
}

/// Ends the group's pause (`changed` says whether it was paused); waiting long polls
/// look again at once.
#[utoipa::path(post, path = "/v1/topics/{topic}/groups/{group}/resume", tag = "groups",
    params(("topic" = crate::names::Name, Path, description = "Topic name"),
           ("group" = crate::names::Name, Path, description = "Group name")),
    responses(
        (status = 200, description = "Not paused (any more)", body = GroupPause),
        (status = 400, description = "Invalid name", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "Unknown topic or group", body = ErrorBody),
    ))]
pub async fn resume(
    State(state): State<AppState>,
    GroupPath { topic, group }: GroupPath,
) -> Result<Json<GroupPause>, ApiError> {
    let changed = state.backend.resume(&topic, &group).await?;
    Ok(Json(GroupPause {
        topic,
        group,
        paused: false,
        paused_until_ms: None,
        changed,
    }))
}

/// The routes that move and pause a group.
pub fn router(limits: BodyLimits) -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(seek).layer(limits.json))
        .routes(routes!(pause).layer(limits.json))
        .routes(routes!(resume).layer(limits.json))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(json: &str) -> SeekGroup {
        serde_json::from_str(json).unwrap()
    }

    // Proves a seek body must name exactly one target, and time_ms is taken (to be
    // looked up) within the int64 range.
    #[test]
    fn seek_target_takes_exactly_one() {
        assert_eq!(
            seek_target(&body(r#"{"offset": 3}"#)).unwrap(),
            SeekTarget::Position(StartPosition::Offset(3))
        );
        assert_eq!(
            seek_target(&body(r#"{"to": "latest"}"#)).unwrap(),
            SeekTarget::Position(StartPosition::Latest)
        );
        assert_eq!(
            seek_target(&body(r#"{"time_ms": 5}"#)).unwrap(),
            SeekTarget::Time(5)
        );
        for bad in [
            r#"{}"#,
            r#"{"offset": 1, "to": "earliest"}"#,
            r#"{"offset": 1, "time_ms": 5}"#,
            r#"{"time_ms": 9223372036854775808}"#,
        ] {
            assert!(seek_target(&body(bad)).is_err(), "{bad}");
        }
        let error = seek_target(&body(r#"{"time_ms": 9223372036854775808}"#)).unwrap_err();
        assert!(error.message.contains("time_ms"), "{}", error.message);
    }
}
