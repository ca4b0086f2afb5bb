//! Topics: create, list, describe, delete, publish one message, publish a batch.
//!
//! Deleting a topic is the store's `delete_topic`: durable, and from then on every call
//! on it (in flight or new) answers 404 `unknown_topic`. Its long polls are woken and so
//! end with that 404, and its notifier and metric series are dropped.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::Engine as _;
pub use mailroom_api::limits::{BATCH_BODY_PAYLOADS_MAX, BATCH_MESSAGES_MAX};
pub use mailroom_api::topics::{
    Base64Message, BatchMessage, BatchPublished, BatchRequest, Published, TopicCreated,
    TopicDeleted, TopicInfo, TopicList, TopicSummary,
};
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouterExt as _};
use utoipa_axum::routes;

use crate::body::{JsonBody, RawBody};
use crate::error::{ApiError, ErrorBody};
use crate::metrics::TopicLabels;
use crate::paths::TopicPath;
use crate::routes::groups::group_info_body;
use crate::routes::BodyLimits;
use crate::state::AppState;

/// Creates a topic (idempotent).
#[utoipa::path(put, path = "/v1/topics/{topic}", tag = "topics",
    params(("topic" = crate::names::Name, Path, description = "1-128 characters of [A-Za-z0-9._-]")),
    responses(
        (status = 201, description = "Created", body = TopicCreated),
        (status = 200, description = "Already existed", body = TopicCreated),
        (status = 400, description = "Invalid name", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
    ))]
pub async fn create_topic(
    State(state): State<AppState>,
    TopicPath { topic }: TopicPath,
) -> Result<Response, ApiError> {
    let created = state.backend.create_topic(&topic).await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(TopicCreated { topic, created })).into_response())
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

/// Lists topics with their offsets and group names.
#[utoipa::path(get, path = "/v1/topics", tag = "topics",
    responses(
        (status = 200, description = "Every topic", body = TopicList),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
    ))]
pub async fn list_topics(State(state): State<AppState>) -> Result<Json<TopicList>, ApiError> {
    let topics = state.backend.list_topics().await?;
    let topics = topics
        .into_iter()
        .map(|topic| TopicSummary {
            name: topic.name,
            start: topic.start,
            end: topic.end,
            groups: topic.groups,
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
    Ok(Json(TopicInfo {
        name: topic.name,
        start: topic.start,
        end: topic.end,
        groups: topic.groups.into_iter().map(group_info_body).collect(),
    }))
}

/// Publishes the raw request body as one message.
#[utoipa::path(post, path = "/v1/topics/{topic}/messages", tag = "topics",
    params(("topic" = crate::names::Name, Path, description = "Topic name")),
    request_body(content = String, content_type = "application/octet-stream",
        description = "The message: any bytes, up to --max-payload-bytes"),
    responses(
        (status = 201, description = "Stored (durably, under fsync always)", body = Published),
        (status = 400, description = "Invalid name", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "Unknown topic", body = ErrorBody),
        (status = 413, description = "Body larger than --max-payload-bytes", body = ErrorBody),
    ))]
pub async fn publish(
    State(state): State<AppState>,
    TopicPath { topic }: TopicPath,
    body: Result<RawBody, ApiError>,
) -> Result<Response, ApiError> {
    let RawBody(payload) = body?;
    let offset = state.backend.publish(&topic, payload).await?;
    let labels = TopicLabels { topic };
    state.metrics.publishes.get_or_create(&labels).inc();
    Ok((StatusCode::CREATED, Json(Published { offset })).into_response())
}

/// Publishes several messages in one durable write.
#[utoipa::path(post, path = "/v1/topics/{topic}/messages/batch", tag = "topics",
    params(("topic" = crate::names::Name, Path, description = "Topic name")),
    request_body(content = BatchRequest, description = "Messages as strings or {\"base64\": ...}"),
    responses(
        (status = 201, description = "All stored, with consecutive offsets", body = BatchPublished),
        (status = 400, description = "Invalid name, empty batch, bad base64 or bad JSON", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "Unknown topic", body = ErrorBody),
        (status = 413, description = "A message or the body is too large", body = ErrorBody),
    ))]
pub async fn publish_batch(
    State(state): State<AppState>,
    TopicPath { topic }: TopicPath,
    JsonBody(request): JsonBody<BatchRequest>,
) -> Result<Response, ApiError> {
    let payloads = decode_batch(request, state.config.payload_bytes_max)?;
    let count = payloads.len() as u64;
    let range = state.backend.publish_batch(&topic, &payloads).await?;
    let labels = TopicLabels { topic };
    state.metrics.publishes.get_or_create(&labels).inc_by(count);
    let offsets = range.collect();
    Ok((StatusCode::CREATED, Json(BatchPublished { offsets })).into_response())
}

fn decode_batch(request: BatchRequest, payload_bytes_max: u64) -> Result<Vec<Bytes>, ApiError> {
    let count = request.messages.len();
    if count == 0 || count > BATCH_MESSAGES_MAX {
        return Err(ApiError::count_out_of_range(
            "messages",
            "messages",
            1..=BATCH_MESSAGES_MAX,
            count,
        ));
    }
    let mut payloads = Vec::with_capacity(count);
    for (index, message) in request.messages.into_iter().enumerate() {
        let payload = match message {
            BatchMessage::Text(text) => Bytes::from(text),
            BatchMessage::Binary(Base64Message { base64 }) => {
                base64::engine::general_purpose::STANDARD
                    .decode(base64)
                    .map(Bytes::from)
                    .map_err(|error| {
                        // The decoder's text ends with a full stop; this sentence goes on.
                        let error = error.to_string();
                        let error = error.trim_end_matches('.');
                        ApiError::invalid_argument(format!(
                            "messages[{index}].base64 is not standard base64: {error}"
                        ))
                    })?
            }
        };
        if payload.len() as u64 > payload_bytes_max {
            return Err(ApiError::payload_over_limit(
                &format!("messages[{index}]"),
                payload.len(),
                payload_bytes_max,
            ));
        }
        payloads.push(payload);
    }
    Ok(payloads)
}

/// The topic routes: list, create, describe, delete, publish one, publish a batch.
pub fn router(limits: BodyLimits) -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_topics))
        .routes(routes!(create_topic, topic_info, delete_topic))
        .routes(routes!(publish).layer(limits.payload))
        .routes(routes!(publish_batch).layer(limits.message_batch))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves batch decoding keeps order, decodes base64, and refuses empty, bad-base64
    // and oversized batches with the documented codes.
    #[test]
    fn decode_batch_rules() {
        let parse = |json: &str| crate::body::parse::<BatchRequest>(json.as_bytes()).unwrap();
        let payloads = decode_batch(parse(r#"{"messages":["a",{"base64":"/w=="}]}"#), 8).unwrap();
        assert_eq!(
            payloads,
            vec![Bytes::from_static(b"a"), Bytes::from_static(&[0xff])]
        );
        let empty = decode_batch(parse(r#"{"messages":[]}"#), 8).unwrap_err();
        assert_eq!(empty.code, "invalid_argument");
        let bad = decode_batch(parse(r#"{"messages":[{"base64":"!!"}]}"#), 8).unwrap_err();
        assert_eq!(bad.code, "invalid_argument");
        let big = decode_batch(parse(r#"{"messages":["123456789"]}"#), 8).unwrap_err();
        assert_eq!(big.code, "payload_too_large");
    }
}
