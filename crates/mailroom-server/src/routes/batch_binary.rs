//! The batch publish in the binary encoding (`mailroom_api::batch_binary`): a body sent
//! as `application/vnd.mailroom.batch`, or starting with its magic, goes into record
//! bodies as the JSON fast path's does (`batch_encode`), its payloads and strings
//! borrowed from the request body.
//!
//! Unlike the JSON path there is no general decoder behind it, so each refusal is
//! worded here: a layout error names the message and part, a payload over the limit is
//! 413 as in JSON, and a key or header past its limit is refused with the JSON body's
//! wording (`messages[i].key` and so on).

use axum::http::{header, HeaderMap};
use bytes::Bytes;
use mailroom::topic::MetadataRef;
use mailroom_api::batch_binary::{self, Batch, DecodeError, Item};
use mailroom_api::limits::BATCH_MESSAGES_MAX;
use mailroom_store::EncodedBatch;

use super::batch_encode::FastBatch;
use super::metadata;
use crate::error::ApiError;

/// Whether the batch body is in the binary encoding: sent as its content type (parameters
/// after `;` and the case of the type are ignored), or starting with its magic, which no
/// JSON text can (so, as JSON bodies are, a binary body is read whatever the content type
/// a client or generator sends with it).
pub(crate) fn is_binary(headers: &HeaderMap, body: &[u8]) -> bool {
    body.starts_with(batch_binary::MAGIC)
        || headers
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.split(';').next())
            .is_some_and(|essence| {
                essence
                    .trim()
                    .eq_ignore_ascii_case(batch_binary::CONTENT_TYPE)
            })
}

/// `body` read as a binary batch, its messages checked against the limits in the JSON
/// body's order (item by item; in each the metadata, then the payload's size), so a body
/// breaking several limits is refused for the same one as its JSON form.
pub(crate) fn binary_batch(body: &Bytes, payload_bytes_max: u64) -> Result<FastBatch, ApiError> {
    let batch = batch_binary::decode(body).map_err(refusal)?;
    let within = |index: usize, payload: &[u8]| {
        if payload.len() as u64 > payload_bytes_max {
            return Err(ApiError::payload_over_limit(
                &format!("messages[{index}]"),
                payload.len(),
                payload_bytes_max,
            ));
        }
        Ok(())
    };
    if batch
        .items
        .iter()
        .all(|item| metadata_of(&batch, item).is_empty())
    {
        let mut payloads = Vec::with_capacity(batch.items.len());
        for (index, item) in batch.items.iter().enumerate() {
            within(index, item.payload)?;
            payloads.push(body.slice_ref(item.payload));
        }
        return Ok(FastBatch::Bare(payloads));
    }
    // The body is longer than the records' blocks and payloads together (it carries
    // every length in four bytes), so it bounds the buffer.
    let mut encoded = EncodedBatch::with_capacity(batch.items.len(), body.len());
    for (index, item) in batch.items.iter().enumerate() {
        let metadata = metadata_of(&batch, item);
        if metadata.is_empty() {
            // As the JSON fast path does: a bare payload stays a slice of the body.
            within(index, item.payload)?;
            encoded.push_bare(body.slice_ref(item.payload));
            continue;
        }
        encoded
            .push(&metadata, item.payload)
            .map_err(|error| metadata::item_refusal(index, error))?;
        within(index, item.payload)?;
    }
    Ok(FastBatch::Encoded(encoded))
}

fn metadata_of<'a>(batch: &'a Batch<'a>, item: &Item<'a>) -> MetadataRef<'a> {
    MetadataRef {
        key: item.key,
        headers: batch.headers(item),
        idempotency_key: item.idempotency_key,
    }
}

fn refusal(error: DecodeError) -> ApiError {
    match error {
        DecodeError::Count { count } => ApiError::count_out_of_range(
            "messages",
            "messages",
            1..=BATCH_MESSAGES_MAX,
            usize::try_from(count).unwrap_or(usize::MAX),
        ),
        other => ApiError::invalid_argument(other.to_string()),
    }
}

#[cfg(test)]
mod tests;
