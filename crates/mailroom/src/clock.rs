//! Time, behind a narrow trait, so that everything time-dependent can be driven by hand.
//!
//! The group state machine ([`crate::group`]) never reads a clock: its plan methods take
//! the time (`now_ms`) as an argument. The homes of a group read it from a [`Clock`]:
//! an in-memory [`Topic`](crate::topic::Topic) from the one given to
//! [`Topic::with_clock`](crate::topic::Topic::with_clock), the durable store from its
//! options. This crate has no wall clock of its own (it does no I/O); the store provides
//! one. Tests use [`ManualClock`].

use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};

/// A source of time in milliseconds. Homes of a group read it; the state machine does not.
///
/// Implementations should not go backwards; if one does, leases and delays simply take
/// longer to run out (every comparison is "now has reached the deadline").
pub trait Clock: Send + Sync + Debug {
    /// The current time in milliseconds (since the Unix epoch for a wall clock).
    fn now_ms(&self) -> u64;
}

/// A clock that moves only when told to, for tests.
///
/// # Example
///
/// ```
/// use mailroom::clock::{Clock, ManualClock};
///
/// let clock = ManualClock::new(1_000);
/// clock.advance_ms(500);
/// assert_eq!(clock.now_ms(), 1_500);
/// clock.set_ms(7);
/// assert_eq!(clock.now_ms(), 7);
/// ```
#[derive(Debug, Default)]
pub struct ManualClock {
    now_ms: AtomicU64,
}

impl ManualClock {
    /// A clock reading `now_ms`.
    pub fn new(now_ms: u64) -> Self {
        ManualClock {
            now_ms: AtomicU64::new(now_ms),
        }
    }

    /// Moves the clock forward by `ms` (saturating at `u64::MAX`).
    pub fn advance_ms(&self, ms: u64) {
        let _ = self
            .now_ms
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |now| {
                Some(now.saturating_add(ms))
            });
    }

    /// Sets the clock to `now_ms`.
    pub fn set_ms(&self, now_ms: u64) {
        self.now_ms.store(now_ms, Ordering::Relaxed);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.now_ms.load(Ordering::Relaxed)
    }
}
