//! A group's deliveries: poll (JSON or raw bytes), ack and nack one at a time, and their
//! batch forms ([`batch`]) with long polls ([`waiting`]).
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
use mailroom::topic::{Message, Nack};
pub use mailroom_api::deliveries::{
    Acked, DeliveryBody, DeliveryId as DeliveryRef, NackKind as NackKindBody, NackOutcome,
    NackRequest, Nacked, PollRequest,
};
use mailroom_store::MessageDelivery;
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouterExt as _};
use utoipa_axum::routes;

use crate::body::{parse, JsonBody, QueryParams};
use crate::error::{shown, ApiError, ErrorBody};
use crate::metrics::{Metrics, NackLabels};
use crate::paths::GroupPath;
use crate::routes::arguments::{check_consumer, check_nack_options};
use crate::routes::metadata;
use crate::routes::BodyLimits;
use crate::state::AppState;

pub mod batch;
pub mod batch_arguments;
pub mod waiting;

/// The header carrying the offset on a raw poll.
pub const OFFSET_HEADER: &str = "mailroom-offset";
/// The header carrying the attempt on a raw poll.
pub const ATTEMPT_HEADER: &str = "mailroom-attempt";

/// Splits a payload into its JSON form: text if UTF-8, base64 otherwise.
pub(crate) fn encode_payload(payload: Bytes) -> (Option<String>, Option<String>) {
    match String::from_utf8(payload.into()) {
        Ok(text) => (Some(text), None),
        Err(error) => {
            let encoded = base64::engine::general_purpose::STANDARD.encode(error.as_bytes());
            (None, Some(encoded))
        }
    }
}

/// The JSON forms of `deliveries`, each with its message's publish time and metadata.
pub(crate) fn delivery_bodies(deliveries: Vec<MessageDelivery>) -> Vec<DeliveryBody> {
    deliveries
        .into_iter()
        .map(|delivery| delivery_body(delivery.offset, delivery.attempt, delivery.message))
        .collect()
}

/// The JSON form of one delivery of the message at `offset`.
fn delivery_body(offset: u64, attempt: u32, message: Message<Bytes>) -> DeliveryBody {
    let (payload, (key, headers, published_at_ms)) = metadata::fields(message);
    let (payload, payload_base64) = encode_payload(payload);
    DeliveryBody {
        offset,
        attempt,
        payload,
        payload_base64,
        key,
        headers,
        published_at_ms,
    }
}

async fn poll_delivery(
    state: &AppState,
    topic: String,
    group: String,
    consumer: Option<String>,
) -> Result<Option<MessageDelivery>, ApiError> {
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
    let mut bodies = delivery_bodies(vec![delivery]);
    Ok(Json(bodies.pop().expect("one delivery, one body")).into_response())
}

/// Polls a group and returns the message's raw bytes, with the offset and attempt in
/// the `mailroom-offset` and `mailroom-attempt` headers, and the publish time, key and
/// headers in `mailroom-published-at-ms`, `mailroom-key` and `mailroom-header-<name>`.
#[utoipa::path(post, path = "/v1/topics/{topic}/groups/{group}/poll/raw", tag = "groups",
    params(("topic" = crate::names::Name, Path, description = "Topic name"),
           ("group" = crate::names::Name, Path, description = "Group name"), PollRequest),
    request_body(content = PollRequest, description = "Optional: who polls"),
    responses(
        (status = 200, description = "A delivery's bytes", content_type = "application/octet-stream",
            body = String,
            headers(("mailroom-offset" = u64, description = "The message's offset"),
                    ("mailroom-attempt" = u32, description = "The attempt"),
                    ("mailroom-published-at-ms" = u64, description = "When the broker published the message, Unix ms"),
                    ("mailroom-key" = String, description = "The message's key, if it has one"),
                    ("mailroom-header-{name}" = String, description = "Each of the message's headers that HTTP can carry"))),
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
    let message = delivery.message;
    metadata::insert_response_headers(&message, &mut headers);
    headers.insert(
        axum::http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    Ok((headers, message.payload).into_response())
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

/// The consumer of a poll, from `?consumer=` or a `{"consumer": ...}` body (an empty
/// body is none), checked as `poll/batch` checks its own.
///
/// # Errors
/// 400 for a malformed body, a consumer given both ways that differs, or one of the
/// wrong length ([`check_consumer`]).
pub fn poll_consumer(query: PollRequest, body: &Bytes) -> Result<Option<String>, ApiError> {
    let from_body = if body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        parse::<PollRequest>(body)?.consumer
    };
    let consumer = match (query.consumer, from_body) {
        (Some(a), Some(b)) if a != b => {
            return Err(ApiError::invalid_argument(format!(
                "consumer must be given once or the same both ways, got {:?} in the query \
                 and {:?} in the body",
                shown(&a),
                shown(&b)
            )))
        }
        (a, b) => a.or(b),
    };
    check_consumer(consumer.as_deref())?;
    Ok(consumer)
}

/// The delivery routes: poll (JSON and raw), ack, nack, and their batch forms.
pub fn router(limits: BodyLimits) -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(poll).layer(limits.json))
        .routes(routes!(poll_raw).layer(limits.json))
        .routes(routes!(ack).layer(limits.json))
        .routes(routes!(nack).layer(limits.json))
        .routes(routes!(batch::poll_batch).layer(limits.delivery_list))
        .routes(routes!(batch::ack_batch).layer(limits.delivery_list))
        .routes(routes!(batch::nack_batch).layer(limits.delivery_list))
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

    // Proves the consumer comes from the query or the body, an empty body is none, and
    // two different answers are refused rather than one silently winning.
    #[test]
    fn poll_consumer_sources() {
        let none = PollRequest::default();
        assert_eq!(poll_consumer(none, &Bytes::new()).unwrap(), None);
        let body = Bytes::from_static(br#"{"consumer":"c1"}"#);
        let from_body = poll_consumer(PollRequest::default(), &body).unwrap();
        assert_eq!(from_body.as_deref(), Some("c1"));
        let query = PollRequest {
            consumer: Some("c2".into()),
        };
        assert!(poll_consumer(query, &body).is_err());
        let bad = Bytes::from_static(br#"{"who":"c1"}"#);
        assert!(poll_consumer(PollRequest::default(), &bad).is_err());
    }
}
