//! Fuzzes the record decoder with arbitrary bytes: it must never panic, never claim more
//! bytes than it was given, and anything it accepts must re-encode to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mailroom_store::record::{decode, encode_into, Decoded, HEADER_BYTES};

fuzz_target!(|data: &[u8]| {
    // The first four bytes pick the payload limit, so the length check is explored too.
    let (limit, input) = match data.split_first_chunk::<4>() {
        Some((limit, rest)) => (u32::from_le_bytes(*limit), rest),
        None => (u32::MAX, data),
    };
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
});
