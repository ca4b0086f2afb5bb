//! One call on a group as one transaction on the group's row: lock the row, take the
//! state from this broker's cache if its version is the row's (else restore it from the
//! stored bytes and dead-letter rows), apply due lease expiries and plan and apply the
//! call with `mailroom::group`, write the new state, version and dead-letter rows
//! (`group_write`), hand out the messages read, commit. Two round trips when the cache
//! is current: `BEGIN` (with generic plans forced for the transaction: every statement
//! in it reads a topic's own partition or no partitioned table, and planning afresh
//! cost more than running; `topic_statements.rs`), the lock, the log's end and, for a
//! poll, its window's rows in one pipeline (`group_lock`, `group_window`); the writes,
//! the payloads the window's read missed (if any) and `COMMIT` in the other (`txn.rs`).
//! See `docs/scale-out.md`, "Groups".

use std::collections::HashMap;

use bytes::Bytes;
use deadpool_postgres::{GenericClient, Object};
use futures_util::future::try_join;
use mailroom::group::{DeliveryId, GroupState, KeyLookup};
use mailroom::topic::{Delivery, Message, TopicError};
use mailroom_store::StoreError;
use tokio_postgres::types::ToSql;

use super::group_lock::{lock, Locked};
use super::group_restore::{count_dead_letters, put_dead_letters};
use super::group_window::{PollWindow, WindowRead};
use super::group_write::{Row, Write};
use super::metadata::message_of;
use super::schema::topic_partition;
use super::topic_statements::{offset_bounds, prepare_for_topic, Plans};
use super::txn::Open;
use super::waiting::PollRead;
use super::{PgError, Postgres};
use crate::backend::BackendError;

/// A group's state as this broker last saw it committed, without its dead letters.
///
/// The dead letters are rows of their own (`mailroom_dead_letters`), and the state is
/// held and restored without them (`GroupState::take_dead_letters`): a call then costs
/// nothing per dead letter, where a group with a large dead-letter queue paid for every
/// one on each call (20,000 of them made a poll and an ack on one broker 3 times as
/// slow, and across two brokers, where every call restored them, 11 times). Only the
/// calls that look at them read them, inside their transaction
/// ([`Postgres::group_call_with_dead_letters`]).
#[derive(Debug, Clone)]
pub(super) struct Cached {
    /// The group's row id: a group deleted and created again gets a new one, so its
    /// versions, which start again at 1, never match the old group's cache.
    pub group_id: i64,
    /// The group's topic's row id (fixed for a group row's id).
    pub topic_id: i64,
    pub version: i64,
    pub state: GroupState,
    pub clock_ms: u64,
    /// The database's time (ms) at the call that left this, and this broker's clock
    /// then: what a waiter's due time is reckoned from (`next_due_in`).
    pub seen: (u64, std::time::Instant),
}

/// What a call's plan works on: the state (changed in place), the log and the time.
#[derive(Debug)]
pub(super) struct Planning {
    /// The group's state; the plan applies its changes here.
    pub state: GroupState,
    /// The next offset of the topic's log.
    pub log_end: u64,
    /// The oldest retained offset of the topic's log, read with `log_end`.
    pub log_start: u64,
    /// The time of the call (ms), on the group's clock.
    pub now_ms: u64,
    /// Payload sizes of the messages a poll may hand out (none for other calls).
    pub sizes: HashMap<u64, usize>,
    /// The key hashes of those of the same messages that have a key, for ordering keys.
    pub keys: HashMap<u64, u64>,
    /// How many dead letters the group's rows held when the call began, where it counted
    /// them ([`DeadLetters::Counted`]); those the plan adds are in `state`.
    pub stored_dead_letters: Option<u64>,
}

/// What a call does with the group's dead letters, which its state holds none of until
/// it reads them (see [`Cached`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DeadLetters {
    /// Leaves them in their rows: a plan that neither takes nor counts them.
    Left,
    /// Counts their rows ([`Planning::stored_dead_letters`]), for a topic's view, which
    /// shows how many each group has.
    Counted,
    /// Reads them into the state, for a plan that takes them (a redrive, a purge).
    Read,
}

impl Planning {
    /// The planner's view of [`keys`](Self::keys): a message not among them counts as
    /// one without a key (a poll's window read finds every keyed message the planner
    /// may ask for, `group_window`), so none among them means the planner need not ask.
    pub fn key_lookup(keys: &HashMap<u64, u64>) -> ReadKeys<'_> {
        ReadKeys(keys)
    }
}

/// The key hashes a read found, as the planner asks for them.
pub(super) struct ReadKeys<'a>(&'a HashMap<u64, u64>);

impl KeyLookup for ReadKeys<'_> {
    fn key_hash(&mut self, offset: u64) -> Option<u64> {
        self.0.get(&offset).copied()
    }

    fn has_keys(&self) -> bool {
        !self.0.is_empty()
    }
}

/// A plan's answer and the deliveries whose messages the call hands out, in order.
#[derive(Debug)]
pub(super) struct Planned<R> {
    pub answer: R,
    pub deliveries: Vec<DeliveryId>,
}

impl<R> Planned<R> {
    /// An answer that hands out no payload.
    pub fn answer(answer: R) -> Planned<R> {
        Planned {
            answer,
            deliveries: Vec::new(),
        }
    }
}

/// For the deliveries whose rows the window's read did not take whole, in topic
/// `topic_id`'s partition, with its generic plan as every statement of a group call
/// ([`super::topic_statements::BEGIN_GENERIC`]). The offset column raises (a
/// text that is no bigint) for a message the log lacks, so the transaction is aborted
/// and the COMMIT pipelined behind this read rolls back. `[$3, $4)` bounds the offsets,
/// so that a plan made on a small segment reads no more than their range
/// ([`super::topic_statements`], "Plans made on small segments").
pub(super) fn payload_rows(topic_id: i64) -> String {
    format!(
        "SELECT CASE WHEN m.\"offset\" IS NULL THEN ('mailroom: message ' \
         || w.o || ' is missing from the log')::bigint ELSE m.\"offset\" END, \
         m.payload, m.published_at_ms, m.key, m.headers::text, m.idempotency_key \
         FROM unnest($2::bigint[]) AS w(o) \
         LEFT JOIN {partition} m ON m.topic_id = $1 AND m.\"offset\" = w.o \
           AND m.\"offset\" >= $3 AND m.\"offset\" < $4",
        partition = topic_partition(topic_id)
    )
}

pub(super) fn unknown_group(group: &str) -> BackendError {
    BackendError::Store(StoreError::Topic(TopicError::UnknownGroup {
        group: group.to_owned(),
    }))
}

pub(super) fn unknown_topic(topic: &str) -> BackendError {
    BackendError::Store(StoreError::UnknownTopic {
        topic: topic.to_owned(),
    })
}

/// `u64` offsets and times as PostgreSQL's `bigint`; they stay far below `i64::MAX`.
pub(super) fn big(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

impl Postgres {
    /// Runs `plan` on `group` of `topic` as one transaction (see the module docs).
    /// `poll` (a poll's most deliveries) asks for the rows of the poll's window: the
    /// sizes and keys its plan needs, and the messages it will likely hand out.
    ///
    /// # Errors
    /// An unknown topic or group; what `plan` fails with (nothing is written then); the
    /// database's errors (503 `store_unavailable` for a lost connection).
    pub(super) async fn group_call<R>(
        &self,
        topic: &str,
        group: &str,
        poll: Option<PollWindow<'_>>,
        plan: impl FnOnce(&mut Planning) -> Result<Planned<R>, BackendError>,
    ) -> Result<(R, Vec<Delivery<Message<Bytes>>>), BackendError> {
        let (answer, deliveries, _) = self.group_call_read(topic, group, poll, plan).await?;
        Ok((answer, deliveries))
    }

    /// [`group_call`](Self::group_call), answering also what its transaction read that
    /// a wait after a poll is checked against (`waiting.rs`).
    pub(super) async fn group_call_read<R>(
        &self,
        topic: &str,
        group: &str,
        poll: Option<PollWindow<'_>>,
        plan: impl FnOnce(&mut Planning) -> Result<Planned<R>, BackendError>,
    ) -> Result<(R, Vec<Delivery<Message<Bytes>>>, PollRead), BackendError> {
        self.run_call(topic, group, poll, DeadLetters::Left, plan)
            .await
    }

    /// [`group_call`](Self::group_call) of a plan that looks at the group's dead letters:
    /// its transaction counts them or reads them into the state, as `dead_letters` says,
    /// before the plan (see [`Cached`]).
    ///
    /// # Errors
    /// As [`group_call`](Self::group_call).
    pub(super) async fn group_call_with_dead_letters<R>(
        &self,
        topic: &str,
        group: &str,
        dead_letters: DeadLetters,
        plan: impl FnOnce(&mut Planning) -> Result<Planned<R>, BackendError>,
    ) -> Result<R, BackendError> {
        let (answer, _, _) = self
            .run_call(topic, group, None, dead_letters, plan)
            .await?;
        Ok(answer)
    }

    async fn run_call<R>(
        &self,
        topic: &str,
        group: &str,
        poll: Option<PollWindow<'_>>,
        dead_letters: DeadLetters,
        plan: impl FnOnce(&mut Planning) -> Result<Planned<R>, BackendError>,
    ) -> Result<(R, Vec<Delivery<Message<Bytes>>>, PollRead), BackendError> {
        let key = (topic.to_owned(), group.to_owned());
        // The connection first: the pool forgets the cache when it finds one closed.
        let open = Open::new(self.client().await?);
        let cached = self.cache.lock().get(&key).cloned();
        let scope = CallScope {
            topic,
            group,
            poll,
            dead_letters,
        };
        let result = call(open.client(), scope, cached, plan).await;
        open.finish(result.is_ok()).await;
        match result {
            Ok((answer, deliveries, fresh, read)) => {
                self.notifier.marks.observe(topic, read.mark);
                self.cache.lock().insert(key, fresh);
                Ok((answer, deliveries, read))
            }
            Err(error) => {
                self.cache.lock().remove(&key);
                Err(error)
            }
        }
    }
}

/// What a call works on: its group, its poll's window (if a poll), and what it does
/// with the group's dead letters.
struct CallScope<'a> {
    topic: &'a str,
    group: &'a str,
    poll: Option<PollWindow<'a>>,
    dead_letters: DeadLetters,
}

/// The call's transaction on `client`: the first pipeline (`BEGIN`, the lock, the log's
/// end, the window's rows), the plan, the second (the write, the payloads the window's
/// read missed, `COMMIT`).
async fn call<R>(
    client: &Object,
    scope: CallScope<'_>,
    cached: Option<Cached>,
    plan: impl FnOnce(&mut Planning) -> Result<Planned<R>, BackendError>,
) -> Result<(R, Vec<Delivery<Message<Bytes>>>, Cached, PollRead), BackendError> {
    let CallScope {
        topic,
        group,
        poll,
        dead_letters,
    } = scope;
    let (locked, mut base, mut read) = lock(client, topic, group, cached, poll).await?;
    let stored_dead_letters = match dead_letters {
        DeadLetters::Left => None,
        DeadLetters::Counted => Some(count_dead_letters(client, locked.topic_id, group).await?),
        DeadLetters::Read => {
            put_dead_letters(client, locked.topic_id, group, &mut base.state).await?;
            None
        }
    };
    let now_ms = locked.db_now_ms.max(base.clock_ms);
    let mut planning = Planning {
        state: base.state.clone(),
        log_end: locked.log_end,
        log_start: locked.log_start,
        now_ms,
        sizes: std::mem::take(&mut read.sizes),
        keys: std::mem::take(&mut read.keys),
        stored_dead_letters,
    };
    // Every call first expires the leases that ran out, as in the embedded store, so
    // no one observes an expired delivery as owned.
    while let Some(change) = planning.state.plan_expiry(now_ms) {
        apply(&mut planning.state, &change)?;
    }
    let planned = plan(&mut planning)?;
    let state = planning.state;
    let changed = state != base.state;
    let at = Row {
        topic_id: locked.topic_id,
        group,
        version: locked.version,
        dead_letter_seq: locked.dead_letter_seq,
    };
    let write = match changed {
        true => Some(
            Write::prepare(
                client,
                &client.statement_cache,
                &at,
                &base.state,
                &state,
                now_ms,
            )
            .await?,
        ),
        false => None,
    };
    let missed: Vec<i64> = planned
        .deliveries
        .iter()
        .filter(|id| !read.has(id.offset))
        .map(|id| big(id.offset))
        .collect();
    let rows = second_pipeline(client, &at, write.as_ref(), &missed).await?;
    let deliveries = messages(&read, &rows, &planned.deliveries)?;
    let changed = changed.then_some(state);
    let (fresh, read) = committed(&locked, base, changed, now_ms);
    Ok((planned.answer, deliveries, fresh, read))
}

/// What a committed call leaves: the cache's new entry (`changed`: the state written, if
/// any) and what a wait after it is checked against.
fn committed(
    locked: &Locked,
    base: Cached,
    changed: Option<GroupState>,
    now_ms: u64,
) -> (Cached, PollRead) {
    let seen = (now_ms, std::time::Instant::now());
    let version = locked.version + i64::from(changed.is_some());
    let read = PollRead {
        topic_id: locked.topic_id,
        group_id: locked.group_id,
        log_end: locked.log_end,
        version,
        mark: locked.mark,
        at: seen.1,
    };
    let mut fresh = match changed {
        Some(state) => Cached {
            group_id: locked.group_id,
            topic_id: locked.topic_id,
            version,
            state,
            clock_ms: now_ms,
            seen,
        },
        None => Cached { seen, ..base },
    };
    // Written (or read) above; the cache holds the state without them (see `Cached`).
    fresh.state.take_dead_letters();
    (fresh, read)
}

/// Sends the second pipeline: `write` (if the call changed the state), the payloads of
/// the deliveries whose rows the window's read did not take whole (`missed`), and
/// `COMMIT`; answers the payload rows.
async fn second_pipeline(
    client: &Object,
    at: &Row<'_>,
    write: Option<&Write>,
    missed: &[i64],
) -> Result<Vec<tokio_postgres::Row>, BackendError> {
    let payloads = match missed.is_empty() {
        true => None,
        false => {
            let text = payload_rows(at.topic_id);
            let prepared = prepare_for_topic(client, &client.statement_cache, &text).await;
            Some(prepared.map_err(PgError::from)?)
        }
    };
    let reads = async {
        match &payloads {
            Some(statement) => {
                let (from, to) = offset_bounds(missed);
                let params: [&(dyn ToSql + Sync); 4] = [&at.topic_id, &missed, &from, &to];
                client.query(statement, &params).await
            }
            None => Ok(Vec::new()),
        }
    };
    let tail = try_join(reads, client.batch_execute("COMMIT"));
    let (rows, ()) = match write {
        Some(write) => write.send_with(client, at, Plans::Generic, tail).await?,
        None => tail.await.map_err(PgError::from)?,
    };
    Ok(rows)
}

fn apply(state: &mut GroupState, change: &mailroom::group::Change) -> Result<(), BackendError> {
    state.apply_change(change).map_err(|error| {
        BackendError::Internal(format!("a freshly planned change must follow: {error}"))
    })
}

/// Performs a change the plan made, inside a plan.
pub(super) fn apply_planned(
    state: &mut GroupState,
    change: &mailroom::group::Change,
) -> Result<(), BackendError> {
    apply(state, change)
}

/// The messages of `ids` (payload, publish time, metadata) from the window's rows read
/// whole or else the rows `payload_rows` read for them, as deliveries in the same order.
fn messages(
    read: &WindowRead,
    rows: &[tokio_postgres::Row],
    ids: &[DeliveryId],
) -> Result<Vec<Delivery<Message<Bytes>>>, BackendError> {
    let found: HashMap<u64, Message<Bytes>> = rows
        .iter()
        .map(|row| Ok((row.get::<_, i64>(0) as u64, message_of(row, 1)?)))
        .collect::<Result<_, BackendError>>()?;
    ids.iter()
        .map(|id| {
            let message = match read.message(id.offset) {
                Some(message) => message?,
                // Unreachable while `payload_rows` raises for a missing message (before
                // COMMIT) and a message read whole was in the log.
                None => found.get(&id.offset).cloned().ok_or_else(|| {
                    BackendError::Internal(format!("message {} is missing from the log", id.offset))
                })?,
            };
            Ok(Delivery {
                offset: id.offset,
                attempt: id.attempt,
                message,
            })
        })
        .collect()
}
