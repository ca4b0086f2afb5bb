//! The groups of a [`DurableTopic`]: creating them (with or without settings), deleting
//! them, and what operators read of them (information, settings, counters, deliveries in
//! flight, position, when a poll next finds something). They follow the rules of
//! `mailroom::group` exactly like the in-memory topic's, and each change is durable
//! before it returns.

use std::time::Duration;

use mailroom::group::{ArgumentError, DeliveryId, GroupConfig, GroupCounters, InFlightDelivery};
use mailroom::topic::{GroupInfo, StartPosition, TopicError, GROUP_NAME_BYTES_MAX};

use crate::groups::keys::KeyPeek;
use crate::{DurableTopic, StoreError};

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
    /// Creates a group that starts at the oldest retained message.
    ///
    /// # Errors
    ///
    /// As [`create_group_at`](Self::create_group_at).
    pub fn create_group(&self, group: &str, max_attempts: u32) -> Result<(), StoreError> {
        self.create_group_at(group, max_attempts, StartPosition::Earliest)
    }

    /// Creates a group that starts at `start`; `max_attempts` bounds each message's
    /// failures ([`GroupConfig::max_attempts`](mailroom::group::GroupConfig::max_attempts)).
    ///
    /// # Errors
    ///
    /// `Topic(InvalidArgument)` for an empty name, `max_attempts == 0` or a start offset
    /// outside the retained log; `Topic(GroupExists)`; [`StoreError::InvalidName`] for a
    /// name outside the store's alphabet; I/O errors.
    pub fn create_group_at(
        &self,
        group: &str,
        max_attempts: u32,
        start: StartPosition,
    ) -> Result<(), StoreError> {
        let _live = self.live()?;
        self.inner.groups.create(
            &self.inner.messages,
            group,
            GroupConfig::new(max_attempts),
            start,
        )
    }

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

    /// Deletes a group and its dead letters.
    ///
    /// # Errors
    ///
    /// `Topic(UnknownGroup)`; I/O errors.
    pub fn delete_group(&self, group: &str) -> Result<(), StoreError> {
        let _live = self.live()?;
        self.inner.groups.delete(group)
    }

    /// The group names, sorted.
    pub fn groups(&self) -> Vec<String> {
        self.inner.groups.names()
    }

    /// A snapshot of one group for operators.
    ///
    /// # Errors
    ///
    /// `Topic(UnknownGroup)`.
    pub fn group_info(&self, group: &str) -> Result<GroupInfo, StoreError> {
        let _live = self.live()?;
        self.inner.groups.info(&self.inner.messages, group)
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
        let messages = &self.inner.messages;
        let due_ms = self.inner.groups.peek(group, |entry| {
            let mut keys = KeyPeek {
                cache: &entry.keys,
                messages,
                error: None,
            };
            let due_ms = entry.state.next_due_ms_keyed(&mut keys);
            keys.error.map_or(Ok(due_ms), Err)
        })??;
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

    /// Every delivery of `group` in flight with its consumer and lease deadline, in the
    /// order of [`in_flight`](Self::in_flight).
    ///
    /// # Errors
    ///
    /// As [`group_counters`](Self::group_counters).
    pub fn in_flight_details(&self, group: &str) -> Result<Vec<InFlightDelivery>, StoreError> {
        let _live = self.live()?;
        self.inner
            .groups
            .read(&self.inner.messages, group, |entry| {
                entry.state.in_flight_details()
            })
    }

    /// The offset of the next message the group has to finish.
    ///
    /// # Errors
    ///
    /// `Topic(UnknownGroup)`.
    pub fn position(&self, group: &str) -> Result<u64, StoreError> {
        let _live = self.live()?;
        self.inner.groups.position(&self.inner.messages, group)
    }
}
