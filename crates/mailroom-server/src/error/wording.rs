//! The wordings every route shares for bad input: ranges, lengths and counts with the
//! allowed bounds in numbers (and a `_ms` bound in words), and a client's text cut short.

use std::ops::RangeInclusive;

use super::ApiError;

// How much of a client's text a message echoes is a rule of the wire format.
pub use mailroom_api::error::{shown, SHOWN_CHARS_MAX};

impl ApiError {
    /// 400 `invalid_argument` for a number outside its range, in the one wording every
    /// route uses: `"max_in_flight must be in 1..=65536, got 0"`. A `_ms` field's upper
    /// bound is also given in words (`"(7 days)"`).
    ///
    /// ```
    /// use mailroom_server::error::ApiError;
    /// let error = ApiError::out_of_range("lease_ms", 1..=604_800_000, 0);
    /// assert_eq!(error.message, "lease_ms must be in 1..=604800000 (7 days), got 0");
    /// ```
    pub fn out_of_range(field: &str, allowed: RangeInclusive<u64>, got: u64) -> ApiError {
        let (low, high) = allowed.into_inner();
        let words = match field.ends_with("_ms") {
            true => duration_words(high).map(|words| format!(" ({words})")),
            false => None,
        };
        let words = words.unwrap_or_default();
        ApiError::invalid_argument(format!(
            "{field} must be in {low}..={high}{words}, got {got}"
        ))
    }

    /// 400 `invalid_argument` for text of the wrong length, in bytes of UTF-8:
    /// `"consumer must be 1..=128 bytes long, got 129"`, or `"reason must be at most 1024
    /// bytes long, got 1025"` when only the top is bounded.
    ///
    /// ```
    /// use mailroom_server::error::ApiError;
    /// let error = ApiError::length_out_of_range("consumer", 1..=128, 0);
    /// assert_eq!(error.message, "consumer must be 1..=128 bytes long, got 0");
    /// ```
    pub fn length_out_of_range(
        field: &str,
        allowed: RangeInclusive<usize>,
        got: usize,
    ) -> ApiError {
        let allowed = range_words(allowed);
        ApiError::invalid_argument(format!("{field} must be {allowed} bytes long, got {got}"))
    }

    /// 400 `invalid_argument` for a list of the wrong length: `"deliveries must list
    /// 1..=65536 deliveries, got 0"`.
    ///
    /// ```
    /// use mailroom_server::error::ApiError;
    /// let error = ApiError::count_out_of_range("messages", "messages", 1..=10_000, 0);
    /// assert_eq!(error.message, "messages must list 1..=10000 messages, got 0");
    /// ```
    pub fn count_out_of_range(
        field: &str,
        items: &str,
        allowed: RangeInclusive<usize>,
        got: usize,
    ) -> ApiError {
        let allowed = range_words(allowed);
        ApiError::invalid_argument(format!("{field} must list {allowed} {items}, got {got}"))
    }
}

/// `"at most N"` for a range from 0, else `"LOW..=HIGH"`.
fn range_words(allowed: RangeInclusive<usize>) -> String {
    match allowed.into_inner() {
        (0, high) => format!("at most {high}"),
        (low, high) => format!("{low}..={high}"),
    }
}

/// A whole number of milliseconds in the largest unit that divides it ("7 days"), or
/// `None` below a second.
fn duration_words(ms: u64) -> Option<String> {
    const UNITS: [(u64, &str); 4] = [
        (86_400_000, "day"),
        (3_600_000, "hour"),
        (60_000, "minute"),
        (1_000, "second"),
    ];
    let (size, unit) = UNITS
        .into_iter()
        .find(|&(size, _)| ms >= size && ms.is_multiple_of(size))?;
    let count = ms / size;
    let plural = if count == 1 { "" } else { "s" };
    Some(format!("{count} {unit}{plural}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the range wordings: a `_ms` field's top in the largest whole unit, none for
    // other fields or for a top below a second, and lengths and counts with or without a
    // lower bound.
    #[test]
    fn range_messages() {
        let cases = [
            (
                ApiError::out_of_range("wait_ms", 0..=30_000, 30_001),
                "wait_ms must be in 0..=30000 (30 seconds), got 30001",
            ),
            (
                ApiError::out_of_range("delay_ms", 0..=90_000, 1),
                "delay_ms must be in 0..=90000 (90 seconds), got 1",
            ),
            (
                ApiError::out_of_range("lease_ms", 1..=3_600_000, 0),
                "lease_ms must be in 1..=3600000 (1 hour), got 0",
            ),
            (
                ApiError::out_of_range("tick_ms", 0..=500, 501),
                "tick_ms must be in 0..=500, got 501",
            ),
            (
                ApiError::out_of_range("max", 1..=86_400_000, 0),
                "max must be in 1..=86400000, got 0",
            ),
            (
                ApiError::length_out_of_range("reason", 0..=1024, 1025),
                "reason must be at most 1024 bytes long, got 1025",
            ),
            (
                ApiError::count_out_of_range("ack", "deliveries", 0..=4, 5),
                "ack must list at most 4 deliveries, got 5",
            ),
        ];
        for (api, message) in cases {
            assert_eq!(
                (api.code.as_str(), api.message.as_str()),
                ("invalid_argument", message)
            );
        }
    }
}
