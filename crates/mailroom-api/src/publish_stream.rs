//! The publish stream (`GET /v1/topics/{topic}/publish/ws`): one WebSocket frame per
//! message from the client, answered in order by [`StreamConfirmation`] text frames.

use serde::{Deserialize, Serialize};

use crate::ErrorCode;

fn is_false(value: &bool) -> bool {
    !*value
}

/// One confirmation frame: the fate of frames `seq .. seq + count`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StreamConfirmation {
    /// The first frame covered (frames are numbered from 0 on the connection).
    pub seq: u64,
    /// How many consecutive frames are covered.
    pub count: u64,
    /// On success: the offset of frame `seq`; frame `seq + i` got `offset + i`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// `true` when the one frame covered carried an `idempotency_key` in the topic's
    /// window: nothing was stored, `offset` is the first publish's. Left out when
    /// `false`. (A frame with an idempotency key is always confirmed alone.)
    #[serde(default, skip_serializing_if = "is_false")]
    pub duplicate: bool,
    /// On failure: why none of the covered frames was published.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<StreamError>,
}

/// Why frames were not published: the code and message an HTTP publish would give.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StreamError {
    /// The stable error code (`payload_too_large`, `unknown_topic`, `store_failed`, ...).
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub code: ErrorCode,
    /// A human-readable explanation.
    pub message: String,
}

/// What a publish stream's text frames hold (`?text=` on the upgrade request).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum TextFrames {
    /// A text frame is one message's payload, as a binary frame is (the default).
    #[default]
    Payload,
    /// A text frame is one message as a JSON object, a batch item's object form:
    /// `{"payload" | "payload_base64", "key", "headers"}`. Binary frames stay payloads.
    Json,
}

/// The query string of `GET /v1/topics/{topic}/publish/ws`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "openapi",
    derive(utoipa::IntoParams),
    into_params(parameter_in = Query)
)]
#[serde(deny_unknown_fields)]
pub struct PublishStreamQuery {
    /// `payload` (default) or `json`: what a text frame holds.
    #[serde(default)]
    pub text: TextFrames,
}

/// The close reason of a stream ended by the server's shutdown (close code 1001).
pub const SHUTDOWN_CLOSE_REASON: &str = "shutting_down";
