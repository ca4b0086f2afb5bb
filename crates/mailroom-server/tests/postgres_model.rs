//! Model test of the PostgreSQL backend through the `Backend` seam: random operations
//! (publishes, with ordering keys or without, groups with W > 1, polls and batches by several consumers, acks and nacks
//! of every kind, stale ids, ack-then-poll, redrive, purge, reads) go to the embedded
//! backend, the reference (itself checked against the in-memory model by the store's
//! model tests), and to brokers over one PostgreSQL database, alternating between two
//! of them and restarting them between steps; every answer must be the same.
//!
//! Time stays out: groups have no lease or backoff and nacks no delay, since the two
//! backends read different clocks. Dead letters' times are left out of the comparison
//! for the same reason, and so is the topic's retention state (the embedded store's
//! bytes on disk).

mod postgres_support;

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use mailroom::group::{DeliveryId, GroupConfig, NackKind, NackOptions};
use mailroom::topic::{DeadLetterInfo, Delivery, Metadata, StartPosition};
use mailroom_server::backend::{Backend, BackendError, Embedded, Postgres, Settlements};
use mailroom_server::error::ApiError;
use mailroom_server::long_poll::LongPolls;
use mailroom_store::{MessageDelivery, NewMessage, PollScope};
use mailroom_testkit::strategy::{nack_kind, nack_reason, offset_range, CONSUMERS};
use postgres_support::{cluster_url, fresh_database};
use proptest::prelude::*;

const TOPIC: &str = "t";
const GROUPS: [&str; 2] = ["a", "b"];

#[derive(Debug, Clone)]
enum Op {
    Publish(Vec<Vec<u8>>),
    /// Messages with their key (`None`: without one) from a few keys, so that keys meet
    /// inside a window and ordering keys decide what goes out.
    PublishKeyed(Vec<(Vec<u8>, Option<u8>)>),
    Create(usize, u32, u32),
    Poll(usize, usize),
    PollBatch(usize, usize, usize),
    /// Group, consumer, which of its last deliveries, whether to name an older attempt.
    Ack(usize, usize, usize, bool),
    Nack(usize, usize, usize, bool, NackKind, Option<String>),
    AckBatch(usize, usize, Vec<(usize, bool)>),
    NackBatch(usize, usize, Vec<(usize, bool)>, NackKind),
    AckThenPoll(usize, usize, Vec<(usize, bool)>, usize),
    /// Group, consumer, nacks and their kind, acks, max.
    SettleThenPoll(
        usize,
        usize,
        Vec<(usize, bool)>,
        NackKind,
        Vec<(usize, bool)>,
        usize,
    ),
    Redrive(usize, Range<u64>),
    Purge(usize, Range<u64>),
    Read(usize),
    DeleteGroup(usize),
    /// Send the next calls to the other PostgreSQL broker.
    Switch,
    /// Replace the current PostgreSQL broker by a new process's worth of state.
    Restart,
}

/// Whether an ack or a nack names an older attempt than the one handed out: one in four,
/// so that most settle and histories reach dead letters, redrives and redeliveries.
fn stale() -> impl Strategy<Value = bool> {
    prop::bool::weighted(0.25)
}

fn picks() -> impl Strategy<Value = Vec<(usize, bool)>> {
    proptest::collection::vec((0..4usize, stale()), 0..4)
}

/// The offsets a redrive or a purge takes: a short range, or (as often) all of them, so
/// that a history's dead letters are taken back often enough to test (with short ranges
/// only, 24 histories had no redrive or purge that found a dead letter).
fn taken() -> impl Strategy<Value = Range<u64>> {
    prop_oneof![offset_range(0..6, 0..8), Just(0..u64::MAX)]
}

fn any_op() -> impl Strategy<Value = Op> {
    let group = 0..GROUPS.len();
    let consumer = 0..CONSUMERS.len();
    let payloads = proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..12), 1..4);
    prop_oneof![
        2 => payloads.prop_map(Op::Publish),
        3 => proptest::collection::vec(
            (proptest::collection::vec(any::<u8>(), 0..12), proptest::option::of(0..3u8)),
            1..5,
        )
        .prop_map(Op::PublishKeyed),
        1 => (group.clone(), 1..4u32, 1..4u32).prop_map(|(g, m, w)| Op::Create(g, m, w)),
        5 => (group.clone(), consumer.clone()).prop_map(|(g, c)| Op::Poll(g, c)),
        3 => (group.clone(), consumer.clone(), 1..4usize).prop_map(|(g, c, m)| Op::PollBatch(g, c, m)),
        4 => (group.clone(), consumer.clone(), 0..4usize, stale())
            .prop_map(|(g, c, i, s)| Op::Ack(g, c, i, s)),
        4 => (group.clone(), consumer.clone(), 0..4usize, stale(), nack_kind(), nack_reason())
            .prop_map(|(g, c, i, s, k, r)| Op::Nack(g, c, i, s, k, r)),
        2 => (group.clone(), consumer.clone(), picks()).prop_map(|(g, c, p)| Op::AckBatch(g, c, p)),
        2 => (group.clone(), consumer.clone(), picks(), nack_kind())
            .prop_map(|(g, c, p, k)| Op::NackBatch(g, c, p, k)),
        2 => (group.clone(), consumer.clone(), picks(), 1..4usize)
            .prop_map(|(g, c, p, m)| Op::AckThenPoll(g, c, p, m)),
        2 => (group.clone(), consumer.clone(), picks(), nack_kind(), picks(), 1..4usize)
            .prop_map(|(g, c, n, k, a, m)| Op::SettleThenPoll(g, c, n, k, a, m)),
        2 => (group.clone(), taken()).prop_map(|(g, r)| Op::Redrive(g, r)),
        1 => (group.clone(), taken()).prop_map(|(g, r)| Op::Purge(g, r)),
        2 => group.clone().prop_map(Op::Read),
        1 => group.prop_map(Op::DeleteGroup),
        2 => Just(Op::Switch),
        1 => Just(Op::Restart),
    ]
}

/// What the test remembers per (group, consumer): the deliveries last handed out.
#[derive(Debug, Default)]
struct Handed(std::collections::HashMap<(usize, usize), Vec<DeliveryId>>);

impl Handed {
    fn pick(&self, group: usize, consumer: usize, index: usize, stale: bool) -> DeliveryId {
        // A consumer that was handed nothing settles another's deliveries (an ack names
        // the delivery, not the consumer): else most of its calls named offset 0 and
        // were refused, and few histories reached a dead letter.
        let others = (0..CONSUMERS.len()).filter_map(|other| self.0.get(&(group, other)));
        let ids = self
            .0
            .get(&(group, consumer))
            .or_else(|| others.max_by_key(|ids| ids.len()))
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        let mut id = ids
            .get(index % ids.len().max(1))
            .copied()
            .unwrap_or(DeliveryId {
                offset: 0,
                attempt: 1,
            });
        if stale {
            id.attempt = id.attempt.saturating_sub(1);
        }
        id
    }
}

/// An answer in a form both backends can be compared by: the value's debug text, or the
/// API error's status, code and message.
fn seen<T: std::fmt::Debug>(result: Result<T, BackendError>) -> String {
    match result {
        Ok(value) => format!("{value:?}"),
        Err(error) => {
            let api = ApiError::from(error);
            format!("error {} {} {}", api.status, api.code, api.message)
        }
    }
}

/// Runs `op` on `backend`; answers what it saw and the deliveries it handed out.
async fn run(backend: &dyn Backend, op: &Op, handed: &Handed) -> (String, Option<Vec<DeliveryId>>) {
    let name = |group: &usize| GROUPS[*group];
    let ids = |g: usize, c: usize, picks: &[(usize, bool)]| -> Vec<DeliveryId> {
        picks
            .iter()
            .map(|&(i, s)| handed.pick(g, c, i, s))
            .collect()
    };
    let handed_out = |deliveries: &[mailroom::topic::Delivery<(Bytes, Metadata)>]| {
        Some(deliveries.iter().map(|d| d.id()).collect::<Vec<_>>())
    };
    match op {
        Op::Publish(payloads) => {
            let payloads: Vec<Bytes> = payloads.iter().cloned().map(Bytes::from).collect();
            (seen(backend.publish_batch(TOPIC, &payloads).await), None)
        }
        Op::PublishKeyed(messages) => {
            let messages: Vec<NewMessage> = messages
                .iter()
                .map(|(payload, key)| NewMessage {
                    payload: Bytes::from(payload.clone()),
                    metadata: match key {
                        Some(key) => Metadata::new().with_key(format!("k{key}")),
                        None => Metadata::new(),
                    },
                })
                .collect();
            (seen(backend.publish_messages(TOPIC, &messages).await), None)
        }
        Op::Create(g, max_attempts, w) => {
            let config = GroupConfig::new(*max_attempts).with_max_in_flight(*w);
            let result = backend
                .create_group(TOPIC, name(g), StartPosition::Earliest, config)
                .await;
            (seen(result), None)
        }
        Op::Poll(g, c) => {
            let result = backend
                .poll(TOPIC, name(g), CONSUMERS[*c])
                .await
                .map(|delivery| delivery.map(comparable));
            let out = result
                .as_ref()
                .ok()
                .map(|d| d.iter().map(|d| d.id()).collect());
            (seen(result), out)
        }
        Op::PollBatch(g, c, max) => {
            let result = backend
                .poll_batch(TOPIC, name(g), CONSUMERS[*c], *max, PollScope::All)
                .await
                .map(|deliveries| deliveries.into_iter().map(comparable).collect::<Vec<_>>());
            let out = result.as_ref().ok().and_then(|d| handed_out(d));
            (seen(result), out)
        }
        Op::Ack(g, c, i, s) => (
            seen(
                backend
                    .ack(TOPIC, name(g), handed.pick(*g, *c, *i, *s))
                    .await,
            ),
            None,
        ),
        Op::Nack(g, c, i, s, kind, reason) => {
            let mut options = NackOptions::new(*kind);
            if let Some(reason) = reason {
                options = options.with_reason(reason.clone());
            }
            let id = handed.pick(*g, *c, *i, *s);
            (seen(backend.nack(TOPIC, name(g), id, options).await), None)
        }
        Op::AckBatch(g, c, picks) => (
            seen(backend.ack_batch(TOPIC, name(g), &ids(*g, *c, picks)).await),
            None,
        ),
        Op::NackBatch(g, c, picks, kind) => {
            let options = NackOptions::new(*kind);
            let result = backend
                .nack_batch(TOPIC, name(g), &ids(*g, *c, picks), &options)
                .await;
            (seen(result), None)
        }
        Op::AckThenPoll(g, c, picks, max) => {
            let result = backend
                .ack_then_poll_batch(
                    TOPIC,
                    name(g),
                    &ids(*g, *c, picks),
                    CONSUMERS[*c],
                    *max,
                    PollScope::All,
                )
                .await
                .map(|(acked, polled)| {
                    (
                        acked,
                        polled.into_iter().map(comparable).collect::<Vec<_>>(),
                    )
                });
            let out = result.as_ref().ok().and_then(|(_, d)| handed_out(d));
            (seen(result), out)
        }
        Op::SettleThenPoll(g, c, nacks, kind, acks, max) => {
            let (nacks, acks) = (ids(*g, *c, nacks), ids(*g, *c, acks));
            let runs = [(&nacks[..], NackOptions::new(*kind))];
            let round = Settlements {
                nacks: &runs,
                acks: &acks,
            };
            let result = backend
                .settle_then_poll_batch(TOPIC, name(g), round, CONSUMERS[*c], *max, PollScope::All)
                .await
                .map(|(nacked, (acked, polled))| {
                    let polled: Vec<_> = polled.into_iter().map(comparable).collect();
                    (nacked, acked, polled)
                });
            let out = result.as_ref().ok().and_then(|(_, _, d)| handed_out(d));
            (seen(result), out)
        }
        Op::Redrive(g, range) => (
            seen(backend.redrive(TOPIC, name(g), range.clone()).await),
            None,
        ),
        Op::Purge(g, range) => (
            seen(backend.purge(TOPIC, name(g), range.clone()).await),
            None,
        ),
        Op::Read(g) => (read(backend, name(g)).await, None),
        Op::DeleteGroup(g) => (seen(backend.delete_group(TOPIC, name(g)).await), None),
        Op::Switch | Op::Restart => (String::new(), None),
    }
}

/// A delivery as both backends can be compared by: its message's payload and metadata,
/// without the publish time (each backend's own clock stamps it).
fn comparable(delivery: MessageDelivery) -> Delivery<(Bytes, Metadata)> {
    Delivery {
        offset: delivery.offset,
        attempt: delivery.attempt,
        message: (delivery.message.payload, delivery.message.metadata),
    }
}

/// A group's detail and first dead-letter page, with the dead letters' times left out.
async fn read(backend: &dyn Backend, group: &str) -> String {
    let detail = backend.group_detail(TOPIC, group).await.map(|mut detail| {
        for letter in &mut detail.dead_letters {
            letter.at_ms = 0;
        }
        detail
    });
    let page = backend
        .dead_letter_page(TOPIC, group, 1, 2)
        .await
        .map(|page| {
            let letters: Vec<_> = page
                .letters
                .into_iter()
                .map(|letter| DeadLetterInfo {
                    offset: letter.offset,
                    attempts: letter.attempts,
                    reason: letter.reason,
                    at_ms: 0,
                    message: letter.message.payload,
                })
                .collect();
            (letters, page.next)
        });
    // Retention is the embedded store's alone (bytes on disk): left out.
    let topic = backend.topic_state(TOPIC).await.map(|mut topic| {
        topic.retention = Default::default();
        topic
    });
    format!("{} / {} / {}", seen(detail), seen(page), seen(topic))
}

async fn check(url: &str, groups: &[(u32, u32)], ops: &[Op]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let store = mailroom_store::Store::open(dir.path(), Default::default()).unwrap();
    let reference = Embedded::new(store, false, Arc::new(LongPolls::default()));
    let connect = || async {
        Postgres::connect(url, Arc::new(LongPolls::default()))
            .await
            .unwrap()
    };
    let mut brokers = [connect().await, connect().await];
    let mut current = 0;
    prop_assert_eq!(
        seen(reference.create_topic(TOPIC).await),
        seen(brokers[0].create_topic(TOPIC).await)
    );
    let mut handed = Handed::default();
    // Both groups exist from the start (a history of calls on missing groups proves
    // little); `DeleteGroup` and `Create` still take them away and back.
    for (group, &(max_attempts, w)) in groups.iter().enumerate() {
        let create = Op::Create(group, max_attempts, w);
        let (expected, _) = run(&reference, &create, &handed).await;
        let (got, _) = run(&brokers[0], &create, &handed).await;
        prop_assert_eq!(got, expected);
    }
    for (step, op) in ops.iter().enumerate() {
        match op {
            Op::Switch => current = 1 - current,
            Op::Restart => brokers[current] = connect().await,
            _ => {}
        }
        let (expected, out) = run(&reference, op, &handed).await;
        let (got, _) = run(&brokers[current], op, &handed).await;
        prop_assert_eq!(
            &got,
            &expected,
            "step {}: {:?} on broker {}",
            step,
            op,
            current
        );
        let consumer = match op {
            Op::Poll(g, c)
            | Op::PollBatch(g, c, _)
            | Op::AckThenPoll(g, c, _, _)
            | Op::SettleThenPoll(g, c, ..) => Some((*g, *c)),
            _ => None,
        };
        if let (Some(key), Some(out)) = (consumer, out) {
            if !out.is_empty() {
                handed.0.insert(key, out);
            }
        }
    }
    Ok(())
}

proptest! {
    // 24 cases unless PROPTEST_CASES asks for more (each case makes its own database).
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(24),
        ..ProptestConfig::default()
    })]

    // Proves the PostgreSQL backend, across two brokers and restarts, answers every call
    // of a random history exactly as the embedded backend does.
    #[test]
    fn brokers_over_postgres_answer_as_the_embedded_store(
        groups in proptest::collection::vec((1..4u32, 1..4u32), 2),
        ops in proptest::collection::vec(any_op(), 1..80)
    ) {
        let Some(cluster) = cluster_url() else { return Ok(()) };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let url = fresh_database(&cluster).await;
            check(&url, &groups, &ops).await
        })?;
    }
}

// Proves the calls that look at a group's dead letters (its view, redrive, purge) find
// every one, though brokers hold and restore group states without them: letters made on
// one broker are counted, redriven and purged on the other, and after a restart.
#[test]
fn dead_letters_are_read_by_the_calls_that_look_at_them() {
    let Some(cluster) = cluster_url() else { return };
    let mut ops = vec![Op::Publish(vec![
        b"a".to_vec(),
        b"b".to_vec(),
        b"c".to_vec(),
    ])];
    for _ in 0..3 {
        ops.push(Op::Poll(0, 0));
        ops.push(Op::Nack(
            0,
            0,
            0,
            false,
            NackKind::Reject,
            Some("bad".into()),
        ));
    }
    ops.extend([
        Op::Switch,
        Op::Read(0),
        Op::Redrive(0, 1..2),
        Op::Read(0),
        Op::Restart,
        Op::Purge(0, 0..1),
        Op::Read(0),
        Op::Switch,
        Op::Poll(0, 1),
        Op::Read(0),
    ]);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime
        .block_on(async {
            let url = fresh_database(&cluster).await;
            check(&url, &[(1, 1), (1, 1)], &ops).await
        })
        .unwrap();
}
