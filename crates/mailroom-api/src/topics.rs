//! Topics: create, list, describe, delete, publish one message, publish a batch.
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

use serde::{Deserialize, Serialize};

use crate::groups::GroupInfo;

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
}

/// The answer to a single publish.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Published {
    /// The message's offset.
    pub offset: u64,
}

/// One message of a batch: a UTF-8 string, or `{"base64": "..."}` for arbitrary bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(untagged, expecting = "expected a string or {\"base64\": \"...\"}")]
pub enum BatchMessage {
    /// The message is this text.
    Text(String),
    /// The message is these base64-encoded bytes.
    Binary(Base64Message),
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
    /// The offsets given to the messages, in request order (consecutive).
    pub offsets: Vec<u64>,
}
