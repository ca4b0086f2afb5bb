//! The idempotency window of a topic: which idempotency keys were published recently,
//! and at which offset, so a repeated publish answers the first one's offset instead of
//! storing the message again.
//!
//! A key counts as seen while its first publish is among the topic's last
//! [`IdempotencyWindow::messages_max`] messages (by offset, whether they carry keys or
//! not) *and* was published at most [`IdempotencyWindow::age_ms_max`] ago. Both rules
//! depend only on the log (offsets, and the publish time in each record's header), so
//! the window kept in memory and the one rebuilt from the log at open are the same:
//! that is what makes the window survive a restart or a kill -9 without a file of its
//! own. Past the window a repeated key is stored again, as a new message.
//!
//! # Example
//!
//! ```
//! use mailroom_store::IdempotencyWindow;
//!
//! let window = IdempotencyWindow { messages_max: 1000, age_ms_max: 60_000 };
//! assert!(window.check().is_ok());
//! assert!(IdempotencyWindow { messages_max: 0, ..window }.check().is_err());
//! ```

use std::collections::{HashMap, VecDeque};
use std::path::Path;

use crate::log::Log;
use crate::message::message_of;
use crate::StoreError;

/// The largest [`IdempotencyWindow::messages_max`]: rebuilding a window at open reads up
/// to this many records of each topic.
pub const IDEMPOTENCY_WINDOW_MESSAGES_MAX: u64 = 1_000_000;
/// The largest [`IdempotencyWindow::age_ms_max`]: 7 days.
pub const IDEMPOTENCY_WINDOW_AGE_MS_MAX: u64 = 7 * 24 * 3600 * 1000;

/// How long a topic remembers an idempotency key: by count and by time, both at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdempotencyWindow {
    /// A key is remembered while its publish is among the topic's last this many
    /// messages. Default 10,000; 1 to [`IDEMPOTENCY_WINDOW_MESSAGES_MAX`].
    pub messages_max: u64,
    /// A key is remembered for this many milliseconds after its publish. Default
    /// 120,000 (two minutes, as NATS JetStream's duplicate window); 1 to
    /// [`IDEMPOTENCY_WINDOW_AGE_MS_MAX`].
    pub age_ms_max: u64,
}

impl Default for IdempotencyWindow {
    fn default() -> Self {
        IdempotencyWindow {
            messages_max: 10_000,
            age_ms_max: 120_000,
        }
    }
}

impl IdempotencyWindow {
    /// Checks both limits.
    ///
    /// # Errors
    /// [`StoreError::InvalidArgument`] naming the field out of range.
    pub fn check(&self) -> Result<(), StoreError> {
        for (field, value, max) in [
            (
                "messages_max",
                self.messages_max,
                IDEMPOTENCY_WINDOW_MESSAGES_MAX,
            ),
            ("age_ms_max", self.age_ms_max, IDEMPOTENCY_WINDOW_AGE_MS_MAX),
        ] {
            if value == 0 || value > max {
                return Err(StoreError::InvalidArgument {
                    reason: format!("idempotency window {field} must be 1..={max}, got {value}"),
                });
            }
        }
        Ok(())
    }
}

/// A topic's own idempotency window, kept in its `SETTINGS` file: each limit set, or
/// `None` to follow the store-wide default ([`StoreOptions::idempotency`](crate::StoreOptions)),
/// including when the default changes.
///
/// ```
/// use mailroom_store::{IdempotencyWindow, TopicIdempotency};
///
/// let defaults = IdempotencyWindow { messages_max: 1000, age_ms_max: 60_000 };
/// let own = TopicIdempotency { messages_max: Some(50), age_ms_max: None };
/// assert_eq!(own.resolve(defaults), IdempotencyWindow { messages_max: 50, age_ms_max: 60_000 });
/// assert!(TopicIdempotency { messages_max: Some(0), age_ms_max: None }.check().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TopicIdempotency {
    /// As [`IdempotencyWindow::messages_max`]; `None` follows the default.
    pub messages_max: Option<u64>,
    /// As [`IdempotencyWindow::age_ms_max`]; `None` follows the default.
    pub age_ms_max: Option<u64>,
}

impl TopicIdempotency {
    /// The window in force for the topic, given the store-wide `defaults`.
    pub fn resolve(&self, defaults: IdempotencyWindow) -> IdempotencyWindow {
        IdempotencyWindow {
            messages_max: self.messages_max.unwrap_or(defaults.messages_max),
            age_ms_max: self.age_ms_max.unwrap_or(defaults.age_ms_max),
        }
    }

    /// Checks each limit given against the bounds of [`IdempotencyWindow::check`].
    ///
    /// # Errors
    /// [`StoreError::InvalidArgument`] naming the field out of range.
    pub fn check(&self) -> Result<(), StoreError> {
        // Resolved against limits that always pass, only the topic's own are checked.
        self.resolve(IdempotencyWindow::default()).check()
    }
}

/// One key seen: where and when it was published.
#[derive(Debug)]
struct Seen {
    key: String,
    offset: u64,
    at_ms: u64,
}

/// The keys of a topic's window, in offset order, with an index by key.
#[derive(Debug)]
pub(crate) struct KeysSeen {
    window: IdempotencyWindow,
    /// In offset order (and so in publish-time order, as offsets are handed out under
    /// the log's writer lock with the clock read before it; a clock that steps back is
    /// taken as it comes: an entry is dropped once it is old or far, whichever first).
    order: VecDeque<Seen>,
    offsets: HashMap<String, u64>,
}

impl KeysSeen {
    /// An empty window.
    pub(crate) fn new(window: IdempotencyWindow) -> KeysSeen {
        KeysSeen {
            window,
            order: VecDeque::new(),
            offsets: HashMap::new(),
        }
    }

    /// Rebuilds the window from the last `messages_max` records of `log` (in
    /// `log_dir`, for errors): bounded work,
    /// and none at all when the newest record is already older than the window.
    pub(crate) fn rebuild(
        window: IdempotencyWindow,
        log: &Log,
        log_dir: &Path,
        now_ms: u64,
    ) -> Result<KeysSeen, StoreError> {
        let mut seen = KeysSeen::new(window);
        let end = log.end();
        let from = end.saturating_sub(window.messages_max).max(log.start());
        let newest = match end.checked_sub(1).filter(|&last| last >= from) {
            Some(last) => log.read(last)?,
            None => None,
        };
        if newest
            .is_none_or(|record| record.timestamp_ms < now_ms.saturating_sub(window.age_ms_max))
        {
            return Ok(seen);
        }
        for offset in from..end {
            let Some(record) = log.read(offset)? else {
                continue;
            };
            if record.metadata.is_none() {
                continue;
            }
            let message = message_of(record).map_err(|reason| StoreError::Corrupt {
                path: log_dir.to_path_buf(),
                position: offset,
                reason,
            })?;
            if let (Some(key), Some(at_ms)) =
                (message.metadata.idempotency_key, message.published_at_ms)
            {
                seen.insert(key, offset, at_ms);
            }
        }
        seen.forget_old(end, now_ms);
        Ok(seen)
    }

    /// Drops the keys that fell out of the window, given the log's end and the time.
    pub(crate) fn forget_old(&mut self, end: u64, now_ms: u64) {
        let lowest = end.saturating_sub(self.window.messages_max);
        let oldest_ms = now_ms.saturating_sub(self.window.age_ms_max);
        while let Some(front) = self.order.front() {
            if front.offset >= lowest && front.at_ms >= oldest_ms {
                break;
            }
            let front = self.order.pop_front().expect("front exists");
            // One probe: taken out, and put back in the rare case (a rebuild that met
            // the key twice) where the index holds the key's newer publish.
            if let Some(offset) = self.offsets.remove(&front.key) {
                if offset != front.offset {
                    self.offsets.insert(front.key, offset);
                }
            }
        }
    }

    /// The offset of `key`'s first publish, if it is in the window (after
    /// [`forget_old`](Self::forget_old)).
    pub(crate) fn offset_of(&self, key: &str) -> Option<u64> {
        self.offsets.get(key).copied()
    }

    /// Notes `key` as published at `offset` and `at_ms` (offsets only grow).
    pub(crate) fn insert(&mut self, key: String, offset: u64, at_ms: u64) {
        // Only a rebuild meets a key twice (a repeat stored past the window's time but
        // inside its count): the newer publish is the one a repeat answers.
        self.offsets.insert(key.clone(), offset);
        self.order.push_back(Seen { key, offset, at_ms });
    }

    /// The window's limits.
    pub(crate) fn window(&self) -> IdempotencyWindow {
        self.window
    }

    /// How many keys the window holds.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.offsets.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_leave_by_count_and_by_time() {
        let mut seen = KeysSeen::new(IdempotencyWindow {
            messages_max: 3,
            age_ms_max: 100,
        });
        seen.insert("a".into(), 0, 10);
        seen.insert("b".into(), 1, 50);
        seen.forget_old(3, 60);
        assert_eq!(
            (seen.offset_of("a"), seen.offset_of("b")),
            (Some(0), Some(1))
        );
        // By count: offset 0 is no longer among the last 3 of 4.
        seen.forget_old(4, 60);
        assert_eq!((seen.offset_of("a"), seen.offset_of("b")), (None, Some(1)));
        // By time: published at 50, forgotten after 150.
        seen.forget_old(4, 150);
        assert_eq!(seen.offset_of("b"), Some(1));
        seen.forget_old(4, 151);
        assert_eq!((seen.offset_of("b"), seen.len()), (None, 0));
    }
}
