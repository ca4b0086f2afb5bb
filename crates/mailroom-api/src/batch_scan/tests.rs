use proptest::prelude::*;

use super::*;
use crate::topics::{Base64Message, BatchMessage, BatchMessageObject, BatchRequest};

/// What the general decoder would have made of `batch`.
fn as_general(batch: &ScannedBatch<'_>) -> Vec<BatchMessage> {
    let owned = |text: Option<&str>| text.map(str::to_owned);
    batch
        .items
        .iter()
        .map(|item| match item {
            ScannedItem::Text(text) => BatchMessage::Text((*text).to_owned()),
            ScannedItem::Binary(base64) => BatchMessage::Binary(Base64Message {
                base64: (*base64).to_owned(),
            }),
            ScannedItem::Message(object) => BatchMessage::Message(BatchMessageObject {
                payload: owned(object.payload),
                payload_base64: owned(object.payload_base64),
                key: owned(object.key),
                idempotency_key: owned(object.idempotency_key),
                headers: object.headers.as_ref().map(|_| {
                    let pairs = batch.headers(object).iter();
                    pairs.map(|&(n, v)| (n.to_owned(), v.to_owned())).collect()
                }),
            }),
        })
        .collect()
}

/// Pieces of a JSON string's inside: plain ASCII, non-ASCII, escapes and a raw
/// control character (which JSON refuses).
fn piece(plain_only: bool) -> BoxedStrategy<String> {
    let plain = prop_oneof![
        "[a-z0-9 ._/-]{0,12}",
        Just("é".to_owned()),
        Just("漢字".to_owned()),
        Just("🦀".to_owned()),
        "[a-zA-Z0-9+/]{4}",
    ];
    if plain_only {
        return plain.boxed();
    }
    prop_oneof![
        6 => plain,
        1 => Just(r#"\""#.to_owned()),
        1 => Just(r"\\".to_owned()),
        1 => Just(r"\n".to_owned()),
        1 => Just(r"\u00e9".to_owned()),
        1 => Just("\u{1}".to_owned()),
    ]
    .boxed()
}

fn json_string(plain_only: bool) -> BoxedStrategy<String> {
    proptest::collection::vec(piece(plain_only), 0..4)
        .prop_map(|pieces| format!("\"{}\"", pieces.concat()))
        .boxed()
}

fn space() -> impl Strategy<Value = &'static str> {
    prop_oneof![8 => Just(""), 1 => Just(" "), 1 => Just("\n\t ")]
}

/// A field's value: mostly a string, sometimes what the decoders refuse or skip.
fn value(plain_only: bool) -> BoxedStrategy<String> {
    if plain_only {
        return json_string(true);
    }
    prop_oneof![8 => json_string(false), 1 => Just("null".to_owned()), 1 => Just("1".to_owned())]
        .boxed()
}

fn headers(plain_only: bool) -> BoxedStrategy<String> {
    let name = prop_oneof![
        Just("\"trace\"".to_owned()),
        Just("\"content-type\"".to_owned()),
        json_string(plain_only),
    ];
    // Plain headers name each header once; the others may repeat one.
    let names = if plain_only {
        proptest::collection::btree_set(name, 0..12)
            .prop_map(|names| names.into_iter().collect::<Vec<_>>())
            .boxed()
    } else {
        proptest::collection::vec(name, 0..12).boxed()
    };
    names
        .prop_flat_map(move |names| {
            let n = names.len();
            (
                Just(names),
                proptest::collection::vec((value(plain_only), space()), n),
            )
        })
        .prop_map(|(names, values)| {
            let pairs: Vec<String> = names
                .into_iter()
                .zip(values)
                .map(|(n, (v, s))| format!("{s}{n}{s}:{s}{v}"))
                .collect();
            format!("{{{}}}", pairs.join(","))
        })
        .boxed()
}

fn object(plain_only: bool) -> BoxedStrategy<String> {
    let mut names = vec![
        "payload",
        "payload_base64",
        "key",
        "headers",
        "idempotency_key",
    ];
    let fields = if plain_only {
        // Each field once, in any order.
        proptest::sample::subsequence(names, 0..=5)
            .prop_shuffle()
            .boxed()
    } else {
        // Unknown names, some a known one's prefix or a known one with more after it
        // (the scanner matches names byte by byte with their closing quote).
        names.extend([
            "base64", "extra", "payloa", "payload_", "keys", "header", "p",
        ]);
        proptest::collection::vec(proptest::sample::select(names), 0..5).boxed()
    };
    fields
        .prop_flat_map(move |fields| {
            let n = fields.len();
            let value = (value(plain_only), headers(plain_only));
            (Just(fields), proptest::collection::vec(value, n))
        })
        .prop_map(|(fields, values)| {
            let fields: Vec<String> = fields
                .into_iter()
                .zip(values)
                .map(|(name, (value, headers))| {
                    let value = if name == "headers" { headers } else { value };
                    format!("\"{name}\": {value}")
                })
                .collect();
            format!("{{{}}}", fields.join(", "))
        })
        .boxed()
}

fn body(plain_only: bool) -> BoxedStrategy<String> {
    let item = prop_oneof![json_string(plain_only), object(plain_only)];
    let tail = if plain_only {
        Just("").boxed()
    } else {
        prop_oneof![8 => Just(""), 1 => Just(", \"extra\": 1"), 1 => Just("x")].boxed()
    };
    (
        proptest::collection::vec((item, space()), 0..5),
        tail,
        space(),
    )
        .prop_map(|(items, tail, s)| {
            let items: Vec<String> = items
                .into_iter()
                .map(|(i, s)| format!("{s}{i}{s}"))
                .collect();
            format!(
                "{s}{{{s}\"messages\"{s}:{s}[{}]{tail}}}{s}",
                items.join(",")
            )
        })
        .boxed()
}

proptest! {
    // Proves that where the scanner answers, it answers what the general decoder
    // reads, and that it never answers for a body the general decoder refuses (escaped
    // and non-ASCII strings, nulls, numbers, unknown and repeated fields included).
    #[test]
    fn scanner_agrees_with_the_general_decoder(body in body(false)) {
        let general = serde_json::from_slice::<BatchRequest>(body.as_bytes());
        if let Some(batch) = scan_batch(body.as_bytes()) {
            let general = general.map_err(|e| e.to_string());
            prop_assert_eq!(general.map(|r| r.messages), Ok(as_general(&batch)));
        }
    }

    // Proves the plain shape (no escapes, each field and header name once, string
    // values) is always scanned: the fast path is the common one.
    #[test]
    fn plain_bodies_are_scanned(body in body(true)) {
        let batch = scan_batch(body.as_bytes());
        prop_assert!(batch.is_some(), "{} was not scanned", body);
        let general = serde_json::from_slice::<BatchRequest>(body.as_bytes());
        let general = general.map(|r| r.messages).map_err(|e| e.to_string());
        prop_assert_eq!(general, Ok(as_general(&batch.unwrap())));
    }
}

// Proves the common item shapes scan, whitespace and all, and what is left to the
// general decoder.
#[test]
fn common_shapes() {
    let body = br#" { "messages" : [ "a" , {"base64":"/w=="}, {"payload":"p","key":"k",
        "headers":{"traceparent":"00-ab","content-type":"application/json"},
        "idempotency_key":"i"}, {"payload_base64":"AA=="}, {}, { "payload" : "q" ,
        "key"	:"k2" } ] } "#;
    for len in 20..30 {
        let text = "x".repeat(len);
        let body = format!(r#"{{"messages":["{text}"]}}"#);
        let batch = scan_batch(body.as_bytes()).expect("scanned");
        assert_eq!(batch.items, [ScannedItem::Text(&text)]);
    }
    let batch = scan_batch(body).expect("scanned");
    assert_eq!(batch.items.len(), 6);
    let general: BatchRequest = serde_json::from_slice(body).unwrap();
    assert_eq!(as_general(&batch), general.messages);
    for left in [
        &br#"{"messages":["a\u00e9"]}"#[..],
        br#"{"messages":[{"payload":null}]}"#,
        // A known field name spelled with an escape, which the general decoder reads.
        br#"{"messages":[{"p\u0061yload":"a"}]}"#,
        br#"{"messages":[{"payload_base64x":"AA=="}]}"#,
        br#"{"messages":[{"payload":"a","payload":"b"}]}"#,
        br#"{"messages":[{"headers":{"a":"1","a":"2"}}]}"#,
        br#"{"messages":[{"base64":"/w==","key":"k"}]}"#,
        br#"{"messages":["a"],"x":1}"#,
        br#"{"messages":["a"]} x"#,
        b"{\"messages\":[\"\xff\"]}",
        b"{\"messages\":[\"\x01\"]}",
        br#"{"messages":["a",]}"#,
        // An escape and a control character far into a string.
        br#"{"messages":["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n"]}"#,
        b"{\"messages\":[\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\x1f\"]}",
        b"",
    ] {
        assert!(
            scan_batch(left).is_none(),
            "{}",
            String::from_utf8_lossy(left)
        );
    }
}

// Proves a control character is refused wherever it stands in a long string: in a
// vector lane or in the tail after the last whole lane.
#[test]
fn a_control_character_anywhere_is_left_to_the_general_decoder() {
    for at in 0..40 {
        let mut text = vec![b'a'; 40];
        text[at] = 0x1f;
        let mut body = br#"{"messages":[""#.to_vec();
        body.extend_from_slice(&text);
        body.extend_from_slice(br#""]}"#);
        assert!(
            scan_batch(&body).is_none(),
            "control character at {at} scanned"
        );
    }
}

proptest! {
    // Proves the few-headers sort and the general one both order the names and refuse
    // exactly the lists with a name given twice.
    #[test]
    fn header_names_are_sorted_and_a_repeat_refused(
        names in proptest::collection::vec("[a-e]{1,2}", 0..14),
    ) {
        let mut pairs: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "v")).collect();
        let mut expected: Vec<&str> = names.iter().map(String::as_str).collect();
        expected.sort_unstable();
        let repeated = expected.windows(2).any(|pair| pair[0] == pair[1]);
        let sorted = sort_names_once(&mut pairs);
        prop_assert_eq!(sorted.is_none(), repeated);
        if !repeated {
            prop_assert_eq!(pairs.iter().map(|p| p.0).collect::<Vec<_>>(), expected);
        }
    }

    // Proves the names' order by first byte is `str`'s order, empty names and
    // non-ASCII ones included.
    #[test]
    fn name_order_is_str_order(a in "[a-c\u{e9}]{0,3}", b in "[a-c\u{e9}]{0,3}") {
        prop_assert_eq!(name_order(&a, &b), a.cmp(&b));
    }
}
