//! Model test for the group settings: `Topic` (with a `ManualClock`) against a reference
//! model written here from the rules in docs/semantics.md (it does not use
//! `mailroom::group`), driven by random publishes, polls by several consumers, acks,
//! nacks of every kind with delays and reasons, touches, clock advances, redrives and
//! purges over groups with leases, backoff and `max_in_flight` > 1, and batch polls,
//! acks and nacks (which the model performs as the single operations, one after
//! another), seeks and pauses. Every result and the whole observable state of every
//! group are compared after every step, and no `(offset, attempt)` may be handed out
//! twice by one group.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::sync::Arc;

use mailroom::clock::ManualClock;
use mailroom::group::NotOwned;
use mailroom::group::{GroupConfig, GroupCounters, NackKind, NackOptions, Pause};
use mailroom::topic::{
    DeadLetterInfo, Delivery, DeliveryId, GroupInfo, Nack, StartPosition, Topic, TopicError,
    BATCH_DELIVERIES_MAX,
};
use mailroom_testkit::model::backoff_ms;
use mailroom_testkit::strategy::{
    group_config, nack_delay_ms, nack_kind, nack_reason, offset_range, pause_ms, seek_target,
    CONSUMERS,
};
use proptest::prelude::*;

#[path = "topic_model_settings/harness.rs"]
mod harness;
#[path = "topic_model_settings/model.rs"]
mod model;

use harness::Harness;
use model::{refused, MGroup, Phase, Refused};

const NAMES: [&str; 3] = ["a", "b", "ghost"];

#[derive(Debug, Clone)]
enum Pick {
    /// The last delivery this consumer got from this group.
    Last(usize),
    /// Any delivery seen so far.
    Seen(usize),
    MadeUp(u64, u32),
}

/// What a batch ack or nack names.
#[derive(Debug, Clone)]
enum BatchPick {
    One(Pick),
    /// Every delivery of the last batch this consumer polled from this group.
    LastBatch(usize),
}

#[derive(Debug, Clone)]
enum Op {
    Publish(u32),
    Create(usize, GroupConfig),
    Poll(usize, usize),
    Ack(usize, Pick),
    Nack(usize, Pick, NackKind, Option<u64>, Option<String>),
    Touch(usize, Pick),
    Advance(u64),
    Redrive(usize, Range<u64>),
    Purge(usize, Range<u64>),
    PollBatch(usize, usize, usize),
    AckBatch(usize, Vec<BatchPick>),
    NackBatch(usize, Vec<BatchPick>, NackKind, Option<u64>, Option<String>),
    Seek(usize, StartPosition),
    /// Group, and the pause's length from now (`None`: until a resume).
    Pause(usize, Option<u64>),
    Resume(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let name = 0..NAMES.len();
    let pick = prop_oneof![
        4 => (0..CONSUMERS.len()).prop_map(Pick::Last),
        2 => any::<usize>().prop_map(Pick::Seen),
        1 => (0..8u64, 0..6u32).prop_map(|(o, a)| Pick::MadeUp(o, a)),
    ];
    let kind = nack_kind();
    let range = offset_range(0..8, 0..10);
    let max = prop_oneof![
        12 => 1..4usize,
        1 => Just(0usize),
        1 => Just(BATCH_DELIVERIES_MAX),
        1 => Just(BATCH_DELIVERIES_MAX + 1),
    ];
    let batch_pick = prop_oneof![
        3 => pick.clone().prop_map(BatchPick::One),
        2 => (0..CONSUMERS.len()).prop_map(BatchPick::LastBatch),
    ];
    let picks = proptest::collection::vec(batch_pick, 0..4);
    prop_oneof![
        3 => any::<u32>().prop_map(Op::Publish),
        1 => (0..2usize, group_config()).prop_map(|(n, c)| Op::Create(n, c)),
        6 => (name.clone(), 0..CONSUMERS.len()).prop_map(|(n, c)| Op::Poll(n, c)),
        4 => (name.clone(), pick.clone()).prop_map(|(n, p)| Op::Ack(n, p)),
        4 => (name.clone(), pick.clone(), kind.clone(), nack_delay_ms(), nack_reason())
            .prop_map(|(n, p, k, d, r)| Op::Nack(n, p, k, d, r)),
        1 => (name.clone(), pick.clone()).prop_map(|(n, p)| Op::Touch(n, p)),
        3 => (0..70u64).prop_map(Op::Advance),
        1 => (name.clone(), range.clone()).prop_map(|(n, r)| Op::Redrive(n, r)),
        1 => (name.clone(), range).prop_map(|(n, r)| Op::Purge(n, r)),
        4 => (name.clone(), 0..CONSUMERS.len(), max).prop_map(|(n, c, m)| Op::PollBatch(n, c, m)),
        2 => (name.clone(), picks.clone()).prop_map(|(n, p)| Op::AckBatch(n, p)),
        2 => (name, picks, kind.clone(), nack_delay_ms(), nack_reason())
            .prop_map(|(n, p, k, d, r)| Op::NackBatch(n, p, k, d, r)),
    ]
}

/// [`op`] with seeks, pauses and resumes mixed in. A strategy of its own, so that the
/// saved regression seeds of [`op`] keep reproducing their cases.
fn op_with_moves() -> impl Strategy<Value = Op> {
    let name = 0..NAMES.len();
    prop_oneof![
        12 => op(),
        1 => (name.clone(), seek_target(10)).prop_map(|(n, t)| Op::Seek(n, t)),
        1 => (name.clone(), pause_ms()).prop_map(|(n, d)| Op::Pause(n, d)),
        1 => name.prop_map(Op::Resume),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 384, ..ProptestConfig::default() })]

    // Proves the topic follows the reference model of leases, nack kinds, delays,
    // backoff, redrive, purge, max_in_flight and batches step by step.
    #[test]
    fn topic_matches_the_settings_model(ops in proptest::collection::vec(op(), 1..120)) {
        let mut harness = Harness::new();
        for op in &ops {
            harness.step(op);
        }
    }

    // Proves the same with seeks (by offset, to either end, past the end), pauses (timed
    // and until a resume) and resumes mixed in: attempt numbers never repeat.
    #[test]
    fn topic_matches_the_settings_model_with_seeks_and_pauses(
        ops in proptest::collection::vec(op_with_moves(), 1..120),
    ) {
        let mut harness = Harness::new();
        for op in &ops {
            harness.step(op);
        }
    }
}
