use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

/// A message as a client holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Message {
    payload: Vec<u8>,
    key: Option<String>,
    idempotency_key: Option<String>,
    headers: BTreeMap<String, String>,
}

fn message() -> impl Strategy<Value = Message> {
    // Strings of 128 bytes or more have a length whose first byte is not ASCII, which
    // takes the decoder off its one check of a message's strings together.
    let text = || {
        prop_oneof![
            8 => "[a-z0-9é漢🦀 _-]{0,12}",
            1 => "[a-zé]{120,200}",
        ]
    };
    (
        proptest::collection::vec(any::<u8>(), 0..40),
        proptest::option::of(text()),
        proptest::option::of(text()),
        proptest::collection::btree_map(text(), text(), 0..4),
    )
        .prop_map(|(payload, key, idempotency_key, headers)| Message {
            payload,
            key,
            idempotency_key,
            headers,
        })
}

fn encode(messages: &[Message]) -> Vec<u8> {
    let mut writer = BatchWriter::new();
    for message in messages {
        let headers = message
            .headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()));
        writer
            .push(
                &message.payload,
                message.key.as_deref(),
                message.idempotency_key.as_deref(),
                headers,
            )
            .unwrap();
    }
    writer.finish()
}

fn decoded(body: &[u8]) -> Result<Vec<Message>, DecodeError> {
    let mut reader = Reader::new(body)?;
    let mut messages = Vec::new();
    while let Some(message) = reader.next_message()? {
        assert_eq!(message.index, messages.len());
        let block = message.block;
        let block_bytes = block.map_or(&[][..], |block| block.bytes());
        assert_eq!(message.body, [block_bytes, message.payload].concat());
        messages.push(Message {
            payload: message.payload.to_vec(),
            key: block.and_then(|block| block.key()).map(str::to_owned),
            idempotency_key: block
                .and_then(|block| block.idempotency_key())
                .map(str::to_owned),
            headers: block
                .into_iter()
                .flat_map(|block| block.headers())
                .map(|(n, v)| (n.to_owned(), v.to_owned()))
                .collect(),
        });
    }
    Ok(messages)
}

proptest! {
    // Proves that what the writer writes reads back as the same messages, headers in
    // name order.
    #[test]
    fn what_is_written_reads_back(messages in proptest::collection::vec(message(), 1..8)) {
        let body = encode(&messages);
        prop_assert_eq!(decoded(&body), Ok(messages.clone()));
    }

    // Proves that every strict prefix of a body is refused (the count announces more
    // than is there), and that a byte more is refused too.
    #[test]
    fn a_cut_or_a_longer_body_is_refused(
        messages in proptest::collection::vec(message(), 1..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let body = encode(&messages);
        let at = cut.index(body.len());
        prop_assert!(decoded(&body[..at]).is_err(), "prefix of {} bytes of {} read", at, body.len());
        let mut longer = body.clone();
        longer.push(0);
        prop_assert_eq!(
            decoded(&longer),
            Err(DecodeError::Trailing { count: messages.len(), extra: 1 })
        );
    }

    // Proves that no body panics the decoder: random bytes after the magic, and valid
    // bodies with one byte changed.
    #[test]
    fn no_body_panics_the_decoder(
        tail in proptest::collection::vec(any::<u8>(), 0..64),
        messages in proptest::collection::vec(message(), 1..4),
        flip in any::<(prop::sample::Index, u8)>(),
    ) {
        let mut body = MAGIC.to_vec();
        body.extend_from_slice(&tail);
        let _ = decoded(&body);
        let mut body = encode(&messages);
        let at = flip.0.index(body.len());
        body[at] ^= flip.1;
        let _ = decoded(&body);
    }
}

/// One message's bytes: its word, then its body (the block as given, then `payload`).
fn message_bytes(block: &[u8], payload: &[u8]) -> Vec<u8> {
    let flag = if block.is_empty() { 0 } else { 1 << 31 };
    let word = (block.len() + payload.len()) as u32 | flag;
    [&word.to_le_bytes()[..], block, payload].concat()
}

fn body(count: u32, messages: &[Vec<u8>]) -> Vec<u8> {
    let mut body = MAGIC.to_vec();
    body.extend_from_slice(&count.to_le_bytes());
    for message in messages {
        body.extend_from_slice(message);
    }
    body
}

#[test]
fn the_layout_is_as_documented() {
    let mut writer = BatchWriter::new();
    writer
        .push(b"p", Some("k"), None, [("h", "v")].into_iter())
        .unwrap();
    writer.push_bare(b"q").unwrap();
    let expected: &[u8] = &[
        b'M', b'R', b'B', b'2', 2, 0, 0, 0, // magic, count
        17, 0, 0, 0x80, // word: a block, 17 bytes of body
        16, 0, 0, 0, 0b011, // block: its length, flags (a key, headers)
        1, 0, b'k', // key
        1, 0, 1, 0, 1, 0, b'h', b'v', // one header, h: v
        b'p', // payload
        1, 0, 0, 0, b'q', // a bare message: its word and payload
    ];
    assert_eq!(writer.finish(), expected);
}

#[test]
fn headers_in_any_order_are_written_in_name_order() {
    let mut writer = BatchWriter::new();
    let headers = [("z", "1"), ("a", "2"), ("m", "3")];
    writer.push(b"p", None, None, headers.into_iter()).unwrap();
    let body = writer.finish();
    let mut reader = Reader::new(&body).unwrap();
    let message = reader.next_message().unwrap().unwrap();
    assert_eq!(
        message.block.unwrap().headers().collect::<Vec<_>>(),
        [("a", "2"), ("m", "3"), ("z", "1")]
    );
}

#[test]
fn a_repeated_header_or_one_out_of_order_is_refused_by_message() {
    let mut twice = BatchWriter::new();
    twice.push_bare(b"x").unwrap();
    twice
        .push(b"p", None, None, [("a", "1"), ("a", "2")].into_iter())
        .unwrap();
    assert_eq!(
        decoded(&twice.finish()),
        Err(DecodeError::Block {
            index: 1,
            error: BlockError::RepeatedHeader {
                name: "a".to_owned()
            }
        })
    );
    let mut block = Vec::new();
    write_block(None, None, [("b", "1"), ("a", "2")].into_iter(), &mut block).unwrap();
    assert_eq!(
        decoded(&body(1, &[message_bytes(&block, b"p")])),
        Err(DecodeError::Block {
            index: 0,
            error: BlockError::HeaderOrder {
                before: "b".to_owned(),
                after: "a".to_owned()
            }
        })
    );
}

#[test]
fn each_breach_of_the_layout_is_named() {
    assert_eq!(decoded(b"{\"messages\": []}"), Err(DecodeError::Magic));
    assert_eq!(
        decoded(b"MRB1\x01\0\0\0"),
        Err(DecodeError::Version {
            found: "MRB1".to_owned()
        })
    );
    assert_eq!(
        decoded(b"MRB2\x01"),
        Err(DecodeError::Truncated {
            at: "count".to_owned(),
            part: "count"
        })
    );
    assert_eq!(decoded(&body(0, &[])), Err(DecodeError::Count { count: 0 }));
    let over = BATCH_MESSAGES_MAX as u32 + 1;
    assert_eq!(
        decoded(&body(over, &[])),
        Err(DecodeError::Count { count: over })
    );
    let bare = message_bytes(&[], b"p");
    assert_eq!(
        decoded(&body(2, &[bare.clone(), bare[..2].to_vec()])),
        Err(DecodeError::Truncated {
            at: "messages[1]".to_owned(),
            part: "length word"
        })
    );
    assert_eq!(
        decoded(&body(1, &[bare[..4].to_vec()])),
        Err(DecodeError::Truncated {
            at: "messages[0]".to_owned(),
            part: "record body"
        })
    );
    let mut block = Vec::new();
    write_block(Some("\u{e9}"), None, std::iter::empty(), &mut block).unwrap();
    let claims_more = [&((block.len() + 9) as u32).to_le_bytes()[..], &block[4..]].concat();
    assert_eq!(
        decoded(&body(1, &[message_bytes(&claims_more, b"p")])),
        Err(DecodeError::Truncated {
            at: "messages[0]".to_owned(),
            part: "metadata block"
        })
    );
    let too_short = [&2u32.to_le_bytes()[..], b"xp"].concat();
    let mut word_and_body = ((too_short.len() as u32) | (1 << 31))
        .to_le_bytes()
        .to_vec();
    word_and_body.extend_from_slice(&too_short);
    assert_eq!(
        decoded(&body(1, &[word_and_body])),
        Err(DecodeError::Block {
            index: 0,
            error: BlockError::Length {
                claimed: 2,
                actual: 4
            }
        })
    );
    let mut not_utf8 = block.clone();
    *not_utf8.last_mut().unwrap() = 0xff;
    assert_eq!(
        decoded(&body(1, &[message_bytes(&not_utf8, b"p")])),
        Err(DecodeError::Block {
            index: 0,
            error: BlockError::NotUtf8 { part: "key" }
        })
    );
    let mut flagged = block.clone();
    flagged[LENGTH_BYTES] |= 0b1000;
    assert_eq!(
        decoded(&body(1, &[message_bytes(&flagged, b"p")])),
        Err(DecodeError::Block {
            index: 0,
            error: BlockError::Flags { bits: 0b1000 }
        })
    );
    // A payload may be any bytes.
    let payload = decoded(&body(1, &[message_bytes(&[], b"\xff\x00")])).unwrap();
    assert_eq!(payload[0].payload, b"\xff\x00");
}

#[test]
fn the_count_is_filled_in_and_an_empty_writer_says_zero() {
    let writer = BatchWriter::with_capacity(16);
    assert!(writer.is_empty());
    assert_eq!(
        decoded(&writer.finish()),
        Err(DecodeError::Count { count: 0 })
    );
    let mut writer = BatchWriter::new();
    for _ in 0..3 {
        writer.push_bare(b"").unwrap();
    }
    assert_eq!(writer.len(), 3);
    assert_eq!(decoded(&writer.finish()).unwrap().len(), 3);
}

// Proves a message too long for the word, or a key too long for the block, is refused
// whole: the writer's body is as it was.
#[test]
fn what_the_encoding_cannot_carry_adds_nothing() {
    let mut writer = BatchWriter::new();
    writer.push_bare(b"kept").unwrap();
    let long = "k".repeat(usize::from(u16::MAX) + 1);
    let refused = writer.push(b"p", Some(&long), None, std::iter::empty());
    assert_eq!(
        refused,
        Err(TooLong {
            part: "key",
            bytes: long.len()
        })
    );
    assert_eq!(writer.len(), 1);
    assert_eq!(decoded(&writer.finish()).unwrap()[0].payload, b"kept");
}
