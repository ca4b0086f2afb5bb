//! The store's clock: record timestamps, retention by age, and the time fed to consumer
//! groups (leases, delays, dead-letter times) are read through it, so tests can drive
//! time by hand.
//!
//! The trait and the manual clock are the core's ([`mailroom::clock`]), so one clock
//! serves both the in-memory topic and the store; the store adds the system clock, since
//! the core reads no clock of its own.

use std::time::{SystemTime, UNIX_EPOCH};

pub use mailroom::clock::{Clock, ManualClock};

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        // A clock before 1970 is a misconfigured machine; stamping 0 keeps the store
        // working (age-based retention then treats those records as very old).
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_millis() as u64)
    }
}
