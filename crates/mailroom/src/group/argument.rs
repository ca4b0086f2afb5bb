//! [`ArgumentError`]: what a refused argument says, with the field it names, the bound
//! it broke and the value it had, so that every home can word it for its own readers
//! (the server as JSON field names and ranges) without checking the rule again.

/// An argument outside its rule. Each variant carries the field (as the library's own
/// parameter or setting calls it), the bound and the value, spelled as numbers.
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum ArgumentError {
    /// A number outside `min..=max`.
    ///
    /// ```
    /// use mailroom::group::ArgumentError;
    /// let error = ArgumentError::OutOfRange { field: "max_in_flight", min: 1, max: 65_536, got: 0 };
    /// assert_eq!(error.to_string(), "max_in_flight must be in 1..=65536, got 0");
    /// ```
    #[error("{field} must be in {min}..={max}, got {got}")]
    OutOfRange {
        /// The field.
        field: &'static str,
        /// The least value allowed.
        min: u64,
        /// The greatest value allowed.
        max: u64,
        /// The value given.
        got: u64,
    },
    /// Text whose length in bytes of UTF-8 is outside `min..=max`.
    ///
    /// ```
    /// use mailroom::group::ArgumentError;
    /// let error = ArgumentError::LengthOutOfRange { field: "reason", min: 0, max: 1024, got: 1025 };
    /// assert_eq!(error.to_string(), "reason must be at most 1024 bytes long, got 1025");
    /// ```
    #[error("{field} must be {} bytes long, got {got}", range_words(*min as u64, *max as u64))]
    LengthOutOfRange {
        /// The field.
        field: &'static str,
        /// The shortest length allowed.
        min: usize,
        /// The longest length allowed.
        max: usize,
        /// The length given.
        got: usize,
    },
    /// A list whose number of items is outside `min..=max`.
    ///
    /// ```
    /// use mailroom::group::ArgumentError;
    /// let error = ArgumentError::CountOutOfRange {
    ///     field: "deliveries", items: "deliveries", min: 0, max: 65_536, got: 65_537,
    /// };
    /// assert_eq!(error.to_string(), "deliveries must list at most 65536 deliveries, got 65537");
    /// ```
    #[error("{field} must list {} {items}, got {got}", range_words(*min, *max))]
    CountOutOfRange {
        /// The field.
        field: &'static str,
        /// What the list holds, in the plural.
        items: &'static str,
        /// The fewest items allowed.
        min: u64,
        /// The most items allowed.
        max: u64,
        /// How many were given.
        got: u64,
    },
    /// Two fields whose values must be in order, and were not: `low` above `high`.
    ///
    /// ```
    /// use mailroom::group::ArgumentError;
    /// let error = ArgumentError::Misordered {
    ///     low_field: "backoff.base_ms", high_field: "backoff.cap_ms", low: 6, high: 5,
    /// };
    /// assert_eq!(
    ///     error.to_string(),
    ///     "backoff.base_ms must not be above backoff.cap_ms, got 6 and 5"
    /// );
    /// ```
    #[error("{low_field} must not be above {high_field}, got {low} and {high}")]
    Misordered {
        /// The field that must be the lower.
        low_field: &'static str,
        /// The field that must be the higher.
        high_field: &'static str,
        /// The lower field's value.
        low: u64,
        /// The higher field's value.
        high: u64,
    },
    /// A collection that holds `max` items already, the most it may.
    ///
    /// ```
    /// use mailroom::group::ArgumentError;
    /// let error = ArgumentError::Full { items: "groups", max: 65_536 };
    /// assert_eq!(error.to_string(), "the topic already has 65536 groups, the most it may have");
    /// ```
    #[error("the topic already has {max} {items}, the most it may have")]
    Full {
        /// What it holds, in the plural.
        items: &'static str,
        /// How many it may hold.
        max: u64,
    },
    /// A rule with no bound in numbers (a setting the home cannot honour).
    ///
    /// ```
    /// use mailroom::group::ArgumentError;
    /// let error = ArgumentError::Unsupported { reason: "a delay needs a clock" };
    /// assert_eq!(error.to_string(), "a delay needs a clock");
    /// ```
    #[error("{reason}")]
    Unsupported {
        /// What was wrong.
        reason: &'static str,
    },
}

impl ArgumentError {
    /// Refuses `got` unless it lies in `min..=max`.
    ///
    /// # Errors
    ///
    /// [`ArgumentError::OutOfRange`] if it does not.
    pub(crate) fn check_range(
        field: &'static str,
        min: u64,
        max: u64,
        got: u64,
    ) -> Result<(), ArgumentError> {
        if got < min || got > max {
            return Err(ArgumentError::OutOfRange {
                field,
                min,
                max,
                got,
            });
        }
        Ok(())
    }

    /// Refuses text whose byte length is outside `min..=max`.
    ///
    /// # Errors
    ///
    /// [`ArgumentError::LengthOutOfRange`] if it is.
    pub(crate) fn check_length(
        field: &'static str,
        min: usize,
        max: usize,
        text: &str,
    ) -> Result<(), ArgumentError> {
        let got = text.len();
        if got < min || got > max {
            return Err(ArgumentError::LengthOutOfRange {
                field,
                min,
                max,
                got,
            });
        }
        Ok(())
    }
}

/// `"at most N"` for a range from 0, else `"LOW..=HIGH"`.
fn range_words(min: u64, max: u64) -> String {
    match min {
        0 => format!("at most {max}"),
        _ => format!("{min}..={max}"),
    }
}

/// Checks a consumer identity: 1..=[`CONSUMER_BYTES_MAX`](super::CONSUMER_BYTES_MAX)
/// bytes of UTF-8 (the one rule for every home and the server).
///
/// # Errors
///
/// [`ArgumentError::LengthOutOfRange`] for `consumer`.
///
/// # Example
///
/// ```
/// use mailroom::group::check_consumer;
/// assert!(check_consumer("worker-1").is_ok());
/// assert_eq!(
///     check_consumer("").unwrap_err().to_string(),
///     "consumer must be 1..=128 bytes long, got 0"
/// );
/// ```
pub fn check_consumer(consumer: &str) -> Result<(), ArgumentError> {
    ArgumentError::check_length("consumer", 1, super::CONSUMER_BYTES_MAX, consumer)
}
