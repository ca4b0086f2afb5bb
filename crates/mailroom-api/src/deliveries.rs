//! A group's deliveries one at a time: poll, ack, nack (release, reject) and touch.

use serde::{Deserialize, Serialize};

/// Names one delivery, to ack, nack or touch it: the message's offset and which attempt
/// it is. A delivery is fenced by both, so an old attempt cannot settle a newer one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = DeliveryRef))]
#[serde(deny_unknown_fields)]
pub struct DeliveryId {
    /// The message's offset.
    #[serde(deserialize_with = "crate::whole::deserialize")]
    #[cfg_attr(feature = "openapi", schema(minimum = 0))]
    pub offset: u64,
    /// The attempt, as the poll returned it.
    #[serde(deserialize_with = "crate::whole::deserialize")]
    #[cfg_attr(feature = "openapi", schema(minimum = 0))]
    pub attempt: u32,
}

crate::message_body::message_body! {
    /// A delivery as JSON. Exactly one of `payload` (valid UTF-8) and `payload_base64`.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
    pub struct DeliveryBody {
        /// The message's offset.
        pub offset: u64,
        /// Which delivery of the message to this group it is, from 1.
        pub attempt: u32,
    }
    key: " The message's key, if it has one.",
    then {
        /// When the broker published the message, by its clock, in Unix milliseconds; left
        /// out where that is no longer known (a redriven dead letter whose message retention removed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub published_at_ms: Option<u64>,
    }
}

impl DeliveryBody {
    /// The delivery this body is.
    pub fn id(&self) -> DeliveryId {
        DeliveryId {
            offset: self.offset,
            attempt: self.attempt,
        }
    }
}

/// The answer to an ack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Acked {
    /// Always `acked`.
    pub outcome: String,
}

/// What a nack did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum NackOutcome {
    /// Failures remain below `max_attempts`; the next poll delivers the message again
    /// with attempt + 1.
    Retry,
    /// A `release`: handed back without counting as a failure; delivered again later.
    Released,
    /// That was the final failure (or a `reject`); the message is in the group's
    /// dead-letter queue.
    DeadLettered,
}

/// The answer to a nack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Nacked {
    /// What the nack did.
    pub outcome: NackOutcome,
}

/// How a nack ends a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = NackKindBody))]
#[serde(rename_all = "snake_case")]
pub enum NackKind {
    /// A failure (the default): retried, or dead-lettered once failures reach
    /// `max_attempts` (the `max_attempts` of `CreateGroup`, which defines it).
    #[default]
    Nack,
    /// Handed back without counting as a failure; never dead-letters.
    Release,
    /// Dead-lettered at once.
    Reject,
}

/// The body of `POST .../nack`. `{"offset", "attempt"}` alone is a plain nack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NackRequest {
    /// The message's offset.
    #[serde(deserialize_with = "crate::whole::deserialize")]
    #[cfg_attr(feature = "openapi", schema(minimum = 0))]
    pub offset: u64,
    /// The attempt, as the poll returned it.
    #[serde(deserialize_with = "crate::whole::deserialize")]
    #[cfg_attr(feature = "openapi", schema(minimum = 0))]
    pub attempt: u32,
    /// `nack` (default), `release` or `reject`.
    #[serde(default)]
    pub kind: NackKind,
    /// Not redelivered before this many milliseconds (overrides the group's backoff);
    /// at most 7 days. While it waits, the group delivers nothing above it.
    #[serde(
        default,
        deserialize_with = "crate::whole::deserialize_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub delay_ms: Option<u64>,
    /// Why (at most 1024 bytes); kept with the dead letter if this dead-letters it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The optional body (or query) of a poll: who is polling.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "openapi",
    derive(utoipa::ToSchema, utoipa::IntoParams),
    into_params(parameter_in = Query)
)]
#[serde(deny_unknown_fields)]
pub struct PollRequest {
    /// The consumer's identity (1 to 128 bytes). A consumer owns at most one delivery,
    /// and its repeated poll returns that delivery; absent is the anonymous consumer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 1, max_length = 128),
        param(min_length = 1, max_length = 128)
    )]
    pub consumer: Option<String>,
}

/// The answer to a touch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Touched {
    /// Always `touched`.
    pub outcome: String,
}

#[cfg(feature = "core")]
mod core_conversions {
    use super::{DeliveryId, NackKind, NackRequest};
    use mailroom::group;

    impl From<DeliveryId> for group::DeliveryId {
        fn from(id: DeliveryId) -> group::DeliveryId {
            group::DeliveryId {
                offset: id.offset,
                attempt: id.attempt,
            }
        }
    }

    impl From<group::DeliveryId> for DeliveryId {
        fn from(id: group::DeliveryId) -> DeliveryId {
            DeliveryId {
                offset: id.offset,
                attempt: id.attempt,
            }
        }
    }

    impl DeliveryId {
        /// The delivery this names, as the state machine fences it.
        pub fn id(self) -> group::DeliveryId {
            self.into()
        }
    }

    impl From<NackKind> for group::NackKind {
        fn from(kind: NackKind) -> group::NackKind {
            match kind {
                NackKind::Nack => group::NackKind::Nack,
                NackKind::Release => group::NackKind::Release,
                NackKind::Reject => group::NackKind::Reject,
            }
        }
    }

    impl NackRequest {
        /// The delivery named and the state machine's options.
        pub fn split(self) -> (group::DeliveryId, group::NackOptions) {
            let id = DeliveryId {
                offset: self.offset,
                attempt: self.attempt,
            };
            let options = group::NackOptions {
                kind: self.kind.into(),
                delay_ms: self.delay_ms,
                reason: self.reason,
            };
            (id.into(), options)
        }
    }
}
