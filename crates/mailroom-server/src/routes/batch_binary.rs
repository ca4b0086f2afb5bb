//! The batch publish in the binary encoding (`mailroom_api::batch_binary`): a body sent
//! as `application/vnd.mailroom.batch`, or starting with its magic, goes into the log as
//! the JSON fast path's does (`batch_encode`), except that a message with metadata is
//! already its record body: its block is read and checked, and the body is written as
//! a slice of the request's buffer, never copied.
//!
//! Unlike the JSON path there is no general decoder behind it, so each refusal is
//! worded here: a layout error names the message and part, a payload over the limit is
//! 413 as in JSON, and a key or header past its limit is refused with the JSON body's
//! wording (`messages[i].key` and so on).

use axum::http::{header, HeaderMap};
use bytes::Bytes;
use mailroom_api::batch_binary::{self, DecodeError, Reader};
use mailroom_api::limits::BATCH_MESSAGES_MAX;
use mailroom_store::EncodedBatch;

use super::batch_encode::FastBatch;
use super::metadata;
use crate::error::ApiError;

/// Whether the batch body is in the binary encoding: sent as its content type (parameters
/// after `;` and the case of the type are ignored), or starting with its magic, which no
/// JSON text can (so, as JSON bodies are, a binary body is read whatever the content type
/// a client or generator sends with it). Any version's magic counts, so that a body of
/// another version is refused as such.
pub(crate) fn is_binary(headers: &HeaderMap, body: &[u8]) -> bool {
    body.starts_with(batch_binary::MAGIC_NAME)
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
/// body's order (message by message; in each the metadata, then the payload's size), so
/// a body breaking several limits is refused for the same one as its JSON form.
pub(crate) fn binary_batch(body: &Bytes, payload_bytes_max: u64) -> Result<FastBatch, ApiError> {
    let mut reader = Reader::new(body).map_err(refusal)?;
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
    // Bare payloads until the first message with metadata, then every message in one
    // `EncodedBatch` (a batch of bare payloads takes the log's plainer write).
    let mut payloads = Vec::with_capacity(reader.count());
    let mut encoded: Option<EncodedBatch> = None;
    while let Some(message) = reader.next_message().map_err(refusal)? {
        let index = message.index;
        let Some(block) = message.block else {
            within(index, message.payload)?;
            let payload = body.slice_ref(message.payload);
            match &mut encoded {
                Some(encoded) => encoded.push_bare(payload),
                None => payloads.push(payload),
            }
            continue;
        };
        let encoded = encoded.get_or_insert_with(|| {
            let mut encoded = EncodedBatch::with_capacity(payloads.capacity(), 0);
            payloads
                .drain(..)
                .for_each(|payload| encoded.push_bare(payload));
            encoded
        });
        encoded
            .push_record(body.slice_ref(message.body), &block)
            .map_err(|error| metadata::item_refusal(index, error))?;
        within(index, message.payload)?;
    }
    Ok(match encoded {
        Some(encoded) => FastBatch::Encoded(encoded),
        None => FastBatch::Bare(payloads),
    })
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
