//! One test per rule of `mailroom::topic` (its module docs), black-box through the public API.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::time::Duration;

use mailroom::topic::{
    DeadLetter, Delivery, DeliveryId, GroupInfo, Nack, StartPosition, Topic, TopicError,
    GROUPS_MAX, GROUP_NAME_BYTES_MAX,
};

fn id(offset: u64, attempt: u32) -> DeliveryId {
    DeliveryId { offset, attempt }
}

fn topic_with(messages: &[&'static str], group: &str, max_attempts: u32) -> Topic<&'static str> {
    let topic = Topic::new();
    for message in messages {
        topic.publish(*message);
    }
    topic.create_group(group, max_attempts).unwrap();
    topic
}

fn info(topic: &Topic<&'static str>, group: &str) -> GroupInfo {
    topic.group_info(group).unwrap()
}

fn assert_not_owned<T: std::fmt::Debug>(result: Result<T, TopicError>) {
    assert!(
        matches!(result, Err(TopicError::NotOwned { .. })),
        "expected NotOwned, got {result:?}"
    );
}

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

// Proves an empty name and max_attempts == 0 are InvalidArgument and create nothing.
#[test]
fn invalid_group_arguments_are_refused() {
    let topic: Topic<u8> = Topic::new();
    for (name, max_attempts) in [("", 1), ("g", 0), ("", 0)] {
        assert!(matches!(
            topic.create_group(name, max_attempts),
            Err(TopicError::InvalidArgument { .. })
        ));
    }
    let too_long = "x".repeat(GROUP_NAME_BYTES_MAX + 1);
    assert!(matches!(
        topic.create_group(&too_long, 1),
        Err(TopicError::InvalidArgument { .. })
    ));
    assert!(topic.groups().is_empty());
    topic
        .create_group(&"x".repeat(GROUP_NAME_BYTES_MAX), 1)
        .unwrap();
}

// Proves creating an existing group is GroupExists and leaves the existing group as it was.
#[test]
fn existing_group_name_is_refused() {
    let topic = topic_with(&["a"], "g", 2);
    let delivery = topic.poll("g").unwrap().unwrap();
    let before = info(&topic, "g");
    assert_eq!(
        topic.create_group("g", 5),
        Err(TopicError::GroupExists { group: "g".into() })
    );
    assert_eq!(info(&topic, "g"), before);
    topic.ack("g", delivery.id()).unwrap();
}

// Proves every call naming an unknown group returns UnknownGroup.
#[test]
fn unknown_group_on_every_call() {
    let topic = topic_with(&["a"], "g", 1);
    let unknown = |result: Result<(), TopicError>| {
        assert_eq!(
            result,
            Err(TopicError::UnknownGroup {
                group: "nope".into()
            })
        )
    };
    unknown(topic.poll("nope").map(drop));
    unknown(topic.ack("nope", id(0, 1)));
    unknown(topic.nack("nope", id(0, 1)).map(drop));
    unknown(topic.dead_letters("nope").map(drop));
    unknown(topic.position("nope").map(drop));
    unknown(topic.group_info("nope").map(drop));
    unknown(topic.group("nope").map(drop));
    unknown(topic.delete_group("nope"));
    // The group that does exist was not touched.
    assert_eq!(info(&topic, "g").in_flight, None);
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

// Proves groups are independent: one group's retries, dead letters and progress change
// no other group's state.
#[test]
fn groups_do_not_change_each_other() {
    let topic = topic_with(&["a", "b"], "failing", 1);
    topic.create_group("healthy", 3).unwrap();
    let healthy_before = info(&topic, "healthy");
    let delivery = topic.poll("failing").unwrap().unwrap();
    topic.nack("failing", delivery.id()).unwrap();
    assert_eq!(info(&topic, "healthy"), healthy_before);
    assert_eq!(topic.dead_letters("healthy").unwrap(), []);
    let delivery = topic.poll("healthy").unwrap().unwrap();
    assert_eq!(delivery.id(), id(0, 1));
    // The same id means different things in the two groups.
    assert_not_owned(topic.ack("failing", delivery.id()));
    topic.ack("healthy", delivery.id()).unwrap();
    assert_eq!(topic.position("failing").unwrap(), 1);
    assert_eq!(topic.dead_letters("failing").unwrap().len(), 1);
}

/// A message whose clone blocks while the gate is shut, to hold a group's lock open.
struct Gated {
    entered: mpsc::SyncSender<()>,
    open: Arc<Barrier>,
    armed: Arc<AtomicBool>,
}

impl Clone for Gated {
    fn clone(&self) -> Self {
        if self.armed.swap(false, Ordering::SeqCst) {
            self.entered.send(()).unwrap();
            self.open.wait();
        }
        Gated {
            entered: self.entered.clone(),
            open: Arc::clone(&self.open),
            armed: Arc::clone(&self.armed),
        }
    }
}

// Proves a group stuck inside its own critical section (a slow clone during poll) blocks
// neither another group's poll/ack/nack nor a publish.
#[test]
fn a_stuck_group_blocks_no_other_group_nor_publishers() {
    let (entered_tx, entered_rx) = mpsc::sync_channel(1);
    let open = Arc::new(Barrier::new(2));
    let message = Gated {
        entered: entered_tx,
        open: Arc::clone(&open),
        armed: Arc::new(AtomicBool::new(false)),
    };
    let topic = Arc::new(Topic::new());
    topic.publish(message.clone());
    topic.create_group("stuck", 1).unwrap();
    topic.create_group("free", 2).unwrap();
    message.armed.store(true, Ordering::SeqCst);

    let stuck = {
        let topic = Arc::clone(&topic);
        std::thread::spawn(move || topic.poll("stuck").unwrap().unwrap().offset)
    };
    entered_rx.recv().unwrap(); // "stuck" now holds its group lock inside clone.

    let (done_tx, done_rx) = mpsc::channel();
    let free = {
        let topic = Arc::clone(&topic);
        std::thread::spawn(move || {
            let delivery = topic.poll("free").unwrap().unwrap();
            topic.nack("free", delivery.id()).unwrap();
            let delivery = topic.poll("free").unwrap().unwrap();
            topic.ack("free", delivery.id()).unwrap();
            let published = topic.publish(message);
            done_tx
                .send((topic.position("free").unwrap(), published))
                .unwrap();
        })
    };
    // A bound on how long the other group may take: a failure detector, not a sleep that
    // stands in for synchronisation. If it fired, the free group was blocked.
    let outcome = done_rx.recv_timeout(Duration::from_secs(30));
    open.wait();
    assert_eq!(outcome, Ok((1, 1)));
    free.join().unwrap();
    assert_eq!(stuck.join().unwrap(), 0);
}

// Proves create_group_at starts at the earliest message, the current end, or a given
// offset, and refuses an offset past the end.
#[test]
fn create_group_at_start_positions() {
    let topic = topic_with(&["a", "b", "c"], "g", 1);
    topic
        .create_group_at("earliest", 1, StartPosition::Earliest)
        .unwrap();
    topic
        .create_group_at("latest", 1, StartPosition::Latest)
        .unwrap();
    topic
        .create_group_at("middle", 1, StartPosition::Offset(1))
        .unwrap();
    topic
        .create_group_at("end", 1, StartPosition::Offset(3))
        .unwrap();
    assert!(matches!(
        topic.create_group_at("past", 1, StartPosition::Offset(4)),
        Err(TopicError::InvalidArgument { .. })
    ));
    assert!(matches!(
        topic.create_group_at("zero", 0, StartPosition::Latest),
        Err(TopicError::InvalidArgument { .. })
    ));
    assert_eq!(topic.poll("earliest").unwrap().unwrap().message, "a");
    assert_eq!(topic.poll("middle").unwrap().unwrap().message, "b");
    assert_eq!(topic.poll("latest").unwrap(), None);
    assert_eq!(topic.poll("end").unwrap(), None);
    assert_eq!(info(&topic, "latest").lag, 0);
    topic.publish("d");
    assert_eq!(topic.poll("latest").unwrap().unwrap().message, "d");
    assert_eq!(topic.groups(), ["earliest", "end", "g", "latest", "middle"]);
}

// Proves group_info reports position, attempt, in-flight, max_attempts, lag and the
// dead-letter count.
#[test]
fn group_info_reports_every_field() {
    let topic = topic_with(&["a", "b", "c"], "g", 2);
    let only = topic.poll("g").unwrap().unwrap();
    topic.nack("g", only.id()).unwrap();
    let again = topic.poll("g").unwrap().unwrap();
    topic.nack("g", again.id()).unwrap();
    topic.poll("g").unwrap().unwrap();
    assert_eq!(
        info(&topic, "g"),
        GroupInfo {
            name: "g".into(),
            position: 1,
            attempt: 1,
            in_flight: Some(id(1, 1)),
            max_attempts: 2,
            lag: 2,
            dead_letters: 1,
            pause: None,
        }
    );
}

// Proves delete_group removes the group and its state, a handle to it then answers
// UnknownGroup, and a new group of the same name starts afresh.
#[test]
fn delete_group_forgets_the_group() {
    let topic = topic_with(&["a", "b"], "g", 1);
    let handle = topic.group("g").unwrap();
    let delivery = handle.poll().unwrap().unwrap();
    handle.nack(delivery.id()).unwrap();
    topic.delete_group("g").unwrap();
    assert!(topic.groups().is_empty());
    assert!(matches!(
        topic.poll("g"),
        Err(TopicError::UnknownGroup { .. })
    ));
    assert!(matches!(
        handle.poll(),
        Err(TopicError::UnknownGroup { .. })
    ));
    topic.create_group("g", 1).unwrap();
    assert!(matches!(
        handle.position(),
        Err(TopicError::UnknownGroup { .. })
    ));
    assert_eq!(topic.position("g").unwrap(), 0);
    assert_eq!(topic.dead_letters("g").unwrap(), []);
    assert_eq!(topic.len(), 2);
}

// Proves a group handle shares state with the by-name calls in both directions.
#[test]
fn handle_and_name_share_one_group() {
    let topic = topic_with(&["a", "b"], "g", 2);
    let handle = topic.group("g").unwrap();
    assert_eq!(handle.name(), "g");
    let delivery = handle.poll().unwrap().unwrap();
    assert_eq!(topic.poll("g").unwrap().as_ref(), Some(&delivery));
    topic.ack("g", delivery.id()).unwrap();
    assert_not_owned(handle.ack(delivery.id()));
    let next = topic.poll("g").unwrap().unwrap();
    assert_eq!(handle.nack(next.id()).unwrap(), Nack::Retry);
    assert_eq!(handle.info().unwrap(), info(&topic, "g"));
    assert_eq!(handle.position().unwrap(), 1);
    assert_eq!(handle.clone().dead_letters().unwrap(), []);
}

// Proves a topic refuses a group beyond GROUPS_MAX with InvalidArgument, and accepts one
// again after a delete.
#[test]
fn groups_are_capped() {
    let topic: Topic<u8> = Topic::new();
    for index in 0..GROUPS_MAX {
        topic.create_group(&index.to_string(), 1).unwrap();
    }
    assert!(matches!(
        topic.create_group("one-too-many", 1),
        Err(TopicError::InvalidArgument { .. })
    ));
    topic.delete_group("0").unwrap();
    topic.create_group("one-too-many", 1).unwrap();
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
