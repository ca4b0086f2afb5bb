use std::collections::BTreeMap;

use proptest::prelude::*;

use crate::batch_item::{BatchItemRef, BatchObjectRef, BatchRequestRef};
use crate::json_text::tests::text;
use crate::topics::Base64Message;

/// An owned item, for the borrowed one to point into.
#[derive(Debug, Clone)]
enum Item {
    Text(String),
    Binary(String),
    Message {
        fields: [Option<String>; 4],
        headers: Option<BTreeMap<String, String>>,
    },
}

fn item() -> impl Strategy<Value = Item> {
    let field = || proptest::option::of(text());
    let headers = proptest::option::of(proptest::collection::btree_map(text(), text(), 0..4));
    prop_oneof![
        text().prop_map(Item::Text),
        text().prop_map(Item::Binary),
        ([field(), field(), field(), field()], headers)
            .prop_map(|(fields, headers)| Item::Message { fields, headers }),
    ]
}

fn borrowed(item: &Item) -> BatchItemRef<'_> {
    match item {
        Item::Text(text) => BatchItemRef::Text(text),
        Item::Binary(base64) => BatchItemRef::Binary(Base64Message {
            base64: base64.clone(),
        }),
        Item::Message { fields, headers } => BatchItemRef::Message(BatchObjectRef {
            payload: fields[0].as_deref(),
            payload_base64: fields[1].clone(),
            key: fields[2].as_deref(),
            headers: headers.as_ref(),
            idempotency_key: fields[3].as_deref(),
        }),
    }
}

proptest! {
    // Proves the writer makes serde_json's bytes for every shape of batch: each item
    // form, absent and present fields, empty objects and maps, and strings that need
    // every kind of escape (or none) anywhere in them.
    #[test]
    fn to_json_writes_what_serde_json_writes(items in proptest::collection::vec(item(), 0..6)) {
        let body = BatchRequestRef { messages: items.iter().map(borrowed).collect() };
        let written = body.to_json();
        let expected = serde_json::to_vec(&body).unwrap();
        prop_assert_eq!(
            String::from_utf8_lossy(&written),
            String::from_utf8_lossy(&expected)
        );
    }
}

// Proves each control character gets serde_json's escape, alone and between plain runs
// long enough for the vector search.
#[test]
fn every_control_character_is_escaped_as_serde_json_escapes_it() {
    for byte in 0u8..0x20 {
        for pad in [0, 7, 40] {
            let text = format!("{}{}{}", "x".repeat(pad), char::from(byte), "y".repeat(pad));
            let body = BatchRequestRef {
                messages: vec![BatchItemRef::Text(&text)],
            };
            assert_eq!(
                body.to_json(),
                serde_json::to_vec(&body).unwrap(),
                "{byte:#x}"
            );
        }
    }
}
