//! Consumer groups: create, describe (the short and the full view) and delete.
//!
//! # `max_attempts`
//!
//! A group's `max_attempts` bounds the *failures* of each message, and is defined once,
//! on [`CreateGroup::max_attempts`]; every other mention refers to it.
//!
//! # Example
//!
//! ```
//! use mailroom_api::groups::{CreateGroup, Start, StartName};
//! let body = CreateGroup {
//!     max_attempts: 3,
//!     start: Some(Start::Named(StartName::Latest)),
//!     lease_ms: None,
//!     backoff: None,
//!     max_in_flight: None,
//! };
//! let json = serde_json::to_string(&body).unwrap();
//! assert_eq!(json, r#"{"max_attempts":3,"start":"latest"}"#);
//! assert_eq!(serde_json::to_string(&Start::Offset(7)).unwrap(), "7");
//! ```

use serde::{Deserialize, Serialize};

use crate::deliveries::DeliveryId;

/// The body of `PUT /v1/topics/{topic}/groups/{group}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateGroup {
    /// Failures allowed per message, 1 to 1,000,000. A delivery that ends in a failure
    /// (a `nack`, or a lease that runs out) counts against it, and the failure that
    /// reaches it dead-letters the message. A `release` is not a failure and a redrive
    /// starts the count again, so without releases and redrives a message is delivered
    /// at most `max_attempts` times.
    #[serde(deserialize_with = "crate::whole::deserialize")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1_000_000))]
    pub max_attempts: u32,
    /// Where the group starts: `"earliest"` (the default: the oldest retained message),
    /// `"latest"` (after the last message published so far), or an offset within the
    /// retained log or at its end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<Start>,
    /// Each delivery's lease in milliseconds (1 to 7 days); an expired lease counts as a
    /// failure. Absent: owned until acked or nacked.
    #[serde(
        default,
        deserialize_with = "crate::whole::deserialize_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub lease_ms: Option<u64>,
    /// Delay before a failed message is redelivered. Absent: ready at once.
    #[serde(
        default,
        deserialize_with = "crate::object::deserialize_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub backoff: Option<Backoff>,
    /// Deliveries in flight at once, W (1 to 65,536; default 1).
    #[serde(
        default,
        deserialize_with = "crate::whole::deserialize_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 65_536))]
    pub max_in_flight: Option<u32>,
}

/// Where a new group starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(
    untagged,
    expecting = "expected \"earliest\", \"latest\" or a whole-number offset"
)]
pub enum Start {
    /// A named position.
    Named(StartName),
    /// An offset.
    Offset(#[serde(deserialize_with = "crate::whole::deserialize")] u64),
}

/// A named start position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum StartName {
    /// The oldest retained message.
    Earliest,
    /// After the last message published so far.
    Latest,
}

/// The answer to a group creation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GroupCreated {
    /// The topic.
    pub topic: String,
    /// The new group.
    pub group: String,
}

/// A group's state in short, as `GET /v1/topics/{topic}` lists it (`GET
/// .../groups/{group}` adds its settings and counters).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = GroupInfoBody))]
pub struct GroupInfo {
    /// The group's name.
    pub name: String,
    /// The offset of the next message the group has to finish.
    pub position: u64,
    /// Deliveries made so far of the message at `position` (0 if none).
    pub attempt: u32,
    /// The delivery in flight, or null.
    pub in_flight: Option<DeliveryId>,
    /// Failures allowed per message, as set at creation (the `max_attempts` of
    /// `CreateGroup`, which defines it).
    pub max_attempts: u32,
    /// Messages published but not finished by this group.
    pub lag: u64,
    /// How many messages this group dead-lettered.
    pub dead_letters: u64,
    /// Whether the group is paused (hands out nothing new; see `.../pause`).
    #[serde(default)]
    pub paused: bool,
    /// When a timed pause ends by itself, in Unix milliseconds; null when not paused or
    /// paused until a resume.
    #[serde(default)]
    pub paused_until_ms: Option<u64>,
}

/// The body of `POST /v1/topics/{topic}/groups/{group}/seek`: exactly one of `offset`,
/// `to` and `time_ms`.
///
/// ```
/// use mailroom_api::groups::{SeekGroup, StartName};
/// let body: SeekGroup = serde_json::from_str(r#"{"to": "earliest"}"#).unwrap();
/// assert_eq!(body.to, Some(StartName::Earliest));
/// let body: SeekGroup = serde_json::from_str(r#"{"offset": 7}"#).unwrap();
/// assert_eq!(body.offset, Some(7));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SeekGroup {
    /// The offset to move to: within the retained log or at its end (then the group
    /// waits for new messages). Past the end is a 400, as is below the retained start.
    #[serde(
        default,
        deserialize_with = "crate::whole::deserialize_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub offset: Option<u64>,
    /// `"earliest"` (the oldest retained message) or `"latest"` (the end of the log).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<StartName>,
    /// The first retained message published at or after this time (Unix ms); the end
    /// of the log if none is (then the group waits for new messages).
    #[serde(
        default,
        deserialize_with = "crate::whole::deserialize_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub time_ms: Option<u64>,
}

/// The answer to a seek.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GroupSeeked {
    /// The topic.
    pub topic: String,
    /// The group.
    pub group: String,
    /// Its new position: the next message it delivers.
    pub position: u64,
}

/// The body of `POST /v1/topics/{topic}/groups/{group}/pause` (optional: absent or
/// `{}` pauses until a resume).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PauseGroup {
    /// When the pause ends by itself, in Unix milliseconds: after now and at most
    /// `PAUSE_MS_MAX` (one week) ahead. Absent: until `.../resume`.
    #[serde(
        default,
        deserialize_with = "crate::whole::deserialize_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub until_ms: Option<u64>,
}

/// The answer to a pause or resume: the group's pause as it now stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GroupPause {
    /// The topic.
    pub topic: String,
    /// The group.
    pub group: String,
    /// Whether the group is paused now.
    pub paused: bool,
    /// When a timed pause ends, in Unix milliseconds, or null.
    pub paused_until_ms: Option<u64>,
    /// For a resume: whether a pause was ended (`false`: it was not paused). For a
    /// pause: always `true`.
    pub changed: bool,
}

/// The answer to `DELETE /v1/topics/{topic}/groups/{group}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GroupDeleted {
    /// The topic's name.
    pub topic: String,
    /// The group's name.
    pub group: String,
    /// Always `true`: an unknown group is a 404.
    pub deleted: bool,
}

/// A group's retry backoff: `{"kind": "fixed", "delay_ms": d}` or
/// `{"kind": "exponential", "base_ms": b, "cap_ms": c}` (waits `min(c, b·2^(k−1))` after
/// the k-th failure).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = BackoffBody))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Backoff {
    /// The same delay after every failure.
    Fixed {
        /// The delay, in milliseconds.
        #[serde(deserialize_with = "crate::whole::deserialize")]
        delay_ms: u64,
    },
    /// A doubling delay with a cap.
    Exponential {
        /// The delay after the first failure, in milliseconds.
        #[serde(deserialize_with = "crate::whole::deserialize")]
        base_ms: u64,
        /// The longest delay, in milliseconds.
        #[serde(deserialize_with = "crate::whole::deserialize")]
        cap_ms: u64,
    },
}

/// A group's event counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = CountersBody))]
pub struct GroupCounters {
    /// Deliveries that were not a message's first.
    pub redeliveries: u64,
    /// Deliveries handed back with `kind: release`.
    pub releases: u64,
    /// Deliveries whose lease ran out.
    pub expired_leases: u64,
    /// Dead letters put back by redrive.
    pub redrives: u64,
    /// Dead letters deleted by purge.
    pub purged: u64,
}

/// A dead letter without its payload: why and when it was given up on.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = DeadLetterNoteBody))]
pub struct DeadLetterNote {
    /// The message's offset.
    pub offset: u64,
    /// The attempt number of its last delivery.
    pub attempts: u32,
    /// The reason given with the final failure (`"lease expired"` for a lease), or null.
    pub reason: Option<String>,
    /// When it was dead-lettered, in Unix milliseconds.
    pub at_ms: u64,
}

/// One delivery in flight, as the group view shows it: which it is, who polled it and
/// until when they own it. Both `consumer` and `lease_deadline_ms` are always sent,
/// null where there is none.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = InFlightDeliveryBody))]
pub struct InFlightDelivery {
    /// The message's offset.
    pub offset: u64,
    /// The attempt, as the poll returned it.
    pub attempt: u32,
    /// The consumer that polled it (`?consumer=`), or null for the anonymous consumer.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub consumer: Option<String>,
    /// When its lease runs out, in Unix milliseconds, or null in a group without leases.
    /// It may lie in the past: the broker takes an expired lease back at the next call
    /// on the group.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub lease_deadline_ms: Option<u64>,
}

impl InFlightDelivery {
    /// The delivery, to ack, nack or touch it.
    ///
    /// ```
    /// use mailroom_api::groups::InFlightDelivery;
    ///
    /// let shown: InFlightDelivery = serde_json::from_str(
    ///     r#"{"offset": 4, "attempt": 2, "consumer": "worker-1", "lease_deadline_ms": 1700000000000}"#,
    /// )
    /// .unwrap();
    /// assert_eq!((shown.id().offset, shown.id().attempt), (4, 2));
    /// assert_eq!(shown.consumer.as_deref(), Some("worker-1"));
    /// ```
    pub fn id(&self) -> DeliveryId {
        DeliveryId {
            offset: self.offset,
            attempt: self.attempt,
        }
    }
}

/// A group's full state, as `GET .../groups/{group}` returns it: the short view's fields
/// plus the settings, counters, every delivery in flight and the dead letters' reasons.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = GroupDetailBody))]
pub struct GroupDetail {
    /// The group's state.
    #[serde(flatten)]
    pub info: GroupInfo,
    /// The lease of each delivery in milliseconds, or null (owned until acked or nacked).
    pub lease_ms: Option<u64>,
    /// The retry backoff, or null (a failed message is ready at once).
    pub backoff: Option<Backoff>,
    /// How many deliveries may be in flight at once (W).
    pub max_in_flight: u32,
    /// Event counters.
    pub counters: GroupCounters,
    /// Every delivery in flight with its consumer and lease deadline, lowest offset
    /// first.
    pub deliveries: Vec<InFlightDelivery>,
    /// The dead letters with their reasons and times, oldest first (no payloads; see
    /// `.../dead-letters`).
    pub dead_letter_notes: Vec<DeadLetterNote>,
}

#[cfg(feature = "core")]
mod core_conversions {
    use super::{Backoff, DeadLetterNote, GroupCounters, GroupInfo, InFlightDelivery};
    use mailroom::group;

    impl From<Backoff> for group::Backoff {
        fn from(body: Backoff) -> group::Backoff {
            match body {
                Backoff::Fixed { delay_ms } => group::Backoff::Fixed { delay_ms },
                Backoff::Exponential { base_ms, cap_ms } => {
                    group::Backoff::Exponential { base_ms, cap_ms }
                }
            }
        }
    }

    impl From<group::Backoff> for Backoff {
        fn from(backoff: group::Backoff) -> Backoff {
            match backoff {
                group::Backoff::Fixed { delay_ms } => Backoff::Fixed { delay_ms },
                group::Backoff::Exponential { base_ms, cap_ms } => {
                    Backoff::Exponential { base_ms, cap_ms }
                }
            }
        }
    }

    impl From<group::GroupCounters> for GroupCounters {
        fn from(counters: group::GroupCounters) -> GroupCounters {
            GroupCounters {
                redeliveries: counters.redeliveries,
                releases: counters.releases,
                expired_leases: counters.expired_leases,
                redrives: counters.redrives,
                purged: counters.purged,
            }
        }
    }

    impl<M> From<&mailroom::topic::DeadLetterInfo<M>> for DeadLetterNote {
        fn from(letter: &mailroom::topic::DeadLetterInfo<M>) -> DeadLetterNote {
            DeadLetterNote {
                offset: letter.offset,
                attempts: letter.attempts,
                reason: letter.reason.clone(),
                at_ms: letter.at_ms,
            }
        }
    }

    impl From<group::InFlightDelivery> for InFlightDelivery {
        fn from(delivery: group::InFlightDelivery) -> InFlightDelivery {
            InFlightDelivery {
                offset: delivery.id.offset,
                attempt: delivery.id.attempt,
                consumer: delivery.consumer,
                lease_deadline_ms: delivery.lease_until_ms,
            }
        }
    }

    impl From<mailroom::topic::GroupInfo> for GroupInfo {
        fn from(info: mailroom::topic::GroupInfo) -> GroupInfo {
            GroupInfo {
                name: info.name,
                position: info.position,
                attempt: info.attempt,
                in_flight: info.in_flight.map(Into::into),
                max_attempts: info.max_attempts,
                lag: info.lag,
                dead_letters: info.dead_letters,
                paused: info.pause.is_some(),
                paused_until_ms: info.pause.and_then(|pause| pause.until_ms),
            }
        }
    }
}
