//! The operations beyond the seed on [`Topic`]: groups with settings, consumer
//! identities, nack kinds, lease extension, redrive and purge, counters. Their
//! [`GroupHandle`](super::GroupHandle) twins are in `handle.rs`.
//!
//! Every one of them plans and applies through [`crate::group`], like the seed's.

use std::ops::Range;
use std::sync::Arc;

use super::registry::Registry;
use super::time::TopicTime;
use super::{DeadLetterInfo, Delivery, DeliveryId, Nack, StartPosition, Topic, TopicError};
use crate::clock::Clock;
use crate::group::{ArgumentError, GroupConfig, GroupCounters, GroupState, NackOptions};

impl<M: Clone> Topic<M> {
    /// An empty topic whose groups read time from `clock`: the one way to use leases,
    /// backoff and delays, which a topic without a clock refuses (its time would stand
    /// still, so they would never run out).
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
    ///     .create_group_with("g", StartPosition::Earliest, GroupConfig::new(3).with_lease_ms(1_000))
    ///     .unwrap();
    /// topic.publish("job");
    /// let first = topic.poll("g").unwrap().unwrap();
    /// clock.advance_ms(1_000);
    /// // The lease ran out: the old owner's ack is refused, the next poll is attempt 2.
    /// assert!(topic.ack("g", first.id()).is_err());
    /// assert_eq!(topic.poll("g").unwrap().unwrap().attempt, 2);
    /// ```
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        let mut topic = Topic::new();
        topic.time = TopicTime::new(clock);
        topic
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

    /// Polls as `consumer`: its own delivery in flight if it has one (same attempt), else
    /// a new delivery if fewer than `max_in_flight` are in flight, else `None`. See
    /// [`crate::group`] for which message comes next.
    ///
    /// # Errors
    ///
    /// [`TopicError::UnknownGroup`]; [`TopicError::InvalidArgument`] for an empty
    /// consumer or one longer than [`CONSUMER_BYTES_MAX`].
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

    /// Puts this group's dead letters with offsets in `offsets` (`0..u64::MAX` for all)
    /// back for delivery, with a fresh failure budget; returns how many. Other groups are
    /// untouched.
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
    /// topic.create_group("g", 1).unwrap();
    /// topic.publish("poison");
    /// let first = topic.poll("g").unwrap().unwrap();
    /// topic.nack("g", first.id()).unwrap();
    /// assert_eq!(topic.redrive("g", 0..u64::MAX).unwrap(), 1);
    /// // Delivered again with the next attempt number; a late ack of attempt 1 fails.
    /// let again = topic.poll("g").unwrap().unwrap();
    /// assert_eq!((again.offset, again.attempt), (0, 2));
    /// assert!(topic.ack("g", first.id()).is_err());
    /// topic.ack("g", again.id()).unwrap();
    /// assert!(topic.dead_letters("g").unwrap().is_empty());
    /// ```
    pub fn redrive(&self, group: &str, offsets: Range<u64>) -> Result<u64, TopicError> {
        let now_ms = self.time.now_ms();
        self.groups
            .with(group, |group| group.redrive(offsets, false, now_ms))
    }

    /// Deletes this group's dead letters with offsets in `offsets`; returns how many.
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
    /// topic.create_group("g", 1).unwrap();
    /// topic.publish("poison");
    /// let first = topic.poll("g").unwrap().unwrap();
    /// topic.nack("g", first.id()).unwrap();
    /// assert_eq!(topic.purge("g", 0..1).unwrap(), 1);
    /// assert!(topic.dead_letters("g").unwrap().is_empty());
    /// ```
    pub fn purge(&self, group: &str, offsets: Range<u64>) -> Result<u64, TopicError> {
        let now_ms = self.time.now_ms();
        self.groups
            .with(group, |group| group.redrive(offsets, true, now_ms))
    }

    /// The group's dead letters with the reason of their final failure and when it
    /// happened, oldest first.
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
    /// topic.create_group("g", 1).unwrap();
    /// topic.publish("x");
    /// let first = topic.poll("g").unwrap().unwrap();
    /// topic.nack("g", first.id()).unwrap();
    /// let info = &topic.dead_letter_info("g").unwrap()[0];
    /// assert_eq!((info.offset, info.attempts, info.reason.as_deref()), (0, 1, None));
    /// ```
    pub fn dead_letter_info(&self, group: &str) -> Result<Vec<DeadLetterInfo<M>>, TopicError> {
        let now_ms = self.time.now_ms();
        self.groups
            .with(group, |group| group.dead_letter_info(&self.log, now_ms))
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
}

fn create(registry: &Registry, name: &str, machine: GroupState) -> Result<(), TopicError> {
    registry.create(name, machine).map(drop)
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
