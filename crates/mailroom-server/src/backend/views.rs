//! What the backend's reads answer: a topic in a listing, a topic's or a group's whole
//! state, the metrics' figures, the backend's health and disk usage.

use bytes::Bytes;
use mailroom::group::{DeliveryId, GroupConfig, GroupCounters, InFlightDelivery, NackOptions};
use mailroom::topic::{DeadLetterInfo, GroupInfo};
use mailroom_api::topic_health::FailedTopic;
use mailroom_store::IdempotencyWindow;

use super::RetentionState;

/// One topic in a listing: its offsets and its groups' names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicOffsets {
    /// The topic's name.
    pub name: String,
    /// The oldest retained offset.
    pub start: u64,
    /// The offset the next message will get.
    pub end: u64,
    /// Its groups' names.
    pub groups: Vec<String>,
    /// Its retention, size on disk and what retention removed.
    pub retention: RetentionState,
    /// Why it is failed, or `None` while it serves.
    pub failure: Option<TopicFailureState>,
}

/// One topic with the state of every group on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicState {
    /// The topic's name.
    pub name: String,
    /// The oldest retained offset.
    pub start: u64,
    /// The offset the next message will get.
    pub end: u64,
    /// Every group's state (a group deleted while this was read is left out).
    pub groups: Vec<GroupInfo>,
    /// Its retention, size on disk and what retention removed.
    pub retention: RetentionState,
    /// Why it is failed, or `None` while it serves.
    pub failure: Option<TopicFailureState>,
    /// Its idempotency window in force when it has one of its own; `None` when the
    /// server's defaults hold (always, on a backend that keeps no window of a topic's
    /// own).
    pub idempotency: Option<IdempotencyWindow>,
}

/// Everything known of one group: its state, settings, counters, deliveries in flight
/// and dead letters (their reasons and times).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDetail {
    /// The group's state.
    pub info: GroupInfo,
    /// Its settings.
    pub config: GroupConfig,
    /// Its event counters.
    pub counters: GroupCounters,
    /// Every delivery in flight with its consumer and lease deadline, lowest offset
    /// first.
    pub in_flight: Vec<InFlightDelivery>,
    /// Its dead letters, oldest first.
    pub dead_letters: Vec<DeadLetterInfo<Bytes>>,
}

/// The figures of one group that the metrics export as gauges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupGauges {
    /// The topic.
    pub topic: String,
    /// The group.
    pub group: String,
    /// Messages published but not finished by the group.
    pub lag: u64,
    /// Its event counters.
    pub counters: GroupCounters,
}

/// Why a topic is failed (see `mailroom_api::topic_health`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicFailureState {
    /// `damaged`, `unreadable` or `stopped`.
    pub kind: &'static str,
    /// Where and why.
    pub reason: String,
}

/// Whether the backend can take writes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BackendHealth {
    /// Why the whole backend cannot take writes, or `None`. Failed topics alone do not
    /// make it fail: they are in `failed_topics` and the others serve.
    pub failure: Option<String>,
    /// The failed topics, by name.
    pub failed_topics: Vec<FailedTopic>,
}

/// Bytes on disk, for the metrics.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DiskUsage {
    /// Every file under the data directory.
    pub total_bytes: u64,
    /// The files under each topic's directory, by topic name.
    pub topics: Vec<(String, u64)>,
}

/// A round of settlements that ends in a poll
/// ([`Backend::settle_then_poll_batch`](super::Backend::settle_then_poll_batch)): runs of
/// nacks, each of its deliveries with its options, then acks.
///
/// ```
/// use mailroom::group::{DeliveryId, NackOptions};
/// use mailroom_server::backend::Settlements;
///
/// let failed = [DeliveryId { offset: 3, attempt: 1 }];
/// let done = [DeliveryId { offset: 4, attempt: 1 }];
/// let nacks = [(&failed[..], NackOptions::default())];
/// let round = Settlements { nacks: &nacks, acks: &done };
/// assert_eq!(round.nacks.len() + round.acks.len(), 2);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Settlements<'a> {
    /// Runs of nacks, in order: each run's deliveries and the options they share.
    pub nacks: &'a [(&'a [DeliveryId], NackOptions)],
    /// The deliveries to ack after the nacks.
    pub acks: &'a [DeliveryId],
}
