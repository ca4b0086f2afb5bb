//! Failed topics on the wire: a topic's `state` in its view and the listing, the failed
//! topics in `/healthz`, and the answers of `POST /v1/topics/{topic}/recover` and
//! `POST /v1/topics/{topic}/repair`.
//!
//! A topic is `failed` when it could not be opened (`damaged`: a file failed its checks;
//! `unreadable`: an I/O error) or stopped accepting writes after a failed write or
//! fsync (`stopped`, for example a full disk). Every other topic keeps serving. A
//! `stopped` or `unreadable` topic heals by itself once the cause is gone (the server
//! retries with a backoff) or at once by `recover`; a `damaged` one only by `repair`.
//!
//! ```
//! use mailroom_api::topic_health::TopicCondition;
//! assert_eq!(serde_json::to_string(&TopicCondition::Failed)?, r#""failed""#);
//! assert_eq!(TopicCondition::default(), TopicCondition::Ok);
//! # Ok::<(), serde_json::Error>(())
//! ```

use serde::{Deserialize, Serialize};

/// Whether a topic serves: the `state` of a topic's view.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum TopicCondition {
    /// Serving.
    #[default]
    Ok,
    /// Failed: see the view's `failure` and `failure_kind`.
    Failed,
}

impl TopicCondition {
    /// Whether this is [`TopicCondition::Ok`].
    pub fn is_ok(&self) -> bool {
        *self == TopicCondition::Ok
    }
}

/// One failed topic in `/healthz`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FailedTopic {
    /// The topic.
    pub topic: String,
    /// `damaged` (needs a repair), `unreadable` or `stopped` (heal by themselves once
    /// the cause is fixed, or by `recover`).
    pub kind: String,
    /// Where and why it failed.
    pub reason: String,
}

/// The answer to `POST /v1/topics/{topic}/recover`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TopicRecovered {
    /// The topic.
    pub topic: String,
    /// `true` if it was failed and serves again; `false` if it was serving already.
    pub recovered: bool,
}

/// The answer to `POST /v1/topics/{topic}/repair`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TopicRepairReport {
    /// The topic.
    pub topic: String,
    /// `true` if it was damaged and serves again; `false` if it was not damaged.
    pub repaired: bool,
    /// Each damage found, as opening reported it.
    #[serde(default)]
    pub damage: Vec<String>,
    /// What was done about each (which files were moved aside, and where).
    #[serde(default)]
    pub actions: Vec<String>,
}
