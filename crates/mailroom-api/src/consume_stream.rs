//! The consume stream (`GET /v1/topics/{topic}/groups/{group}/consume/ws`): the server
//! pushes deliveries as [`ServerFrame::Delivery`] text frames, never more than the window
//! unsettled; the client settles them with [`Settlement`] text frames on the same
//! socket, each answered in order by a [`ServerFrame::Settled`] or [`ServerFrame::Error`].
//!
//! ```
//! use mailroom_api::consume_stream::{ServerFrame, Settlement};
//! let ack: Settlement = serde_json::from_str(r#"{"op":"ack","offset":3,"attempt":1}"#).unwrap();
//! assert_eq!(ack, Settlement::Ack { offset: 3, attempt: 1 });
//! let opened = ServerFrame::Opened { consumer: "c1".into(), window: 16 };
//! assert_eq!(
//!     serde_json::to_string(&opened).unwrap(),
//!     r#"{"type":"opened","consumer":"c1","window":16}"#
//! );
//! ```

use serde::{Deserialize, Serialize};

use crate::deliveries::{DeliveryBody, NackKind};
use crate::publish_stream::StreamError;

/// The query string of the upgrade request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "openapi",
    derive(utoipa::IntoParams),
    into_params(parameter_in = Query)
)]
#[serde(deny_unknown_fields)]
pub struct ConsumeStreamQuery {
    /// The most deliveries held unsettled at once: 1 ..= `CONSUME_STREAM_WINDOW_MAX`
    /// (4096) and at most the group's `max_in_flight` (400 otherwise). Default 1.
    #[serde(default)]
    pub window: Option<u32>,
    /// The consumer identity the deliveries are owned by. A stream reopened with the
    /// same identity gets the deliveries it still has in flight first. Left out: the
    /// server makes one up for this connection and names it in the `opened` frame.
    #[serde(default)]
    pub consumer: Option<String>,
}

/// A client's frame: settles one delivery, fenced by its exact `(offset, attempt)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Settlement {
    /// Acks the delivery.
    Ack {
        /// The message's offset.
        #[serde(deserialize_with = "crate::whole::deserialize")]
        offset: u64,
        /// The attempt, as the delivery frame gave it.
        #[serde(deserialize_with = "crate::whole::deserialize")]
        attempt: u32,
    },
    /// Nacks, releases or rejects the delivery, as `POST .../nack` does.
    Nack {
        /// The message's offset.
        #[serde(deserialize_with = "crate::whole::deserialize")]
        offset: u64,
        /// The attempt, as the delivery frame gave it.
        #[serde(deserialize_with = "crate::whole::deserialize")]
        attempt: u32,
        /// `nack` (default), `release` or `reject`.
        #[serde(default)]
        kind: NackKind,
        /// Not redelivered before this many milliseconds (at most 7 days).
        #[serde(
            default,
            deserialize_with = "crate::whole::deserialize_option",
            skip_serializing_if = "Option::is_none"
        )]
        delay_ms: Option<u64>,
        /// Why (at most 1024 bytes); kept with the dead letter if this dead-letters it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Extends the delivery's lease.
    Touch {
        /// The message's offset.
        #[serde(deserialize_with = "crate::whole::deserialize")]
        offset: u64,
        /// The attempt, as the delivery frame gave it.
        #[serde(deserialize_with = "crate::whole::deserialize")]
        attempt: u32,
    },
}

impl Settlement {
    /// The `(offset, attempt)` this settles.
    pub fn id(&self) -> crate::deliveries::DeliveryId {
        let (Settlement::Ack { offset, attempt }
        | Settlement::Nack {
            offset, attempt, ..
        }
        | Settlement::Touch { offset, attempt }) = self;
        crate::deliveries::DeliveryId {
            offset: *offset,
            attempt: *attempt,
        }
    }
}

/// What a settlement did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum SettledOutcome {
    /// Acked.
    Acked,
    /// Nacked: it will be delivered again.
    Retry,
    /// Released: handed back without counting as a failure.
    Released,
    /// Dead-lettered (a reject, or a nack at `max_attempts`).
    DeadLettered,
    /// Its lease was extended.
    Touched,
}

/// A server's frame.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerFrame {
    /// The first frame: who the deliveries are owned by, and the window in force.
    Opened {
        /// The consumer identity (the query's, or one made up for this connection).
        consumer: String,
        /// The window.
        window: u32,
    },
    /// One delivery, encoded as a batch poll's item is.
    Delivery(DeliveryBody),
    /// The answer to client frame `seq` (frames are numbered from 0): it took effect.
    Settled {
        /// The client frame answered.
        seq: u64,
        /// The message's offset.
        offset: u64,
        /// The attempt.
        attempt: u32,
        /// What it did.
        outcome: SettledOutcome,
    },
    /// The answer to client frame `seq`: it was refused (`not_owned` for a delivery not
    /// in flight under that attempt, `invalid_argument` for a frame that does not parse
    /// or breaks a limit). Nothing changed; the stream goes on.
    Error {
        /// The client frame answered.
        seq: u64,
        /// The delivery it named, when it parsed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        offset: Option<u64>,
        /// The attempt it named, when it parsed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        attempt: Option<u32>,
        /// Why.
        error: StreamError,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves every settlement kind parses from its documented shape, and unknown
    // fields or ops are refused.
    #[test]
    fn settlements_parse_as_documented() {
        let nack: Settlement = serde_json::from_str(
            r#"{"op":"nack","offset":2,"attempt":3,"kind":"reject","delay_ms":5,"reason":"bad"}"#,
        )
        .unwrap();
        assert_eq!(
            nack,
            Settlement::Nack {
                offset: 2,
                attempt: 3,
                kind: NackKind::Reject,
                delay_ms: Some(5),
                reason: Some("bad".into()),
            }
        );
        let touch: Settlement =
            serde_json::from_str(r#"{"op":"touch","offset":1,"attempt":1}"#).unwrap();
        assert_eq!(touch.id().offset, 1);
        for bad in [
            r#"{"op":"ack","offset":1,"attempt":1,"extra":1}"#,
            r#"{"op":"settle","offset":1,"attempt":1}"#,
            r#"{"op":"ack","offset":-1,"attempt":1}"#,
        ] {
            assert!(serde_json::from_str::<Settlement>(bad).is_err(), "{bad}");
        }
    }

    // Proves a delivery frame is a batch poll item with a `type` tag, both ways.
    #[test]
    fn delivery_frames_round_trip() {
        let body = DeliveryBody {
            offset: 4,
            attempt: 1,
            payload: Some("hi".into()),
            payload_base64: None,
            key: Some("k".into()),
            headers: None,
            published_at_ms: Some(9),
        };
        let frame = ServerFrame::Delivery(body);
        let text = serde_json::to_string(&frame).unwrap();
        assert_eq!(
            text,
            r#"{"type":"delivery","offset":4,"attempt":1,"payload":"hi","key":"k","published_at_ms":9}"#
        );
        assert_eq!(serde_json::from_str::<ServerFrame>(&text).unwrap(), frame);
    }
}
