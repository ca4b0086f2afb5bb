//! The checks on request values that several routes share, so that one mistake reads the
//! same on every route: a consumer on `poll`, `poll/raw` and `poll/batch`; a nack's
//! delay and reason on `nack` and `nack/batch`; a new group's settings.
//!
//! The rules are the library's, not copies: each check runs the library's own and words
//! its typed refusal (field, bound, value) through `From<ArgumentError> for ApiError`. The
//! library's field names are the JSON fields' names, so one mapping words them all. The
//! routes still call these before they touch the store, so a bad argument is refused
//! before (and regardless of) the topic or group lookup, as it always was.

use mailroom::group::NackOptions;
#[cfg(doc)]
use mailroom::group::{
    CONSUMER_BYTES_MAX, DELAY_MS_MAX, LEASE_MS_MAX, MAX_IN_FLIGHT_MAX, REASON_BYTES_MAX,
};
use mailroom::topic::TopicError;

use crate::error::ApiError;
use crate::routes::groups::{group_config, BackoffBody};

/// Checks a poll's consumer (absent is the anonymous consumer).
///
/// ```
/// use mailroom_server::routes::arguments::check_consumer;
/// assert!(check_consumer(None).is_ok());
/// assert!(check_consumer(Some("worker-1")).is_ok());
/// let error = check_consumer(Some("")).unwrap_err();
/// assert_eq!(error.message, "consumer must be 1..=128 bytes long, got 0");
/// ```
///
/// # Errors
/// 400 `invalid_argument` for an empty consumer or one over [`CONSUMER_BYTES_MAX`] bytes.
pub fn check_consumer(consumer: Option<&str>) -> Result<(), ApiError> {
    match consumer {
        Some(consumer) => Ok(mailroom::group::check_consumer(consumer)?),
        None => Ok(()),
    }
}

/// Checks a nack's `delay_ms` and `reason`.
///
/// ```
/// use mailroom::group::{NackKind, NackOptions};
/// use mailroom_server::routes::arguments::check_nack_options;
/// let options = NackOptions::new(NackKind::Nack).with_reason("r".repeat(1025));
/// let error = check_nack_options(&options).unwrap_err();
/// assert_eq!(error.message, "reason must be at most 1024 bytes long, got 1025");
/// ```
///
/// # Errors
/// 400 `invalid_argument` for a delay over [`DELAY_MS_MAX`] or a reason over
/// [`REASON_BYTES_MAX`] bytes.
pub fn check_nack_options(options: &NackOptions) -> Result<(), ApiError> {
    options
        .check()
        .map_err(|error| ApiError::from(TopicError::from(error)))
}

/// Checks a new group's optional settings.
///
/// ```
/// use mailroom_server::routes::arguments::check_group_settings;
/// assert!(check_group_settings(Some(30_000), None, Some(8)).is_ok());
/// let error = check_group_settings(None, None, Some(0)).unwrap_err();
/// assert_eq!(error.message, "max_in_flight must be in 1..=65536, got 0");
/// ```
///
/// # Errors
/// 400 `invalid_argument` for a lease outside 1..=[`LEASE_MS_MAX`], a backoff delay over
/// [`DELAY_MS_MAX`] or with `base_ms` above `cap_ms`, or `max_in_flight` outside
/// 1..=[`MAX_IN_FLIGHT_MAX`].
pub fn check_group_settings(
    lease_ms: Option<u64>,
    backoff: Option<BackoffBody>,
    max_in_flight: Option<u32>,
) -> Result<(), ApiError> {
    // `max_attempts` 1 passes the library's rule; the route checks the real one itself
    // against the server's own limit.
    match group_config(1, lease_ms, backoff, max_in_flight) {
        Some(config) => config
            .check()
            .map_err(|error| ApiError::from(TopicError::from(error))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mailroom::group::{
        NackKind, CONSUMER_BYTES_MAX, DELAY_MS_MAX, LEASE_MS_MAX, MAX_IN_FLIGHT_MAX,
        REASON_BYTES_MAX,
    };

    /// Whether the server's check and the library's agree on a group's settings.
    fn agree(lease_ms: Option<u64>, backoff: Option<BackoffBody>, window: Option<u32>) -> bool {
        let server = check_group_settings(lease_ms, backoff, window).is_ok();
        let library =
            group_config(1, lease_ms, backoff, window).is_none_or(|config| config.check().is_ok());
        assert_eq!(
            server, library,
            "{lease_ms:?} {backoff:?} {window:?}: server {server}, library {library}"
        );
        server
    }

    // Proves the server's group-setting check accepts and refuses exactly what the
    // library does at every boundary, so it only adds words, never a rule.
    #[test]
    fn group_settings_agree_with_the_library_at_each_boundary() {
        assert!(agree(Some(1), None, None));
        assert!(agree(Some(LEASE_MS_MAX), None, None));
        assert!(!agree(Some(0), None, None));
        assert!(!agree(Some(LEASE_MS_MAX + 1), None, None));
        assert!(agree(None, None, Some(1)));
        assert!(agree(None, None, Some(MAX_IN_FLIGHT_MAX)));
        assert!(!agree(None, None, Some(0)));
        assert!(!agree(None, None, Some(MAX_IN_FLIGHT_MAX + 1)));
        let fixed = |delay_ms| Some(BackoffBody::Fixed { delay_ms });
        assert!(agree(None, fixed(0), None));
        assert!(agree(None, fixed(DELAY_MS_MAX), None));
        assert!(!agree(None, fixed(DELAY_MS_MAX + 1), None));
        let exponential = |base_ms, cap_ms| Some(BackoffBody::Exponential { base_ms, cap_ms });
        assert!(agree(None, exponential(5, 5), None));
        assert!(agree(None, exponential(0, DELAY_MS_MAX), None));
        assert!(!agree(None, exponential(6, 5), None));
        assert!(!agree(None, exponential(1, DELAY_MS_MAX + 1), None));
    }

    // Proves the nack check agrees with the library's at the delay and reason limits,
    // and the consumer check at both ends of the consumer's length.
    #[test]
    fn nack_options_and_consumer_agree_with_the_library() {
        let nack = || NackOptions::new(NackKind::Nack);
        let cases = [
            (nack().with_delay_ms(DELAY_MS_MAX), true),
            (nack().with_delay_ms(DELAY_MS_MAX + 1), false),
            (nack().with_reason("r".repeat(REASON_BYTES_MAX)), true),
            (nack().with_reason("r".repeat(REASON_BYTES_MAX + 1)), false),
        ];
        for (options, accepted) in cases {
            assert_eq!(
                check_nack_options(&options).is_ok(),
                accepted,
                "{options:?}"
            );
            assert_eq!(options.check().is_ok(), accepted, "{options:?}");
        }
        let accepted = |bytes: usize| check_consumer(Some(&"c".repeat(bytes))).is_ok();
        assert!(check_consumer(None).is_ok());
        assert!(accepted(1) && accepted(CONSUMER_BYTES_MAX));
        assert!(!accepted(0) && !accepted(CONSUMER_BYTES_MAX + 1));
    }
}
