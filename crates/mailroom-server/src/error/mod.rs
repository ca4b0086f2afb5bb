//! API errors: one JSON shape, `{"error": "<code>", "message": "..."}`, for every
//! failure, including the framework's own rejections.
//!
//! Codes are stable: clients match on them, so a code is never renamed or reused for a
//! different condition. New conditions get new codes.

use std::any::Any;

use axum::body::Body;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::http::{header, HeaderValue, Request, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use mailroom::broadcast::BroadcastError;
use mailroom::group::ArgumentError;
use mailroom::topic::TopicError;
pub use mailroom_api::{ErrorBody, ErrorCode};
use mailroom_store::StoreError;

mod wording;

pub use wording::{shown, SHOWN_CHARS_MAX};

/// The longest framework error body that is carried over into a JSON message.
const REJECTION_BODY_BYTES_MAX: usize = 4096;

/// An error on its way to becoming a response: a status, a stable code and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The stable code.
    pub code: ErrorCode,
    /// The explanation.
    pub message: String,
}

impl ApiError {
    /// An error with any status and code. A `&str` code is read as [`ErrorCode::parse`]
    /// reads it; new code passes an [`ErrorCode`].
    pub fn new(
        status: StatusCode,
        code: impl Into<ErrorCode>,
        message: impl Into<String>,
    ) -> ApiError {
        ApiError {
            status,
            code: code.into(),
            message: message.into(),
        }
    }

    /// 400 `invalid_argument`.
    pub fn invalid_argument(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, ErrorCode::InvalidArgument, message)
    }

    /// 404 `unknown_channel`.
    pub fn unknown_channel(channel: &str) -> ApiError {
        ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorCode::UnknownChannel,
            format!("unknown channel {channel:?}"),
        )
    }

    /// 413 `payload_too_large`.
    pub fn payload_too_large(message: impl Into<String>) -> ApiError {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::PayloadTooLarge,
            message,
        )
    }

    /// 413 `payload_too_large` for one message over the server's payload limit, in the
    /// one wording every route uses: `"messages[2] is 2000 bytes, over the server's
    /// payload limit of 1024 bytes"`.
    ///
    /// ```
    /// use mailroom_server::error::ApiError;
    /// let error = ApiError::payload_over_limit("frame 3", 2000, 1024);
    /// assert_eq!(error.message, "frame 3 is 2000 bytes, over the server's payload limit of 1024 bytes");
    /// ```
    pub fn payload_over_limit(what: &str, bytes: usize, payload_bytes_max: u64) -> ApiError {
        ApiError::payload_too_large(format!(
            "{what} is {bytes} bytes, over the server's payload limit of {payload_bytes_max} \
             bytes"
        ))
    }

    /// 400 `not_websocket`: a WebSocket route was called with a plain request.
    pub fn not_websocket(rejection: &WebSocketUpgradeRejection) -> ApiError {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::NotWebsocket,
            format!(
                "this route takes only a WebSocket handshake: {}",
                rejection.body_text()
            ),
        )
    }

    /// 500 `internal`: a server fault, such as a task that panicked.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::Internal,
            message,
        )
    }
}

impl ApiError {
    /// The response without the log line [`IntoResponse`] writes for server errors, for
    /// callers that have logged the fault in more detail already.
    fn unlogged_response(self) -> Response {
        let body = ErrorBody {
            error: self.code,
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

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::error!(code = self.code.as_str(), message = %self.message, "request failed");
        }
        self.unlogged_response()
    }
}

/// The answer to a request whose handler panicked: 500 `internal` in the usual shape.
///
/// The panic's message goes to the log with `tracing::error!`, not to the client: it can
/// name internals, and the client can do nothing with it. This is the handler of the
/// catch-panic layer every served connection has, so a panic costs one request its
/// answer, never the connection it came on.
///
/// ```
/// use mailroom_server::error::panic_response;
/// let response = panic_response(Box::new("index out of bounds"));
/// assert_eq!(response.status(), 500);
/// ```
pub fn panic_response(panic: Box<dyn Any + Send + 'static>) -> Response {
    let detail = if let Some(text) = panic.downcast_ref::<&str>() {
        text
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.as_str()
    } else {
        "a panic without a message"
    };
    tracing::error!(panic = detail, "a request handler panicked; answering 500");
    ApiError::internal("the server failed while handling this request; the fault is logged")
        .unlogged_response()
}

impl From<TopicError> for ApiError {
    fn from(error: TopicError) -> ApiError {
        let message = error.to_string();
        match error {
            // The code says "invalid_argument" already; the Display's "invalid argument: "
            // prefix would say it twice.
            TopicError::InvalidArgument(argument) => argument.into(),
            TopicError::UnknownGroup { .. } => {
                ApiError::new(StatusCode::NOT_FOUND, ErrorCode::UnknownGroup, message)
            }
            TopicError::GroupExists { .. } => {
                ApiError::new(StatusCode::CONFLICT, ErrorCode::GroupExists, message)
            }
            TopicError::NotOwned { .. } => {
                ApiError::new(StatusCode::CONFLICT, ErrorCode::NotOwned, message)
            }
            // A rule added to the library later is still a refused request, not a fault.
            _ => ApiError::new(StatusCode::CONFLICT, ErrorCode::Conflict, message),
        }
    }
}

impl From<ArgumentError> for ApiError {
    /// The library's refusal of an argument in the server's wording. The library's field
    /// names are the JSON fields' names (`consumer`, `lease_ms`, `backoff.cap_ms`, ...),
    /// so its field, bound and value make the message.
    fn from(error: ArgumentError) -> ApiError {
        match error {
            ArgumentError::OutOfRange {
                field,
                min,
                max,
                got,
            } => ApiError::out_of_range(field, min..=max, got),
            ArgumentError::LengthOutOfRange {
                field,
                min,
                max,
                got,
            } => ApiError::length_out_of_range(field, min..=max, got),
            ArgumentError::CountOutOfRange {
                field,
                items,
                min,
                max,
                got,
            } => ApiError::count_out_of_range(
                field,
                items,
                usize::try_from(min).unwrap_or(usize::MAX)
                    ..=usize::try_from(max).unwrap_or(usize::MAX),
                usize::try_from(got).unwrap_or(usize::MAX),
            ),
            // The rest carry no range to word: the library's text is the message.
            other => ApiError::invalid_argument(other.to_string()),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> ApiError {
        let message = error.to_string();
        match error {
            StoreError::Topic(topic) => topic.into(),
            StoreError::UnknownTopic { .. } => {
                ApiError::new(StatusCode::NOT_FOUND, ErrorCode::UnknownTopic, message)
            }
            StoreError::InvalidName { .. } => {
                ApiError::new(StatusCode::BAD_REQUEST, ErrorCode::InvalidName, message)
            }
            StoreError::InvalidArgument { reason } => ApiError::invalid_argument(reason),
            StoreError::FailStopped { .. } => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::StoreFailed,
                message,
            ),
            StoreError::TopicLimit { topics_max } => ApiError::new(
                StatusCode::CONFLICT,
                ErrorCode::TopicLimit,
                format!(
                    "the server holds {topics_max} topics, its limit (--max-topics, sized \
                     from the open-file limit by default); delete one first"
                ),
            ),
            // The other topics serve: this one says where and why, and how it heals.
            StoreError::TopicFailed { .. } => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::TopicFailed,
                message,
            ),
            _ => ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                ErrorCode::StorageError,
                message,
            ),
        }
    }
}

impl From<BroadcastError> for ApiError {
    fn from(error: BroadcastError) -> ApiError {
        let message = error.to_string();
        match error {
            BroadcastError::SubscriberLimit { .. } => {
                ApiError::new(StatusCode::CONFLICT, ErrorCode::SubscriberLimit, message)
            }
            // The library's "broker is closed" names its own type; to a client, the
            // channel was closed (deleted) while the request ran.
            BroadcastError::Closed => ApiError::new(
                StatusCode::NOT_FOUND,
                ErrorCode::UnknownChannel,
                "the channel was closed",
            ),
            _ => ApiError::invalid_argument(message),
        }
    }
}

/// The stable code for a framework rejection with this status and no code of its own.
fn code_for_status(status: StatusCode) -> ErrorCode {
    match status {
        StatusCode::BAD_REQUEST | StatusCode::UNPROCESSABLE_ENTITY => ErrorCode::BadRequest,
        StatusCode::UNAUTHORIZED => ErrorCode::Unauthorized,
        StatusCode::NOT_FOUND => ErrorCode::NotFound,
        StatusCode::METHOD_NOT_ALLOWED => ErrorCode::MethodNotAllowed,
        StatusCode::PAYLOAD_TOO_LARGE => ErrorCode::PayloadTooLarge,
        StatusCode::UNSUPPORTED_MEDIA_TYPE => ErrorCode::UnsupportedMediaType,
        StatusCode::UPGRADE_REQUIRED => ErrorCode::UpgradeRequired,
        _ if status.is_server_error() => ErrorCode::Internal,
        _ => ErrorCode::Error,
    }
}

/// Middleware: rewrites any error response that is not already JSON (a framework
/// rejection, a 405 from the router, ...) into the standard error shape, keeping its
/// text as the message. 422 becomes 400: the API documents one status for bad input.
pub async fn errors_as_json(request: Request<Body>, next: Next) -> Response {
    let method = request.method().clone();
    // A clone of the URI shares its bytes: no copy of the path on every request for the
    // rare answer that names it.
    let uri = request.uri().clone();
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
        // The router's 405 has no body. Its `Allow` header, which says what would have
        // worked, is added outside this layer, so the message can only point to it.
        _ if status == StatusCode::METHOD_NOT_ALLOWED => {
            format!(
                "{method} is not allowed on {}; the Allow header lists the methods that are",
                uri.path()
            )
        }
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
    use std::fmt::Write as _;
    use std::sync::Arc;

    /// A subscriber that keeps the fields of every ERROR event, as text.
    #[derive(Default, Clone)]
    struct ErrorEvents(Arc<parking_lot::Mutex<Vec<String>>>);

    impl tracing::Subscriber for ErrorEvents {
        fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
            tracing::span::Id::from_u64(1)
        }
        fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
        fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
        fn event(&self, event: &tracing::Event<'_>) {
            if *event.metadata().level() != tracing::Level::ERROR {
                return;
            }
            let mut text = String::new();
            event.record(
                &mut |field: &tracing::field::Field, value: &dyn std::fmt::Debug| {
                    let _ = write!(text, "{}={value:?} ", field.name());
                },
            );
            self.0.lock().push(text);
        }
        fn enter(&self, _: &tracing::span::Id) {}
        fn exit(&self, _: &tracing::span::Id) {}
    }

    // Proves a panic becomes one ERROR log line that carries the panic's message (as
    // &str or String payload), and a 500 `internal` answer that does not.
    #[test]
    fn panic_is_logged_once_and_answered_500() {
        for payload in [
            Box::new("secret detail") as Box<dyn Any + Send>,
            Box::new(String::from("secret detail")),
        ] {
            let events = ErrorEvents::default();
            let response =
                tracing::subscriber::with_default(events.clone(), || panic_response(payload));
            let logged = events.0.lock().clone();
            assert_eq!(logged.len(), 1, "{logged:?}");
            assert!(logged[0].contains("secret detail"), "{logged:?}");
            assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
            let body = futures_util::FutureExt::now_or_never(axum::body::to_bytes(
                response.into_body(),
                usize::MAX,
            ))
            .expect("a full body is ready at once")
            .unwrap();
            let body: ErrorBody = serde_json::from_slice(&body).unwrap();
            assert_eq!(body.error, "internal");
            assert!(!body.message.contains("secret"), "{}", body.message);
        }
    }

    // Proves each topic rule maps to the status and stable code the API documents.
    #[test]
    fn topic_errors_map_to_documented_statuses() {
        let cases = [
            (
                TopicError::InvalidArgument(ArgumentError::Unsupported { reason: "x" }),
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
            assert_eq!((api.status.as_u16(), api.code.as_str()), (status, code));
        }
        let unknown = ApiError::from(StoreError::UnknownTopic { topic: "t".into() });
        assert_eq!(
            (unknown.status.as_u16(), unknown.code.as_str()),
            (404, "unknown_topic")
        );
    }

    // Proves an invalid argument from the library or the store becomes a message that is
    // its reason alone (the code already says "invalid_argument", so the Display's
    // "invalid argument: " prefix would say it twice), and that the library's typed
    // refusals read as the server's own wording of their field, bound and value.
    #[test]
    fn invalid_arguments_are_not_prefixed_twice() {
        let from_topic = ApiError::from(TopicError::InvalidArgument(
            ArgumentError::LengthOutOfRange {
                field: "consumer",
                min: 1,
                max: 128,
                got: 0,
            },
        ));
        let from_store = ApiError::from(StoreError::InvalidArgument {
            reason: "limit must be in 1..=10000, got 0".into(),
        });
        let wrapped = ApiError::from(StoreError::Topic(TopicError::InvalidArgument(
            ArgumentError::OutOfRange {
                field: "lease_ms",
                min: 1,
                max: 604_800_000,
                got: 0,
            },
        )));
        let counted = ApiError::from(TopicError::InvalidArgument(
            ArgumentError::CountOutOfRange {
                field: "ack",
                items: "deliveries",
                min: 0,
                max: 4,
                got: 5,
            },
        ));
        let unsupported = ApiError::from(TopicError::InvalidArgument(ArgumentError::Unsupported {
            reason: "a delay needs a clock",
        }));
        for (api, reason) in [
            (from_topic, "consumer must be 1..=128 bytes long, got 0"),
            (from_store, "limit must be in 1..=10000, got 0"),
            (wrapped, "lease_ms must be in 1..=604800000 (7 days), got 0"),
            (counted, "ack must list at most 4 deliveries, got 5"),
            (unsupported, "a delay needs a clock"),
        ] {
            assert_eq!(
                (api.code.as_str(), api.message.as_str()),
                ("invalid_argument", reason)
            );
        }
    }
}
