//! The record codec's tests: round trips, and refusals of damaged bytes.

use super::*;
use mailroom::group::{Backoff, DeliveryId, Failure};
use proptest::prelude::*;

fn delivery(offset: u64, attempt: u32) -> DeliveryId {
    DeliveryId { offset, attempt }
}

fn any_config() -> impl Strategy<Value = GroupConfig> {
    let backoff = prop_oneof![
        Just(None),
        any::<u64>().prop_map(|delay_ms| Some(Backoff::Fixed { delay_ms })),
        (any::<u64>(), any::<u64>())
            .prop_map(|(base_ms, cap_ms)| Some(Backoff::Exponential { base_ms, cap_ms })),
    ];
    (any::<u32>(), any::<Option<u64>>(), backoff, any::<u32>()).prop_map(
        |(max_attempts, lease_ms, backoff, max_in_flight)| GroupConfig {
            max_attempts,
            lease_ms,
            backoff,
            max_in_flight,
        },
    )
}

fn any_change() -> impl Strategy<Value = Change> {
    let delivery = (any::<u64>(), any::<u32>()).prop_map(|(o, a)| delivery(o, a));
    let text = proptest::option::of("[a-z ]{0,20}");
    let cause = prop_oneof![
        Just(Failure::Nack),
        Just(Failure::Release),
        Just(Failure::Reject),
        Just(Failure::LeaseExpired),
    ];
    prop_oneof![
        (delivery.clone(), text.clone(), any::<Option<u64>>()).prop_map(
            |(id, consumer, lease_until_ms)| Change::Delivered {
                id,
                consumer,
                lease_until_ms
            }
        ),
        delivery.clone().prop_map(Change::Acked),
        (delivery.clone(), any::<u64>())
            .prop_map(|(id, lease_until_ms)| Change::Touched { id, lease_until_ms }),
        (delivery, cause, any::<Option<u64>>(), text, any::<u64>()).prop_map(
            |(id, cause, retry_at_ms, reason, at_ms)| Change::Failed {
                id,
                cause,
                retry_at_ms,
                reason,
                at_ms
            }
        ),
        (any::<u64>(), any::<u64>()).prop_map(|(a, b)| Change::Redriven { offsets: a..b }),
        (any::<u64>(), any::<u64>()).prop_map(|(a, b)| Change::Purged { offsets: a..b }),
        any::<u64>().prop_map(|position| Change::Seeked { position }),
        any::<Option<u64>>().prop_map(|until_ms| Change::Paused { until_ms }),
        Just(Change::Resumed),
    ]
}

fn any_record() -> impl Strategy<Value = GroupTransition> {
    let id = any::<u64>();
    prop_oneof![
        (
            id,
            "[A-Za-z0-9._-]{1,128}",
            any::<u64>(),
            any_config(),
            any::<bool>()
        )
            .prop_map(|(id, name, position, config, basic)| {
                let config = if basic {
                    GroupConfig::new(config.max_attempts)
                } else {
                    config
                };
                GroupTransition::Created {
                    id,
                    name,
                    max_attempts: config.max_attempts,
                    position,
                    config,
                }
            }),
        id.prop_map(|id| GroupTransition::Deleted { id }),
        (
            id,
            any_change(),
            proptest::collection::vec(any::<u8>(), 0..64)
        )
            .prop_map(|(id, change, payload)| {
                let payload = if change.dead_letters() {
                    Bytes::from(payload)
                } else {
                    Bytes::new()
                };
                GroupTransition::Event {
                    id,
                    change,
                    payload,
                }
            }),
        (id, any::<u64>()).prop_map(|(id, position)| GroupTransition::Moved { id, position }),
        (
            id,
            any::<u64>(),
            proptest::collection::vec(any::<u8>(), 0..64)
        )
            .prop_map(|(id, offset, payload)| GroupTransition::DeadLetterCopy {
                id,
                offset,
                payload: Bytes::from(payload),
            }),
    ]
}

proptest! {
    // Proves every record decodes back to itself.
    #[test]
    fn records_round_trip(record in any_record()) {
        let bytes = Bytes::from(record.encode());
        prop_assert_eq!(GroupTransition::decode(&bytes), Ok(record));
    }

    // Proves the decoder never panics on arbitrary bytes and refuses every proper
    // prefix of a record that has fixed-width fields after the kind.
    #[test]
    fn decoder_refuses_garbage_and_prefixes(
        garbage in proptest::collection::vec(any::<u8>(), 0..64),
        record in any_record(),
    ) {
        let _ = GroupTransition::decode(&Bytes::from(garbage));
        let bytes = record.encode();
        let fixed = match &record {
            GroupTransition::Event { payload, .. }
            | GroupTransition::DeadLetterCopy { payload, .. } => bytes.len() - payload.len(),
            _ => bytes.len(),
        };
        for cut in 0..fixed {
            prop_assert!(GroupTransition::decode(&Bytes::copy_from_slice(&bytes[..cut])).is_err());
        }
    }
}

// Proves trailing bytes and unknown kinds are refused rather than ignored.
#[test]
fn trailing_bytes_and_unknown_kinds_are_refused() {
    let mut bytes = GroupTransition::Deleted { id: 3 }.encode();
    bytes.push(0);
    assert!(GroupTransition::decode(&Bytes::from(bytes)).is_err());
    let mut bytes = GroupTransition::Deleted { id: 3 }.encode();
    bytes[0] = 99;
    assert_eq!(
        GroupTransition::decode(&Bytes::from(bytes)),
        Err(DecodeError("unknown group record kind"))
    );
}
