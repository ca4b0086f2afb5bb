//! API errors: one JSON shape, `{"error": "<code>", "message": "..."}`, for every
//! failure, including the framework's own rejections.
//!
//! Codes are stable: clients match on them, so a code is never renamed or reused for a
//! different condition. New conditions get new codes.
//!
//! [`ApiError`] is defined here with its constructors. Which status and code each error
//! of the library, the store and the framework gets is in `codes`; how an [`ApiError`]
//! becomes a response (the JSON body, the log line, the rewrite of framework rejections)
//! is in `responses`; the shared wordings of bad input are in `wording`.

use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::http::StatusCode;
pub use mailroom_api::{ErrorBody, ErrorCode};

mod codes;
mod responses;
mod wording;

pub use responses::{errors_as_json, panic_response};
pub use wording::{shown, SHOWN_CHARS_MAX};

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
