//! Errors on the wire: every failure is `{"error": "<code>", "message": "..."}`.
//!
//! The code is an [`ErrorCode`]: a stable snake_case string that clients match on. A code
//! is never renamed or reused for another condition; a new condition gets a new code. A
//! code this crate does not know (from a newer server) decodes as [`ErrorCode::Other`],
//! so an old client still reads the error instead of failing to decode it.
//!
//! ```
//! use mailroom_api::{ErrorBody, ErrorCode};
//! let body: ErrorBody = serde_json::from_str(r#"{"error":"not_owned","message":"gone"}"#).unwrap();
//! assert_eq!(body.error, ErrorCode::NotOwned);
//! ```

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Declares the known codes once: the variant, its string, and its documentation.
macro_rules! error_codes {
    ($($(#[doc = $doc:literal])* $variant:ident => $text:literal,)*) => {
        /// A stable, machine-readable error code.
        ///
        /// ```
        /// use mailroom_api::ErrorCode;
        /// assert_eq!(ErrorCode::NotOwned.as_str(), "not_owned");
        /// assert_eq!(ErrorCode::parse("not_owned"), ErrorCode::NotOwned);
        /// assert_eq!(ErrorCode::parse("brand_new"), ErrorCode::Other("brand_new".into()));
        /// let json = serde_json::to_string(&ErrorCode::UnknownTopic).unwrap();
        /// assert_eq!(json, r#""unknown_topic""#);
        /// ```
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum ErrorCode {
            $($(#[doc = $doc])* $variant,)*
            /// A code this version does not know, as the server sent it.
            Other(String),
        }

        impl ErrorCode {
            /// Every known code, in declaration order.
            pub const KNOWN: &'static [ErrorCode] = &[$(ErrorCode::$variant,)*];

            /// The code's string, as it appears on the wire.
            pub fn as_str(&self) -> &str {
                match self {
                    $(ErrorCode::$variant => $text,)*
                    ErrorCode::Other(text) => text,
                }
            }

            /// The code a string names: a known one, or [`ErrorCode::Other`].
            pub fn parse(text: &str) -> ErrorCode {
                match text {
                    $($text => ErrorCode::$variant,)*
                    other => ErrorCode::Other(other.to_owned()),
                }
            }
        }
    };
}

error_codes! {
    /// 400: the request does not fit what the framework expects (a query string, say).
    BadRequest => "bad_request",
    /// 400: a value is out of its documented range.
    InvalidArgument => "invalid_argument",
    /// 400: the body is JSON of the wrong shape or types.
    InvalidBody => "invalid_body",
    /// 400: the body is not JSON.
    MalformedJson => "malformed_json",
    /// 400: a topic, group or channel name breaks the [name rule](crate::names).
    InvalidName => "invalid_name",
    /// 400: a WebSocket route was called with a plain request.
    NotWebsocket => "not_websocket",
    /// 401: the bearer token is missing or wrong.
    Unauthorized => "unauthorized",
    /// 403: a browser request from an origin the server does not allow (not its own and
    /// not one of `--cors-origin`), refused before it changed anything.
    ForbiddenOrigin => "forbidden_origin",
    /// 404: no such route.
    NotFound => "not_found",
    /// 404: no such topic.
    UnknownTopic => "unknown_topic",
    /// 404: no such consumer group.
    UnknownGroup => "unknown_group",
    /// 404: no such live channel.
    UnknownChannel => "unknown_channel",
    /// 405: the route does not take this method.
    MethodNotAllowed => "method_not_allowed",
    /// 409: the group exists already.
    GroupExists => "group_exists",
    /// 409: the channel exists with other settings.
    ChannelExists => "channel_exists",
    /// 409: the server has as many channels as it admits.
    ChannelLimit => "channel_limit",
    /// 409: the channel has as many subscribers as it admits.
    SubscriberLimit => "subscriber_limit",
    /// 409: the server holds as many topics as it admits (`--max-topics`, sized from the
    /// open-file limit). A conflict with the server's state, as `channel_limit`: retrying
    /// does not help until a topic is deleted or the limit raised.
    TopicLimit => "topic_limit",
    /// 409: the delivery named is not in flight (acked, nacked, expired or never made).
    NotOwned => "not_owned",
    /// 409: a rule of the state machine refused the request.
    Conflict => "conflict",
    /// 413: the body or a message is over its limit.
    PayloadTooLarge => "payload_too_large",
    /// 415: the framework refused the content type.
    UnsupportedMediaType => "unsupported_media_type",
    /// 426: the route needs a protocol upgrade.
    UpgradeRequired => "upgrade_required",
    /// 429: too many long polls are waiting.
    TooManyLongPolls => "too_many_long_polls",
    /// 429: too many stream tickets are outstanding.
    TooManyTickets => "too_many_tickets",
    /// 500: a server fault.
    Internal => "internal",
    /// 500: the store failed to read or write.
    StorageError => "storage_error",
    /// 503: the store stopped accepting writes after a failed sync (fail-stop).
    StoreFailed => "store_failed",
    /// 503: the server holds as many connections as it admits (`--max-connections`); the
    /// connection is answered and closed. Transient: a retry later may get in.
    ConnectionLimit => "connection_limit",
    /// 503: the topic is failed (damaged, unreadable or stopped); the message says where
    /// and why. The other topics serve.
    TopicFailed => "topic_failed",
    /// 503: the store (a database the broker runs over) cannot be reached now; the
    /// broker reconnects by itself, and the call may be retried.
    StoreUnavailable => "store_unavailable",
    /// 501: the broker's backend does not support this call yet.
    NotSupported => "not_supported",
    /// Any other error status without a code of its own.
    Error => "error",
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&str> for ErrorCode {
    fn from(text: &str) -> ErrorCode {
        ErrorCode::parse(text)
    }
}

impl PartialEq<str> for ErrorCode {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for ErrorCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<ErrorCode> for str {
    fn eq(&self, other: &ErrorCode) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<ErrorCode> for &str {
    fn eq(&self, other: &ErrorCode) -> bool {
        *self == other.as_str()
    }
}

impl Serialize for ErrorCode {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ErrorCode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<ErrorCode, D::Error> {
        let text = std::borrow::Cow::<str>::deserialize(deserializer)?;
        Ok(ErrorCode::parse(&text))
    }
}

/// The most characters of a client's text an error message echoes back.
pub const SHOWN_CHARS_MAX: usize = 128;

/// A client's text as an error message shows it: at most [`SHOWN_CHARS_MAX`] characters,
/// with `…` where it was cut, so an error never echoes an unbounded input.
///
/// ```
/// use mailroom_api::error::{shown, SHOWN_CHARS_MAX};
/// assert_eq!(shown("abc"), "abc");
/// assert_eq!(shown(&"x".repeat(500)).chars().count(), SHOWN_CHARS_MAX + 1);
/// ```
pub fn shown(text: &str) -> String {
    let mut chars = text.chars();
    let mut out: String = chars.by_ref().take(SHOWN_CHARS_MAX).collect();
    if chars.next().is_some() {
        out.push('…');
    }
    out
}

/// The body of every error response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorBody {
    /// A stable, machine-readable code such as `unknown_topic` or `not_owned`.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub error: ErrorCode,
    /// A human-readable explanation.
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves every known code round-trips through its string, and the strings are unique.
    #[test]
    fn codes_round_trip_and_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::KNOWN {
            assert_eq!(&ErrorCode::parse(code.as_str()), code);
            assert!(seen.insert(code.as_str()), "{code} twice");
            let json = serde_json::to_string(code).unwrap();
            assert_eq!(serde_json::from_str::<ErrorCode>(&json).unwrap(), *code);
        }
    }

    // Proves an unknown code from a newer server still decodes, and encodes back unchanged.
    #[test]
    fn unknown_codes_decode_as_other() {
        let code: ErrorCode = serde_json::from_str(r#""quota_exceeded""#).unwrap();
        assert_eq!(code, ErrorCode::Other("quota_exceeded".into()));
        assert_eq!(serde_json::to_string(&code).unwrap(), r#""quota_exceeded""#);
    }
}
