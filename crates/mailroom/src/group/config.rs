//! A group's settings: leases, backoff and parallel deliveries, and the options of a
//! nack. All are optional; unset, a group follows the basic rules exactly.

use super::{ArgumentError, GroupError};

/// The longest lease a group may set, in milliseconds (one week).
pub const LEASE_MS_MAX: u64 = 7 * 24 * 60 * 60 * 1000;
/// The longest retry delay (a nack's own or a backoff's cap), in milliseconds (one week).
pub const DELAY_MS_MAX: u64 = 7 * 24 * 60 * 60 * 1000;
/// The most deliveries one group may have in flight at once.
pub const MAX_IN_FLIGHT_MAX: u32 = 65_536;
/// The longest failure reason kept with a nack or dead letter, in bytes of UTF-8.
pub const REASON_BYTES_MAX: usize = 1024;
/// The longest consumer identity accepted on a poll, in bytes of UTF-8.
pub const CONSUMER_BYTES_MAX: usize = 128;

/// How long a message waits before it is delivered again after a failure (a `nack` or
/// an expired lease). A release is not a failure and waits only for its own delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backoff {
    /// The same delay after every failure.
    Fixed {
        /// The delay, in milliseconds.
        delay_ms: u64,
    },
    /// `base_ms` after the first failure, doubling after each further one, never more
    /// than `cap_ms`.
    Exponential {
        /// The delay after the first failure, in milliseconds.
        base_ms: u64,
        /// The longest delay, in milliseconds.
        cap_ms: u64,
    },
}

impl Backoff {
    /// The delay after the `failures`-th failure of a message (the first is 1).
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::group::Backoff;
    ///
    /// let backoff = Backoff::Exponential { base_ms: 100, cap_ms: 1_000 };
    /// assert_eq!(backoff.delay_ms(1), 100);
    /// assert_eq!(backoff.delay_ms(3), 400);
    /// assert_eq!(backoff.delay_ms(40), 1_000);
    /// assert_eq!(Backoff::Fixed { delay_ms: 5 }.delay_ms(9), 5);
    /// ```
    pub fn delay_ms(&self, failures: u32) -> u64 {
        match *self {
            Backoff::Fixed { delay_ms } => delay_ms,
            Backoff::Exponential { base_ms, cap_ms } => {
                let doublings = failures.saturating_sub(1).min(63);
                base_ms
                    .checked_mul(1u64 << doublings)
                    .map_or(cap_ms, |delay| delay.min(cap_ms))
            }
        }
    }

    fn check(&self) -> Result<(), GroupError> {
        let longest = match *self {
            Backoff::Fixed { delay_ms } => ("backoff.delay_ms", delay_ms),
            Backoff::Exponential { base_ms, cap_ms } => {
                if base_ms > cap_ms {
                    return Err(GroupError::InvalidConfig(ArgumentError::Misordered {
                        low_field: "backoff.base_ms",
                        high_field: "backoff.cap_ms",
                        low: base_ms,
                        high: cap_ms,
                    }));
                }
                ("backoff.cap_ms", cap_ms)
            }
        };
        ArgumentError::check_range(longest.0, 0, DELAY_MS_MAX, longest.1)
            .map_err(GroupError::InvalidConfig)
    }
}

/// A group's settings. [`GroupConfig::new`] gives the basic rules; the other fields
/// are optional extensions.
///
/// # Example
///
/// ```
/// use mailroom::group::{Backoff, GroupConfig};
///
/// let config = GroupConfig::new(5)
///     .with_lease_ms(30_000)
///     .with_backoff(Backoff::Exponential { base_ms: 100, cap_ms: 10_000 })
///     .with_max_in_flight(16);
/// assert!(config.check().is_ok());
/// assert!(GroupConfig::new(0).check().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GroupConfig {
    /// How many failures (nacks and expired leases) a message may have: the failure that
    /// reaches it dead-letters the message. A release is not a failure and a redrive
    /// starts the count again, so without releases and redrives a message is delivered at
    /// most `max_attempts` times. (The wire format says the same, on
    /// `mailroom_api::groups::CreateGroup::max_attempts`.)
    pub max_attempts: u32,
    /// How long a delivery stays owned without an ack, nack or touch, in milliseconds.
    /// `None`: for ever (the basic rules).
    pub lease_ms: Option<u64>,
    /// The delay before a failed message is delivered again. `None`: at once (the basic rules).
    pub backoff: Option<Backoff>,
    /// How many deliveries may be in flight at once (W). 1 is the basic rules.
    pub max_in_flight: u32,
}

impl GroupConfig {
    /// The basic rules with `max_attempts`: no lease, no backoff, one delivery in flight.
    pub fn new(max_attempts: u32) -> Self {
        GroupConfig {
            max_attempts,
            lease_ms: None,
            backoff: None,
            max_in_flight: 1,
        }
    }

    /// With a lease of `lease_ms`.
    pub fn with_lease_ms(mut self, lease_ms: u64) -> Self {
        self.lease_ms = Some(lease_ms);
        self
    }

    /// With `backoff` after failures.
    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = Some(backoff);
        self
    }

    /// With up to `max_in_flight` deliveries in flight at once.
    pub fn with_max_in_flight(mut self, max_in_flight: u32) -> Self {
        self.max_in_flight = max_in_flight;
        self
    }

    /// Whether any setting needs time to pass (a lease or a backoff).
    pub fn uses_time(&self) -> bool {
        self.lease_ms.is_some() || self.backoff.is_some()
    }

    /// Checks every setting against its limit.
    ///
    /// # Errors
    ///
    /// [`GroupError::ZeroMaxAttempts`] if `max_attempts` is 0;
    /// [`GroupError::InvalidConfig`] for a zero or too long lease, a backoff over
    /// [`DELAY_MS_MAX`] or with base above cap, or `max_in_flight` outside
    /// 1..=[`MAX_IN_FLIGHT_MAX`].
    pub fn check(&self) -> Result<(), GroupError> {
        if self.max_attempts == 0 {
            return Err(GroupError::ZeroMaxAttempts);
        }
        if let Some(lease_ms) = self.lease_ms {
            ArgumentError::check_range("lease_ms", 1, LEASE_MS_MAX, lease_ms)
                .map_err(GroupError::InvalidConfig)?;
        }
        if let Some(backoff) = &self.backoff {
            backoff.check()?;
        }
        let window = u64::from(self.max_in_flight);
        ArgumentError::check_range("max_in_flight", 1, u64::from(MAX_IN_FLIGHT_MAX), window)
            .map_err(GroupError::InvalidConfig)
    }
}

/// What a consumer says when it gives a delivery back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum NackKind {
    /// It failed: counts against `max_attempts`, then the group's backoff applies. The
    /// final one dead-letters. The basic `nack`.
    #[default]
    Nack,
    /// Handed back unprocessed (say, the consumer is shutting down): not a failure, no
    /// backoff, never dead-letters.
    Release,
    /// It can never succeed: dead-lettered at once, whatever attempts remain.
    Reject,
}

/// The options of a nack: its kind, an optional delay and an optional reason.
///
/// # Example
///
/// ```
/// use mailroom::group::{NackKind, NackOptions};
///
/// let options = NackOptions::new(NackKind::Release).with_delay_ms(500).with_reason("shutting down");
/// assert_eq!(options.delay_ms, Some(500));
/// assert_eq!(NackOptions::default().kind, NackKind::Nack);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct NackOptions {
    /// Nack, release or reject.
    pub kind: NackKind,
    /// Wait at least this long before delivering the message again; overrides the
    /// group's backoff. Ignored by a reject and by a final nack.
    pub delay_ms: Option<u64>,
    /// Why; kept with the dead letter if this dead-letters the message. At most
    /// [`REASON_BYTES_MAX`] bytes.
    pub reason: Option<String>,
}

impl NackOptions {
    /// A nack of `kind`, without delay or reason.
    pub fn new(kind: NackKind) -> Self {
        NackOptions {
            kind,
            delay_ms: None,
            reason: None,
        }
    }

    /// With a delay of `delay_ms`.
    pub fn with_delay_ms(mut self, delay_ms: u64) -> Self {
        self.delay_ms = Some(delay_ms);
        self
    }

    /// With a reason.
    pub fn with_reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    /// Checks the delay and reason against their limits.
    ///
    /// # Errors
    ///
    /// [`GroupError::InvalidConfig`] for a delay over [`DELAY_MS_MAX`] or a reason over
    /// [`REASON_BYTES_MAX`].
    pub fn check(&self) -> Result<(), GroupError> {
        if let Some(delay_ms) = self.delay_ms {
            ArgumentError::check_range("delay_ms", 0, DELAY_MS_MAX, delay_ms)
                .map_err(GroupError::InvalidConfig)?;
        }
        if let Some(reason) = &self.reason {
            ArgumentError::check_length("reason", 0, REASON_BYTES_MAX, reason)
                .map_err(GroupError::InvalidConfig)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves each refused setting's message states its limit's actual number (so the
    // spelled-out texts cannot drift from the constants) and names no constant.
    #[test]
    fn limit_messages_spell_out_the_numbers() {
        let config = |change: fn(&mut GroupConfig)| {
            let mut config = GroupConfig::new(1);
            change(&mut config);
            config.check()
        };
        let cases = [
            (
                config(|c| c.lease_ms = Some(LEASE_MS_MAX + 1)),
                LEASE_MS_MAX.to_string(),
            ),
            (
                config(|c| c.max_in_flight = MAX_IN_FLIGHT_MAX + 1),
                MAX_IN_FLIGHT_MAX.to_string(),
            ),
            (
                config(|c| {
                    c.backoff = Some(Backoff::Fixed {
                        delay_ms: DELAY_MS_MAX + 1,
                    })
                }),
                DELAY_MS_MAX.to_string(),
            ),
            (
                NackOptions::new(NackKind::Nack)
                    .with_delay_ms(DELAY_MS_MAX + 1)
                    .check(),
                DELAY_MS_MAX.to_string(),
            ),
            (
                NackOptions::new(NackKind::Nack)
                    .with_reason("r".repeat(REASON_BYTES_MAX + 1))
                    .check(),
                REASON_BYTES_MAX.to_string(),
            ),
        ];
        for (result, limit) in cases {
            let message = result.unwrap_err().to_string();
            assert!(message.contains(&limit), "{message}");
            assert!(!message.contains("_MAX"), "{message}");
        }
    }
}
