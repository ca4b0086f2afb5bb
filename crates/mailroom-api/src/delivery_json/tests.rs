use proptest::prelude::*;

use crate::batch::{AckItem, AckOutcome, BatchItemError, NackItem, PolledBatch};
use crate::consume_stream::{ServerFrame, SettledOutcome};
use crate::deliveries::{DeliveryBody, NackOutcome};
use crate::json_text::tests::text;
use crate::ErrorCode;

/// A payload as a broker hands it out: mostly long plain runs (past the word-wise part of
/// the escape search and past its short texts), with the odd special byte among them.
fn payload() -> impl Strategy<Value = String> {
    prop_oneof![
        text(),
        ("[a-z]{60,1100}", text(), "[ -~]{0,300}").prop_map(|(a, b, c)| a + &b + &c),
    ]
}

fn delivery() -> impl Strategy<Value = DeliveryBody> {
    let headers = proptest::collection::btree_map(text(), text(), 0..4);
    (
        any::<u64>(),
        any::<u32>(),
        prop_oneof![
            payload().prop_map(|p| (Some(p), None)),
            "[A-Za-z0-9+/]{0,64}={0,2}".prop_map(|b| (None, Some(b))),
            Just((None, None)),
        ],
        proptest::option::of(text()),
        proptest::option::of(headers),
        proptest::option::of(any::<u64>()),
    )
        .prop_map(
            |(offset, attempt, (payload, payload_base64), key, headers, published_at_ms)| {
                DeliveryBody {
                    offset,
                    attempt,
                    payload,
                    payload_base64,
                    key,
                    headers,
                    published_at_ms,
                }
            },
        )
}

fn item_error() -> impl Strategy<Value = Option<BatchItemError>> {
    proptest::option::of(text().prop_map(|message| BatchItemError {
        code: ErrorCode::NotOwned,
        message,
    }))
}

fn acked() -> impl Strategy<Value = Vec<AckItem>> {
    let item = (any::<u64>(), any::<u32>(), any::<bool>(), item_error()).prop_map(
        |(offset, attempt, worked, error)| AckItem {
            offset,
            attempt,
            outcome: worked.then_some(AckOutcome::Acked),
            error,
        },
    );
    proptest::collection::vec(item, 0..4)
}

fn nacked() -> impl Strategy<Value = Vec<NackItem>> {
    let outcome = proptest::option::of(prop_oneof![
        Just(NackOutcome::Retry),
        Just(NackOutcome::Released),
        Just(NackOutcome::DeadLettered),
    ]);
    let item = (any::<u64>(), any::<u32>(), outcome, item_error()).prop_map(
        |(offset, attempt, outcome, error)| NackItem {
            offset,
            attempt,
            outcome,
            error,
        },
    );
    proptest::collection::vec(item, 0..4)
}

/// JSON bytes as text, so that a failure shows where the two differ.
fn text_of(json: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(json)
}

proptest! {
    // The writers are held to serde_json's own output for every shape of delivery: each
    // optional field there or not, payloads long and short with every kind of byte that
    // needs an escape, and the extreme numbers.
    #[test]
    fn a_delivery_is_written_as_serde_json_writes_it(delivery in delivery()) {
        let mut out = b"prefix".to_vec();
        delivery.write_json(&mut out);
        prop_assert_eq!(&out[..6], b"prefix");
        let expected = serde_json::to_vec(&delivery).unwrap();
        prop_assert_eq!(text_of(&out[6..]), text_of(&expected));
    }

    #[test]
    fn a_polled_batch_is_written_as_serde_json_writes_it(
        deliveries in proptest::collection::vec(delivery(), 0..5),
        acked in proptest::option::of(acked()),
        nacked in proptest::option::of(nacked()),
    ) {
        let answer = PolledBatch { deliveries, acked, nacked };
        let written = answer.to_json();
        let expected = serde_json::to_vec(&answer).unwrap();
        prop_assert_eq!(text_of(&written), text_of(&expected));
        // And it reads back as the same answer.
        prop_assert_eq!(serde_json::from_slice::<PolledBatch>(&written).unwrap(), answer);
    }

    #[test]
    fn a_delivery_frame_is_written_as_serde_json_writes_it(delivery in delivery()) {
        let frame = ServerFrame::Delivery(delivery);
        let (written, expected) = (frame.to_json(), serde_json::to_vec(&frame).unwrap());
        prop_assert_eq!(text_of(&written), text_of(&expected));
    }
}

#[test]
fn frames_other_than_deliveries_are_written_by_serde_json() {
    let frame = ServerFrame::Settled {
        seq: 3,
        offset: 9,
        attempt: 1,
        outcome: SettledOutcome::Acked,
    };
    assert_eq!(frame.to_json(), serde_json::to_vec(&frame).unwrap());
}
