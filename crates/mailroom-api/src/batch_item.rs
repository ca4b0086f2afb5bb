//! The decoder of a batch publish's items ([`BatchMessage`]), written by hand, and their
//! borrowed encoder ([`BatchRequestRef`]).
//!
//! An item is a string, `{"base64": ...}`, or an object of `payload` or
//! `payload_base64`, `key`, `headers` and `idempotency_key`. serde's untagged derive
//! would buffer each item into an intermediate value and try the three forms in turn;
//! this decoder reads the item once, choosing the form by the JSON type and, for an
//! object, by its fields as they arrive. What it accepts is what the derive accepted:
//! unknown and repeated fields are refused, `base64` stands alone, and `null` is
//! absent for every optional field.
//!
//! ```
//! use mailroom_api::topics::BatchMessage;
//! let items: Vec<BatchMessage> =
//!     serde_json::from_str(r#"["a", {"base64": "/w=="}, {"payload": "b", "key": "k"}]"#).unwrap();
//! assert!(matches!(&items[0], BatchMessage::Text(text) if text == "a"));
//! assert!(matches!(&items[1], BatchMessage::Binary(_)));
//! assert!(matches!(&items[2], BatchMessage::Message(m) if m.key.as_deref() == Some("k")));
//! assert!(serde_json::from_str::<BatchMessage>(r#"{"base64": "/w==", "key": "k"}"#).is_err());
//! assert!(serde_json::from_str::<BatchMessage>(r#"["a"]"#).is_err());
//! ```

use std::fmt;

use serde::de::{Error, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use crate::topics::{Base64Message, BatchMessage, BatchMessageObject};

mod encode;

/// The fields an item object may have, in the order the errors list them.
const FIELDS: &[&str] = &[
    "payload",
    "payload_base64",
    "key",
    "headers",
    "idempotency_key",
    "base64",
];

const EXPECTING: &str = "a string, {\"base64\": \"...\"} or {\"payload\" or \"payload_base64\", \
    \"key\", \"headers\", \"idempotency_key\"}";

/// One field name of an item object (also the scanner's, `batch_scan.rs`).
#[derive(Clone, Copy)]
pub(crate) enum Field {
    Payload,
    PayloadBase64,
    Key,
    Headers,
    IdempotencyKey,
    Base64,
}

impl<'de> Deserialize<'de> for Field {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Field, D::Error> {
        struct Name;
        impl Visitor<'_> for Name {
            type Value = Field;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E: Error>(self, name: &str) -> Result<Field, E> {
                Ok(match name {
                    "payload" => Field::Payload,
                    "payload_base64" => Field::PayloadBase64,
                    "key" => Field::Key,
                    "headers" => Field::Headers,
                    "idempotency_key" => Field::IdempotencyKey,
                    "base64" => Field::Base64,
                    other => return Err(E::unknown_field(other, FIELDS)),
                })
            }
        }
        deserializer.deserialize_identifier(Name)
    }
}

/// Sets `slot` once: a field given twice is refused, as the derive refuses it.
fn once<E: Error, T>(slot: &mut Option<T>, value: Option<T>, name: &'static str) -> Result<(), E> {
    if slot.is_some() {
        return Err(E::duplicate_field(name));
    }
    *slot = value;
    Ok(())
}

struct Item;

impl<'de> Visitor<'de> for Item {
    type Value = BatchMessage;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(EXPECTING)
    }

    fn visit_str<E: Error>(self, text: &str) -> Result<BatchMessage, E> {
        Ok(BatchMessage::Text(text.to_owned()))
    }

    fn visit_string<E: Error>(self, text: String) -> Result<BatchMessage, E> {
        Ok(BatchMessage::Text(text))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<BatchMessage, A::Error> {
        let mut object = BatchMessageObject::default();
        // `Some(None)` records a `"base64": null`, refused below as the derive refused it.
        let mut base64: Option<Option<String>> = None;
        let mut others = false;
        while let Some(field) = map.next_key::<Field>()? {
            match field {
                Field::Base64 => {
                    let value = map.next_value::<Option<String>>()?;
                    once(&mut base64, Some(value), "base64")?;
                    continue;
                }
                Field::Payload => once(&mut object.payload, map.next_value()?, "payload")?,
                Field::PayloadBase64 => once(
                    &mut object.payload_base64,
                    map.next_value()?,
                    "payload_base64",
                )?,
                Field::Key => once(&mut object.key, map.next_value()?, "key")?,
                Field::Headers => once(&mut object.headers, map.next_value()?, "headers")?,
                Field::IdempotencyKey => once(
                    &mut object.idempotency_key,
                    map.next_value()?,
                    "idempotency_key",
                )?,
            }
            others = true;
        }
        match base64 {
            None => Ok(BatchMessage::Message(object)),
            Some(Some(base64)) if !others => Ok(BatchMessage::Binary(Base64Message { base64 })),
            Some(_) => Err(A::Error::custom(format!(
                "expected {EXPECTING}: base64 stands alone and is a string"
            ))),
        }
    }
}

impl<'de> Deserialize<'de> for BatchMessage {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<BatchMessage, D::Error> {
        deserializer.deserialize_any(Item)
    }
}

/// A batch publish body borrowed, for a client to encode: the same JSON as
/// [`BatchRequest`](crate::topics::BatchRequest) of the same items, without copying
/// every payload, key and header into a `String` of its own first.
///
/// ```
/// use std::collections::BTreeMap;
/// use mailroom_api::batch_item::{BatchItemRef, BatchObjectRef, BatchRequestRef};
/// let headers = BTreeMap::from([("trace".to_owned(), "t1".to_owned())]);
/// let object = BatchObjectRef { payload: Some("b"), key: Some("k"), headers: Some(&headers), ..BatchObjectRef::default() };
/// let body = BatchRequestRef { messages: vec![BatchItemRef::Text("a"), BatchItemRef::Message(object)] };
/// assert_eq!(
///     serde_json::to_string(&body).unwrap(),
///     r#"{"messages":["a",{"payload":"b","key":"k","headers":{"trace":"t1"}}]}"#
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BatchRequestRef<'a> {
    /// The items, as [`BatchRequest::messages`](crate::topics::BatchRequest::messages).
    pub messages: Vec<BatchItemRef<'a>>,
}

/// A [`BatchMessage`] borrowed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum BatchItemRef<'a> {
    /// As [`BatchMessage::Text`].
    Text(&'a str),
    /// As [`BatchMessage::Binary`] (the base64 is made for the request, so owned).
    Binary(Base64Message),
    /// As [`BatchMessage::Message`].
    Message(BatchObjectRef<'a>),
}

/// A [`BatchMessageObject`] borrowed (field for field, in the same order).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BatchObjectRef<'a> {
    /// As [`BatchMessageObject::payload`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload: Option<&'a str>,
    /// As [`BatchMessageObject::payload_base64`] (made for the request, so owned).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload_base64: Option<String>,
    /// As [`BatchMessageObject::key`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<&'a str>,
    /// As [`BatchMessageObject::headers`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headers: Option<&'a std::collections::BTreeMap<String, String>>,
    /// As [`BatchMessageObject::idempotency_key`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<&'a str>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<BatchMessage, String> {
        serde_json::from_str(json).map_err(|error| error.to_string())
    }

    // Proves every form reads as the derive read it, and what the derive refused
    // (unknown or repeated fields, base64 beside other fields, arrays, numbers) is
    // refused.
    #[test]
    fn items_read_as_the_derive_read_them() {
        assert_eq!(parse(r#""a\"b""#), Ok(BatchMessage::Text("a\"b".into())));
        assert_eq!(
            parse(r#"{"base64":"/w=="}"#),
            Ok(BatchMessage::Binary(Base64Message {
                base64: "/w==".into()
            }))
        );
        let full = r#"{"payload":"p","key":"k","headers":{"h":"v"},"idempotency_key":"i"}"#;
        let BatchMessage::Message(object) = parse(full).unwrap() else {
            panic!("not an object item")
        };
        assert_eq!(
            (object.payload.as_deref(), object.key.as_deref()),
            (Some("p"), Some("k"))
        );
        assert_eq!(object.idempotency_key.as_deref(), Some("i"));
        assert_eq!(object.headers.unwrap()["h"], "v");
        assert_eq!(
            parse(r#"{"payload":null,"payload_base64":"/w=="}"#),
            Ok(BatchMessage::Message(BatchMessageObject {
                payload_base64: Some("/w==".into()),
                ..BatchMessageObject::default()
            }))
        );
        assert_eq!(
            parse("{}"),
            Ok(BatchMessage::Message(BatchMessageObject::default()))
        );
        for bad in [
            r#"{"payload":"a","extra":1}"#,
            r#"{"payload":"a","payload":"b"}"#,
            r#"{"base64":"/w==","key":"k"}"#,
            r#"{"key":"k","base64":"/w=="}"#,
            r#"{"base64":null}"#,
            r#"{"headers":{"h":1}}"#,
            r#"["a"]"#,
            "1",
            "null",
        ] {
            assert!(parse(bad).is_err(), "{bad} was accepted");
        }
        assert!(parse(r#"{"payload":"a","extra":1}"#)
            .unwrap_err()
            .contains("unknown field `extra`"));
    }

    // Proves the borrowed encoder writes the owned items' JSON.
    #[test]
    fn borrowed_items_encode_as_owned_ones() {
        let headers = std::collections::BTreeMap::from([("h".to_owned(), "v".to_owned())]);
        let owned = crate::topics::BatchRequest {
            messages: vec![
                BatchMessage::Text("t".into()),
                BatchMessage::Binary(Base64Message {
                    base64: "AA==".into(),
                }),
                BatchMessage::Message(BatchMessageObject {
                    payload: Some("p".into()),
                    key: Some("k".into()),
                    headers: Some(headers.clone()),
                    idempotency_key: Some("i".into()),
                    ..BatchMessageObject::default()
                }),
                BatchMessage::Message(BatchMessageObject {
                    payload_base64: Some("/w==".into()),
                    ..BatchMessageObject::default()
                }),
            ],
        };
        let borrowed = BatchRequestRef {
            messages: vec![
                BatchItemRef::Text("t"),
                BatchItemRef::Binary(Base64Message {
                    base64: "AA==".into(),
                }),
                BatchItemRef::Message(BatchObjectRef {
                    payload: Some("p"),
                    key: Some("k"),
                    headers: Some(&headers),
                    idempotency_key: Some("i"),
                    ..BatchObjectRef::default()
                }),
                BatchItemRef::Message(BatchObjectRef {
                    payload_base64: Some("/w==".into()),
                    ..BatchObjectRef::default()
                }),
            ],
        };
        assert_eq!(
            serde_json::to_string(&borrowed).unwrap(),
            serde_json::to_string(&owned).unwrap()
        );
    }

    // Proves a serialized item reads back as itself.
    #[test]
    fn items_round_trip() {
        let items = [
            BatchMessage::Text("t".into()),
            BatchMessage::Binary(Base64Message {
                base64: "AA==".into(),
            }),
            BatchMessage::Message(BatchMessageObject {
                payload: Some("p".into()),
                key: Some("k".into()),
                ..BatchMessageObject::default()
            }),
        ];
        for item in items {
            let json = serde_json::to_string(&item).unwrap();
            assert_eq!(parse(&json), Ok(item));
        }
    }
}
