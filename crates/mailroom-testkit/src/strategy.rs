//! Proptest strategies over the group API's inputs.
//!
//! Each strategy here is used by more than one model test; a regression seed saved by one
//! of them keeps reproducing its case only while the strategy stays the same, so change
//! one only together with the tests' `.proptest-regressions` files.

use std::ops::Range;

use mailroom::group::{Backoff, GroupConfig, NackKind};
use mailroom::topic::StartPosition;
use proptest::prelude::*;

/// The consumers the model tests poll as: the anonymous one and two named ones.
pub const CONSUMERS: [Option<&str>; 3] = [None, Some("x"), Some("y")];

/// Group settings: 1 to 3 attempts, an optional lease of 20 to 119 ms, no, fixed or
/// exponential backoff, and 1 to 3 deliveries in flight. Small, so leases run out and
/// backoffs matter within a hundred steps.
///
/// # Examples
///
/// ```
/// use proptest::strategy::{Strategy, ValueTree};
/// use proptest::test_runner::TestRunner;
///
/// let mut runner = TestRunner::deterministic();
/// let config = mailroom_testkit::strategy::group_config()
///     .new_tree(&mut runner)
///     .unwrap()
///     .current();
/// assert!((1..4).contains(&config.max_attempts));
/// assert!((1..4).contains(&config.max_in_flight));
/// ```
pub fn group_config() -> impl Strategy<Value = GroupConfig> + Clone {
    let backoff = prop_oneof![
        Just(None),
        (0..60u64).prop_map(|delay_ms| Some(Backoff::Fixed { delay_ms })),
        (1..20u64, 20..90u64)
            .prop_map(|(base_ms, cap_ms)| Some(Backoff::Exponential { base_ms, cap_ms })),
    ];
    (1..4u32, proptest::option::of(20..120u64), backoff, 1..4u32).prop_map(
        |(max_attempts, lease_ms, backoff, max_in_flight)| GroupConfig {
            max_attempts,
            lease_ms,
            backoff,
            max_in_flight,
        },
    )
}

/// Every nack kind, equally often.
///
/// # Examples
///
/// ```
/// use proptest::strategy::{Strategy, ValueTree};
/// use proptest::test_runner::TestRunner;
///
/// let mut runner = TestRunner::deterministic();
/// let kind = mailroom_testkit::strategy::nack_kind().new_tree(&mut runner).unwrap().current();
/// let _: mailroom::group::NackKind = kind;
/// ```
pub fn nack_kind() -> impl Strategy<Value = NackKind> + Clone {
    prop_oneof![
        Just(NackKind::Nack),
        Just(NackKind::Release),
        Just(NackKind::Reject)
    ]
}

/// A nack's optional delay: none (the group's backoff) or 0 to 79 ms.
///
/// # Examples
///
/// ```
/// use proptest::strategy::{Strategy, ValueTree};
/// use proptest::test_runner::TestRunner;
///
/// let mut runner = TestRunner::deterministic();
/// let delay = mailroom_testkit::strategy::nack_delay_ms().new_tree(&mut runner).unwrap().current();
/// assert!(delay.is_none_or(|ms| ms < 80));
/// ```
pub fn nack_delay_ms() -> impl Strategy<Value = Option<u64>> + Clone {
    proptest::option::of(0..80u64)
}

/// A nack's optional reason: none, or up to six lowercase letters (the empty one too).
///
/// # Examples
///
/// ```
/// use proptest::strategy::{Strategy, ValueTree};
/// use proptest::test_runner::TestRunner;
///
/// let mut runner = TestRunner::deterministic();
/// let reason = mailroom_testkit::strategy::nack_reason().new_tree(&mut runner).unwrap().current();
/// assert!(reason.is_none_or(|text| text.len() <= 6));
/// ```
pub fn nack_reason() -> impl Strategy<Value = Option<String>> + Clone {
    proptest::option::of("[a-z]{0,6}")
}

/// A half-open offset range for redrive and purge: a start drawn from `starts`, a length
/// drawn from `lens` (so empty ranges happen).
///
/// # Examples
///
/// ```
/// use proptest::strategy::{Strategy, ValueTree};
/// use proptest::test_runner::TestRunner;
///
/// let mut runner = TestRunner::deterministic();
/// let range = mailroom_testkit::strategy::offset_range(0..6, 0..8)
///     .new_tree(&mut runner)
///     .unwrap()
///     .current();
/// assert!(range.start < 6 && range.end - range.start < 8);
/// ```
pub fn offset_range(
    starts: Range<u64>,
    lens: Range<u64>,
) -> impl Strategy<Value = Range<u64>> + Clone {
    (starts, lens).prop_map(|(start, len)| start..start + len)
}

/// Where a seek goes: the oldest message, the end of the log, or an offset below
/// `offsets_end` (so offsets past the end of a short log happen).
///
/// # Examples
///
/// ```
/// use mailroom::topic::StartPosition;
/// use proptest::strategy::{Strategy, ValueTree};
/// use proptest::test_runner::TestRunner;
///
/// let mut runner = TestRunner::deterministic();
/// let to = mailroom_testkit::strategy::seek_target(10).new_tree(&mut runner).unwrap().current();
/// assert!(!matches!(to, StartPosition::Offset(offset) if offset >= 10));
/// ```
pub fn seek_target(offsets_end: u64) -> impl Strategy<Value = StartPosition> + Clone {
    prop_oneof![
        1 => Just(StartPosition::Earliest),
        1 => Just(StartPosition::Latest),
        4 => (0..offsets_end).prop_map(StartPosition::Offset),
    ]
}

/// How long a pause lasts from now (ms), or `None` for a pause until a resume.
///
/// # Examples
///
/// ```
/// use proptest::strategy::{Strategy, ValueTree};
/// use proptest::test_runner::TestRunner;
///
/// let mut runner = TestRunner::deterministic();
/// let length = mailroom_testkit::strategy::pause_ms().new_tree(&mut runner).unwrap().current();
/// assert!(length.is_none_or(|ms| ms < 150));
/// ```
pub fn pause_ms() -> impl Strategy<Value = Option<u64>> + Clone {
    proptest::option::of(0..150u64)
}
