//! The topic's view of time: its clock if it has one, else a time that stands at 0.

use std::fmt;
use std::sync::Arc;

use crate::clock::Clock;

/// The clock a topic and its handles read, if any.
#[derive(Clone, Default)]
pub(crate) struct TopicTime(Option<Arc<dyn Clock>>);

impl TopicTime {
    pub(crate) fn new(clock: Arc<dyn Clock>) -> Self {
        TopicTime(Some(clock))
    }

    /// Whether there is a clock at all: without one, leases and delays could never run
    /// out, so the settings that need them are refused.
    pub(crate) fn is_set(&self) -> bool {
        self.0.is_some()
    }

    /// The time now, in ms; 0 without a clock.
    #[inline]
    pub(crate) fn now_ms(&self) -> u64 {
        match &self.0 {
            Some(clock) => clock.now_ms(),
            None => 0,
        }
    }
}

impl fmt::Debug for TopicTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(clock) => write!(f, "{clock:?}"),
            None => f.write_str("no clock"),
        }
    }
}
