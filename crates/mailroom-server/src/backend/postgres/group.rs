//! One call on a group as one transaction on the group's row: lock the row, take the
//! state from this broker's cache if its version is the row's (else restore it from the
//! stored bytes and dead-letter rows), apply due lease expiries and plan and apply the
//! call with `mailroom::group`, write the new state, version and dead-letter rows
//! (`group_write`), hand out the messages read, commit. Two round trips when the cache
//! is current: `BEGIN` (with generic plans forced for the transaction: every statement
//! in it reads a topic's own partition or no partitioned table, and planning afresh
//! cost more than running; `topic_statements.rs`), the lock, the log's end and, for a
//! poll, its window's rows
//! (`group_window`) in one pipeline; the writes, the payloads the window's read missed
//! (if any) and `COMMIT` in the other (`txn.rs`). See `docs/scale-out.md`, "Groups".

use std::collections::HashMap;

use bytes::Bytes;
use deadpool_postgres::{GenericClient, Object};
use futures_util::future::{try_join, try_join4};
use mailroom::group::{DeliveryId, GroupState};
use mailroom::topic::{Delivery, Message, TopicError};
use mailroom_store::StoreError;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;

use super::group_restore::restore;
use super::group_window::{prepare_window, Window, WindowRead};
use super::group_write::{Row, Write};
use super::metadata::message_of;
use super::schema::topic_partition;
use super::topic_statements::{prepare_for_topic, Plans, BEGIN_GENERIC};
use super::txn::Open;
use super::waiting::{Mark, PollRead};
use super::{PgError, Postgres};
use crate::backend::BackendError;

/// A group's state as this broker last saw it committed.
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
    /// The key hashes of the same messages (`None`: no key), for ordering keys.
    pub keys: HashMap<u64, Option<u64>>,
}

impl Planning {
    /// The planner's view of [`keys`](Self::keys): a message not read counts as one
    /// without a key (a poll's window read finds every keyed message the planner may
    /// ask for, `group_window`).
    pub fn key_lookup(keys: &HashMap<u64, Option<u64>>) -> impl FnMut(u64) -> Option<u64> + '_ {
        |offset| keys.get(&offset).copied().flatten()
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

const LOCK_GROUP: &str = "SELECT t.id, g.version, \
     CASE WHEN g.version = $3 AND g.id = $4 THEN NULL ELSE g.state END, g.dead_letter_seq, g.id \
     FROM mailroom_topics t JOIN mailroom_groups g ON g.topic_id = t.id \
     WHERE t.name = $1 AND g.name = $2 FOR UPDATE OF g";
// Sent right behind the lock in the same pipeline, so it runs once the lock is held and
// reads the log's end as of then, not as of before the wait.
// With the topic's waiting mark, read behind the group's lock as well (`waiting.rs`).
const LOG_AND_CLOCK: &str = "SELECT next_offset, \
     (extract(epoch FROM clock_timestamp()) * 1000)::bigint, start_offset, \
     waiting_until_ms, waiting_broker \
     FROM mailroom_topics WHERE name = $1";
/// For the deliveries whose rows the window's read did not take whole, in topic
/// `topic_id`'s partition, with its generic plan as every statement of a group call
/// ([`super::topic_statements::BEGIN_GENERIC`]). The offset column raises (a
/// text that is no bigint) for a message the log lacks, so the transaction is aborted
/// and the COMMIT pipelined behind this read rolls back.
fn payload_rows(topic_id: i64) -> String {
    format!(
        "SELECT CASE WHEN m.\"offset\" IS NULL THEN ('mailroom: message ' \
         || w.o || ' is missing from the log')::bigint ELSE m.\"offset\" END, \
         m.payload, m.published_at_ms, m.key, m.headers::text, m.idempotency_key \
         FROM unnest($2::bigint[]) AS w(o) \
         LEFT JOIN {partition} m ON m.topic_id = $1 AND m.\"offset\" = w.o",
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
        poll: Option<usize>,
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
        poll: Option<usize>,
        plan: impl FnOnce(&mut Planning) -> Result<Planned<R>, BackendError>,
    ) -> Result<(R, Vec<Delivery<Message<Bytes>>>, PollRead), BackendError> {
        let key = (topic.to_owned(), group.to_owned());
        let cached = self.cache.lock().get(&key).cloned();
        let open = Open::new(self.client().await?);
        let result = call(open.client(), topic, group, cached, poll, plan).await;
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

/// The call's transaction on `client`: the first pipeline (`BEGIN`, the lock, the log's
/// end, the window's rows), the plan, the second (the write, the payloads the window's
/// read missed, `COMMIT`).
async fn call<R>(
    client: &Object,
    topic: &str,
    group: &str,
    cached: Option<Cached>,
    poll: Option<usize>,
    plan: impl FnOnce(&mut Planning) -> Result<Planned<R>, BackendError>,
) -> Result<(R, Vec<Delivery<Message<Bytes>>>, Cached, PollRead), BackendError> {
    let (locked, base, mut read) = lock(client, topic, group, cached, poll).await?;
    let now_ms = locked.db_now_ms.max(base.clock_ms);
    let mut planning = Planning {
        state: base.state.clone(),
        log_end: locked.log_end,
        log_start: locked.log_start,
        now_ms,
        sizes: std::mem::take(&mut read.sizes),
        keys: std::mem::take(&mut read.keys),
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
    let seen = (now_ms, std::time::Instant::now());
    let version = locked.version + i64::from(changed);
    let read = PollRead {
        topic_id: locked.topic_id,
        group_id: locked.group_id,
        log_end: locked.log_end,
        version,
        mark: locked.mark,
        at: seen.1,
    };
    let fresh = match changed {
        true => Cached {
            group_id: locked.group_id,
            topic_id: locked.topic_id,
            version,
            state,
            clock_ms: now_ms,
            seen,
        },
        false => Cached { seen, ..base },
    };
    Ok((planned.answer, deliveries, fresh, read))
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
                let params: [&(dyn ToSql + Sync); 2] = [&at.topic_id, &missed];
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

/// What the locked read of a group's row found.
struct Locked {
    topic_id: i64,
    group_id: i64,
    version: i64,
    dead_letter_seq: i64,
    log_end: u64,
    log_start: u64,
    db_now_ms: u64,
    /// The topic's waiting mark, read with the log's end.
    mark: Mark,
}

/// Begins the transaction and locks the group's row, in one pipeline with the read of
/// the log's end and the time (behind the lock, so as of once it is held) and, for a
/// poll, the rows of the window of the cached state (sent on the guess that the cache is
/// current, as it is unless another broker wrote the group since). Answers what it
/// found, the committed state (`cached` if it is that version of that row, else
/// restored from the database) and the window's rows for that state.
async fn lock(
    client: &Object,
    topic: &str,
    group: &str,
    cached: Option<Cached>,
    poll: Option<usize>,
) -> Result<(Locked, Cached, WindowRead), BackendError> {
    let (locked, log, guessed, cached) =
        match first_pipeline(client, topic, group, cached.as_ref(), poll).await {
            Ok((locked, log, guessed)) => (locked, log, guessed, cached),
            // The guess read the partition of the cached topic id, which is gone: another
            // broker deleted the topic (and may have made it again) since this one cached
            // the group. The failed read aborted the transaction, and nothing was planned
            // yet: begin again without the cache.
            Err(error) if cached.is_some() && error.code() == Some(&SqlState::UNDEFINED_TABLE) => {
                client
                    .batch_execute("ROLLBACK")
                    .await
                    .map_err(PgError::from)?;
                let (locked, log, guessed) = first_pipeline(client, topic, group, None, poll)
                    .await
                    .map_err(PgError::from)?;
                (locked, log, guessed, None)
            }
            Err(error) => return Err(PgError::from(error).into()),
        };
    let Some(locked) = locked else {
        return Err(match log {
            Some(_) => unknown_group(group),
            None => unknown_topic(topic),
        });
    };
    let log = log.ok_or_else(|| unknown_topic(topic))?;
    let found = Locked {
        topic_id: locked.get(0),
        version: locked.get(1),
        dead_letter_seq: locked.get(3),
        group_id: locked.get(4),
        log_end: log.get::<_, i64>(0) as u64,
        db_now_ms: log.get::<_, i64>(1).max(0) as u64,
        log_start: log.get::<_, i64>(2) as u64,
        mark: Mark::in_row(&log, 3, 4, 1),
    };
    let stored: Option<Vec<u8>> = locked.get(2);
    let (base, hit) = match (stored, cached) {
        (None, Some(cached)) => (cached, true),
        (Some(bytes), _) => {
            let at = (found.group_id, found.topic_id, found.version);
            (restore(client, at, group, &bytes).await?, false)
        }
        (None, None) => {
            return Err(BackendError::Internal(
                "the database withheld a group state this broker does not hold".into(),
            ))
        }
    };
    let read = match poll {
        None => WindowRead::default(),
        Some(max) => {
            let window = Window::of(&base.state, found.log_end, max);
            window_read(client, window, &found, hit.then_some(guessed)).await?
        }
    };
    Ok((found, base, read))
}

/// The rows of a call's first pipeline: `BEGIN`, the locked group row, the topic's log
/// and clock row, and (for a poll on a cached state) the guessed window's rows.
type FirstRows = (
    Option<tokio_postgres::Row>,
    Option<tokio_postgres::Row>,
    Vec<tokio_postgres::Row>,
);

/// Sends the first pipeline (see [`lock`]) with the guess made from `cached`.
async fn first_pipeline(
    client: &Object,
    topic: &str,
    group: &str,
    cached: Option<&Cached>,
    poll: Option<usize>,
) -> Result<FirstRows, tokio_postgres::Error> {
    let (cached_version, cached_group) =
        cached.map_or((-1, -1), |cached| (cached.version, cached.group_id));
    let (lock, log) = try_join(
        client.prepare_cached(LOCK_GROUP),
        client.prepare_cached(LOG_AND_CLOCK),
    )
    .await?;
    let guess = guess(client, cached, poll).await?;
    let guessed = async {
        match &guess {
            Some((statement, topic_id, window)) => window.read(client, statement, *topic_id).await,
            None => Ok(Vec::new()),
        }
    };
    let ((), locked, log, guessed) = try_join4(
        client.batch_execute(BEGIN_GENERIC),
        client.query_opt(&lock, &[&topic, &group, &cached_version, &cached_group]),
        client.query_opt(&log, &[&topic]),
        guessed,
    )
    .await?;
    Ok((locked, log, guessed))
}

/// For a poll on a cached state, the read of that state's window (its statement
/// prepared, the topic's row id, the window not yet trimmed to the log's end).
async fn guess(
    client: &Object,
    cached: Option<&Cached>,
    poll: Option<usize>,
) -> Result<Option<(tokio_postgres::Statement, i64, Window)>, tokio_postgres::Error> {
    let (Some(cached), Some(max)) = (cached, poll) else {
        return Ok(None);
    };
    let statement = prepare_window(client, cached.topic_id).await?;
    let window = Window::of(&cached.state, u64::MAX, max);
    Ok(Some((statement, cached.topic_id, window)))
}

/// The window's rows a poll plans with: from `guessed`, the read sent before the lock
/// answered, when it was made for this state; else read now.
async fn window_read(
    client: &Object,
    window: Window,
    found: &Locked,
    guessed: Option<Vec<tokio_postgres::Row>>,
) -> Result<WindowRead, BackendError> {
    if let Some(rows) = guessed {
        return Ok(window.found(rows));
    }
    let statement = prepare_window(client, found.topic_id)
        .await
        .map_err(PgError::from)?;
    let rows = window
        .read(client, &statement, found.topic_id)
        .await
        .map_err(PgError::from)?;
    Ok(window.found(rows))
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
