//! The values the client hands back that are not wire bodies as they are: deliveries and
//! dead letters with their payloads decoded to bytes, and where a new group starts.
//!
//! Every other value is the wire format's own type ([`mailroom_api`]), re-exported at
//! the crate root.

use std::collections::BTreeMap;

use base64::Engine as _;
use bytes::Bytes;
use mailroom_api::dead_letters::DeadLetterBody;
use mailroom_api::deliveries::DeliveryBody;
use mailroom_api::groups::{Start, StartName};

use crate::{ClientError, DeliveryId};

/// One delivery handed out by a poll.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The message's offset in the topic.
    pub offset: u64,
    /// Which delivery of the message to this group it is, starting at 1.
    pub attempt: u32,
    /// The message's bytes.
    pub payload: Bytes,
    /// The message's key, if it has one.
    pub key: Option<String>,
    /// The message's headers by name (empty when it has none).
    pub headers: BTreeMap<String, String>,
    /// When the broker published it, Unix milliseconds (`None` where no longer known).
    pub published_at_ms: Option<u64>,
}

impl Delivery {
    /// The id to name when acking or nacking this delivery.
    pub fn id(&self) -> DeliveryId {
        DeliveryId {
            offset: self.offset,
            attempt: self.attempt,
        }
    }
}

impl TryFrom<DeliveryBody> for Delivery {
    type Error = ClientError;

    fn try_from(body: DeliveryBody) -> Result<Delivery, ClientError> {
        Ok(Delivery {
            offset: body.offset,
            attempt: body.attempt,
            payload: payload_bytes(body.payload, body.payload_base64)?,
            key: body.key,
            headers: body.headers.unwrap_or_default(),
            published_at_ms: body.published_at_ms,
        })
    }
}

/// A message a group gave up on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// The message's offset in the topic.
    pub offset: u64,
    /// How many deliveries were made before it was dead-lettered.
    pub attempts: u32,
    /// The reason given with the final failure (`"lease expired"` for a lease), if any.
    pub reason: Option<String>,
    /// When it was dead-lettered, in Unix milliseconds.
    pub at_ms: u64,
    /// The message's bytes.
    pub payload: Bytes,
    /// The message's key, if it has one (and retention has not removed the message).
    pub key: Option<String>,
    /// The message's headers by name (empty when it has none or retention removed the
    /// message).
    pub headers: BTreeMap<String, String>,
    /// When the broker published it, Unix milliseconds (`None` where no longer known).
    pub published_at_ms: Option<u64>,
}

impl TryFrom<DeadLetterBody> for DeadLetter {
    type Error = ClientError;

    fn try_from(body: DeadLetterBody) -> Result<DeadLetter, ClientError> {
        Ok(DeadLetter {
            offset: body.offset,
            attempts: body.attempts,
            reason: body.reason,
            at_ms: body.at_ms,
            payload: payload_bytes(body.payload, body.payload_base64)?,
            key: body.key,
            headers: body.headers.unwrap_or_default(),
            published_at_ms: body.published_at_ms,
        })
    }
}

/// Where a new group starts reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum StartPosition {
    /// At the oldest retained message.
    #[default]
    Earliest,
    /// After the last message published so far.
    Latest,
    /// At this offset.
    Offset(u64),
}

impl From<StartPosition> for Start {
    fn from(start: StartPosition) -> Start {
        match start {
            StartPosition::Earliest => Start::Named(StartName::Earliest),
            StartPosition::Latest => Start::Named(StartName::Latest),
            StartPosition::Offset(offset) => Start::Offset(offset),
        }
    }
}

/// A payload as the server writes it: text when it is UTF-8, base64 otherwise; exactly
/// one of the two.
pub(crate) fn payload_bytes(
    text: Option<String>,
    base64: Option<String>,
) -> Result<Bytes, ClientError> {
    match (text, base64) {
        (Some(text), None) => Ok(Bytes::from(text)),
        (None, Some(encoded)) => base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map(Bytes::from)
            .map_err(|error| ClientError::UnexpectedResponse(format!("bad base64: {error}"))),
        _ => Err(ClientError::UnexpectedResponse(
            "expected exactly one of payload and payload_base64".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(json: &str) -> Result<Delivery, ClientError> {
        let body: DeliveryBody = serde_json::from_str(json).expect("a delivery body");
        Delivery::try_from(body)
    }

    // Proves both payload encodings decode to the original bytes and that a body with
    // both or neither is refused rather than guessed at.
    #[test]
    fn wire_payload_decodes_text_and_base64_and_refuses_ambiguity() {
        let text = decode(r#"{"offset":0,"attempt":1,"payload":"hi"}"#).unwrap();
        assert_eq!(text.payload, Bytes::from_static(b"hi"));
        let binary = decode(r#"{"offset":0,"attempt":1,"payload_base64":"/wA="}"#).unwrap();
        assert_eq!(binary.payload, Bytes::from_static(&[0xff, 0]));
        let both = r#"{"offset":0,"attempt":1,"payload":"a","payload_base64":"YQ=="}"#;
        assert!(decode(both).is_err());
        assert!(decode(r#"{"offset":0,"attempt":1}"#).is_err());
    }

    // Proves a delivery's key, headers and publish time are read, and absent ones are
    // none and empty.
    #[test]
    fn wire_metadata_decodes() {
        let json = r#"{"offset":0,"attempt":1,"payload":"hi","key":"k",
                       "headers":{"a":"1"},"published_at_ms":5}"#;
        let delivery = decode(json).unwrap();
        assert_eq!(delivery.key.as_deref(), Some("k"));
        assert_eq!(delivery.headers.get("a").map(String::as_str), Some("1"));
        assert_eq!(delivery.published_at_ms, Some(5));
        let bare = decode(r#"{"offset":0,"attempt":1,"payload":"hi"}"#).unwrap();
        assert_eq!(
            (bare.key, bare.headers.len(), bare.published_at_ms),
            (None, 0, None)
        );
    }

    // Proves each start position goes on the wire as the server reads it.
    #[test]
    fn start_positions_encode_as_documented() {
        for (start, json) in [
            (StartPosition::Earliest, r#""earliest""#),
            (StartPosition::Latest, r#""latest""#),
            (StartPosition::Offset(7), "7"),
        ] {
            assert_eq!(serde_json::to_string(&Start::from(start)).unwrap(), json);
        }
    }
}
