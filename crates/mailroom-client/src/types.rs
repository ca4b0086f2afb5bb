//! The values the client hands back, decoded from the server's JSON.

use base64::Engine as _;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::ClientError;

/// Names one delivery, to ack or nack it: the message's offset and which attempt it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DeliveryId {
    /// The message's offset in the topic.
    pub offset: u64,
    /// Which delivery of the message to this group it is, starting at 1.
    pub attempt: u32,
}

/// One delivery handed out by a poll.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The message's offset in the topic.
    pub offset: u64,
    /// Which delivery of the message to this group it is, starting at 1.
    pub attempt: u32,
    /// The message's bytes.
    pub payload: Bytes,
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

/// A message a group gave up on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// The message's offset in the topic.
    pub offset: u64,
    /// How many deliveries were made before it was dead-lettered.
    pub attempts: u32,
    /// The message's bytes.
    pub payload: Bytes,
}

/// What a nack did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NackOutcome {
    /// Attempts remain: the next poll delivers the same message again.
    Retry,
    /// A release: handed back without counting as a failure; it will be delivered again.
    Released,
    /// That was the final attempt (or a reject): the message is in the group's
    /// dead-letter queue.
    DeadLettered,
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

/// A snapshot of one consumer group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupInfo {
    /// The group's name.
    pub name: String,
    /// The offset of the next message the group has to finish.
    pub position: u64,
    /// Deliveries made so far of the message at `position`.
    pub attempt: u32,
    /// The delivery in flight, if any.
    pub in_flight: Option<DeliveryId>,
    /// The total number of deliveries allowed for one message.
    pub max_attempts: u32,
    /// Messages published but not yet finished by this group.
    pub lag: u64,
    /// How many messages this group has dead-lettered.
    pub dead_letters: u64,
}

/// One topic in the list of topics.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicSummary {
    /// The topic's name.
    pub name: String,
    /// The offset of the oldest retained message.
    pub start: u64,
    /// The offset the next message will get.
    pub end: u64,
    /// The names of its consumer groups.
    pub groups: Vec<String>,
}

/// A topic with the state of each of its groups.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicInfo {
    /// The topic's name.
    pub name: String,
    /// The offset of the oldest retained message.
    pub start: u64,
    /// The offset the next message will get.
    pub end: u64,
    /// Every group of the topic.
    pub groups: Vec<GroupInfo>,
}

/// What a channel publish did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelDelivery {
    /// Subscribers whose mailbox took the message.
    pub delivered: u64,
    /// Subscribers whose mailbox was full, so the message was dropped for them.
    pub dropped: u64,
}

/// A live channel's settings and counters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelInfo {
    /// The channel's name.
    pub name: String,
    /// The most subscribers it admits at once.
    pub max_subscribers: u64,
    /// The most messages each subscriber's mailbox holds.
    pub mailbox_capacity: u64,
    /// Subscribers connected now.
    pub subscribers: u64,
    /// Messages published to it.
    pub published: u64,
    /// Deliveries into subscribers' mailboxes.
    pub delivered: u64,
    /// Deliveries dropped because a mailbox was full.
    pub dropped: u64,
}

/// A payload as the server writes it: text when it is UTF-8, base64 otherwise.
#[derive(Debug, Deserialize)]
pub(crate) struct WirePayload {
    #[serde(default)]
    payload: Option<String>,
    #[serde(default)]
    payload_base64: Option<String>,
}

impl WirePayload {
    pub(crate) fn into_bytes(self) -> Result<Bytes, ClientError> {
        match (self.payload, self.payload_base64) {
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
}

/// A poll answer on the wire.
#[derive(Debug, Deserialize)]
pub(crate) struct WireDelivery {
    pub(crate) offset: u64,
    pub(crate) attempt: u32,
    #[serde(flatten)]
    pub(crate) payload: WirePayload,
}

/// A dead letter on the wire.
#[derive(Debug, Deserialize)]
pub(crate) struct WireDeadLetter {
    pub(crate) offset: u64,
    pub(crate) attempts: u32,
    #[serde(flatten)]
    pub(crate) payload: WirePayload,
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves both payload encodings decode to the original bytes and that a body with
    // both or neither is refused rather than guessed at.
    #[test]
    fn wire_payload_decodes_text_and_base64_and_refuses_ambiguity() {
        let text: WirePayload = serde_json::from_str(r#"{"payload":"hi"}"#).unwrap();
        assert_eq!(text.into_bytes().unwrap(), Bytes::from_static(b"hi"));
        let binary: WirePayload = serde_json::from_str(r#"{"payload_base64":"/wA="}"#).unwrap();
        assert_eq!(binary.into_bytes().unwrap(), Bytes::from_static(&[0xff, 0]));
        let both: WirePayload =
            serde_json::from_str(r#"{"payload":"a","payload_base64":"YQ=="}"#).unwrap();
        assert!(both.into_bytes().is_err());
        let neither: WirePayload = serde_json::from_str("{}").unwrap();
        assert!(neither.into_bytes().is_err());
    }
}
