//! One test per rule of `mailroom::topic` (its module docs) for publishes and deliveries:
//! polls, acks and nacks, black-box through the public API.

mod topic_support;

use mailroom::topic::{DeadLetter, Delivery, Nack, Topic, TopicError};
use topic_support::{assert_not_owned, id, info, topic_with};

// Proves publish hands out offsets 0, 1, 2, ... with no gaps and len follows them.
#[test]
fn publish_offsets_are_gap_free() {
    let topic = Topic::new();
    assert!(topic.is_empty());
    for expected in 0..2_500u64 {
        assert_eq!(topic.publish(expected * 3), expected);
    }
    assert_eq!(topic.len(), 2_500);
}

// Proves a new group starts at offset 0 even when messages were published before it.
#[test]
fn new_group_starts_at_beginning_of_log() {
    let topic = topic_with(&["a", "b"], "g", 1);
    assert_eq!(topic.position("g").unwrap(), 0);
    assert_eq!(topic.poll("g").unwrap().unwrap().offset, 0);
}

// Proves a poll at the end of the log returns None and changes nothing.
#[test]
fn poll_at_end_of_log_changes_nothing() {
    let topic = topic_with(&[], "g", 2);
    let before = info(&topic, "g");
    assert_eq!(topic.poll("g").unwrap(), None);
    assert_eq!(info(&topic, "g"), before);
    // Also after finishing every message.
    topic.publish("a");
    let delivery = topic.poll("g").unwrap().unwrap();
    topic.ack("g", delivery.id()).unwrap();
    let before = info(&topic, "g");
    assert_eq!(topic.poll("g").unwrap(), None);
    assert_eq!(info(&topic, "g"), before);
}

// Proves a repeated poll returns the same in-flight delivery, not a new attempt.
#[test]
fn repeated_poll_returns_same_attempt() {
    let topic = topic_with(&["a", "b"], "g", 3);
    let first = topic.poll("g").unwrap().unwrap();
    for _ in 0..3 {
        assert_eq!(topic.poll("g").unwrap().as_ref(), Some(&first));
    }
    assert_eq!(info(&topic, "g").attempt, 1);
}

// Proves a poll with nothing in flight creates the next attempt, starting at 1, and marks
// it in flight.
#[test]
fn poll_creates_next_attempt_in_flight() {
    let topic = topic_with(&["a"], "g", 3);
    let first = topic.poll("g").unwrap().unwrap();
    assert_eq!(
        first,
        Delivery {
            offset: 0,
            attempt: 1,
            message: "a"
        }
    );
    assert_eq!(info(&topic, "g").in_flight, Some(id(0, 1)));
    topic.nack("g", first.id()).unwrap();
    let second = topic.poll("g").unwrap().unwrap();
    assert_eq!((second.offset, second.attempt), (0, 2));
    assert_eq!(info(&topic, "g").in_flight, Some(id(0, 2)));
}

// Proves an ack of the exact delivery moves the cursor, resets the attempt and clears
// in-flight.
#[test]
fn ack_of_exact_delivery_advances() {
    let topic = topic_with(&["a", "b"], "g", 3);
    let first = topic.poll("g").unwrap().unwrap();
    topic.nack("g", first.id()).unwrap();
    let second = topic.poll("g").unwrap().unwrap();
    topic.ack("g", second.id()).unwrap();
    let after = info(&topic, "g");
    assert_eq!(
        (after.position, after.attempt, after.in_flight, after.lag),
        (1, 0, None, 1)
    );
    assert_eq!(topic.poll("g").unwrap().unwrap().id(), id(1, 1));
}

// Proves acks that do not name the exact in-flight delivery are NotOwned and change
// nothing: stale attempt, wrong offset, made-up attempt, nothing in flight, and an ack
// between a nack and the next poll.
#[test]
fn ack_of_anything_else_is_not_owned() {
    let topic = topic_with(&["a", "b"], "g", 3);
    assert_not_owned(topic.ack("g", id(0, 1))); // nothing in flight yet
    let first = topic.poll("g").unwrap().unwrap();
    topic.nack("g", first.id()).unwrap();
    let between = info(&topic, "g");
    assert_not_owned(topic.ack("g", first.id())); // between nack and the next poll
    assert_eq!(info(&topic, "g"), between);
    let second = topic.poll("g").unwrap().unwrap();
    let owned = info(&topic, "g");
    for wrong in [
        first.id(),
        id(1, 2),
        id(0, 3),
        id(0, 0),
        id(u64::MAX, u32::MAX),
    ] {
        assert_not_owned(topic.ack("g", wrong));
        assert_eq!(info(&topic, "g"), owned);
    }
    topic.ack("g", second.id()).unwrap();
}

// Proves the NotOwned error says which delivery was named and which is in flight.
#[test]
fn not_owned_error_names_both_deliveries() {
    let topic = topic_with(&["a"], "g", 3);
    let first = topic.poll("g").unwrap().unwrap();
    let Err(TopicError::NotOwned { group, source }) = topic.ack("g", id(0, 2)) else {
        panic!("expected NotOwned");
    };
    assert_eq!(group, "g");
    assert_eq!(
        (source.requested, source.current),
        (id(0, 2), Some(first.id()))
    );
}

// Proves nack follows the same ownership rule as ack and a refused nack changes nothing.
#[test]
fn nack_of_anything_else_is_not_owned() {
    let topic = topic_with(&["a", "b"], "g", 2);
    assert_not_owned(topic.nack("g", id(0, 1)));
    let first = topic.poll("g").unwrap().unwrap();
    let owned = info(&topic, "g");
    for wrong in [id(0, 2), id(1, 1), id(0, 0)] {
        assert_not_owned(topic.nack("g", wrong));
        assert_eq!(info(&topic, "g"), owned);
    }
    topic.nack("g", first.id()).unwrap();
    assert_not_owned(topic.nack("g", first.id())); // between nack and the next poll
    assert_eq!(topic.dead_letters("g").unwrap(), []);
}

// Proves a nack below max_attempts returns Retry, clears in-flight only, keeps the cursor,
// and the next poll is attempt + 1.
#[test]
fn retryable_nack_releases_ownership_only() {
    let topic = topic_with(&["a"], "g", 3);
    let first = topic.poll("g").unwrap().unwrap();
    assert_eq!(topic.nack("g", first.id()).unwrap(), Nack::Retry);
    let after = info(&topic, "g");
    assert_eq!(
        (
            after.position,
            after.attempt,
            after.in_flight,
            after.dead_letters
        ),
        (0, 1, None, 0)
    );
    assert_eq!(topic.poll("g").unwrap().unwrap().attempt, 2);
}

// Proves the final nack dead-letters the message once in this group's queue, with its
// offset and attempt count, and moves the cursor on.
#[test]
fn final_nack_dead_letters_and_advances() {
    let topic = topic_with(&["a", "b"], "g", 2);
    let first = topic.poll("g").unwrap().unwrap();
    topic.nack("g", first.id()).unwrap();
    let last = topic.poll("g").unwrap().unwrap();
    assert_eq!(topic.nack("g", last.id()).unwrap(), Nack::DeadLettered);
    assert_eq!(
        topic.dead_letters("g").unwrap(),
        [DeadLetter {
            offset: 0,
            attempts: 2,
            message: "a"
        }]
    );
    let after = info(&topic, "g");
    assert_eq!(
        (
            after.position,
            after.attempt,
            after.in_flight,
            after.dead_letters
        ),
        (1, 0, None, 1)
    );
    assert_eq!(topic.poll("g").unwrap().unwrap().id(), id(1, 1));
}

// Proves repeating the final nack is NotOwned and never appends a second dead letter.
#[test]
fn repeated_final_nack_never_dead_letters_twice() {
    let topic = topic_with(&["a", "b"], "g", 1);
    let only = topic.poll("g").unwrap().unwrap();
    topic.nack("g", only.id()).unwrap();
    assert_not_owned(topic.nack("g", only.id()));
    // Even once the next message is in flight, the old id stays refused.
    topic.poll("g").unwrap().unwrap();
    assert_not_owned(topic.nack("g", only.id()));
    assert_eq!(topic.dead_letters("g").unwrap().len(), 1);
}

// Proves nothing is redelivered by itself: an in-flight delivery stays owned through any
// amount of unrelated activity (there is no clock).
#[test]
fn in_flight_delivery_is_never_redelivered_automatically() {
    let topic = topic_with(&["a"], "g", 5);
    let first = topic.poll("g").unwrap().unwrap();
    topic.create_group("other", 1).unwrap();
    for _ in 0..1_000 {
        topic.publish("more");
        let other = topic.poll("other").unwrap().unwrap();
        topic.ack("other", other.id()).unwrap();
    }
    assert_eq!(topic.poll("g").unwrap(), Some(first.clone()));
    topic.ack("g", first.id()).unwrap();
}

// Proves Topic is Send + Sync for Send + Sync messages and that Default is an empty topic.
#[test]
fn topic_is_shareable_and_has_default() {
    fn shareable<T: Send + Sync>() {}
    shareable::<Topic<String>>();
    shareable::<mailroom::topic::GroupHandle<String>>();
    let topic: Topic<String> = Topic::default();
    assert!(topic.is_empty() && topic.groups().is_empty());
}
