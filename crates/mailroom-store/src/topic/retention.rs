//! A topic's own retention: reading and changing it (durably, in its `SETTINGS` file),
//! enforcing it, and what it removed.
//!
//! The limits in force are the topic's own ([`TopicRetention`]) over the store-wide
//! defaults ([`StoreOptions::retention`](crate::StoreOptions)). Enforcing them deletes
//! whole sealed segments of the message log, oldest first, never the active one, and
//! (unless the topic allows it) nothing at or above the lowest group position.

use super::{settings, DurableTopic};
use crate::retention::{Retention, RetentionRemoved, TopicRetention};
use crate::StoreError;

impl DurableTopic {
    /// The topic's own retention settings (limits left to the default say so).
    pub fn retention(&self) -> TopicRetention {
        *self.inner.retention.lock()
    }

    /// The retention in force: the topic's own settings over the store-wide defaults.
    pub fn effective_retention(&self) -> Retention {
        self.retention().resolve(&self.inner.retention_defaults)
    }

    /// Replaces the topic's own retention settings; durable (its `SETTINGS` file written
    /// and synced) before it returns. Takes effect at the next
    /// [`enforce_retention`](Self::enforce_retention).
    ///
    /// # Errors
    ///
    /// [`StoreError::UnknownTopic`] after the topic was deleted; [`StoreError::Io`] if
    /// the file cannot be written (the old settings then stay in force).
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom_store::{Limit, Store, StoreOptions, TopicRetention};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let settings = TopicRetention { bytes_max: Limit::Max(1 << 30), ..TopicRetention::default() };
    /// {
    ///     let store = Store::open(dir.path(), StoreOptions::default())?;
    ///     store.create_topic("orders")?;
    ///     store.topic("orders")?.set_retention(settings)?;
    /// }
    /// let store = Store::open(dir.path(), StoreOptions::default())?;
    /// assert_eq!(store.topic("orders")?.retention(), settings);
    /// assert_eq!(store.topic("orders")?.effective_retention().bytes_max, Some(1 << 30));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_retention(&self, retention: TopicRetention) -> Result<(), StoreError> {
        self.change_retention(|current| *current = retention)
            .map(|_| ())
    }

    /// Changes the topic's own retention settings with `change`, atomically with respect
    /// to other changes (for a partial update), durably as
    /// [`set_retention`](Self::set_retention); answers the new settings. Nothing is
    /// written if `change` changes nothing.
    ///
    /// # Errors
    ///
    /// As [`set_retention`](Self::set_retention).
    pub fn change_retention(
        &self,
        change: impl FnOnce(&mut TopicRetention),
    ) -> Result<TopicRetention, StoreError> {
        let _live = self.live()?;
        let mut current = self.inner.retention.lock();
        let mut changed = *current;
        change(&mut changed);
        if changed != *current {
            let settings = settings::TopicSettings {
                retention: changed,
                idempotency: self.inner.idempotency,
            };
            settings::write(self.inner.storage.as_ref(), &self.inner.dir, &settings)?;
            *current = changed;
        }
        Ok(changed)
    }

    /// What retention removed from this topic since the store was opened. (The
    /// messages removed in all, ever, are [`start`](Self::start): offsets begin at 0 and
    /// only retention removes them.)
    pub fn retention_removed(&self) -> RetentionRemoved {
        *self.inner.removed.lock()
    }

    /// The bytes of the message log's segments on disk.
    pub fn bytes(&self) -> u64 {
        let segments = self.inner.messages.segments();
        segments.iter().map(|segment| segment.bytes).sum()
    }

    /// Deletes the message-log segments the retention in force
    /// ([`effective_retention`](Self::effective_retention)) allows at `now_ms`, and
    /// answers what went. Never the active segment; with `keep_unconsumed` nothing at or
    /// above the lowest group position.
    ///
    /// # Errors
    ///
    /// [`StoreError::UnknownTopic`] after deletion; I/O failures and fail-stop (of the
    /// message log, or of the groups, whose positions must be durable first).
    ///
    /// # Example
    ///
    /// ```
    /// use bytes::Bytes;
    /// use mailroom_store::log::LogOptions;
    /// use mailroom_store::{Limit, Store, StoreOptions, TopicRetention};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let log = LogOptions { segment_bytes_max: 100, ..LogOptions::default() };
    /// let store = Store::open(dir.path(), StoreOptions { log, ..StoreOptions::default() })?;
    /// let keep_two = TopicRetention { messages_max: Limit::Max(2), ..TopicRetention::default() };
    /// store.create_topic_with("t", &keep_two)?;
    /// let topic = store.topic("t")?;
    /// for _ in 0..10 {
    ///     topic.publish(Bytes::from(vec![0; 40]))?; // one message per segment
    /// }
    /// let removed = topic.enforce_retention(0)?;
    /// assert_eq!((removed.segments, removed.messages, topic.start()), (8, 8, 8));
    /// assert_eq!(topic.retention_removed(), removed);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn enforce_retention(&self, now_ms: u64) -> Result<RetentionRemoved, StoreError> {
        let retention = self.effective_retention();
        self.enforce(&retention, now_ms)
    }

    /// Deletes the message segments that `retention` allows at `now_ms`.
    fn enforce(&self, retention: &Retention, now_ms: u64) -> Result<RetentionRemoved, StoreError> {
        let _live = self.live()?;
        let messages = &self.inner.messages;
        // Most passes find nothing to do: decide that without the groups' locks.
        if retention.cut_offset(&messages.segments(), now_ms) <= messages.start() {
            return Ok(RetentionRemoved::default());
        }
        let removed = self.inner.groups.with_floor(|floor| {
            let segments = messages.segments();
            let mut cut = retention.cut_offset(&segments, now_ms);
            if retention.keep_unconsumed {
                if let Some(floor) = floor {
                    cut = cut.min(floor);
                }
            }
            let start = messages.start();
            if cut <= start {
                return Ok(RetentionRemoved::default());
            }
            let deleted = messages.delete_segments_before(cut)?;
            let bytes = segments[..deleted]
                .iter()
                .map(|segment| segment.bytes)
                .sum();
            Ok::<_, StoreError>(RetentionRemoved {
                segments: deleted as u64,
                bytes,
                messages: messages.start() - start,
            })
        })??;
        self.inner.removed.lock().add(removed);
        Ok(removed)
    }
}
