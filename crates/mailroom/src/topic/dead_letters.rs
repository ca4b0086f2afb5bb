//! The dead letters of a [`Topic`]'s groups by name: reading them (with or without
//! reasons and times), redriving them back to their group, and purging them.

use std::ops::Range;

use super::{DeadLetter, DeadLetterInfo, Topic, TopicError};

impl<M: Clone> Topic<M> {
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
}
