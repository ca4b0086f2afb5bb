//! The groups of a [`Topic`]: creating them (with or without settings), deleting them,
//! looking one up, and what operators read of them (information, settings, counters,
//! deliveries in flight, position). Their [`GroupHandle`] twins are in `handle.rs`.

use std::sync::Arc;

use super::registry::Registry;
use super::{DeliveryId, GroupHandle, GroupInfo, StartPosition, Topic, TopicError};
use crate::group::{ArgumentError, GroupConfig, GroupCounters, GroupState};

impl<M: Clone> Topic<M> {
    /// Creates a group that starts at the beginning of the log (offset 0) and allows
    /// `max_attempts` failures of each message
    /// ([`GroupConfig::max_attempts`](crate::group::GroupConfig::max_attempts)): without
    /// releases and redrives, at most `max_attempts` deliveries of each message.
    ///
    /// # Errors
    ///
    /// - [`TopicError::InvalidArgument`] if `group` is empty or longer than
    ///   [`GROUP_NAME_BYTES_MAX`](super::GROUP_NAME_BYTES_MAX), if `max_attempts` is 0,
    ///   or if the topic already has [`GROUPS_MAX`](super::GROUPS_MAX) groups.
    /// - [`TopicError::GroupExists`] if a group of that name exists.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::{Topic, TopicError};
    ///
    /// let topic: Topic<u64> = Topic::new();
    /// topic.create_group("billing", 3).unwrap();
    /// assert!(matches!(topic.create_group("billing", 3), Err(TopicError::GroupExists { .. })));
    /// assert!(matches!(topic.create_group("", 3), Err(TopicError::InvalidArgument { .. })));
    /// assert!(matches!(topic.create_group("audit", 0), Err(TopicError::InvalidArgument { .. })));
    /// ```
    pub fn create_group(&self, group: &str, max_attempts: u32) -> Result<(), TopicError> {
        self.create_group_at(group, max_attempts, StartPosition::Earliest)
    }

    /// Creates a group that starts at `start`: the oldest message, the end of the log as
    /// it is now, or a given offset.
    ///
    /// # Errors
    ///
    /// As [`create_group`](Self::create_group), and [`TopicError::InvalidArgument`] if a
    /// [`StartPosition::Offset`] lies past the end of the log.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::{StartPosition, Topic};
    ///
    /// let topic = Topic::new();
    /// topic.publish("old");
    /// topic.create_group_at("live", 1, StartPosition::Latest).unwrap();
    /// topic.create_group_at("replay", 1, StartPosition::Offset(1)).unwrap();
    /// assert!(topic.create_group_at("future", 1, StartPosition::Offset(2)).is_err());
    /// assert_eq!(topic.poll("live").unwrap(), None);
    /// topic.publish("new");
    /// assert_eq!(topic.poll("live").unwrap().unwrap().message, "new");
    /// assert_eq!(topic.position("replay").unwrap(), 1);
    /// ```
    pub fn create_group_at(
        &self,
        group: &str,
        max_attempts: u32,
        start: StartPosition,
    ) -> Result<(), TopicError> {
        self.create_group_with(group, start, GroupConfig::new(max_attempts))
    }

    /// Creates a group with `config` starting at `start`.
    ///
    /// # Errors
    ///
    /// As [`create_group_at`](Self::create_group_at), and
    /// [`TopicError::InvalidArgument`] for a setting out of range
    /// ([`GroupConfig::check`]) or a lease or backoff on a topic without a clock.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::group::GroupConfig;
    /// use mailroom::topic::{StartPosition, Topic};
    ///
    /// let topic = Topic::new();
    /// let config = GroupConfig::new(3).with_max_in_flight(2);
    /// topic.create_group_with("g", StartPosition::Earliest, config).unwrap();
    /// topic.publish("a");
    /// topic.publish("b");
    /// let a = topic.poll_as("g", "worker-1").unwrap().unwrap();
    /// let b = topic.poll_as("g", "worker-2").unwrap().unwrap();
    /// assert_eq!((a.offset, b.offset), (0, 1));
    /// // Without a clock, a lease is refused.
    /// assert!(topic
    ///     .create_group_with("h", StartPosition::Earliest, GroupConfig::new(1).with_lease_ms(10))
    ///     .is_err());
    /// ```
    pub fn create_group_with(
        &self,
        group: &str,
        start: StartPosition,
        config: GroupConfig,
    ) -> Result<(), TopicError> {
        let log_end = self.log.len();
        let position = match start {
            StartPosition::Earliest => 0,
            StartPosition::Latest => log_end,
            StartPosition::Offset(offset) if offset <= log_end => offset,
            StartPosition::Offset(offset) => {
                return Err(TopicError::InvalidArgument(ArgumentError::OutOfRange {
                    field: "start",
                    min: 0,
                    max: log_end,
                    got: offset,
                }))
            }
        };
        if config.uses_time() && !self.time.is_set() {
            return Err(TopicError::InvalidArgument(ArgumentError::Unsupported {
                reason: "leases and backoff need a topic with a clock (Topic::with_clock)",
            }));
        }
        let machine = GroupState::with_config(config, position)?;
        create(&self.groups, group, machine)
    }

    /// Deletes a group with its cursor, in-flight delivery and dead letters. Handles to
    /// it answer [`TopicError::UnknownGroup`] from then on, even if a group of the same
    /// name is created later. The log is untouched.
    ///
    /// # Errors
    ///
    /// [`TopicError::UnknownGroup`] if no group of that name exists.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::{Topic, TopicError};
    ///
    /// let topic: Topic<u64> = Topic::new();
    /// topic.create_group("g", 1).unwrap();
    /// topic.delete_group("g").unwrap();
    /// assert!(matches!(topic.position("g"), Err(TopicError::UnknownGroup { .. })));
    /// assert!(topic.delete_group("g").is_err());
    /// ```
    pub fn delete_group(&self, group: &str) -> Result<(), TopicError> {
        self.groups.delete(group)
    }

    /// The names of all groups, sorted.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::Topic;
    ///
    /// let topic: Topic<u64> = Topic::new();
    /// topic.create_group("b", 1).unwrap();
    /// topic.create_group("a", 1).unwrap();
    /// assert_eq!(topic.groups(), ["a", "b"]);
    /// ```
    pub fn groups(&self) -> Vec<String> {
        self.groups.names()
    }

    /// A handle to one group that skips the name lookup on every call: the fast path for
    /// a consumer loop. It shares the log, so it may outlive this `Topic` value.
    ///
    /// # Errors
    ///
    /// [`TopicError::UnknownGroup`] if no group of that name exists.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::Topic;
    ///
    /// let topic = Topic::new();
    /// topic.create_group("g", 1).unwrap();
    /// let group = topic.group("g").unwrap();
    /// topic.publish(5u64);
    /// let delivery = group.poll().unwrap().unwrap();
    /// group.ack(delivery.id()).unwrap();
    /// assert_eq!(topic.position("g").unwrap(), 1);
    /// ```
    pub fn group(&self, group: &str) -> Result<GroupHandle<M>, TopicError> {
        let group = self.groups.get(group)?;
        Ok(GroupHandle::new(
            Arc::clone(&self.log),
            group,
            self.time.clone(),
        ))
    }

    /// A snapshot of one group: position, attempt, in-flight delivery, `max_attempts`,
    /// lag and dead-letter count.
    ///
    /// # Errors
    ///
    /// [`TopicError::UnknownGroup`] if no group of that name exists.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::Topic;
    ///
    /// let topic = Topic::new();
    /// topic.create_group("g", 2).unwrap();
    /// topic.publish('x');
    /// topic.publish('y');
    /// let delivery = topic.poll("g").unwrap().unwrap();
    /// let info = topic.group_info("g").unwrap();
    /// assert_eq!(info.in_flight, Some(delivery.id()));
    /// assert_eq!((info.position, info.attempt, info.lag, info.dead_letters), (0, 1, 2, 0));
    /// ```
    pub fn group_info(&self, group: &str) -> Result<GroupInfo, TopicError> {
        self.groups
            .with(group, |group| group.info(&self.log, self.time.now_ms()))
    }

    /// The group's counters: redeliveries, releases, expired leases, redrives, purges.
    ///
    /// # Errors
    ///
    /// [`TopicError::UnknownGroup`].
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::Topic;
    ///
    /// let topic = Topic::new();
    /// topic.create_group("g", 2).unwrap();
    /// topic.publish(0);
    /// let first = topic.poll("g").unwrap().unwrap();
    /// topic.nack("g", first.id()).unwrap();
    /// topic.poll("g").unwrap();
    /// assert_eq!(topic.group_counters("g").unwrap().redeliveries, 1);
    /// ```
    pub fn group_counters(&self, group: &str) -> Result<GroupCounters, TopicError> {
        let now_ms = self.time.now_ms();
        self.groups
            .with(group, |group| group.read(now_ms, GroupState::counters))
    }

    /// The group's settings.
    ///
    /// # Errors
    ///
    /// [`TopicError::UnknownGroup`].
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::Topic;
    ///
    /// let topic: Topic<u8> = Topic::new();
    /// topic.create_group("g", 2).unwrap();
    /// assert_eq!(topic.group_config("g").unwrap().max_in_flight, 1);
    /// ```
    pub fn group_config(&self, group: &str) -> Result<GroupConfig, TopicError> {
        let now_ms = self.time.now_ms();
        self.groups.with(group, |group| {
            group.read(now_ms, |machine| *machine.config())
        })
    }

    /// Every delivery of the group in flight, by offset.
    ///
    /// # Errors
    ///
    /// [`TopicError::UnknownGroup`].
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::Topic;
    ///
    /// let topic = Topic::new();
    /// topic.create_group("g", 2).unwrap();
    /// topic.publish(0);
    /// let first = topic.poll("g").unwrap().unwrap();
    /// assert_eq!(topic.in_flight("g").unwrap(), [first.id()]);
    /// ```
    pub fn in_flight(&self, group: &str) -> Result<Vec<DeliveryId>, TopicError> {
        let now_ms = self.time.now_ms();
        self.groups.with(group, |group| {
            group.read(now_ms, GroupState::deliveries_in_flight)
        })
    }

    /// The offset of the next message the group has to finish (ack or dead-letter).
    ///
    /// # Errors
    ///
    /// [`TopicError::UnknownGroup`] if no group of that name exists.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::Topic;
    ///
    /// let topic: Topic<u64> = Topic::new();
    /// topic.create_group("g", 1).unwrap();
    /// assert_eq!(topic.position("g").unwrap(), 0);
    /// ```
    pub fn position(&self, group: &str) -> Result<u64, TopicError> {
        self.groups
            .with(group, |group| group.position(self.time.now_ms()))
    }
}

fn create(registry: &Registry, name: &str, machine: GroupState) -> Result<(), TopicError> {
    registry.create(name, machine).map(drop)
}
