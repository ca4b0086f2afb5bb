//! The write that ends a group call: the new state and version on the group's row, and
//! the dead-letter rows added (each with a copy of its message) and removed, sent in one
//! pipeline, with whatever the call sends behind them (its payload read and `COMMIT`,
//! `txn.rs`).
//!
//! A dead-lettered message missing from the log (the database holds what no broker
//! wrote) fails the insert in the SQL itself, so the transaction is aborted and the
//! `COMMIT` behind it in the pipeline rolls back instead.

use std::collections::HashSet;
use std::future::Future;

use deadpool_postgres::{GenericClient, StatementCache};
use futures_util::future::try_join4;
use mailroom::group::GroupState;
use tokio_postgres::types::ToSql;
use tokio_postgres::Statement;

use super::encoding::encode;
use super::group::big;
use super::schema::topic_partition;
use super::topic_statements::{offset_bounds, prepare_for_topic, under, Plans};
use super::PgError;
use crate::backend::BackendError;

const WRITE_STATE: &str = "UPDATE mailroom_groups SET version = $3, state = $4, \
     dead_letter_seq = $5 WHERE topic_id = $1 AND name = $2";
const DROP_DEAD_LETTERS: &str = "DELETE FROM mailroom_dead_letters \
     WHERE topic_id = $1 AND group_name = $2 AND \"offset\" = ANY($3)";
/// Copies the messages dead-lettered in topic `topic_id` from its partition
/// ([`super::topic_statements`]). The offset column raises (a text that is no bigint) for
/// a message the log lacks: an inner join would just leave it out, and the count check
/// after the insert would come too late for a pipelined COMMIT. `[$8, $9)` bounds the
/// offsets, so that a plan made on a small segment reads no more than their range
/// ([`super::topic_statements`], "Plans made on small segments").
pub(super) fn add_dead_letters(topic_id: i64) -> String {
    format!(
        "INSERT INTO mailroom_dead_letters (topic_id, group_name, \
         \"offset\", seq, attempts, reason, at_ms, published_at_ms, key, headers, \
         idempotency_key, payload) \
         SELECT $1, $2, CASE WHEN m.\"offset\" IS NULL THEN ('mailroom: dead-lettered message ' \
         || d.o || ' is missing from the log')::bigint ELSE d.o END, \
         d.s, d.a, d.r, d.t, m.published_at_ms, m.key, m.headers, m.idempotency_key, m.payload \
         FROM unnest($3::bigint[], $4::bigint[], $5::integer[], $6::text[], $7::bigint[]) \
         AS d(o, s, a, r, t) \
         LEFT JOIN {partition} m ON m.topic_id = $1 AND m.\"offset\" = d.o \
           AND m.\"offset\" >= $8 AND m.\"offset\" < $9",
        partition = topic_partition(topic_id)
    )
}

/// Which group row a write goes to, and what it held when locked.
pub(super) struct Row<'a> {
    pub topic_id: i64,
    pub group: &'a str,
    pub version: i64,
    pub dead_letter_seq: i64,
}

/// Writes `after` over `before`: the state, the next version and the dead letters added
/// and removed (each added one with a copy of its message). `cache`: `client`'s
/// statement cache.
pub(super) async fn write_state(
    client: &impl GenericClient,
    cache: &StatementCache,
    at: &Row<'_>,
    before: &GroupState,
    after: &GroupState,
    now_ms: u64,
) -> Result<(), BackendError> {
    let write = Write::prepare(client, cache, at, before, after, now_ms).await?;
    write
        .send_with(client, at, Plans::Chosen, std::future::ready(Ok(())))
        .await
}

/// A write's statements, prepared, and their parameters.
pub(super) struct Write {
    update: Statement,
    bytes: Vec<u8>,
    next_seq: i64,
    removed: Vec<i64>,
    drop: Option<Statement>,
    added: AddedDeadLetters,
    add: Option<Statement>,
}

impl Write {
    /// The write of `after` over `before`, its statements prepared (once per
    /// connection; `cache` is `client`'s statement cache), so that sending it sends every
    /// statement at once.
    pub(super) async fn prepare(
        client: &impl GenericClient,
        cache: &StatementCache,
        at: &Row<'_>,
        before: &GroupState,
        after: &GroupState,
        now_ms: u64,
    ) -> Result<Write, BackendError> {
        let old: HashSet<u64> = before
            .dead_letters()
            .iter()
            .map(|dead| dead.offset)
            .collect();
        let new: HashSet<u64> = after
            .dead_letters()
            .iter()
            .map(|dead| dead.offset)
            .collect();
        let removed: Vec<i64> = old.difference(&new).map(|&offset| big(offset)).collect();
        let mut added = AddedDeadLetters::default();
        let mut seq = at.dead_letter_seq;
        for (entry, note) in after.dead_letters().iter().zip(after.dead_letter_notes()) {
            if !old.contains(&entry.offset) {
                added.offsets.push(big(entry.offset));
                added.seqs.push(seq);
                added.attempts.push(entry.attempts as i32);
                added.reasons.push(note.reason.clone());
                added.at_ms.push(big(note.at_ms));
                seq += 1;
            }
        }
        let update = client
            .prepare_cached(WRITE_STATE)
            .await
            .map_err(PgError::from)?;
        let drop = prepared_if(client, !removed.is_empty(), DROP_DEAD_LETTERS).await?;
        let add = match added.offsets.is_empty() {
            true => None,
            false => {
                let text = add_dead_letters(at.topic_id);
                let prepared = prepare_for_topic(client, cache, &text).await;
                Some(prepared.map_err(PgError::from)?)
            }
        };
        Ok(Write {
            update,
            bytes: encode(&after.snapshot(), now_ms),
            next_seq: seq,
            removed,
            drop,
            added,
            add,
        })
    }

    /// Sends the write, then `then` (whose statements must already be prepared, so that
    /// its first poll sends them) in the same pipeline; answers what `then` answers once
    /// every statement succeeded. `plans`: how the transaction plans its statements.
    pub(super) async fn send_with<T>(
        &self,
        client: &impl GenericClient,
        at: &Row<'_>,
        plans: Plans,
        then: impl Future<Output = Result<T, tokio_postgres::Error>>,
    ) -> Result<T, BackendError> {
        let next_version = at.version + 1;
        let state_params: [&(dyn ToSql + Sync); 5] = [
            &at.topic_id,
            &at.group,
            &next_version,
            &self.bytes,
            &self.next_seq,
        ];
        let state_write = client.execute(&self.update, &state_params);
        let removal = async {
            match &self.drop {
                Some(statement) => {
                    let params: [&(dyn ToSql + Sync); 3] = [&at.topic_id, &at.group, &self.removed];
                    client.execute(statement, &params).await
                }
                None => Ok(0),
            }
        };
        let added = &self.added;
        let (from, to) = offset_bounds(&added.offsets);
        let addition = async {
            match &self.add {
                Some(statement) => {
                    let params: [&(dyn ToSql + Sync); 9] = [
                        &at.topic_id,
                        &at.group,
                        &added.offsets,
                        &added.seqs,
                        &added.attempts,
                        &added.reasons,
                        &added.at_ms,
                        &from,
                        &to,
                    ];
                    under(plans, client, client.execute(statement, &params)).await
                }
                None => Ok(0),
            }
        };
        let (_, _, inserted, answer) = try_join4(state_write, removal, addition, then)
            .await
            .map_err(PgError::from)?;
        // Unreachable while the insert raises for a missing message; kept so that a
        // change of that SQL cannot make a dead letter vanish unnoticed.
        if inserted != added.offsets.len() as u64 {
            return Err(BackendError::Internal(format!(
                "group {:?}: a dead-lettered message is missing from the log",
                at.group
            )));
        }
        Ok(answer)
    }
}

async fn prepared_if(
    client: &impl GenericClient,
    needed: bool,
    query: &str,
) -> Result<Option<Statement>, BackendError> {
    if !needed {
        return Ok(None);
    }
    let statement = client.prepare_cached(query).await.map_err(PgError::from)?;
    Ok(Some(statement))
}

#[derive(Default)]
struct AddedDeadLetters {
    offsets: Vec<i64>,
    seqs: Vec<i64>,
    attempts: Vec<i32>,
    reasons: Vec<Option<String>>,
    at_ms: Vec<i64>,
}
