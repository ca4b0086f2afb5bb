//! The embedded backend: the durable store (`mailroom_store::Store`) in this process,
//! with the long polls woken in-process.
//!
//! Where each call runs is chosen for speed, by the kind of call:
//!
//! - the hot calls (publish, poll, ack, nack and their batches) in their deferred form,
//!   the call part inline and the durability wait awaited ([`Embedded::durable`]);
//! - every other call on the blocking pool under `--fsync always`, inline under the
//!   relaxed policies ([`Embedded::blocking`]);
//! - reading a group's next due time and opening a topic's publisher always inline: they
//!   take one lock briefly and never wait for the disk.

use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use mailroom::group::{DeliveryId, GroupConfig, NackOptions, NotOwned};
use mailroom::topic::{Delivery, Message, Nack, StartPosition};
use mailroom_store::{
    AckedThenPolled, DeadLetterPage, DurableTopic, NewMessage, Store, StoreError, Stored,
    TopicIdempotency, TopicRetention,
};
use prometheus_client::metrics::histogram::Histogram;
use tokio::time::Instant;

use super::{
    Backend, BackendError, BackendHealth, DiskUsage, GroupDetail, GroupGauges, LogPage,
    RetentionChange, RetentionPass, TopicOffsets, TopicPublisher, TopicState,
};
use crate::long_poll::LongPolls;
use mailroom_store::TopicRepaired;

mod calls;
mod disk;
mod publisher;
mod reads;

use publisher::EmbeddedPublisher;

/// The store in this process behind the [`Backend`] seam.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use bytes::Bytes;
/// use mailroom_server::backend::{Backend, Embedded};
/// use mailroom_server::long_poll::LongPolls;
///
/// let dir = tempfile::tempdir()?;
/// let store = mailroom_store::Store::open(dir.path(), Default::default())?;
/// let backend = Embedded::new(store, false, Arc::new(LongPolls::default()));
/// assert!(backend.create_topic("orders").await?);
/// assert_eq!(backend.publish("orders", Bytes::from("hello")).await?, 0);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Embedded {
    store: Store,
    long_polls: Arc<LongPolls>,
    /// Whether [`Embedded::blocking`] runs its calls on the async worker itself rather
    /// than the blocking pool.
    calls_inline: bool,
    /// The store's directory, whose size [`Backend::disk_usage`] reports.
    data_dir: Option<PathBuf>,
    /// Where the hot calls' waits for an fsync round are timed (`--fsync always`).
    sync_waits: Option<Histogram>,
    /// Whether every call, its durability wait and its due checkpoint run on the
    /// calling thread ([`Embedded::on_the_calling_thread`]).
    on_caller: bool,
}

impl Embedded {
    /// The backend over `store`, waking `long_polls`. `blocking_pool` is whether the
    /// store's writes wait for fsync (`--fsync always`), so that its calls without a
    /// deferred form must leave the async workers ([`Embedded::blocking`] says why).
    pub fn new(store: Store, blocking_pool: bool, long_polls: Arc<LongPolls>) -> Embedded {
        Embedded {
            store,
            long_polls,
            calls_inline: !blocking_pool,
            data_dir: None,
            sync_waits: None,
            on_caller: false,
        }
    }

    /// The deterministic mode, for a simulation that drives the server's handlers one
    /// request at a time over simulated storage: every store call runs inline, a hot
    /// call's wait for the disk blocks the calling thread ([`Deferred::wait`]: the
    /// caller leads its own sync round, so the log's sync thread is never handed one),
    /// a due group checkpoint is written on that thread before the answer (not on a
    /// background thread), and [`Backend::sync`] runs inline. So the order of every
    /// storage call is a function of the requests alone. It blocks the async worker on
    /// every fsync: not for serving.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::sync::Arc;
    /// use bytes::Bytes;
    /// use mailroom_server::backend::{Backend, Embedded};
    /// use mailroom_server::long_poll::LongPolls;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = mailroom_store::Store::open(dir.path(), Default::default())?;
    /// let backend = Embedded::new(store, false, Arc::new(LongPolls::default()))
    ///     .on_the_calling_thread();
    /// backend.create_topic("orders").await?;
    /// // Durable when it answers, synced by this thread.
    /// assert_eq!(backend.publish("orders", Bytes::from("hello")).await?, 0);
    /// # Ok(()) }
    /// ```
    ///
    /// [`Deferred::wait`]: mailroom_store::Deferred::wait
    pub fn on_the_calling_thread(self) -> Embedded {
        Embedded {
            calls_inline: true,
            on_caller: true,
            ..self
        }
    }

    /// Reports the size of `dir`, the store's directory, as its disk usage.
    pub fn with_data_dir(self, dir: impl Into<PathBuf>) -> Embedded {
        Embedded {
            data_dir: Some(dir.into()),
            ..self
        }
    }

    /// Times each wait of a hot call for its fsync round into `histogram`. Only waits
    /// under `--fsync always` are timed: under the relaxed policies they end at once,
    /// and zeros would hide the real rounds.
    pub fn with_sync_histogram(self, histogram: Histogram) -> Embedded {
        Embedded {
            sync_waits: Some(histogram),
            ..self
        }
    }

    /// The store, for embedding and tests.
    pub fn store(&self) -> &Store {
        &self.store
    }
}

/// Refuses a start offset outside the retained log with the log's bounds in the message.
/// The store checks again under its lock (retention may move the start meanwhile), in
/// fewer words.
fn check_start(topic: &DurableTopic, start: StartPosition) -> Result<(), StoreError> {
    let StartPosition::Offset(offset) = start else {
        return Ok(());
    };
    let (first, end) = (topic.start(), topic.len());
    if offset < first || offset > end {
        return Err(StoreError::InvalidArgument {
            reason: format!(
                "start must be an offset in the retained log, {first}..={end}, got {offset}"
            ),
        });
    }
    Ok(())
}

#[async_trait]
impl Backend for Embedded {
    fn long_polls(&self) -> &Arc<LongPolls> {
        &self.long_polls
    }

    async fn create_topic(&self, topic: &str) -> Result<bool, BackendError> {
        let topic = topic.to_owned();
        self.blocking(move |store| store.create_topic(&topic)).await
    }

    async fn create_topic_with(
        &self,
        topic: &str,
        retention: &TopicRetention,
    ) -> Result<bool, BackendError> {
        let (topic, retention) = (topic.to_owned(), *retention);
        self.blocking(move |store| store.create_topic_with(&topic, &retention))
            .await
    }

    async fn create_topic_with_window(
        &self,
        topic: &str,
        retention: &TopicRetention,
        idempotency: &TopicIdempotency,
    ) -> Result<bool, BackendError> {
        let (topic, retention, idempotency) = (topic.to_owned(), *retention, *idempotency);
        self.blocking(move |store| store.create_topic_with_window(&topic, &retention, &idempotency))
            .await
    }

    async fn change_retention(
        &self,
        topic: &str,
        change: RetentionChange,
    ) -> Result<TopicState, BackendError> {
        let name = topic.to_owned();
        self.blocking(move |store| {
            store
                .topic(&name)?
                .change_retention(|settings| change.apply(settings))?;
            reads::topic_state(store, name)
        })
        .await
    }

    async fn enforce_retention(&self) -> Result<RetentionPass, BackendError> {
        // The store's clock, which stamps the records, decides their age.
        self.blocking(|store| {
            let now_ms = store.clock().now_ms();
            Ok(reads::enforce_retention(store, now_ms))
        })
        .await
    }

    async fn list_topics(&self) -> Result<Vec<TopicOffsets>, BackendError> {
        self.blocking(reads::list_topics).await
    }

    async fn topic_state(&self, topic: &str) -> Result<TopicState, BackendError> {
        let name = topic.to_owned();
        self.blocking(move |store| reads::topic_state(store, name))
            .await
    }

    async fn delete_topic(&self, topic: &str) -> Result<Vec<String>, BackendError> {
        let name = topic.to_owned();
        let groups = self
            .blocking(move |store| {
                let groups = store.topic(&name)?.groups();
                store.delete_topic(&name)?;
                Ok(groups)
            })
            .await?;
        self.long_polls.forget(topic);
        Ok(groups)
    }

    async fn publish(&self, topic: &str, payload: Bytes) -> Result<u64, BackendError> {
        let offset = self
            .durable(|store| store.topic(topic)?.publish_deferred(payload))
            .await?;
        self.long_polls.wake(topic);
        Ok(offset)
    }

    async fn publish_batch(
        &self,
        topic: &str,
        payloads: &[Bytes],
    ) -> Result<Range<u64>, BackendError> {
        let offsets = self
            .durable(|store| store.topic(topic)?.publish_batch_deferred(payloads))
            .await?;
        self.long_polls.wake(topic);
        Ok(offsets)
    }

    async fn publish_messages(
        &self,
        topic: &str,
        messages: &[NewMessage],
    ) -> Result<Range<u64>, BackendError> {
        let offsets = self
            .durable(|store| store.topic(topic)?.publish_messages_deferred(messages))
            .await?;
        self.long_polls.wake(topic);
        Ok(offsets)
    }

    async fn publish_once(
        &self,
        topic: &str,
        messages: &[NewMessage],
    ) -> Result<Vec<Stored>, BackendError> {
        let answers = self
            .durable(|store| store.topic(topic)?.publish_once_deferred(messages))
            .await?;
        if answers.iter().any(|answer| !answer.duplicate) {
            self.long_polls.wake(topic);
        }
        Ok(answers)
    }

    fn messages(
        &self,
        topic: &str,
        items: Vec<(u64, Bytes)>,
    ) -> Result<Vec<Message<Bytes>>, BackendError> {
        let topic = self.store.topic(topic)?;
        items
            .into_iter()
            .map(|(offset, payload)| Ok(topic.message_at(offset, payload)?))
            .collect()
    }

    async fn read_log(
        &self,
        topic: &str,
        from: u64,
        limit: usize,
        bytes_max: usize,
    ) -> Result<LogPage, BackendError> {
        let topic = topic.to_owned();
        self.blocking(move |store| reads::read_log(&store.topic(&topic)?, from, limit, bytes_max))
            .await
    }

    async fn offset_at_time(&self, topic: &str, time_ms: u64) -> Result<u64, BackendError> {
        let topic = topic.to_owned();
        self.blocking(move |store| store.topic(&topic)?.offset_at_time(time_ms))
            .await
    }

    fn publisher(&self, topic: &str) -> Result<Box<dyn TopicPublisher>, BackendError> {
        Ok(Box::new(EmbeddedPublisher {
            handle: parking_lot::Mutex::new(self.store.topic(topic)?),
            store: self.store.clone(),
            topic: topic.to_owned(),
            long_polls: Arc::clone(&self.long_polls),
        }))
    }

    async fn create_group(
        &self,
        topic: &str,
        group: &str,
        start: StartPosition,
        config: GroupConfig,
    ) -> Result<(), BackendError> {
        let (topic, group) = (topic.to_owned(), group.to_owned());
        self.blocking(move |store| {
            let topic = store.topic(&topic)?;
            check_start(&topic, start)?;
            topic.create_group_with(&group, start, config)
        })
        .await
    }

    async fn group_detail(&self, topic: &str, group: &str) -> Result<GroupDetail, BackendError> {
        let (topic, group) = (topic.to_owned(), group.to_owned());
        self.blocking(move |store| reads::group_detail(store, &topic, &group))
            .await
    }

    async fn group_config(&self, topic: &str, group: &str) -> Result<GroupConfig, BackendError> {
        let (topic, group) = (topic.to_owned(), group.to_owned());
        self.blocking(move |store| store.topic(&topic)?.group_config(&group))
            .await
    }

    async fn delete_group(&self, topic: &str, group: &str) -> Result<(), BackendError> {
        let (name, group) = (topic.to_owned(), group.to_owned());
        self.blocking(move |store| store.topic(&name)?.delete_group(&group))
            .await?;
        // Its long polls re-poll, find the group gone and answer 404 `unknown_group`.
        self.long_polls.wake(topic);
        Ok(())
    }

    async fn poll(
        &self,
        topic: &str,
        group: &str,
        consumer: Option<&str>,
    ) -> Result<Option<Delivery<Bytes>>, BackendError> {
        let polled_at = Instant::now();
        let delivery = self
            .durable(|store| {
                let topic = store.topic(topic)?;
                match consumer {
                    None => topic.poll_deferred(group),
                    Some(consumer) => topic.poll_as_deferred(group, consumer),
                }
            })
            .await?;
        self.long_polls
            .leased_if(topic, group, polled_at, delivery.is_some());
        Ok(delivery)
    }

    async fn poll_batch(
        &self,
        topic: &str,
        group: &str,
        consumer: Option<&str>,
        max: usize,
    ) -> Result<Vec<Delivery<Bytes>>, BackendError> {
        let polled_at = Instant::now();
        let deliveries = self
            .durable(|store| {
                store
                    .topic(topic)?
                    .poll_batch_deferred(group, consumer, max)
            })
            .await?;
        self.long_polls
            .leased_if(topic, group, polled_at, !deliveries.is_empty());
        Ok(deliveries)
    }

    async fn ack_then_poll_batch(
        &self,
        topic: &str,
        group: &str,
        acks: &[DeliveryId],
        consumer: Option<&str>,
        max: usize,
    ) -> Result<AckedThenPolled, BackendError> {
        let polled_at = Instant::now();
        let (acked, polled) = self
            .durable(|store| {
                store
                    .topic(topic)?
                    .ack_then_poll_batch_deferred(group, acks, consumer, max)
            })
            .await?;
        self.woken_by(topic, &acked);
        self.long_polls
            .leased_if(topic, group, polled_at, !polled.is_empty());
        Ok((acked, polled))
    }

    async fn ack(&self, topic: &str, group: &str, id: DeliveryId) -> Result<(), BackendError> {
        self.durable(|store| store.topic(topic)?.ack_deferred(group, id))
            .await?;
        self.long_polls.wake(topic);
        Ok(())
    }

    async fn ack_batch(
        &self,
        topic: &str,
        group: &str,
        ids: &[DeliveryId],
    ) -> Result<Vec<Result<(), NotOwned>>, BackendError> {
        let outcomes = self
            .durable(|store| store.topic(topic)?.ack_batch_deferred(group, ids))
            .await?;
        self.woken_by(topic, &outcomes);
        Ok(outcomes)
    }

    async fn nack(
        &self,
        topic: &str,
        group: &str,
        id: DeliveryId,
        options: NackOptions,
    ) -> Result<Nack, BackendError> {
        let nack = self
            .durable(|store| store.topic(topic)?.nack_with_deferred(group, id, options))
            .await?;
        self.long_polls.wake(topic);
        Ok(nack)
    }

    async fn nack_batch(
        &self,
        topic: &str,
        group: &str,
        ids: &[DeliveryId],
        options: &NackOptions,
    ) -> Result<Vec<Result<Nack, NotOwned>>, BackendError> {
        let outcomes = self
            .durable(|store| store.topic(topic)?.nack_batch_deferred(group, ids, options))
            .await?;
        self.woken_by(topic, &outcomes);
        Ok(outcomes)
    }

    async fn touch(&self, topic: &str, group: &str, id: DeliveryId) -> Result<(), BackendError> {
        let (topic, group) = (topic.to_owned(), group.to_owned());
        // No wake-up: a touch frees nothing and only moves a lease deadline later, so
        // every waiting long poll is armed no later than it needs (see
        // `crate::long_poll`).
        self.blocking(move |store| store.topic(&topic)?.touch(&group, id))
            .await
    }

    async fn redrive(
        &self,
        topic: &str,
        group: &str,
        offsets: Range<u64>,
    ) -> Result<u64, BackendError> {
        self.take_dead_letters(topic, group, move |handle, group| {
            handle.redrive(group, offsets)
        })
        .await
    }

    async fn purge(
        &self,
        topic: &str,
        group: &str,
        offsets: Range<u64>,
    ) -> Result<u64, BackendError> {
        self.take_dead_letters(topic, group, move |handle, group| {
            handle.purge(group, offsets)
        })
        .await
    }

    async fn seek(&self, topic: &str, group: &str, to: StartPosition) -> Result<u64, BackendError> {
        let (name, group) = (topic.to_owned(), group.to_owned());
        let position = self
            .blocking(move |store| store.topic(&name)?.seek(&group, to))
            .await?;
        // Deliveries dropped and messages in reach again: waiting polls look again.
        self.long_polls.wake(topic);
        Ok(position)
    }

    async fn pause(
        &self,
        topic: &str,
        group: &str,
        until_ms: Option<u64>,
    ) -> Result<(), BackendError> {
        let (name, group) = (topic.to_owned(), group.to_owned());
        // No wake-up: a pause only takes deliveries away.
        self.blocking(move |store| store.topic(&name)?.pause(&group, until_ms))
            .await
    }

    async fn resume(&self, topic: &str, group: &str) -> Result<bool, BackendError> {
        let (name, group) = (topic.to_owned(), group.to_owned());
        let resumed = self
            .blocking(move |store| store.topic(&name)?.resume(&group))
            .await?;
        if resumed {
            self.long_polls.wake(topic);
        }
        Ok(resumed)
    }

    async fn dead_letter_page(
        &self,
        topic: &str,
        group: &str,
        from: u64,
        limit: usize,
    ) -> Result<DeadLetterPage, BackendError> {
        let (topic, group) = (topic.to_owned(), group.to_owned());
        // The store reads only this page's payloads, in offset order.
        self.blocking(move |store| store.topic(&topic)?.dead_letter_page(&group, from, limit))
            .await
    }

    async fn next_due_in(
        &self,
        topic: &str,
        group: &str,
    ) -> Result<Option<Duration>, BackendError> {
        // Inline under every fsync policy: it takes one group's lock briefly and never
        // waits for the disk.
        Ok(self.store.topic(topic)?.next_due_in(group)?)
    }

    async fn group_gauges(&self) -> Result<Vec<GroupGauges>, BackendError> {
        self.blocking(reads::group_gauges).await
    }

    async fn sync(&self) -> Result<(), BackendError> {
        if self.on_caller {
            return Ok(self.store.sync()?);
        }
        // On the blocking pool under every policy: it waits for the disk, and at
        // shutdown nothing else needs the worker sooner.
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || store.sync())
            .await
            .map_err(|join| BackendError::Internal(join.to_string()))??;
        Ok(())
    }

    async fn recover_topic(&self, topic: &str) -> Result<bool, BackendError> {
        let name = topic.to_owned();
        let recovered = self
            .blocking(move |store| store.recover_topic(&name))
            .await?;
        // Long polls parked on the old handle look the topic up again.
        self.long_polls.wake(topic);
        Ok(recovered)
    }

    async fn recover_topics(&self) -> Vec<String> {
        let store = self.store.clone();
        let healed = tokio::task::spawn_blocking(move || store.recover_topics())
            .await
            .unwrap_or_default();
        for topic in &healed {
            self.long_polls.wake(topic);
        }
        healed
    }

    async fn repair_topic(&self, topic: &str) -> Result<Option<TopicRepaired>, BackendError> {
        let name = topic.to_owned();
        let repaired = self
            .blocking(move |store| store.repair_topic(&name))
            .await?;
        self.long_polls.wake(topic);
        Ok(repaired)
    }

    fn health(&self) -> BackendHealth {
        // Damage and fail-stops stay in their topics: the store as a whole has no
        // failure of its own once it is open.
        BackendHealth {
            failure: None,
            failed_topics: reads::failed_topics(&self.store),
        }
    }

    async fn disk_usage(&self) -> Result<Option<DiskUsage>, BackendError> {
        let Some(dir) = self.data_dir.clone() else {
            return Ok(None);
        };
        // A walk of the directory tree: off the async workers under every policy.
        tokio::task::spawn_blocking(move || disk::usage(&dir))
            .await
            .map(Some)
            .map_err(|join| BackendError::Internal(join.to_string()))
    }
}
