//! A group's committed state restored from the database: the state from the bytes of
//! the group's row, for a broker whose cache does not hold the committed version
//! (`group.rs`) and for retention's moving up of groups; and its dead letters from their
//! own rows, for the plans that look at them.

use deadpool_postgres::GenericClient;
use mailroom::group::{DeadLetterEntry, DeadLetterNote, GroupState};

use super::encoding::decode;
use super::group::Cached;
use super::PgError;
use crate::backend::BackendError;

const DEAD_LETTER_COUNT: &str =
    "SELECT count(*) FROM mailroom_dead_letters WHERE topic_id = $1 AND group_name = $2";
const DEAD_LETTERS: &str = "SELECT \"offset\", attempts, reason, at_ms \
     FROM mailroom_dead_letters WHERE topic_id = $1 AND group_name = $2 ORDER BY seq";

/// Restores the committed state from its bytes, without its dead letters (they stay in
/// their rows: see [`Cached`]).
pub(super) fn restore(
    (group_id, topic_id, version): (i64, i64, i64),
    group: &str,
    bytes: &[u8],
) -> Result<Cached, BackendError> {
    let (state, clock_ms) = stored_state(bytes)
        .map_err(|why| BackendError::Internal(format!("group {group:?}: {why}")))?;
    Ok(Cached {
        group_id,
        topic_id,
        version,
        state,
        clock_ms,
        seen: (clock_ms, std::time::Instant::now()),
    })
}

/// The state the bytes of a group's row hold, without its dead letters, and the group's
/// clock; or why they do not decode or do not make a valid state.
pub(super) fn stored_state(bytes: &[u8]) -> Result<(GroupState, u64), String> {
    let stored = decode(bytes).map_err(|error| error.to_string())?;
    let state = GroupState::from_snapshot(stored.snapshot).map_err(|error| error.to_string())?;
    Ok((state, stored.clock_ms))
}

/// How many dead letters the group's rows hold, for a view that shows the count and no
/// more: reading them whole to count them cost a view a row each.
///
/// # Errors
/// The database's errors.
pub(super) async fn count_dead_letters(
    client: &impl GenericClient,
    topic_id: i64,
    group: &str,
) -> Result<u64, BackendError> {
    let statement = client
        .prepare_cached(DEAD_LETTER_COUNT)
        .await
        .map_err(PgError::from)?;
    let row = client
        .query_one(&statement, &[&topic_id, &group])
        .await
        .map_err(PgError::from)?;
    Ok(row.get::<_, i64>(0).max(0) as u64)
}

/// Puts the group's committed dead letters, read from their rows, into `state` (which
/// holds none of them: see [`Cached`]), for a plan that looks at them.
///
/// # Errors
/// The database's errors; a state that does not take them back (a fault).
pub(super) async fn put_dead_letters(
    client: &impl GenericClient,
    topic_id: i64,
    group: &str,
    state: &mut GroupState,
) -> Result<(), BackendError> {
    let statement = client
        .prepare_cached(DEAD_LETTERS)
        .await
        .map_err(PgError::from)?;
    let rows = client
        .query(&statement, &[&topic_id, &group])
        .await
        .map_err(PgError::from)?;
    let mut snapshot = state.snapshot();
    snapshot.dead_letters = Vec::with_capacity(rows.len());
    snapshot.dead_letter_notes = Vec::with_capacity(rows.len());
    for row in rows {
        snapshot.dead_letters.push(DeadLetterEntry {
            offset: row.get::<_, i64>(0) as u64,
            attempts: row.get::<_, i32>(1) as u32,
        });
        snapshot.dead_letter_notes.push(DeadLetterNote {
            reason: row.get(2),
            at_ms: row.get::<_, i64>(3) as u64,
        });
    }
    *state = GroupState::from_snapshot(snapshot)
        .map_err(|error| BackendError::Internal(format!("group {group:?}: {error}")))?;
    Ok(())
}
