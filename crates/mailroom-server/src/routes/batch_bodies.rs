//! The JSON bodies of the batch routes (`poll/batch`, `ack/batch`, `nack/batch`) and the
//! checks on them: list lengths, id ranges, `max`, `wait_ms` and `consumer`.

use std::time::Duration;

use mailroom::group::{DeliveryId, NotOwned};
use mailroom::topic::BATCH_DELIVERIES_MAX;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::body::JSON_BODY_BYTES_MAX;
use crate::error::ApiError;
use crate::long_poll::LONG_POLL_WAIT_MS_MAX;
use crate::routes::arguments::check_consumer;
use crate::routes::deliveries::{DeliveryBody, DeliveryRef, NackOutcome};
use crate::routes::group_control::NackKindBody;

/// The most bytes one `{"offset": .., "attempt": ..},` takes in a batch body, with room
/// for a little whitespace: the largest offset and attempt are 20 and 10 digits.
pub const DELIVERY_REF_JSON_BYTES_MAX: usize = 64;
/// The largest body of `ack/batch` and `nack/batch`: a full list of deliveries, plus the
/// small-document limit for the rest (a nack's reason, say). About 4 MiB.
pub const BATCH_JSON_BODY_BYTES_MAX: usize =
    BATCH_DELIVERIES_MAX * DELIVERY_REF_JSON_BYTES_MAX + JSON_BODY_BYTES_MAX;

/// The body of `POST .../poll/batch`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PollBatchRequest {
    /// The consumer's identity (1 to 128 bytes); absent is the anonymous consumer. Its
    /// own deliveries in flight come first, then new ones.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 128)]
    pub consumer: Option<String>,
    /// The most deliveries to return, 1 to 65,536 (the group's `max_in_flight` bounds
    /// how many can be in flight at once).
    #[serde(deserialize_with = "crate::body::whole::deserialize")]
    #[schema(minimum = 1, maximum = 65_536)]
    pub max: u32,
    /// How long to wait, in milliseconds (0 to 30,000; default 0), for at least one
    /// delivery when none is available at once.
    #[serde(default, deserialize_with = "crate::body::whole::deserialize_option")]
    #[schema(minimum = 0, maximum = 30_000)]
    pub wait_ms: Option<u64>,
    /// Up to 65,536 deliveries to ack, in this order, before polling, in the same
    /// transaction (so the slots they free are refilled by this poll). Each succeeds or
    /// fails alone, as in `ack/batch`; the answer's `acked` holds one result each.
    #[serde(default)]
    #[schema(max_items = 65_536)]
    pub ack: Option<Vec<DeliveryRef>>,
}

impl PollBatchRequest {
    /// The checked `max` and wait.
    pub(crate) fn limits(&self) -> Result<(usize, Duration), ApiError> {
        let max = usize::try_from(self.max).unwrap_or(usize::MAX);
        if max == 0 || max > BATCH_DELIVERIES_MAX {
            return Err(ApiError::out_of_range(
                "max",
                1..=BATCH_DELIVERIES_MAX as u64,
                u64::from(self.max),
            ));
        }
        let wait_ms = self.wait_ms.unwrap_or(0);
        if wait_ms > LONG_POLL_WAIT_MS_MAX {
            return Err(ApiError::out_of_range(
                "wait_ms",
                0..=LONG_POLL_WAIT_MS_MAX,
                wait_ms,
            ));
        }
        check_consumer(self.consumer.as_deref())?;
        Ok((max, Duration::from_millis(wait_ms)))
    }
}

/// The answer to `POST .../poll/batch`.
#[derive(Debug, Serialize, ToSchema)]
pub struct PolledBatch {
    /// The deliveries: the consumer's own in flight first, then new ones, each by
    /// ascending offset. Empty when nothing was available (within `wait_ms`).
    pub deliveries: Vec<DeliveryBody>,
    /// When the request had `ack`: one result per delivery to ack, in request order, as
    /// `ack/batch` answers them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acked: Option<Vec<AckItemBody>>,
}

/// The body of `POST .../ack/batch`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AckBatchRequest {
    /// 1 to 65,536 deliveries, acked in this order.
    #[schema(min_items = 1, max_items = 65_536)]
    pub deliveries: Vec<DeliveryRef>,
}

/// The body of `POST .../nack/batch`: deliveries, and the single nack's options applied
/// to each.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NackBatchRequest {
    /// 1 to 65,536 deliveries, nacked in this order.
    #[schema(min_items = 1, max_items = 65_536)]
    pub deliveries: Vec<DeliveryRef>,
    /// `nack` (default), `release` or `reject`.
    #[serde(default)]
    pub kind: NackKindBody,
    /// Not redelivered before this many milliseconds (overrides the group's backoff);
    /// at most 7 days.
    #[serde(default, deserialize_with = "crate::body::whole::deserialize_option")]
    pub delay_ms: Option<u64>,
    /// Why (at most 1024 bytes); kept with each dead letter this makes.
    #[serde(default)]
    pub reason: Option<String>,
}

/// Why one item of a batch failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct ItemErrorBody {
    /// A stable code, as the single form's error would have: `not_owned`.
    pub code: String,
    /// A human-readable explanation.
    pub message: String,
}

impl From<NotOwned> for ItemErrorBody {
    fn from(error: NotOwned) -> ItemErrorBody {
        ItemErrorBody {
            code: "not_owned".to_owned(),
            message: error.to_string(),
        }
    }
}

/// What an ack of a batch did.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AckOutcome {
    /// The delivery was acknowledged.
    Acked,
}

/// One delivery of an `ack/batch`: exactly one of `outcome` and `error`.
#[derive(Debug, Serialize, ToSchema)]
pub struct AckItemBody {
    /// The message's offset, as requested.
    pub offset: u64,
    /// The attempt, as requested.
    pub attempt: u32,
    /// `acked`, when it worked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<AckOutcome>,
    /// Why it failed (it was not in flight when its turn came).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ItemErrorBody>,
}

/// One delivery of a `nack/batch`: exactly one of `outcome` and `error`.
#[derive(Debug, Serialize, ToSchema)]
pub struct NackItemBody {
    /// The message's offset, as requested.
    pub offset: u64,
    /// The attempt, as requested.
    pub attempt: u32,
    /// What the nack did, when it worked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<NackOutcome>,
    /// Why it failed (it was not in flight when its turn came).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ItemErrorBody>,
}

/// The answer to `POST .../ack/batch`.
#[derive(Debug, Serialize, ToSchema)]
pub struct AckResults {
    /// One result per requested delivery, in request order.
    pub results: Vec<AckItemBody>,
}

/// The answer to `POST .../nack/batch`.
#[derive(Debug, Serialize, ToSchema)]
pub struct NackResults {
    /// One result per requested delivery, in request order.
    pub results: Vec<NackItemBody>,
}

/// The largest offset a batch may name: the OpenAPI document types offsets as `int64`,
/// and no log gets near this many messages, so a larger one is refused as bad input
/// rather than reported as an item that is not in flight.
pub const BATCH_OFFSET_MAX: u64 = i64::MAX as u64;
/// The largest attempt a batch may name, for the same reason (`int32`); attempts never
/// get near it (`max_attempts` is at most 1,000,000).
pub const BATCH_ATTEMPT_MAX: u32 = i32::MAX as u32;

/// The store's ids of the `deliveries` of `ack/batch` and `nack/batch`, checking the
/// list's length and each id's range.
pub(crate) fn delivery_ids(deliveries: &[DeliveryRef]) -> Result<Vec<DeliveryId>, ApiError> {
    checked_ids("deliveries", 1, deliveries)
}

/// The store's ids of a poll's optional `ack` list, which may be empty.
pub(crate) fn ack_ids(deliveries: &[DeliveryRef]) -> Result<Vec<DeliveryId>, ApiError> {
    checked_ids("ack", 0, deliveries)
}

/// The ids of the list `field`, which holds `count_min..=BATCH_DELIVERIES_MAX` deliveries
/// within the documented int64 offset and int32 attempt.
fn checked_ids(
    field: &str,
    count_min: usize,
    deliveries: &[DeliveryRef],
) -> Result<Vec<DeliveryId>, ApiError> {
    if deliveries.len() < count_min || deliveries.len() > BATCH_DELIVERIES_MAX {
        return Err(ApiError::count_out_of_range(
            field,
            "deliveries",
            count_min..=BATCH_DELIVERIES_MAX,
            deliveries.len(),
        ));
    }
    for (index, delivery) in deliveries.iter().enumerate() {
        if delivery.offset > BATCH_OFFSET_MAX {
            let field = format!("{field}[{index}].offset");
            return Err(ApiError::out_of_range(
                &field,
                0..=BATCH_OFFSET_MAX,
                delivery.offset,
            ));
        }
        if delivery.attempt > BATCH_ATTEMPT_MAX {
            let field = format!("{field}[{index}].attempt");
            return Err(ApiError::out_of_range(
                &field,
                0..=u64::from(BATCH_ATTEMPT_MAX),
                u64::from(delivery.attempt),
            ));
        }
    }
    Ok(deliveries.iter().map(|delivery| delivery.id()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn poll_request(json: &str) -> PollBatchRequest {
        crate::body::parse(json.as_bytes()).expect("valid shape")
    }

    // Proves max, wait_ms and consumer are checked against their documented ranges, and
    // an absent wait is no wait.
    #[test]
    fn poll_limits_are_checked() {
        let (max, wait) = poll_request(r#"{"max":3}"#).limits().unwrap();
        assert_eq!((max, wait), (3, Duration::ZERO));
        let (max, wait) = poll_request(r#"{"max":65536,"wait_ms":30000,"consumer":"w"}"#)
            .limits()
            .unwrap();
        assert_eq!((max, wait), (65_536, Duration::from_millis(30_000)));
        for bad in [
            r#"{"max":0}"#,
            r#"{"max":65537}"#,
            r#"{"max":1,"wait_ms":30001}"#,
            r#"{"max":1,"consumer":""}"#,
        ] {
            let error = poll_request(bad).limits().unwrap_err();
            assert_eq!(error.code, "invalid_argument", "{bad}");
        }
        let long = format!(r#"{{"max":1,"consumer":"{}"}}"#, "c".repeat(129));
        assert!(poll_request(&long).limits().is_err());
    }

    // Proves a batch list must name 1 to BATCH_DELIVERIES_MAX deliveries, each within
    // the documented int64 offset and int32 attempt.
    #[test]
    fn delivery_list_length_is_checked() {
        let one = DeliveryRef {
            offset: 4,
            attempt: 2,
        };
        assert_eq!(
            delivery_ids(&[one]).unwrap(),
            vec![DeliveryId {
                offset: 4,
                attempt: 2
            }]
        );
        assert!(delivery_ids(&[]).is_err());
        assert!(delivery_ids(&vec![one; BATCH_DELIVERIES_MAX + 1]).is_err());
        let edge = DeliveryRef {
            offset: BATCH_OFFSET_MAX,
            attempt: BATCH_ATTEMPT_MAX,
        };
        assert!(delivery_ids(&[edge]).is_ok());
        for (offset, attempt) in [(BATCH_OFFSET_MAX + 1, 1), (0, BATCH_ATTEMPT_MAX + 1)] {
            assert!(delivery_ids(&[one, DeliveryRef { offset, attempt }]).is_err());
        }
    }

    // Proves the body limit fits the largest list a client may send, compactly encoded.
    #[test]
    fn body_limit_fits_a_full_list() {
        let largest = DeliveryRef {
            offset: u64::MAX,
            attempt: u32::MAX,
        };
        let item = serde_json::to_string(&largest).unwrap();
        assert!(item.len() < DELIVERY_REF_JSON_BYTES_MAX);
        let body = serde_json::json!({ "deliveries": vec![largest; BATCH_DELIVERIES_MAX] });
        assert!(serde_json::to_vec(&body).unwrap().len() < BATCH_JSON_BODY_BYTES_MAX);
    }
}
