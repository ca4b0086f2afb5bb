//! What the [`Backend`](super::Backend) knows of a topic's retention: the limits in
//! force with what the topic holds and what was removed ([`RetentionState`]), a
//! partial change of a topic's own limits ([`RetentionChange`]), and what one pass of
//! the background task removed ([`RetentionPass`]).

use mailroom_store::{Limit, Retention, RetentionRemoved, TopicRetention};

/// A topic's retention as its view shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RetentionState {
    /// The limits in force: the topic's own over the server-wide defaults.
    pub in_force: Retention,
    /// The bytes of the topic's message log on disk.
    pub bytes: u64,
    /// What retention removed from it since the server started.
    pub removed: RetentionRemoved,
}

/// A change of some of a topic's own retention limits: `None` leaves a limit as it is.
///
/// ```
/// use mailroom_server::backend::RetentionChange;
/// use mailroom_store::{Limit, TopicRetention};
///
/// let change = RetentionChange { bytes_max: Some(Limit::Max(4096)), ..RetentionChange::default() };
/// let mut settings = TopicRetention { age_ms_max: Limit::Unlimited, ..TopicRetention::default() };
/// change.apply(&mut settings);
/// assert_eq!((settings.bytes_max, settings.age_ms_max), (Limit::Max(4096), Limit::Unlimited));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RetentionChange {
    /// The new age limit.
    pub age_ms_max: Option<Limit>,
    /// The new size limit.
    pub bytes_max: Option<Limit>,
    /// The new count limit.
    pub messages_max: Option<Limit>,
    /// Whether unconsumed messages are kept.
    pub keep_unconsumed: Option<bool>,
}

impl RetentionChange {
    /// Applies the change to `settings`.
    pub fn apply(&self, settings: &mut TopicRetention) {
        let limits = [
            (&mut settings.age_ms_max, self.age_ms_max),
            (&mut settings.bytes_max, self.bytes_max),
            (&mut settings.messages_max, self.messages_max),
        ];
        for (limit, change) in limits {
            if let Some(change) = change {
                *limit = change;
            }
        }
        if let Some(keep) = self.keep_unconsumed {
            settings.keep_unconsumed = Some(keep);
        }
    }
}

/// What one retention pass over every topic removed, and the topics it could not
/// serve (their errors, by topic name).
#[derive(Debug, Default)]
pub struct RetentionPass {
    /// What went, per topic that lost anything.
    pub removed: Vec<(String, RetentionRemoved)>,
    /// The topics whose pass failed, with why.
    pub failed: Vec<(String, String)>,
}
