//! The deliveries of a [`Topic`]'s groups by name: polls (anonymous or as a named
//! consumer), acks, nacks of every kind, and lease extension, with the checks of their
//! arguments that the group handles and batches share.

use super::time::TopicTime;
use super::{Delivery, DeliveryId, Nack, Topic, TopicError};
use crate::group::{ArgumentError, NackOptions};

impl<M: Clone> Topic<M> {
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

    /// Polls as `consumer`: its own delivery in flight if it has one (same attempt), else
    /// a new delivery if fewer than `max_in_flight` are in flight, else `None`. See
    /// [`crate::group`] for which message comes next.
    ///
    /// # Errors
    ///
    /// [`TopicError::UnknownGroup`]; [`TopicError::InvalidArgument`] for an empty
    /// consumer or one longer than [`CONSUMER_BYTES_MAX`](crate::group::CONSUMER_BYTES_MAX).
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::group::GroupConfig;
    /// use mailroom::topic::{StartPosition, Topic};
    ///
    /// let topic = Topic::new();
    /// topic
    ///     .create_group_with("g", StartPosition::Earliest, GroupConfig::new(1).with_max_in_flight(2))
    ///     .unwrap();
    /// topic.publish(1);
    /// topic.publish(2);
    /// let first = topic.poll_as("g", "a").unwrap().unwrap();
    /// // A repeated poll by the same consumer returns the same attempt.
    /// assert_eq!(topic.poll_as("g", "a").unwrap(), Some(first));
    /// ```
    pub fn poll_as(&self, group: &str, consumer: &str) -> Result<Option<Delivery<M>>, TopicError> {
        check_consumer(consumer)?;
        let now_ms = self.time.now_ms();
        self.groups
            .with(group, |group| group.poll(&self.log, now_ms, Some(consumer)))
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

    /// Nacks, releases or rejects the exact delivery in flight, per `options`.
    ///
    /// # Errors
    ///
    /// - [`TopicError::UnknownGroup`]; [`TopicError::NotOwned`] as for
    ///   [`nack`](Self::nack).
    /// - [`TopicError::InvalidArgument`] for options out of range
    ///   ([`NackOptions::check`]) or a delay on a topic without a clock.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::group::{NackKind, NackOptions};
    /// use mailroom::topic::{Nack, Topic};
    ///
    /// let topic = Topic::new();
    /// topic.create_group("g", 1).unwrap();
    /// topic.publish("m");
    /// // A release is not a failure: with max_attempts 1 the message is still retried.
    /// let first = topic.poll("g").unwrap().unwrap();
    /// let release = NackOptions::new(NackKind::Release);
    /// assert_eq!(topic.nack_with("g", first.id(), release).unwrap(), Nack::Retry);
    /// // A reject dead-letters at once, with its reason.
    /// let second = topic.poll("g").unwrap().unwrap();
    /// let reject = NackOptions::new(NackKind::Reject).with_reason("malformed");
    /// assert_eq!(topic.nack_with("g", second.id(), reject).unwrap(), Nack::DeadLettered);
    /// assert_eq!(topic.dead_letter_info("g").unwrap()[0].reason.as_deref(), Some("malformed"));
    /// ```
    pub fn nack_with(
        &self,
        group: &str,
        delivery: DeliveryId,
        options: NackOptions,
    ) -> Result<Nack, TopicError> {
        check_nack(&options, &self.time)?;
        let now_ms = self.time.now_ms();
        self.groups
            .with(group, |group| group.nack(delivery, &options, now_ms))
    }

    /// Extends the lease of the exact delivery in flight to `lease_ms` from now. On a
    /// group without leases it only checks ownership.
    ///
    /// # Errors
    ///
    /// [`TopicError::UnknownGroup`]; [`TopicError::NotOwned`] unless `delivery` is in
    /// flight and its lease has not run out.
    ///
    /// # Example
    ///
    /// ```
    /// use std::sync::Arc;
    /// use mailroom::clock::ManualClock;
    /// use mailroom::group::GroupConfig;
    /// use mailroom::topic::{StartPosition, Topic};
    ///
    /// let clock = Arc::new(ManualClock::new(0));
    /// let topic = Topic::with_clock(clock.clone());
    /// topic
    ///     .create_group_with("g", StartPosition::Earliest, GroupConfig::new(1).with_lease_ms(100))
    ///     .unwrap();
    /// topic.publish("long job");
    /// let delivery = topic.poll("g").unwrap().unwrap();
    /// clock.advance_ms(90);
    /// topic.touch("g", delivery.id()).unwrap(); // now owned until 190
    /// clock.advance_ms(90);
    /// topic.ack("g", delivery.id()).unwrap();
    /// ```
    pub fn touch(&self, group: &str, delivery: DeliveryId) -> Result<(), TopicError> {
        let now_ms = self.time.now_ms();
        self.groups
            .with(group, |group| group.touch(delivery, now_ms))
    }
}

pub(super) fn check_consumer(consumer: &str) -> Result<(), TopicError> {
    Ok(crate::group::check_consumer(consumer)?)
}

pub(super) fn check_nack(options: &NackOptions, time: &TopicTime) -> Result<(), TopicError> {
    options.check()?;
    if options.delay_ms.is_some_and(|delay| delay > 0) && !time.is_set() {
        return Err(TopicError::InvalidArgument(ArgumentError::Unsupported {
            reason: "a delay needs a topic with a clock (Topic::with_clock)",
        }));
    }
    Ok(())
}
