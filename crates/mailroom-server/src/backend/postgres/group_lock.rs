//! The first pipeline of a group call: `BEGIN` (with generic plans forced for the
//! transaction), the lock of the group's row, the log's end and the clock read behind it
//! and, for a poll on a cached state, the guessed read of its window; then the committed
//! state, from this broker's cache or restored, and the window's rows for it. See
//! `group.rs` for the call around it and `docs/scale-out.md`, "Groups".

use deadpool_postgres::{GenericClient, Object};
use futures_util::future::{try_join, try_join4};
use tokio_postgres::error::SqlState;

use super::group::{unknown_group, unknown_topic, Cached};
use super::group_restore::restore;
use super::group_window::{prepare_window, PollWindow, Window, WindowRead};
use super::topic_statements::BEGIN_GENERIC;
use super::waiting::Mark;
use super::PgError;
use crate::backend::BackendError;

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

/// What the locked read of a group's row found.
pub(super) struct Locked {
    pub topic_id: i64,
    pub group_id: i64,
    pub version: i64,
    pub dead_letter_seq: i64,
    pub log_end: u64,
    pub log_start: u64,
    pub db_now_ms: u64,
    /// The topic's waiting mark, read with the log's end.
    pub mark: Mark,
}

/// Begins the transaction and locks the group's row, in one pipeline with the read of
/// the log's end and the time (behind the lock, so as of once it is held) and, for a
/// poll, the rows of the window of the cached state (sent on the guess that the cache is
/// current, as it is unless another broker wrote the group since). Answers what it
/// found, the committed state (`cached` if it is that version of that row, else
/// restored from the database) and the window's rows for that state.
pub(super) async fn lock(
    client: &Object,
    topic: &str,
    group: &str,
    cached: Option<Cached>,
    poll: Option<PollWindow<'_>>,
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
            (restore(at, group, &bytes)?, false)
        }
        (None, None) => {
            return Err(BackendError::Internal(
                "the database withheld a group state this broker does not hold".into(),
            ))
        }
    };
    let read = match poll {
        None => WindowRead::default(),
        Some(poll) => {
            let window = Window::of(&base.state, found.log_end, poll);
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
    poll: Option<PollWindow<'_>>,
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
    poll: Option<PollWindow<'_>>,
) -> Result<Option<(tokio_postgres::Statement, i64, Window)>, tokio_postgres::Error> {
    let (Some(cached), Some(poll)) = (cached, poll) else {
        return Ok(None);
    };
    let statement = prepare_window(client, cached.topic_id).await?;
    let window = Window::of(&cached.state, u64::MAX, poll);
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
