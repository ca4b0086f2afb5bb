//! Message metadata on this backend: how key, headers and idempotency key are kept in
//! the message columns, and how a payload read from the database carries its metadata
//! to [`Backend::messages`](crate::backend::Backend::messages).
//!
//! # Metadata at hand
//!
//! `Backend::messages` is not async: it is meant to read only what a poll just read. A
//! delivery carries its payload as [`Bytes`] and nothing else, so each payload this
//! backend reads from a message row is made a [`Bytes`] that owns its own allocation
//! ([`Bytes::from_owner`]), and the row's publish time and metadata are noted in
//! [`AtHand`] under that allocation's address. `messages` looks them up by the address
//! of the payload it is given. The note lives exactly as long as the payload: dropping
//! the last [`Bytes`] of it removes the note before the memory is freed, so an address
//! never names two payloads, nothing accumulates when a delivery is dropped unread (a
//! consume stream skipping deliveries it sent before, a dropped request), and there is
//! nothing to expire. A payload that was not read by this backend has no note, and
//! `messages` refuses it (500 `internal`) rather than answer without its metadata.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use mailroom::topic::{Message, Metadata};
use parking_lot::Mutex;
use tokio_postgres::Row;

use crate::backend::BackendError;

/// The publish time and metadata of every payload this broker read and still holds,
/// by the payload's address. See the [module docs](self).
#[derive(Debug, Default)]
pub(super) struct AtHand {
    known: Mutex<HashMap<usize, Known>>,
}

#[derive(Debug, Clone)]
struct Known {
    published_at_ms: u64,
    metadata: Metadata,
}

/// A payload's own allocation; dropping it forgets the payload's note.
struct Payload {
    bytes: Vec<u8>,
    at_hand: Arc<AtHand>,
}

impl AsRef<[u8]> for Payload {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

impl Drop for Payload {
    fn drop(&mut self) {
        self.at_hand.known.lock().remove(&address(&self.bytes));
    }
}

fn address(bytes: &[u8]) -> usize {
    bytes.as_ptr() as usize
}

impl AtHand {
    /// `bytes` as a payload that knows its publish time and metadata.
    pub(super) fn payload(
        self: &Arc<Self>,
        mut bytes: Vec<u8>,
        published_at_ms: u64,
        metadata: Metadata,
    ) -> Bytes {
        // An empty vector has no allocation (every one has the same dangling address):
        // one byte of capacity gives it an address of its own.
        if bytes.capacity() == 0 {
            bytes.reserve_exact(1);
        }
        let known = Known {
            published_at_ms,
            metadata,
        };
        self.known.lock().insert(address(&bytes), known);
        Bytes::from_owner(Payload {
            bytes,
            at_hand: Arc::clone(self),
        })
    }

    /// The payload of `row` at column `first`, with the columns after it: `payload,
    /// published_at_ms, key, headers::text, idempotency_key` of a message row (or of a
    /// dead letter's copy of one).
    ///
    /// # Errors
    /// A stored key or headers that do not decode (500 `internal`: the database holds
    /// what no broker wrote).
    pub(super) fn payload_of(
        self: &Arc<Self>,
        row: &Row,
        first: usize,
    ) -> Result<Bytes, BackendError> {
        let bytes: Vec<u8> = row.get(first);
        let published_at_ms = row.get::<_, i64>(first + 1).max(0) as u64;
        let metadata = decode(row.get(first + 2), row.get(first + 3), row.get(first + 4))?;
        Ok(self.payload(bytes, published_at_ms, metadata))
    }

    /// The message of `payload` (at `offset`, for the error), with its publish time and
    /// metadata.
    ///
    /// # Errors
    /// A payload this backend did not read (500 `internal`).
    pub(super) fn message(
        &self,
        offset: u64,
        payload: Bytes,
    ) -> Result<Message<Bytes>, BackendError> {
        let known = self.known.lock().get(&address(&payload)).cloned();
        let known = known.ok_or_else(|| {
            BackendError::Internal(format!(
                "the metadata of message {offset} is not at hand: its payload was not read by this backend"
            ))
        })?;
        Ok(Message::new(
            payload,
            Some(known.published_at_ms),
            known.metadata,
        ))
    }

    /// How many payloads are noted, for the tests.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.known.lock().len()
    }
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

    // Proves a payload's note is found by the payload (and its clones) while it lives, an
    // empty payload has a note of its own, and dropping the last clone forgets the note.
    #[test]
    fn a_note_lives_as_long_as_its_payload() {
        let at_hand = Arc::new(AtHand::default());
        let keyed = Metadata::new().with_key("k").with_header("h", "v");
        let first = at_hand.payload(b"one".to_vec(), 5, keyed.clone());
        let empty = at_hand.payload(Vec::new(), 6, Metadata::new());
        let other_empty = at_hand.payload(Vec::new(), 7, Metadata::new().with_key("e"));
        assert_eq!(at_hand.len(), 3);
        let message = at_hand.message(0, first.clone()).unwrap();
        assert_eq!(
            (message.published_at_ms, &message.metadata),
            (Some(5), &keyed)
        );
        assert_eq!(
            at_hand.message(1, empty.clone()).unwrap().published_at_ms,
            Some(6)
        );
        let other = at_hand.message(2, other_empty).unwrap();
        assert_eq!(other.metadata.key.as_deref(), Some("e"));
        drop(other);
        drop((first, message));
        assert_eq!(at_hand.len(), 1, "only the empty payload is still held");
        drop(empty);
        assert_eq!(at_hand.len(), 0);
        assert!(at_hand.message(3, Bytes::from_static(b"x")).is_err());
    }

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
