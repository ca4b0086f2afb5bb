//! The bench's message format: sequence number and publish time inside the payload.
//!
//! A payload is `SSSSSSSSSSSSSSSSTTTTTTTTTTTTTTTT` (sequence and publish time as 16 lower-case
//! hex digits each) followed by `.` up to the requested size. It is plain ASCII, so it
//! travels as text through every client (mailroom's JSON included), and a receiver can check
//! that what arrived is byte for byte what was sent.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;

/// The bytes the header takes; payloads are never smaller than this.
pub const HEADER_BYTES: usize = 32;

/// The largest payload the bench generates, so a typo in a flag cannot exhaust memory.
pub const PAYLOAD_BYTES_MAX: usize = 1 << 20;

/// Why a received payload is not one the bench sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    /// Too short to hold the header.
    #[error("payload of {0} bytes is shorter than the {HEADER_BYTES}-byte header")]
    TooShort(usize),
    /// The header is not hex, or the padding is not `.`.
    #[error("payload is corrupt: {0}")]
    Corrupt(&'static str),
}

/// What a payload carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// The message's sequence number in its run, from 0.
    pub seq: u64,
    /// When it was published, in nanoseconds since the Unix epoch.
    pub sent_ns: u64,
}

/// Nanoseconds since the Unix epoch (all processes of a run share this clock).
pub fn now_ns() -> u64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
}

/// The payload for message `seq` of `size_bytes`, stamped with the current time.
///
/// ```
/// use mailroom_bench::payload::{decode, encode};
/// let payload = encode(7, 100);
/// assert_eq!(payload.len(), 100);
/// assert_eq!(decode(&payload).unwrap().seq, 7);
/// ```
///
/// # Panics
/// If `size_bytes` is outside `HEADER_BYTES..=PAYLOAD_BYTES_MAX` (the CLI checks this).
pub fn encode(seq: u64, size_bytes: usize) -> Bytes {
    encode_at(seq, now_ns(), size_bytes)
}

/// [`encode`] with an explicit publish time.
///
/// # Panics
/// As for [`encode`].
pub fn encode_at(seq: u64, sent_ns: u64, size_bytes: usize) -> Bytes {
    assert!(
        (HEADER_BYTES..=PAYLOAD_BYTES_MAX).contains(&size_bytes),
        "payload size {size_bytes} out of range"
    );
    // One allocation of the final size and a fill, not a char-by-char extend: this runs
    // once per message in every system's publisher, on the cores the brokers share.
    let mut bytes = Vec::with_capacity(size_bytes);
    write_hex(&mut bytes, seq);
    write_hex(&mut bytes, sent_ns);
    bytes.resize(size_bytes, PADDING);
    Bytes::from(bytes)
}

/// The byte every payload is padded with after its header.
const PADDING: u8 = b'.';

/// A run of padding to compare received payloads against a slice at a time.
const PADDING_RUN: [u8; 4096] = [PADDING; 4096];

/// Appends `value` as 16 lower-case hex digits.
fn write_hex(out: &mut Vec<u8>, value: u64) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for shift in (0..16).rev() {
        out.push(DIGITS[((value >> (shift * 4)) & 0xf) as usize]);
    }
}

/// Reads the stamp back and checks the padding.
///
/// # Errors
/// [`PayloadError`] if the bytes are not a payload [`encode`] could have made.
pub fn decode(payload: &[u8]) -> Result<Stamp, PayloadError> {
    if payload.len() < HEADER_BYTES {
        return Err(PayloadError::TooShort(payload.len()));
    }
    let hex = |range: std::ops::Range<usize>| {
        std::str::from_utf8(&payload[range])
            .ok()
            .and_then(|text| u64::from_str_radix(text, 16).ok())
            .ok_or(PayloadError::Corrupt("header is not hex"))
    };
    let seq = hex(0..16)?;
    let sent_ns = hex(16..32)?;
    // Compared a slice at a time (a vectorised memcmp), not byte by byte: every
    // system's consumer checks every payload it receives.
    let intact = payload[HEADER_BYTES..]
        .chunks(PADDING_RUN.len())
        .all(|chunk| chunk == &PADDING_RUN[..chunk.len()]);
    if !intact {
        return Err(PayloadError::Corrupt("padding changed"));
    }
    Ok(Stamp { seq, sent_ns })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a payload round-trips its sequence and time at several sizes.
    #[test]
    fn round_trip() {
        for size in [HEADER_BYTES, 100, 1024] {
            let payload = encode_at(123_456, 987_654_321, size);
            assert_eq!(payload.len(), size);
            let stamp = decode(&payload).unwrap();
            assert_eq!(
                stamp,
                Stamp {
                    seq: 123_456,
                    sent_ns: 987_654_321
                }
            );
        }
    }

    // Proves the header is the two numbers in hex, as the format says.
    #[test]
    fn header_is_sequence_then_time_in_hex() {
        let payload = encode_at(0xfe, u64::MAX, 40);
        assert_eq!(&payload[..], b"00000000000000feffffffffffffffff........");
    }

    // Proves a changed byte anywhere (also past the first run of padding compared at
    // once), or truncation, is caught.
    #[test]
    fn corruption_is_caught() {
        let payload = encode_at(1, 2, 10_000).to_vec();
        assert!(decode(&payload[..10]).is_err());
        for index in [0, 20, 40, 63, 4127, 4128, 4129, 9_999] {
            let mut bad = payload.clone();
            bad[index] = b'z';
            assert!(decode(&bad).is_err(), "byte {index}");
        }
    }
}
