//! The JSON bodies of the batch routes (`poll/batch`, `ack/batch`, `nack/batch`) and the
//! checks on them: list lengths (a poll's `ack` and `nack` together too), id ranges,
//! `max`, `wait_ms` and `consumer`.

use std::time::Duration;

use mailroom::group::DeliveryId;
pub use mailroom_api::batch::{
    AckBatchRequest, AckItem as AckItemBody, AckOutcome, AckResults,
    BatchItemError as ItemErrorBody, NackBatchRequest, NackItem as NackItemBody, NackResults,
    PollBatchRequest, PolledBatch,
};
use mailroom_api::limits::{ATTEMPT_MAX, BATCH_DELIVERIES_MAX, OFFSET_MAX};

use super::DeliveryRef;
use crate::body::JSON_BODY_BYTES_MAX;
use crate::error::ApiError;
use crate::long_poll::LONG_POLL_WAIT_MS_MAX;
use crate::routes::arguments::check_consumer;

/// The most bytes one `{"offset": .., "attempt": ..},` takes in a batch body, with room
/// for a little whitespace: the largest offset and attempt are 20 and 10 digits.
pub const DELIVERY_REF_JSON_BYTES_MAX: usize = 64;
/// The largest body of `ack/batch` and `nack/batch`: a full list of deliveries, plus the
/// small-document limit for the rest (a nack's reason, say). About 4 MiB.
pub const BATCH_JSON_BODY_BYTES_MAX: usize =
    BATCH_DELIVERIES_MAX * DELIVERY_REF_JSON_BYTES_MAX + JSON_BODY_BYTES_MAX;

// The wire's bound on a wait is the long poll's own.
const _: () = assert!(LONG_POLL_WAIT_MS_MAX == mailroom_api::limits::LONG_POLL_WAIT_MS_MAX);

/// The checked `max` and wait of a `poll/batch`.
pub(crate) fn poll_limits(request: &PollBatchRequest) -> Result<(usize, Duration), ApiError> {
    let max = usize::try_from(request.max).unwrap_or(usize::MAX);
    if max == 0 || max > BATCH_DELIVERIES_MAX {
        return Err(ApiError::out_of_range(
            "max",
            1..=BATCH_DELIVERIES_MAX as u64,
            u64::from(request.max),
        ));
    }
    let wait_ms = request.wait_ms.unwrap_or(0);
    if wait_ms > LONG_POLL_WAIT_MS_MAX {
        return Err(ApiError::out_of_range(
            "wait_ms",
            0..=LONG_POLL_WAIT_MS_MAX,
            wait_ms,
        ));
    }
    check_consumer(request.consumer.as_deref())?;
    Ok((max, Duration::from_millis(wait_ms)))
}

/// The largest offset a batch may name: the OpenAPI document types offsets as `int64`,
/// and no log gets near this many messages, so a larger one is refused as bad input
/// rather than reported as an item that is not in flight.
pub const BATCH_OFFSET_MAX: u64 = OFFSET_MAX;
/// The largest attempt a batch may name, for the same reason (`int32`); attempts never
/// get near it (`max_attempts` is at most 1,000,000).
pub const BATCH_ATTEMPT_MAX: u32 = ATTEMPT_MAX;

/// The store's ids of the `deliveries` of `ack/batch` and `nack/batch`, checking the
/// list's length and each id's range.
pub(crate) fn delivery_ids(deliveries: &[DeliveryRef]) -> Result<Vec<DeliveryId>, ApiError> {
    checked_ids("deliveries", 1, deliveries)
}

/// The store's ids of a poll's optional `ack` list, which may be empty.
pub(crate) fn ack_ids(deliveries: &[DeliveryRef]) -> Result<Vec<DeliveryId>, ApiError> {
    checked_ids("ack", 0, deliveries)
}

/// Checks that a poll's `ack` and `nack` name at most [`BATCH_DELIVERIES_MAX`] deliveries
/// together, as one batch may (so the body limit of `poll/batch` fits both).
pub(crate) fn settled_count_within(
    acks: Option<&[DeliveryId]>,
    nacks: Option<&[DeliveryId]>,
) -> Result<(), ApiError> {
    let count = acks.map_or(0, <[_]>::len) + nacks.map_or(0, <[_]>::len);
    if count > BATCH_DELIVERIES_MAX {
        return Err(ApiError::count_out_of_range(
            "ack and nack.deliveries",
            "deliveries",
            0..=BATCH_DELIVERIES_MAX,
            count,
        ));
    }
    Ok(())
}

/// The ids of the list `field`, which holds `count_min..=BATCH_DELIVERIES_MAX` deliveries
/// within the documented int64 offset and int32 attempt.
pub(crate) fn checked_ids(
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
        let (max, wait) = poll_limits(&poll_request(r#"{"max":3}"#)).unwrap();
        assert_eq!((max, wait), (3, Duration::ZERO));
        let (max, wait) = poll_limits(&poll_request(
            r#"{"max":65536,"wait_ms":30000,"consumer":"w"}"#,
        ))
        .unwrap();
        assert_eq!((max, wait), (65_536, Duration::from_millis(30_000)));
        for bad in [
            r#"{"max":0}"#,
            r#"{"max":65537}"#,
            r#"{"max":1,"wait_ms":30001}"#,
            r#"{"max":1,"consumer":""}"#,
        ] {
            let error = poll_limits(&poll_request(bad)).unwrap_err();
            assert_eq!(error.code, "invalid_argument", "{bad}");
        }
        let long = format!(r#"{{"max":1,"consumer":"{}"}}"#, "c".repeat(129));
        assert!(poll_limits(&poll_request(&long)).is_err());
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
