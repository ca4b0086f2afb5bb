//! Batches: poll, ack and nack several deliveries of one group under one hold of its
//! lock, on [`Topic`] and on [`GroupHandle`].
//!
//! A batch does exactly what the same single operations would do one after another, in
//! the documented order, with nothing from other callers in between:
//!
//! - [`poll_batch`](Topic::poll_batch) first applies due lease expiries (as every call
//!   does), then returns the consumer's own deliveries in flight, then makes new
//!   deliveries for it one by one until it has `max` or the group has nothing more to
//!   hand out: the log is drained, `max_in_flight` deliveries are in flight, or a
//!   delayed message holds back the rest. Owned ones come first, then new ones, each by
//!   ascending offset. Every delivery it returns is owned by the consumer, so repeating
//!   the batch returns the same deliveries with the same attempts, and a plain poll by
//!   that consumer returns the first of them. With `max_in_flight` 1 a batch is a poll:
//!   at most one delivery.
//! - [`ack_batch`](Topic::ack_batch) and [`nack_batch`](Topic::nack_batch) settle each
//!   named delivery in order. Each inner result is what a single ack (or nack) would
//!   have answered at that point, so a delivery named twice is `NotOwned` the second
//!   time, and a refused one does not stop the rest.
//! - [`ack_then_poll_batch`](Topic::ack_then_poll_batch) is `ack_batch` followed by
//!   `poll_batch` under the same hold of the lock: a consumer acks its last round and
//!   asks for the next in one call, and the slots the acks free are refilled at once.
//!
//! Arguments are checked before the group is looked up.

use super::consumer_group::AckedThenPolled;
use super::deliveries::{check_consumer, check_nack};
use super::{Delivery, DeliveryId, GroupHandle, Nack, Topic, TopicError, BATCH_DELIVERIES_MAX};
use crate::group::{ArgumentError, NackOptions, NotOwned};

impl<M: Clone> Topic<M> {
    /// Polls up to `max` deliveries as `consumer` (`None`: the anonymous consumer of
    /// [`poll`](Self::poll)): its own deliveries in flight, then new ones, owned by it.
    /// See [the batch rules](crate::topic#batches) for the order and when it stops.
    ///
    /// # Errors
    ///
    /// - [`TopicError::InvalidArgument`] if `max` is 0 or above [`BATCH_DELIVERIES_MAX`],
    ///   or for a consumer [`poll_as`](Self::poll_as) refuses.
    /// - [`TopicError::UnknownGroup`].
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::group::GroupConfig;
    /// use mailroom::topic::{StartPosition, Topic};
    ///
    /// let topic = Topic::new();
    /// let config = GroupConfig::new(3).with_max_in_flight(4);
    /// topic.create_group_with("g", StartPosition::Earliest, config).unwrap();
    /// for message in ["a", "b", "c"] {
    ///     topic.publish(message);
    /// }
    /// let batch = topic.poll_batch("g", Some("w1"), 2).unwrap();
    /// let offsets: Vec<u64> = batch.iter().map(|d| d.offset).collect();
    /// assert_eq!(offsets, [0, 1]);
    /// // Owned ones come back first, same attempts, then a new one.
    /// let again = topic.poll_batch("g", Some("w1"), 10).unwrap();
    /// assert_eq!(&again[..2], &batch[..]);
    /// assert_eq!(again[2].message, "c");
    /// ```
    pub fn poll_batch(
        &self,
        group: &str,
        consumer: Option<&str>,
        max: usize,
    ) -> Result<Vec<Delivery<M>>, TopicError> {
        check_batch_poll(consumer, max)?;
        let now_ms = self.time.now_ms();
        self.groups.with(group, |group| {
            group.poll_batch(&self.log, now_ms, consumer, max)
        })
    }

    /// Acks each of `deliveries` in order, as [`ack`](Self::ack) would one by one.
    /// Returns one result per delivery: `Ok` if it was acked, else why it was not owned
    /// at that point. An empty list answers an empty list.
    ///
    /// # Errors
    ///
    /// [`TopicError::InvalidArgument`] for more than [`BATCH_DELIVERIES_MAX`]
    /// deliveries; [`TopicError::UnknownGroup`]. Nothing is acked then.
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
    /// let ids: Vec<_> = topic.poll_batch("g", None, 2).unwrap().iter().map(|d| d.id()).collect();
    /// // The second naming of the first delivery is refused; the others are acked.
    /// let results = topic.ack_batch("g", &[ids[0], ids[0], ids[1]]).unwrap();
    /// assert!(results[0].is_ok() && results[1].is_err() && results[2].is_ok());
    /// assert_eq!(topic.position("g").unwrap(), 2);
    /// ```
    pub fn ack_batch(
        &self,
        group: &str,
        deliveries: &[DeliveryId],
    ) -> Result<Vec<Result<(), NotOwned>>, TopicError> {
        check_batch_len(deliveries)?;
        let now_ms = self.time.now_ms();
        self.groups
            .with(group, |group| group.ack_batch(deliveries, now_ms))
    }

    /// Nacks, releases or rejects each of `deliveries` in order per `options`, as
    /// [`nack_with`](Self::nack_with) would one by one. Returns one result per delivery:
    /// what the nack did, or why it was not owned at that point.
    ///
    /// # Errors
    ///
    /// [`TopicError::InvalidArgument`] for more than [`BATCH_DELIVERIES_MAX`] deliveries
    /// or options [`nack_with`](Self::nack_with) refuses; [`TopicError::UnknownGroup`].
    /// Nothing is nacked then.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::group::{GroupConfig, NackKind, NackOptions};
    /// use mailroom::topic::{Nack, StartPosition, Topic};
    ///
    /// let topic = Topic::new();
    /// let config = GroupConfig::new(2).with_max_in_flight(2);
    /// topic.create_group_with("g", StartPosition::Earliest, config).unwrap();
    /// topic.publish("a");
    /// topic.publish("b");
    /// let ids: Vec<_> = topic.poll_batch("g", None, 2).unwrap().iter().map(|d| d.id()).collect();
    /// let reject = NackOptions::new(NackKind::Reject);
    /// let results = topic.nack_batch("g", &ids, &reject).unwrap();
    /// assert_eq!(results, [Ok(Nack::DeadLettered), Ok(Nack::DeadLettered)]);
    /// assert_eq!(topic.dead_letters("g").unwrap().len(), 2);
    /// ```
    pub fn nack_batch(
        &self,
        group: &str,
        deliveries: &[DeliveryId],
        options: &NackOptions,
    ) -> Result<Vec<Result<Nack, NotOwned>>, TopicError> {
        check_batch_len(deliveries)?;
        check_nack(options, &self.time)?;
        let now_ms = self.time.now_ms();
        self.groups
            .with(group, |group| group.nack_batch(deliveries, options, now_ms))
    }

    /// Acks each of `acks` in order, then polls up to `max` deliveries as `consumer`,
    /// with nothing from other callers in between: exactly [`ack_batch`](Self::ack_batch)
    /// followed by [`poll_batch`](Self::poll_batch). Returns one result per ack, then the
    /// deliveries. A consumer working in rounds acks the last round and gets the next one
    /// in a single call.
    ///
    /// # Errors
    ///
    /// As [`ack_batch`](Self::ack_batch) and [`poll_batch`](Self::poll_batch); all
    /// arguments are checked first, and nothing is acked if one is refused.
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
    /// for message in ["a", "b", "c", "d"] {
    ///     topic.publish(message);
    /// }
    /// let first = topic.poll_batch("g", Some("w1"), 2).unwrap();
    /// let ids: Vec<_> = first.iter().map(|d| d.id()).collect();
    /// // The group is full (2 in flight); the acks free both slots for the next round.
    /// let (acked, next) = topic.ack_then_poll_batch("g", &ids, Some("w1"), 2).unwrap();
    /// assert!(acked.iter().all(Result::is_ok));
    /// let messages: Vec<_> = next.iter().map(|d| d.message).collect();
    /// assert_eq!(messages, ["c", "d"]);
    /// ```
    pub fn ack_then_poll_batch(
        &self,
        group: &str,
        acks: &[DeliveryId],
        consumer: Option<&str>,
        max: usize,
    ) -> Result<AckedThenPolled<M>, TopicError> {
        check_batch_len(acks)?;
        check_batch_poll(consumer, max)?;
        let now_ms = self.time.now_ms();
        self.groups.with(group, |group| {
            group.ack_then_poll_batch(&self.log, now_ms, acks, consumer, max)
        })
    }
}

impl<M: Clone> GroupHandle<M> {
    /// As [`Topic::poll_batch`].
    ///
    /// # Errors
    ///
    /// As [`Topic::poll_batch`].
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::Topic;
    ///
    /// let topic = Topic::new();
    /// topic.create_group("g", 1).unwrap();
    /// topic.publish('a');
    /// topic.publish('b');
    /// let group = topic.group("g").unwrap();
    /// // With max_in_flight 1 a batch holds at most one delivery: it is a poll.
    /// let batch = group.poll_batch(None, 64).unwrap();
    /// assert_eq!(batch.len(), 1);
    /// assert_eq!(group.poll().unwrap().as_ref(), batch.first());
    /// ```
    pub fn poll_batch(
        &self,
        consumer: Option<&str>,
        max: usize,
    ) -> Result<Vec<Delivery<M>>, TopicError> {
        check_batch_poll(consumer, max)?;
        self.group
            .poll_batch(&self.log, self.time.now_ms(), consumer, max)
    }

    /// As [`Topic::ack_batch`].
    ///
    /// # Errors
    ///
    /// As [`Topic::ack_batch`].
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::group::GroupConfig;
    /// use mailroom::topic::{StartPosition, Topic};
    ///
    /// let topic = Topic::new();
    /// let config = GroupConfig::new(1).with_max_in_flight(8);
    /// topic.create_group_with("g", StartPosition::Earliest, config).unwrap();
    /// for n in 0..5u8 {
    ///     topic.publish(n);
    /// }
    /// let group = topic.group("g").unwrap();
    /// let ids: Vec<_> = group.poll_batch(None, 8).unwrap().iter().map(|d| d.id()).collect();
    /// assert!(group.ack_batch(&ids).unwrap().iter().all(Result::is_ok));
    /// assert_eq!(group.position().unwrap(), 5);
    /// ```
    pub fn ack_batch(
        &self,
        deliveries: &[DeliveryId],
    ) -> Result<Vec<Result<(), NotOwned>>, TopicError> {
        check_batch_len(deliveries)?;
        self.group.ack_batch(deliveries, self.time.now_ms())
    }

    /// As [`Topic::nack_batch`].
    ///
    /// # Errors
    ///
    /// As [`Topic::nack_batch`].
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::group::NackOptions;
    /// use mailroom::topic::{Nack, Topic};
    ///
    /// let topic = Topic::new();
    /// topic.create_group("g", 2).unwrap();
    /// topic.publish("m");
    /// let group = topic.group("g").unwrap();
    /// let first = group.poll().unwrap().unwrap();
    /// let results = group.nack_batch(&[first.id()], &NackOptions::default()).unwrap();
    /// assert_eq!(results, [Ok(Nack::Retry)]);
    /// assert_eq!(group.poll().unwrap().unwrap().attempt, 2);
    /// ```
    pub fn nack_batch(
        &self,
        deliveries: &[DeliveryId],
        options: &NackOptions,
    ) -> Result<Vec<Result<Nack, NotOwned>>, TopicError> {
        check_batch_len(deliveries)?;
        check_nack(options, &self.time)?;
        self.group
            .nack_batch(deliveries, options, self.time.now_ms())
    }

    /// As [`Topic::ack_then_poll_batch`].
    ///
    /// # Errors
    ///
    /// As [`Topic::ack_then_poll_batch`].
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::Topic;
    ///
    /// let topic = Topic::new();
    /// topic.create_group("g", 1).unwrap();
    /// topic.publish('a');
    /// topic.publish('b');
    /// let group = topic.group("g").unwrap();
    /// let first = group.poll_batch(None, 1).unwrap();
    /// let (acked, next) = group.ack_then_poll_batch(&[first[0].id()], None, 1).unwrap();
    /// assert_eq!(acked, [Ok(())]);
    /// assert_eq!(next[0].message, 'b');
    /// ```
    pub fn ack_then_poll_batch(
        &self,
        acks: &[DeliveryId],
        consumer: Option<&str>,
        max: usize,
    ) -> Result<AckedThenPolled<M>, TopicError> {
        check_batch_len(acks)?;
        check_batch_poll(consumer, max)?;
        self.group
            .ack_then_poll_batch(&self.log, self.time.now_ms(), acks, consumer, max)
    }
}

/// Checks a batch poll's arguments: `max` in `1..=BATCH_DELIVERIES_MAX` and a consumer
/// name as [`Topic::poll_as`] takes it. Every home of a topic (this one, the durable
/// store) checks batches with this one rule.
///
/// # Errors
/// [`TopicError::InvalidArgument`], with the limit in numbers.
///
/// # Example
///
/// ```
/// use mailroom::topic::check_batch_poll;
/// assert!(check_batch_poll(Some("w1"), 64).is_ok());
/// assert!(check_batch_poll(None, 0).is_err());
/// assert!(check_batch_poll(Some(""), 1).is_err());
/// ```
pub fn check_batch_poll(consumer: Option<&str>, max: usize) -> Result<(), TopicError> {
    if max == 0 || max > BATCH_DELIVERIES_MAX {
        return Err(TopicError::InvalidArgument(ArgumentError::OutOfRange {
            field: "max",
            min: 1,
            max: BATCH_DELIVERIES_MAX as u64,
            got: max as u64,
        }));
    }
    consumer.map_or(Ok(()), check_consumer)
}

/// Checks that an ack or nack batch names at most `BATCH_DELIVERIES_MAX` deliveries (the
/// one rule for every home of a topic).
///
/// # Errors
/// [`TopicError::InvalidArgument`], with the limit in numbers.
///
/// # Example
///
/// ```
/// use mailroom::topic::{check_batch_len, DeliveryId, BATCH_DELIVERIES_MAX};
/// let id = DeliveryId { offset: 0, attempt: 1 };
/// assert!(check_batch_len(&[id; 3]).is_ok());
/// assert!(check_batch_len(&vec![id; BATCH_DELIVERIES_MAX + 1]).is_err());
/// ```
pub fn check_batch_len(deliveries: &[DeliveryId]) -> Result<(), TopicError> {
    if deliveries.len() > BATCH_DELIVERIES_MAX {
        return Err(TopicError::InvalidArgument(
            ArgumentError::CountOutOfRange {
                field: "deliveries",
                items: "deliveries",
                min: 0,
                max: BATCH_DELIVERIES_MAX as u64,
                got: deliveries.len() as u64,
            },
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::deliveries::check_consumer;
    use super::*;
    use crate::group::CONSUMER_BYTES_MAX;

    // Proves the batch and consumer messages state the limits' actual numbers rather
    // than the constants' names.
    #[test]
    fn limit_messages_spell_out_the_numbers() {
        let id = DeliveryId {
            offset: 0,
            attempt: 1,
        };
        let cases = [
            (check_batch_poll(None, 0), BATCH_DELIVERIES_MAX),
            (
                check_batch_len(&vec![id; BATCH_DELIVERIES_MAX + 1]),
                BATCH_DELIVERIES_MAX,
            ),
            (check_consumer(""), CONSUMER_BYTES_MAX),
        ];
        for (result, limit) in cases {
            let message = result.unwrap_err().to_string();
            assert!(message.contains(&limit.to_string()), "{message}");
            assert!(!message.contains("_MAX"), "{message}");
        }
    }
}
