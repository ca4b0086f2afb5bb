//! A delivery's key, headers and publish time in the CLI's output: JSON fields beside the
//! payload (left out when absent), and a short suffix for humans.

use std::collections::BTreeMap;

use mailroom_client::Delivery;
use serde_json::{json, Map, Value};

/// The JSON fields of `delivery`'s metadata: `key`, `headers` and `published_at_ms`,
/// each only when present (as the server's own bodies have them).
pub fn fields(delivery: &Delivery) -> Value {
    let mut fields = Map::new();
    if let Some(key) = &delivery.key {
        fields.insert("key".into(), json!(key));
    }
    if !delivery.headers.is_empty() {
        fields.insert("headers".into(), json!(delivery.headers));
    }
    if let Some(at) = delivery.published_at_ms {
        fields.insert("published_at_ms".into(), json!(at));
    }
    Value::Object(fields)
}

/// ` key=K name=value ...` for humans, or nothing without a key or headers.
pub fn text(key: Option<&str>, headers: &BTreeMap<String, String>) -> String {
    let key = key.map(|key| format!(" key={key}"));
    let headers = headers
        .iter()
        .map(|(name, value)| format!(" {name}={value}"));
    key.into_iter().chain(headers).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    // Proves absent metadata adds nothing, and present metadata reads as the server's
    // fields and a short suffix.
    #[test]
    fn metadata_shows_only_when_present() {
        let mut delivery = Delivery {
            offset: 0,
            attempt: 1,
            payload: Bytes::from_static(b"x"),
            key: None,
            headers: BTreeMap::new(),
            published_at_ms: None,
        };
        assert_eq!(fields(&delivery), json!({}));
        assert_eq!(text(None, &delivery.headers), "");
        delivery.key = Some("k".into());
        delivery.headers.insert("a".into(), "1".into());
        delivery.published_at_ms = Some(7);
        let expected = json!({"key": "k", "headers": {"a": "1"}, "published_at_ms": 7});
        assert_eq!(fields(&delivery), expected);
        assert_eq!(text(Some("k"), &delivery.headers), " key=k a=1");
    }
}
