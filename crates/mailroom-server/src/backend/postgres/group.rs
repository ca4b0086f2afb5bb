//! One call on a group as one transaction on the group's row: lock the row, take the
//! state from this broker's cache if its version is the row's (else restore it from the
//! stored bytes and dead-letter rows), apply due lease expiries and plan and apply the
//! call with `mailroom::group`, write the new state, version and dead-letter rows
//! (`group_write`), read the payloads handed out, commit. See `docs/scale-out.md`, "Groups".

use std::collections::HashMap;

use bytes::Bytes;
use deadpool_postgres::GenericClient;
use futures_util::future::try_join;
use mailroom::group::{
    key_hash, DeadLetterEntry, DeadLetterNote, DeliveryId, GroupState, SlotPhase, KEYED_WINDOW_SPAN,
};
use mailroom::topic::{Delivery, Message, TopicError};
use mailroom_store::StoreError;

use super::encoding::decode;
use super::group_write::{write_state, Row};
use super::metadata::message_of;
use super::{PgError, Postgres};
use crate::backend::BackendError;

/// A group's state as this broker last saw it committed.
#[derive(Debug, Clone)]
pub(super) struct Cached {
    /// The group's row id: a group deleted and created again gets a new one, so its
    /// versions, which start again at 1, never match the old group's cache.
    pub group_id: i64,
    pub version: i64,
    pub state: GroupState,
    pub clock_ms: u64,
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
    /// Payload sizes of the messages a batch poll may hand out, when asked for.
    pub sizes: HashMap<u64, usize>,
    /// The key hashes of the same messages (`None`: no key), for ordering keys.
    pub keys: HashMap<u64, Option<u64>>,
}

impl Planning {
    /// The planner's view of [`keys`](Self::keys): a message not read counts as one
    /// without a key (every offset the planner asks for was read with the sizes).
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
const LOG_AND_CLOCK: &str = "SELECT next_offset, \
     (extract(epoch FROM clock_timestamp()) * 1000)::bigint, start_offset \
     FROM mailroom_topics WHERE name = $1";
const DEAD_LETTERS: &str = "SELECT \"offset\", attempts, reason, at_ms \
     FROM mailroom_dead_letters WHERE topic_id = $1 AND group_name = $2 ORDER BY seq";
const PAYLOADS: &str = "SELECT \"offset\", payload, published_at_ms, key, headers::text, \
     idempotency_key FROM mailroom_messages \
     WHERE topic_id = $1 AND \"offset\" = ANY($2)";
const SIZES: &str = "SELECT \"offset\", octet_length(payload), key FROM mailroom_messages \
     WHERE topic_id = $1 AND (\"offset\" = ANY($2) OR (\"offset\" >= $3 AND \"offset\" < $4))";

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
    /// `sizes` asks for the payload sizes a batch poll's byte budget needs.
    ///
    /// # Errors
    /// An unknown topic or group; what `plan` fails with (nothing is written then); the
    /// database's errors (503 `store_unavailable` for a lost connection).
    pub(super) async fn group_call<R>(
        &self,
        topic: &str,
        group: &str,
        sizes: bool,
        plan: impl FnOnce(&mut Planning) -> Result<Planned<R>, BackendError>,
    ) -> Result<(R, Vec<Delivery<Message<Bytes>>>), BackendError> {
        let key = (topic.to_owned(), group.to_owned());
        let cached = self.cache.lock().get(&key).cloned();
        let result = self
            .group_transaction(topic, group, cached, sizes, plan)
            .await;
        match result {
            Ok((answer, deliveries, fresh)) => {
                self.cache.lock().insert(key, fresh);
                Ok((answer, deliveries))
            }
            Err(error) => {
                self.cache.lock().remove(&key);
                Err(error)
            }
        }
    }

    async fn group_transaction<R>(
        &self,
        topic: &str,
        group: &str,
        cached: Option<Cached>,
        want_sizes: bool,
        plan: impl FnOnce(&mut Planning) -> Result<Planned<R>, BackendError>,
    ) -> Result<(R, Vec<Delivery<Message<Bytes>>>, Cached), BackendError> {
        let mut client = self.client().await?;
        let transaction = client.transaction().await.map_err(PgError::from)?;
        let (locked, base) = lock(&transaction, topic, group, cached).await?;
        let Locked {
            topic_id,
            group_id,
            version,
            dead_letter_seq,
            log_end,
            log_start,
            db_now_ms,
        } = locked;
        let now_ms = db_now_ms.max(base.clock_ms);
        let mut planning = Planning {
            state: base.state.clone(),
            log_end,
            log_start,
            now_ms,
            sizes: HashMap::new(),
            keys: HashMap::new(),
        };
        if want_sizes {
            (planning.sizes, planning.keys) =
                sizes(&transaction, topic_id, &planning.state, log_end).await?;
        }
        // Every call first expires the leases that ran out, as in the embedded store, so
        // no one observes an expired delivery as owned.
        while let Some(change) = planning.state.plan_expiry(now_ms) {
            apply(&mut planning.state, &change)?;
        }
        let planned = plan(&mut planning)?;
        let state = planning.state;
        let write = async {
            if state == base.state {
                return Ok(None);
            }
            let at = Row {
                topic_id,
                group,
                version,
                dead_letter_seq,
            };
            write_state(&transaction, &at, &base.state, &state, now_ms)
                .await
                .map(Some)
        };
        let (written, deliveries) =
            try_join(write, messages(&transaction, topic_id, &planned.deliveries)).await?;
        transaction.commit().await.map_err(PgError::from)?;
        let fresh = match written {
            Some(()) => Cached {
                group_id,
                version: version + 1,
                state,
                clock_ms: now_ms,
            },
            None => base,
        };
        Ok((planned.answer, deliveries, fresh))
    }
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
}

/// Locks the group's row (the read behind it, in the same pipeline, takes the log's end
/// and the time once the lock is held) and answers what it found with the committed
/// state: `cached` if it is that version of that row, else restored from the database.
async fn lock(
    transaction: &deadpool_postgres::Transaction<'_>,
    topic: &str,
    group: &str,
    cached: Option<Cached>,
) -> Result<(Locked, Cached), BackendError> {
    let (cached_version, cached_group) = cached
        .as_ref()
        .map_or((-1, -1), |cached| (cached.version, cached.group_id));
    let lock = transaction
        .prepare_cached(LOCK_GROUP)
        .await
        .map_err(PgError::from)?;
    let log = transaction
        .prepare_cached(LOG_AND_CLOCK)
        .await
        .map_err(PgError::from)?;
    let (locked, log) = try_join(
        transaction.query_opt(&lock, &[&topic, &group, &cached_version, &cached_group]),
        transaction.query_opt(&log, &[&topic]),
    )
    .await
    .map_err(PgError::from)?;
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
    };
    let stored: Option<Vec<u8>> = locked.get(2);
    let base = match (stored, cached) {
        (None, Some(cached)) => cached,
        (Some(bytes), _) => {
            let at = (found.group_id, found.topic_id, found.version);
            restore(transaction, at, group, &bytes).await?
        }
        (None, None) => {
            return Err(BackendError::Internal(
                "the database withheld a group state this broker does not hold".into(),
            ))
        }
    };
    Ok((found, base))
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

/// Restores the committed state from its bytes and the dead-letter rows.
pub(super) async fn restore(
    client: &impl GenericClient,
    (group_id, topic_id, version): (i64, i64, i64),
    group: &str,
    bytes: &[u8],
) -> Result<Cached, BackendError> {
    let statement = client
        .prepare_cached(DEAD_LETTERS)
        .await
        .map_err(PgError::from)?;
    let rows = client
        .query(&statement, &[&topic_id, &group])
        .await
        .map_err(PgError::from)?;
    let mut entries = Vec::with_capacity(rows.len());
    let mut notes = Vec::with_capacity(rows.len());
    for row in rows {
        entries.push(DeadLetterEntry {
            offset: row.get::<_, i64>(0) as u64,
            attempts: row.get::<_, i32>(1) as u32,
        });
        notes.push(DeadLetterNote {
            reason: row.get(2),
            at_ms: row.get::<_, i64>(3) as u64,
        });
    }
    let damaged = |why: String| BackendError::Internal(format!("group {group:?}: {why}"));
    let stored = decode(bytes, entries, notes).map_err(|error| damaged(error.to_string()))?;
    let state =
        GroupState::from_snapshot(stored.snapshot).map_err(|error| damaged(error.to_string()))?;
    Ok(Cached {
        group_id,
        version,
        state,
        clock_ms: stored.clock_ms,
    })
}

/// The messages of `ids` (payload, publish time, metadata), as deliveries in the same
/// order.
async fn messages(
    client: &impl GenericClient,
    topic_id: i64,
    ids: &[DeliveryId],
) -> Result<Vec<Delivery<Message<Bytes>>>, BackendError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let offsets: Vec<i64> = ids.iter().map(|id| big(id.offset)).collect();
    let statement = client
        .prepare_cached(PAYLOADS)
        .await
        .map_err(PgError::from)?;
    let rows = client
        .query(&statement, &[&topic_id, &offsets])
        .await
        .map_err(PgError::from)?;
    let found: HashMap<u64, Message<Bytes>> = rows
        .iter()
        .map(|row| Ok((row.get::<_, i64>(0) as u64, message_of(row, 1)?)))
        .collect::<Result<_, BackendError>>()?;
    ids.iter()
        .map(|id| {
            let message = found.get(&id.offset).cloned().ok_or_else(|| {
                BackendError::Internal(format!("message {} is missing from the log", id.offset))
            })?;
            Ok(Delivery {
                offset: id.offset,
                attempt: id.attempt,
                message,
            })
        })
        .collect()
}

/// The payload sizes and key hashes of every message a batch poll of `state` may hand
/// out: its slots and the fresh messages of two windows from its position (a window
/// reaches `KEYED_WINDOW_SPAN × W` past the position for keyed messages; acks before the
/// poll, in ack-then-poll, move the position at most past the first window).
async fn sizes(
    client: &impl GenericClient,
    topic_id: i64,
    state: &GroupState,
    log_end: u64,
) -> Result<(HashMap<u64, usize>, HashMap<u64, Option<u64>>), BackendError> {
    let slots: Vec<i64> = state
        .slots()
        .filter(|slot| slot.phase != SlotPhase::Done)
        .map(|slot| big(slot.offset))
        .collect();
    let span = u64::from(state.config().max_in_flight) * u64::from(KEYED_WINDOW_SPAN);
    let from = state.position();
    let to = from.saturating_add(2 * span).min(log_end);
    let statement = client.prepare_cached(SIZES).await.map_err(PgError::from)?;
    let rows = client
        .query(&statement, &[&topic_id, &slots, &big(from), &big(to)])
        .await
        .map_err(PgError::from)?;
    let mut sizes = HashMap::with_capacity(rows.len());
    let mut keys = HashMap::with_capacity(rows.len());
    for row in rows {
        let offset = row.get::<_, i64>(0) as u64;
        sizes.insert(offset, row.get::<_, i32>(1).max(0) as usize);
        let key: Option<&[u8]> = row.get(2);
        keys.insert(offset, key.map(key_hash));
    }
    Ok((sizes, keys))
}
