//! Consumer groups: create, describe, poll (JSON or raw bytes), ack, nack, dead letters.
//!
//! Every transition goes through the store, which runs the one group state machine
//! (`mailroom::group`) and makes the event durable before the response is sent (the hot
//! calls through [`AppState::durable`], awaited without blocking a worker).

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::Engine as _;
use bytes::Bytes;
use mailroom::group::DeliveryId;
use mailroom::topic::{GroupInfo, Nack, StartPosition};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::body::JsonBody;
use crate::error::{ApiError, ErrorBody};
use crate::metrics::{Metrics, NackLabels};
use crate::names::check_name;
use crate::routes::group_control::{
    group_config, group_detail, poll_consumer, BackoffBody, GroupDetailBody, NackRequest,
    PollRequest,
};
use crate::state::AppState;

/// The header carrying the offset on a raw poll.
pub const OFFSET_HEADER: &str = "mailroom-offset";
/// The header carrying the attempt on a raw poll.
pub const ATTEMPT_HEADER: &str = "mailroom-attempt";
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
#[serde(untagged)]
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

/// Names a delivery, for ack and nack.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeliveryRef {
    /// The message's offset.
    #[serde(deserialize_with = "crate::body::whole::deserialize")]
    #[schema(minimum = 0)]
    pub offset: u64,
    /// The attempt, as the poll returned it.
    #[serde(deserialize_with = "crate::body::whole::deserialize")]
    #[schema(minimum = 0)]
    pub attempt: u32,
}

impl DeliveryRef {
    /// The delivery this names, as the store fences it.
    pub fn id(self) -> DeliveryId {
        DeliveryId {
            offset: self.offset,
            attempt: self.attempt,
        }
    }
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

/// A delivery as JSON. Exactly one of `payload` (valid UTF-8) and `payload_base64`.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryBody {
    /// The message's offset.
    pub offset: u64,
    /// Which delivery of the message to this group it is, from 1.
    pub attempt: u32,
    /// The message, when it is valid UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload: Option<String>,
    /// The message in standard base64, when it is not valid UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload_base64: Option<String>,
}

/// The answer to an ack.
#[derive(Debug, Serialize, ToSchema)]
pub struct Acked {
    /// Always `acked`.
    pub outcome: String,
}

/// What a nack did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum NackOutcome {
    /// Attempts remain; the next poll delivers the message again with attempt + 1.
    Retry,
    /// A `release`: handed back without counting as a failure; delivered again later.
    Released,
    /// That was the final attempt (or a `reject`); the message is in the group's
    /// dead-letter queue.
    DeadLettered,
}

/// The answer to a nack.
#[derive(Debug, Serialize, ToSchema)]
pub struct Nacked {
    /// What the nack did.
    pub outcome: NackOutcome,
}

/// One dead letter. Exactly one of `payload` and `payload_base64`.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeadLetterBody {
    /// The message's offset.
    pub offset: u64,
    /// Deliveries made before it was dead-lettered.
    pub attempts: u32,
    /// The reason given with the final failure (`"lease expired"` for a lease), or null.
    pub reason: Option<String>,
    /// When it was dead-lettered, in Unix milliseconds.
    pub at_ms: u64,
    /// The message, when it is valid UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload: Option<String>,
    /// The message in standard base64, when it is not valid UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload_base64: Option<String>,
}

/// The most dead letters one page may hold.
pub const DEAD_LETTERS_PAGE_MAX: usize = 10_000;
/// The page size when `limit` is not given.
pub const DEAD_LETTERS_PAGE_DEFAULT: usize = 1_000;

/// Which page of dead letters `GET .../dead-letters` answers.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DeadLetterPage {
    /// The first offset to include (default 0): the `next` of the previous page.
    #[param(minimum = 0)]
    pub from: Option<u64>,
    /// The most dead letters to return, 1 to 10,000 (default 1,000).
    #[param(minimum = 1, maximum = 10_000)]
    pub limit: Option<usize>,
}

impl DeadLetterPage {
    /// The checked page size.
    fn limit(&self) -> Result<usize, ApiError> {
        let limit = self.limit.unwrap_or(DEAD_LETTERS_PAGE_DEFAULT);
        if limit == 0 || limit > DEAD_LETTERS_PAGE_MAX {
            return Err(ApiError::invalid_argument(format!(
                "limit must be in 1..={DEAD_LETTERS_PAGE_MAX}, got {limit}"
            )));
        }
        Ok(limit)
    }
}

/// The answer to `GET .../dead-letters`.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeadLetters {
    /// One page of the group's dead letters, by ascending offset.
    pub dead_letters: Vec<DeadLetterBody>,
    /// The `from` of the next page, or null when this page is the last.
    pub next: Option<u64>,
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

/// Splits a payload into its JSON form: text if UTF-8, base64 otherwise.
pub(super) fn encode_payload(payload: Bytes) -> (Option<String>, Option<String>) {
    match String::from_utf8(payload.into()) {
        Ok(text) => (Some(text), None),
        Err(error) => {
            let encoded = base64::engine::general_purpose::STANDARD.encode(error.as_bytes());
            (None, Some(encoded))
        }
    }
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

/// The JSON form of a delivery.
pub(super) fn delivery_body(delivery: mailroom::topic::Delivery<Bytes>) -> DeliveryBody {
    let (payload, payload_base64) = encode_payload(delivery.message);
    DeliveryBody {
        offset: delivery.offset,
        attempt: delivery.attempt,
        payload,
        payload_base64,
    }
}

pub(super) fn check_names(topic: &str, group: &str) -> Result<(), ApiError> {
    check_name("topic", topic)?;
    check_name("group", group)
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
    Path((topic, group)): Path<(String, String)>,
    JsonBody(request): JsonBody<CreateGroup>,
) -> Result<Response, ApiError> {
    check_names(&topic, &group)?;
    if request.max_attempts == 0 || request.max_attempts > MAX_ATTEMPTS_LIMIT {
        return Err(ApiError::invalid_argument(format!(
            "max_attempts must be in 1..={MAX_ATTEMPTS_LIMIT}, got {}",
            request.max_attempts
        )));
    }
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
    );
    state
        .blocking(move |store| {
            let topic = store.topic(&topic)?;
            match config {
                None => topic.create_group_at(&group, request.max_attempts, start),
                Some(config) => topic.create_group_with(&group, start, config),
            }
        })
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
    Path((topic, group)): Path<(String, String)>,
) -> Result<Json<GroupDetailBody>, ApiError> {
    check_names(&topic, &group)?;
    Ok(Json(group_detail(&state, topic, group).await?))
}

async fn poll_delivery(
    state: &AppState,
    topic: String,
    group: String,
    consumer: Option<String>,
) -> Result<Option<mailroom::topic::Delivery<Bytes>>, ApiError> {
    check_names(&topic, &group)?;
    let labels = Metrics::group(&topic, &group);
    let delivery = state
        .durable(|store| {
            let topic = store.topic(&topic)?;
            match &consumer {
                None => topic.poll_deferred(&group),
                Some(consumer) => topic.poll_as_deferred(&group, consumer),
            }
        })
        .await?;
    if delivery.is_some() {
        state.metrics.deliveries.get_or_create(&labels).inc();
    }
    Ok(delivery)
}

/// Polls a group: the delivery in flight (same attempt), a new attempt at the next
/// message, or 204 when the group has finished everything published.
#[utoipa::path(post, path = "/v1/topics/{topic}/groups/{group}/poll", tag = "groups",
    params(("topic" = crate::names::Name, Path, description = "Topic name"),
           ("group" = crate::names::Name, Path, description = "Group name"), PollRequest),
    request_body(content = PollRequest, description = "Optional: who polls"),
    responses(
        (status = 200, description = "A delivery", body = DeliveryBody),
        (status = 204, description = "Nothing waiting"),
        (status = 400, description = "Invalid name", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "Unknown topic or group", body = ErrorBody),
    ))]
pub async fn poll(
    State(state): State<AppState>,
    Path((topic, group)): Path<(String, String)>,
    Query(query): Query<PollRequest>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let consumer = poll_consumer(query, &body)?;
    let Some(delivery) = poll_delivery(&state, topic, group, consumer).await? else {
        return Ok(StatusCode::NO_CONTENT.into_response());
    };
    Ok(Json(delivery_body(delivery)).into_response())
}

/// Polls a group and returns the message's raw bytes, with the offset and attempt in
/// the `mailroom-offset` and `mailroom-attempt` headers.
#[utoipa::path(post, path = "/v1/topics/{topic}/groups/{group}/poll/raw", tag = "groups",
    params(("topic" = crate::names::Name, Path, description = "Topic name"),
           ("group" = crate::names::Name, Path, description = "Group name"), PollRequest),
    request_body(content = PollRequest, description = "Optional: who polls"),
    responses(
        (status = 200, description = "A delivery's bytes", content_type = "application/octet-stream",
            body = String,
            headers(("mailroom-offset" = u64, description = "The message's offset"),
                    ("mailroom-attempt" = u32, description = "The attempt"))),
        (status = 204, description = "Nothing waiting"),
        (status = 400, description = "Invalid name", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "Unknown topic or group", body = ErrorBody),
    ))]
pub async fn poll_raw(
    State(state): State<AppState>,
    Path((topic, group)): Path<(String, String)>,
    Query(query): Query<PollRequest>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let consumer = poll_consumer(query, &body)?;
    let Some(delivery) = poll_delivery(&state, topic, group, consumer).await? else {
        return Ok(StatusCode::NO_CONTENT.into_response());
    };
    let mut headers = HeaderMap::new();
    headers.insert(OFFSET_HEADER, HeaderValue::from(delivery.offset));
    headers.insert(ATTEMPT_HEADER, HeaderValue::from(delivery.attempt));
    headers.insert(
        axum::http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    Ok((headers, delivery.message).into_response())
}

/// Acknowledges the exact delivery in flight; the group moves past the message.
#[utoipa::path(post, path = "/v1/topics/{topic}/groups/{group}/ack", tag = "groups",
    params(("topic" = crate::names::Name, Path, description = "Topic name"),
           ("group" = crate::names::Name, Path, description = "Group name")),
    request_body = DeliveryRef,
    responses(
        (status = 200, description = "Acknowledged", body = Acked),
        (status = 400, description = "Invalid name or JSON", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "Unknown topic or group", body = ErrorBody),
        (status = 409, description = "Not the current delivery (not_owned)", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
    ))]
pub async fn ack(
    State(state): State<AppState>,
    Path((topic, group)): Path<(String, String)>,
    JsonBody(delivery): JsonBody<DeliveryRef>,
) -> Result<Json<Acked>, ApiError> {
    check_names(&topic, &group)?;
    let labels = Metrics::group(&topic, &group);
    let id = delivery.id();
    state
        .durable(|store| store.topic(&topic)?.ack_deferred(&group, id))
        .await?;
    state.long_polls.wake(&labels.topic);
    state.metrics.acks.get_or_create(&labels).inc();
    Ok(Json(Acked {
        outcome: "acked".to_owned(),
    }))
}

/// Gives up on the exact delivery in flight: a retry, or a dead letter after the final
/// attempt.
#[utoipa::path(post, path = "/v1/topics/{topic}/groups/{group}/nack", tag = "groups",
    params(("topic" = crate::names::Name, Path, description = "Topic name"),
           ("group" = crate::names::Name, Path, description = "Group name")),
    request_body = NackRequest,
    responses(
        (status = 200, description = "retry, released or dead_lettered", body = Nacked),
        (status = 400, description = "Invalid name or JSON", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "Unknown topic or group", body = ErrorBody),
        (status = 409, description = "Not the current delivery (not_owned)", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
    ))]
pub async fn nack(
    State(state): State<AppState>,
    Path((topic, group)): Path<(String, String)>,
    JsonBody(request): JsonBody<NackRequest>,
) -> Result<Json<Nacked>, ApiError> {
    check_names(&topic, &group)?;
    let labels = Metrics::group(&topic, &group);
    let (id, options) = request.split();
    let released = options.kind == mailroom::group::NackKind::Release;
    let nack = state
        .durable(|store| store.topic(&topic)?.nack_with_deferred(&group, id, options))
        .await?;
    state.long_polls.wake(&labels.topic);
    let outcome = match nack {
        Nack::Retry if released => NackOutcome::Released,
        Nack::Retry => NackOutcome::Retry,
        Nack::DeadLettered => {
            state.metrics.dead_letters.get_or_create(&labels).inc();
            NackOutcome::DeadLettered
        }
    };
    let outcome_label = match outcome {
        NackOutcome::Retry => "retry",
        NackOutcome::Released => "released",
        NackOutcome::DeadLettered => "dead_lettered",
    };
    state
        .metrics
        .nacks
        .get_or_create(&NackLabels {
            topic: labels.topic,
            group: labels.group,
            outcome: outcome_label.to_owned(),
        })
        .inc();
    Ok(Json(Nacked { outcome }))
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
    Path((topic, group)): Path<(String, String)>,
) -> Result<Json<GroupDeleted>, ApiError> {
    check_names(&topic, &group)?;
    let (name, group_name) = (topic.clone(), group.clone());
    state
        .blocking(move |store| store.topic(&name)?.delete_group(&group_name))
        .await?;
    // Its long polls re-poll, find the group gone and answer 404 `unknown_group`.
    state.long_polls.wake(&topic);
    state.metrics.forget_group(&topic, &group);
    Ok(Json(GroupDeleted {
        topic,
        group,
        deleted: true,
    }))
}

/// Lists one page of the group's dead letters, by offset, with their payloads.
#[utoipa::path(get, path = "/v1/topics/{topic}/groups/{group}/dead-letters", tag = "groups",
    params(("topic" = crate::names::Name, Path, description = "Topic name"),
           ("group" = crate::names::Name, Path, description = "Group name"),
           DeadLetterPage),
    responses(
        (status = 200, description = "A page of dead letters", body = DeadLetters),
        (status = 400, description = "Invalid name, from or limit", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "Unknown topic or group", body = ErrorBody),
    ))]
pub async fn dead_letters(
    State(state): State<AppState>,
    Path((topic, group)): Path<(String, String)>,
    Query(page): Query<DeadLetterPage>,
) -> Result<Json<DeadLetters>, ApiError> {
    check_names(&topic, &group)?;
    let limit = page.limit()?;
    let from = page.from.unwrap_or(0);
    let mut letters = state
        .blocking(move |store| store.topic(&topic)?.dead_letter_info(&group))
        .await?;
    // The store answers in the order the letters were made, which is not offset order
    // when several deliveries are in flight; pages walk by offset, so sort first.
    letters.sort_by_key(|letter| letter.offset);
    let mut remaining = letters
        .into_iter()
        .filter(|letter| letter.offset >= from)
        .peekable();
    let dead_letters = remaining
        .by_ref()
        .take(limit)
        .map(|letter| {
            let (payload, payload_base64) = encode_payload(letter.message);
            DeadLetterBody {
                offset: letter.offset,
                attempts: letter.attempts,
                reason: letter.reason,
                at_ms: letter.at_ms,
                payload,
                payload_base64,
            }
        })
        .collect();
    let next = remaining.peek().map(|letter| letter.offset);
    Ok(Json(DeadLetters { dead_letters, next }))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves UTF-8 payloads travel as text and anything else as base64, never both.
    #[test]
    fn payload_encoding_picks_one_form() {
        assert_eq!(
            encode_payload(Bytes::from_static(b"hi")),
            (Some("hi".into()), None)
        );
        assert_eq!(
            encode_payload(Bytes::from_static(&[0xff, 0x00])),
            (None, Some("/wA=".into()))
        );
    }
}
