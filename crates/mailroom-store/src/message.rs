//! The metadata block of a message record (record format 2): a message's key, headers
//! and idempotency key, laid out little-endian after the record header and before the
//! payload. `crate::record` frames it (bit 31 of the length word says a body has one);
//! this module writes and reads what is inside.
//!
//! | bytes | field | meaning |
//! |---|---|---|
//! | 0..4 | `block_bytes` u32 | the block's length, these four bytes included |
//! | 4 | `flags` u8 | 1: a key follows, 2: headers follow, 4: an idempotency key follows; other bits 0 |
//! | | `key_bytes` u16, key | if flag 1: the key, UTF-8 |
//! | | `idempotency_key_bytes` u16, key | if flag 4: the idempotency key, UTF-8 |
//! | | `headers` u16, then per header `name_bytes` u16, `value_bytes` u16, name, value | if flag 2: headers in name order, UTF-8 |
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

use std::collections::BTreeMap;

use bytes::Bytes;
use mailroom::topic::{Message, Metadata, MetadataRef};

use crate::log::Record;
use crate::record::METADATA_LENGTH_BYTES;

const FLAG_KEY: u8 = 1;
const FLAG_HEADERS: u8 = 2;
const FLAG_IDEMPOTENCY_KEY: u8 = 4;

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
    let parts = (metadata.key.as_deref(), metadata.idempotency_key.as_deref());
    encode_parts(parts, metadata.headers.len(), headers, out);
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
    let parts = (metadata.key, metadata.idempotency_key);
    encode_parts(
        parts,
        metadata.headers.len(),
        metadata.headers.iter().copied(),
        out,
    );
}

/// The block of a key and an idempotency key (`parts`) and `count` headers.
fn encode_parts<'a>(
    (key, idempotency_key): (Option<&str>, Option<&str>),
    count: usize,
    headers: impl Iterator<Item = (&'a str, &'a str)>,
    out: &mut Vec<u8>,
) {
    if key.is_none() && count == 0 && idempotency_key.is_none() {
        return;
    }
    let flags = (if key.is_some() { FLAG_KEY } else { 0 })
        | (if count == 0 { 0 } else { FLAG_HEADERS })
        | (if idempotency_key.is_some() {
            FLAG_IDEMPOTENCY_KEY
        } else {
            0
        });
    // Fixed-width fields that sit side by side go in one append each (the length, set
    // below, with the flags; a header's two lengths): every append checks the buffer's
    // room and moves its end, and a key and two headers took 14 appends, now 10
    // (`encode_block_ref` 231 -> 211 instructions in callgrind).
    const _: () = assert!(METADATA_LENGTH_BYTES == 4, "the length's four bytes");
    let start = out.len();
    out.extend_from_slice(&[0, 0, 0, 0, flags]);
    if let Some(key) = key {
        put_text(out, key);
    }
    if let Some(key) = idempotency_key {
        put_text(out, key);
    }
    if count != 0 {
        put_u16(out, count);
        for (name, value) in headers {
            let [name_0, name_1] = u16_bytes(name.len());
            let [value_0, value_1] = u16_bytes(value.len());
            out.extend_from_slice(&[name_0, name_1, value_0, value_1]);
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(value.as_bytes());
        }
    }
    let block_bytes = u32::try_from(out.len() - start).expect("metadata checked");
    out[start..start + METADATA_LENGTH_BYTES].copy_from_slice(&block_bytes.to_le_bytes());
}

/// Reads a metadata block (as `encode_block` wrote it, length field included).
///
/// # Errors
/// Why the bytes are not a block: a length that is not the slice's, a field cut short,
/// text that is not UTF-8, an unknown flag, bytes left over.
pub fn decode_block(block: &[u8]) -> Result<Metadata, String> {
    let mut reader = Reader {
        bytes: block,
        at: 0,
    };
    let block_bytes = reader.u32()? as usize;
    if block_bytes != block.len() {
        return Err(format!(
            "block of {} bytes claims {block_bytes}",
            block.len()
        ));
    }
    let flags = reader.u8()?;
    if flags & !(FLAG_KEY | FLAG_HEADERS | FLAG_IDEMPOTENCY_KEY) != 0 {
        return Err(format!("unknown metadata flags {flags:#04x}"));
    }
    let mut metadata = Metadata::default();
    if flags & FLAG_KEY != 0 {
        let len = reader.u16()?;
        metadata.key = Some(reader.text(len)?);
    }
    if flags & FLAG_IDEMPOTENCY_KEY != 0 {
        let len = reader.u16()?;
        metadata.idempotency_key = Some(reader.text(len)?);
    }
    if flags & FLAG_HEADERS != 0 {
        let count = reader.u16()?;
        let mut headers = BTreeMap::new();
        for _ in 0..count {
            let (name_bytes, value_bytes) = (reader.u16()?, reader.u16()?);
            let name = reader.text(name_bytes)?;
            let value = reader.text(value_bytes)?;
            headers.insert(name, value);
        }
        metadata.headers = headers;
    }
    if reader.at != block.len() {
        return Err(format!(
            "{} bytes after the metadata",
            block.len() - reader.at
        ));
    }
    Ok(metadata)
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
    let flags = *block.get(METADATA_LENGTH_BYTES)?;
    if flags & FLAG_KEY == 0 {
        return None;
    }
    let at = METADATA_LENGTH_BYTES + 1;
    let len = u16::from_le_bytes(block.get(at..at + 2)?.try_into().ok()?);
    block.get(at + 2..at + 2 + usize::from(len))
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

fn put_u16(out: &mut Vec<u8>, value: usize) {
    out.extend_from_slice(&u16_bytes(value));
}

fn u16_bytes(value: usize) -> [u8; 2] {
    u16::try_from(value)
        .expect("metadata checked")
        .to_le_bytes()
}

fn put_text(out: &mut Vec<u8>, text: &str) {
    put_u16(out, text.len());
    out.extend_from_slice(text.as_bytes());
}

/// Reads fields off the front of a block, refusing to run past its end.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> Result<&'a [u8], String> {
        let end = self
            .at
            .checked_add(len)
            .filter(|&end| end <= self.bytes.len());
        let Some(end) = end else {
            return Err(format!("metadata cut short at byte {}", self.at));
        };
        let field = &self.bytes[self.at..end];
        self.at = end;
        Ok(field)
    }

    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<usize, String> {
        let field = self.take(2)?;
        Ok(usize::from(u16::from_le_bytes([field[0], field[1]])))
    }

    fn u32(&mut self) -> Result<u32, String> {
        let field = self.take(4)?;
        Ok(u32::from_le_bytes([field[0], field[1], field[2], field[3]]))
    }

    fn text(&mut self, len: usize) -> Result<String, String> {
        let at = self.at;
        let bytes = self.take(len)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| format!("text at byte {at} is not UTF-8"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // Proves the block layout is the documented one, byte by byte.
    #[test]
    fn block_layout_is_the_documented_one() {
        let metadata = Metadata::new()
            .with_key("k1")
            .with_idempotency_key("i")
            .with_header("a", "xy");
        let mut block = Vec::new();
        encode_block(&metadata, &mut block);
        let expected: &[u8] = &[
            21, 0, 0, 0, // block_bytes
            7, // flags: key, headers, idempotency key
            2, 0, b'k', b'1', // key
            1, 0, b'i', // idempotency key
            1, 0, // one header
            1, 0, 2, 0, b'a', b'x', b'y', // a: xy
        ];
        assert_eq!(&block[..], expected);
        let mut none = Vec::new();
        encode_block(&Metadata::new(), &mut none);
        assert!(none.is_empty(), "no metadata, no block");
    }

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
