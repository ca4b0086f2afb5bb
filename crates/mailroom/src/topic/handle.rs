//! [`GroupHandle`]: one group of a topic, without the name lookup, with every
//! operation a group has.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use super::consumer_group::ConsumerGroup;
use super::deliveries::{check_consumer, check_nack};
use super::log::Log;
use super::time::TopicTime;
use super::{DeadLetter, DeadLetterInfo, Delivery, DeliveryId, GroupInfo, Nack, TopicError};
use crate::group::{GroupCounters, GroupState, NackOptions};

/// One consumer group of a [`Topic`](super::Topic), from [`Topic::group`](super::Topic::group).
///
/// It follows exactly the same rules as the topic's by-name methods and shares the same
/// state: a delivery polled through a handle can be acked by name, and the reverse. It
/// only skips finding the group by name, which makes it the fast path for a consumer loop.
/// Cloning a handle is cheap and the clones share the group.
///
/// After [`Topic::delete_group`](super::Topic::delete_group), every call answers
/// [`TopicError::UnknownGroup`], even if a new group of the same name is created: a handle
/// names one group's life, not a name.
pub struct GroupHandle<M> {
    pub(super) log: Arc<Log<M>>,
    pub(super) group: Arc<ConsumerGroup>,
    pub(super) time: TopicTime,
}

impl<M: Clone> GroupHandle<M> {
    pub(crate) fn new(log: Arc<Log<M>>, group: Arc<ConsumerGroup>, time: TopicTime) -> Self {
        GroupHandle { log, group, time }
    }

    /// The group's name.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::Topic;
    ///
    /// let topic: Topic<u64> = Topic::new();
    /// topic.create_group("audit", 1).unwrap();
    /// assert_eq!(topic.group("audit").unwrap().name(), "audit");
    /// ```
    pub fn name(&self) -> &str {
        self.group.name()
    }

    /// As [`Topic::poll`](super::Topic::poll).
    ///
    /// # Errors
    ///
    /// [`TopicError::UnknownGroup`] if the group was deleted.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::Topic;
    ///
    /// let topic = Topic::new();
    /// topic.create_group("g", 1).unwrap();
    /// let group = topic.group("g").unwrap();
    /// assert_eq!(group.poll().unwrap(), None);
    /// topic.publish("m");
    /// assert_eq!(group.poll().unwrap().unwrap().message, "m");
    /// ```
    #[inline]
    pub fn poll(&self) -> Result<Option<Delivery<M>>, TopicError> {
        self.group.poll(&self.log, self.time.now_ms(), None)
    }

    /// As [`Topic::ack`](super::Topic::ack).
    ///
    /// # Errors
    ///
    /// - [`TopicError::UnknownGroup`] if the group was deleted.
    /// - [`TopicError::NotOwned`] unless `delivery` is exactly the in-flight delivery.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::Topic;
    ///
    /// let topic = Topic::new();
    /// topic.create_group("g", 1).unwrap();
    /// let group = topic.group("g").unwrap();
    /// topic.publish(1u32);
    /// let delivery = group.poll().unwrap().unwrap();
    /// group.ack(delivery.id()).unwrap();
    /// assert!(group.ack(delivery.id()).is_err());
    /// ```
    #[inline]
    pub fn ack(&self, delivery: DeliveryId) -> Result<(), TopicError> {
        self.group.ack(delivery, self.time.now_ms())
    }

    /// As [`Topic::nack`](super::Topic::nack).
    ///
    /// # Errors
    ///
    /// - [`TopicError::UnknownGroup`] if the group was deleted.
    /// - [`TopicError::NotOwned`] unless `delivery` is exactly the in-flight delivery.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::{Nack, Topic};
    ///
    /// let topic = Topic::new();
    /// topic.create_group("g", 1).unwrap();
    /// let group = topic.group("g").unwrap();
    /// topic.publish(1u32);
    /// let delivery = group.poll().unwrap().unwrap();
    /// assert_eq!(group.nack(delivery.id()).unwrap(), Nack::DeadLettered);
    /// ```
    #[inline]
    pub fn nack(&self, delivery: DeliveryId) -> Result<Nack, TopicError> {
        self.group
            .nack(delivery, &NackOptions::default(), self.time.now_ms())
    }

    /// As [`Topic::dead_letters`](super::Topic::dead_letters).
    ///
    /// # Errors
    ///
    /// [`TopicError::UnknownGroup`] if the group was deleted.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::Topic;
    ///
    /// let topic = Topic::new();
    /// topic.create_group("g", 1).unwrap();
    /// let group = topic.group("g").unwrap();
    /// topic.publish("bad");
    /// let delivery = group.poll().unwrap().unwrap();
    /// group.nack(delivery.id()).unwrap();
    /// assert_eq!(group.dead_letters().unwrap()[0].message, "bad");
    /// ```
    pub fn dead_letters(&self) -> Result<Vec<DeadLetter<M>>, TopicError> {
        self.group.dead_letters(&self.log, self.time.now_ms())
    }

    /// As [`Topic::position`](super::Topic::position).
    ///
    /// # Errors
    ///
    /// [`TopicError::UnknownGroup`] if the group was deleted.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::{StartPosition, Topic};
    ///
    /// let topic = Topic::new();
    /// topic.publish(0u8);
    /// topic.create_group_at("g", 1, StartPosition::Latest).unwrap();
    /// assert_eq!(topic.group("g").unwrap().position().unwrap(), 1);
    /// ```
    pub fn position(&self) -> Result<u64, TopicError> {
        self.group.position(self.time.now_ms())
    }

    /// As [`Topic::group_info`](super::Topic::group_info).
    ///
    /// # Errors
    ///
    /// [`TopicError::UnknownGroup`] if the group was deleted.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::{Topic, TopicError};
    ///
    /// let topic: Topic<u8> = Topic::new();
    /// topic.create_group("g", 4).unwrap();
    /// let group = topic.group("g").unwrap();
    /// assert_eq!(group.info().unwrap().max_attempts, 4);
    /// topic.delete_group("g").unwrap();
    /// assert!(matches!(group.info(), Err(TopicError::UnknownGroup { .. })));
    /// ```
    pub fn info(&self) -> Result<GroupInfo, TopicError> {
        self.group.info(&self.log, self.time.now_ms())
    }
}

impl<M> Clone for GroupHandle<M> {
    fn clone(&self) -> Self {
        GroupHandle {
            log: Arc::clone(&self.log),
            group: Arc::clone(&self.group),
            time: self.time.clone(),
        }
    }
}

impl<M> fmt::Debug for GroupHandle<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GroupHandle")
            .field("group", &self.group.name())
            .finish_non_exhaustive()
    }
}

impl<M: Clone> GroupHandle<M> {
    /// As [`Topic::poll_as`](super::Topic::poll_as).
    ///
    /// # Errors
    ///
    /// As [`Topic::poll_as`](super::Topic::poll_as).
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::Topic;
    ///
    /// let topic = Topic::new();
    /// topic.create_group("g", 1).unwrap();
    /// topic.publish('m');
    /// let group = topic.group("g").unwrap();
    /// assert_eq!(group.poll_as("me").unwrap().unwrap().message, 'm');
    /// // With max_in_flight 1, another consumer gets nothing meanwhile.
    /// assert_eq!(group.poll_as("you").unwrap(), None);
    /// ```
    #[inline]
    pub fn poll_as(&self, consumer: &str) -> Result<Option<Delivery<M>>, TopicError> {
        check_consumer(consumer)?;
        self.group
            .poll(&self.log, self.time.now_ms(), Some(consumer))
    }

    /// As [`Topic::nack_with`](super::Topic::nack_with).
    ///
    /// # Errors
    ///
    /// As [`Topic::nack_with`](super::Topic::nack_with).
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::group::{NackKind, NackOptions};
    /// use mailroom::topic::{Nack, Topic};
    ///
    /// let topic = Topic::new();
    /// topic.create_group("g", 5).unwrap();
    /// topic.publish('m');
    /// let group = topic.group("g").unwrap();
    /// let delivery = group.poll().unwrap().unwrap();
    /// let reject = NackOptions::new(NackKind::Reject);
    /// assert_eq!(group.nack_with(delivery.id(), reject).unwrap(), Nack::DeadLettered);
    /// ```
    pub fn nack_with(
        &self,
        delivery: DeliveryId,
        options: NackOptions,
    ) -> Result<Nack, TopicError> {
        check_nack(&options, &self.time)?;
        self.group.nack(delivery, &options, self.time.now_ms())
    }

    /// As [`Topic::touch`](super::Topic::touch).
    ///
    /// # Errors
    ///
    /// As [`Topic::touch`](super::Topic::touch).
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::Topic;
    ///
    /// let topic = Topic::new();
    /// topic.create_group("g", 1).unwrap();
    /// topic.publish('m');
    /// let group = topic.group("g").unwrap();
    /// let delivery = group.poll().unwrap().unwrap();
    /// group.touch(delivery.id()).unwrap();
    /// ```
    pub fn touch(&self, delivery: DeliveryId) -> Result<(), TopicError> {
        self.group.touch(delivery, self.time.now_ms())
    }

    /// As [`Topic::redrive`](super::Topic::redrive).
    ///
    /// # Errors
    ///
    /// As [`Topic::redrive`](super::Topic::redrive).
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::Topic;
    ///
    /// let topic: Topic<u8> = Topic::new();
    /// topic.create_group("g", 1).unwrap();
    /// assert_eq!(topic.group("g").unwrap().redrive(0..u64::MAX).unwrap(), 0);
    /// ```
    pub fn redrive(&self, offsets: Range<u64>) -> Result<u64, TopicError> {
        self.group.redrive(offsets, false, self.time.now_ms())
    }

    /// As [`Topic::purge`](super::Topic::purge).
    ///
    /// # Errors
    ///
    /// As [`Topic::purge`](super::Topic::purge).
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::Topic;
    ///
    /// let topic: Topic<u8> = Topic::new();
    /// topic.create_group("g", 1).unwrap();
    /// assert_eq!(topic.group("g").unwrap().purge(0..10).unwrap(), 0);
    /// ```
    pub fn purge(&self, offsets: Range<u64>) -> Result<u64, TopicError> {
        self.group.redrive(offsets, true, self.time.now_ms())
    }

    /// As [`Topic::dead_letter_info`](super::Topic::dead_letter_info).
    ///
    /// # Errors
    ///
    /// As [`Topic::dead_letter_info`](super::Topic::dead_letter_info).
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::Topic;
    ///
    /// let topic: Topic<u8> = Topic::new();
    /// topic.create_group("g", 1).unwrap();
    /// assert!(topic.group("g").unwrap().dead_letter_info().unwrap().is_empty());
    /// ```
    pub fn dead_letter_info(&self) -> Result<Vec<DeadLetterInfo<M>>, TopicError> {
        self.group.dead_letter_info(&self.log, self.time.now_ms())
    }

    /// As [`Topic::group_counters`](super::Topic::group_counters).
    ///
    /// # Errors
    ///
    /// As [`Topic::group_counters`](super::Topic::group_counters).
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::Topic;
    ///
    /// let topic: Topic<u8> = Topic::new();
    /// topic.create_group("g", 1).unwrap();
    /// assert_eq!(topic.group("g").unwrap().counters().unwrap().releases, 0);
    /// ```
    pub fn counters(&self) -> Result<GroupCounters, TopicError> {
        self.group.read(self.time.now_ms(), GroupState::counters)
    }

    /// As [`Topic::in_flight`](super::Topic::in_flight).
    ///
    /// # Errors
    ///
    /// As [`Topic::in_flight`](super::Topic::in_flight).
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::Topic;
    ///
    /// let topic: Topic<u8> = Topic::new();
    /// topic.create_group("g", 1).unwrap();
    /// assert!(topic.group("g").unwrap().in_flight().unwrap().is_empty());
    /// ```
    pub fn in_flight(&self) -> Result<Vec<DeliveryId>, TopicError> {
        self.group
            .read(self.time.now_ms(), GroupState::deliveries_in_flight)
    }
}
