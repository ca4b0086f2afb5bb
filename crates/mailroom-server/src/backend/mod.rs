//! The one seam between the routes and where topics and groups are kept: the
//! [`Backend`] trait.
//!
//! Handlers see `Arc<dyn Backend>` and nothing else of the storage: they check and
//! decode a request, make one backend call, and encode its answer. The backend owns
//! everything between: where a call runs (inline, on the blocking pool, awaited on a
//! sync thread), how long it waits for durability, and which long polls it wakes. So a
//! second backend (a networked one such as PostgreSQL) is added by implementing this
//! trait, without touching a route.
//!
//! # Durability
//!
//! Every method that changes state answers only once the change is durable under the
//! backend's policy (for the embedded store: the `--fsync` setting). A caller that drops
//! the future mid-await leaves the change made but unconfirmed, as when a response is
//! lost on the way ([`embedded`] spells out what that means for the store).
//!
//! # Wake-ups
//!
//! Long polls wait on [`Backend::long_polls`], the registry of waiters by topic and
//! group. The backend wakes it after each of its calls that may change a poll's answer
//! (a publish, an ack, a nack, a redrive, a delete) and tells it of the leases its polls
//! make ([`LongPolls::leased`]); a backend shared by several brokers also wakes it when
//! another broker wrote. The clock's events (a lease running out, a backoff ending) are
//! read through [`Backend::next_due_in`]. `crate::long_poll` says how waiters use both.
//!
//! # Errors
//!
//! Every method fails with [`BackendError`], which the server maps to its API errors
//! (`From<BackendError> for ApiError`): the store's errors as the store's, so a
//! networked backend reports an unknown topic, a refused delivery and so on with the
//! store's variants.
//!
//! # The trait is object-safe
//!
//! Its async methods are written with `async-trait`, which turns each into a method
//! returning a boxed `Send` future: `Arc<dyn Backend>` needs that (native `async fn` in
//! traits is not object-safe), and the box costs one allocation per call, next to the
//! request's own dozens. Writing those signatures out by hand would give the same code.

use std::fmt;
use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::http::StatusCode;
use bytes::Bytes;
use mailroom::group::{
    DeliveryId, GroupConfig, GroupCounters, InFlightDelivery, NackOptions, NotOwned,
};
use mailroom::topic::{
    DeadLetterInfo, Delivery, GroupInfo, Message, Metadata, Nack, StartPosition,
};
use mailroom_api::topic_health::FailedTopic;
use mailroom_api::ErrorCode;
use mailroom_store::{
    AckedThenPolled, DeadLetterPage, IdempotencyWindow, NewMessage, StoreError, Stored,
    TopicIdempotency, TopicRepaired, TopicRetention,
};

use crate::error::ApiError;
use crate::long_poll::LongPolls;

pub mod embedded;
mod log_reads;
pub mod postgres;
mod retention;

pub use embedded::Embedded;
pub use log_reads::LogPage;
pub use postgres::Postgres;
pub use retention::{RetentionChange, RetentionPass, RetentionState};

/// A change on its way to durability: resolves with the call's answer once what it
/// wrote is durable (see [`TopicPublisher`]).
pub type Durable<T> = Pin<Box<dyn Future<Output = Result<T, BackendError>> + Send>>;

/// Why a backend call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// The store refused the call or failed: an unknown topic or group, a delivery not
    /// in flight, an argument out of range, an I/O error, a fail-stop. Answered as the
    /// store's error ([`ApiError`]'s `From<StoreError>`).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The backend itself failed, such as a task of it that panicked: 500 `internal`
    /// with this message.
    #[error("{0}")]
    Internal(String),
    /// The backend cannot reach its store now (a networked backend lost its database
    /// connection): 503 `store_unavailable`. Nothing was confirmed; the backend
    /// reconnects by itself.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// This backend does not support the call yet: 501 `not_supported`, naming it.
    #[error("{0} is not supported by this backend yet")]
    NotSupported(&'static str),
}

impl From<BackendError> for ApiError {
    fn from(error: BackendError) -> ApiError {
        match error {
            BackendError::Store(error) => ApiError::from(error),
            BackendError::Internal(message) => ApiError::internal(message),
            BackendError::Unavailable(_) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::StoreUnavailable,
                error.to_string(),
            ),
            BackendError::NotSupported(_) => ApiError::new(
                StatusCode::NOT_IMPLEMENTED,
                ErrorCode::NotSupported,
                error.to_string(),
            ),
        }
    }
}

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

/// A topic's publishing end, held by a publish stream for as long as it runs: the
/// stream keeps publishing to the topic it opened, and learns that it was deleted from
/// the next publish's error.
pub trait TopicPublisher: fmt::Debug + Send + Sync {
    /// Publishes `payloads` as one write and returns the wait for its durability, which
    /// resolves with the offsets given. The call part runs here, so batches get their
    /// offsets in the order of these calls while their waits overlap; waking long polls
    /// happens in the wait, once the batch is durable.
    ///
    /// # Errors
    /// At once, when the batch cannot be written (unknown topic, a fail-stop, a batch
    /// over the store's limits); from the wait, when it is not made durable.
    fn publish_batch(&self, payloads: &[Bytes]) -> Result<Durable<Range<u64>>, BackendError>;

    /// As [`publish_batch`](Self::publish_batch), for messages with metadata (already
    /// checked). The default takes messages without metadata only.
    ///
    /// # Errors
    /// As [`publish_batch`](Self::publish_batch).
    fn publish_messages(
        &self,
        messages: &[NewMessage],
    ) -> Result<Durable<Range<u64>>, BackendError> {
        if messages.iter().any(|message| !message.metadata.is_empty()) {
            return Err(BackendError::NotSupported(
                "publishing a key, headers or an idempotency key",
            ));
        }
        let payloads: Vec<Bytes> = messages.iter().map(|m| m.payload.clone()).collect();
        self.publish_batch(&payloads)
    }

    /// As [`publish_messages`](Self::publish_messages), one answer per message, as
    /// [`Backend::publish_once`]. The default keeps no idempotency keys and refuses them.
    ///
    /// # Errors
    /// As [`publish_batch`](Self::publish_batch).
    fn publish_once(&self, messages: &[NewMessage]) -> Result<Durable<Vec<Stored>>, BackendError> {
        if messages
            .iter()
            .any(|m| m.metadata.idempotency_key.is_some())
        {
            return Err(BackendError::NotSupported(
                "publishing with an idempotency key",
            ));
        }
        let written = self.publish_messages(messages)?;
        Ok(Box::pin(async move {
            let offsets = written.await?;
            Ok(offsets
                .map(|offset| Stored {
                    offset,
                    duplicate: false,
                })
                .collect())
        }))
    }
}

/// Where the server keeps its topics and groups. See the [module docs](self).
#[async_trait]
pub trait Backend: fmt::Debug + Send + Sync + 'static {
    /// The registry of long-poll waiters that this backend wakes.
    fn long_polls(&self) -> &Arc<LongPolls>;

    /// Creates `topic`; `false` if it existed already.
    async fn create_topic(&self, topic: &str) -> Result<bool, BackendError>;

    /// Creates `topic` with its own `retention`; `false` (and nothing changed) if it
    /// existed already. The default refuses settings other than the defaults: a backend
    /// that keeps retention overrides it.
    async fn create_topic_with(
        &self,
        topic: &str,
        retention: &TopicRetention,
    ) -> Result<bool, BackendError> {
        if *retention != TopicRetention::default() {
            return Err(BackendError::Internal(
                "this backend keeps no retention settings".into(),
            ));
        }
        self.create_topic(topic).await
    }

    /// Creates `topic` with its own `retention` and idempotency window; as
    /// [`create_topic_with`](Self::create_topic_with) otherwise. The default refuses a
    /// window other than the defaults with 501 `not_supported`: a backend that keeps
    /// one overrides it.
    async fn create_topic_with_window(
        &self,
        topic: &str,
        retention: &TopicRetention,
        idempotency: &TopicIdempotency,
    ) -> Result<bool, BackendError> {
        if *idempotency != TopicIdempotency::default() {
            return Err(BackendError::NotSupported(
                "a topic's own idempotency window",
            ));
        }
        self.create_topic_with(topic, retention).await
    }

    /// Changes some of `topic`'s own retention limits, durably; answers the topic's
    /// state afterwards. The default refuses.
    async fn change_retention(
        &self,
        topic: &str,
        change: RetentionChange,
    ) -> Result<TopicState, BackendError> {
        let _ = (topic, change);
        Err(BackendError::Internal(
            "this backend keeps no retention settings".into(),
        ))
    }

    /// Runs retention over every topic once, each by the limits in force for it; a
    /// topic that fails does not stop the others. The default removes nothing.
    async fn enforce_retention(&self) -> Result<RetentionPass, BackendError> {
        Ok(RetentionPass::default())
    }

    /// Every topic with its offsets and groups, sorted by name.
    async fn list_topics(&self) -> Result<Vec<TopicOffsets>, BackendError>;

    /// One topic with every group's state.
    async fn topic_state(&self, topic: &str) -> Result<TopicState, BackendError>;

    /// Deletes `topic` with its messages and groups, durably, and ends its long polls;
    /// answers the names of the groups it had.
    async fn delete_topic(&self, topic: &str) -> Result<Vec<String>, BackendError>;

    /// Publishes one message; answers its offset.
    async fn publish(&self, topic: &str, payload: Bytes) -> Result<u64, BackendError>;

    /// Publishes messages in one write, with consecutive offsets; answers them.
    async fn publish_batch(
        &self,
        topic: &str,
        payloads: &[Bytes],
    ) -> Result<Range<u64>, BackendError>;

    /// Publishes messages with their metadata (already checked) in one write, with
    /// consecutive offsets; answers them. The default takes messages without metadata
    /// only: a backend that keeps metadata overrides it.
    async fn publish_messages(
        &self,
        topic: &str,
        messages: &[NewMessage],
    ) -> Result<Range<u64>, BackendError> {
        if messages.iter().any(|message| !message.metadata.is_empty()) {
            return Err(BackendError::NotSupported(
                "publishing a key, headers or an idempotency key",
            ));
        }
        let payloads: Vec<Bytes> = messages.iter().map(|m| m.payload.clone()).collect();
        self.publish_batch(topic, &payloads).await
    }

    /// Publishes messages with their metadata (already checked) in one write, one answer
    /// per message: a message whose idempotency key is in the topic's window (or earlier
    /// in `messages`) is not stored and answers the first publish's offset as a
    /// duplicate. The check and the write are one step: of concurrent publishes of a
    /// key exactly one stores. The default keeps no idempotency keys and refuses them.
    async fn publish_once(
        &self,
        topic: &str,
        messages: &[NewMessage],
    ) -> Result<Vec<Stored>, BackendError> {
        if messages
            .iter()
            .any(|m| m.metadata.idempotency_key.is_some())
        {
            return Err(BackendError::NotSupported(
                "publishing with an idempotency key",
            ));
        }
        let offsets = self.publish_messages(topic, messages).await?;
        Ok(offsets
            .map(|offset| Stored {
                offset,
                duplicate: false,
            })
            .collect())
    }

    /// The messages that deliveries or dead letters of `topic` handed out, given as
    /// (offset, payload), with their publish times and metadata. Reads only what is
    /// already at hand (for the embedded store, the records a poll just read, from the
    /// page cache), so it is not async. The default knows no metadata.
    ///
    /// # Errors
    /// An unknown topic; a record that does not read.
    fn messages(
        &self,
        topic: &str,
        items: Vec<(u64, Bytes)>,
    ) -> Result<Vec<Message<Bytes>>, BackendError> {
        let _ = topic;
        Ok(items
            .into_iter()
            .map(|(_, payload)| Message::new(payload, None, Metadata::default()))
            .collect())
    }

    /// Up to `limit` messages of `topic`'s log from offset `from`, with their publish
    /// times and metadata, changing nothing (no group moves). Below the retained start it
    /// reads from the start; the page stops before the message whose payload would pass
    /// `bytes_max` bytes in all, but holds at least one (see [`LogPage`]). The default
    /// cannot read.
    ///
    /// # Errors
    /// An unknown or failed topic; `from` past the log's end (`invalid_argument` naming
    /// `from`); a record that does not read.
    async fn read_log(
        &self,
        topic: &str,
        from: u64,
        limit: usize,
        bytes_max: usize,
    ) -> Result<LogPage, BackendError> {
        let _ = (topic, from, limit, bytes_max);
        Err(BackendError::NotSupported("reading a topic's log"))
    }

    /// The first retained offset of `topic` whose message was published at or after
    /// `time_ms` (Unix ms, the broker's clock at publish); the log's end if none is. The
    /// default cannot look it up.
    ///
    /// # Errors
    /// An unknown or failed topic; a record that does not read.
    async fn offset_at_time(&self, topic: &str, time_ms: u64) -> Result<u64, BackendError> {
        let _ = (topic, time_ms);
        Err(BackendError::NotSupported("looking up an offset by time"))
    }

    /// The publishing end of `topic`, for a publish stream.
    ///
    /// # Errors
    /// An unknown topic.
    fn publisher(&self, topic: &str) -> Result<Box<dyn TopicPublisher>, BackendError>;

    /// Creates `group` on `topic`, starting at `start`, with `config`.
    async fn create_group(
        &self,
        topic: &str,
        group: &str,
        start: StartPosition,
        config: GroupConfig,
    ) -> Result<(), BackendError>;

    /// Everything known of one group.
    async fn group_detail(&self, topic: &str, group: &str) -> Result<GroupDetail, BackendError>;

    /// A group's settings.
    async fn group_config(&self, topic: &str, group: &str) -> Result<GroupConfig, BackendError>;

    /// Deletes a group and its dead letters, durably; its long polls end.
    async fn delete_group(&self, topic: &str, group: &str) -> Result<(), BackendError>;

    /// Polls one delivery for `consumer` (`None`: the anonymous consumer).
    async fn poll(
        &self,
        topic: &str,
        group: &str,
        consumer: Option<&str>,
    ) -> Result<Option<Delivery<Bytes>>, BackendError>;

    /// Polls up to `max` deliveries for `consumer`, without waiting.
    async fn poll_batch(
        &self,
        topic: &str,
        group: &str,
        consumer: Option<&str>,
        max: usize,
    ) -> Result<Vec<Delivery<Bytes>>, BackendError>;

    /// Acks `acks`, then polls up to `max` deliveries, in one write.
    async fn ack_then_poll_batch(
        &self,
        topic: &str,
        group: &str,
        acks: &[DeliveryId],
        consumer: Option<&str>,
        max: usize,
    ) -> Result<AckedThenPolled, BackendError>;

    /// Acks the exact delivery in flight.
    async fn ack(&self, topic: &str, group: &str, id: DeliveryId) -> Result<(), BackendError>;

    /// Acks each delivery, in order; each succeeds or fails alone.
    async fn ack_batch(
        &self,
        topic: &str,
        group: &str,
        ids: &[DeliveryId],
    ) -> Result<Vec<Result<(), NotOwned>>, BackendError>;

    /// Nacks, releases or rejects the exact delivery in flight, per `options`.
    async fn nack(
        &self,
        topic: &str,
        group: &str,
        id: DeliveryId,
        options: NackOptions,
    ) -> Result<Nack, BackendError>;

    /// Nacks each delivery, in order, with the same options; each alone.
    async fn nack_batch(
        &self,
        topic: &str,
        group: &str,
        ids: &[DeliveryId],
        options: &NackOptions,
    ) -> Result<Vec<Result<Nack, NotOwned>>, BackendError>;

    /// Extends the lease of the exact delivery in flight.
    async fn touch(&self, topic: &str, group: &str, id: DeliveryId) -> Result<(), BackendError>;

    /// Puts the group's dead letters in `offsets` back for delivery; answers how many.
    async fn redrive(
        &self,
        topic: &str,
        group: &str,
        offsets: Range<u64>,
    ) -> Result<u64, BackendError>;

    /// Deletes the group's dead letters in `offsets`; answers how many.
    async fn purge(
        &self,
        topic: &str,
        group: &str,
        offsets: Range<u64>,
    ) -> Result<u64, BackendError>;

    /// Moves the group to `to` (see `mailroom::group`'s seek rules); answers its new
    /// position. Wakes the topic's long polls: the group may have messages again.
    async fn seek(&self, topic: &str, group: &str, to: StartPosition) -> Result<u64, BackendError>;

    /// Pauses the group until `until_ms` (Unix ms, after the store's now; `None`: until a
    /// resume).
    async fn pause(
        &self,
        topic: &str,
        group: &str,
        until_ms: Option<u64>,
    ) -> Result<(), BackendError>;

    /// Ends the group's pause; answers whether one was recorded. Wakes the topic's long
    /// polls.
    async fn resume(&self, topic: &str, group: &str) -> Result<bool, BackendError>;

    /// Up to `limit` of the group's dead letters from offset `from`, with payloads.
    async fn dead_letter_page(
        &self,
        topic: &str,
        group: &str,
        from: u64,
        limit: usize,
    ) -> Result<DeadLetterPage, BackendError>;

    /// How long until the group's answer to a poll changes by the clock alone (a
    /// backoff ending, a lease running out), if anything is due.
    async fn next_due_in(&self, topic: &str, group: &str)
        -> Result<Option<Duration>, BackendError>;

    /// The lag and counters of every group of every topic, for the metrics.
    async fn group_gauges(&self) -> Result<Vec<GroupGauges>, BackendError>;

    /// Makes everything written so far durable: the last call of a shutdown.
    async fn sync(&self) -> Result<(), BackendError>;

    /// Reopens failed `topic` from what is durable (see
    /// [`Store::recover_topic`](mailroom_store::Store::recover_topic)): `true` if it
    /// serves again, `false` if it was serving. The default has nothing to recover.
    async fn recover_topic(&self, topic: &str) -> Result<bool, BackendError> {
        let _ = topic;
        Ok(false)
    }

    /// Reopens every failed topic that reopening may heal (not the damaged ones);
    /// answers those that serve again: what the server's heal task runs.
    async fn recover_topics(&self) -> Vec<String> {
        Vec::new()
    }

    /// Repairs damaged `topic` (see
    /// [`Store::repair_topic`](mailroom_store::Store::repair_topic)): `None` if it was
    /// not damaged. The default keeps nothing to repair.
    async fn repair_topic(&self, topic: &str) -> Result<Option<TopicRepaired>, BackendError> {
        let _ = topic;
        Ok(None)
    }

    /// Whether the backend can take writes: what `/healthz` and the `store_healthy`
    /// gauge report. Cheap (no I/O), since probes call it often. By default healthy.
    fn health(&self) -> BackendHealth {
        BackendHealth::default()
    }

    /// The bytes the backend keeps on this machine's disk, for the metrics; `None` if
    /// it keeps none here or cannot tell (the default).
    async fn disk_usage(&self) -> Result<Option<DiskUsage>, BackendError> {
        Ok(None)
    }
}
