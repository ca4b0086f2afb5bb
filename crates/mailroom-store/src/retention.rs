//! Retention: which whole segments of a topic's message log may go.
//!
//! A segment is a candidate when the log is over its byte or message-count limit (oldest
//! segments first, until it is not) or when its newest record is older than the age
//! limit. The active (last) segment is never deleted. With `keep_unconsumed` (the default), nothing at or
//! above the lowest group position is deleted, whatever the limits say. Dead letters do
//! not depend on the message log at all: their records keep a copy of the payload.

use crate::log::SegmentInfo;

/// How much of each topic's message log to keep. Enforced by
/// [`Store::enforce_retention`](crate::Store::enforce_retention).
///
/// # Example
///
/// ```
/// use mailroom_store::Retention;
///
/// // Keep about 1 GiB or 7 days, whichever is less, but never what a group still needs.
/// let retention = Retention {
///     bytes_max: Some(1 << 30),
///     age_ms_max: Some(7 * 24 * 3600 * 1000),
///     ..Retention::default()
/// };
/// assert!(retention.keep_unconsumed);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Delete the oldest segments while the log is larger than this many bytes.
    pub bytes_max: Option<u64>,
    /// Delete segments whose newest record is older than this many milliseconds.
    pub age_ms_max: Option<u64>,
    /// Delete the oldest segments while the log holds more than this many messages.
    pub messages_max: Option<u64>,
    /// Never delete a message some group has not yet finished (default `true`). When
    /// `false`, a group left behind skips to the oldest retained message on its next
    /// poll, and a delivery of a deleted message is dropped.
    pub keep_unconsumed: bool,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            bytes_max: None,
            age_ms_max: None,
            messages_max: None,
            keep_unconsumed: true,
        }
    }
}

impl Retention {
    /// The offset below which the limits allow deleting, given the segments (oldest
    /// first) at time `now_ms`, before any group floor is applied.
    pub fn cut_offset(&self, segments: &[SegmentInfo], now_ms: u64) -> u64 {
        let Some((_active, sealed)) = segments.split_last() else {
            return 0;
        };
        let mut total_bytes: u64 = segments.iter().map(|segment| segment.bytes).sum();
        let end = segments[segments.len() - 1].end_offset;
        let mut cut = segments[0].base_offset;
        for segment in sealed {
            let over_size = self.bytes_max.is_some_and(|max| total_bytes > max);
            let over_count = self.messages_max.is_some_and(|max| end - cut > max);
            let too_old = self
                .age_ms_max
                .is_some_and(|max| now_ms.saturating_sub(segment.last_timestamp_ms) > max);
            if !over_size && !over_count && !too_old {
                break;
            }
            total_bytes -= segment.bytes;
            cut = segment.end_offset;
        }
        cut
    }
}

/// One limit of a topic's own retention ([`TopicRetention`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Limit {
    /// Whatever the store-wide default says ([`StoreOptions::retention`](crate::StoreOptions)).
    #[default]
    Default,
    /// No limit, whatever the default says.
    Unlimited,
    /// At most this much.
    Max(u64),
}

impl Limit {
    /// The limit in force, given the store-wide `default`.
    pub fn resolve(self, default: Option<u64>) -> Option<u64> {
        match self {
            Limit::Default => default,
            Limit::Unlimited => None,
            Limit::Max(max) => Some(max),
        }
    }
}

/// A topic's own retention, kept with the topic (its `SETTINGS` file, see
/// `docs/storage.md`) so it survives restarts. Each limit is set, unlimited, or left to
/// the store-wide default, so a topic that never had settings follows the defaults,
/// including when they change.
///
/// # Example
///
/// ```
/// use mailroom_store::{Limit, Retention, TopicRetention};
///
/// let defaults = Retention { age_ms_max: Some(60_000), bytes_max: Some(1 << 20), ..Retention::default() };
/// let topic = TopicRetention { bytes_max: Limit::Max(4096), age_ms_max: Limit::Unlimited, ..TopicRetention::default() };
/// let effective = topic.resolve(&defaults);
/// assert_eq!((effective.bytes_max, effective.age_ms_max), (Some(4096), None));
/// assert!(effective.keep_unconsumed);
/// assert_eq!(TopicRetention::default().resolve(&defaults), defaults);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TopicRetention {
    /// As [`Retention::age_ms_max`].
    pub age_ms_max: Limit,
    /// As [`Retention::bytes_max`].
    pub bytes_max: Limit,
    /// As [`Retention::messages_max`].
    pub messages_max: Limit,
    /// As [`Retention::keep_unconsumed`]; `None` follows the default.
    pub keep_unconsumed: Option<bool>,
}

impl TopicRetention {
    /// The retention in force for the topic, given the store-wide `defaults`.
    pub fn resolve(&self, defaults: &Retention) -> Retention {
        Retention {
            bytes_max: self.bytes_max.resolve(defaults.bytes_max),
            age_ms_max: self.age_ms_max.resolve(defaults.age_ms_max),
            messages_max: self.messages_max.resolve(defaults.messages_max),
            keep_unconsumed: self.keep_unconsumed.unwrap_or(defaults.keep_unconsumed),
        }
    }
}

/// What retention removed from a topic's message log: in one pass
/// ([`DurableTopic::enforce_retention`](crate::DurableTopic::enforce_retention)), or in
/// all passes since the store was opened
/// ([`DurableTopic::retention_removed`](crate::DurableTopic::retention_removed)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RetentionRemoved {
    /// Whole segments deleted.
    pub segments: u64,
    /// Their bytes.
    pub bytes: u64,
    /// The messages they held.
    pub messages: u64,
}

impl RetentionRemoved {
    /// Adds `other` to these counts.
    pub fn add(&mut self, other: RetentionRemoved) {
        self.segments += other.segments;
        self.bytes += other.bytes;
        self.messages += other.messages;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment(base_offset: u64, end_offset: u64, bytes: u64, last_ms: u64) -> SegmentInfo {
        SegmentInfo {
            base_offset,
            end_offset,
            bytes,
            last_timestamp_ms: last_ms,
        }
    }

    // Proves size retention deletes oldest-first until under the limit, never the active
    // segment, and age retention deletes exactly the segments past the age.
    #[test]
    fn cut_follows_size_and_age() {
        let segments = [
            segment(0, 10, 100, 1_000),
            segment(10, 20, 100, 2_000),
            segment(20, 30, 100, 3_000),
        ];
        let by_size = |bytes_max| Retention {
            bytes_max: Some(bytes_max),
            ..Retention::default()
        };
        assert_eq!(by_size(300).cut_offset(&segments, 0), 0);
        assert_eq!(by_size(250).cut_offset(&segments, 0), 10);
        assert_eq!(by_size(100).cut_offset(&segments, 0), 20);
        assert_eq!(by_size(0).cut_offset(&segments, 0), 20);
        let by_age = Retention {
            age_ms_max: Some(1_500),
            ..Retention::default()
        };
        assert_eq!(by_age.cut_offset(&segments, 3_000), 10);
        assert_eq!(by_age.cut_offset(&segments, 10_000), 20);
        assert_eq!(Retention::default().cut_offset(&segments, 10_000), 0);
        assert_eq!(by_age.cut_offset(&[], 10_000), 0);
        let by_count = |messages_max| Retention {
            messages_max: Some(messages_max),
            ..Retention::default()
        };
        assert_eq!(by_count(30).cut_offset(&segments, 0), 0);
        assert_eq!(by_count(25).cut_offset(&segments, 0), 10);
        assert_eq!(by_count(0).cut_offset(&segments, 0), 20);
    }
}
