//! How one log record is laid out on disk, and a decoder that never trusts its input.
//!
//! A record is a fixed 24-byte little-endian header followed by the payload:
//!
//! | bytes  | field          | meaning                                               |
//! |--------|----------------|-------------------------------------------------------|
//! | 0..4   | `payload_bytes`| body length, `u32`; bit 31 set: the body opens with a metadata block |
//! | 4..8   | `crc32c`       | CRC32C of bytes 0..4, 8..24 and the payload            |
//! | 8..16  | `offset`       | the record's offset in its log, `u64`                 |
//! | 16..24 | `timestamp_ms` | the appender's clock, milliseconds, `u64`             |
//! | 24..   | body           | `payload_bytes` bytes (without bit 31)                |
//!
//! The body is the payload, or, when bit 31 of the length word is set (record format 2,
//! written for messages that carry metadata), a metadata block followed by the payload.
//! The block opens with its own length (`u32`, counting those four bytes), so the frame
//! can split it off without reading it; `crate::message` reads what is inside. A record
//! without metadata is byte for byte what format 1 wrote.
//!
//! The checksum covers the length and the offset, so a record copied to the wrong place
//! or a length with a flipped bit is caught as well as a damaged payload.
//!
//! [`decode`] reads one record from the front of a byte slice. It never panics, whatever
//! the bytes: it returns [`Decoded::Record`], [`Decoded::Incomplete`] (the slice ends
//! before the record does, which at the end of a file means a torn write) or
//! [`Decoded::Corrupt`].
//!
//! # Example
//!
//! ```
//! use mailroom_store::record::{decode, encode_into, Decoded};
//!
//! let mut buf = Vec::new();
//! encode_into(&mut buf, 7, 1_700_000_000_000, b"hello");
//! match decode(&buf, 1024) {
//!     Decoded::Record { record, bytes } => {
//!         assert_eq!((record.offset, record.payload, bytes), (7, &b"hello"[..], buf.len()));
//!     }
//!     other => panic!("{other:?}"),
//! }
//! // One byte short is a torn record, not a corrupt one.
//! assert!(matches!(decode(&buf[..buf.len() - 1], 1024), Decoded::Incomplete { .. }));
//! ```

const PAYLOAD_BYTES_AT: usize = 0;
const CRC_AT: usize = 4;
const OFFSET_AT: usize = 8;
const TIMESTAMP_AT: usize = 16;

/// Bit 31 of the length word: the body opens with a metadata block. Lengths are capped
/// far below it (`record_bytes_max` at most 64 MiB), so a format-1 record never has it.
pub const METADATA_FLAG: u32 = 1 << 31;

/// The bytes of a metadata block's own length field.
pub const METADATA_LENGTH_BYTES: usize = mailroom_api::metadata_block::LENGTH_BYTES;

/// The size of a record header in bytes.
pub const HEADER_BYTES: usize = 24;

// The fields tile the header exactly, with no gap and no overlap.
const _: () = assert!(PAYLOAD_BYTES_AT + 4 == CRC_AT);
const _: () = assert!(CRC_AT + 4 == OFFSET_AT);
const _: () = assert!(OFFSET_AT + 8 == TIMESTAMP_AT);
const _: () = assert!(TIMESTAMP_AT + 8 == HEADER_BYTES);

/// One record decoded in place: the body borrows the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRef<'a> {
    /// The record's offset in its log.
    pub offset: u64,
    /// The timestamp it was appended with.
    pub timestamp_ms: u64,
    /// Its body: the payload, after the metadata block if `has_metadata`.
    pub payload: &'a [u8],
    /// Whether the body opens with a metadata block (bit 31 of the length word).
    pub has_metadata: bool,
}

impl<'a> RecordRef<'a> {
    /// The metadata block (with its length field) and the payload after it; no block
    /// for a record without metadata. [`decode`] checked the block's length.
    pub fn split_metadata(&self) -> (Option<&'a [u8]>, &'a [u8]) {
        if !self.has_metadata {
            return (None, self.payload);
        }
        let block = metadata_block_bytes(self.payload).unwrap_or(self.payload.len());
        let (block, payload) = self.payload.split_at(block);
        (Some(block), payload)
    }
}

/// The length a metadata block at the front of `body` claims, if it is one that fits:
/// at least its own length field, at most the body.
pub fn metadata_block_bytes(body: &[u8]) -> Option<usize> {
    let field = body.get(..METADATA_LENGTH_BYTES)?;
    let block = u32_at(field, 0) as usize;
    (METADATA_LENGTH_BYTES..=body.len())
        .contains(&block)
        .then_some(block)
}

/// Why a record failed its checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CorruptReason {
    /// The header claims a payload longer than the log accepts.
    #[error("payload length {payload_bytes} exceeds the limit {payload_bytes_max}")]
    PayloadTooLong {
        /// The length in the header.
        payload_bytes: u32,
        /// The limit the log was opened with.
        payload_bytes_max: u32,
    },
    /// The length word says the body opens with a metadata block, and the block's own
    /// length does not fit the body.
    #[error("metadata block does not fit a body of {body_bytes} bytes")]
    MetadataBlock {
        /// The body's length.
        body_bytes: u32,
    },
    /// The stored checksum does not match the bytes.
    #[error("checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    ChecksumMismatch {
        /// The checksum in the header.
        stored: u32,
        /// The checksum of the bytes as read.
        computed: u32,
    },
}

/// What [`decode`] found at the front of a byte slice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// A whole record whose checksum matches.
    Record {
        /// The record.
        record: RecordRef<'a>,
        /// How many bytes of the input it occupies (header + payload).
        bytes: usize,
    },
    /// The input ends before the record does: at the end of a file, a torn write.
    Incomplete {
        /// How many bytes the whole record would need, once the header is readable;
        /// `HEADER_BYTES` while even the header is cut short.
        bytes_needed: usize,
    },
    /// The bytes are not a valid record.
    Corrupt(CorruptReason),
}

/// How many bytes a record with a payload of `payload_bytes` takes on disk.
pub const fn encoded_bytes(payload_bytes: usize) -> usize {
    HEADER_BYTES + payload_bytes
}

/// Appends one encoded record to `buf`.
///
/// # Panics
/// If the payload is longer than `u32::MAX` bytes; the log refuses such payloads with an
/// error before it gets here.
pub fn encode_into(buf: &mut Vec<u8>, offset: u64, timestamp_ms: u64, payload: &[u8]) {
    encode_body_into(buf, offset, timestamp_ms, payload, false);
}

/// Appends one encoded record whose body is `body`; with `has_metadata` the body must
/// open with a metadata block (its length checked here), and the length word gets
/// [`METADATA_FLAG`].
///
/// # Panics
/// If the body is `METADATA_FLAG` bytes or longer (the log refuses such bodies with an
/// error before it gets here), or `has_metadata` and the body opens with no block that
/// fits: a programmer's mistake.
pub fn encode_body_into(
    buf: &mut Vec<u8>,
    offset: u64,
    timestamp_ms: u64,
    payload: &[u8],
    has_metadata: bool,
) {
    let payload_bytes = u32::try_from(payload.len()).expect("payload length checked by caller");
    assert!(
        payload_bytes < METADATA_FLAG,
        "body length checked by caller"
    );
    assert!(
        !has_metadata || metadata_block_bytes(payload).is_some(),
        "a metadata body opens with a block that fits"
    );
    let flag = if has_metadata { METADATA_FLAG } else { 0 };
    let start = buf.len();
    buf.extend_from_slice(&(payload_bytes | flag).to_le_bytes());
    buf.extend_from_slice(&[0; 4]);
    buf.extend_from_slice(&offset.to_le_bytes());
    buf.extend_from_slice(&timestamp_ms.to_le_bytes());
    buf.extend_from_slice(payload);
    let crc = checksum(&buf[start..start + HEADER_BYTES], payload);
    buf[start + CRC_AT..start + OFFSET_AT].copy_from_slice(&crc.to_le_bytes());
}

/// Decodes the record at the front of `input`, accepting payloads of at most
/// `payload_bytes_max` bytes. Never panics.
pub fn decode(input: &[u8], payload_bytes_max: u32) -> Decoded<'_> {
    let Some(header) = input.get(..HEADER_BYTES) else {
        return Decoded::Incomplete {
            bytes_needed: HEADER_BYTES,
        };
    };
    let length_word = u32_at(header, PAYLOAD_BYTES_AT);
    let has_metadata = length_word & METADATA_FLAG != 0;
    let payload_bytes = length_word & !METADATA_FLAG;
    if payload_bytes > payload_bytes_max {
        return Decoded::Corrupt(CorruptReason::PayloadTooLong {
            payload_bytes,
            payload_bytes_max,
        });
    }
    // `payload_bytes` fits in u32, so this cannot overflow a 64-bit usize; on 32-bit
    // targets `checked_add` keeps the decoder panic-free anyway.
    let Some(bytes) = (payload_bytes as usize).checked_add(HEADER_BYTES) else {
        return Decoded::Incomplete {
            bytes_needed: usize::MAX,
        };
    };
    let Some(payload) = input.get(HEADER_BYTES..bytes) else {
        return Decoded::Incomplete {
            bytes_needed: bytes,
        };
    };
    let stored = u32_at(header, CRC_AT);
    let computed = checksum(header, payload);
    if stored != computed {
        return Decoded::Corrupt(CorruptReason::ChecksumMismatch { stored, computed });
    }
    if has_metadata && metadata_block_bytes(payload).is_none() {
        return Decoded::Corrupt(CorruptReason::MetadataBlock {
            body_bytes: payload_bytes,
        });
    }
    let record = RecordRef {
        offset: u64_at(header, OFFSET_AT),
        timestamp_ms: u64_at(header, TIMESTAMP_AT),
        payload,
        has_metadata,
    };
    Decoded::Record { record, bytes }
}

/// Reads just the offset field of a header, unchecked: used to recognise a record that
/// follows damage before paying for its checksum.
pub(crate) fn peek_offset(header: &[u8]) -> Option<u64> {
    header
        .get(OFFSET_AT..TIMESTAMP_AT)
        .map(|field| u64_at(field, 0))
}

/// The CRC32C of a header (without its checksum field) and a payload.
fn checksum(header: &[u8], payload: &[u8]) -> u32 {
    let crc = crc32c::crc32c(&header[PAYLOAD_BYTES_AT..CRC_AT]);
    let crc = crc32c::crc32c_append(crc, &header[OFFSET_AT..HEADER_BYTES]);
    crc32c::crc32c_append(crc, payload)
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut field = [0; 4];
    field.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(field)
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut field = [0; 8];
    field.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(field)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn encoded(offset: u64, timestamp_ms: u64, payload: &[u8]) -> Vec<u8> {
        let mut buf = Vec::new();
        encode_into(&mut buf, offset, timestamp_ms, payload);
        buf
    }

    // Proves the header layout is the documented one, byte by byte.
    #[test]
    fn header_layout_is_little_endian_and_fixed() {
        let buf = encoded(0x0102_0304_0506_0708, 0x1112_1314_1516_1718, b"xyz");
        assert_eq!(&buf[0..4], &[3, 0, 0, 0]);
        assert_eq!(&buf[8..16], &[8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(
            &buf[16..24],
            &[0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11]
        );
        assert_eq!(&buf[24..], b"xyz");
        assert_eq!(buf.len(), encoded_bytes(3));
    }

    // Proves every proper prefix of a record is Incomplete, never Corrupt or a record.
    #[test]
    fn every_prefix_is_incomplete() {
        let buf = encoded(5, 9, b"a payload of some length");
        for cut in 0..buf.len() {
            assert!(
                matches!(decode(&buf[..cut], 1 << 20), Decoded::Incomplete { .. }),
                "cut at {cut}"
            );
        }
    }

    // Proves a length above the limit is refused before any payload is read.
    #[test]
    fn oversize_length_is_corrupt() {
        let buf = encoded(0, 0, &[0; 100]);
        assert_eq!(
            decode(&buf, 99),
            Decoded::Corrupt(CorruptReason::PayloadTooLong {
                payload_bytes: 100,
                payload_bytes_max: 99
            })
        );
    }

    // Proves a record with metadata sets bit 31 of its length word, splits into its block
    // and payload, and is corrupt when its block does not fit.
    #[test]
    fn metadata_body_round_trips_and_is_checked() {
        let mut body = 6u32.to_le_bytes().to_vec();
        body.extend_from_slice(b"mmpayload");
        let mut buf = Vec::new();
        encode_body_into(&mut buf, 3, 4, &body, true);
        assert_eq!(&buf[0..4], &(13 | METADATA_FLAG).to_le_bytes());
        let Decoded::Record { record, bytes } = decode(&buf, 1024) else {
            panic!("not a record")
        };
        assert_eq!(bytes, buf.len());
        assert_eq!(record.split_metadata(), (Some(&body[..6]), &b"payload"[..]));
        // A block claiming more than the body, with a checksum that matches.
        let mut bad = 99u32.to_le_bytes().to_vec();
        bad.extend_from_slice(b"xx");
        let mut buf = Vec::new();
        encode_body_into(&mut buf, 3, 4, &bad, false);
        buf[3] |= 0x80;
        let crc = checksum(&buf[..HEADER_BYTES], &bad);
        buf[CRC_AT..OFFSET_AT].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(
            decode(&buf, 1024),
            Decoded::Corrupt(CorruptReason::MetadataBlock { body_bytes: 6 })
        );
    }

    proptest! {
        // Proves encode then decode gives back the same record and consumes exactly it,
        // even with trailing bytes after it.
        #[test]
        fn round_trip(offset: u64, ts: u64, payload in proptest::collection::vec(any::<u8>(), 0..300),
                      trailing in proptest::collection::vec(any::<u8>(), 0..30)) {
            let mut buf = encoded(offset, ts, &payload);
            let len = buf.len();
            buf.extend_from_slice(&trailing);
            let expected = RecordRef { offset, timestamp_ms: ts, payload: &payload, has_metadata: false };
            prop_assert_eq!(decode(&buf, 300), Decoded::Record { record: expected, bytes: len });
        }

        // Proves any single flipped bit in a record is caught (never decoded as valid).
        #[test]
        fn any_bit_flip_is_detected(payload in proptest::collection::vec(any::<u8>(), 0..64),
                                    bit in any::<prop::sample::Index>()) {
            let mut buf = encoded(42, 7, &payload);
            let bit = bit.index(buf.len() * 8);
            buf[bit / 8] ^= 1 << (bit % 8);
            let decoded = decode(&buf, 1 << 20);
            prop_assert!(!matches!(decoded, Decoded::Record { .. }), "flip of bit {} decoded", bit);
        }

        // Proves the decoder never panics and never reads past its input, whatever the bytes.
        #[test]
        fn decoder_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200), max: u32) {
            if let Decoded::Record { bytes: used, record } = decode(&bytes, max) {
                prop_assert!(used <= bytes.len());
                prop_assert_eq!(record.payload.len() + HEADER_BYTES, used);
            }
        }
    }
}
