//! Seeking and pausing a [`DurableTopic`]'s groups, durably: each call writes one
//! record of the groups log (kinds `Seeked`, `Paused`, `Resumed`) and answers once it
//! is durable, so a restart replays it. The rules are `mailroom::group`'s.

use mailroom::group::Pause;
use mailroom::topic::{StartPosition, TopicError};

use crate::{DurableTopic, StoreError};

impl DurableTopic {
    /// Moves `group` to `to` (the oldest retained message, the end of the log, or an
    /// offset within the retained log or at its end) and returns its new position. As
    /// [`Topic::seek`](mailroom::topic::Topic::seek): deliveries in flight are no longer
    /// owned, attempt numbers stay unique, dead letters stay.
    ///
    /// # Errors
    ///
    /// `Topic(InvalidArgument)` for an offset outside the retained log;
    /// `Topic(UnknownGroup)`; I/O errors and fail-stop.
    ///
    /// # Example
    ///
    /// ```
    /// use bytes::Bytes;
    /// use mailroom::topic::StartPosition;
    /// use mailroom_store::{Store, StoreOptions};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path(), StoreOptions::default())?;
    /// store.create_topic("t")?;
    /// let topic = store.topic("t")?;
    /// topic.create_group("g", 3)?;
    /// topic.publish(Bytes::from_static(b"once more"))?;
    /// let first = topic.poll("g")?.expect("a message");
    /// topic.ack("g", first.id())?;
    /// assert_eq!(topic.seek("g", StartPosition::Earliest)?, 0);
    /// let again = topic.poll("g")?.expect("delivered again");
    /// assert_eq!((again.offset, again.attempt), (0, 2));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn seek(&self, group: &str, to: StartPosition) -> Result<u64, StoreError> {
        let _live = self.live()?;
        self.inner.groups.seek(&self.inner.messages, group, to)
    }

    /// Pauses `group` until `until_ms` (Unix ms; `None`: until [`resume`](Self::resume)).
    /// As [`Topic::pause`](mailroom::topic::Topic::pause).
    ///
    /// # Errors
    ///
    /// `Topic(UnknownGroup)`; `Topic(InvalidArgument)` for an `until_ms` not after the
    /// store clock's now or more than [`PAUSE_MS_MAX`](mailroom::group::PAUSE_MS_MAX)
    /// ahead; I/O errors and fail-stop.
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
    /// topic.create_group("g", 3)?;
    /// topic.publish(Bytes::from_static(b"later"))?;
    /// topic.pause("g", None)?;
    /// assert!(topic.poll("g")?.is_none());
    /// assert!(topic.resume("g")?);
    /// assert!(topic.poll("g")?.is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pause(&self, group: &str, until_ms: Option<u64>) -> Result<(), StoreError> {
        let _live = self.live()?;
        self.inner
            .groups
            .change(&self.inner.messages, group, |state, now_ms| {
                if let Some(until_ms) = until_ms {
                    Pause::check_until(until_ms, now_ms).map_err(TopicError::from)?;
                }
                Ok(Some(state.plan_pause(until_ms)))
            })?;
        Ok(())
    }

    /// Ends `group`'s pause; returns whether one was recorded.
    ///
    /// # Errors
    ///
    /// As [`pause`](Self::pause).
    pub fn resume(&self, group: &str) -> Result<bool, StoreError> {
        let _live = self.live()?;
        self.inner
            .groups
            .change(&self.inner.messages, group, |state, _| {
                Ok(state.plan_resume())
            })
    }
}
