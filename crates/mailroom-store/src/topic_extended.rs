//! The operations of a [`DurableTopic`] beyond the seed: groups with settings, consumer
//! identities, nack kinds, lease extension, redrive and purge, counters. They follow the
//! rules of `mailroom::group` exactly like the in-memory topic's, with time from the
//! store's clock, and each change is durable before it returns.

use std::ops::Range;
use std::time::Duration;

use bytes::Bytes;
use mailroom::group::{ArgumentError, DeliveryId, GroupConfig, GroupCounters, NackOptions};
use mailroom::topic::{
    DeadLetterInfo, Delivery, Nack, StartPosition, TopicError, GROUP_NAME_BYTES_MAX,
};

use crate::groups::GroupSet;
use crate::{Deferred, DurableTopic, StoreError};

/// The library's refusal of an empty group name (its rule comes before the store's own
/// stricter name rule, as in the in-memory topic).
pub(crate) fn empty_group_name() -> StoreError {
    StoreError::Topic(TopicError::InvalidArgument(
        ArgumentError::LengthOutOfRange {
            field: "group",
            min: 1,
            max: GROUP_NAME_BYTES_MAX,
            got: 0,
        },
    ))
}

impl DurableTopic {
    /// Creates a group with `config`, starting at `start`. The store has a clock, so
    /// leases and backoff are allowed.
    ///
    /// # Errors
    ///
    /// As [`create_group_at`](Self::create_group_at), and `Topic(InvalidArgument)` for a
    /// setting out of range.
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
    /// let config = GroupConfig::new(3).with_lease_ms(30_000).with_max_in_flight(8);
    /// jobs.create_group_with("workers", StartPosition::Earliest, config)?;
    /// jobs.publish(Bytes::from_static(b"job 1"))?;
    /// let delivery = jobs.poll_as("workers", "w1")?.expect("one job");
    /// jobs.touch("workers", delivery.id())?;
    /// jobs.ack("workers", delivery.id())?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_group_with(
        &self,
        group: &str,
        start: StartPosition,
        config: GroupConfig,
    ) -> Result<(), StoreError> {
        let _live = self.live()?;
        if group.is_empty() {
            return Err(empty_group_name());
        }
        config.check().map_err(TopicError::from)?;
        self.inner
            .groups
            .create(&self.inner.messages, group, config, start)
    }

    /// Polls `group` as `consumer`, as `mailroom::topic::Topic::poll_as`.
    ///
    /// # Errors
    ///
    /// `Topic(InvalidArgument)` for an empty or over-long consumer; as
    /// [`poll`](Self::poll).
    pub fn poll_as(
        &self,
        group: &str,
        consumer: &str,
    ) -> Result<Option<Delivery<Bytes>>, StoreError> {
        self.poll_as_deferred(group, consumer)?.wait()
    }

    /// [`poll_as`](Self::poll_as) without the wait (see
    /// [`poll_deferred`](Self::poll_deferred)).
    ///
    /// # Errors
    ///
    /// As [`poll_as`](Self::poll_as); I/O errors of reading the message come from the
    /// [`Deferred`].
    pub fn poll_as_deferred(
        &self,
        group: &str,
        consumer: &str,
    ) -> Result<Deferred<Option<Delivery<Bytes>>>, StoreError> {
        let batch = self.poll_batch_deferred(group, Some(consumer), 1)?;
        Ok(batch.and_then(|mut batch| Ok(batch.pop())))
    }

    /// Nacks, releases or rejects the exact delivery in flight, per `options`.
    ///
    /// # Errors
    ///
    /// `Topic(InvalidArgument)` for options out of range; as [`nack`](Self::nack).
    ///
    /// # Example
    ///
    /// ```
    /// use bytes::Bytes;
    /// use mailroom::group::{NackKind, NackOptions};
    /// use mailroom::topic::Nack;
    /// use mailroom_store::{Store, StoreOptions};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path(), StoreOptions::default())?;
    /// store.create_topic("t")?;
    /// let topic = store.topic("t")?;
    /// topic.create_group("g", 5)?;
    /// topic.publish(Bytes::from_static(b"bad"))?;
    /// let delivery = topic.poll("g")?.expect("a message");
    /// let reject = NackOptions::new(NackKind::Reject).with_reason("schema mismatch");
    /// assert_eq!(topic.nack_with("g", delivery.id(), reject)?, Nack::DeadLettered);
    /// let dead = topic.dead_letter_info("g")?;
    /// assert_eq!(dead[0].reason.as_deref(), Some("schema mismatch"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn nack_with(
        &self,
        group: &str,
        delivery: DeliveryId,
        options: NackOptions,
    ) -> Result<Nack, StoreError> {
        self.nack_with_deferred(group, delivery, options)?.wait()
    }

    /// [`nack_with`](Self::nack_with) without the wait. A refusal (`Topic(NotOwned)`)
    /// comes from the [`Deferred`] (see [`ack_deferred`](Self::ack_deferred)).
    ///
    /// # Errors
    ///
    /// `Topic(InvalidArgument)` for options out of range, `Topic(UnknownGroup)`, write
    /// errors and fail-stop here; the rest of [`nack_with`](Self::nack_with)'s from the
    /// `Deferred`.
    pub fn nack_with_deferred(
        &self,
        group: &str,
        delivery: DeliveryId,
        options: NackOptions,
    ) -> Result<Deferred<Nack>, StoreError> {
        options.check().map_err(TopicError::from)?;
        let settled = self.settle_deferred(group, &[delivery], Some(&options))?;
        Ok(settled.and_then(|mut results| {
            let result = results.pop().expect("one result per delivery");
            result.map_err(GroupSet::not_owned(group))
        }))
    }

    /// Extends the lease of the exact delivery in flight.
    ///
    /// # Errors
    ///
    /// As [`ack`](Self::ack).
    pub fn touch(&self, group: &str, delivery: DeliveryId) -> Result<(), StoreError> {
        let _live = self.live()?;
        self.inner
            .groups
            .touch(&self.inner.messages, group, delivery)
    }

    /// Puts `group`'s dead letters with offsets in `offsets` back for delivery (payloads
    /// come from the dead letters' own copies, so this works after retention); returns
    /// how many. Other groups are untouched.
    ///
    /// # Errors
    ///
    /// `Topic(UnknownGroup)`; I/O errors and fail-stop.
    ///
    /// # Example
    ///
    /// ```
    /// use bytes::Bytes;
    /// use mailroom_store::{Store, StoreOptions};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path(), StoreOptions::default())?;
    /// store.create_topic("t")?;
    /// let topic = store.topic("t")?;
    /// topic.create_group("g", 1)?;
    /// topic.publish(Bytes::from_static(b"retry me"))?;
    /// let first = topic.poll("g")?.expect("a message");
    /// topic.nack("g", first.id())?;
    /// assert_eq!(topic.redrive("g", 0..u64::MAX)?, 1);
    /// let again = topic.poll("g")?.expect("redriven");
    /// assert_eq!((again.offset, again.attempt), (0, 2));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn redrive(&self, group: &str, offsets: Range<u64>) -> Result<u64, StoreError> {
        let _live = self.live()?;
        self.inner
            .groups
            .redrive(&self.inner.messages, group, offsets, false)
    }

    /// Deletes `group`'s dead letters with offsets in `offsets`; returns how many.
    ///
    /// # Errors
    ///
    /// As [`redrive`](Self::redrive).
    pub fn purge(&self, group: &str, offsets: Range<u64>) -> Result<u64, StoreError> {
        let _live = self.live()?;
        self.inner
            .groups
            .redrive(&self.inner.messages, group, offsets, true)
    }

    /// `group`'s dead letters with reasons, times and payloads, oldest first.
    ///
    /// # Errors
    ///
    /// `Topic(UnknownGroup)`; I/O errors and corruption.
    pub fn dead_letter_info(&self, group: &str) -> Result<Vec<DeadLetterInfo<Bytes>>, StoreError> {
        let _live = self.live()?;
        self.inner
            .groups
            .dead_letter_info(&self.inner.messages, group)
    }

    /// `group`'s counters.
    ///
    /// # Errors
    ///
    /// `Topic(UnknownGroup)`; I/O errors (writing a due lease expiry first).
    pub fn group_counters(&self, group: &str) -> Result<GroupCounters, StoreError> {
        let _live = self.live()?;
        self.inner
            .groups
            .read(&self.inner.messages, group, |entry| entry.state.counters())
    }

    /// `group`'s settings.
    ///
    /// # Errors
    ///
    /// As [`group_counters`](Self::group_counters).
    pub fn group_config(&self, group: &str) -> Result<GroupConfig, StoreError> {
        let _live = self.live()?;
        self.inner
            .groups
            .read(&self.inner.messages, group, |entry| *entry.state.config())
    }

    /// How long from now (the store's clock) until a poll of `group` can find something
    /// new with no other call in between: a lease running out or a retry delay ending
    /// ([`GroupState::next_due_ms`](mailroom::group::GroupState::next_due_ms)).
    /// `Some(Duration::ZERO)` if that is due already, `None` if nothing in the group
    /// waits on the clock (only a publish, ack, nack or redrive can change a poll's
    /// answer then). A long poll sleeps this long instead of polling on a timer.
    ///
    /// Unlike the other reads this writes nothing and never waits for the disk (a short
    /// lock of the group), so it is cheap to call from an async task after every empty
    /// poll. So a lease that has run out is not expired here: it is reported as due
    /// (zero), and the poll that follows expires it.
    ///
    /// # Errors
    ///
    /// `Topic(UnknownGroup)`; fail-stop.
    ///
    /// # Example
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    ///
    /// use bytes::Bytes;
    /// use mailroom::clock::ManualClock;
    /// use mailroom::group::GroupConfig;
    /// use mailroom::topic::StartPosition;
    /// use mailroom_store::{Store, StoreOptions};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let clock = Arc::new(ManualClock::new(1_000));
    /// let options = StoreOptions { clock: clock.clone(), ..StoreOptions::default() };
    /// let store = Store::open(dir.path(), options)?;
    /// store.create_topic("t")?;
    /// let topic = store.topic("t")?;
    /// let config = GroupConfig::new(3).with_lease_ms(5_000);
    /// topic.create_group_with("g", StartPosition::Earliest, config)?;
    /// assert_eq!(topic.next_due_in("g")?, None);
    /// topic.publish(Bytes::from_static(b"job"))?;
    /// topic.poll("g")?.expect("a message"); // leased until 6,000 ms
    /// clock.advance_ms(2_000);
    /// assert_eq!(topic.next_due_in("g")?, Some(Duration::from_millis(3_000)));
    /// clock.advance_ms(9_000);
    /// assert_eq!(topic.next_due_in("g")?, Some(Duration::ZERO));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn next_due_in(&self, group: &str) -> Result<Option<Duration>, StoreError> {
        let _live = self.live()?;
        let due_ms = self
            .inner
            .groups
            .peek(group, |entry| entry.state.next_due_ms())?;
        let now_ms = self.inner.clock.now_ms();
        Ok(due_ms.map(|due_ms| Duration::from_millis(due_ms.saturating_sub(now_ms))))
    }

    /// Every delivery of `group` in flight, by offset.
    ///
    /// # Errors
    ///
    /// As [`group_counters`](Self::group_counters).
    pub fn in_flight(&self, group: &str) -> Result<Vec<DeliveryId>, StoreError> {
        let _live = self.live()?;
        self.inner
            .groups
            .read(&self.inner.messages, group, |entry| {
                entry.state.deliveries_in_flight()
            })
    }
}
