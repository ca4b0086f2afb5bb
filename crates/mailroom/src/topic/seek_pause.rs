//! Seeking and pausing the groups of a [`Topic`]: [`Topic::seek`], [`Topic::pause`] and
//! [`Topic::resume`]. The rules are the state machine's (`group/seek.rs`,
//! `group/pause.rs`); this room resolves the target against the log and applies the
//! change under the group's lock.

use super::{StartPosition, Topic, TopicError};
use crate::group::{ArgumentError, Pause};

impl<M: Clone> Topic<M> {
    /// Moves `group` to `to` (the oldest message, the end of the log, or an offset at
    /// most the log's length) and returns its new position. Deliveries in flight are no
    /// longer owned; a message delivered again after a seek back gets an attempt number
    /// above every one the group has used; dead letters stay.
    ///
    /// # Errors
    ///
    /// [`TopicError::UnknownGroup`]; [`TopicError::InvalidArgument`] for an offset past
    /// the end of the log.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::{StartPosition, Topic};
    ///
    /// let topic = Topic::new();
    /// topic.create_group("g", 3).unwrap();
    /// topic.publish("a");
    /// let first = topic.poll("g").unwrap().unwrap();
    /// topic.ack("g", first.id()).unwrap();
    /// assert_eq!(topic.seek("g", StartPosition::Earliest).unwrap(), 0);
    /// let again = topic.poll("g").unwrap().unwrap();
    /// assert_eq!((again.offset, again.attempt), (0, 2));
    /// assert!(topic.seek("g", StartPosition::Offset(2)).is_err());
    /// ```
    pub fn seek(&self, group: &str, to: StartPosition) -> Result<u64, TopicError> {
        let now_ms = self.time.now_ms();
        self.groups.with(group, |group| {
            let log_end = self.log.len();
            let position = match to {
                StartPosition::Earliest => 0,
                StartPosition::Latest => log_end,
                StartPosition::Offset(offset) if offset <= log_end => offset,
                StartPosition::Offset(offset) => {
                    return Err(TopicError::InvalidArgument(ArgumentError::OutOfRange {
                        field: "offset",
                        min: 0,
                        max: log_end,
                        got: offset,
                    }))
                }
            };
            group.change(now_ms, |machine| Some(machine.plan_seek(position)))?;
            Ok(position)
        })
    }

    /// Pauses `group` until `until_ms` (`None`: until [`resume`](Self::resume)): polls
    /// hand out nothing new, while deliveries in flight can still be acked, nacked and
    /// touched. A pause replaces an earlier one.
    ///
    /// # Errors
    ///
    /// [`TopicError::UnknownGroup`]; [`TopicError::InvalidArgument`] for a timed pause on
    /// a topic without a clock (it could never end), or one whose `until_ms` is not after
    /// now or more than [`PAUSE_MS_MAX`](crate::group::PAUSE_MS_MAX) ahead.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::Topic;
    ///
    /// let topic = Topic::new();
    /// topic.create_group("g", 3).unwrap();
    /// topic.publish("a");
    /// topic.pause("g", None).unwrap();
    /// assert_eq!(topic.poll("g").unwrap(), None);
    /// assert!(topic.group_info("g").unwrap().pause.is_some());
    /// assert!(topic.resume("g").unwrap());
    /// assert!(topic.poll("g").unwrap().is_some());
    /// assert!(topic.pause("g", Some(10)).is_err()); // no clock
    /// ```
    pub fn pause(&self, group: &str, until_ms: Option<u64>) -> Result<(), TopicError> {
        if until_ms.is_some() && !self.time.is_set() {
            return Err(TopicError::InvalidArgument(ArgumentError::Unsupported {
                reason: "a timed pause needs a topic with a clock (Topic::with_clock)",
            }));
        }
        let now_ms = self.time.now_ms();
        self.groups.with(group, |group| {
            if let Some(until_ms) = until_ms {
                Pause::check_until(until_ms, now_ms)?;
            }
            group.change(now_ms, |machine| Some(machine.plan_pause(until_ms)))
        })?;
        Ok(())
    }

    /// Ends `group`'s pause; returns whether one was recorded (a timed pause whose end
    /// has passed counts).
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
    /// topic.create_group("g", 3).unwrap();
    /// assert!(!topic.resume("g").unwrap());
    /// ```
    pub fn resume(&self, group: &str) -> Result<bool, TopicError> {
        let now_ms = self.time.now_ms();
        self.groups.with(group, |group| {
            group.change(now_ms, |machine| machine.plan_resume())
        })
    }
}
