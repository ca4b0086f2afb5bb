//! One test per rule of `mailroom::topic` (its module docs) for consumer groups: their
//! creation, names, start positions, info, deletion, cap and independence, black-box
//! through the public API.

mod topic_support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::time::Duration;

use mailroom::topic::{
    GroupInfo, Nack, StartPosition, Topic, TopicError, GROUPS_MAX, GROUP_NAME_BYTES_MAX,
};
use topic_support::{assert_not_owned, id, info, topic_with};

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
