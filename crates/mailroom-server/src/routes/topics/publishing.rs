//! Publishing to a topic: one message (the raw body, its metadata in headers) and a
//! batch (a JSON list of messages, or the binary batch encoding of `batch_binary`).

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::Engine as _;
use mailroom::topic::Metadata;
use mailroom_store::{NewMessage, Stored};

use super::{
    Base64Message, BatchMessage, BatchPublished, BatchRequest, Published, BATCH_MESSAGES_MAX,
};
use crate::body::{parse, RawBody};
use crate::error::{ApiError, ErrorBody};
use crate::metrics::TopicLabels;
use crate::paths::TopicPath;
use crate::routes::batch_binary;
use crate::routes::batch_encode::{self, FastBatch};
use crate::routes::metadata;
use crate::state::AppState;

/// Publishes the raw request body as one message, with the key in `Mailroom-Key` and
/// each header in a `Mailroom-Header-<name>` request header (optional; at most 64, values
/// at most 4096 bytes, 16 KiB in all).
///
/// OpenAPI cannot describe a family of header names, so only `Mailroom-Key` is listed
/// as a parameter: a listed `Mailroom-Header-{name}` is not a valid header name, and
/// generators and fuzzers sent it as one.
#[utoipa::path(post, path = "/v1/topics/{topic}/messages", tag = "topics",
    description = "Publishes the raw body as one message. Optional metadata: the key in \
        `Mailroom-Key`, each header in a `Mailroom-Header-<name>` request header (the name \
        in lower case; at most 64 headers, values at most 4096 bytes, 16 KiB in all).",
    params(("topic" = crate::names::Name, Path, description = "Topic name"),
           ("Mailroom-Key" = Option<String>, Header, description = "The message's key: 1 to 1024 bytes of UTF-8"),
           ("Idempotency-Key" = Option<String>, Header, description = "The publisher's idempotency key, 1 to 256 bytes of UTF-8: a repeat inside the topic's window answers the first offset with `duplicate: true` and stores nothing")),
    request_body(content = String, content_type = "application/octet-stream",
        description = "The message: any bytes, up to --max-payload-bytes"),
    responses(
        (status = 201, description = "Stored (durably, under fsync always)", body = Published),
        (status = 400, description = "Invalid name, key or header", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "Unknown topic", body = ErrorBody),
        (status = 413, description = "Body larger than --max-payload-bytes", body = ErrorBody),
    ))]
pub async fn publish(
    State(state): State<AppState>,
    TopicPath { topic }: TopicPath,
    request_headers: HeaderMap,
    body: Result<RawBody, ApiError>,
) -> Result<Response, ApiError> {
    let metadata = metadata::of_request_headers(&request_headers)?;
    let RawBody(payload) = body?;
    let answer = if metadata.is_empty() {
        let offset = state.backend.publish(&topic, payload).await?;
        Stored {
            offset,
            duplicate: false,
        }
    } else {
        let message = NewMessage { payload, metadata };
        state.backend.publish_once(&topic, &[message]).await?[0]
    };
    let labels = TopicLabels { topic };
    if !answer.duplicate {
        state.metrics.publishes.get_or_create(&labels).inc();
    }
    let published = Published {
        offset: answer.offset,
        duplicate: answer.duplicate,
    };
    // A duplicate answers as its first publish did (201), with `duplicate` set.
    Ok((StatusCode::CREATED, Json(published)).into_response())
}

/// Publishes several messages in one durable write.
#[utoipa::path(post, path = "/v1/topics/{topic}/messages/batch", tag = "topics",
    params(("topic" = crate::names::Name, Path, description = "Topic name")),
    request_body(content(
            (BatchRequest = "application/json"),
            (String = "application/vnd.mailroom.batch")),
        description = "JSON: messages as strings, {\"base64\": ...} or {\"payload\" or \"payload_base64\", \"key\", \"headers\", \"idempotency_key\"}. \
            Or the binary batch encoding (`application/vnd.mailroom.batch`): `MRB2`, a u32 count, then per message a u32 word \
            (bit 31: the body opens with a metadata block; bits 0-30: the body's bytes) and the body: the metadata block as the \
            store writes it (u32 length, flags byte: 1 key, 2 headers, 4 idempotency key; then each as a u16 length and UTF-8, \
            headers as a u16 count and name/value pairs in name order), then the payload; \
            every integer little-endian."),
    responses(
        (status = 201, description = "All stored, with consecutive offsets", body = BatchPublished),
        (status = 400, description = "Invalid name, empty batch, bad base64, bad JSON or a binary body that breaks its layout", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "Unknown topic", body = ErrorBody),
        (status = 413, description = "A message or the body is too large", body = ErrorBody),
    ))]
pub async fn publish_batch(
    State(state): State<AppState>,
    TopicPath { topic }: TopicPath,
    request_headers: HeaderMap,
    body: Result<RawBody, ApiError>,
) -> Result<Response, ApiError> {
    let RawBody(body) = body?;
    let payload_bytes_max = state.config.payload_bytes_max;
    let fast = if batch_binary::is_binary(&request_headers, &body) {
        Some(batch_binary::binary_batch(&body, payload_bytes_max)?)
    } else {
        batch_encode::fast_batch(&body, payload_bytes_max)
    };
    let published = match fast {
        Some(FastBatch::Bare(payloads)) => bare_published(&state, &topic, &payloads).await?,
        Some(FastBatch::Encoded(batch)) => {
            published_of(&state.backend.publish_encoded(&topic, &batch).await?)
        }
        None => {
            let request = parse::<BatchRequest>(&body)?;
            let messages = decode_batch(request, payload_bytes_max)?;
            if messages.iter().all(|message| message.metadata.is_empty()) {
                let payloads: Vec<Bytes> = messages.into_iter().map(|m| m.payload).collect();
                bare_published(&state, &topic, &payloads).await?
            } else {
                published_of(&state.backend.publish_once(&topic, &messages).await?)
            }
        }
    };
    let stored = published.offsets.len() - published.duplicates.len();
    let labels = TopicLabels { topic };
    state
        .metrics
        .publishes
        .get_or_create(&labels)
        .inc_by(stored as u64);
    Ok((StatusCode::CREATED, Json(published)).into_response())
}

/// Publishes a batch of bare payloads.
async fn bare_published(
    state: &AppState,
    topic: &str,
    payloads: &[Bytes],
) -> Result<BatchPublished, ApiError> {
    let offsets = state.backend.publish_batch(topic, payloads).await?;
    Ok(BatchPublished {
        offsets: offsets.collect(),
        duplicates: Vec::new(),
    })
}

/// The answer to a batch publish whose messages answered `answers`.
fn published_of(answers: &[Stored]) -> BatchPublished {
    BatchPublished {
        offsets: answers.iter().map(|answer| answer.offset).collect(),
        duplicates: (0..answers.len())
            .filter(|&index| answers[index].duplicate)
            .collect(),
    }
}

pub(crate) fn decode_batch(
    request: BatchRequest,
    payload_bytes_max: u64,
) -> Result<Vec<NewMessage>, ApiError> {
    let count = request.messages.len();
    if count == 0 || count > BATCH_MESSAGES_MAX {
        return Err(ApiError::count_out_of_range(
            "messages",
            "messages",
            1..=BATCH_MESSAGES_MAX,
            count,
        ));
    }
    let mut messages = Vec::with_capacity(count);
    for (index, message) in request.messages.into_iter().enumerate() {
        let (payload, metadata) = match message {
            BatchMessage::Text(text) => (Bytes::from(text), Metadata::default()),
            BatchMessage::Binary(Base64Message { base64 }) => {
                (decode_base64(index, "base64", base64)?, Metadata::default())
            }
            BatchMessage::Message(object) => {
                let payload = match (object.payload, object.payload_base64) {
                    (Some(text), None) => Bytes::from(text),
                    (None, Some(base64)) => decode_base64(index, "payload_base64", base64)?,
                    _ => {
                        return Err(ApiError::invalid_argument(format!(
                            "messages[{index}] must have exactly one of payload and payload_base64"
                        )))
                    }
                };
                let metadata =
                    metadata::of_object(index, object.key, object.headers, object.idempotency_key)?;
                (payload, metadata)
            }
        };
        if payload.len() as u64 > payload_bytes_max {
            return Err(ApiError::payload_over_limit(
                &format!("messages[{index}]"),
                payload.len(),
                payload_bytes_max,
            ));
        }
        messages.push(NewMessage { payload, metadata });
    }
    Ok(messages)
}

/// Decodes the base64 of field `field` of batch item `index`.
fn decode_base64(index: usize, field: &str, base64: String) -> Result<Bytes, ApiError> {
    base64::engine::general_purpose::STANDARD
        .decode(base64)
        .map(Bytes::from)
        .map_err(|error| {
            // The decoder's text ends with a full stop; this sentence goes on.
            let error = error.to_string();
            let error = error.trim_end_matches('.');
            ApiError::invalid_argument(format!(
                "messages[{index}].{field} is not standard base64: {error}"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves batch decoding keeps order, decodes base64, and refuses empty, bad-base64
    // and oversized batches with the documented codes.
    #[test]
    fn decode_batch_rules() {
        let parse = |json: &str| crate::body::parse::<BatchRequest>(json.as_bytes()).unwrap();
        let messages = decode_batch(parse(r#"{"messages":["a",{"base64":"/w=="}]}"#), 8).unwrap();
        assert_eq!(
            messages,
            vec![
                NewMessage::bare(Bytes::from_static(b"a")),
                NewMessage::bare(Bytes::from_static(&[0xff]))
            ]
        );
        let empty = decode_batch(parse(r#"{"messages":[]}"#), 8).unwrap_err();
        assert_eq!(empty.code, "invalid_argument");
        let bad = decode_batch(parse(r#"{"messages":[{"base64":"!!"}]}"#), 8).unwrap_err();
        assert_eq!(bad.code, "invalid_argument");
        let big = decode_batch(parse(r#"{"messages":["123456789"]}"#), 8).unwrap_err();
        assert_eq!(big.code, "payload_too_large");
    }

    // Proves batch items may be objects with a payload (text or base64), a key and
    // headers, and that an object with both payloads, neither, or a bad key is refused
    // naming the item.
    #[test]
    fn decode_batch_objects() {
        let parse = |json: &str| crate::body::parse::<BatchRequest>(json.as_bytes()).unwrap();
        let json = r#"{"messages":[{"payload":"a","key":"k","headers":{"h":"v"}},
                                   {"payload_base64":"/w=="}]}"#;
        let messages = decode_batch(parse(json), 8).unwrap();
        let keyed = Metadata::new().with_key("k").with_header("h", "v");
        assert_eq!(messages[0].metadata, keyed);
        assert_eq!(messages[1], NewMessage::bare(Bytes::from_static(&[0xff])));
        for json in [
            r#"{"messages":[{"payload":"a","payload_base64":"/w=="}]}"#,
            r#"{"messages":["x",{"key":"k"}]}"#,
        ] {
            let error = decode_batch(parse(json), 8).unwrap_err();
            assert!(
                error.message.contains("exactly one of payload"),
                "{}",
                error.message
            );
        }
        let error = decode_batch(parse(r#"{"messages":[{"payload":"a","key":""}]}"#), 8);
        assert!(error
            .unwrap_err()
            .message
            .starts_with("messages[0].key must be"));
    }
}
