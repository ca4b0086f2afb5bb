//! Retention on this backend: each topic's own limits (columns of its row, over the
//! brokers' defaults), and the pass that removes what they allow.
//!
//! The limits are the embedded store's (`mailroom_store::Retention`), applied per
//! message rather than per segment file: the pass finds the lowest offset the limits keep
//! (the messages past `messages_max` from the end, those published more than `age_ms_max`
//! ago, and the oldest while the retained payload bytes exceed `bytes_max`), lowers it to
//! the lowest message a group has not finished when the topic keeps unconsumed messages
//! (the default), and makes it the topic's `start_offset`. With `keep_unconsumed` off,
//! each group left below moves up to the new start in the same transaction
//! (`GroupState::skip_to`, which drops its deliveries of removed messages), as the
//! embedded store's groups do at their next poll. A message redriven from the dead
//! letters is never removed while it is unfinished: its dead letter's copy was given up
//! when it was redriven, so the log's row is its only copy.
//!
//! Removing is two steps. First one transaction, under the topic's row lock and every
//! group's row lock (taken in that order, as a topic's deletion takes them), moves the
//! start and the groups; from its commit no call reads below the start. Then a second
//! transaction drops every segment table wholly below the start and deletes the rows
//! below it in the segment that holds it: whole segments go as tables (no dead rows, no
//! vacuum), and only the one boundary segment is deleted from row by row until it too
//! is dropped. The second step is idempotent, so a pass that stopped in between is
//! finished by the next one. Both take `lock_timeout` (a pass waits briefly for a lock
//! or gives up until the next pass, rather than queue every publish behind it), and a
//! per-topic advisory lock: brokers run passes on their own timers, and a topic being
//! passed by one broker is skipped by the others.

use mailroom::group::GroupState;
use mailroom_store::{Limit, Retention, RetentionRemoved, TopicRetention};
use tokio_postgres::Row as PgRow;

use super::group::{big, unknown_topic};
use super::group_restore::restore;
use super::group_write::{write_state, Row};
use super::schema::{topic_partition, SEGMENT_OFFSETS};
use super::{PgError, Postgres};
use crate::backend::{BackendError, RetentionChange, RetentionPass, RetentionState};

/// The columns of a topic's row that [`Postgres::retention_state`] reads, in order.
pub(super) const RETENTION_COLUMNS: &str = "t.retention_age_ms, t.retention_bytes, \
     t.retention_messages, t.keep_unconsumed, t.bytes, t.removed_segments, t.removed_bytes, \
     t.removed_messages";

/// The advisory lock class of retention passes: the pair (class, topic id) names one
/// topic's pass ("mrrt" in ASCII).
const RETENTION_LOCK: i32 = 0x6d72_7274;
/// The advisory lock class of pruning idempotency keys (a second key of the class).
const PRUNE_LOCK: i32 = -1;
/// How long a pass waits for a lock before it leaves the topic to the next pass.
const PASS_LOCK_TIMEOUT_MS: u64 = 2_000;

const NOW_MS: &str = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint";

/// A limit as its column: `NULL` follows the default, -1 is unlimited.
fn limit_column(limit: Limit) -> Option<i64> {
    match limit {
        Limit::Default => None,
        Limit::Unlimited => Some(-1),
        Limit::Max(max) => Some(big(max)),
    }
}

fn limit_of(column: Option<i64>) -> Limit {
    match column {
        None => Limit::Default,
        Some(max) if max < 0 => Limit::Unlimited,
        Some(max) => Limit::Max(max as u64),
    }
}

/// The columns of `retention`'s limits: age, bytes, messages.
pub(super) fn limit_columns(retention: &TopicRetention) -> [Option<i64>; 3] {
    [
        limit_column(retention.age_ms_max),
        limit_column(retention.bytes_max),
        limit_column(retention.messages_max),
    ]
}

/// The topic's own retention, from the row's first four [`RETENTION_COLUMNS`] at `first`.
fn own_retention(row: &PgRow, first: usize) -> TopicRetention {
    TopicRetention {
        age_ms_max: limit_of(row.get(first)),
        bytes_max: limit_of(row.get(first + 1)),
        messages_max: limit_of(row.get(first + 2)),
        keep_unconsumed: row.get(first + 3),
    }
}

/// What one topic's pass found to remove.
struct Cut {
    topic_id: i64,
    start: u64,
    /// The lowest offset the limits keep (before any group's floor).
    keep_from: u64,
    keep_unconsumed: bool,
}

impl Postgres {
    /// The topic's retention as its view shows it, from [`RETENTION_COLUMNS`] at `first`.
    pub(super) fn retention_state(&self, row: &PgRow, first: usize) -> RetentionState {
        RetentionState {
            in_force: own_retention(row, first).resolve(&self.options.retention),
            bytes: row.get::<_, i64>(first + 4).max(0) as u64,
            removed: RetentionRemoved {
                segments: row.get::<_, i64>(first + 5) as u64,
                bytes: row.get::<_, i64>(first + 6) as u64,
                messages: row.get::<_, i64>(first + 7) as u64,
            },
        }
    }

    /// Changes `topic`'s own limits by `change`, under its row's lock.
    pub(super) async fn change_retention_row(
        &self,
        topic: &str,
        change: RetentionChange,
    ) -> Result<(), BackendError> {
        let mut client = self.client().await?;
        let transaction = client.transaction().await.map_err(PgError::from)?;
        let row = transaction
            .query_opt(
                "SELECT retention_age_ms, retention_bytes, retention_messages, keep_unconsumed \
                 FROM mailroom_topics WHERE name = $1 FOR UPDATE",
                &[&topic],
            )
            .await
            .map_err(PgError::from)?
            .ok_or_else(|| unknown_topic(topic))?;
        let mut retention = own_retention(&row, 0);
        change.apply(&mut retention);
        let [age, bytes, count] = limit_columns(&retention);
        transaction
            .execute(
                "UPDATE mailroom_topics SET retention_age_ms = $2, retention_bytes = $3, \
                 retention_messages = $4, keep_unconsumed = $5 WHERE name = $1",
                &[&topic, &age, &bytes, &count, &retention.keep_unconsumed],
            )
            .await
            .map_err(PgError::from)?;
        transaction.commit().await.map_err(PgError::from)?;
        Ok(())
    }

    /// One retention pass over every topic (see the module docs), and the pruning of
    /// idempotency keys past the window.
    pub(super) async fn retention_pass(&self) -> Result<RetentionPass, BackendError> {
        let client = self.client().await?;
        let topics = client
            .query("SELECT id, name FROM mailroom_topics ORDER BY name", &[])
            .await
            .map_err(PgError::from)?;
        drop(client);
        let mut pass = RetentionPass::default();
        for row in topics {
            let (topic_id, name): (i64, String) = (row.get(0), row.get(1));
            match self.enforce_topic(topic_id).await {
                Ok(removed) if removed.messages > 0 || removed.segments > 0 => {
                    pass.removed.push((name, removed))
                }
                Ok(_) => {}
                Err(error) => pass.failed.push((name, error.to_string())),
            }
        }
        self.prune_keys().await?;
        Ok(pass)
    }

    /// Applies `topic_id`'s retention: moves its start, then removes what lies below it.
    async fn enforce_topic(&self, topic_id: i64) -> Result<RetentionRemoved, BackendError> {
        let mut removed = RetentionRemoved::default();
        if let Some(cut) = self.cut_of(topic_id).await? {
            if cut.keep_from > cut.start {
                removed = self.move_start(&cut).await?;
            }
        }
        removed.segments += self.remove_below_start(topic_id).await?;
        if removed.segments > 0 {
            let client = self.client().await?;
            client
                .execute(
                    "UPDATE mailroom_topics SET removed_segments = removed_segments + $2 \
                     WHERE id = $1",
                    &[&topic_id, &big(removed.segments)],
                )
                .await
                .map_err(PgError::from)?;
        }
        Ok(removed)
    }

    /// The lowest offset `topic_id`'s limits keep, read without locks: the log only grows
    /// at its end meanwhile, which can only raise it, so a cut read early is a safe one.
    async fn cut_of(&self, topic_id: i64) -> Result<Option<Cut>, BackendError> {
        let client = self.client().await?;
        // Prepared once per connection, as the pass's other statements run for every
        // topic: a statement sent as text is parsed and planned on every call.
        let statement = client
            .prepare_cached(&format!(
                "SELECT t.start_offset, t.next_offset, {NOW_MS}, {RETENTION_COLUMNS} \
                 FROM mailroom_topics t WHERE t.id = $1"
            ))
            .await
            .map_err(PgError::from)?;
        let Some(row) = client
            .query_opt(&statement, &[&topic_id])
            .await
            .map_err(PgError::from)?
        else {
            return Ok(None);
        };
        let (start, end) = (row.get::<_, i64>(0) as u64, row.get::<_, i64>(1) as u64);
        let now_ms = row.get::<_, i64>(2).max(0) as u64;
        let retention: Retention = self.retention_state(&row, 3).in_force;
        let bytes = row.get::<_, i64>(7).max(0) as u64;
        let mut keep_from = start;
        if let Some(max) = retention.messages_max {
            keep_from = keep_from.max(end.saturating_sub(max));
        }
        if let Some(max) = retention.age_ms_max {
            let young = client
                .query_opt(
                    "SELECT \"offset\" FROM mailroom_messages WHERE topic_id = $1 \
                     AND \"offset\" >= $2 AND published_at_ms >= $3 ORDER BY \"offset\" LIMIT 1",
                    &[&topic_id, &big(start), &big(now_ms.saturating_sub(max))],
                )
                .await
                .map_err(PgError::from)?;
            let first_young = young.map_or(end, |row| row.get::<_, i64>(0) as u64);
            keep_from = keep_from.max(first_young);
        }
        if let Some(max) = retention.bytes_max.filter(|&max| bytes > max) {
            // The shortest prefix of the retained log whose payloads reach the excess.
            let excess = big(bytes - max);
            let last = client
                .query_opt(
                    "SELECT o FROM (SELECT \"offset\" AS o, sum(octet_length(payload)) \
                     OVER (ORDER BY \"offset\") AS s FROM mailroom_messages \
                     WHERE topic_id = $1 AND \"offset\" >= $2) x WHERE s >= $3 ORDER BY o LIMIT 1",
                    &[&topic_id, &big(start), &excess],
                )
                .await
                .map_err(PgError::from)?;
            let past = last.map_or(end, |row| row.get::<_, i64>(0) as u64 + 1);
            keep_from = keep_from.max(past);
        }
        Ok(Some(Cut {
            topic_id,
            start,
            keep_from: keep_from.min(end),
            keep_unconsumed: retention.keep_unconsumed,
        }))
    }
}

/// The lowest message `state` still needs from the log: a redriven one below its
/// position, or its position.
fn needed_from(state: &GroupState) -> u64 {
    state
        .slots()
        .map(|slot| slot.offset)
        .min()
        .map_or(state.position(), |lowest| lowest.min(state.position()))
}

/// The lowest redriven message of `state`, which has no copy but the log's.
fn redriven_from(state: &GroupState) -> Option<u64> {
    state
        .slots()
        .map(|slot| slot.offset)
        .filter(|&offset| offset < state.position())
        .min()
}

impl Postgres {
    /// Moves the topic's start up to `cut.keep_from` (or less, per its groups), moving
    /// groups left below when the topic does not keep unconsumed messages. Answers the
    /// messages and bytes that left the retained log.
    async fn move_start(&self, cut: &Cut) -> Result<RetentionRemoved, BackendError> {
        let mut client = self.client().await?;
        let transaction = client.transaction().await.map_err(PgError::from)?;
        if !pass_locks(&transaction, cut.topic_id).await? {
            return Ok(RetentionRemoved::default());
        }
        let topic = transaction
            .query_opt(
                &format!(
                    "SELECT start_offset, {NOW_MS} FROM mailroom_topics WHERE id = $1 FOR UPDATE"
                ),
                &[&cut.topic_id],
            )
            .await
            .map_err(PgError::from)?;
        let Some(topic) = topic else {
            return Ok(RetentionRemoved::default());
        };
        let start = topic.get::<_, i64>(0) as u64;
        let db_now_ms = topic.get::<_, i64>(1).max(0) as u64;
        let groups = transaction
            .query(
                "SELECT name, id, version, state, dead_letter_seq FROM mailroom_groups \
                 WHERE topic_id = $1 ORDER BY name FOR UPDATE",
                &[&cut.topic_id],
            )
            .await
            .map_err(PgError::from)?;
        let mut restored = Vec::with_capacity(groups.len());
        let mut new_start = cut.keep_from;
        for row in &groups {
            let name: String = row.get(0);
            let at = (row.get::<_, i64>(1), cut.topic_id, row.get::<_, i64>(2));
            let cached = restore(at, &name, &row.get::<_, Vec<u8>>(3))?;
            let floor = if cut.keep_unconsumed {
                Some(needed_from(&cached.state))
            } else {
                redriven_from(&cached.state)
            };
            new_start = floor.map_or(new_start, |floor| new_start.min(floor));
            restored.push((name, row.get::<_, i64>(4), cached));
        }
        if new_start <= start {
            return Ok(RetentionRemoved::default());
        }
        for (name, dead_letter_seq, cached) in &restored {
            if cached.state.position() >= new_start {
                continue;
            }
            let mut state = cached.state.clone();
            state.skip_to(new_start).map_err(|error| {
                BackendError::Internal(format!("group {name:?}: moving up: {error}"))
            })?;
            let at = Row {
                topic_id: cut.topic_id,
                group: name,
                version: cached.version,
                dead_letter_seq: *dead_letter_seq,
            };
            let now_ms = db_now_ms.max(cached.clock_ms);
            write_state(
                &transaction,
                &transaction.statement_cache,
                &at,
                &cached.state,
                &state,
                now_ms,
            )
            .await?;
        }
        let row = transaction
            .query_one(
                "WITH gone AS (SELECT coalesce(sum(octet_length(payload)), 0)::bigint AS b \
                 FROM mailroom_messages WHERE topic_id = $1 AND \"offset\" >= $2 AND \"offset\" < $3) \
                 UPDATE mailroom_topics SET start_offset = $3, bytes = bytes - gone.b, \
                 removed_bytes = removed_bytes + gone.b, removed_messages = removed_messages + ($3 - $2) \
                 FROM gone WHERE id = $1 RETURNING gone.b",
                &[&cut.topic_id, &big(start), &big(new_start)],
            )
            .await
            .map_err(PgError::from)?;
        transaction.commit().await.map_err(PgError::from)?;
        let mut cache = self.cache.lock();
        cache.retain(|_, cached| {
            !restored
                .iter()
                .any(|(_, _, r)| r.group_id == cached.group_id)
        });
        Ok(RetentionRemoved {
            segments: 0,
            bytes: row.get::<_, i64>(0).max(0) as u64,
            messages: new_start - start,
        })
    }

    /// Drops the topic's segment tables wholly below its start and deletes the rows below
    /// it in the segment holding it; answers how many segments were dropped.
    async fn remove_below_start(&self, topic_id: i64) -> Result<u64, BackendError> {
        let mut client = self.client().await?;
        let transaction = client.transaction().await.map_err(PgError::from)?;
        if !pass_locks(&transaction, topic_id).await? {
            return Ok(0);
        }
        let parent = topic_partition(topic_id);
        let segments = transaction
            .prepare_cached(
                "SELECT t.start_offset, c.relname FROM mailroom_topics t, pg_inherits i \
                 JOIN pg_class c ON c.oid = i.inhrelid \
                 WHERE t.id = $1 AND i.inhparent = to_regclass($2)",
            )
            .await
            .map_err(PgError::from)?;
        let rows = transaction
            .query(&segments, &[&topic_id, &parent])
            .await
            .map_err(PgError::from)?;
        let mut statements = String::new();
        let mut dropped = 0;
        for row in &rows {
            let start = row.get::<_, i64>(0) as u64;
            let table: String = row.get(1);
            let Some(segment) = table
                .strip_prefix(&format!("{parent}_"))
                .and_then(|n| n.parse::<u64>().ok())
            else {
                continue;
            };
            if (segment + 1) * SEGMENT_OFFSETS <= start {
                statements.push_str(&format!("DROP TABLE {table};\n"));
                dropped += 1;
            } else if segment * SEGMENT_OFFSETS < start {
                statements.push_str(&format!(
                    "DELETE FROM {table} WHERE \"offset\" < {start};\n"
                ));
            }
        }
        if !statements.is_empty() {
            transaction
                .batch_execute(&statements)
                .await
                .map_err(PgError::from)?;
        }
        transaction.commit().await.map_err(PgError::from)?;
        Ok(dropped)
    }

    /// Deletes the idempotency keys past each topic's window (by count and by age: its
    /// own limits, else this broker's default), in one statement, by one broker at a
    /// time.
    async fn prune_keys(&self) -> Result<(), BackendError> {
        let window = self.options.idempotency;
        let mut client = self.client().await?;
        let transaction = client.transaction().await.map_err(PgError::from)?;
        if !pass_locks(&transaction, i64::from(PRUNE_LOCK)).await? {
            return Ok(());
        }
        transaction
            .execute(
                &format!(
                    "DELETE FROM mailroom_idempotency_keys k USING mailroom_topics t \
                     WHERE k.topic_id = t.id \
                     AND (k.\"offset\" < t.next_offset - coalesce(t.idempotency_messages, $1) \
                     OR k.at_ms < {NOW_MS} - coalesce(t.idempotency_age_ms, $2))"
                ),
                &[&big(window.messages_max), &big(window.age_ms_max)],
            )
            .await
            .map_err(PgError::from)?;
        transaction.commit().await.map_err(PgError::from)?;
        Ok(())
    }
}

/// Sets the pass's lock timeout and takes its advisory lock on `key` for the
/// transaction; `false` if another broker holds it.
async fn pass_locks(
    transaction: &deadpool_postgres::Transaction<'_>,
    key: i64,
) -> Result<bool, BackendError> {
    transaction
        .batch_execute(&format!("SET LOCAL lock_timeout = {PASS_LOCK_TIMEOUT_MS}"))
        .await
        .map_err(PgError::from)?;
    // The two-key form keeps these locks apart from the migration's one-key lock.
    let try_lock = transaction
        .prepare_cached("SELECT pg_try_advisory_xact_lock($1, $2)")
        .await
        .map_err(PgError::from)?;
    let row = transaction
        .query_one(&try_lock, &[&RETENTION_LOCK, &(key as i32)])
        .await
        .map_err(PgError::from)?;
    Ok(row.get(0))
}
