//! Model test: `Topic` against a tiny, obviously-correct reference model written here from
//! the retained-topic rules in the `mailroom::topic` docs (it does not use
//! `mailroom::group`), driven by the same random operations over several groups, compared
//! after every step.

use std::collections::{BTreeMap, HashMap};

use mailroom::topic::{
    DeadLetter, Delivery, DeliveryId, GroupHandle, GroupInfo, Nack, StartPosition, Topic,
    TopicError,
};
use proptest::prelude::*;

/// Names operations may use: three real ones, the empty name, and one never created.
const NAMES: [&str; 5] = ["a", "b", "c", "", "ghost"];
/// Names a create may pick (never "ghost", so it stays unknown).
const CREATABLE: usize = 4;

/// Which delivery id an ack or nack names.
#[derive(Debug, Clone)]
enum Pick {
    /// The group's in-flight delivery if any, else its most recent one.
    Current,
    /// One of the ids any poll has returned so far (stale ones, other groups' ones).
    Seen(usize),
    /// An arbitrary id.
    MadeUp(u64, u32),
}

#[derive(Debug, Clone)]
enum Op {
    Publish(u32),
    Create(usize, u32, StartPosition),
    Delete(usize),
    Poll(usize, bool),
    Ack(usize, Pick, bool),
    Nack(usize, Pick, bool),
    DeadLetters(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let name = 0..NAMES.len();
    let pick = prop_oneof![
        3 => Just(Pick::Current),
        2 => any::<usize>().prop_map(Pick::Seen),
        1 => (0..8u64, 0..5u32).prop_map(|(offset, attempt)| Pick::MadeUp(offset, attempt)),
    ];
    let start = prop_oneof![
        Just(StartPosition::Earliest),
        Just(StartPosition::Latest),
        (0..10u64).prop_map(StartPosition::Offset),
    ];
    prop_oneof![
        3 => any::<u32>().prop_map(Op::Publish),
        2 => (0..CREATABLE, 0..4u32, start).prop_map(|(n, m, s)| Op::Create(n, m, s)),
        1 => name.clone().prop_map(Op::Delete),
        5 => (name.clone(), any::<bool>()).prop_map(|(n, h)| Op::Poll(n, h)),
        4 => (name.clone(), pick.clone(), any::<bool>()).prop_map(|(n, p, h)| Op::Ack(n, p, h)),
        4 => (name.clone(), pick, any::<bool>()).prop_map(|(n, p, h)| Op::Nack(n, p, h)),
        1 => name.prop_map(Op::DeadLetters),
    ]
}

/// One group in the reference model: exactly the fields the rules talk about.
#[derive(Debug, Clone)]
struct ModelGroup {
    max_attempts: u32,
    position: u64,
    attempt: u32,
    in_flight: bool,
    dead: Vec<(u64, u32)>,
}

#[derive(Debug, Default)]
struct Model {
    log: Vec<u32>,
    groups: BTreeMap<String, ModelGroup>,
}

/// Errors, compared by meaning (the `InvalidArgument` wording is not the model's business).
#[derive(Debug, PartialEq, Eq)]
enum Refused {
    Invalid,
    Unknown(String),
    Exists(String),
    NotOwned(DeliveryId, Option<DeliveryId>),
}

fn refused(error: TopicError) -> Refused {
    match error {
        TopicError::InvalidArgument { .. } => Refused::Invalid,
        TopicError::UnknownGroup { group } => Refused::Unknown(group),
        TopicError::GroupExists { group } => Refused::Exists(group),
        TopicError::NotOwned { source, .. } => Refused::NotOwned(source.requested, source.current),
        other => panic!("unexpected error {other:?}"),
    }
}

fn unknown(name: &str) -> Refused {
    Refused::Unknown(name.to_owned())
}

impl ModelGroup {
    fn current(&self) -> Option<DeliveryId> {
        self.in_flight.then_some(DeliveryId {
            offset: self.position,
            attempt: self.attempt,
        })
    }

    fn check(&self, id: DeliveryId) -> Result<(), Refused> {
        if self.current() == Some(id) {
            Ok(())
        } else {
            Err(Refused::NotOwned(id, self.current()))
        }
    }

    fn finish(&mut self) {
        self.position += 1;
        self.attempt = 0;
        self.in_flight = false;
    }
}

impl Model {
    fn create(&mut self, name: &str, max: u32, start: StartPosition) -> Result<(), Refused> {
        let end = self.log.len() as u64;
        let position = match start {
            StartPosition::Earliest => 0,
            StartPosition::Latest => end,
            StartPosition::Offset(offset) => offset,
        };
        if name.is_empty() || max == 0 || position > end {
            return Err(Refused::Invalid);
        }
        if self.groups.contains_key(name) {
            return Err(Refused::Exists(name.to_owned()));
        }
        let group = ModelGroup {
            max_attempts: max,
            position,
            attempt: 0,
            in_flight: false,
            dead: Vec::new(),
        };
        self.groups.insert(name.to_owned(), group);
        Ok(())
    }

    fn group(&mut self, name: &str) -> Result<&mut ModelGroup, Refused> {
        self.groups.get_mut(name).ok_or_else(|| unknown(name))
    }

    fn poll(&mut self, name: &str) -> Result<Option<Delivery<u32>>, Refused> {
        let end = self.log.len() as u64;
        let log = self.log.clone();
        let group = self.group(name)?;
        if !group.in_flight {
            if group.position >= end {
                return Ok(None);
            }
            group.attempt += 1;
            group.in_flight = true;
        }
        Ok(Some(Delivery {
            offset: group.position,
            attempt: group.attempt,
            message: log[group.position as usize],
        }))
    }

    fn ack(&mut self, name: &str, id: DeliveryId) -> Result<(), Refused> {
        let group = self.group(name)?;
        group.check(id)?;
        group.finish();
        Ok(())
    }

    fn nack(&mut self, name: &str, id: DeliveryId) -> Result<Nack, Refused> {
        let group = self.group(name)?;
        group.check(id)?;
        if group.attempt < group.max_attempts {
            group.in_flight = false;
            return Ok(Nack::Retry);
        }
        group.dead.push((group.position, group.attempt));
        group.finish();
        Ok(Nack::DeadLettered)
    }

    fn dead_letters(&mut self, name: &str) -> Result<Vec<DeadLetter<u32>>, Refused> {
        let log = self.log.clone();
        Ok(self
            .group(name)?
            .dead
            .iter()
            .map(|&(offset, attempts)| DeadLetter {
                offset,
                attempts,
                message: log[offset as usize],
            })
            .collect())
    }

    fn info(&self, name: &str) -> GroupInfo {
        let group = &self.groups[name];
        GroupInfo {
            name: name.to_owned(),
            position: group.position,
            attempt: group.attempt,
            in_flight: group.current(),
            max_attempts: group.max_attempts,
            lag: self.log.len() as u64 - group.position,
            dead_letters: group.dead.len() as u64,
            pause: None,
        }
    }
}

/// The system under test, with a handle per group as the harness last created it (a
/// deleted group's handle is kept, and must then refuse).
struct Real {
    topic: Topic<u32>,
    handles: HashMap<String, GroupHandle<u32>>,
}

impl Real {
    fn poll(&self, name: &str, by_handle: bool) -> Result<Option<Delivery<u32>>, TopicError> {
        match self.handles.get(name).filter(|_| by_handle) {
            Some(handle) => handle.poll(),
            None => self.topic.poll(name),
        }
    }

    fn ack(&self, name: &str, id: DeliveryId, by_handle: bool) -> Result<(), TopicError> {
        match self.handles.get(name).filter(|_| by_handle) {
            Some(handle) => handle.ack(id),
            None => self.topic.ack(name, id),
        }
    }

    fn nack(&self, name: &str, id: DeliveryId, by_handle: bool) -> Result<Nack, TopicError> {
        match self.handles.get(name).filter(|_| by_handle) {
            Some(handle) => handle.nack(id),
            None => self.topic.nack(name, id),
        }
    }
}

fn choose(pick: &Pick, model: &Model, name: &str, seen: &[DeliveryId]) -> DeliveryId {
    match *pick {
        Pick::Current => model
            .groups
            .get(name)
            .and_then(ModelGroup::current)
            .or_else(|| seen.last().copied())
            .unwrap_or(DeliveryId {
                offset: 0,
                attempt: 1,
            }),
        Pick::Seen(index) if !seen.is_empty() => seen[index % seen.len()],
        Pick::Seen(_) => DeliveryId {
            offset: 0,
            attempt: 1,
        },
        Pick::MadeUp(offset, attempt) => DeliveryId { offset, attempt },
    }
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut model = Model::default();
    let mut real = Real {
        topic: Topic::new(),
        handles: HashMap::new(),
    };
    let mut seen = Vec::new();
    for (step, op) in ops.into_iter().enumerate() {
        match &op {
            Op::Publish(message) => {
                model.log.push(*message);
                let offset = real.topic.publish(*message);
                prop_assert_eq!(offset + 1, model.log.len() as u64, "step {}", step);
            }
            Op::Create(name, max, start) => {
                let name = NAMES[*name];
                let expected = model.create(name, *max, *start);
                let actual = real.topic.create_group_at(name, *max, *start);
                if actual.is_ok() {
                    let handle = real.topic.group(name).unwrap();
                    real.handles.insert(name.to_owned(), handle);
                }
                prop_assert_eq!(actual.map_err(refused), expected, "step {} {:?}", step, op);
            }
            Op::Delete(name) => {
                let name = NAMES[*name];
                let expected = model.groups.remove(name).map(drop).ok_or(unknown(name));
                let actual = real.topic.delete_group(name).map_err(refused);
                prop_assert_eq!(actual, expected, "step {} {:?}", step, op);
            }
            Op::Poll(name, by_handle) => {
                let name = NAMES[*name];
                let expected = model.poll(name);
                let actual = real.poll(name, *by_handle).map_err(refused);
                if let Ok(Some(delivery)) = &actual {
                    seen.push(delivery.id());
                }
                prop_assert_eq!(actual, expected, "step {} {:?}", step, op);
            }
            Op::Ack(name, pick, by_handle) => {
                let name = NAMES[*name];
                let id = choose(pick, &model, name, &seen);
                let expected = model.ack(name, id);
                let actual = real.ack(name, id, *by_handle).map_err(refused);
                prop_assert_eq!(actual, expected, "step {} {:?} {:?}", step, op, id);
            }
            Op::Nack(name, pick, by_handle) => {
                let name = NAMES[*name];
                let id = choose(pick, &model, name, &seen);
                let expected = model.nack(name, id);
                let actual = real.nack(name, id, *by_handle).map_err(refused);
                prop_assert_eq!(actual, expected, "step {} {:?} {:?}", step, op, id);
            }
            Op::DeadLetters(name) => {
                let name = NAMES[*name];
                let expected = model.dead_letters(name);
                let actual = real.topic.dead_letters(name).map_err(refused);
                prop_assert_eq!(actual, expected, "step {} {:?}", step, op);
            }
        }
        compare_all(&model, &real, step)?;
    }
    Ok(())
}

/// Every group's full state, the group list and the log length, after every step.
fn compare_all(model: &Model, real: &Real, step: usize) -> Result<(), TestCaseError> {
    prop_assert_eq!(real.topic.len(), model.log.len() as u64, "step {}", step);
    let names: Vec<String> = model.groups.keys().cloned().collect();
    prop_assert_eq!(real.topic.groups(), names.clone(), "step {}", step);
    for name in &names {
        prop_assert_eq!(
            real.topic.position(name),
            Ok(model.groups[name].position),
            "step {} group {}",
            step,
            name
        );
        prop_assert_eq!(
            real.topic.group_info(name),
            Ok(model.info(name)),
            "step {}",
            step
        );
    }
    for (name, handle) in &real.handles {
        match model.groups.get(name) {
            Some(group) => prop_assert_eq!(handle.position(), Ok(group.position)),
            None => prop_assert_eq!(handle.position().map_err(refused), Err(unknown(name))),
        }
    }
    Ok(())
}

proptest! {
    // Proves Topic matches the reference model on every result and every group's state
    // after every step of random publish/create/delete/poll/ack/nack over several groups,
    // with stale, foreign and made-up delivery ids and unknown or empty group names.
    #[test]
    fn topic_matches_reference_model(ops in proptest::collection::vec(op(), 1..80)) {
        run(ops)?;
    }
}

// Proves the harness can tell a wrong implementation from a right one: a model that lets
// a repeated poll make a new attempt disagrees with the topic on a tiny script.
#[test]
fn model_disagreement_is_detected() {
    let mut model = Model::default();
    model.log.push(9);
    model.create("a", 3, StartPosition::Earliest).unwrap();
    let topic = Topic::new();
    topic.publish(9);
    topic.create_group("a", 3).unwrap();
    assert_eq!(model.poll("a"), topic.poll("a").map_err(refused));
    // A broken model: treat the repeated poll as a fresh attempt.
    model.groups.get_mut("a").unwrap().in_flight = false;
    assert_ne!(model.poll("a"), topic.poll("a").map_err(refused));
}
