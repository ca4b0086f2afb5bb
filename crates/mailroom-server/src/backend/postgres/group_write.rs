//! The write that ends a group call: the new state and version on the group's row, and
//! the dead-letter rows added (each with a copy of its message) and removed, sent in one
//! pipeline.

use std::collections::HashSet;

use deadpool_postgres::GenericClient;
use mailroom::group::GroupState;

use super::encoding::encode;
use super::group::big;
use super::PgError;
use crate::backend::BackendError;

const WRITE_STATE: &str = "UPDATE mailroom_groups SET version = $3, state = $4, \
     dead_letter_seq = $5 WHERE topic_id = $1 AND name = $2";
const DROP_DEAD_LETTERS: &str = "DELETE FROM mailroom_dead_letters \
     WHERE topic_id = $1 AND group_name = $2 AND \"offset\" = ANY($3)";
const ADD_DEAD_LETTERS: &str = "INSERT INTO mailroom_dead_letters (topic_id, group_name, \
     \"offset\", seq, attempts, reason, at_ms, published_at_ms, key, headers, \
     idempotency_key, payload) \
     SELECT $1, $2, d.o, d.s, d.a, d.r, d.t, m.published_at_ms, m.key, m.headers, \
     m.idempotency_key, m.payload \
     FROM unnest($3::bigint[], $4::bigint[], $5::integer[], $6::text[], $7::bigint[]) \
     AS d(o, s, a, r, t) \
     JOIN mailroom_messages m ON m.topic_id = $1 AND m.\"offset\" = d.o";

/// Which group row a write goes to, and what it held when locked.
pub(super) struct Row<'a> {
    pub topic_id: i64,
    pub group: &'a str,
    pub version: i64,
    pub dead_letter_seq: i64,
}

/// Writes `after` over `before`: the state, the next version and the dead letters added
/// and removed (each added one with a copy of its message).
pub(super) async fn write_state(
    client: &impl GenericClient,
    at: &Row<'_>,
    before: &GroupState,
    after: &GroupState,
    now_ms: u64,
) -> Result<(), BackendError> {
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
    let bytes = encode(&after.snapshot(), now_ms);
    let update = client
        .prepare_cached(WRITE_STATE)
        .await
        .map_err(PgError::from)?;
    let next_version = at.version + 1;
    let state_params: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
        [&at.topic_id, &at.group, &next_version, &bytes, &seq];
    let state_write = client.execute(&update, &state_params);
    let removal = async {
        if removed.is_empty() {
            return Ok(0);
        }
        let statement = client.prepare_cached(DROP_DEAD_LETTERS).await?;
        client
            .execute(&statement, &[&at.topic_id, &at.group, &removed])
            .await
    };
    let addition = async {
        if added.offsets.is_empty() {
            return Ok(0);
        }
        let statement = client.prepare_cached(ADD_DEAD_LETTERS).await?;
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 7] = [
            &at.topic_id,
            &at.group,
            &added.offsets,
            &added.seqs,
            &added.attempts,
            &added.reasons,
            &added.at_ms,
        ];
        client.execute(&statement, &params).await
    };
    let (_, _, inserted) = futures_util::future::try_join3(state_write, removal, addition)
        .await
        .map_err(PgError::from)?;
    if inserted != added.offsets.len() as u64 {
        return Err(BackendError::Internal(format!(
            "group {:?}: a dead-lettered message is missing from the log",
            at.group
        )));
    }
    Ok(())
}

#[derive(Default)]
struct AddedDeadLetters {
    offsets: Vec<i64>,
    seqs: Vec<i64>,
    attempts: Vec<i32>,
    reasons: Vec<Option<String>>,
    at_ms: Vec<i64>,
}
