//! Fuzzes the record decoder: it must never panic, never claim more bytes than it was
//! given, and anything it accepts must re-encode to the same bytes. Arbitrary bytes alone
//! almost never carry a matching CRC, so the same input is also encoded as a valid record
//! (its offset, time and payload drawn from the input) that must decode back exactly,
//! and then, with one bit flipped at a place drawn from the input, decoded again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mailroom_store::record::{decode, encode_into, Decoded, HEADER_BYTES};

fuzz_target!(|data: &[u8]| {
    // The first four bytes pick the payload limit, so the length check is explored too.
    let (limit, input) = match data.split_first_chunk::<4>() {
        Some((limit, rest)) => (u32::from_le_bytes(*limit), rest),
        None => (u32::MAX, data),
    };
    check_decode(input, limit);

    let (offset, rest) = take_u64(input);
    let (timestamp_ms, payload) = take_u64(rest);
    let mut record = Vec::new();
    encode_into(&mut record, offset, timestamp_ms, payload);
    match decode(&record, u32::MAX) {
        Decoded::Record { record: got, bytes } => {
            assert_eq!(bytes, record.len());
            assert_eq!((got.offset, got.timestamp_ms), (offset, timestamp_ms));
            assert_eq!(got.payload, payload);
        }
        other => panic!("a valid record was refused: {other:?}"),
    }
    check_decode(&record, limit);
    let bit = limit as usize % (record.len() * 8);
    record[bit / 8] ^= 1 << (bit % 8);
    check_decode(&record, limit);
});

/// Whatever `decode` accepts lies within `input` and re-encodes to the bytes it read.
fn check_decode(input: &[u8], limit: u32) {
    if let Decoded::Record { record, bytes } = decode(input, limit) {
        assert!(bytes <= input.len());
        assert_eq!(bytes, HEADER_BYTES + record.payload.len());
        let mut again = Vec::new();
        encode_into(
            &mut again,
            record.offset,
            record.timestamp_ms,
            record.payload,
        );
        assert_eq!(&again[..], &input[..bytes]);
    }
}

/// A little-endian `u64` from the front of `input` (zero-padded if shorter), and the rest.
fn take_u64(input: &[u8]) -> (u64, &[u8]) {
    let split = input.len().min(8);
    let mut raw = [0u8; 8];
    raw[..split].copy_from_slice(&input[..split]);
    (u64::from_le_bytes(raw), &input[split..])
}
