//! The metadata block of a message record (record format 2): a message's key, headers
//! and idempotency key, after the record header and before the payload. `crate::record`
//! frames it (bit 31 of the length word says a body has one); its layout is
//! [`mailroom_api::metadata_block`]'s, which the binary batch publish carries too, so a
//! block from the wire is written as it came.
//!
//! A message without metadata has no block at all, so it costs nothing (its record is
//! format 1's). The publish time is the record header's `timestamp_ms`: the broker's
//! clock when it appended the message.
//!
//! # Example
//!
//! ```
//! use mailroom::topic::Metadata;
//! use mailroom_store::message::{decode_block, encode_block};
//!
//! let metadata = Metadata::new().with_key("k").with_header("trace", "abc");
//! let mut block = Vec::new();
//! encode_block(&metadata, &mut block);
//! assert_eq!(decode_block(&block), Ok(metadata));
//! ```

use bytes::Bytes;
use mailroom::topic::{Message, Metadata, MetadataRef};
use mailroom_api::metadata_block::{key_at, read_block, write_block};

use crate::log::Record;

/// A message to publish: its payload and what the publisher says about it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewMessage {
    /// The payload.
    pub payload: Bytes,
    /// Its key, headers and idempotency key (checked by the publish).
    pub metadata: Metadata,
}

impl NewMessage {
    /// A message of `payload` without metadata.
    pub fn bare(payload: Bytes) -> Self {
        NewMessage {
            payload,
            metadata: Metadata::default(),
        }
    }
}

/// Appends the metadata block of `metadata` to `out`: nothing for empty metadata.
///
/// # Panics
/// If a field is past the limits of `mailroom::topic::Metadata::check` (callers check
/// first), since the lengths would not fit their fields.
pub fn encode_block(metadata: &Metadata, out: &mut Vec<u8>) {
    let headers = metadata
        .headers
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_str()));
    let (key, idempotency_key) = (metadata.key.as_deref(), metadata.idempotency_key.as_deref());
    write_block(key, idempotency_key, headers, out).expect("metadata checked");
}

/// [`encode_block`] of borrowed metadata: the same bytes, written straight from the
/// slices (a batch publish lends them out of its request body).
///
/// # Panics
/// As [`encode_block`].
///
/// # Example
///
/// ```
/// use mailroom::topic::{Metadata, MetadataRef};
/// use mailroom_store::message::{encode_block, encode_block_ref};
///
/// let headers = [("trace", "abc")];
/// let borrowed = MetadataRef { key: Some("k"), headers: &headers, idempotency_key: None };
/// let (mut from_ref, mut from_owned) = (Vec::new(), Vec::new());
/// encode_block_ref(&borrowed, &mut from_ref);
/// encode_block(&borrowed.to_metadata(), &mut from_owned);
/// assert_eq!(from_ref, from_owned);
/// ```
pub fn encode_block_ref(metadata: &MetadataRef<'_>, out: &mut Vec<u8>) {
    let headers = metadata.headers.iter().copied();
    write_block(metadata.key, metadata.idempotency_key, headers, out).expect("metadata checked");
}

/// Reads a metadata block (as `encode_block` wrote it, length field included).
///
/// # Errors
/// Why the bytes are not a block: a length that is not the slice's, a field cut short,
/// text that is not UTF-8, an unknown flag, bytes left over.
pub fn decode_block(block: &[u8]) -> Result<Metadata, String> {
    let mut headers = Vec::new();
    let read = read_block(block, &mut headers).map_err(|error| error.to_string())?;
    Ok(Metadata {
        key: read.key().map(str::to_owned),
        headers: read
            .headers()
            .map(|(name, value)| (name.to_owned(), value.to_owned()))
            .collect(),
        idempotency_key: read.idempotency_key().map(str::to_owned),
    })
}

/// The key in a metadata block (as `encode_block` wrote it), without decoding the rest:
/// what the planner of ordering keys asks for on every fresh message. `None` for a block
/// without a key, or one too short to hold the key it claims (`decode_block` says why
/// when the message is read).
///
/// # Example
///
/// ```
/// use mailroom::topic::Metadata;
/// use mailroom_store::message::{encode_block, key_of_block};
///
/// let mut block = Vec::new();
/// encode_block(&Metadata::new().with_key("k").with_header("h", "v"), &mut block);
/// assert_eq!(key_of_block(&block), Some(&b"k"[..]));
/// ```
pub fn key_of_block(block: &[u8]) -> Option<&[u8]> {
    key_at(block).map(|at| &block[at])
}

/// The message a record of the message log holds.
///
/// # Errors
/// Why its metadata block is unreadable (see [`decode_block`]).
pub fn message_of(record: Record) -> Result<Message<Bytes>, String> {
    let metadata = match &record.metadata {
        Some(block) => decode_block(block)?,
        None => Metadata::default(),
    };
    Ok(Message::new(
        record.payload,
        Some(record.timestamp_ms),
        metadata,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn metadata() -> impl Strategy<Value = Metadata> {
        let text = "\\PC{0,12}";
        (
            proptest::option::of("\\PC{1,12}"),
            proptest::collection::btree_map("\\PC{1,8}", text, 0..5),
            proptest::option::of("\\PC{1,12}"),
        )
            .prop_map(|(key, headers, idempotency_key)| Metadata {
                key,
                headers,
                idempotency_key,
            })
    }

    proptest! {
        // Proves a block reads back as the metadata it was written from.
        #[test]
        fn block_round_trips(metadata in metadata()) {
            let mut block = Vec::new();
            encode_block(&metadata, &mut block);
            if !metadata.is_empty() {
                prop_assert_eq!(decode_block(&block), Ok(metadata));
            }
        }

        // Proves borrowed metadata is encoded to the same bytes as owned metadata.
        #[test]
        fn borrowed_blocks_are_the_owned_ones(metadata in metadata()) {
            let headers: Vec<(&str, &str)> =
                metadata.headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
            let borrowed = MetadataRef {
                key: metadata.key.as_deref(),
                headers: &headers,
                idempotency_key: metadata.idempotency_key.as_deref(),
            };
            let (mut from_ref, mut from_owned) = (Vec::new(), Vec::new());
            encode_block_ref(&borrowed, &mut from_ref);
            encode_block(&metadata, &mut from_owned);
            prop_assert_eq!(from_ref, from_owned);
        }

        // Proves a cut or lengthened block is refused, never misread.
        #[test]
        fn damaged_blocks_are_refused(metadata in metadata(), cut in any::<prop::sample::Index>()) {
            let mut block = Vec::new();
            encode_block(&metadata, &mut block);
            prop_assume!(!block.is_empty());
            let cut = cut.index(block.len());
            prop_assert!(decode_block(&block[..cut]).is_err());
            block.push(0);
            prop_assert!(decode_block(&block).is_err());
        }

        // Proves the reader never panics, whatever the bytes.
        #[test]
        fn decoder_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode_block(&bytes);
        }
    }
}
