//! Pipelined publishers: several publishers each keep a window of `publish_deferred`
//! calls unconfirmed (as Kafka's, NATS's and RabbitMQ's async publishers do) and take the
//! confirmations back in any interleaving. A confirmation must never run ahead of the
//! disk: every message confirmed so far is in every power-cut image, at the offset it was
//! given, with its bytes.

use std::collections::VecDeque;

use bytes::Bytes;
use mailroom_store::log::{LogOptions, SyncPolicy};
use mailroom_store::storage::SimStorage;
use mailroom_store::{Deferred, StoreOptions};
use mailroom_testkit::store::open_topic;
use proptest::prelude::*;

const PUBLISHERS: usize = 3;
/// Power-cut images checked after each confirmation.
const SEEDS: u64 = 2;

/// What the test drives: publisher `p` publishes, or takes its oldest confirmation.
#[derive(Debug, Clone, Copy)]
enum Step {
    Publish(usize),
    Confirm(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..PUBLISHERS).prop_map(Step::Publish),
        (0..PUBLISHERS).prop_map(Step::Confirm),
    ]
}

fn options() -> StoreOptions {
    StoreOptions {
        log: LogOptions {
            // Small segments, so pipelines cross segment rolls.
            segment_bytes_max: 2048,
            sync: SyncPolicy::Always,
            ..LogOptions::default()
        },
        ..StoreOptions::default()
    }
}

/// Checks every power-cut image of `sim` holds each confirmed (offset, payload).
fn images_hold(sim: &SimStorage, confirmed: &[(u64, Bytes)]) -> Result<(), TestCaseError> {
    for seed in 0..SEEDS {
        let (_store, topic) = open_topic(&sim.crash(seed), &options());
        for (offset, payload) in confirmed {
            let read = topic.read(*offset).expect("read a confirmed offset");
            prop_assert_eq!(
                read.as_ref(),
                Some(payload),
                "offset {} after a power cut",
                offset
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    // Proves a pipelined publisher's confirmation comes only once its message is on disk
    // (in every power-cut image, at the offset answered), that offsets follow the order of
    // the calls across all publishers, and that windows of any size, interleaved with other
    // publishers' windows and segment rolls, lose or reorder nothing.
    #[test]
    fn confirmations_never_run_ahead_of_the_disk(
        steps in prop::collection::vec(step(), 1..48),
        window in 1usize..6,
    ) {
        let sim = SimStorage::new();
        let (_store, topic) = open_topic(&sim, &options());
        let mut pipelines: Vec<VecDeque<(u64, Bytes, Deferred<u64>)>> =
            (0..PUBLISHERS).map(|_| VecDeque::new()).collect();
        let mut published = 0u64;
        let mut confirmed: Vec<(u64, Bytes)> = Vec::new();
        for step in steps {
            match step {
                Step::Publish(p) if pipelines[p].len() < window => {
                    let payload = Bytes::from(format!("publisher {p} message {published}"));
                    let deferred = topic.publish_deferred(payload.clone()).unwrap();
                    pipelines[p].push_back((published, payload, deferred));
                    published += 1;
                }
                Step::Publish(_) => {}
                Step::Confirm(p) => {
                    let Some((expected, payload, deferred)) = pipelines[p].pop_front() else {
                        continue;
                    };
                    let offset = deferred.wait().unwrap();
                    prop_assert_eq!(offset, expected, "offsets follow the calls' order");
                    confirmed.push((offset, payload));
                    images_hold(&sim, &confirmed)?;
                }
            }
        }
        // The rest of every window, then everything published is on disk.
        for pipeline in &mut pipelines {
            while let Some((expected, payload, deferred)) = pipeline.pop_front() {
                prop_assert_eq!(deferred.wait().unwrap(), expected);
                confirmed.push((expected, payload));
            }
        }
        images_hold(&sim, &confirmed)?;
        prop_assert_eq!(topic.len(), published);
    }
}
