//! Deferred store calls (`*_deferred` → `Deferred`): written before the await, durable
//! (and answered) only after it; shared syncs when many tasks await on one thread;
//! fail-stop reaching every waiter; relaxed policies resolving at once; checkpoints
//! written by the wait side, never by the call part.

use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::executor::{block_on, LocalPool};
use futures::future::join_all;
use futures::task::LocalSpawnExt;
use futures::FutureExt;
use mailroom::group::{GroupConfig, NackKind, NackOptions};
use mailroom::topic::{Delivery, Nack, StartPosition, TopicError};
use mailroom_store::log::{LogOptions, SyncPolicy};
use mailroom_store::storage::SimStorage;
use mailroom_store::{Deferred, DeferredTurn, DurableTopic, StoreError, StoreOptions};
use mailroom_testkit::store::{offset_payload, open_topic, topic_with_group};

const CHECKPOINT: &str = "/store/topics/t/CHECKPOINT";
/// Power-cut images drawn per check.
const SEEDS: u64 = 6;

/// Options where nothing but the calls under test syncs: no checkpoint, no roll.
fn quiet(sync: SyncPolicy) -> StoreOptions {
    StoreOptions {
        log: LogOptions {
            segment_bytes_max: 64 << 20,
            sync,
            ..LogOptions::default()
        },
        checkpoint_every: 1 << 40,
        ..StoreOptions::default()
    }
}

fn ids(batch: &[Delivery<Bytes>]) -> Vec<mailroom::group::DeliveryId> {
    batch.iter().map(Delivery::id).collect()
}

/// What a reopened topic shows of everything these tests change.
fn state(topic: &DurableTopic) -> String {
    format!(
        "len {} in flight {:?} position {} dead {}",
        topic.len(),
        topic.in_flight("g").unwrap(),
        topic.position("g").unwrap(),
        topic.dead_letters("g").unwrap().len()
    )
}

/// The state every power-cut image of `sim` now shows; panics if images differ.
fn image_state(sim: &SimStorage) -> String {
    let states: Vec<String> = (0..SEEDS)
        .map(|seed| {
            let (_store, topic) = open_topic(&sim.crash(seed), &quiet(SyncPolicy::Always));
            state(&topic)
        })
        .collect();
    assert!(
        states.iter().all(|state| *state == states[0]),
        "power-cut images differ: {states:?}"
    );
    states[0].clone()
}

/// Runs `call` (a deferred call) on a fresh topic with 4 messages, after `setup`, and
/// checks that no power-cut image holds its effect before the await and every image
/// does after. Returns the answer.
fn durable_only_after_await<T>(
    setup: impl FnOnce(&DurableTopic),
    call: impl FnOnce(&DurableTopic) -> Deferred<T>,
) -> T {
    let sim = SimStorage::new();
    let (_store, topic) = topic_with_group(&sim, &quiet(SyncPolicy::Always), 8, 4);
    setup(&topic);
    let before = image_state(&sim);
    let deferred = call(&topic);
    assert_eq!(image_state(&sim), before, "durable before the await");
    let answer = block_on(deferred).expect("the deferred call");
    let after = image_state(&sim);
    assert_ne!(after, before, "the call changed nothing durable");
    assert_eq!(
        after,
        state(&topic),
        "images after the await differ from the topic"
    );
    answer
}

// Proves publish_deferred and publish_batch_deferred write nothing durable before the
// await and everything after, and answer the offsets the blocking forms would.
#[test]
fn publishes_are_durable_only_after_the_await() {
    let offset = durable_only_after_await(
        |_| {},
        |topic| topic.publish_deferred(offset_payload(4)).unwrap(),
    );
    assert_eq!(offset, 4);
    let offsets = durable_only_after_await(
        |_| {},
        |topic| {
            let payloads: Vec<Bytes> = (4..7).map(offset_payload).collect();
            topic.publish_batch_deferred(&payloads).unwrap()
        },
    );
    assert_eq!(offsets, 4..7);
}

// Proves each deferred poll (single, as a consumer, batch) makes its deliveries durable
// only after the await, and hands out the deliveries the blocking form would.
#[test]
fn polls_are_durable_only_after_the_await() {
    let single = durable_only_after_await(|_| {}, |topic| topic.poll_deferred("g").unwrap());
    let single = single.expect("a delivery");
    assert_eq!((single.offset, single.attempt), (0, 1));
    assert_eq!(single.message, offset_payload(0));
    let named =
        durable_only_after_await(|_| {}, |topic| topic.poll_as_deferred("g", "w1").unwrap());
    assert_eq!(named.map(|delivery| delivery.offset), Some(0));
    let batch = durable_only_after_await(
        |_| {},
        |topic| topic.poll_batch_deferred("g", Some("w1"), 3).unwrap(),
    );
    let offsets: Vec<u64> = batch.iter().map(|delivery| delivery.offset).collect();
    assert_eq!(offsets, [0, 1, 2]);
}

// Proves each deferred ack and nack (single and batch, retry and dead letter) is durable
// only after the await, with the answers of the blocking forms.
#[test]
fn settlements_are_durable_only_after_the_await() {
    let poll_three = |topic: &DurableTopic| {
        topic.poll_batch("g", None, 3).unwrap();
    };
    let first = |topic: &DurableTopic| topic.in_flight("g").unwrap()[0];
    durable_only_after_await(poll_three, |topic| {
        topic.ack_deferred("g", first(topic)).unwrap()
    });
    let nacked = durable_only_after_await(poll_three, |topic| {
        let options = NackOptions::default();
        topic
            .nack_with_deferred("g", first(topic), options)
            .unwrap()
    });
    assert_eq!(nacked, Nack::Retry);
    let acked = durable_only_after_await(poll_three, |topic| {
        let mut ids = topic.in_flight("g").unwrap();
        ids.push(ids[0]);
        topic.ack_batch_deferred("g", &ids).unwrap()
    });
    assert_eq!(acked.iter().filter(|result| result.is_ok()).count(), 3);
    assert!(acked[3].is_err(), "a repeated id is refused");
    let rejected = durable_only_after_await(poll_three, |topic| {
        let ids = topic.in_flight("g").unwrap();
        let reject = NackOptions::new(NackKind::Reject).with_reason("bad");
        topic.nack_batch_deferred("g", &ids, &reject).unwrap()
    });
    assert_eq!(rejected, vec![Ok(Nack::DeadLettered); 3]);
}

// Proves a refusal is answered by the Deferred, not by the call part: an ack of a
// delivery nobody holds is NotOwned only once awaited.
#[test]
fn a_refusal_comes_from_the_deferred() {
    let sim = SimStorage::new();
    let (_store, topic) = topic_with_group(&sim, &quiet(SyncPolicy::Always), 8, 1);
    let stale = mailroom::group::DeliveryId {
        offset: 0,
        attempt: 1,
    };
    let refused = topic.ack_deferred("g", stale).expect("the call part");
    assert!(matches!(
        refused.wait(),
        Err(StoreError::Topic(TopicError::NotOwned { .. }))
    ));
}

// Proves dropping a Deferred unawaited keeps the operation: the delivery it made stays
// w1's (w2 gets the next message), and the next answer that saw it makes it durable.
#[test]
fn a_dropped_deferred_still_happened() {
    let sim = SimStorage::new();
    let (_store, topic) = topic_with_group(&sim, &quiet(SyncPolicy::Always), 8, 2);
    drop(topic.poll_batch_deferred("g", Some("w1"), 1).unwrap());
    let other = topic.poll_batch("g", Some("w2"), 1).unwrap();
    assert_eq!(other[0].offset, 1, "w2 got the dropped poll's delivery");
    let again = topic.poll_batch("g", Some("w1"), 1).unwrap();
    assert_eq!((again[0].offset, again[0].attempt), (0, 1));
    let in_flight = "len 2 in flight [DeliveryId { offset: 0, attempt: 1 }, \
        DeliveryId { offset: 1, attempt: 1 }] position 0 dead 0";
    assert_eq!(state(&topic), in_flight);
    assert_eq!(image_state(&sim), in_flight);
}

// Proves under the relaxed policies every deferred call resolves on its first poll,
// with no sync.
#[test]
fn relaxed_policies_resolve_at_once() {
    for policy in [
        SyncPolicy::Never,
        SyncPolicy::Interval(Duration::from_secs(3600)),
    ] {
        let sim = SimStorage::new();
        let (_store, topic) = topic_with_group(&sim, &quiet(policy), 8, 2);
        let syncs = sim.syncs_done();
        let published = topic.publish_deferred(offset_payload(2)).unwrap();
        assert_eq!(published.now_or_never().unwrap().unwrap(), 2);
        let polled = topic.poll_batch_deferred("g", None, 2).unwrap();
        let batch = polled.now_or_never().expect("ready").unwrap();
        let acked = topic.ack_batch_deferred("g", &ids(&batch)).unwrap();
        assert_eq!(acked.now_or_never().expect("ready").unwrap().len(), 2);
        let polled = topic.poll_deferred("g").unwrap();
        let last = polled.now_or_never().expect("ready").unwrap().unwrap();
        let nacked = topic.nack_with_deferred("g", last.id(), NackOptions::default());
        assert_eq!(
            nacked.unwrap().now_or_never().unwrap().unwrap(),
            Nack::Retry
        );
        assert_eq!(sim.syncs_done(), syncs, "{policy:?} synced");
    }
}

// Proves many tasks on ONE executor thread, each publishing, polling and acking through
// deferred calls, share syncs (far fewer than operations) and every message is acked
// exactly once.
#[test]
fn tasks_on_one_thread_share_syncs() {
    const TASKS: u64 = 32;
    const ROUNDS: u64 = 8;
    let sim = SimStorage::new();
    let (_store, topic) = open_topic(&sim, &quiet(SyncPolicy::Always));
    let config = GroupConfig::new(3).with_max_in_flight(TASKS as u32);
    topic
        .create_group_with("g", StartPosition::Earliest, config)
        .unwrap();
    // A disk whose sync takes a while, as real ones do: tasks pile up behind it.
    sim.set_sync_delay(Duration::from_millis(1));
    let syncs = sim.syncs_done();
    let mut pool = LocalPool::new();
    for task in 0..TASKS {
        let topic = topic.clone();
        let consumer = format!("w{task}");
        pool.spawner()
            .spawn_local(async move {
                for round in 0..ROUNDS {
                    let message = offset_payload(task * ROUNDS + round);
                    topic.publish_deferred(message).unwrap().await.unwrap();
                    let polled = topic.poll_batch_deferred("g", Some(&consumer), 1);
                    let batch = polled.unwrap().await.unwrap();
                    let acked = topic.ack_batch_deferred("g", &ids(&batch)).unwrap();
                    assert!(acked.await.unwrap().iter().all(Result::is_ok));
                }
            })
            .unwrap();
    }
    pool.run();
    let operations = TASKS * ROUNDS * 3;
    let used = sim.syncs_done() - syncs;
    assert!(
        used * 2 < operations,
        "{used} syncs for {operations} operations"
    );
    assert_eq!(topic.position("g").unwrap(), TASKS * ROUNDS);
    assert!(topic.in_flight("g").unwrap().is_empty());
}

// Proves consumers of ONE group on several real threads, each thread awaiting many
// deferred batches at once, hand out every message exactly once, with shared syncs.
#[test]
fn threads_of_tasks_consume_one_group_exactly_once() {
    const THREADS: usize = 3;
    const TASKS: usize = 8;
    const MESSAGES: u64 = 480;
    let sim = SimStorage::new();
    let (_store, topic) = open_topic(&sim, &quiet(SyncPolicy::Always));
    let config = GroupConfig::new(3).with_max_in_flight(64);
    topic
        .create_group_with("g", StartPosition::Earliest, config)
        .unwrap();
    let payloads: Vec<Bytes> = (0..MESSAGES).map(offset_payload).collect();
    topic.publish_batch(&payloads).unwrap();
    sim.set_sync_delay(Duration::from_millis(1));
    let syncs = sim.syncs_done();
    let threads: Vec<_> = (0..THREADS)
        .map(|thread| {
            let topic = topic.clone();
            std::thread::spawn(move || {
                let tasks = (0..TASKS).map(|task| {
                    let topic = topic.clone();
                    let consumer = format!("t{thread}w{task}");
                    async move {
                        let mut acked = Vec::new();
                        loop {
                            let polled = topic.poll_batch_deferred("g", Some(&consumer), 4);
                            let batch = polled.unwrap().await.unwrap();
                            if batch.is_empty() {
                                return acked;
                            }
                            let settled = topic.ack_batch_deferred("g", &ids(&batch)).unwrap();
                            assert!(settled.await.unwrap().iter().all(Result::is_ok));
                            acked.extend(batch.iter().map(|delivery| delivery.offset));
                        }
                    }
                });
                block_on(join_all(tasks)).concat()
            })
        })
        .collect();
    let mut acked: Vec<u64> = threads
        .into_iter()
        .flat_map(|thread| thread.join().unwrap())
        .collect();
    acked.sort_unstable();
    assert_eq!(acked, (0..MESSAGES).collect::<Vec<_>>());
    assert_eq!(topic.position("g").unwrap(), MESSAGES);
    let used = sim.syncs_done() - syncs;
    let batches_min = MESSAGES / 4 * 2;
    assert!(
        used * 2 < batches_min,
        "{used} syncs for {batches_min}+ batches"
    );
}

// Proves a failed sync reaches every Deferred awaiting it as an error, on the message
// log and on the groups log, and that later calls are refused (fail-stop).
#[test]
fn a_failed_sync_fails_every_waiter_and_stops() {
    let sim = SimStorage::new();
    let (_store, topic) = topic_with_group(&sim, &quiet(SyncPolicy::Always), 8, 4);
    sim.fail_next_syncs(1);
    let publishes: Vec<_> = (0..3)
        .map(|offset| topic.publish_deferred(offset_payload(offset)).unwrap())
        .collect();
    for result in block_on(join_all(publishes)) {
        assert!(result.is_err(), "confirmed a publish whose sync failed");
    }
    assert!(matches!(
        topic.publish_deferred(offset_payload(9)),
        Err(StoreError::FailStopped { .. })
    ));

    let sim = SimStorage::new();
    let (_store, topic) = topic_with_group(&sim, &quiet(SyncPolicy::Always), 8, 4);
    sim.fail_next_syncs(1);
    let polls = vec![
        topic.poll_batch_deferred("g", Some("a"), 2).unwrap(),
        topic.poll_batch_deferred("g", Some("b"), 2).unwrap(),
    ];
    for result in block_on(join_all(polls)) {
        assert!(result.is_err(), "confirmed a poll whose sync failed");
    }
    assert!(matches!(
        topic.poll_batch_deferred("g", Some("c"), 1),
        Err(StoreError::FailStopped { .. })
    ));
    assert!(topic.position("g").is_err(), "a read after fail-stop");
    // Publishing (the other log) still works: only the groups log failed.
    assert_eq!(topic.publish(offset_payload(4)).unwrap(), 4);
}

// Proves a due checkpoint is written by the wait side, never by the call part: not
// before the Deferreds are awaited, at once by a blocking wait, and by a background
// thread when awaited or when the caller leads its own sync.
#[test]
fn checkpoints_are_written_by_the_wait_side() {
    let options = StoreOptions {
        checkpoint_every: 4,
        ..quiet(SyncPolicy::Always)
    };
    // Blocking waits.
    let sim = SimStorage::new();
    let (_store, topic) = topic_with_group(&sim, &options, 8, 8);
    let deferred = topic.poll_batch_deferred("g", None, 8).unwrap();
    assert!(
        !checkpoint_written(&sim),
        "the call part wrote a checkpoint"
    );
    deferred.wait().unwrap();
    assert!(
        checkpoint_written(&sim),
        "a blocking wait skipped the checkpoint"
    );
    // Awaited: a background thread writes it.
    let sim = SimStorage::new();
    let (_store, topic) = topic_with_group(&sim, &options, 8, 8);
    let deferred = topic.poll_batch_deferred("g", None, 8).unwrap();
    assert!(
        !checkpoint_written(&sim),
        "the call part wrote a checkpoint"
    );
    block_on(deferred).unwrap();
    await_background_checkpoint(&sim);
    // Led: the leader's answer does not wait for the checkpoint, which a background
    // thread writes.
    let sim = SimStorage::new();
    let (_store, topic) = topic_with_group(&sim, &options, 8, 8);
    let deferred = topic.poll_batch_deferred("g", None, 8).unwrap();
    let DeferredTurn::Lead(leader) = deferred.lead_or_listen() else {
        panic!("a lone call under SyncPolicy::Always leads");
    };
    assert_eq!(leader.sync().unwrap().len(), 8);
    await_background_checkpoint(&sim);
}

/// Whether the topic's checkpoint file exists.
fn checkpoint_written(sim: &SimStorage) -> bool {
    sim.file_bytes(Path::new(CHECKPOINT)).is_some()
}

/// Waits (up to 30 s) for the checkpoint a background thread writes.
fn await_background_checkpoint(sim: &SimStorage) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !checkpoint_written(sim) {
        assert!(Instant::now() < deadline, "no background checkpoint");
        std::thread::yield_now();
    }
}

// Proves a Deferred can be sent to another thread (and so held across an await in a
// multi-threaded runtime's task).
#[test]
fn deferreds_are_send() {
    fn send<T: Send + 'static>(value: T) -> T {
        std::thread::spawn(move || value).join().unwrap()
    }
    let sim = SimStorage::new();
    let (_store, topic) = topic_with_group(&sim, &quiet(SyncPolicy::Always), 8, 1);
    let polled = send(topic.poll_batch_deferred("g", None, 1).unwrap());
    assert_eq!(block_on(polled).unwrap().len(), 1);
}
