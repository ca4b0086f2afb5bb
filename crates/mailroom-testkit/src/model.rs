//! Pieces of the reference models, written from the rules rather than from the code
//! under test, and shared so each rule is modelled once.

use mailroom::group::Backoff;

/// The delay a group's backoff asks for after the `failures`-th failure (the first is 1):
/// none, the fixed delay, or `base_ms` doubled per failure after the first, capped at
/// `cap_ms`.
///
/// # Examples
///
/// ```
/// use mailroom::group::Backoff;
/// use mailroom_testkit::model::backoff_ms;
///
/// let doubling = Some(Backoff::Exponential { base_ms: 10, cap_ms: 50 });
/// assert_eq!([1, 2, 3, 4].map(|failures| backoff_ms(doubling, failures)), [10, 20, 40, 50]);
/// assert_eq!(backoff_ms(Some(Backoff::Fixed { delay_ms: 7 }), 3), 7);
/// assert_eq!(backoff_ms(None, 3), 0);
/// ```
pub fn backoff_ms(backoff: Option<Backoff>, failures: u32) -> u64 {
    match backoff {
        None => 0,
        Some(Backoff::Fixed { delay_ms }) => delay_ms,
        // More than 40 doublings of any base a test uses is past every cap anyway.
        Some(Backoff::Exponential { base_ms, cap_ms }) => {
            (base_ms << failures.saturating_sub(1).min(40)).min(cap_ms)
        }
    }
}
