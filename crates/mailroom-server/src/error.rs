//! API errors: one JSON shape, `{"error": "<code>", "message": "..."}`, for every
//! failure, including the framework's own rejections.
//!
//! Codes are stable: clients match on them, so a code is never renamed or reused for a
//! different condition. New conditions get new codes.

use axum::body::Body;
use axum::http::{header, HeaderValue, Request, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use mailroom::broadcast::BroadcastError;
use mailroom::topic::TopicError;
use mailroom_store::StoreError;
use serde::Serialize;
use utoipa::ToSchema;

/// The longest framework error body that is carried over into a JSON message.
const REJECTION_BODY_BYTES_MAX: usize = 4096;

/// The body of every error response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, ToSchema)]
pub struct ErrorBody {
    /// A stable, machine-readable code such as `unknown_topic` or `not_owned`.
    pub error: String,
    /// A human-readable explanation.
    pub message: String,
}

/// An error on its way to becoming a response: a status, a stable code and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The stable code.
    pub code: &'static str,
    /// The explanation.
    pub message: String,
}

impl ApiError {
    /// An error with any status and code.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    /// 400 `invalid_argument`.
    pub fn invalid_argument(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_argument", message)
    }

    /// 404 `unknown_channel`.
    pub fn unknown_channel(channel: &str) -> ApiError {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "unknown_channel",
            format!("unknown channel {channel:?}"),
        )
    }

    /// 413 `payload_too_large`.
    pub fn payload_too_large(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", message)
    }

    /// 500 `internal`: a server fault, such as a task that panicked.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::error!(code = self.code, message = %self.message, "request failed");
        }
        let body = ErrorBody {
            error: self.code.to_owned(),
            message: self.message,
        };
        let mut response = (self.status, axum::Json(body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

impl From<TopicError> for ApiError {
    fn from(error: TopicError) -> ApiError {
        let message = error.to_string();
        match error {
            TopicError::InvalidArgument { .. } => ApiError::invalid_argument(message),
            TopicError::UnknownGroup { .. } => {
                ApiError::new(StatusCode::NOT_FOUND, "unknown_group", message)
            }
            TopicError::GroupExists { .. } => {
                ApiError::new(StatusCode::CONFLICT, "group_exists", message)
            }
            TopicError::NotOwned { .. } => {
                ApiError::new(StatusCode::CONFLICT, "not_owned", message)
            }
            // A rule added to the library later is still a refused request, not a fault.
            _ => ApiError::new(StatusCode::CONFLICT, "conflict", message),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> ApiError {
        let message = error.to_string();
        match error {
            StoreError::Topic(topic) => topic.into(),
            StoreError::UnknownTopic { .. } => {
                ApiError::new(StatusCode::NOT_FOUND, "unknown_topic", message)
            }
            StoreError::InvalidName { .. } => {
                ApiError::new(StatusCode::BAD_REQUEST, "invalid_name", message)
            }
            StoreError::InvalidArgument { .. } => ApiError::invalid_argument(message),
            StoreError::FailStopped { .. } => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "store_failed", message)
            }
            _ => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "storage_error", message),
        }
    }
}

impl From<BroadcastError> for ApiError {
    fn from(error: BroadcastError) -> ApiError {
        let message = error.to_string();
        match error {
            BroadcastError::SubscriberLimit { .. } => {
                ApiError::new(StatusCode::CONFLICT, "subscriber_limit", message)
            }
            BroadcastError::Closed => {
                ApiError::new(StatusCode::NOT_FOUND, "unknown_channel", message)
            }
            _ => ApiError::invalid_argument(message),
        }
    }
}

/// The stable code for a framework rejection with this status and no code of its own.
fn code_for_status(status: StatusCode) -> &'static str {
    match status {
        StatusCode::BAD_REQUEST | StatusCode::UNPROCESSABLE_ENTITY => "bad_request",
        StatusCode::UNAUTHORIZED => "unauthorized",
        StatusCode::NOT_FOUND => "not_found",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        StatusCode::UPGRADE_REQUIRED => "upgrade_required",
        _ if status.is_server_error() => "internal",
        _ => "error",
    }
}

/// Middleware: rewrites any error response that is not already JSON (a framework
/// rejection, a 405 from the router, ...) into the standard error shape, keeping its
/// text as the message. 422 becomes 400: the API documents one status for bad input.
pub async fn errors_as_json(request: Request<Body>, next: Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|value| value.as_bytes().starts_with(b"application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = match axum::body::to_bytes(body, REJECTION_BODY_BYTES_MAX).await {
        Ok(bytes) if !bytes.is_empty() => String::from_utf8_lossy(&bytes).into_owned(),
        _ => status.canonical_reason().unwrap_or("error").to_owned(),
    };
    let status = if status == StatusCode::UNPROCESSABLE_ENTITY {
        StatusCode::BAD_REQUEST
    } else {
        status
    };
    let mut rewritten = ApiError::new(status, code_for_status(status), text).into_response();
    // Keep headers such as `Allow` on a 405; drop the old body's length and type.
    for (name, value) in parts.headers.iter() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            rewritten.headers_mut().insert(name.clone(), value.clone());
        }
    }
    rewritten
}

#[cfg(test)]
mod tests {
    use super::*;
    use mailroom::group::{DeliveryId, NotOwned};

    // Proves each topic rule maps to the status and stable code the API documents.
    #[test]
    fn topic_errors_map_to_documented_statuses() {
        let cases = [
            (
                TopicError::InvalidArgument { reason: "x" },
                400,
                "invalid_argument",
            ),
            (
                TopicError::UnknownGroup { group: "g".into() },
                404,
                "unknown_group",
            ),
            (
                TopicError::GroupExists { group: "g".into() },
                409,
                "group_exists",
            ),
            (
                TopicError::NotOwned {
                    group: "g".into(),
                    source: NotOwned {
                        requested: DeliveryId {
                            offset: 0,
                            attempt: 1,
                        },
                        current: None,
                    },
                },
                409,
                "not_owned",
            ),
        ];
        for (error, status, code) in cases {
            let api = ApiError::from(error);
            assert_eq!((api.status.as_u16(), api.code), (status, code));
        }
        let unknown = ApiError::from(StoreError::UnknownTopic { topic: "t".into() });
        assert_eq!(
            (unknown.status.as_u16(), unknown.code),
            (404, "unknown_topic")
        );
    }
}
