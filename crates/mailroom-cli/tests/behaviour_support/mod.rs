//! The values of the behaviour suite (`clients/behaviour`): payloads, the subset match
//! of expected answers, and the steps' arguments as the Rust client's types.

pub mod streams;

use base64::Engine as _;
use bytes::Bytes;
use mailroom_client::{
    BatchItemError, ClientError, DeliveryId, GroupOptions, NackKind, NackOptions, StartPosition,
};
use serde_json::{json, Value};

/// A client's error as the suite names it: the server's code (`invalid_name` for a name
/// the client refused unsent).
pub fn code_of(error: ClientError) -> String {
    match error {
        ClientError::InvalidName(_) => "invalid_name".to_owned(),
        other => other
            .code()
            .map(str::to_owned)
            .unwrap_or_else(|| format!("no code: {other}")),
    }
}

/// A scenario's payload: text, or `{"base64": ...}`.
pub fn payload(spec: &Value) -> Bytes {
    match spec {
        Value::Object(object) => Bytes::from(
            base64::engine::general_purpose::STANDARD
                .decode(object["base64"].as_str().expect("base64 text"))
                .expect("valid base64"),
        ),
        Value::String(text) => Bytes::from(text.clone().into_bytes()),
        other => panic!("not a payload: {other}"),
    }
}

/// Bytes as the suite's payload marker, which [`check`] compares by content.
pub fn bytes_value(bytes: &[u8]) -> Value {
    json!({ "base64": base64::engine::general_purpose::STANDARD.encode(bytes) })
}

pub fn is_payload_marker(value: &Value) -> bool {
    value
        .as_object()
        .is_some_and(|o| o.len() == 1 && o.contains_key("base64"))
}

/// Asserts `actual` matches `expected`: objects by the keys expected, lists item by item,
/// payloads by their bytes.
pub fn check(expected: &Value, actual: &Value, at: &str) {
    if is_payload_marker(actual) && (expected.is_string() || is_payload_marker(expected)) {
        assert_eq!(payload(actual), payload(expected), "{at}");
        return;
    }
    match expected {
        Value::Object(keys) => {
            for (key, item) in keys {
                let got = actual
                    .get(key)
                    .unwrap_or_else(|| panic!("{at}: no {key} in {actual}"));
                check(item, got, &format!("{at}.{key}"));
            }
        }
        Value::Array(items) => {
            let got = actual
                .as_array()
                .unwrap_or_else(|| panic!("{at}: not a list: {actual}"));
            assert_eq!(items.len(), got.len(), "{at}: {expected} vs {actual}");
            for (index, (item, got)) in items.iter().zip(got).enumerate() {
                check(item, got, &format!("{at}[{index}]"));
            }
        }
        _ => assert_eq!(expected, actual, "{at}"),
    }
}

/// A delivery as the suite compares it.
pub fn delivery_value(delivery: &mailroom_client::Delivery) -> Value {
    json!({"offset": delivery.offset, "attempt": delivery.attempt, "payload": bytes_value(&delivery.payload)})
}

/// `[[offset, attempt], ...]` as delivery ids.
pub fn refs(pairs: &Value) -> Vec<DeliveryId> {
    let pairs = pairs.as_array().expect("[[offset, attempt], ...]");
    pairs
        .iter()
        .map(|pair| DeliveryId {
            offset: pair[0].as_u64().expect("offset"),
            attempt: pair[1].as_u64().expect("attempt") as u32,
        })
        .collect()
}

/// Batch results in the suite's form: `{"outcome"}` or `{"error": code}`.
pub fn results(items: Vec<Result<Value, BatchItemError>>) -> Value {
    let items = items.into_iter().map(|item| match item {
        Ok(outcome) => json!({ "outcome": outcome }),
        Err(error) => json!({ "error": error.code.as_str() }),
    });
    Value::Array(items.collect())
}

/// The delivery a step names by `offset` and `attempt`.
pub fn id_of(step: &Value) -> DeliveryId {
    DeliveryId {
        offset: step["offset"].as_u64().expect("offset"),
        attempt: step["attempt"].as_u64().expect("attempt") as u32,
    }
}

/// A step's nack options (`kind`, `reason`, `delay_ms`).
pub fn nack_options(step: &Value) -> NackOptions {
    let kind = match step.get("kind").and_then(Value::as_str) {
        Some("release") => NackKind::Release,
        Some("reject") => NackKind::Reject,
        _ => NackKind::Nack,
    };
    NackOptions {
        kind,
        delay_ms: step.get("delay_ms").and_then(Value::as_u64),
        reason: step
            .get("reason")
            .and_then(Value::as_str)
            .map(str::to_owned),
    }
}

/// The end of an open offset range: the highest offset the API takes (JSON's signed range).
pub const OFFSET_END: u64 = i64::MAX as u64;

/// A step's offset range (`from`, `to`), if it names one.
pub fn range_of(step: &Value) -> Option<std::ops::Range<u64>> {
    let from = step.get("from").and_then(Value::as_u64);
    let to = step.get("to").and_then(Value::as_u64);
    (from.is_some() || to.is_some()).then(|| from.unwrap_or(0)..to.unwrap_or(OFFSET_END))
}

/// A step's text argument `key`.
pub fn text(step: &Value, key: &str) -> String {
    step[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} in {step}"))
        .to_owned()
}

/// A start or seek target from a step: `"latest"`, an offset, or else the earliest.
pub fn start_of(value: Option<&Value>) -> StartPosition {
    match value {
        Some(Value::String(named)) if named == "latest" => StartPosition::Latest,
        Some(Value::Number(offset)) => StartPosition::Offset(offset.as_u64().expect("offset")),
        _ => StartPosition::Earliest,
    }
}

/// A `create_group` step's settings.
pub fn group_options(step: &Value) -> GroupOptions {
    let mut options =
        GroupOptions::new(step["max_attempts"].as_u64().expect("max_attempts") as u32);
    options.start = start_of(step.get("start"));
    options.lease_ms = step.get("lease_ms").and_then(Value::as_u64);
    options.max_in_flight = step
        .get("max_in_flight")
        .and_then(Value::as_u64)
        .map(|w| w as u32);
    options
}
