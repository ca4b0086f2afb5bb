use mailroom::topic::{HEADER_VALUE_BYTES_MAX, KEY_BYTES_MAX};
use mailroom_api::topics::BatchRequest;
use mailroom_store::NewMessage;
use proptest::prelude::*;

use super::*;
use crate::body::parse;
use crate::routes::topics::decode_batch;

/// The payload limit the tests run with: small, so that some payloads pass it.
const PAYLOAD_BYTES_MAX: u64 = 24;

/// What the general path makes of `body`: its messages, or its refusal's code and text.
fn general(body: &[u8]) -> Result<Vec<NewMessage>, (String, String)> {
    let request = parse::<BatchRequest>(body);
    let messages = request.and_then(|request| decode_batch(request, PAYLOAD_BYTES_MAX));
    messages.map_err(|error| (error.code.to_string(), error.message))
}

/// The messages the fast path would store.
fn messages_of(fast: FastBatch) -> Vec<NewMessage> {
    match fast {
        FastBatch::Bare(payloads) => payloads.into_iter().map(NewMessage::bare).collect(),
        FastBatch::Encoded(batch) => batch.to_messages(),
    }
}

/// A JSON string: plain, non-ASCII, escaped, empty, or past a limit.
fn json_string() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => "[a-z0-9 -]{1,10}".prop_map(|s| format!("\"{s}\"")),
        1 => Just("\"\"".to_owned()),
        1 => Just("\"é漢🦀\"".to_owned()),
        1 => Just(r#""a\"b\u00e9""#.to_owned()),
        1 => Just(format!("\"{}\"", "k".repeat(KEY_BYTES_MAX + 1))),
        1 => Just(format!("\"{}\"", "v".repeat(HEADER_VALUE_BYTES_MAX + 1))),
        1 => Just("null".to_owned()),
    ]
}

fn base64() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("\"/w==\"".to_owned()),
        Just("\"aGVsbG8gd29ybGQ=\"".to_owned()),
        Just("\"!!\"".to_owned()),
        Just(format!("\"{}\"", "QUFB".repeat(10))),
    ]
}

fn item() -> impl Strategy<Value = String> {
    let field = prop_oneof![
        3 => json_string().prop_map(|v| format!("\"payload\":{v}")),
        1 => base64().prop_map(|v| format!("\"payload_base64\":{v}")),
        2 => json_string().prop_map(|v| format!("\"key\":{v}")),
        2 => json_string().prop_map(|v| format!("\"idempotency_key\":{v}")),
        2 => proptest::collection::vec((json_string(), json_string()), 0..3).prop_map(|pairs| {
            let pairs: Vec<String> = pairs.iter().map(|(n, v)| format!("{n}:{v}")).collect();
            format!("\"headers\":{{{}}}", pairs.join(","))
        }),
    ];
    prop_oneof![
        2 => json_string(),
        1 => base64().prop_map(|v| format!("{{\"base64\":{v}}}")),
        4 => proptest::collection::vec(field, 0..5)
            .prop_map(|fields| format!("{{{}}}", fields.join(","))),
    ]
}

proptest! {
    // Proves the fast path and the general decoder agree on every generated batch:
    // where the fast path answers, the general path accepts the body and stores the
    // same messages (payloads, keys, headers, idempotency keys); where the general
    // path refuses (escapes aside, every refusal: bad base64, a limit, a payload too
    // large, two payloads or none, null), the fast path leaves the body to it.
    #[test]
    fn fast_path_agrees_with_the_general_decoder(
        items in proptest::collection::vec(item(), 0..6)
    ) {
        let body = Bytes::from(format!("{{\"messages\":[{}]}}", items.join(",")));
        let general = general(&body);
        if let Some(fast) = fast_batch(&body, PAYLOAD_BYTES_MAX) {
            prop_assert_eq!(general, Ok(messages_of(fast)));
        }
    }
}

// Proves the benchmark's shapes take the fast path, bare payloads as slices of the body.
#[test]
fn common_batches_take_the_fast_path() {
    let bare = Bytes::from_static(br#"{"messages":["one","two"]}"#);
    let Some(FastBatch::Bare(payloads)) = fast_batch(&bare, 1024) else {
        panic!("bare batch not fast")
    };
    assert_eq!(payloads, [&b"one"[..], &b"two"[..]]);
    let in_body = bare.as_ptr_range();
    assert!(in_body.contains(&payloads[0].as_ptr()), "copied");
    let keyed = Bytes::from_static(
        br#"{"messages":[{"payload":"p","key":"customer-0042","headers":{"traceparent":"00-ab","content-type":"application/json"}},"bare",{"payload":"q","idempotency_key":"i-1"}]}"#,
    );
    let Some(fast) = fast_batch(&keyed, 1024) else {
        panic!("keyed batch not fast")
    };
    assert_eq!(Ok(messages_of(fast)), general(&keyed));
}
