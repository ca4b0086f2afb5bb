//! The reference: one in-memory `mailroom::topic::Topic` per topic, each with the history
//! that made it, so any earlier state can be rebuilt exactly (an operation that failed
//! under a fault may or may not have happened; recovery decides which, the model follows).

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Arc;

use bytes::Bytes;
use mailroom::clock::ManualClock;
use mailroom::topic::{DeliveryId, StartPosition, Topic, TopicError};
use mailroom_store::TopicRetention;

use crate::action::{Action, CONSUMERS, GROUPS, TOPICS};

/// What an operation answered, as text, so the store's and the model's compare directly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A result of the rules: `Ok(..)` or `Err(<rule error>)`, or `unknown topic`.
    Answer(String),
    /// The store failed for a reason outside the rules (I/O, fail-stop, damage).
    Fault(String),
}

/// The text of a rule result, the same for the store and the model.
pub fn answer<T: Debug>(result: Result<T, TopicError>) -> Outcome {
    Outcome::Answer(match result {
        Ok(value) => format!("Ok({value:?})"),
        Err(error) => format!("Err({error:?})"),
    })
}

/// The answer for a topic that does not exist.
pub fn unknown_topic() -> Outcome {
    Outcome::Answer("unknown topic".into())
}

/// One entry of a topic's history.
#[derive(Debug, Clone)]
pub enum Entry {
    /// An action, applied.
    Act(Action),
    /// A comparison's reads: they apply due lease expiries, so they belong to the history.
    Inspect,
}

/// The history of every topic that exists, by topic index: enough to rebuild [`Models`].
pub type Histories = BTreeMap<usize, Vec<(u64, Entry)>>;

/// The reference model of one topic.
#[derive(Debug)]
struct TopicModel {
    clock: Arc<ManualClock>,
    topic: Topic<Bytes>,
    published: Vec<Bytes>,
    retention: TopicRetention,
    history: Vec<(u64, Entry)>,
}

impl TopicModel {
    fn new() -> TopicModel {
        let clock = Arc::new(ManualClock::new(0));
        TopicModel {
            topic: Topic::with_clock(clock.clone()),
            clock,
            published: Vec::new(),
            retention: TopicRetention::default(),
            history: Vec::new(),
        }
    }

    /// Applies a topic action at `now`; answers it and what deliveries it handed out.
    fn apply(&mut self, now: u64, action: &Action) -> (Outcome, Option<Vec<DeliveryId>>) {
        self.clock.set_ms(now);
        self.history.push((now, Entry::Act(action.clone())));
        let topic = &self.topic;
        let ids = |deliveries: &[mailroom::topic::Delivery<Bytes>]| {
            Some(deliveries.iter().map(|d| d.id()).collect())
        };
        match action {
            Action::Publish(_, payload) => {
                self.published.push(payload.clone());
                (answer(Ok(topic.publish(payload.clone()))), None)
            }
            Action::PublishBatch(_, payloads) => {
                let start = topic.len();
                for payload in payloads {
                    self.published.push(payload.clone());
                    topic.publish(payload.clone());
                }
                (answer(Ok(start..topic.len())), None)
            }
            Action::CreateGroup(_, g, config, earliest) => {
                let at = if *earliest {
                    StartPosition::Earliest
                } else {
                    StartPosition::Latest
                };
                (
                    answer(topic.create_group_with(GROUPS[*g], at, *config)),
                    None,
                )
            }
            Action::DeleteGroup(_, g) => (answer(topic.delete_group(GROUPS[*g])), None),
            Action::Poll(_, g, c) => {
                let got = match CONSUMERS[*c] {
                    None => topic.poll(GROUPS[*g]),
                    Some(consumer) => topic.poll_as(GROUPS[*g], consumer),
                };
                let handed = got
                    .as_ref()
                    .ok()
                    .and_then(|d| d.as_ref().map(|d| vec![d.id()]));
                (answer(got), handed)
            }
            Action::Ack(_, g, id) => (answer(topic.ack(GROUPS[*g], *id)), None),
            Action::Nack(_, g, id, options) => (
                answer(topic.nack_with(GROUPS[*g], *id, options.clone())),
                None,
            ),
            Action::Touch(_, g, id) => (answer(topic.touch(GROUPS[*g], *id)), None),
            Action::PollBatch(_, g, c, max) => {
                let got = topic.poll_batch(GROUPS[*g], CONSUMERS[*c], *max);
                let handed = got.as_ref().ok().and_then(|b| ids(b));
                (answer(got), handed)
            }
            Action::AckBatch(_, g, acks) => (answer(topic.ack_batch(GROUPS[*g], acks)), None),
            Action::NackBatch(_, g, nacks, options) => {
                (answer(topic.nack_batch(GROUPS[*g], nacks, options)), None)
            }
            Action::AckThenPoll(_, g, acks, c, max) => {
                let got = topic.ack_then_poll_batch(GROUPS[*g], acks, CONSUMERS[*c], *max);
                let handed = got.as_ref().ok().and_then(|(_, b)| ids(b));
                (answer(got), handed)
            }
            Action::Redrive(_, g, range) => {
                (answer(topic.redrive(GROUPS[*g], range.clone())), None)
            }
            Action::Purge(_, g, range) => (answer(topic.purge(GROUPS[*g], range.clone())), None),
            Action::SetRetention(_, retention) => {
                self.retention = *retention;
                (answer(Ok(())), None)
            }
            Action::CreateTopic(_)
            | Action::DeleteTopic(_)
            | Action::Retention
            | Action::Checkpoint
            | Action::Sync
            | Action::Advance(_) => unreachable!("not a topic action: {action:?}"),
        }
    }

    /// What a comparison reads, in the order the store is read (dead letters first: that
    /// read may apply a due expiry on a final attempt and must see the dead letter it
    /// makes). Message reads start at `start`, where the store's retention left it.
    fn inspect(&mut self, now: u64, start: u64) -> Vec<String> {
        self.clock.set_ms(now);
        self.history.push((now, Entry::Inspect));
        let topic = &self.topic;
        let mut lines = vec![
            format!("len {}", topic.len()),
            format!("groups {:?}", topic.groups()),
            format!("retention {:?}", self.retention),
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
        let retained = self.published.iter().enumerate().skip(start as usize);
        for (offset, payload) in retained {
            lines.push(format!("read {offset} Ok({:?})", Some(payload)));
        }
        lines
    }

    /// The lowest position of any group (retention keeps everything at or above it).
    fn floor(&self) -> Option<u64> {
        let topic = &self.topic;
        topic
            .groups()
            .iter()
            .filter_map(|g| topic.position(g).ok())
            .min()
    }
}

fn text<T: Debug>(result: Result<T, TopicError>) -> String {
    match answer(result) {
        Outcome::Answer(text) | Outcome::Fault(text) => text,
    }
}

/// The lines of one group's reads, `read(0..5)` giving each read's text in order.
pub fn group_lines(group: &str, mut read: impl FnMut(u8) -> String) -> Vec<String> {
    [
        "dead_letter_info",
        "group_info",
        "in_flight",
        "group_counters",
        "group_config",
    ]
    .iter()
    .zip(0u8..)
    .map(|(name, what)| format!("{group} {name} {}", read(what)))
    .collect()
}

/// The reference model of the whole store: which topics exist and each one's model.
#[derive(Debug, Default)]
pub struct Models {
    topics: BTreeMap<usize, TopicModel>,
}

impl Models {
    /// The histories that rebuild this state.
    pub fn histories(&self) -> Histories {
        self.topics
            .iter()
            .map(|(t, model)| (*t, model.history.clone()))
            .collect()
    }

    /// The state `histories` describe, rebuilt by replaying them.
    pub fn rebuild(histories: &Histories) -> Models {
        let mut models = Models::default();
        for (t, history) in histories {
            let mut model = TopicModel::new();
            for (now, entry) in history {
                match entry {
                    Entry::Act(action) => {
                        model.apply(*now, action);
                    }
                    // Replays the expiries the reads applied; the start does not matter.
                    Entry::Inspect => {
                        model.inspect(*now, u64::MAX);
                    }
                }
            }
            models.topics.insert(*t, model);
        }
        models
    }

    /// The topic names that exist, sorted.
    pub fn topic_names(&self) -> Vec<String> {
        self.topics.keys().map(|t| TOPICS[*t].to_owned()).collect()
    }

    /// Applies `action` at `now`; answers it, with the deliveries it handed out.
    pub fn apply(&mut self, now: u64, action: &Action) -> (Outcome, Option<Vec<DeliveryId>>) {
        let topic = match action {
            Action::CreateTopic(t) => {
                let created = !self.topics.contains_key(t);
                self.topics.entry(*t).or_insert_with(TopicModel::new);
                return (answer(Ok(created)), None);
            }
            Action::DeleteTopic(t) => {
                return match self.topics.remove(t) {
                    Some(_) => (answer(Ok(())), None),
                    None => (unknown_topic(), None),
                };
            }
            Action::Retention | Action::Checkpoint | Action::Sync | Action::Advance(_) => {
                return (answer(Ok(())), None);
            }
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
            | Action::SetRetention(t, ..) => *t,
        };
        match self.topics.get_mut(&topic) {
            Some(model) => model.apply(now, action),
            None => (unknown_topic(), None),
        }
    }

    /// Topic `t`'s reads at `now`, messages from `start` on (see the store's view).
    pub fn inspect(&mut self, t: usize, now: u64, start: u64) -> Vec<String> {
        self.topics
            .get_mut(&t)
            .map(|model| model.inspect(now, start))
            .unwrap_or_default()
    }

    /// The lowest group position in topic `t`, if it has groups.
    pub fn floor(&self, t: usize) -> Option<u64> {
        self.topics.get(&t).and_then(TopicModel::floor)
    }

    /// How many messages topic `t` holds (its end offset).
    pub fn len(&self, t: usize) -> u64 {
        self.topics.get(&t).map_or(0, |model| model.topic.len())
    }
}
