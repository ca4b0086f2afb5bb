//! The `--timeout` flag: how long a command waits for the server before it gives up.
//!
//! One number is all a user should have to think about, so it sets the client's request
//! limit and caps its connect limit: `--timeout 1` must not wait 5 s for a connection.
//! A long poll (`consume --batch --follow`) gets its wait added by the client, so a short
//! `--timeout` never cuts one off.

use std::time::Duration;

use mailroom_client::{Timeouts, CONNECT_TIMEOUT_DEFAULT};

/// The longest `--timeout` accepted, in seconds: a day. Anything longer is a typo, and
/// "wait forever" is what the flag exists to prevent.
pub const TIMEOUT_SECONDS_MAX: f64 = 86_400.0;

/// A `--timeout` value in seconds (fractions allowed), for clap's `value_parser`.
///
/// # Errors
/// A message saying the value must be a positive number of seconds up to the maximum.
pub fn seconds(text: &str) -> Result<Duration, String> {
    let refused = || format!("expected a number of seconds above 0, at most {TIMEOUT_SECONDS_MAX}");
    let value: f64 = text.trim().parse().map_err(|_| refused())?;
    if !(value > 0.0 && value <= TIMEOUT_SECONDS_MAX) {
        return Err(refused());
    }
    // Below a millisecond the limit would round to nothing and every call would fail.
    Ok(Duration::from_secs_f64(value).max(Duration::from_millis(1)))
}

/// The client's limits for a `--timeout` of `request`.
pub fn timeouts(request: Duration) -> Timeouts {
    Timeouts {
        connect: CONNECT_TIMEOUT_DEFAULT.min(request),
        request,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves whole and fractional seconds are taken, and zero, negatives, NaN, infinity,
    // words and values above the maximum are refused with the rule.
    #[test]
    fn seconds_are_positive_and_bounded() {
        assert_eq!(seconds("30"), Ok(Duration::from_secs(30)));
        assert_eq!(seconds("0.2"), Ok(Duration::from_millis(200)));
        assert_eq!(seconds("86400"), Ok(Duration::from_secs(86_400)));
        assert_eq!(seconds("1e-9"), Ok(Duration::from_millis(1)));
        for bad in ["0", "-1", "NaN", "inf", "soon", "", "86400.5", "1e300"] {
            let error = seconds(bad).unwrap_err();
            assert!(error.contains("seconds above 0"), "{bad}: {error}");
        }
    }

    // Proves the connect limit never exceeds the request limit, and is the client's
    // default when the request limit is longer.
    #[test]
    fn connect_limit_is_capped_by_the_timeout() {
        let short = timeouts(Duration::from_millis(200));
        assert_eq!(short.connect, Duration::from_millis(200));
        assert_eq!(short.request, Duration::from_millis(200));
        let long = timeouts(Duration::from_secs(60));
        assert_eq!(long.connect, CONNECT_TIMEOUT_DEFAULT);
        assert_eq!(long.request, Duration::from_secs(60));
    }
}
