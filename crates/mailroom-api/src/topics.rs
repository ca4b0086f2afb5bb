//! Topics: create, list, describe, change, delete, publish one message, publish a batch.
//!
//! A topic's retention is set at creation (`PUT /v1/topics/{topic}` with
//! [`TopicCreateRequest`]) and changed later (`PATCH`, [`TopicUpdateRequest`]). In
//! [`RetentionSettings`] every limit is three-way: absent (at creation the server-wide
//! default, in a change "unchanged"), `null` (unlimited) or a number:
//!
//! ```
//! use mailroom_api::topics::TopicUpdateRequest;
//! let change: TopicUpdateRequest =
//!     serde_json::from_str(r#"{"retention": {"max_bytes": 1073741824, "max_age_ms": null}}"#).unwrap();
//! assert_eq!(change.retention.max_bytes, Some(Some(1 << 30)));
//! assert_eq!(change.retention.max_age_ms, Some(None));
//! assert_eq!(change.retention.max_messages, None);
//! assert!(change.retention.check().is_ok());
//! ```
//!
//! A batch message is a string, or `{"base64": ...}` for bytes that are not UTF-8:
//!
//! ```
//! use mailroom_api::topics::{Base64Message, BatchMessage};
//! let text = BatchMessage::Text("hi".into());
//! assert_eq!(serde_json::to_string(&text).unwrap(), r#""hi""#);
//! let bytes = BatchMessage::Binary(Base64Message { base64: "/wA=".into() });
//! assert_eq!(serde_json::to_string(&bytes).unwrap(), r#"{"base64":"/wA="}"#);
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::groups::GroupInfo;
use crate::limits::{
    IDEMPOTENCY_WINDOW_MESSAGES_MAX, IDEMPOTENCY_WINDOW_MS_MAX, RETENTION_AGE_MS_MAX,
    RETENTION_BYTES_MAX, RETENTION_MESSAGES_MAX,
};
use crate::topic_health::TopicCondition;

/// The answer to `PUT /v1/topics/{topic}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TopicCreated {
    /// The topic's name.
    pub topic: String,
    /// `true` if this call created it, `false` if it already existed.
    pub created: bool,
}

/// One topic in `GET /v1/topics`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TopicSummary {
    /// The topic's name.
    pub name: String,
    /// The oldest retained offset.
    pub start: u64,
    /// The offset the next message will get.
    pub end: u64,
    /// Its consumer groups' names.
    pub groups: Vec<String>,
    /// The retention in force (the topic's own over the server's defaults).
    #[serde(default)]
    pub retention: RetentionInForce,
    /// The bytes of its message log on disk.
    #[serde(default)]
    pub bytes: u64,
    /// What retention removed since the server started.
    #[serde(default)]
    pub removed: RetentionRemoved,
    /// `ok` while the topic serves, `failed` while it cannot (see `failure`).
    #[serde(default)]
    pub state: TopicCondition,
    /// Where and why the topic failed; absent while it serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// How it failed, so how it heals: `damaged`, `unreadable` or `stopped` (see
    /// [`crate::topic_health`]); absent while it serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_kind: Option<String>,
}

/// The answer to `DELETE /v1/topics/{topic}` (and to a group's delete, with its name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TopicDeleted {
    /// The topic's name.
    pub topic: String,
    /// Always `true`: an unknown topic is a 404.
    pub deleted: bool,
}

/// The answer to `GET /v1/topics`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TopicList {
    /// Every topic, sorted by name.
    pub topics: Vec<TopicSummary>,
}

/// The answer to `GET /v1/topics/{topic}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TopicInfo {
    /// The topic's name.
    pub name: String,
    /// The oldest retained offset.
    pub start: u64,
    /// The offset the next message will get.
    pub end: u64,
    /// Every group with its state.
    pub groups: Vec<GroupInfo>,
    /// The retention in force (the topic's own over the server's defaults).
    #[serde(default)]
    pub retention: RetentionInForce,
    /// The bytes of its message log on disk.
    #[serde(default)]
    pub bytes: u64,
    /// What retention removed since the server started.
    #[serde(default)]
    pub removed: RetentionRemoved,
    /// `ok` while the topic serves, `failed` while it cannot (see `failure`).
    #[serde(default)]
    pub state: TopicCondition,
    /// Where and why the topic failed; absent while it serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// How it failed, so how it heals: `damaged`, `unreadable` or `stopped` (see
    /// [`crate::topic_health`]); absent while it serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_kind: Option<String>,
    /// The idempotency window in force (the topic's own over the server's defaults).
    /// Left out by servers older than the per-topic window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency: Option<IdempotencyInForce>,
}

/// The answer to a single publish.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Published {
    /// The message's offset; for a duplicate, the first publish's.
    pub offset: u64,
    /// `true` when the request's `Idempotency-Key` was in the topic's window: nothing
    /// was stored. Left out when `false`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub duplicate: bool,
}

fn is_false(value: &bool) -> bool {
    !*value
}

/// One message of a batch: a UTF-8 string, `{"base64": "..."}` for arbitrary bytes, or
/// an object with the payload and the message's key and headers.
///
/// It is read by a decoder of its own (`crate::batch_item`), not by serde's untagged
/// derive: that one buffers every item and tries each form in turn, which cost a batch of
/// object items about a third of its publish rate (`BENCHMARKS.md`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(untagged)]
pub enum BatchMessage {
    /// The message is this text.
    Text(String),
    /// The message is these base64-encoded bytes (an object only, never `["..."]`).
    Binary(Base64Message),
    /// The message with its metadata (an object only, as `Binary`).
    Message(BatchMessageObject),
}

/// A batch message as an object: exactly one of `payload` and `payload_base64`, and
/// optionally a key and headers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct BatchMessageObject {
    /// The message as text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<String>,
    /// The message as standard base64 with padding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(format = Byte))]
    pub payload_base64: Option<String>,
    /// The message's key: 1 to 1024 bytes of UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Headers by name: at most 64, names 1 to 256 bytes, values at most 4096 bytes,
    /// 16 KiB in all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// The publisher's idempotency key, 1 to 256 bytes of UTF-8: a message repeating a
    /// key in the topic's window (or earlier in the batch) is not stored again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

/// A batch message given as base64.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Base64Message {
    /// Standard base64 with padding.
    #[cfg_attr(feature = "openapi", schema(format = Byte))]
    pub base64: String,
}

/// The body of a batch publish.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct BatchRequest {
    /// 1 to 10,000 messages, stored in this order with consecutive offsets.
    #[cfg_attr(feature = "openapi", schema(min_items = 1, max_items = 10_000))]
    pub messages: Vec<BatchMessage>,
}

/// The answer to a batch publish.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BatchPublished {
    /// The offsets given to the messages, in request order: consecutive for the
    /// messages stored; a duplicate's is its first publish's.
    pub offsets: Vec<u64>,
    /// The indices (into the request's `messages`) of the duplicates: messages whose
    /// idempotency key was in the topic's window or earlier in the batch, not stored.
    /// Left out when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub duplicates: Vec<usize>,
}

/// The body of `PUT /v1/topics/{topic}`; an empty body is the same as `{}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TopicCreateRequest {
    /// The topic's own retention; absent limits follow the server's defaults. Ignored
    /// (not applied) when the topic exists already: change it with `PATCH`.
    #[serde(
        default,
        deserialize_with = "crate::object::deserialize_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub retention: Option<RetentionSettings>,
    /// The topic's own idempotency window; absent limits follow the server's defaults
    /// (`--idempotency-window-messages`, `--idempotency-window-ms`). Set at creation
    /// only: ignored when the topic exists already.
    #[serde(
        default,
        deserialize_with = "crate::object::deserialize_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub idempotency: Option<IdempotencySettings>,
}

/// A topic's own idempotency window, as sent at creation: a repeated idempotency key is
/// answered as a duplicate while its first publish is among the topic's last
/// `window_messages` messages *and* at most `window_ms` old. Past either, it is stored
/// again as a new message.
///
/// ```
/// use mailroom_api::topics::IdempotencySettings;
/// let window: IdempotencySettings = serde_json::from_str(r#"{"window_ms": 600000}"#).unwrap();
/// assert_eq!((window.window_ms, window.window_messages), (Some(600_000), None));
/// assert!(window.check().is_ok());
/// let zero = IdempotencySettings { window_messages: Some(0), window_ms: None };
/// assert_eq!(zero.check().unwrap_err().field, "idempotency.window_messages");
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct IdempotencySettings {
    /// Remember a key while its publish is among the topic's last this many messages
    /// (1 to 1,000,000). Absent: the server's default.
    #[serde(
        default,
        deserialize_with = "crate::whole::deserialize_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1_000_000))]
    pub window_messages: Option<u64>,
    /// Remember a key for this many milliseconds after its publish (1 to 604,800,000:
    /// 7 days). Absent: the server's default.
    #[serde(
        default,
        deserialize_with = "crate::whole::deserialize_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 604_800_000_u64))]
    pub window_ms: Option<u64>,
}

/// An idempotency window limit outside its bounds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} must be in {min}..={max}, got {value}")]
pub struct WindowOutOfRange {
    /// The field's path, as on the wire: `idempotency.window_ms`.
    pub field: &'static str,
    /// The value sent.
    pub value: u64,
    /// The smallest allowed.
    pub min: u64,
    /// The largest allowed.
    pub max: u64,
}

impl IdempotencySettings {
    /// Checks each limit given against its bounds ([`IDEMPOTENCY_WINDOW_MESSAGES_MAX`],
    /// [`IDEMPOTENCY_WINDOW_MS_MAX`]).
    ///
    /// # Errors
    /// The first limit out of range, by its path.
    pub fn check(&self) -> Result<(), WindowOutOfRange> {
        let limits = [
            (
                "idempotency.window_messages",
                self.window_messages,
                IDEMPOTENCY_WINDOW_MESSAGES_MAX,
            ),
            (
                "idempotency.window_ms",
                self.window_ms,
                IDEMPOTENCY_WINDOW_MS_MAX,
            ),
        ];
        match first_out_of_range(limits) {
            Some((field, value, max)) => Err(WindowOutOfRange {
                field,
                value,
                min: 1,
                max,
            }),
            None => Ok(()),
        }
    }
}

/// The first of `limits` (name, value given, largest allowed) whose value is outside
/// `1..=max`, as (name, value, max).
fn first_out_of_range<const N: usize>(
    limits: [(&'static str, Option<u64>, u64); N],
) -> Option<(&'static str, u64, u64)> {
    limits.into_iter().find_map(|(field, value, max)| {
        value
            .filter(|&value| value == 0 || value > max)
            .map(|value| (field, value, max))
    })
}

/// The idempotency window in force for a topic, in its view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct IdempotencyInForce {
    /// A key is remembered while its publish is among the topic's last this many
    /// messages.
    pub window_messages: u64,
    /// A key is remembered for this many milliseconds after its publish.
    pub window_ms: u64,
}

/// The body of `PATCH /v1/topics/{topic}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TopicUpdateRequest {
    /// The limits to change; absent ones stay as they are.
    #[serde(deserialize_with = "crate::object::deserialize")]
    pub retention: RetentionSettings,
}

/// A topic's own retention limits, as sent. Each limit is absent (`None`), `null`
/// (`Some(None)`: unlimited, whatever the server's default) or a number. Retention
/// deletes whole segments of the message log, oldest first, never the newest, so a
/// limit is met to within one segment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RetentionSettings {
    /// Delete messages older than this many milliseconds (1 to about ten years).
    #[serde(
        default,
        deserialize_with = "crate::whole::deserialize_nullable",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<u64>, minimum = 1, maximum = 315_360_000_000_u64))]
    pub max_age_ms: Option<Option<u64>>,
    /// Delete the oldest messages while the log holds more bytes than this (1 to 2^60).
    #[serde(
        default,
        deserialize_with = "crate::whole::deserialize_nullable",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<u64>, minimum = 1, maximum = 1_152_921_504_606_846_976_u64))]
    pub max_bytes: Option<Option<u64>>,
    /// Delete the oldest messages while the log holds more than this many (1 to 2^53).
    #[serde(
        default,
        deserialize_with = "crate::whole::deserialize_nullable",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<u64>, minimum = 1, maximum = 9_007_199_254_740_992_u64))]
    pub max_messages: Option<Option<u64>>,
    /// `false` lets retention delete messages a group has not finished (that group then
    /// skips to the oldest message left). Absent or `null`: the default, `true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_unconsumed: Option<bool>,
}

/// A retention limit outside its bounds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("retention.{field} must be in {min}..={max}, got {value}")]
pub struct RetentionOutOfRange {
    /// The field's name, as on the wire.
    pub field: &'static str,
    /// The value sent.
    pub value: u64,
    /// The smallest allowed.
    pub min: u64,
    /// The largest allowed.
    pub max: u64,
}

impl RetentionSettings {
    /// Checks every limit given against its bounds
    /// ([`RETENTION_AGE_MS_MAX`], [`RETENTION_BYTES_MAX`], [`RETENTION_MESSAGES_MAX`]).
    ///
    /// # Errors
    /// The first limit out of range, by name.
    pub fn check(&self) -> Result<(), RetentionOutOfRange> {
        let limits = [
            (
                "max_age_ms",
                self.max_age_ms.flatten(),
                RETENTION_AGE_MS_MAX,
            ),
            ("max_bytes", self.max_bytes.flatten(), RETENTION_BYTES_MAX),
            (
                "max_messages",
                self.max_messages.flatten(),
                RETENTION_MESSAGES_MAX,
            ),
        ];
        match first_out_of_range(limits) {
            Some((field, value, max)) => Err(RetentionOutOfRange {
                field,
                value,
                min: 1,
                max,
            }),
            None => Ok(()),
        }
    }
}

/// The retention in force for a topic, in its view: `null` is unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RetentionInForce {
    /// Messages older than this many milliseconds are deleted.
    pub max_age_ms: Option<u64>,
    /// The oldest messages are deleted while the log holds more bytes than this.
    pub max_bytes: Option<u64>,
    /// The oldest messages are deleted while the log holds more than this many.
    pub max_messages: Option<u64>,
    /// Whether messages a group has not finished are kept whatever the limits say.
    pub keep_unconsumed: bool,
}

impl Default for RetentionInForce {
    fn default() -> Self {
        RetentionInForce {
            max_age_ms: None,
            max_bytes: None,
            max_messages: None,
            keep_unconsumed: true,
        }
    }
}

/// What retention removed from a topic's message log since the server started. (All
/// messages ever removed number `start`: offsets begin at 0.)
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RetentionRemoved {
    /// Messages removed.
    pub messages: u64,
    /// Their bytes on disk.
    pub bytes: u64,
    /// Whole segments removed.
    pub segments: u64,
}
