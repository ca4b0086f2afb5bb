//! Batches on a [`DurableTopic`]: poll, ack and nack up to
//! [`BATCH_DELIVERIES_MAX`](mailroom::topic::BATCH_DELIVERIES_MAX) deliveries of one group
//! at once, with the rules of `mailroom::topic::Topic::poll_batch`, `ack_batch` and
//! `nack_batch` (the model tests hold the two to the same answers).
//!
//! A batch is one transaction of the group: its records are written with one log write
//! and it waits for one durability point (one shared `fdatasync` under
//! `SyncPolicy::Always`), never holding the group's lock while it waits. Lease expiries
//! due before the batch are part of it.
//!
//! [`ack_then_poll_batch`](DurableTopic::ack_then_poll_batch) is an ack batch and a poll
//! batch in ONE such transaction (one write, one sync): a consumer working in rounds acks
//! the last round and gets the next one for one `fdatasync` instead of two.
//!
//! Arguments are checked before the group is looked up, like the in-memory topic does.

use bytes::Bytes;
use mailroom::group::{DeliveryId, NackOptions, NotOwned};
use mailroom::topic::{check_batch_len, check_batch_poll, Delivery, Message, Nack, TopicError};

use crate::{Deferred, DurableTopic, StoreError};

impl DurableTopic {
    /// Polls up to `max` deliveries of `group` as `consumer` (`None`: the anonymous
    /// consumer of [`poll`](Self::poll)): its own deliveries in flight first, then new
    /// ones made for it, until `max` or the group has nothing more to hand out (the log is
    /// drained, `max_in_flight` deliveries are in flight, or a delayed message holds back
    /// the rest). Owned ones come first (redriven, then by offset), then new ones by
    /// offset. With `max_in_flight` 1 a batch is a poll: at most one delivery. A batch
    /// also stops before a payload that would take it past
    /// [`StoreOptions::poll_batch_bytes_max`](crate::StoreOptions::poll_batch_bytes_max)
    /// (but always holds at least one delivery); the rest come with the next poll. Every
    /// delivery made is durable before the batch returns.
    ///
    /// # Errors
    ///
    /// `Topic(InvalidArgument)` if `max` is 0 or above `BATCH_DELIVERIES_MAX`, or for an
    /// empty or over-long consumer; as [`poll`](Self::poll).
    ///
    /// # Example
    ///
    /// ```
    /// use bytes::Bytes;
    /// use mailroom::group::GroupConfig;
    /// use mailroom::topic::StartPosition;
    /// use mailroom_store::{Store, StoreOptions};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path(), StoreOptions::default())?;
    /// store.create_topic("jobs")?;
    /// let jobs = store.topic("jobs")?;
    /// let config = GroupConfig::new(3).with_max_in_flight(8);
    /// jobs.create_group_with("workers", StartPosition::Earliest, config)?;
    /// jobs.publish_batch(&[Bytes::from_static(b"a"), Bytes::from_static(b"b")])?;
    /// let batch = jobs.poll_batch("workers", Some("w1"), 64)?;
    /// let offsets: Vec<u64> = batch.iter().map(|d| d.offset).collect();
    /// assert_eq!(offsets, [0, 1]);
    /// // The same consumer gets its own deliveries back, with the same attempts.
    /// assert_eq!(jobs.poll_batch("workers", Some("w1"), 64)?, batch);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn poll_batch(
        &self,
        group: &str,
        consumer: Option<&str>,
        max: usize,
    ) -> Result<Vec<Delivery<Bytes>>, StoreError> {
        self.poll_batch_deferred(group, consumer, max)?.wait()
    }

    /// [`poll_batch`](Self::poll_batch) without the wait: the deliveries are made and
    /// written now, in one log write, and handed out by the [`Deferred`] after one sync.
    ///
    /// # Errors
    ///
    /// As [`poll_batch`](Self::poll_batch); I/O errors of reading messages come from the
    /// `Deferred`.
    ///
    /// # Example
    ///
    /// ```
    /// use bytes::Bytes;
    /// use mailroom::group::GroupConfig;
    /// use mailroom::topic::StartPosition;
    /// use mailroom_store::{Store, StoreOptions};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path(), StoreOptions::default())?;
    /// store.create_topic("jobs")?;
    /// let jobs = store.topic("jobs")?;
    /// let config = GroupConfig::new(3).with_max_in_flight(8);
    /// jobs.create_group_with("workers", StartPosition::Earliest, config)?;
    /// jobs.publish_batch(&[Bytes::from_static(b"a"), Bytes::from_static(b"b")])?;
    /// let batch = futures::executor::block_on(async {
    ///     let batch = jobs.poll_batch_deferred("workers", Some("w1"), 64)?.await?;
    ///     let ids: Vec<_> = batch.iter().map(|delivery| delivery.id()).collect();
    ///     jobs.ack_batch_deferred("workers", &ids)?.await?;
    ///     Ok::<_, mailroom_store::StoreError>(batch)
    /// })?;
    /// assert_eq!(batch.len(), 2);
    /// assert_eq!(jobs.position("workers")?, 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn poll_batch_deferred(
        &self,
        group: &str,
        consumer: Option<&str>,
        max: usize,
    ) -> Result<Deferred<Vec<Delivery<Bytes>>>, StoreError> {
        let batch = self.poll_messages_deferred(group, consumer, max, PollScope::All)?;
        Ok(batch.and_then(|batch| Ok(payloads(batch))))
    }

    /// [`poll_batch_deferred`](Self::poll_batch_deferred) with each delivery's whole
    /// message (payload, publish time and metadata, read once), and with `scope` saying
    /// whether the consumer's own deliveries in flight come back first
    /// ([`PollScope::All`]) or only new ones are made ([`PollScope::New`]).
    ///
    /// # Errors
    ///
    /// As [`poll_batch_deferred`](Self::poll_batch_deferred).
    ///
    /// # Example
    ///
    /// ```
    /// use bytes::Bytes;
    /// use mailroom::group::GroupConfig;
    /// use mailroom::topic::{Metadata, StartPosition};
    /// use mailroom_store::{NewMessage, PollScope, Store, StoreOptions};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path(), StoreOptions::default())?;
    /// store.create_topic("jobs")?;
    /// let jobs = store.topic("jobs")?;
    /// let config = GroupConfig::new(3).with_max_in_flight(4);
    /// jobs.create_group_with("workers", StartPosition::Earliest, config)?;
    /// let keyed = |key| NewMessage {
    ///     payload: Bytes::from_static(b"a"),
    ///     metadata: Metadata::new().with_key(key),
    /// };
    /// jobs.publish_messages(&[keyed("k"), keyed("j")])?;
    /// let first = jobs.poll_messages_deferred("workers", Some("w1"), 1, PollScope::All)?.wait()?;
    /// assert_eq!(first[0].message.metadata.key.as_deref(), Some("k"));
    /// assert!(first[0].message.published_at_ms.is_some());
    /// // New ones only, with the one it holds counted against the window of 2.
    /// let next = jobs.poll_messages_deferred("workers", Some("w1"), 2, PollScope::New)?.wait()?;
    /// assert_eq!(next.iter().map(|d| d.offset).collect::<Vec<_>>(), [1]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn poll_messages_deferred(
        &self,
        group: &str,
        consumer: Option<&str>,
        max: usize,
        scope: PollScope,
    ) -> Result<Deferred<Vec<MessageDelivery>>, StoreError> {
        let _live = self.live()?;
        check_batch_poll(consumer, max)?;
        let staged =
            self.inner
                .groups
                .poll_batch(&self.inner.messages, group, consumer, max, scope)?;
        Ok(self.on_groups(staged))
    }

    /// Acks each of `deliveries` in order, as [`ack`](Self::ack) would one by one, and
    /// returns one result per delivery: `Ok` if it was acked, else why it was not owned at
    /// that point (a delivery named twice is refused the second time). An empty list
    /// answers an empty list. The acks are durable before it returns.
    ///
    /// # Errors
    ///
    /// `Topic(InvalidArgument)` for more than `BATCH_DELIVERIES_MAX` deliveries;
    /// `Topic(UnknownGroup)`; I/O errors and fail-stop (some of the batch may then be
    /// done, as with a single ack whose sync failed).
    ///
    /// # Example
    ///
    /// ```
    /// use bytes::Bytes;
    /// use mailroom::group::GroupConfig;
    /// use mailroom::topic::StartPosition;
    /// use mailroom_store::{Store, StoreOptions};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path(), StoreOptions::default())?;
    /// store.create_topic("t")?;
    /// let topic = store.topic("t")?;
    /// let config = GroupConfig::new(3).with_max_in_flight(2);
    /// topic.create_group_with("g", StartPosition::Earliest, config)?;
    /// topic.publish_batch(&[Bytes::from_static(b"a"), Bytes::from_static(b"b")])?;
    /// let ids: Vec<_> = topic.poll_batch("g", None, 2)?.iter().map(|d| d.id()).collect();
    /// let results = topic.ack_batch("g", &[ids[0], ids[0], ids[1]])?;
    /// assert!(results[0].is_ok() && results[1].is_err() && results[2].is_ok());
    /// assert_eq!(topic.position("g")?, 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn ack_batch(
        &self,
        group: &str,
        deliveries: &[DeliveryId],
    ) -> Result<Vec<Result<(), NotOwned>>, StoreError> {
        self.ack_batch_deferred(group, deliveries)?.wait()
    }

    /// [`ack_batch`](Self::ack_batch) without the wait: the acks are applied and written
    /// now; their results (refusals included, which may reflect changes not yet durable)
    /// come from the [`Deferred`] after one sync.
    ///
    /// # Errors
    ///
    /// As [`ack_batch`](Self::ack_batch): arguments, unknown group, write errors and
    /// fail-stop here; sync errors from the `Deferred`.
    pub fn ack_batch_deferred(
        &self,
        group: &str,
        deliveries: &[DeliveryId],
    ) -> Result<Deferred<Vec<Result<(), NotOwned>>>, StoreError> {
        check_batch_len(deliveries)?;
        let settled = self.settle_deferred(group, deliveries, None)?;
        Ok(settled
            .and_then(|results| Ok(results.into_iter().map(|result| result.map(drop)).collect())))
    }

    /// Nacks, releases or rejects each of `deliveries` in order per `options`, as
    /// [`nack_with`](Self::nack_with) would one by one, and returns one result per
    /// delivery: what the nack did, or why it was not owned at that point. Each dead
    /// letter keeps its own copy of the message.
    ///
    /// # Errors
    ///
    /// `Topic(InvalidArgument)` for more than `BATCH_DELIVERIES_MAX` deliveries or
    /// options out of range (checked once); otherwise as [`ack_batch`](Self::ack_batch).
    ///
    /// # Example
    ///
    /// ```
    /// use bytes::Bytes;
    /// use mailroom::group::{GroupConfig, NackKind, NackOptions};
    /// use mailroom::topic::{Nack, StartPosition};
    /// use mailroom_store::{Store, StoreOptions};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path(), StoreOptions::default())?;
    /// store.create_topic("t")?;
    /// let topic = store.topic("t")?;
    /// let config = GroupConfig::new(2).with_max_in_flight(2);
    /// topic.create_group_with("g", StartPosition::Earliest, config)?;
    /// topic.publish_batch(&[Bytes::from_static(b"a"), Bytes::from_static(b"b")])?;
    /// let ids: Vec<_> = topic.poll_batch("g", None, 2)?.iter().map(|d| d.id()).collect();
    /// let reject = NackOptions::new(NackKind::Reject).with_reason("malformed");
    /// let results = topic.nack_batch("g", &ids, &reject)?;
    /// assert_eq!(results, [Ok(Nack::DeadLettered), Ok(Nack::DeadLettered)]);
    /// assert_eq!(topic.dead_letters("g")?[1].message, Bytes::from_static(b"b"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn nack_batch(
        &self,
        group: &str,
        deliveries: &[DeliveryId],
        options: &NackOptions,
    ) -> Result<Vec<Result<Nack, NotOwned>>, StoreError> {
        self.nack_batch_deferred(group, deliveries, options)?.wait()
    }

    /// [`nack_batch`](Self::nack_batch) without the wait (see
    /// [`ack_batch_deferred`](Self::ack_batch_deferred)).
    ///
    /// # Errors
    ///
    /// As [`nack_batch`](Self::nack_batch): arguments, options, unknown group, write
    /// errors and fail-stop here; sync errors from the [`Deferred`].
    pub fn nack_batch_deferred(
        &self,
        group: &str,
        deliveries: &[DeliveryId],
        options: &NackOptions,
    ) -> Result<Deferred<Vec<Result<Nack, NotOwned>>>, StoreError> {
        check_batch_len(deliveries)?;
        options.check().map_err(TopicError::from)?;
        self.settle_deferred(group, deliveries, Some(options))
    }

    /// Acks each of `acks` in order, then polls up to `max` deliveries of `group` as
    /// `consumer`, in ONE transaction of the group: exactly what
    /// [`ack_batch`](Self::ack_batch) followed by [`poll_batch`](Self::poll_batch) answer
    /// with nothing in between (slots the acks free are refilled by the poll), written
    /// with one log write and durable after one sync. Returns one result per ack, then
    /// the deliveries.
    ///
    /// # Errors
    ///
    /// As [`ack_batch`](Self::ack_batch) and [`poll_batch`](Self::poll_batch); the
    /// arguments are all checked first, so nothing is acked if one is refused.
    ///
    /// # Example
    ///
    /// ```
    /// use bytes::Bytes;
    /// use mailroom::group::GroupConfig;
    /// use mailroom::topic::StartPosition;
    /// use mailroom_store::{Store, StoreOptions};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path(), StoreOptions::default())?;
    /// store.create_topic("jobs")?;
    /// let jobs = store.topic("jobs")?;
    /// let config = GroupConfig::new(3).with_max_in_flight(2);
    /// jobs.create_group_with("workers", StartPosition::Earliest, config)?;
    /// let messages: Vec<Bytes> = (0..4u8).map(|n| Bytes::from(vec![n])).collect();
    /// jobs.publish_batch(&messages)?;
    /// let ids: Vec<_> = jobs.poll_batch("workers", None, 2)?.iter().map(|d| d.id()).collect();
    /// // Full (2 in flight) until the acks free both slots, in the same call.
    /// let (acked, next) = jobs.ack_then_poll_batch("workers", &ids, None, 2)?;
    /// assert!(acked.iter().all(Result::is_ok));
    /// assert_eq!(next.iter().map(|d| d.offset).collect::<Vec<_>>(), [2, 3]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn ack_then_poll_batch(
        &self,
        group: &str,
        acks: &[DeliveryId],
        consumer: Option<&str>,
        max: usize,
    ) -> Result<AckedThenPolled, StoreError> {
        self.ack_then_poll_batch_deferred(group, acks, consumer, max)?
            .wait()
    }

    /// [`ack_then_poll_batch`](Self::ack_then_poll_batch) without the wait: acked,
    /// polled and written now, in one log write; the answer comes from the [`Deferred`]
    /// after one sync.
    ///
    /// # Errors
    ///
    /// As [`ack_then_poll_batch`](Self::ack_then_poll_batch): arguments, unknown group,
    /// write errors and fail-stop here; sync and message-read errors from the `Deferred`.
    pub fn ack_then_poll_batch_deferred(
        &self,
        group: &str,
        acks: &[DeliveryId],
        consumer: Option<&str>,
        max: usize,
    ) -> Result<Deferred<AckedThenPolled>, StoreError> {
        let polled =
            self.ack_then_poll_messages_deferred(group, acks, consumer, max, PollScope::All)?;
        Ok(polled.and_then(|(acked, batch)| Ok((acked, payloads(batch)))))
    }

    /// [`ack_then_poll_batch_deferred`](Self::ack_then_poll_batch_deferred) with each
    /// delivery's whole message, read once, and the poll's `scope` (see
    /// [`poll_messages_deferred`](Self::poll_messages_deferred)).
    ///
    /// # Errors
    ///
    /// As [`ack_then_poll_batch_deferred`](Self::ack_then_poll_batch_deferred).
    pub fn ack_then_poll_messages_deferred(
        &self,
        group: &str,
        acks: &[DeliveryId],
        consumer: Option<&str>,
        max: usize,
        scope: PollScope,
    ) -> Result<Deferred<AckedThenPolled<Message<Bytes>>>, StoreError> {
        let settled =
            self.settle_then_poll_messages_deferred(group, &[], acks, consumer, max, scope)?;
        Ok(settled.and_then(|(_, polled)| Ok(polled)))
    }

    /// Nacks each run of `nacks` (its deliveries, each run with its own options), then
    /// acks each of `acks`, then polls as
    /// [`ack_then_poll_messages_deferred`](Self::ack_then_poll_messages_deferred), in ONE
    /// transaction of the group: exactly what [`nack_batch`](Self::nack_batch) per run,
    /// [`ack_batch`](Self::ack_batch) and the poll answer one after the other, with
    /// nothing in between, one log write and one sync. A plain nack with no delay frees
    /// its delivery for this very poll.
    ///
    /// # Errors
    ///
    /// As [`nack_batch`](Self::nack_batch) and
    /// [`ack_then_poll_batch`](Self::ack_then_poll_batch); the arguments (each list's
    /// length, each run's options, `consumer`, `max`) are all checked first, so nothing
    /// is settled if one is refused.
    ///
    /// # Example
    ///
    /// ```
    /// use bytes::Bytes;
    /// use mailroom::group::{GroupConfig, NackOptions};
    /// use mailroom::topic::StartPosition;
    /// use mailroom_store::{PollScope, Store, StoreOptions};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path(), StoreOptions::default())?;
    /// store.create_topic("jobs")?;
    /// let jobs = store.topic("jobs")?;
    /// jobs.create_group_with("workers", StartPosition::Earliest, GroupConfig::new(3).with_max_in_flight(2))?;
    /// jobs.publish_batch(&[Bytes::from_static(b"a"), Bytes::from_static(b"b")])?;
    /// let ids: Vec<_> = jobs.poll_batch("workers", None, 2)?.iter().map(|d| d.id()).collect();
    /// // Offset 0 failed, 1 worked: the retry of 0 comes back in the same call.
    /// let retry = [(&ids[..1], NackOptions::default())];
    /// let settling = jobs.settle_then_poll_messages_deferred("workers", &retry, &ids[1..], None, 2, PollScope::All)?;
    /// let (nacked, (acked, next)) = settling.wait()?;
    /// assert!(nacked[0][0].is_ok() && acked[0].is_ok());
    /// assert_eq!((next[0].offset, next[0].attempt), (0, 2));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn settle_then_poll_messages_deferred(
        &self,
        group: &str,
        nacks: &[(&[DeliveryId], NackOptions)],
        acks: &[DeliveryId],
        consumer: Option<&str>,
        max: usize,
        scope: PollScope,
    ) -> Result<Deferred<SettledThenPolled<Message<Bytes>>>, StoreError> {
        let _live = self.live()?;
        for (ids, options) in nacks {
            check_batch_len(ids)?;
            options.check().map_err(TopicError::from)?;
        }
        check_batch_len(acks)?;
        check_batch_poll(consumer, max)?;
        let staged = self.inner.groups.settle_then_poll_batch(
            &self.inner.messages,
            group,
            nacks,
            acks,
            consumer,
            max,
            scope,
        )?;
        Ok(self.on_groups(staged))
    }
}

/// What [`DurableTopic::settle_then_poll_messages_deferred`] answers: each run of nacks'
/// results (in order), then the acks' results and the deliveries polled.
pub type SettledThenPolled<M = Bytes> = (Vec<Vec<Result<Nack, NotOwned>>>, AckedThenPolled<M>);

/// What [`DurableTopic::ack_then_poll_batch`] answers: one result per ack (in order),
/// then the deliveries polled (with [`ack_then_poll_messages_deferred`], each with its
/// message: `AckedThenPolled<Message<Bytes>>`).
///
/// [`ack_then_poll_messages_deferred`]: DurableTopic::ack_then_poll_messages_deferred
pub type AckedThenPolled<M = Bytes> = (Vec<Result<(), NotOwned>>, Vec<Delivery<M>>);

/// A delivery with its message as the poll read it: payload, publish time and metadata.
pub type MessageDelivery = Delivery<Message<Bytes>>;

/// Which deliveries a batch poll hands out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollScope {
    /// The consumer's own deliveries in flight first, then new ones, up to `max` in all
    /// (`mailroom::group::plan_batch`): what [`DurableTopic::poll_batch`] answers.
    All,
    /// New deliveries only, with the consumer's own in flight counted against `max`, so
    /// it never holds more than `max` (`mailroom::group::plan_batch_new`): the refill of
    /// a consumer that keeps what it was sent (a consume stream).
    New,
}

/// The payloads of `batch`, without the rest of each message.
fn payloads(batch: Vec<MessageDelivery>) -> Vec<Delivery<Bytes>> {
    batch
        .into_iter()
        .map(|delivery| Delivery {
            offset: delivery.offset,
            attempt: delivery.attempt,
            message: delivery.message.payload,
        })
        .collect()
}
