//! A group's dead letters: read them a page at a time, redrive them, purge them.

use serde::{Deserialize, Serialize};

crate::message_body::message_body! {
    /// One dead letter. Exactly one of `payload` and `payload_base64`.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
    pub struct DeadLetterBody {
        /// The message's offset.
        pub offset: u64,
        /// Deliveries made before it was dead-lettered.
        pub attempts: u32,
        /// The reason given with the final failure (`"lease expired"` for a lease), or null.
        pub reason: Option<String>,
        /// When it was dead-lettered, in Unix milliseconds.
        pub at_ms: u64,
    }
    key: " The message's key, if it has one (and retention has not removed the message).",
    then {
        /// When the broker published the message, by its clock, in Unix milliseconds; left
        /// out where that is no longer known (retention removed the message: the dead letter keeps its payload, not its metadata).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub published_at_ms: Option<u64>,
    }
}

/// Which page of dead letters `GET .../dead-letters` answers (its query string).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "openapi",
    derive(utoipa::IntoParams),
    into_params(parameter_in = Query)
)]
#[serde(deny_unknown_fields)]
pub struct DeadLetterQuery {
    /// The first offset to include (default 0): the `next` of the previous page.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", param(minimum = 0))]
    pub from: Option<u64>,
    /// The most dead letters to return, 1 to 10,000 (default 1,000).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", param(minimum = 1, maximum = 10_000))]
    pub limit: Option<usize>,
}

/// The answer to `GET .../dead-letters`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DeadLetters {
    /// One page of the group's dead letters, by ascending offset.
    pub dead_letters: Vec<DeadLetterBody>,
    /// The `from` of the next page, or null when this page is the last.
    pub next: Option<u64>,
}

/// The optional body of redrive and purge: a half-open offset range.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct OffsetRange {
    /// The lowest offset included (default 0).
    #[serde(
        default,
        deserialize_with = "crate::whole::deserialize_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 0, maximum = 9_223_372_036_854_775_807_i64)
    )]
    pub from: Option<u64>,
    /// The first offset excluded (default: no upper end).
    #[serde(
        default,
        deserialize_with = "crate::whole::deserialize_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 0, maximum = 9_223_372_036_854_775_807_i64)
    )]
    pub to: Option<u64>,
}

/// How many dead letters a redrive or purge took.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DeadLettersTaken {
    /// The number of dead letters redriven or purged.
    pub count: u64,
}
