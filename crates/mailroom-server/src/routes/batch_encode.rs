//! The batch publish's fast path: a body of the plain shape (`mailroom_api::batch_scan`)
//! goes straight into record bodies, its strings borrowed from the request body.
//!
//! A bare payload given as text becomes a slice of the request body (no copy before the
//! log write); a message with metadata has its metadata block and payload written once,
//! into one buffer for the batch ([`EncodedBatch`]). Whatever this path does not take
//! (a body of another shape, a refusal of any kind) answers `None`, and the route reads
//! the body with the general decoder, which accepts or refuses it as it always did: so
//! the two paths store the same records and no refusal is worded twice. The property
//! test below holds the two to the same records.

use base64::Engine as _;
use bytes::Bytes;
use mailroom::topic::MetadataRef;
use mailroom_api::batch_scan::{scan_batch, ScannedBatch, ScannedItem, ScannedObject};
use mailroom_api::limits::BATCH_MESSAGES_MAX;
use mailroom_store::EncodedBatch;

/// A batch publish body, decoded by the fast path.
#[derive(Debug)]
pub(crate) enum FastBatch {
    /// No message has metadata: the payloads.
    Bare(Vec<Bytes>),
    /// Some have: every message, encoded.
    Encoded(EncodedBatch),
}

/// `body` decoded by the fast path, or `None` to read it with the general decoder.
pub(crate) fn fast_batch(body: &Bytes, payload_bytes_max: u64) -> Option<FastBatch> {
    let batch = scan_batch(body)?;
    let count = batch.items.len();
    if count == 0 || count > BATCH_MESSAGES_MAX {
        return None;
    }
    let with_metadata = batch.items.iter().any(|item| match item {
        ScannedItem::Message(object) => !metadata_of(&batch, object).is_empty(),
        _ => false,
    });
    if !with_metadata {
        let payloads = batch.items.iter().map(|item| {
            let payload = match item {
                ScannedItem::Text(text) => body.slice_ref(text.as_bytes()),
                ScannedItem::Binary(base64) => Bytes::from(decode(base64)?),
                ScannedItem::Message(object) => match (object.payload, object.payload_base64) {
                    (Some(text), None) => body.slice_ref(text.as_bytes()),
                    (None, Some(base64)) => Bytes::from(decode(base64)?),
                    _ => return None,
                },
            };
            within(payload, payload_bytes_max)
        });
        return payloads.collect::<Option<Vec<_>>>().map(FastBatch::Bare);
    }
    // The body is longer than its blocks and payloads together (names, quotes,
    // separators; base64 shrinks when decoded), so it bounds the buffer.
    let mut encoded = EncodedBatch::with_capacity(count, body.len());
    for item in &batch.items {
        let (metadata, payload) = match item {
            ScannedItem::Text(text) => {
                let payload = within(body.slice_ref(text.as_bytes()), payload_bytes_max)?;
                encoded.push_bare(payload);
                continue;
            }
            ScannedItem::Binary(base64) => (MetadataRef::default(), Payload::Base64(base64)),
            ScannedItem::Message(object) => {
                let payload = match (object.payload, object.payload_base64) {
                    (Some(text), None) => Payload::Text(text),
                    (None, Some(base64)) => Payload::Base64(base64),
                    _ => return None,
                };
                (metadata_of(&batch, object), payload)
            }
        };
        let decoded;
        let payload = match payload {
            Payload::Text(text) => text.as_bytes(),
            Payload::Base64(base64) => {
                decoded = decode(base64)?;
                &decoded[..]
            }
        };
        if payload.len() as u64 > payload_bytes_max {
            return None;
        }
        encoded.push(&metadata, payload).ok()?;
    }
    Some(FastBatch::Encoded(encoded))
}

enum Payload<'a> {
    Text(&'a str),
    Base64(&'a str),
}

fn metadata_of<'a>(batch: &'a ScannedBatch<'a>, object: &ScannedObject<'a>) -> MetadataRef<'a> {
    MetadataRef {
        key: object.key,
        headers: batch.headers(object),
        idempotency_key: object.idempotency_key,
    }
}

fn decode(base64: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::STANDARD
        .decode(base64)
        .ok()
}

fn within(payload: Bytes, payload_bytes_max: u64) -> Option<Bytes> {
    (payload.len() as u64 <= payload_bytes_max).then_some(payload)
}

#[cfg(test)]
mod tests;
