//! Writes valid encoded records, each behind the target's 4-byte payload limit, into the
//! corpus directory given as the only argument, so `record_decoder` starts from inputs
//! that pass the CRC (arbitrary bytes almost never do). Run by `../scripts/fuzz-smoke.sh`
//! before the fuzzer; the corpus directory is not committed.

use std::path::PathBuf;

use mailroom_store::record::encode_into;

fn main() {
    let dir = PathBuf::from(std::env::args().nth(1).expect("usage: write_corpus DIR"));
    std::fs::create_dir_all(&dir).expect("create the corpus directory");
    let payloads: [&[u8]; 5] = [b"", b"x", b"hello", &[0xff; 64], &[0; 300]];
    for (index, payload) in payloads.iter().enumerate() {
        for limit in [u32::MAX, payload.len() as u32, 0] {
            let mut input = limit.to_le_bytes().to_vec();
            encode_into(&mut input, index as u64 * 1000, 1_700_000_000_000, payload);
            // Two records back to back too: the decoder reads only the first.
            encode_into(
                &mut input,
                index as u64 * 1000 + 1,
                1_700_000_000_001,
                b"next",
            );
            let name = format!("valid-record-{index}-limit-{limit}");
            std::fs::write(dir.join(name), &input).expect("write a corpus file");
        }
    }
}
