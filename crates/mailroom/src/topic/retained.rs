//! [`Topic`]: the retained log and its consumer groups, addressed by group name.

use std::fmt;
use std::sync::Arc;

use super::handle::GroupHandle;
use super::log::Log;
use super::registry::Registry;
use super::time::TopicTime;
use super::{DeadLetter, Delivery, DeliveryId, GroupInfo, Nack, StartPosition, TopicError};
use crate::group::{GroupConfig, NackOptions};

/// A retained, append-only log of messages read by independent consumer groups.
///
/// See the [module docs](super) for the rules. Every method takes `&self`; share a topic
/// between threads with `Arc<Topic<M>>` (it is `Send + Sync` when `M` is). Messages are
/// cloned for every delivery, so use `Arc<_>` or `Bytes` for large payloads.
pub struct Topic<M> {
    pub(super) log: Arc<Log<M>>,
    pub(super) groups: Registry,
    pub(super) time: TopicTime,
}

impl<M: Clone> Topic<M> {
    /// An empty topic with no groups. Allocates no message storage until the first
    /// publish.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::Topic;
    ///
    /// let topic: Topic<String> = Topic::new();
    /// assert!(topic.is_empty());
    /// assert!(topic.groups().is_empty());
    /// ```
    pub fn new() -> Self {
        Topic {
            log: Arc::new(Log::new()),
            groups: Registry::default(),
            time: TopicTime::default(),
        }
    }

    /// Appends `message` and returns its offset: 0, 1, 2, … with no gaps, in the order
    /// the appends took the log's short append lock. Never waits on any group.
    ///
    /// # Panics
    ///
    /// If the topic already holds [`MESSAGES_MAX`](super::MESSAGES_MAX) messages (memory
    /// runs out long before that for any payload that is not zero-sized).
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::Topic;
    ///
    /// let topic = Topic::new();
    /// assert_eq!(topic.publish("a"), 0);
    /// assert_eq!(topic.publish("b"), 1);
    /// ```
    #[inline]
    pub fn publish(&self, message: M) -> u64 {
        self.log.publish(message)
    }

    /// How many messages have been published; also the offset the next one gets.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::Topic;
    ///
    /// let topic = Topic::new();
    /// topic.publish(7u64);
    /// assert_eq!(topic.len(), 1);
    /// ```
    pub fn len(&self) -> u64 {
        self.log.len()
    }

    /// Whether nothing has been published yet.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::Topic;
    ///
    /// let topic = Topic::new();
    /// assert!(topic.is_empty());
    /// topic.publish(());
    /// assert!(!topic.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

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

    /// The group's next delivery: the one in flight if there is one (same attempt), else
    /// a new attempt at the message under the cursor, else `None` at the end of the log.
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
    /// topic.create_group("g", 3).unwrap();
    /// assert_eq!(topic.poll("g").unwrap(), None);
    /// topic.publish("hello");
    /// let first = topic.poll("g").unwrap().unwrap();
    /// assert_eq!((first.offset, first.attempt, first.message), (0, 1, "hello"));
    /// // Polling again does not make a new attempt.
    /// assert_eq!(topic.poll("g").unwrap(), Some(first));
    /// ```
    pub fn poll(&self, group: &str) -> Result<Option<Delivery<M>>, TopicError> {
        self.groups.with(group, |group| {
            group.poll(&self.log, self.time.now_ms(), None)
        })
    }

    /// Acknowledges the group's in-flight delivery, moving its cursor past the message.
    ///
    /// # Errors
    ///
    /// - [`TopicError::UnknownGroup`] if no group of that name exists.
    /// - [`TopicError::NotOwned`] unless `delivery` is exactly the in-flight delivery
    ///   (same offset, same attempt); nothing changes.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::{Topic, TopicError};
    ///
    /// let topic = Topic::new();
    /// topic.create_group("g", 3).unwrap();
    /// topic.publish(1u8);
    /// let delivery = topic.poll("g").unwrap().unwrap();
    /// topic.ack("g", delivery.id()).unwrap();
    /// assert_eq!(topic.position("g").unwrap(), 1);
    /// // A second ack of the same delivery owns nothing.
    /// assert!(matches!(topic.ack("g", delivery.id()), Err(TopicError::NotOwned { .. })));
    /// ```
    pub fn ack(&self, group: &str, delivery: DeliveryId) -> Result<(), TopicError> {
        self.groups
            .with(group, |group| group.ack(delivery, self.time.now_ms()))
    }

    /// Rejects the group's in-flight delivery: a retry while attempts remain (the next
    /// poll is attempt + 1), else the message goes to this group's dead-letter queue and
    /// the cursor moves on.
    ///
    /// # Errors
    ///
    /// - [`TopicError::UnknownGroup`] if no group of that name exists.
    /// - [`TopicError::NotOwned`] unless `delivery` is exactly the in-flight delivery;
    ///   nothing changes. A repeated final nack is refused this way, so a message is
    ///   dead-lettered at most once.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::{Nack, Topic};
    ///
    /// let topic = Topic::new();
    /// topic.create_group("g", 2).unwrap();
    /// topic.publish("flaky");
    /// let first = topic.poll("g").unwrap().unwrap();
    /// assert_eq!(topic.nack("g", first.id()).unwrap(), Nack::Retry);
    /// let second = topic.poll("g").unwrap().unwrap();
    /// assert_eq!(second.attempt, 2);
    /// assert_eq!(topic.nack("g", second.id()).unwrap(), Nack::DeadLettered);
    /// assert!(topic.nack("g", second.id()).is_err());
    /// ```
    pub fn nack(&self, group: &str, delivery: DeliveryId) -> Result<Nack, TopicError> {
        let options = NackOptions::default();
        self.groups.with(group, |group| {
            group.nack(delivery, &options, self.time.now_ms())
        })
    }

    /// The group's dead-letter queue with payloads, oldest first.
    ///
    /// # Errors
    ///
    /// [`TopicError::UnknownGroup`] if no group of that name exists.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::{DeadLetter, Topic};
    ///
    /// let topic = Topic::new();
    /// topic.create_group("g", 1).unwrap();
    /// topic.publish("poison");
    /// let delivery = topic.poll("g").unwrap().unwrap();
    /// topic.nack("g", delivery.id()).unwrap();
    /// assert_eq!(
    ///     topic.dead_letters("g").unwrap(),
    ///     [DeadLetter { offset: 0, attempts: 1, message: "poison" }]
    /// );
    /// ```
    pub fn dead_letters(&self, group: &str) -> Result<Vec<DeadLetter<M>>, TopicError> {
        self.groups.with(group, |group| {
            group.dead_letters(&self.log, self.time.now_ms())
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

impl<M: Clone> Default for Topic<M> {
    /// The same as [`Topic::new`].
    fn default() -> Self {
        Topic::new()
    }
}

impl<M> fmt::Debug for Topic<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Topic")
            .field("len", &self.log.len())
            .field("groups", &self.groups.names())
            .field("clock", &self.time)
            .finish()
    }
}
