//! Black-box rules of batch poll, ack and nack on `Topic` and `GroupHandle`: one test per
//! rule of the batch contract in `docs/semantics.md`.

use std::sync::Arc;

use mailroom::clock::ManualClock;
use mailroom::group::{Backoff, GroupConfig, NackKind, NackOptions, NotOwned, CONSUMER_BYTES_MAX};
use mailroom::topic::{
    Delivery, DeliveryId, Nack, StartPosition, Topic, TopicError, BATCH_DELIVERIES_MAX,
};

/// A clockless topic holding `messages` messages (0, 1, …) and a group "g" with `config`.
fn topic_with(messages: u32, config: GroupConfig) -> Topic<u32> {
    let topic = Topic::new();
    for n in 0..messages {
        topic.publish(n);
    }
    topic
        .create_group_with("g", StartPosition::Earliest, config)
        .unwrap();
    topic
}

/// As [`topic_with`], on a topic reading `clock` (which starts at 0).
fn clocked_with(messages: u32, config: GroupConfig) -> (Topic<u32>, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(0));
    let topic = Topic::with_clock(clock.clone());
    for n in 0..messages {
        topic.publish(n);
    }
    topic
        .create_group_with("g", StartPosition::Earliest, config)
        .unwrap();
    (topic, clock)
}

fn ids(batch: &[Delivery<u32>]) -> Vec<(u64, u32)> {
    batch.iter().map(|d| (d.offset, d.attempt)).collect()
}

fn id(offset: u64, attempt: u32) -> DeliveryId {
    DeliveryId { offset, attempt }
}

fn is_invalid<T: std::fmt::Debug>(result: Result<T, TopicError>) -> bool {
    matches!(result, Err(TopicError::InvalidArgument { .. }))
}

#[test]
fn owned_deliveries_come_first_then_new_ones_by_offset() {
    // Proves a batch returns the consumer's own in-flight deliveries, then new ones
    // (a ready retry before fresh messages), each by ascending offset, with payloads.
    let topic = topic_with(8, GroupConfig::new(3).with_max_in_flight(8));
    let first = topic.poll_batch("g", Some("x"), 2).unwrap();
    assert_eq!(ids(&first), [(0, 1), (1, 1)]);
    assert_eq!(ids(&topic.poll_batch("g", Some("y"), 1).unwrap()), [(2, 1)]);
    assert_eq!(topic.nack("g", id(0, 1)).unwrap(), Nack::Retry);
    let batch = topic.poll_batch("g", Some("x"), 4).unwrap();
    assert_eq!(ids(&batch), [(1, 1), (0, 2), (3, 1), (4, 1)]);
    let messages: Vec<u32> = batch.iter().map(|d| d.message).collect();
    assert_eq!(messages, [1, 0, 3, 4]);
    // "y" still owns offset 2 alone.
    assert_eq!(
        ids(&topic.poll_batch("g", Some("y"), 8).unwrap())[0],
        (2, 1)
    );
}

#[test]
fn with_max_in_flight_one_a_batch_is_a_poll() {
    // Proves W = 1 gives at most one delivery per batch, and nothing to another consumer.
    let topic = topic_with(5, GroupConfig::new(3));
    let group = topic.group("g").unwrap();
    let batch = group.poll_batch(None, 64).unwrap();
    assert_eq!(ids(&batch), [(0, 1)]);
    assert!(group.poll_batch(Some("other"), 64).unwrap().is_empty());
    assert_eq!(ids(&group.poll_batch(None, 64).unwrap()), [(0, 1)]);
    group.ack(batch[0].id()).unwrap();
    assert_eq!(ids(&group.poll_batch(None, 64).unwrap()), [(1, 1)]);
}

#[test]
fn a_repeated_batch_returns_the_same_deliveries_and_attempts() {
    // Proves polling a batch again is not a new attempt: same deliveries, same attempts.
    let topic = topic_with(4, GroupConfig::new(3).with_max_in_flight(4));
    let first = topic.poll_batch("g", Some("x"), 3).unwrap();
    assert_eq!(topic.poll_batch("g", Some("x"), 3).unwrap(), first);
    assert_eq!(topic.poll_batch("g", Some("x"), 2).unwrap(), first[..2]);
    assert_eq!(topic.group_counters("g").unwrap().redeliveries, 0);
    assert_eq!(topic.in_flight("g").unwrap().len(), 3);
}

#[test]
fn a_plain_poll_after_a_batch_returns_the_first_owned() {
    // Proves a single poll_as (and GroupHandle::poll_as) by the batch's consumer returns
    // its lowest owned delivery, while another consumer gets a new one.
    let topic = topic_with(6, GroupConfig::new(3).with_max_in_flight(6));
    let batch = topic.poll_batch("g", Some("x"), 3).unwrap();
    assert_eq!(topic.poll_as("g", "x").unwrap().as_ref(), batch.first());
    topic.ack("g", batch[0].id()).unwrap();
    let group = topic.group("g").unwrap();
    assert_eq!(group.poll_as("x").unwrap().as_ref(), batch.get(1));
    assert_eq!(group.poll_as("y").unwrap().unwrap().offset, 3);
}

#[test]
fn the_window_limit_holds_for_batches() {
    // Proves a batch never has more than W in flight nor delivers W or more offsets
    // above the position, and that finishing the lowest message opens the window.
    let topic = topic_with(10, GroupConfig::new(3).with_max_in_flight(3));
    let batch = topic.poll_batch("g", Some("x"), 64).unwrap();
    assert_eq!(ids(&batch), [(0, 1), (1, 1), (2, 1)]);
    // Finishing offset 1 frees an in-flight place but the position stays at 0.
    topic.ack("g", id(1, 1)).unwrap();
    assert_eq!(
        ids(&topic.poll_batch("g", Some("x"), 64).unwrap()),
        [(0, 1), (2, 1)]
    );
    assert!(topic.poll_batch("g", Some("y"), 64).unwrap().is_empty());
    topic.ack("g", id(0, 1)).unwrap();
    let batch = topic.poll_batch("g", Some("x"), 64).unwrap();
    assert_eq!(ids(&batch), [(2, 1), (3, 1), (4, 1)]);
}

#[test]
fn a_delayed_message_stops_the_batch() {
    // Proves a message waiting out its delay (or backoff) ends a batch, holding back
    // every message above it, and is delivered first once due.
    let config = GroupConfig::new(3)
        .with_max_in_flight(4)
        .with_backoff(Backoff::Fixed { delay_ms: 50 });
    let (topic, clock) = clocked_with(4, config);
    topic.poll_batch("g", Some("x"), 2).unwrap();
    let delay = NackOptions::new(NackKind::Nack).with_delay_ms(100);
    assert_eq!(topic.nack_with("g", id(1, 1), delay).unwrap(), Nack::Retry);
    assert_eq!(
        ids(&topic.poll_batch("g", Some("x"), 10).unwrap()),
        [(0, 1)]
    );
    clock.advance_ms(99);
    assert!(topic.poll_batch("g", Some("y"), 10).unwrap().is_empty());
    clock.advance_ms(1);
    let batch = topic.poll_batch("g", Some("x"), 10).unwrap();
    assert_eq!(ids(&batch), [(0, 1), (1, 2), (2, 1), (3, 1)]);
    // A failure with the group's backoff stops the next batch the same way.
    // (Offsets 0 and 3 are finished so that the window has room for offset 4.)
    assert_eq!(topic.nack("g", id(2, 1)).unwrap(), Nack::Retry);
    topic.ack_batch("g", &[id(0, 1), id(3, 1)]).unwrap();
    topic.publish(4);
    assert_eq!(ids(&topic.poll_batch("g", Some("y"), 10).unwrap()), []);
    clock.advance_ms(50);
    let batch = topic.poll_batch("g", Some("y"), 10).unwrap();
    assert_eq!(ids(&batch), [(2, 2), (4, 1)]);
}

#[test]
fn expired_leases_are_expired_first_and_counted() {
    // Proves a batch poll applies every due lease expiry before handing out deliveries,
    // so the expired messages are redelivered in the same batch and counted as expired.
    let config = GroupConfig::new(2).with_lease_ms(100).with_max_in_flight(4);
    let (topic, clock) = clocked_with(4, config);
    let old = topic.poll_batch("g", Some("x"), 2).unwrap();
    clock.advance_ms(100);
    let batch = topic.poll_batch("g", Some("y"), 4).unwrap();
    assert_eq!(ids(&batch), [(0, 2), (1, 2), (2, 1), (3, 1)]);
    let counters = topic.group_counters("g").unwrap();
    assert_eq!((counters.expired_leases, counters.redeliveries), (2, 2));
    let stale: Vec<DeliveryId> = old.iter().map(Delivery::id).collect();
    assert!(topic
        .ack_batch("g", &stale)
        .unwrap()
        .iter()
        .all(Result::is_err));
    // The second expiry of a message with max_attempts 2 dead-letters it.
    clock.advance_ms(100);
    let batch = topic.poll_batch("g", Some("z"), 4).unwrap();
    assert_eq!(ids(&batch), [(2, 2), (3, 2)]);
    assert_eq!(topic.dead_letters("g").unwrap().len(), 2);
    assert_eq!(topic.group_counters("g").unwrap().expired_leases, 6);
}

#[test]
fn ack_batch_answers_each_delivery_as_a_single_ack_would() {
    // Proves ack_batch settles in order and each result equals what single acks on an
    // identical topic answer: a duplicate and a stale attempt are NotOwned, others acked.
    let config = GroupConfig::new(3).with_max_in_flight(4);
    let batched = topic_with(4, config);
    let single = topic_with(4, config);
    for topic in [&batched, &single] {
        topic.poll_batch("g", None, 3).unwrap();
        topic.nack("g", id(1, 1)).unwrap();
        assert_eq!(topic.poll_as("g", "y").unwrap().unwrap().id(), id(1, 2));
    }
    let list = [id(0, 1), id(0, 1), id(1, 1), id(9, 1), id(2, 1), id(1, 2)];
    let results = batched.ack_batch("g", &list).unwrap();
    let expected: Vec<Result<(), NotOwned>> = list
        .iter()
        .map(|&delivery| match single.ack("g", delivery) {
            Err(TopicError::NotOwned { source, .. }) => Err(source),
            other => other.map_err(|e| panic!("{e}")),
        })
        .collect();
    assert_eq!(results, expected);
    let oks: Vec<bool> = results.iter().map(Result::is_ok).collect();
    assert_eq!(oks, [true, false, false, false, true, true]);
    assert_eq!(
        results[2],
        Err(NotOwned {
            requested: id(1, 1),
            current: Some(id(1, 2))
        })
    );
    assert_eq!(
        batched.group_info("g").unwrap(),
        single.group_info("g").unwrap()
    );
    assert_eq!(batched.position("g").unwrap(), 3);
    assert_eq!(batched.ack_batch("g", &[]).unwrap(), []);
}

#[test]
fn nack_batch_dead_letters_each_message_exactly_once() {
    // Proves the final nack in a batch dead-letters a message once: naming it again in
    // the same or a later batch is NotOwned and adds no dead letter.
    let topic = topic_with(3, GroupConfig::new(1).with_max_in_flight(3));
    let group = topic.group("g").unwrap();
    group.poll_batch(None, 2).unwrap();
    let options = NackOptions::new(NackKind::Nack).with_reason("bad");
    let results = group
        .nack_batch(&[id(0, 1), id(0, 1), id(1, 1)], &options)
        .unwrap();
    assert_eq!(results[0], Ok(Nack::DeadLettered));
    assert!(results[1].is_err());
    assert_eq!(results[2], Ok(Nack::DeadLettered));
    let again = group.nack_batch(&[id(0, 1), id(1, 1)], &options).unwrap();
    assert!(again.iter().all(Result::is_err));
    let dead = group.dead_letter_info().unwrap();
    let offsets: Vec<u64> = dead.iter().map(|d| d.offset).collect();
    assert_eq!(offsets, [0, 1]);
    assert!(dead.iter().all(|d| d.reason.as_deref() == Some("bad")));
    assert_eq!(group.position().unwrap(), 2);
}

#[test]
fn nack_batch_releases_and_retries_per_options() {
    // Proves a release batch hands every delivery back without counting a failure, so a
    // message with max_attempts 1 is delivered again rather than dead-lettered.
    let topic = topic_with(2, GroupConfig::new(1).with_max_in_flight(2));
    let batch = topic.poll_batch("g", None, 2).unwrap();
    let list: Vec<DeliveryId> = batch.iter().map(Delivery::id).collect();
    let release = NackOptions::new(NackKind::Release);
    assert_eq!(
        topic.nack_batch("g", &list, &release).unwrap(),
        [Ok(Nack::Retry), Ok(Nack::Retry)]
    );
    assert_eq!(topic.group_counters("g").unwrap().releases, 2);
    assert_eq!(
        ids(&topic.poll_batch("g", None, 2).unwrap()),
        [(0, 2), (1, 2)]
    );
}

#[test]
fn out_of_range_arguments_are_refused_and_change_nothing() {
    // Proves max 0, max above BATCH_DELIVERIES_MAX, a bad consumer, too long a list and
    // bad nack options are InvalidArgument, checked before the group, with no effect.
    let topic = topic_with(3, GroupConfig::new(3).with_max_in_flight(3));
    let group = topic.group("g").unwrap();
    let long_consumer = "c".repeat(CONSUMER_BYTES_MAX + 1);
    for name in ["g", "missing"] {
        assert!(is_invalid(topic.poll_batch(name, None, 0)));
        assert!(is_invalid(topic.poll_batch(
            name,
            None,
            BATCH_DELIVERIES_MAX + 1
        )));
        assert!(is_invalid(topic.poll_batch(name, Some(""), 1)));
        assert!(is_invalid(topic.poll_batch(name, Some(&long_consumer), 1)));
    }
    assert!(is_invalid(group.poll_batch(None, 0)));
    assert!(is_invalid(group.poll_batch(Some(""), 1)));
    assert!(topic.in_flight("g").unwrap().is_empty());
    let held = topic.poll_batch("g", None, BATCH_DELIVERIES_MAX).unwrap();
    assert_eq!(held.len(), 3);
    let too_many = vec![held[0].id(); BATCH_DELIVERIES_MAX + 1];
    let reject = NackOptions::new(NackKind::Reject);
    assert!(is_invalid(topic.ack_batch("g", &too_many)));
    assert!(is_invalid(topic.nack_batch("g", &too_many, &reject)));
    assert!(is_invalid(group.ack_batch(&too_many)));
    assert!(is_invalid(group.nack_batch(&too_many, &reject)));
    // A delay needs a clock; a reason over REASON_BYTES_MAX is refused.
    let delayed = NackOptions::new(NackKind::Nack).with_delay_ms(10);
    assert!(is_invalid(topic.nack_batch("g", &[held[0].id()], &delayed)));
    let wordy = NackOptions::new(NackKind::Nack).with_reason("r".repeat(100_000));
    assert!(is_invalid(group.nack_batch(&[held[0].id()], &wordy)));
    assert_eq!(topic.in_flight("g").unwrap().len(), 3);
    assert_eq!(topic.position("g").unwrap(), 0);
    assert!(topic.dead_letters("g").unwrap().is_empty());
}

#[test]
fn an_unknown_or_deleted_group_is_refused() {
    // Proves every batch call on a missing group, even with an empty list, and on a
    // handle whose group was deleted is UnknownGroup.
    let topic = topic_with(1, GroupConfig::new(1));
    let unknown = |r: Result<_, TopicError>| matches!(r, Err(TopicError::UnknownGroup { .. }));
    let options = NackOptions::default();
    assert!(unknown(topic.poll_batch("nope", None, 1).map(drop)));
    assert!(unknown(topic.ack_batch("nope", &[]).map(drop)));
    assert!(unknown(
        topic.nack_batch("nope", &[id(0, 1)], &options).map(drop)
    ));
    let group = topic.group("g").unwrap();
    topic.delete_group("g").unwrap();
    assert!(unknown(group.poll_batch(None, 1).map(drop)));
    assert!(unknown(group.ack_batch(&[id(0, 1)]).map(drop)));
    assert!(unknown(group.nack_batch(&[], &options).map(drop)));
}

#[test]
fn concurrent_batch_consumers_finish_every_message_exactly_once() {
    // Proves that batch consumers on real threads, beside a publisher, never share a
    // delivery: every ack and release they send is owned, and every offset is acked by
    // exactly one of them with its own payload.
    const MESSAGES: u32 = 2_000;
    const CONSUMERS: [&str; 3] = ["c0", "c1", "c2"];
    let topic = Arc::new(Topic::new());
    let config = GroupConfig::new(3).with_max_in_flight(16);
    topic
        .create_group_with("g", StartPosition::Earliest, config)
        .unwrap();
    let start = Arc::new(std::sync::Barrier::new(CONSUMERS.len() + 1));
    let consumers: Vec<_> = CONSUMERS
        .iter()
        .map(|&name| {
            let (topic, start) = (Arc::clone(&topic), Arc::clone(&start));
            std::thread::spawn(move || {
                let group = topic.group("g").unwrap();
                start.wait();
                let mut acked = Vec::new();
                while group.position().unwrap() < u64::from(MESSAGES) {
                    let batch = group.poll_batch(Some(name), 8).unwrap();
                    if batch.is_empty() {
                        std::thread::yield_now();
                        continue;
                    }
                    assert!(batch.iter().all(|d| u64::from(d.message) == d.offset));
                    // Every seventh message is released once, to mix retries in.
                    let (release, ack): (Vec<_>, Vec<_>) = batch
                        .iter()
                        .map(Delivery::id)
                        .partition(|id| id.offset % 7 == 0 && id.attempt == 1);
                    let options = NackOptions::new(NackKind::Release);
                    assert!(group
                        .nack_batch(&release, &options)
                        .unwrap()
                        .iter()
                        .all(Result::is_ok));
                    assert!(group.ack_batch(&ack).unwrap().iter().all(Result::is_ok));
                    acked.extend(ack.iter().map(|id| id.offset));
                }
                acked
            })
        })
        .collect();
    start.wait();
    for n in 0..MESSAGES {
        topic.publish(n);
    }
    let mut acked: Vec<u64> = consumers
        .into_iter()
        .flat_map(|consumer| consumer.join().unwrap())
        .collect();
    acked.sort_unstable();
    assert_eq!(acked, (0..u64::from(MESSAGES)).collect::<Vec<_>>());
    assert!(topic.dead_letters("g").unwrap().is_empty());
}

#[test]
fn ack_then_poll_equals_ack_batch_then_poll_batch_and_refills_freed_slots() {
    // Proves ack_then_poll_batch answers exactly what ack_batch then poll_batch answer on
    // an identical topic (refusals included), that the slots its acks free are refilled
    // in the same call, and that bad arguments are refused with nothing acked.
    let config = GroupConfig::new(3).with_max_in_flight(3);
    let combined = topic_with(9, config);
    let separate = topic_with(9, config);
    for topic in [&combined, &separate] {
        assert_eq!(
            ids(&topic.poll_batch("g", Some("x"), 3).unwrap()),
            [(0, 1), (1, 1), (2, 1)]
        );
    }
    let list = [id(0, 1), id(0, 1), id(2, 1), id(7, 1)];
    let (acked, polled) = combined
        .ack_then_poll_batch("g", &list, Some("x"), 3)
        .unwrap();
    assert_eq!(acked, separate.ack_batch("g", &list).unwrap());
    assert_eq!(polled, separate.poll_batch("g", Some("x"), 3).unwrap());
    // The window spans max_in_flight offsets from the position (1 now): 3 is new.
    assert_eq!(ids(&polled), [(1, 1), (3, 1)]);
    assert_eq!(
        acked.iter().map(Result::is_ok).collect::<Vec<_>>(),
        [true, false, true, false]
    );
    assert!(is_invalid(combined.ack_then_poll_batch(
        "g",
        &[id(1, 1)],
        Some("x"),
        0
    )));
    let too_many = vec![id(1, 1); BATCH_DELIVERIES_MAX + 1];
    assert!(is_invalid(combined.ack_then_poll_batch(
        "g",
        &too_many,
        Some("x"),
        1
    )));
    assert!(is_invalid(combined.ack_then_poll_batch(
        "g",
        &[id(1, 1)],
        Some(""),
        1
    )));
    assert!(matches!(
        combined.ack_then_poll_batch("nope", &[], None, 1),
        Err(TopicError::UnknownGroup { .. })
    ));
    assert_eq!(
        combined.in_flight("g").unwrap(),
        separate.in_flight("g").unwrap()
    );
    // The handle form does the same on the group it names.
    let handle = combined.group("g").unwrap();
    let (acked, polled) = handle
        .ack_then_poll_batch(&[id(1, 1), id(3, 1)], Some("x"), 8)
        .unwrap();
    assert!(acked.iter().all(Result::is_ok));
    assert_eq!(ids(&polled), [(4, 1), (5, 1), (6, 1)]);
}
