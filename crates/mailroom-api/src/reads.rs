//! Reading a topic's log without a group: `GET /v1/topics/{topic}/messages`.
//!
//! A read changes nothing: no group's position, in-flight set or counters move, so any
//! number of readers may page through the same log. A page starts at `from` (or at the
//! first message published at or after `from_time_ms`) and holds messages in offset
//! order, each once, with its metadata; the page's `next` is the `from` of the page
//! after it.
//!
//! # Below the retained start
//!
//! Retention may have removed the offset a reader asks for. The page then starts at the
//! oldest retained message (as a Kafka consumer with `auto.offset.reset=earliest` does)
//! and says so: its `first` is above the `from` asked for, and the messages between were
//! removed. `first` is always the offset the page starts at.
//!
//! # Limits
//!
//! At most `limit` messages ([`READ_PAGE_MAX`](crate::limits::READ_PAGE_MAX)), and at
//! most [`PAGE_BYTES_MAX`](crate::limits::PAGE_BYTES_MAX) bytes of payloads, as every
//! listing: the page stops before the message that would pass the cap, but always holds
//! at least one message, however large, so reading never gets stuck.
//!
//! # Example
//!
//! ```
//! use mailroom_api::reads::{ReadPage, ReadQuery};
//! let query: ReadQuery = serde_json::from_str(r#"{"from": 3, "limit": 2}"#).unwrap();
//! assert_eq!((query.from, query.limit), (Some(3), Some(2)));
//! let page: ReadPage = serde_json::from_str(
//!     r#"{"messages": [{"offset": 3, "payload": "hi", "published_at_ms": 5}],
//!         "first": 3, "next": 4, "end": 9}"#,
//! ).unwrap();
//! assert_eq!(page.messages[0].payload.as_deref(), Some("hi"));
//! assert_eq!((page.next, page.end), (4, 9));
//! ```

use serde::{Deserialize, Serialize};

/// The query string of `GET /v1/topics/{topic}/messages`. At most one of `from` and
/// `from_time_ms`; neither starts at the oldest retained message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "openapi",
    derive(utoipa::IntoParams),
    into_params(parameter_in = Query)
)]
#[serde(deny_unknown_fields)]
pub struct ReadQuery {
    /// The first offset to read: the `next` of the previous page. Below the retained
    /// start the page starts at the oldest retained message (see `first`); above the
    /// log's end is a 400.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        param(minimum = 0, maximum = 9_223_372_036_854_775_807_i64)
    )]
    pub from: Option<u64>,
    /// Start at the first retained message published at or after this time, in Unix
    /// milliseconds (the end of the log if none is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        param(minimum = 0, maximum = 9_223_372_036_854_775_807_i64)
    )]
    pub from_time_ms: Option<u64>,
    /// The most messages to return, 1 to 10,000 (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", param(minimum = 1, maximum = 10_000))]
    pub limit: Option<usize>,
    /// At the end of the log, wait up to this long for a message to be published, in
    /// milliseconds (0 to 30,000; default 0: answer at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", param(minimum = 0, maximum = 30_000))]
    pub wait_ms: Option<u64>,
}

crate::message_body::message_body! {
    /// One message of a read. Exactly one of `payload` (valid UTF-8) and `payload_base64`.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
    pub struct ReadMessage {
        /// The message's offset.
        pub offset: u64,
    }
    key: " The message's key, if it has one.",
    then {
        /// When the broker published the message, by its clock, in Unix milliseconds.
        pub published_at_ms: u64,
    }
}

/// The answer to `GET /v1/topics/{topic}/messages`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReadPage {
    /// The messages, by ascending offset; empty at the end of the log.
    pub messages: Vec<ReadMessage>,
    /// The offset this page starts at: `from`, or the oldest retained offset when `from`
    /// was below it (the messages between were removed by retention).
    pub first: u64,
    /// The `from` of the next page: one past the last message here (`first` when the
    /// page is empty).
    pub next: u64,
    /// The log's end when this page was read: the offset the next message published
    /// will get. `next == end` means this page reached the end.
    pub end: u64,
}
