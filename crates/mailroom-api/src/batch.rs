//! A group's deliveries in batches: `poll/batch` (optionally a long poll, optionally
//! nacking and acking first), `ack/batch` and `nack/batch`. Each item of an ack or nack batch
//! succeeds or fails alone, with exactly one of `outcome` and `error`.
//!
//! ```
//! use mailroom_api::{batch::BatchItemError, ErrorCode};
//! let error = BatchItemError { code: ErrorCode::NotOwned, message: "gone".into() };
//! assert_eq!(error.to_string(), "not_owned: gone");
//! ```

use serde::{Deserialize, Serialize};

use crate::deliveries::{DeliveryBody, DeliveryId, NackKind, NackOutcome};
use crate::ErrorCode;

/// The body of `POST .../poll/batch`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PollBatchRequest {
    /// The consumer's identity (1 to 128 bytes); absent is the anonymous consumer. Its
    /// own deliveries in flight come first, then new ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 128))]
    pub consumer: Option<String>,
    /// The most deliveries to return, 1 to 65,536 (the group's `max_in_flight` bounds
    /// how many can be in flight at once).
    #[serde(deserialize_with = "crate::whole::deserialize")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 65_536))]
    pub max: u32,
    /// How long to wait, in milliseconds (0 to 30,000; default 0), for at least one
    /// delivery when none is available at once.
    #[serde(
        default,
        deserialize_with = "crate::whole::deserialize_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 30_000))]
    pub wait_ms: Option<u64>,
    /// Up to 65,536 deliveries to ack, in this order, before polling, in the same
    /// transaction (so the slots they free are refilled by this poll). Each succeeds or
    /// fails alone, as in `ack/batch`; the answer's `acked` holds one result each.
    #[serde(
        default,
        deserialize_with = "crate::object::deserialize_option_vec",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schema(max_items = 65_536))]
    pub ack: Option<Vec<DeliveryId>>,
    /// Deliveries to nack, release or reject, all with the same options, before the
    /// acks and the poll and in the same transaction: a consumer that failed some of a
    /// round settles the whole round with its next poll. Each succeeds or fails alone,
    /// as in `nack/batch`; the answer's `nacked` holds one result each. `ack` and
    /// `nack.deliveries` name at most 65,536 deliveries together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nack: Option<NackBatchRequest>,
}

/// The answer to `POST .../poll/batch`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PolledBatch {
    /// The deliveries: the consumer's own in flight first, then new ones, each by
    /// ascending offset. Empty when nothing was available (within `wait_ms`).
    pub deliveries: Vec<DeliveryBody>,
    /// When the request had `ack`: one result per delivery to ack, in request order, as
    /// `ack/batch` answers them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acked: Option<Vec<AckItem>>,
    /// When the request had `nack`: one result per delivery to nack, in request order,
    /// as `nack/batch` answers them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nacked: Option<Vec<NackItem>>,
}

/// The body of `POST .../ack/batch`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AckBatchRequest {
    /// 1 to 65,536 deliveries, acked in this order.
    #[serde(deserialize_with = "crate::object::deserialize_vec")]
    #[cfg_attr(feature = "openapi", schema(min_items = 1, max_items = 65_536))]
    pub deliveries: Vec<DeliveryId>,
}

/// The body of `POST .../nack/batch`: deliveries, and the single nack's options applied
/// to each.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NackBatchRequest {
    /// 1 to 65,536 deliveries, nacked in this order.
    #[serde(deserialize_with = "crate::object::deserialize_vec")]
    #[cfg_attr(feature = "openapi", schema(min_items = 1, max_items = 65_536))]
    pub deliveries: Vec<DeliveryId>,
    /// `nack` (default), `release` or `reject`.
    #[serde(default)]
    pub kind: NackKind,
    /// Not redelivered before this many milliseconds (overrides the group's backoff);
    /// at most 7 days.
    #[serde(
        default,
        deserialize_with = "crate::whole::deserialize_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub delay_ms: Option<u64>,
    /// Why (at most 1024 bytes); kept with each dead letter this makes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Why one item of a batch failed, while the others may have worked.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, thiserror::Error)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = ItemErrorBody))]
#[error("{code}: {message}")]
pub struct BatchItemError {
    /// A stable code, as the single form's error would have: `not_owned`.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub code: ErrorCode,
    /// A human-readable explanation.
    pub message: String,
}

/// What an ack of a batch did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum AckOutcome {
    /// The delivery was acknowledged.
    Acked,
}

/// One delivery of an `ack/batch`: exactly one of `outcome` and `error`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = AckItemBody))]
pub struct AckItem {
    /// The message's offset, as requested.
    pub offset: u64,
    /// The attempt, as requested.
    pub attempt: u32,
    /// `acked`, when it worked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<AckOutcome>,
    /// Why it failed (it was not in flight when its turn came).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<BatchItemError>,
}

/// One delivery of a `nack/batch`: exactly one of `outcome` and `error`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = NackItemBody))]
pub struct NackItem {
    /// The message's offset, as requested.
    pub offset: u64,
    /// The attempt, as requested.
    pub attempt: u32,
    /// What the nack did, when it worked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<NackOutcome>,
    /// Why it failed (it was not in flight when its turn came).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<BatchItemError>,
}

/// The answer to `POST .../ack/batch`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AckResults {
    /// One result per requested delivery, in request order.
    pub results: Vec<AckItem>,
}

/// The answer to `POST .../nack/batch`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NackResults {
    /// One result per requested delivery, in request order.
    pub results: Vec<NackItem>,
}

#[cfg(feature = "core")]
impl From<mailroom::group::NotOwned> for BatchItemError {
    fn from(error: mailroom::group::NotOwned) -> BatchItemError {
        BatchItemError {
            code: ErrorCode::NotOwned,
            message: error.to_string(),
        }
    }
}
