//! A group's deliveries one at a time: poll (JSON or raw bytes), ack and nack.
//!
//! Every transition goes through the store, which runs the one group state machine
//! (`mailroom::group`) and makes the event durable before the response is sent (the hot
//! calls awaited without blocking a worker; see [`crate::backend`]).

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::Engine as _;
use bytes::Bytes;
use mailroom::topic::Nack;
pub use mailroom_api::deliveries::{
    Acked, DeliveryBody, DeliveryId as DeliveryRef, NackOutcome, Nacked,
};

use crate::body::{JsonBody, QueryParams};
use crate::error::{ApiError, ErrorBody};
use crate::metrics::{Metrics, NackLabels};
use crate::paths::GroupPath;
use crate::routes::arguments::check_nack_options;
use crate::routes::group_control::{poll_consumer, NackRequest, PollRequest};
use crate::state::AppState;

/// The header carrying the offset on a raw poll.
pub const OFFSET_HEADER: &str = "mailroom-offset";
/// The header carrying the attempt on a raw poll.
pub const ATTEMPT_HEADER: &str = "mailroom-attempt";

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

async fn poll_delivery(
    state: &AppState,
    topic: String,
    group: String,
    consumer: Option<String>,
) -> Result<Option<mailroom::topic::Delivery<Bytes>>, ApiError> {
    let labels = Metrics::group(&topic, &group);
    let delivery = state
        .backend
        .poll(&topic, &group, consumer.as_deref())
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
    GroupPath { topic, group }: GroupPath,
    QueryParams(query): QueryParams<PollRequest>,
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
    GroupPath { topic, group }: GroupPath,
    QueryParams(query): QueryParams<PollRequest>,
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
    GroupPath { topic, group }: GroupPath,
    JsonBody(delivery): JsonBody<DeliveryRef>,
) -> Result<Json<Acked>, ApiError> {
    let labels = Metrics::group(&topic, &group);
    let id = delivery.id();
    state.backend.ack(&topic, &group, id).await?;
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
    GroupPath { topic, group }: GroupPath,
    JsonBody(request): JsonBody<NackRequest>,
) -> Result<Json<Nacked>, ApiError> {
    let labels = Metrics::group(&topic, &group);
    let (id, options) = request.split();
    check_nack_options(&options)?;
    let released = options.kind == mailroom::group::NackKind::Release;
    let nack = state.backend.nack(&topic, &group, id, options).await?;
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
