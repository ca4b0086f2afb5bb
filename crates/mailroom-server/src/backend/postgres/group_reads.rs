//! The group reads: a group's state after due expiries, its detail, its dead letters
//! page by page, the key hashes of its window, and the committed state read without a
//! lock. Each answers as the embedded store's read of the same name.

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use mailroom::group::{key_hash, GroupInfo, GroupState, SlotPhase, KEYED_WINDOW_SPAN};
use mailroom::topic::{DeadLetterInfo, Message};
use mailroom_store::{DeadLetterPage, StoreError, DEAD_LETTERS_PAGE_MAX};

use super::group::{big, unknown_group, unknown_topic, DeadLetters, Planned, Planning};
use super::group_restore::stored_state;
use super::metadata::message_of;
use super::{PgError, Postgres};
use crate::backend::{BackendError, GroupDetail};

/// The key of every message in a window of a topic's log (`window_keys`). Prepared once
/// a connection, as [`COMMITTED_STATE`] is: both run on every wait of a long poll or a
/// consume stream, and planning afresh costs more than running them.
const WINDOW_KEYS: &str = "SELECT m.\"offset\", m.key FROM mailroom_messages m \
     JOIN mailroom_topics t ON m.topic_id = t.id \
     WHERE t.name = $1 AND m.\"offset\" >= $2 AND m.\"offset\" < $3";

/// A group's committed version, its state unless the caller's cached version (`$3` of
/// group row `$4`) is current, and the database's clock (`read_state`). Measured at
/// 160 µs to plan and 25 µs to run.
const COMMITTED_STATE: &str = "SELECT t.id, g.version, \
     CASE WHEN g.version = $3 AND g.id = $4 THEN NULL ELSE g.state END, \
     (extract(epoch FROM clock_timestamp()) * 1000)::bigint \
     FROM mailroom_topics t JOIN mailroom_groups g ON g.topic_id = t.id \
     WHERE t.name = $1 AND g.name = $2";

/// Whether a slot of `state` waits to be delivered again: only then do the keys of the
/// window change what the clock can do (`window_keys`, `due_in_as_seen`).
fn waits_to_be_delivered_again(state: &GroupState) -> bool {
    state
        .slots()
        .any(|slot| matches!(slot.phase, SlotPhase::Ready { .. }))
}

/// A plan that changes nothing and answers the state and the log's end.
fn observe(planning: &mut Planning) -> Result<Planned<(GroupState, u64)>, BackendError> {
    Ok(Planned::answer((planning.state.clone(), planning.log_end)))
}

impl Postgres {
    /// The group's state after due expiries (written if any), for the reads, without its
    /// dead letters (see `group.rs`, `Cached`), and the log's end.
    pub(super) async fn current(
        &self,
        topic: &str,
        group: &str,
    ) -> Result<(GroupState, u64), BackendError> {
        let (answer, _) = self.group_call(topic, group, None, observe).await?;
        Ok(answer)
    }

    /// The group's info after due expiries, which counts its dead letters (their rows,
    /// counted in the same transaction, and any the call's expiries add), for a topic's
    /// view.
    pub(super) async fn current_info(
        &self,
        topic: &str,
        group: &str,
    ) -> Result<GroupInfo, BackendError> {
        let observe_counted = |planning: &mut Planning| {
            let stored = planning.stored_dead_letters.unwrap_or(0);
            let mut info = planning.state.info(group, planning.log_end);
            info.dead_letters += stored;
            Ok(Planned::answer(info))
        };
        self.group_call_with_dead_letters(topic, group, DeadLetters::Counted, observe_counted)
            .await
    }

    pub(super) async fn detail(
        &self,
        topic: &str,
        group: &str,
    ) -> Result<GroupDetail, BackendError> {
        let (state, log_end) = self.current(topic, group).await?;
        let page = self.dead_letter_rows(topic, group, 0, None).await?;
        let mut info = state.info(group, log_end);
        // The page is every dead letter, read after the call above committed (with any
        // its expiries added): the count is the list's, so the two always agree.
        info.dead_letters = page.letters.len() as u64;
        Ok(GroupDetail {
            info,
            config: *state.config(),
            counters: state.counters(),
            in_flight: state.in_flight_details(),
            dead_letters: page
                .letters
                .into_iter()
                .map(|letter| DeadLetterInfo {
                    message: letter.message.payload,
                    offset: letter.offset,
                    attempts: letter.attempts,
                    reason: letter.reason,
                    at_ms: letter.at_ms,
                })
                .collect(),
        })
    }

    pub(super) async fn dead_letters(
        &self,
        topic: &str,
        group: &str,
        from: u64,
        limit: usize,
    ) -> Result<DeadLetterPage<Message<Bytes>>, BackendError> {
        if limit == 0 || limit > DEAD_LETTERS_PAGE_MAX {
            return Err(BackendError::Store(StoreError::InvalidArgument {
                reason: format!("limit must be in 1..={DEAD_LETTERS_PAGE_MAX}, got {limit}"),
            }));
        }
        // Due expiries first, so the page shows what they dead-lettered.
        self.current(topic, group).await?;
        self.dead_letter_rows(topic, group, from, Some(limit)).await
    }

    /// The dead letters from offset `from` (up to `limit`, by offset; all, oldest first,
    /// without a limit) with their messages, as committed.
    async fn dead_letter_rows(
        &self,
        topic: &str,
        group: &str,
        from: u64,
        limit: Option<usize>,
    ) -> Result<DeadLetterPage<Message<Bytes>>, BackendError> {
        let client = self.client().await?;
        let (order, fetch) = match limit {
            Some(limit) => ("d.\"offset\"", big(limit as u64 + 1)),
            None => ("d.seq", i64::MAX),
        };
        let rows = client
            .query(
                &format!(
                    "SELECT d.\"offset\", d.attempts, d.reason, d.at_ms, d.payload, \
                     d.published_at_ms, d.key, d.headers::text, d.idempotency_key \
                     FROM mailroom_dead_letters d JOIN mailroom_topics t ON t.id = d.topic_id \
                     WHERE t.name = $1 AND d.group_name = $2 AND d.\"offset\" >= $3 \
                     ORDER BY {order} LIMIT $4"
                ),
                &[&topic, &group, &big(from), &fetch],
            )
            .await
            .map_err(PgError::from)?;
        let mut letters: Vec<DeadLetterInfo<Message<Bytes>>> = rows
            .iter()
            .map(|row| {
                Ok(DeadLetterInfo {
                    offset: row.get::<_, i64>(0) as u64,
                    attempts: row.get::<_, i32>(1) as u32,
                    reason: row.get(2),
                    at_ms: row.get::<_, i64>(3) as u64,
                    message: message_of(row, 4)?,
                })
            })
            .collect::<Result<_, BackendError>>()?;
        let next = match limit {
            Some(limit) if letters.len() > limit => letters.pop().map(|letter| letter.offset),
            _ => None,
        };
        Ok(DeadLetterPage { letters, next })
    }

    /// The key hashes of the keyed messages in the window `[position, position + 4W)` of
    /// `state`, for a plan that reads no sizes (`next_due_in`); none are read when no slot
    /// is ready, since only a ready slot's key changes what the clock can do.
    pub(super) async fn window_keys(
        &self,
        topic: &str,
        state: &GroupState,
    ) -> Result<HashMap<u64, u64>, BackendError> {
        if !waits_to_be_delivered_again(state) {
            return Ok(HashMap::new());
        }
        let from = state.position();
        let span = u64::from(state.config().max_in_flight) * u64::from(KEYED_WINDOW_SPAN);
        let to = from.saturating_add(span);
        let client = self.client().await?;
        let statement = client
            .prepare_cached(WINDOW_KEYS)
            .await
            .map_err(PgError::from)?;
        let rows = client
            .query(&statement, &[&topic, &big(from), &big(to)])
            .await
            .map_err(PgError::from)?;
        Ok(rows
            .into_iter()
            .filter_map(|row| {
                let key: Option<&[u8]> = row.get(1);
                Some((row.get::<_, i64>(0) as u64, key_hash(key?)))
            })
            .collect())
    }

    /// How long until the group's answer changes by the clock alone, reckoned from the
    /// state this broker's last call on the group left, when that needs no read: the
    /// group is cached and none of its slots waits to be delivered again (whose keys
    /// would have to be read). `None`: read the committed state (`read_state`).
    ///
    /// A waiter asks right after its own poll or settlement, which left the cache as
    /// committed then. A change another broker commits after that wakes the waiter
    /// (`waiting.rs`), whose next poll brings the cache up to date again; so the cache
    /// answers what a read would, without its round trip on every wait.
    pub(super) fn due_in_as_seen(&self, topic: &str, group: &str) -> Option<Option<Duration>> {
        let key = (topic.to_owned(), group.to_owned());
        let cache = self.cache.lock();
        let cached = cache.get(&key)?;
        if waits_to_be_delivered_again(&cached.state) {
            return None;
        }
        let (seen_ms, seen_at) = cached.seen;
        let elapsed_ms = u64::try_from(seen_at.elapsed().as_millis()).unwrap_or(u64::MAX);
        let now_ms = seen_ms.saturating_add(elapsed_ms).max(cached.clock_ms);
        let due_ms = cached.state.next_due_ms_keyed(&mut |_| None);
        Some(due_ms.map(|due_ms| Duration::from_millis(due_ms.saturating_sub(now_ms))))
    }

    /// The committed state of a group, without its dead letters, and the database's
    /// time, read without a lock (from the cache when its version is current).
    pub(super) async fn read_state(
        &self,
        topic: &str,
        group: &str,
    ) -> Result<(GroupState, u64), BackendError> {
        let key = (topic.to_owned(), group.to_owned());
        // The connection first: the pool forgets the cache when it finds one closed.
        let client = self.client().await?;
        let cached = self.cache.lock().get(&key).cloned();
        let (version, group_id) = cached
            .as_ref()
            .map_or((-1, -1), |cached| (cached.version, cached.group_id));
        let statement = client
            .prepare_cached(COMMITTED_STATE)
            .await
            .map_err(PgError::from)?;
        let row = client
            .query_opt(&statement, &[&topic, &group, &version, &group_id])
            .await
            .map_err(PgError::from)?;
        let Some(row) = row else {
            let topic_known = client
                .query_opt("SELECT 1 FROM mailroom_topics WHERE name = $1", &[&topic])
                .await
                .map_err(PgError::from)?;
            return Err(match topic_known {
                Some(_) => unknown_group(group),
                None => unknown_topic(topic),
            });
        };
        let db_now = row.get::<_, i64>(3).max(0) as u64;
        let stored: Option<Vec<u8>> = row.get(2);
        let (state, clock_ms) = match (stored, cached) {
            (None, Some(cached)) => (cached.state, cached.clock_ms),
            (Some(bytes), _) => {
                // Only the timing, the lag and the counters matter to these reads: the
                // dead letters stay in their rows (see `group.rs`, `Cached`).
                stored_state(&bytes).map_err(BackendError::Internal)?
            }
            (None, None) => {
                return Err(BackendError::Internal(
                    "the database withheld a group state this broker does not hold".into(),
                ))
            }
        };
        Ok((state, db_now.max(clock_ms)))
    }
}
