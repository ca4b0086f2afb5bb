//! Publishing messages with metadata, and idempotent publish across brokers.
//!
//! A topic's recent idempotency keys are rows of `mailroom_idempotency_keys`, one per
//! (topic, key), holding the offset and publish time of the key's latest stored
//! publish. A publish with keys is one transaction: it locks the topic's row (as every
//! publish does, so publishes of one topic are serialized across brokers), reads the rows
//! of its keys, and decides each message as the embedded store does
//! (`mailroom_store::IdempotencyWindow`): a key whose row is in the window (its offset
//! among the topic's last `messages_max` offsets *and* its time at most `age_ms_max`
//! before the database's now) answers that offset as a duplicate and stores nothing; a
//! key repeated inside the batch is stored once, at its first item; every other message
//! is stored, and its key's row is written (inserted, or replaced when the old one is
//! past the window) in the same transaction. A broker that races another on a key waits
//! for the topic row's lock, then reads the row the other committed: one copy. A
//! broker killed before its commit leaves neither the message nor the key row.
//!
//! The window is the brokers' `--idempotency-window-*` settings, which every broker on
//! one database should share (a broker with a wider window finds more duplicates),
//! under the topic's own limits where it was created with some (`idempotency_messages`,
//! `idempotency_age_ms` of its row, read under the lock: every broker applies them). Rows
//! past the window are deleted by the retention pass (`retention.rs`); a row that is
//! still there but past the window is never taken for a duplicate, so pruning late
//! changes nothing but the table's size.

use std::collections::HashMap;

use deadpool_postgres::Pool;
use futures_util::future::try_join;
use mailroom_store::{IdempotencyWindow, NewMessage, StoreError, Stored, TopicIdempotency};

use super::group::{big, unknown_topic};
use super::metadata::encode;
use super::schema::extend_segments;
use super::topics::own_window;
use super::waiting::{Mark, Marks};
use super::PgError;
use crate::backend::BackendError;

const LOCK_TOPIC: &str = "SELECT id, next_offset, segments_end, \
     (extract(epoch FROM clock_timestamp()) * 1000)::bigint, \
     idempotency_messages, idempotency_age_ms, waiting_until_ms, waiting_broker \
     FROM mailroom_topics WHERE name = $1 FOR UPDATE";
// Sent right behind the lock in the same pipeline: it runs once the lock is held, with
// a snapshot of its own, so it sees the keys of every publish committed before.
const KEYS: &str = "SELECT k.key, k.\"offset\", k.at_ms FROM mailroom_idempotency_keys k \
     JOIN mailroom_topics t ON t.id = k.topic_id WHERE t.name = $1 AND k.key = ANY($2)";
const INSERT: &str = "INSERT INTO mailroom_messages (topic_id, \"offset\", published_at_ms, \
     key, headers, idempotency_key, payload) \
     SELECT $1, $2 + n - 1, $3, k, h::jsonb, i, p \
     FROM unnest($4::bytea[], $5::text[], $6::text[], $7::bytea[]) WITH ORDINALITY AS m(k, h, i, p, n)";
const NOTE_KEYS: &str = "INSERT INTO mailroom_idempotency_keys (topic_id, key, \"offset\", at_ms) \
     SELECT $1, k, o, $4 FROM unnest($2::text[], $3::bigint[]) AS u(k, o) \
     ON CONFLICT (topic_id, key) DO UPDATE SET \"offset\" = excluded.\"offset\", at_ms = excluded.at_ms";

/// How one message of a publish is answered.
enum Plan {
    /// A duplicate of the publish at this offset, in the window.
    Seen(u64),
    /// The n-th message written by this publish; `true` if it repeats an earlier item's key.
    Written(usize, bool),
}

/// The topic as its locked row says.
struct LockedTopic {
    id: i64,
    end: u64,
    segments_end: u64,
    now_ms: u64,
    /// The topic's own idempotency window, read under its lock.
    own_window: TopicIdempotency,
    /// The topic's waiting mark, read under its lock (`waiting.rs`).
    mark: Mark,
}

/// Publishes `messages` (metadata checked here) to `topic` in one transaction; with
/// `window`, idempotently (see the module docs), else every message is stored.
///
/// # Errors
/// Metadata out of its limits (400, nothing stored); an unknown topic; the database's
/// errors (503 `store_unavailable` for a lost connection: nothing was confirmed).
pub(super) async fn append_messages(
    pool: &Pool,
    marks: &Marks,
    topic: &str,
    messages: &[NewMessage],
    window: Option<IdempotencyWindow>,
) -> Result<Vec<Stored>, BackendError> {
    checked(messages)?;
    let keys: Vec<&str> = match window {
        Some(_) => messages
            .iter()
            .filter_map(|message| message.metadata.idempotency_key.as_deref())
            .collect(),
        None => Vec::new(),
    };
    let mut client = pool.get().await.map_err(PgError::from)?;
    let transaction = client.transaction().await.map_err(PgError::from)?;
    let (locked, seen) = lock_topic(&transaction, topic, &keys).await?;
    let seen = match window {
        // The brokers' default, under the topic's own limits where it has them.
        Some(window) => in_window(seen, &locked.own_window.resolve(window), &locked),
        None => HashMap::new(),
    };
    let (plans, written) = plan(messages, &seen, window.is_some());
    let first = locked.end;
    if !written.is_empty() {
        write(&transaction, &locked, &written, window.is_some()).await?;
    }
    transaction.commit().await.map_err(PgError::from)?;
    marks.observe(topic, locked.mark);
    Ok(plans
        .into_iter()
        .map(|plan| match plan {
            Plan::Seen(offset) => Stored {
                offset,
                duplicate: true,
            },
            Plan::Written(n, duplicate) => Stored {
                offset: first + n as u64,
                duplicate,
            },
        })
        .collect())
}

/// Checks every message's metadata against its limits: a 400, nothing stored.
pub(super) fn checked(messages: &[NewMessage]) -> Result<(), BackendError> {
    for message in messages {
        message
            .metadata
            .check()
            .map_err(|error| StoreError::Topic(error.into()))?;
    }
    Ok(())
}

/// Locks the topic's row and reads the rows of `keys` (skipped when there are none).
async fn lock_topic(
    transaction: &deadpool_postgres::Transaction<'_>,
    topic: &str,
    keys: &[&str],
) -> Result<(LockedTopic, Vec<(String, u64, u64)>), BackendError> {
    let lock = transaction
        .prepare_cached(LOCK_TOPIC)
        .await
        .map_err(PgError::from)?;
    let read_keys = async {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let statement = transaction.prepare_cached(KEYS).await?;
        transaction.query(&statement, &[&topic, &keys]).await
    };
    let (row, rows) = try_join(transaction.query_opt(&lock, &[&topic]), read_keys)
        .await
        .map_err(PgError::from)?;
    let row = row.ok_or_else(|| unknown_topic(topic))?;
    let locked = LockedTopic {
        id: row.get(0),
        end: row.get::<_, i64>(1) as u64,
        segments_end: row.get::<_, i64>(2) as u64,
        now_ms: row.get::<_, i64>(3).max(0) as u64,
        own_window: own_window(row.get(4), row.get(5)),
        mark: Mark::in_row(&row, 6, 7, 3),
    };
    let seen = rows
        .into_iter()
        .map(|row| {
            (
                row.get::<_, String>(0),
                row.get::<_, i64>(1) as u64,
                row.get::<_, i64>(2).max(0) as u64,
            )
        })
        .collect();
    Ok((locked, seen))
}

/// The keys of `seen` whose publish is in `window` as of the locked topic: the same rule
/// as the embedded store's `KeysSeen::forget_old`.
fn in_window(
    seen: Vec<(String, u64, u64)>,
    window: &IdempotencyWindow,
    topic: &LockedTopic,
) -> HashMap<String, u64> {
    let lowest = topic.end.saturating_sub(window.messages_max);
    let oldest_ms = topic.now_ms.saturating_sub(window.age_ms_max);
    seen.into_iter()
        .filter(|&(_, offset, at_ms)| offset >= lowest && at_ms >= oldest_ms)
        .map(|(key, offset, _)| (key, offset))
        .collect()
}

/// Each message's answer, and the messages to write, in order.
fn plan<'a>(
    messages: &'a [NewMessage],
    seen: &HashMap<String, u64>,
    once: bool,
) -> (Vec<Plan>, Vec<&'a NewMessage>) {
    let mut plans = Vec::with_capacity(messages.len());
    let mut in_batch: HashMap<&str, usize> = HashMap::new();
    let mut written = Vec::with_capacity(messages.len());
    for message in messages {
        let key = once
            .then_some(message.metadata.idempotency_key.as_deref())
            .flatten();
        if let Some(&offset) = key.and_then(|key| seen.get(key)) {
            plans.push(Plan::Seen(offset));
        } else if let Some(&n) = key.and_then(|key| in_batch.get(key)) {
            plans.push(Plan::Written(n, true));
        } else {
            if let Some(key) = key {
                in_batch.insert(key, written.len());
            }
            plans.push(Plan::Written(written.len(), false));
            written.push(message);
        }
    }
    (plans, written)
}

/// Takes the offsets of `written`, makes their segments, and inserts them with their
/// metadata (and, publishing `once`, their keys' rows), under the topic row's lock.
async fn write(
    transaction: &deadpool_postgres::Transaction<'_>,
    topic: &LockedTopic,
    written: &[&NewMessage],
    once: bool,
) -> Result<(), BackendError> {
    let count = written.len() as i64;
    let bytes: i64 = written.iter().map(|m| m.payload.len() as i64).sum();
    let end = topic.end + written.len() as u64;
    let mut statements = extend_segments(topic.id, topic.segments_end, end);
    if !statements.is_empty() {
        statements.push(';');
    }
    statements.push_str(&format!(
        "UPDATE mailroom_topics SET next_offset = next_offset + {count}, \
         bytes = bytes + {bytes} WHERE id = {}",
        topic.id
    ));
    // The offsets first, so the rows below find their segments.
    transaction
        .batch_execute(&statements)
        .await
        .map_err(PgError::from)?;
    let noting_keys = once;
    let mut columns = Columns::default();
    for (n, message) in written.iter().enumerate() {
        let (key, headers, once) = encode(&message.metadata);
        if let Some(once) = once.as_ref().filter(|_| noting_keys) {
            columns.noted_keys.push(once.clone());
            columns.noted_offsets.push(big(topic.end + n as u64));
        }
        columns.keys.push(key);
        columns.headers.push(headers);
        columns.onces.push(once);
        columns.payloads.push(message.payload.as_ref());
    }
    let now = big(topic.now_ms);
    let insert = transaction
        .prepare_cached(INSERT)
        .await
        .map_err(PgError::from)?;
    let first = big(topic.end);
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 7] = [
        &topic.id,
        &first,
        &now,
        &columns.keys,
        &columns.headers,
        &columns.onces,
        &columns.payloads,
    ];
    let inserting = transaction.execute(&insert, &params);
    let noting = async {
        if columns.noted_keys.is_empty() {
            return Ok(0);
        }
        let statement = transaction.prepare_cached(NOTE_KEYS).await?;
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
            [&topic.id, &columns.noted_keys, &columns.noted_offsets, &now];
        transaction.execute(&statement, &params).await
    };
    try_join(inserting, noting).await.map_err(PgError::from)?;
    Ok(())
}

/// The column arrays of one insert.
#[derive(Default)]
struct Columns<'a> {
    keys: Vec<Option<Vec<u8>>>,
    headers: Vec<Option<String>>,
    onces: Vec<Option<String>>,
    payloads: Vec<&'a [u8]>,
    noted_keys: Vec<String>,
    noted_offsets: Vec<i64>,
}
