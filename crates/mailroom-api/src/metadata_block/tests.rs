use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

/// What a block holds, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Metadata {
    key: Option<String>,
    idempotency_key: Option<String>,
    headers: BTreeMap<String, String>,
}

impl Metadata {
    fn is_empty(&self) -> bool {
        self.key.is_none() && self.idempotency_key.is_none() && self.headers.is_empty()
    }

    fn block(&self) -> Vec<u8> {
        let mut block = Vec::new();
        let headers = self.headers.iter().map(|(n, v)| (n.as_str(), v.as_str()));
        write_block(
            self.key.as_deref(),
            self.idempotency_key.as_deref(),
            headers,
            &mut block,
        )
        .unwrap();
        block
    }
}

fn read(block: &[u8]) -> Result<Metadata, BlockError> {
    let mut headers = Vec::new();
    let read = read_block(block, &mut headers)?;
    assert_eq!(read.bytes(), block);
    Ok(Metadata {
        key: read.key().map(str::to_owned),
        idempotency_key: read.idempotency_key().map(str::to_owned),
        headers: read
            .headers()
            .map(|(n, v)| (n.to_owned(), v.to_owned()))
            .collect(),
    })
}

fn metadata() -> impl Strategy<Value = Metadata> {
    // Strings of 128 bytes or more have a length whose first byte is not ASCII, which
    // takes the reader off its one check of the block's strings together.
    let text = || {
        prop_oneof![
            8 => "\\PC{0,12}",
            1 => "[a-zé]{120,200}",
        ]
    };
    (
        proptest::option::of(text()),
        proptest::collection::btree_map(text(), text(), 0..5),
        proptest::option::of(text()),
    )
        .prop_map(|(key, headers, idempotency_key)| Metadata {
            key,
            headers,
            idempotency_key,
        })
}

// Proves the layout is the documented one, byte by byte.
#[test]
fn block_layout_is_the_documented_one() {
    let mut block = Vec::new();
    write_block(Some("k1"), Some("i"), [("a", "xy")].into_iter(), &mut block).unwrap();
    let expected: &[u8] = &[
        21, 0, 0, 0, // block_bytes
        7, // flags: key, headers, idempotency key
        2, 0, b'k', b'1', // key
        1, 0, b'i', // idempotency key
        1, 0, // one header
        1, 0, 2, 0, b'a', b'x', b'y', // a: xy
    ];
    assert_eq!(&block[..], expected);
    let mut none = vec![9];
    write_block(None, None, std::iter::empty(), &mut none).unwrap();
    assert_eq!(none, [9], "no metadata, no block");
}

// Proves a field past its u16 is refused and leaves the buffer as it was.
#[test]
fn a_field_past_its_u16_is_refused_whole() {
    let long = "x".repeat(usize::from(u16::MAX) + 1);
    let mut out = vec![1, 2];
    let refused = write_block(
        Some("k"),
        None,
        [("h", long.as_str())].into_iter(),
        &mut out,
    );
    assert_eq!(
        refused,
        Err(TooLong {
            part: "header value",
            bytes: long.len()
        })
    );
    assert_eq!(out, [1, 2]);
}

// Proves headers out of name order, or a name twice, are refused by name.
#[test]
fn headers_out_of_order_or_repeated_are_refused() {
    let mut block = Vec::new();
    write_block(None, None, [("b", "1"), ("a", "2")].into_iter(), &mut block).unwrap();
    assert_eq!(
        read(&block),
        Err(BlockError::HeaderOrder {
            before: "b".into(),
            after: "a".into()
        })
    );
    block.clear();
    write_block(None, None, [("a", "1"), ("a", "2")].into_iter(), &mut block).unwrap();
    assert_eq!(
        read(&block),
        Err(BlockError::RepeatedHeader { name: "a".into() })
    );
}

// Proves a string that is not UTF-8 is named, on the one-check path and off it.
#[test]
fn strings_that_are_not_utf8_are_named() {
    for value_len in [3usize, 200] {
        let mut block = Vec::new();
        let value = "v".repeat(value_len);
        write_block(
            Some("k"),
            None,
            [("h", value.as_str())].into_iter(),
            &mut block,
        )
        .unwrap();
        let last = block.len() - 1;
        block[last] = 0xff;
        assert_eq!(
            read(&block),
            Err(BlockError::NotUtf8 {
                part: "header value"
            })
        );
    }
}

// Proves a string that is not UTF-8 on its own is refused even when the bytes around it
// make the block's fields UTF-8 together: here a key of one lead byte, 0xC3, followed by
// the idempotency key's length 169 (0xA9), which reads as "é".
#[test]
fn a_string_is_checked_on_its_own_boundaries() {
    let mut block = vec![
        0,
        0,
        0,
        0,
        FLAG_KEY | FLAG_IDEMPOTENCY_KEY,
        1,
        0,
        0xC3,
        169,
        0,
    ];
    block.extend_from_slice(&[b'i'; 169]);
    let len = block.len() as u32;
    block[..LENGTH_BYTES].copy_from_slice(&len.to_le_bytes());
    assert_eq!(read(&block), Err(BlockError::NotUtf8 { part: "key" }));
}

proptest! {
    // Proves a block reads back as the metadata it was written from.
    #[test]
    fn blocks_round_trip(metadata in metadata()) {
        let block = metadata.block();
        prop_assert_eq!(block.is_empty(), metadata.is_empty());
        if !metadata.is_empty() {
            prop_assert_eq!(read(&block), Ok(metadata));
        }
    }

    // Proves the key and the idempotency key are found where the reader reads them, and
    // that a cut block gives no place past its end.
    #[test]
    fn leading_fields_are_found_without_reading_the_rest(
        metadata in metadata(),
        cut in any::<prop::sample::Index>(),
    ) {
        let block = metadata.block();
        prop_assume!(!block.is_empty());
        let text = |at: Option<Range<usize>>| at.map(|at| std::str::from_utf8(&block[at]).unwrap().to_owned());
        prop_assert_eq!(text(key_at(&block)), metadata.key.clone());
        prop_assert_eq!(text(idempotency_key_at(&block)), metadata.idempotency_key.clone());
        let cut = &block[..cut.index(block.len())];
        for at in [key_at(cut), idempotency_key_at(cut)].into_iter().flatten() {
            prop_assert!(at.end <= cut.len());
        }
    }

    // Proves a cut or lengthened block is refused, never misread, even with its length
    // field made to match.
    #[test]
    fn damaged_blocks_are_refused(metadata in metadata(), cut in any::<prop::sample::Index>()) {
        let mut block = metadata.block();
        prop_assume!(!block.is_empty());
        let cut = cut.index(block.len());
        prop_assert!(read(&block[..cut]).is_err());
        let mut relabelled = block[..cut].to_vec();
        if relabelled.len() >= LENGTH_BYTES {
            let len = relabelled.len() as u32;
            relabelled[..LENGTH_BYTES].copy_from_slice(&len.to_le_bytes());
            prop_assert!(read(&relabelled).is_err());
        }
        block.push(0);
        let len = block.len() as u32;
        block[..LENGTH_BYTES].copy_from_slice(&len.to_le_bytes());
        prop_assert_eq!(read(&block), Err(BlockError::Trailing { extra: 1 }));
    }

    // Proves the reader never panics, whatever the bytes, and that what it accepts
    // reads the same once written again.
    #[test]
    fn the_reader_never_panics(mut bytes in proptest::collection::vec(any::<u8>(), 0..64), fix_length: bool) {
        if fix_length && bytes.len() >= LENGTH_BYTES {
            let len = bytes.len() as u32;
            bytes[..LENGTH_BYTES].copy_from_slice(&len.to_le_bytes());
        }
        if let Ok(metadata) = read(&bytes) {
            if !metadata.is_empty() {
                prop_assert_eq!(read(&metadata.block()), Ok(metadata));
            }
        }
    }
}
