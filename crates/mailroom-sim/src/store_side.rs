//! The same actions and reads as the model's, against the store.

use std::fmt::Debug;

use mailroom::topic::StartPosition;
use mailroom_store::{DurableTopic, Store, StoreError};

use crate::action::{Action, CONSUMERS, GROUPS, TOPICS};
use crate::model::{answer, group_lines, unknown_topic, Outcome};

/// The text of a store result: the rules' answers as the model gives them, everything
/// else a fault.
pub fn outcome<T: Debug>(result: Result<T, StoreError>) -> Outcome {
    match result {
        Ok(value) => answer(Ok(value)),
        Err(StoreError::Topic(error)) => answer(Err::<T, _>(error)),
        Err(StoreError::UnknownTopic { .. }) => unknown_topic(),
        Err(other) => Outcome::Fault(other.to_string()),
    }
}

fn text<T: Debug>(result: Result<T, StoreError>) -> String {
    match outcome(result) {
        Outcome::Answer(text) => text,
        Outcome::Fault(text) => format!("FAULT {text}"),
    }
}

/// Runs `action` on `store` at `now`.
pub fn apply(store: &Store, now: u64, action: &Action) -> Outcome {
    match action {
        Action::CreateTopic(t) => outcome(store.create_topic(TOPICS[*t])),
        Action::DeleteTopic(t) => outcome(store.delete_topic(TOPICS[*t])),
        Action::Retention => outcome(store.enforce_retention(now).map(|_| ())),
        Action::Checkpoint => outcome(store.checkpoint()),
        Action::Sync => outcome(store.sync()),
        Action::Advance(_) => answer(Ok(())),
        Action::Publish(t, ..)
        | Action::PublishBatch(t, ..)
        | Action::CreateGroup(t, ..)
        | Action::DeleteGroup(t, ..)
        | Action::Poll(t, ..)
        | Action::Ack(t, ..)
        | Action::Nack(t, ..)
        | Action::Touch(t, ..)
        | Action::PollBatch(t, ..)
        | Action::AckBatch(t, ..)
        | Action::NackBatch(t, ..)
        | Action::AckThenPoll(t, ..)
        | Action::Redrive(t, ..)
        | Action::Purge(t, ..)
        | Action::SetRetention(t, ..) => match store.topic(TOPICS[*t]) {
            Ok(topic) => apply_to_topic(&topic, action),
            Err(error) => outcome::<()>(Err(error)),
        },
    }
}

fn apply_to_topic(topic: &DurableTopic, action: &Action) -> Outcome {
    match action {
        Action::Publish(_, payload) => outcome(topic.publish(payload.clone())),
        Action::PublishBatch(_, payloads) => outcome(topic.publish_batch(payloads)),
        Action::CreateGroup(_, g, config, earliest) => {
            let at = if *earliest {
                StartPosition::Earliest
            } else {
                StartPosition::Latest
            };
            outcome(topic.create_group_with(GROUPS[*g], at, *config))
        }
        Action::DeleteGroup(_, g) => outcome(topic.delete_group(GROUPS[*g])),
        Action::Poll(_, g, c) => match CONSUMERS[*c] {
            None => outcome(topic.poll(GROUPS[*g])),
            Some(consumer) => outcome(topic.poll_as(GROUPS[*g], consumer)),
        },
        Action::Ack(_, g, id) => outcome(topic.ack(GROUPS[*g], *id)),
        Action::Nack(_, g, id, options) => {
            outcome(topic.nack_with(GROUPS[*g], *id, options.clone()))
        }
        Action::Touch(_, g, id) => outcome(topic.touch(GROUPS[*g], *id)),
        Action::PollBatch(_, g, c, max) => {
            outcome(topic.poll_batch(GROUPS[*g], CONSUMERS[*c], *max))
        }
        Action::AckBatch(_, g, acks) => outcome(topic.ack_batch(GROUPS[*g], acks)),
        Action::NackBatch(_, g, nacks, options) => {
            outcome(topic.nack_batch(GROUPS[*g], nacks, options))
        }
        Action::AckThenPoll(_, g, acks, c, max) => {
            outcome(topic.ack_then_poll_batch(GROUPS[*g], acks, CONSUMERS[*c], *max))
        }
        Action::Redrive(_, g, range) => outcome(topic.redrive(GROUPS[*g], range.clone())),
        Action::Purge(_, g, range) => outcome(topic.purge(GROUPS[*g], range.clone())),
        Action::SetRetention(_, retention) => outcome(topic.set_retention(*retention)),
        _ => unreachable!("not a topic action: {action:?}"),
    }
}

/// Topic `t`'s reads, in the model's order, with where its log starts (`None` if the
/// store has no such topic). Messages are read from the start to the end.
pub fn inspect(store: &Store, t: usize) -> Option<(u64, Vec<String>)> {
    let topic = store.topic(TOPICS[t]).ok()?;
    let start = topic.start();
    let mut lines = vec![
        format!("len {}", topic.len()),
        format!("groups {:?}", topic.groups()),
        format!("retention {:?}", topic.retention()),
    ];
    for group in topic.groups() {
        lines.extend(group_lines(&group, |what| match what {
            0 => text(topic.dead_letter_info(&group)),
            1 => text(topic.group_info(&group)),
            2 => text(topic.in_flight(&group)),
            3 => text(topic.group_counters(&group)),
            _ => text(topic.group_config(&group)),
        }));
    }
    for offset in start..topic.len() {
        lines.push(format!("read {offset} {}", text(topic.read(offset))));
    }
    Some((start, lines))
}
