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
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use mailroom::group::{DeliveryId, GroupConfig, NackOptions, NotOwned};
use mailroom::topic::{Message, Nack, StartPosition};
use mailroom_store::{
    AckedThenPolled, DeadLetterPage, EncodedBatch, MessageDelivery, NewMessage, PollScope,
    SettledThenPolled, Stored, TopicIdempotency, TopicRepaired, TopicRetention,
};

use crate::long_poll::LongPolls;

pub mod embedded;
mod error;
mod log_reads;
pub mod postgres;
mod publisher;
mod retention;
mod views;

pub use embedded::Embedded;
pub use error::{BackendError, Durable};
pub use log_reads::LogPage;
pub use postgres::Postgres;
pub use publisher::TopicPublisher;
pub use retention::{RetentionChange, RetentionPass, RetentionState};
pub use views::{
    BackendHealth, DiskUsage, GroupDetail, GroupGauges, Settlements, TopicFailureState,
    TopicOffsets, TopicState,
};

/// What [`Backend::settle_then_poll_batch`] answers: each run of nacks' outcomes, then
/// the acks' and the poll's.
pub type SettledRound = SettledThenPolled<Message<Bytes>>;

/// Whether any settlement of `round` took effect (a nack of any run, or an ack): only
/// then may a waiting long poll of the topic find something new, so only then do the
/// backends wake them, once for the round.
fn settled_any(round: &SettledRound) -> bool {
    let (nacked, (acked, _)) = round;
    nacked.iter().flatten().any(Result::is_ok) || acked.iter().any(Result::is_ok)
}

/// Where the server keeps its topics and groups. See the [module docs](self).
#[async_trait]
pub trait Backend: fmt::Debug + Send + Sync + 'static {
    /// The registry of long-poll waiters that this backend wakes.
    fn long_polls(&self) -> &Arc<LongPolls>;

    /// The live channels of a backend that relays them to other brokers sharing its
    /// store (`docs/scale-out.md`, "Live channels across brokers"); `None` (the
    /// default) leaves each server its own [`Channels`](crate::channels::Channels).
    fn channels(&self) -> Option<Arc<crate::channels::Channels>> {
        None
    }

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

    /// [`publish_once`](Self::publish_once) of messages already encoded as record bodies
    /// (a batch publish's fast path). The default decodes them again and calls
    /// `publish_once`; a backend that stores those bodies overrides it.
    async fn publish_encoded(
        &self,
        topic: &str,
        batch: &EncodedBatch,
    ) -> Result<Vec<Stored>, BackendError> {
        self.publish_once(topic, &batch.to_messages()).await
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

    /// Polls one delivery for `consumer` (`None`: the anonymous consumer), with its
    /// message as read (payload, publish time, metadata).
    async fn poll(
        &self,
        topic: &str,
        group: &str,
        consumer: Option<&str>,
    ) -> Result<Option<MessageDelivery>, BackendError>;

    /// Polls up to `max` deliveries for `consumer`, without waiting, each with its
    /// message as read. [`PollScope::All`]: its own in flight first, then new ones.
    /// [`PollScope::New`]: new ones only, with those it has in flight counted against
    /// `max` (`mailroom::group::plan_batch_new`), so it never holds more than `max` after
    /// the call and none of its own is handed out (or read) again: a consume stream's
    /// refill.
    async fn poll_batch(
        &self,
        topic: &str,
        group: &str,
        consumer: Option<&str>,
        max: usize,
        scope: PollScope,
    ) -> Result<Vec<MessageDelivery>, BackendError>;

    /// Acks `acks`, then polls up to `max` deliveries of `scope` (as
    /// [`poll_batch`](Self::poll_batch)), in one write: the round of
    /// [`settle_then_poll_batch`](Self::settle_then_poll_batch) with no nacks.
    async fn ack_then_poll_batch(
        &self,
        topic: &str,
        group: &str,
        acks: &[DeliveryId],
        consumer: Option<&str>,
        max: usize,
        scope: PollScope,
    ) -> Result<AckedThenPolled<Message<Bytes>>, BackendError> {
        let round = Settlements { nacks: &[], acks };
        let (_, polled) = self
            .settle_then_poll_batch(topic, group, round, consumer, max, scope)
            .await?;
        Ok(polled)
    }

    /// Nacks each run of `round.nacks` (as [`nack_batch`](Self::nack_batch)), then acks
    /// `round.acks`, then polls up to `max` deliveries of `scope` (as
    /// [`poll_batch`](Self::poll_batch)), in one transaction of the group (one write):
    /// the consume stream's round, and a `poll/batch` with `nack` and `ack`. Answers each
    /// run's outcomes, then the acks' and the poll's.
    async fn settle_then_poll_batch(
        &self,
        topic: &str,
        group: &str,
        round: Settlements<'_>,
        consumer: Option<&str>,
        max: usize,
        scope: PollScope,
    ) -> Result<SettledRound, BackendError>;

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

    /// Up to `limit` of the group's dead letters from offset `from`, each with its
    /// message (the payload it kept; the publish time and metadata while known).
    async fn dead_letter_page(
        &self,
        topic: &str,
        group: &str,
        from: u64,
        limit: usize,
    ) -> Result<DeadLetterPage<Message<Bytes>>, BackendError>;

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
