//! A group's committed state restored from the database: the state's bytes from the
//! group's row and its dead letters from their own rows, for a broker whose cache does
//! not hold the committed version (`group.rs`) and for retention's moving up of groups.

use deadpool_postgres::GenericClient;
use mailroom::group::{DeadLetterEntry, DeadLetterNote, GroupState};

use super::encoding::decode;
use super::group::Cached;
use super::PgError;
use crate::backend::BackendError;

const DEAD_LETTERS: &str = "SELECT \"offset\", attempts, reason, at_ms \
     FROM mailroom_dead_letters WHERE topic_id = $1 AND group_name = $2 ORDER BY seq";
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
        topic_id,
        version,
        state,
        clock_ms: stored.clock_ms,
        seen: (stored.clock_ms, std::time::Instant::now()),
    })
}
