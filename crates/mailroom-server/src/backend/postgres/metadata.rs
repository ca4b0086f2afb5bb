//! Message metadata on this backend: how key, headers and idempotency key are kept in
//! the message columns, and how a message row read from the database becomes the
//! message a delivery or dead letter hands out, with its publish time and metadata.

use std::collections::BTreeMap;

use bytes::Bytes;
use mailroom::topic::{Message, Metadata};
use tokio_postgres::Row;

use crate::backend::BackendError;

/// The message of `row` from column `first` on: `payload, published_at_ms, key,
/// headers::text, idempotency_key` of a message row (or of a dead letter's copy of one).
///
/// # Errors
/// A stored key or headers that do not decode (500 `internal`: the database holds what
/// no broker wrote).
pub(super) fn message_of(row: &Row, first: usize) -> Result<Message<Bytes>, BackendError> {
    let payload: Vec<u8> = row.get(first);
    let published_at_ms = row.get::<_, i64>(first + 1).max(0) as u64;
    let metadata = decode(row.get(first + 2), row.get(first + 3), row.get(first + 4))?;
    Ok(Message::new(
        Bytes::from(payload),
        Some(published_at_ms),
        metadata,
    ))
}

/// The column values of `metadata`: key (UTF-8 bytes), headers (a JSON object, as
/// text), idempotency key; `None` for what it lacks.
pub(super) fn encode(metadata: &Metadata) -> (Option<Vec<u8>>, Option<String>, Option<String>) {
    let key = metadata.key.as_ref().map(|key| key.as_bytes().to_vec());
    let headers = (!metadata.headers.is_empty())
        .then(|| serde_json::to_string(&metadata.headers).expect("a map of strings serializes"));
    (key, headers, metadata.idempotency_key.clone())
}

/// The metadata of the stored column values (as [`encode`] wrote them).
pub(super) fn decode(
    key: Option<Vec<u8>>,
    headers: Option<String>,
    idempotency_key: Option<String>,
) -> Result<Metadata, BackendError> {
    let damaged =
        |what: &str, why: String| BackendError::Internal(format!("a stored {what}: {why}"));
    let key = key
        .map(String::from_utf8)
        .transpose()
        .map_err(|error| damaged("key", error.to_string()))?;
    let headers: BTreeMap<String, String> = match headers {
        Some(text) => {
            serde_json::from_str(&text).map_err(|error| damaged("headers", error.to_string()))?
        }
        None => BTreeMap::new(),
    };
    Ok(Metadata {
        key,
        headers,
        idempotency_key,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves what `encode` writes, `decode` reads back, and none is none.
    #[test]
    fn metadata_round_trips_through_the_columns() {
        let metadata = Metadata::new()
            .with_key("customer-1")
            .with_header("trace", "abc")
            .with_idempotency_key("once");
        let (key, headers, once) = encode(&metadata);
        assert_eq!(decode(key, headers, once).unwrap(), metadata);
        assert_eq!(encode(&Metadata::new()), (None, None, None));
        assert!(decode(Some(vec![0xff]), None, None).is_err());
    }
}
