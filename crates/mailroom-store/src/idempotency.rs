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

use std::collections::VecDeque;
use std::hash::{BuildHasher, RandomState};
use std::path::Path;

use hashbrown::HashTable;

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

/// One key seen: where and when it was published, and its hash (so that dropping it
/// from the index needs no second hash).
#[derive(Debug)]
struct Seen {
    key: Box<str>,
    hash: u64,
    offset: u64,
    at_ms: u64,
}

/// The keys of a topic's window, in offset order, with an index by key.
///
/// Each key is hashed once per publish ([`KeysSeen::hash`]), and that hash serves the
/// lookup, the batch's own repeat check and the insert; the entry keeps it for its
/// removal. The key's bytes are held once, in `order`: the index holds sequence numbers
/// into it. (Four SipHash runs and two copies of each key were most of an idempotent
/// publish's extra instructions; see BENCHMARKS.md.)
#[derive(Debug)]
pub(crate) struct KeysSeen {
    window: IdempotencyWindow,
    /// In offset order (and so in publish-time order, as offsets are handed out under
    /// the log's writer lock with the clock read before it; a clock that steps back is
    /// taken as it comes: an entry is dropped once it is old or far, whichever first).
    /// The entry with sequence number `n` is at `order[n - first_seq]`.
    order: VecDeque<Seen>,
    /// The sequence number of `order`'s front.
    first_seq: u64,
    /// By key (hashed with `hasher`): the sequence number of the key's newest entry.
    index: HashTable<u64>,
    /// Keyed at random per window (std's SipHash): the keys come from clients.
    hasher: RandomState,
}

impl KeysSeen {
    /// An empty window.
    pub(crate) fn new(window: IdempotencyWindow) -> KeysSeen {
        KeysSeen {
            window,
            order: VecDeque::new(),
            first_seq: 0,
            index: HashTable::new(),
            hasher: RandomState::new(),
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
                let hash = seen.hash(&key);
                seen.insert(&key, hash, offset, at_ms);
            }
        }
        seen.forget_old(end, now_ms);
        Ok(seen)
    }

    /// The hash of `key` that [`offset_of`](Self::offset_of) and
    /// [`insert`](Self::insert) take.
    pub(crate) fn hash(&self, key: &str) -> u64 {
        self.hasher.hash_one(key)
    }

    /// Drops the keys that fell out of the window, given the log's end and the time.
    pub(crate) fn forget_old(&mut self, end: u64, now_ms: u64) {
        let lowest = end.saturating_sub(self.window.messages_max);
        let oldest_ms = now_ms.saturating_sub(self.window.age_ms_max);
        while let Some(front) = self.order.front() {
            if front.offset >= lowest && front.at_ms >= oldest_ms {
                break;
            }
            let seq = self.first_seq;
            // The index names this entry unless a rebuild met the key again later (the
            // newer publish is the one a repeat answers): then it stays.
            if let Ok(entry) = self.index.find_entry(front.hash, |&n| n == seq) {
                entry.remove();
            }
            self.order.pop_front();
            self.first_seq += 1;
        }
    }

    /// The offset of `key`'s first publish (`hash` from [`hash`](Self::hash)), if it is
    /// in the window (after [`forget_old`](Self::forget_old)).
    pub(crate) fn offset_of(&self, key: &str, hash: u64) -> Option<u64> {
        let (order, first) = (&self.order, self.first_seq);
        self.index
            .find(hash, |&n| *order[(n - first) as usize].key == *key)
            .map(|&n| order[(n - first) as usize].offset)
    }

    /// Notes `key` (`hash` from [`hash`](Self::hash)) as published at `offset` and
    /// `at_ms` (offsets only grow).
    pub(crate) fn insert(&mut self, key: &str, hash: u64, offset: u64, at_ms: u64) {
        let KeysSeen {
            order,
            first_seq,
            index,
            ..
        } = self;
        let first = *first_seq;
        let seq = first + order.len() as u64;
        order.push_back(Seen {
            key: key.into(),
            hash,
            offset,
            at_ms,
        });
        // Only a rebuild meets a key twice (a repeat stored past the window's time but
        // inside its count): the newer publish is the one a repeat answers.
        let at = |n: u64| &order[(n - first) as usize];
        match index.find_mut(hash, |&n| *at(n).key == *key) {
            Some(newest) => *newest = seq,
            None => {
                index.insert_unique(hash, seq, |&n| at(n).hash);
            }
        }
    }

    /// The window's limits.
    pub(crate) fn window(&self) -> IdempotencyWindow {
        self.window
    }

    /// How many keys the window holds.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.index.len()
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
        for (key, offset, at_ms) in [("a", 0, 10), ("b", 1, 50)] {
            let hash = seen.hash(key);
            seen.insert(key, hash, offset, at_ms);
        }
        let of = |seen: &KeysSeen, key: &str| seen.offset_of(key, seen.hash(key));
        seen.forget_old(3, 60);
        assert_eq!((of(&seen, "a"), of(&seen, "b")), (Some(0), Some(1)));
        // By count: offset 0 is no longer among the last 3 of 4.
        seen.forget_old(4, 60);
        assert_eq!((of(&seen, "a"), of(&seen, "b")), (None, Some(1)));
        // By time: published at 50, forgotten after 150.
        seen.forget_old(4, 150);
        assert_eq!(of(&seen, "b"), Some(1));
        seen.forget_old(4, 151);
        assert_eq!((of(&seen, "b"), seen.len()), (None, 0));
    }

    // Proves a key met twice (only a rebuild does) answers its newer publish, keeps it
    // when the older entry leaves the window, and goes when the newer one does.
    #[test]
    fn a_key_met_twice_answers_its_newer_publish() {
        let mut seen = KeysSeen::new(IdempotencyWindow {
            messages_max: 10,
            age_ms_max: 1_000,
        });
        for (key, offset) in [("a", 0), ("b", 1), ("a", 5)] {
            let hash = seen.hash(key);
            seen.insert(key, hash, offset, 0);
        }
        let of = |seen: &KeysSeen, key: &str| seen.offset_of(key, seen.hash(key));
        assert_eq!((of(&seen, "a"), seen.len()), (Some(5), 2));
        // The older "a" (offset 0) and "b" (offset 1) fall out by count.
        seen.forget_old(12, 0);
        assert_eq!(
            (of(&seen, "a"), of(&seen, "b"), seen.len()),
            (Some(5), None, 1)
        );
        seen.forget_old(16, 0);
        assert_eq!((of(&seen, "a"), seen.len()), (None, 0));
    }
}
