//! Batches and group commit on one group: the batch rules (arguments, partial results),
//! one write and one `fdatasync` per batch, batches surviving restarts and power cuts,
//! and concurrent consumers of ONE group sharing syncs without ever confirming (or
//! showing) anything a power cut could take back.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use mailroom::group::{NackKind, NackOptions, NotOwned, REASON_BYTES_MAX};
use mailroom::topic::{DeliveryId, GroupInfo, Nack, TopicError, BATCH_DELIVERIES_MAX};
use mailroom_store::log::LogOptions;
use mailroom_store::storage::SimStorage;
use mailroom_store::{Deferred, DurableTopic, PollScope, StoreError, StoreOptions};
use mailroom_testkit::store::{offset_payload, open_topic, topic_with_group};

/// Options where nothing but the operation under test syncs: no checkpoint, no roll.
fn quiet_options() -> StoreOptions {
    StoreOptions {
        log: LogOptions {
            segment_bytes_max: 64 << 20,
            ..LogOptions::default()
        },
        checkpoint_every: 1 << 40,
        ..StoreOptions::default()
    }
}

fn invalid<T: std::fmt::Debug>(result: Result<T, StoreError>) {
    assert!(
        matches!(
            result,
            Err(StoreError::Topic(TopicError::InvalidArgument { .. }))
        ),
        "{result:?}"
    );
}

fn ids(topic: &DurableTopic, consumer: Option<&str>, max: usize) -> Vec<DeliveryId> {
    let batch = topic.poll_batch("g", consumer, max).unwrap();
    for delivery in &batch {
        assert_eq!(delivery.message, offset_payload(delivery.offset));
    }
    batch.iter().map(|delivery| delivery.id()).collect()
}

// Proves bad batch arguments are refused with InvalidArgument before the group is looked
// up, an unknown group is UnknownGroup, and an empty ack list answers an empty list.
#[test]
fn batch_arguments_are_checked() {
    let (_store, topic) = topic_with_group(&SimStorage::new(), &quiet_options(), 4, 2);
    invalid(topic.poll_batch("nope", None, 0));
    invalid(topic.poll_batch("nope", None, BATCH_DELIVERIES_MAX + 1));
    invalid(topic.poll_batch("nope", Some(""), 1));
    let too_many = vec![
        DeliveryId {
            offset: 0,
            attempt: 1
        };
        BATCH_DELIVERIES_MAX + 1
    ];
    invalid(topic.ack_batch("nope", &too_many));
    invalid(topic.nack_batch("nope", &too_many, &NackOptions::default()));
    let long_reason =
        NackOptions::new(NackKind::Reject).with_reason("x".repeat(REASON_BYTES_MAX + 1));
    invalid(topic.nack_batch("nope", &[], &long_reason));
    assert!(matches!(
        topic.poll_batch("nope", None, 1),
        Err(StoreError::Topic(TopicError::UnknownGroup { .. }))
    ));
    assert!(matches!(
        topic.ack_batch("nope", &[]),
        Err(StoreError::Topic(TopicError::UnknownGroup { .. }))
    ));
    assert_eq!(topic.ack_batch("g", &[]).unwrap(), vec![]);
    assert_eq!(
        topic
            .poll_batch("g", None, BATCH_DELIVERIES_MAX)
            .unwrap()
            .len(),
        2
    );
}

// Proves a batch poll returns owned deliveries first and stops at max_in_flight, and that
// each result of an ack or nack batch is what a single call would answer at that point:
// a repeated or stale id is NotOwned, and the refusals do not stop the rest.
#[test]
fn batch_results_follow_single_operations() {
    let (_store, topic) = topic_with_group(&SimStorage::new(), &quiet_options(), 4, 6);
    let first = ids(&topic, Some("w1"), 3);
    assert_eq!(
        first.iter().map(|id| id.offset).collect::<Vec<_>>(),
        [0, 1, 2]
    );
    // The window holds 4: one more for w2, then the group is full.
    let second = ids(&topic, Some("w2"), 10);
    assert_eq!(second.iter().map(|id| id.offset).collect::<Vec<_>>(), [3]);
    assert_eq!(ids(&topic, Some("w3"), 10), Vec::<DeliveryId>::new());
    // w1 gets its own back, same attempts, before anything new.
    assert_eq!(ids(&topic, Some("w1"), 2), first[..2]);
    let stale = DeliveryId {
        attempt: 0,
        ..first[1]
    };
    let results = topic
        .ack_batch("g", &[first[0], first[0], stale, first[1], second[0]])
        .unwrap();
    assert!(
        results[0].is_ok() && results[3].is_ok() && results[4].is_ok(),
        "{results:?}"
    );
    assert!(matches!(results[1], Err(NotOwned { .. })), "{results:?}");
    assert!(matches!(results[2], Err(NotOwned { .. })), "{results:?}");
    let reject = NackOptions::new(NackKind::Reject).with_reason("bad");
    let results = topic
        .nack_batch("g", &[first[2], first[2]], &reject)
        .unwrap();
    assert_eq!(results[0], Ok(Nack::DeadLettered));
    assert!(results[1].is_err(), "{results:?}");
    assert_eq!(topic.position("g").unwrap(), 4);
    let dead = topic.dead_letter_info("g").unwrap();
    assert_eq!(
        (dead[0].offset, dead[0].message.clone()),
        (2, offset_payload(2))
    );
    // A single poll by w1 now gets a new delivery: the batch's are all settled.
    assert_eq!(topic.poll_as("g", "w1").unwrap().unwrap().offset, 4);
}

// Proves a batch of 64 polls, acks or nacks (dead letters with their payload copies
// included) costs exactly one fdatasync, where 64 single acks cost 64.
#[test]
fn one_sync_per_batch() {
    let sim = SimStorage::new();
    let (_store, topic) = topic_with_group(&sim, &quiet_options(), 64, 256);
    let (polled, syncs) = count_syncs(&sim, || ids(&topic, None, 64));
    assert_eq!((polled.len(), syncs), (64, 1));
    let (acked, syncs) = count_syncs(&sim, || topic.ack_batch("g", &polled).unwrap());
    assert!(acked.iter().all(Result::is_ok));
    assert_eq!(syncs, 1);
    let polled = ids(&topic, None, 64);
    let reject = NackOptions::new(NackKind::Reject);
    let (nacked, syncs) = count_syncs(&sim, || topic.nack_batch("g", &polled, &reject).unwrap());
    assert!(nacked
        .iter()
        .all(|result| *result == Ok(Nack::DeadLettered)));
    assert_eq!(syncs, 1);
    assert_eq!(topic.dead_letters("g").unwrap().len(), 64);
    let polled = ids(&topic, None, 64);
    let ((), singles) = count_syncs(&sim, || {
        for &id in &polled {
            topic.ack("g", id).unwrap();
        }
    });
    assert_eq!(singles, 64);
}

// Proves an ack-then-poll batch acks a full window and refills it in ONE transaction:
// exactly one fdatasync for 64 acks plus 64 new deliveries, the new deliveries are the
// next 64 offsets (the freed slots), and both survive a power cut.
#[test]
fn ack_then_poll_costs_one_sync_and_refills_the_window() {
    let sim = SimStorage::new();
    let (store, topic) = topic_with_group(&sim, &quiet_options(), 64, 256);
    let first = ids(&topic, Some("w1"), 64);
    let ((acked, next), syncs) = count_syncs(&sim, || {
        topic
            .ack_then_poll_batch("g", &first, Some("w1"), 64)
            .unwrap()
    });
    assert_eq!(syncs, 1);
    assert!(acked.iter().all(Result::is_ok));
    let offsets: Vec<u64> = next.iter().map(|d| d.offset).collect();
    assert_eq!(offsets, (64..128).collect::<Vec<_>>());
    assert_eq!(next[5].message, offset_payload(69));
    // A second naming of an acked delivery is refused, like ack_batch; w1's own come back.
    let again = topic
        .ack_then_poll_batch("g", &first[..1], Some("w1"), 64)
        .unwrap();
    assert!(again.0[0].is_err());
    assert_eq!(again.1, next);
    assert_eq!(topic.position("g").unwrap(), 64);
    invalid(topic.ack_then_poll_batch("g", &[], Some("w1"), 0));
    invalid(topic.ack_then_poll_batch("g", &[], Some(""), 1));
    drop(topic);
    drop(store);
    let (_store, topic) = open_topic(&sim.crash(7), &quiet_options());
    assert_eq!(topic.position("g").unwrap(), 64);
    let owned: Vec<u64> = topic
        .poll_batch("g", Some("w1"), 64)
        .unwrap()
        .iter()
        .map(|d| d.offset)
        .collect();
    assert_eq!(owned, offsets);
}

// Proves nacks, acks and a poll settled in one call cost one fdatasync in all, and that
// the retries the nacks make are handed out by that very poll.
#[test]
fn settle_then_poll_costs_one_sync() {
    let sim = SimStorage::new();
    let (_store, topic) = topic_with_group(&sim, &quiet_options(), 8, 16);
    let first = ids(&topic, Some("w1"), 8);
    let retry = [(&first[..4], NackOptions::default())];
    let ((nacked, (acked, next)), syncs) = count_syncs(&sim, || {
        topic
            .settle_then_poll_messages_deferred(
                "g",
                &retry,
                &first[4..],
                Some("w1"),
                8,
                PollScope::All,
            )
            .and_then(Deferred::wait)
            .unwrap()
    });
    assert_eq!(syncs, 1);
    assert!(nacked[0].iter().all(Result::is_ok) && acked.iter().all(Result::is_ok));
    // The window (offsets 0..8 while 0 is unfinished) holds nothing new.
    let polled: Vec<(u64, u32)> = next.iter().map(|d| (d.offset, d.attempt)).collect();
    assert_eq!(polled, [(0, 2), (1, 2), (2, 2), (3, 2)]);
}

/// What `action` returns and how many file syncs it took.
fn count_syncs<T>(sim: &SimStorage, action: impl FnOnce() -> T) -> (T, u64) {
    let before = sim.syncs_done();
    let result = action();
    (result, sim.syncs_done() - before)
}

/// What a test can see of group `g`: info, in-flight list and dead letters with payloads.
fn observe(topic: &DurableTopic) -> (GroupInfo, Vec<DeliveryId>, Vec<(u64, u32, Bytes)>) {
    let dead = topic
        .dead_letters("g")
        .unwrap()
        .into_iter()
        .map(|dead| (dead.offset, dead.attempts, dead.message))
        .collect();
    (
        topic.group_info("g").unwrap(),
        topic.in_flight("g").unwrap(),
        dead,
    )
}

// Proves the state left by batches (deliveries owned by several consumers, acks, retries
// and dead letters whose payload records got their offsets after the write) is exactly
// what a clean reopen and every power-cut image give back, and that redriven dead
// letters are delivered with the payloads the batch copied.
#[test]
fn batches_survive_reopen_and_power_cut() {
    let sim = SimStorage::new();
    let mut options = quiet_options();
    options.checkpoint_every = 5; // checkpoints land between and inside batches
    let (store, topic) = topic_with_group(&sim, &options, 16, 40);
    let w1 = ids(&topic, Some("w1"), 8);
    let w2 = ids(&topic, Some("w2"), 8);
    topic.ack_batch("g", &w1[..5]).unwrap();
    let reject = NackOptions::new(NackKind::Reject);
    topic.nack_batch("g", &w2[..3], &reject).unwrap();
    topic
        .nack_batch("g", &w2[3..5], &NackOptions::default())
        .unwrap();
    let retried = ids(&topic, Some("w3"), 4);
    assert!(retried.iter().any(|id| id.attempt == 2), "{retried:?}");
    let expected = observe(&topic);
    assert_eq!(expected.2.len(), 3);
    drop((store, topic));
    let (store, topic) = open_topic(&sim, &options);
    assert_eq!(observe(&topic), expected);
    drop((store, topic));
    for seed in 0..8 {
        let image = sim.crash(seed);
        let (_store, topic) = open_topic(&image, &options);
        assert_eq!(observe(&topic), expected, "power cut with seed {seed}");
        assert_eq!(topic.redrive("g", 0..u64::MAX).unwrap(), 3);
        let redriven = topic.poll_batch("g", Some("w4"), 16).unwrap();
        for delivery in &redriven {
            assert_eq!(delivery.message, offset_payload(delivery.offset));
        }
        assert!(redriven
            .iter()
            .any(|d| d.offset == w2[0].offset && d.attempt == 2));
    }
}

// Proves a pure read never shows a transition before it is durable: once position()
// reports an ack that another thread is still waiting on a (slow) sync for, a power-cut
// image taken right then already holds it.
#[test]
fn reads_never_show_what_a_power_cut_could_take_back() {
    let sim = SimStorage::new();
    let (_store, topic) = topic_with_group(&sim, &quiet_options(), 4, 8);
    sim.set_sync_delay(Duration::from_millis(20));
    for round in 0..4u64 {
        let id = ids(&topic, Some("w"), 1)[0];
        assert_eq!(id.offset, round);
        let acker = {
            let topic = topic.clone();
            std::thread::spawn(move || topic.ack("g", id).unwrap())
        };
        while topic.position("g").unwrap() == round {
            std::hint::spin_loop();
        }
        let images: Vec<SimStorage> = (0..4).map(|seed| sim.crash(round * 4 + seed)).collect();
        acker.join().unwrap();
        for image in &images {
            let (_store, after) = open_topic(image, &quiet_options());
            assert_eq!(after.position("g").unwrap(), round + 1, "round {round}");
        }
    }
}

const WORKERS: usize = 4;
const ROUNDS_PER_WORKER: usize = 40;

/// What the workers were told, in order of confirmation.
#[derive(Debug, Default, Clone)]
struct Confirmed {
    /// Every delivery a poll returned: offset → highest attempt.
    delivered: BTreeMap<u64, u32>,
    /// Every acked offset.
    acked: BTreeSet<u64>,
    /// How many transitions (deliveries made plus acks) were confirmed.
    transitions: u64,
}

/// Each worker polls a batch of up to 3 as itself, then acks them all, alternating single
/// and batch calls, recording each confirmation after the call returns.
fn run_worker(topic: &DurableTopic, worker: usize, confirmed: &Mutex<Confirmed>) {
    let name = format!("w{worker}");
    for round in 0..ROUNDS_PER_WORKER {
        let batch = if round % 2 == 0 {
            topic.poll_batch("g", Some(&name), 3).unwrap()
        } else {
            topic.poll_as("g", &name).unwrap().into_iter().collect()
        };
        {
            let mut confirmed = confirmed.lock().unwrap();
            for delivery in &batch {
                assert_eq!(delivery.message, offset_payload(delivery.offset));
                let attempt = confirmed.delivered.entry(delivery.offset).or_default();
                *attempt = (*attempt).max(delivery.attempt);
                confirmed.transitions += 1;
            }
        }
        let ids: Vec<DeliveryId> = batch.iter().map(|delivery| delivery.id()).collect();
        if round % 4 < 2 {
            assert!(topic
                .ack_batch("g", &ids)
                .unwrap()
                .iter()
                .all(Result::is_ok));
        } else {
            ids.iter().for_each(|&id| topic.ack("g", id).unwrap());
        }
        let mut confirmed = confirmed.lock().unwrap();
        confirmed.acked.extend(ids.iter().map(|id| id.offset));
        confirmed.transitions += ids.len() as u64;
    }
}

/// Checks a power-cut image against what was confirmed before it was taken: no acked
/// message comes back, no delivery comes back with a lower attempt, and every message is
/// either acked or still there to finish.
fn check_image(image: &SimStorage, confirmed: &Confirmed, messages: u64) {
    let (_store, topic) = open_topic(image, &quiet_options());
    let mut seen = BTreeSet::new();
    // Each worker's own deliveries in flight come back to it first, then new ones.
    for worker in (0..WORKERS).chain([WORKERS]) {
        let name = format!("w{worker}");
        loop {
            let batch = topic.poll_batch("g", Some(&name), 64).unwrap();
            if batch.is_empty() {
                break;
            }
            for delivery in &batch {
                assert!(
                    !confirmed.acked.contains(&delivery.offset),
                    "confirmed ack of {} lost",
                    delivery.offset
                );
                let before = confirmed
                    .delivered
                    .get(&delivery.offset)
                    .copied()
                    .unwrap_or(0);
                assert!(
                    delivery.attempt >= before,
                    "attempt went back: {delivery:?}"
                );
                seen.insert(delivery.offset);
            }
            let ids: Vec<DeliveryId> = batch.iter().map(|delivery| delivery.id()).collect();
            assert!(topic
                .ack_batch("g", &ids)
                .unwrap()
                .iter()
                .all(Result::is_ok));
        }
    }
    // Nothing is stuck: every message not delivered again here was acked on the image.
    assert_eq!(
        topic.position("g").unwrap(),
        messages,
        "everything finished"
    );
    assert!(topic.in_flight("g").unwrap().is_empty());
    assert!(seen.iter().all(|offset| *offset < messages));
}

// Proves concurrent consumers of ONE group with max_in_flight > 1 share fdatasyncs (the
// group's lock is not held across them), and that every power-cut image taken while they
// run keeps every transition confirmed before it.
#[test]
fn concurrent_consumers_of_one_group_share_syncs_and_survive_power_cuts() {
    let sim = SimStorage::new();
    let messages = (WORKERS * ROUNDS_PER_WORKER * 3) as u64;
    let (_store, topic) = topic_with_group(&sim, &quiet_options(), 16, messages);
    // A slow disk, so transitions pile up behind a running sync as they would on hardware.
    sim.set_sync_delay(Duration::from_millis(2));
    let confirmed = Arc::new(Mutex::new(Confirmed::default()));
    let done = Arc::new(AtomicBool::new(false));
    let syncs_before = sim.syncs_done();
    let workers: Vec<_> = (0..WORKERS)
        .map(|worker| {
            let (topic, confirmed) = (topic.clone(), Arc::clone(&confirmed));
            std::thread::spawn(move || run_worker(&topic, worker, &confirmed))
        })
        .collect();
    let cutter = {
        let (sim, confirmed, done) = (sim.clone(), Arc::clone(&confirmed), Arc::clone(&done));
        std::thread::spawn(move || {
            let mut images = Vec::new();
            let mut seed = 0;
            while !done.load(Ordering::Acquire) {
                // What was confirmed before the image: all of it must be on it.
                let before = confirmed.lock().unwrap().clone();
                images.push((sim.crash(seed), before));
                seed += 1;
                std::thread::sleep(Duration::from_millis(5));
            }
            images
        })
    };
    for worker in workers {
        worker.join().expect("worker panicked");
    }
    done.store(true, Ordering::Release);
    let images = cutter.join().expect("cutter panicked");
    let confirmed = confirmed.lock().unwrap().clone();
    let syncs = sim.syncs_done() - syncs_before;
    // Every call waits for a sync; without sharing there would be one per call at least.
    assert!(
        syncs * 2 <= confirmed.transitions,
        "{syncs} syncs for {} transitions: one group's transitions do not share syncs",
        confirmed.transitions
    );
    assert!(images.len() >= 2, "images were taken while the workers ran");
    sim.set_sync_delay(Duration::ZERO);
    for (image, before) in images.iter().step_by((images.len() / 6).max(1)) {
        check_image(image, before, messages);
    }
    check_image(&sim.crash(u64::MAX), &confirmed, messages);
}
