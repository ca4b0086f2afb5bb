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
    let batch = decode(body)?;
    Ok(batch
        .items
        .iter()
        .map(|item| Message {
            payload: item.payload.to_vec(),
            key: item.key.map(str::to_owned),
            idempotency_key: item.idempotency_key.map(str::to_owned),
            headers: batch
                .headers(item)
                .iter()
                .map(|&(n, v)| (n.to_owned(), v.to_owned()))
                .collect(),
        })
        .collect())
}

proptest! {
    // Proves that what the writer writes reads back as the same messages, headers in
    // name order.
    #[test]
    fn what_is_written_reads_back(messages in proptest::collection::vec(message(), 1..8)) {
        let body = encode(&messages);
        prop_assert_eq!(decoded(&body), Ok(messages.clone()));
        let batch = decode(&body).unwrap();
        for item in &batch.items {
            let headers = batch.headers(item);
            prop_assert!(headers.windows(2).all(|pair| pair[0].0 < pair[1].0));
        }
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
        prop_assert!(decode(&body[..at]).is_err(), "prefix of {} bytes of {} read", at, body.len());
        let mut longer = body.clone();
        longer.push(0);
        prop_assert_eq!(
            decode(&longer),
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
        let _ = decode(&body);
        let mut body = encode(&messages);
        let at = flip.0.index(body.len());
        body[at] ^= flip.1;
        let _ = decode(&body);
    }
}

/// One message's bytes: flags, then parts as given.
fn item(flags: u8, parts: &[&[u8]]) -> Vec<u8> {
    let mut bytes = vec![flags];
    for part in parts {
        bytes.extend_from_slice(&(part.len() as u32).to_le_bytes());
        bytes.extend_from_slice(part);
    }
    bytes
}

fn body(count: u32, items: &[Vec<u8>]) -> Vec<u8> {
    let mut body = MAGIC.to_vec();
    body.extend_from_slice(&count.to_le_bytes());
    for item in items {
        body.extend_from_slice(item);
    }
    body
}

#[test]
fn the_layout_is_as_documented() {
    let mut writer = BatchWriter::new();
    writer
        .push(b"p", Some("k"), None, [("h", "v")].into_iter())
        .unwrap();
    let expected: &[u8] = &[
        b'M', b'R', b'B', b'1', 1, 0, 0, 0,     // magic, count
        0b101, // flags: a key and headers
        1, 0, 0, 0, b'p', // payload
        1, 0, 0, 0, b'k', // key
        1, 0, 0, 0, // one header
        1, 0, 0, 0, b'h', 1, 0, 0, 0, b'v',
    ];
    assert_eq!(writer.finish(), expected);
}

#[test]
fn headers_in_any_order_are_sorted_and_a_repeated_name_is_refused() {
    let mut unsorted = item(0b100, &[b"p"]);
    unsorted.extend_from_slice(&3u32.to_le_bytes());
    unsorted.extend_from_slice(&item(0, &[b"z", b"1", b"a", b"2", b"m", b"3"])[1..]);
    let batch_body = body(1, &[unsorted]);
    let batch = decode(&batch_body).unwrap();
    assert_eq!(
        batch.headers(&batch.items[0]),
        [("a", "2"), ("m", "3"), ("z", "1")]
    );

    let mut twice = item(0b100, &[b"p"]);
    twice.extend_from_slice(&2u32.to_le_bytes());
    twice.extend_from_slice(&item(0, &[b"a", b"1", b"a", b"2"])[1..]);
    assert_eq!(
        decode(&body(2, &[item(0, &[b"x"]), twice])),
        Err(DecodeError::RepeatedHeader {
            index: 1,
            name: "a".to_owned()
        })
    );
}

#[test]
fn each_breach_of_the_layout_is_named() {
    assert_eq!(decode(b"{\"messages\": []}"), Err(DecodeError::Magic));
    assert_eq!(
        decode(b"MRB1\x01"),
        Err(DecodeError::Truncated {
            at: "count".to_owned(),
            part: "count"
        })
    );
    assert_eq!(decode(&body(0, &[])), Err(DecodeError::Count { count: 0 }));
    let over = BATCH_MESSAGES_MAX as u32 + 1;
    assert_eq!(
        decode(&body(over, &[])),
        Err(DecodeError::Count { count: over })
    );
    assert_eq!(
        decode(&body(1, &[item(0b1000, &[b"p"])])),
        Err(DecodeError::Flags {
            index: 0,
            bits: 0b1000
        })
    );
    assert_eq!(
        decode(&body(1, &[item(0b1, &[b"p", b"\xff"])])),
        Err(DecodeError::NotUtf8 {
            index: 0,
            part: "key"
        })
    );
    assert_eq!(
        decode(&body(2, &[item(0, &[b"p"]), item(0b10, &[b"p"])])),
        Err(DecodeError::Truncated {
            at: "messages[1]".to_owned(),
            part: "idempotency_key"
        })
    );
    // A payload may be any bytes.
    let batch_body = body(1, &[item(0, &[b"\xff\x00"])]);
    assert_eq!(decode(&batch_body).unwrap().items[0].payload, b"\xff\x00");
}

#[test]
fn the_count_is_filled_in_and_an_empty_writer_says_zero() {
    let writer = BatchWriter::with_capacity(16);
    assert!(writer.is_empty());
    assert_eq!(
        decode(&writer.finish()),
        Err(DecodeError::Count { count: 0 })
    );
    let mut writer = BatchWriter::new();
    for _ in 0..3 {
        writer.push_bare(b"").unwrap();
    }
    assert_eq!(writer.len(), 3);
    assert_eq!(decode(&writer.finish()).unwrap().items.len(), 3);
}

// Proves a string that is not UTF-8 on its own is refused even when the bytes around it
// make the message's strings UTF-8 together: here a key of one lead byte, 0xC3, followed
// by the idempotency key's length 169 (0xA9), which reads as "é".
#[test]
fn a_string_is_checked_on_its_own_boundaries() {
    let mut body = MAGIC.to_vec();
    body.extend_from_slice(&1u32.to_le_bytes());
    body.push(0b11);
    body.extend_from_slice(&1u32.to_le_bytes());
    body.push(b'p');
    body.extend_from_slice(&1u32.to_le_bytes());
    body.push(0xC3);
    body.extend_from_slice(&169u32.to_le_bytes());
    body.extend_from_slice(&[b'i'; 169]);
    assert_eq!(
        decode(&body),
        Err(DecodeError::NotUtf8 {
            index: 0,
            part: "key"
        })
    );
}
