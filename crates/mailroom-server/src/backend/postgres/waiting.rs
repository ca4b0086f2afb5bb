//! Whether any other broker has a long poll waiting on a topic: the *waiting mark* on the
//! topic's row (`waiting_until_ms`, `waiting_broker`), so that a write notifies the other
//! brokers (`notify.rs`) only while one of them may be waiting, instead of after every
//! publish and settlement. A notification costs the database a statement, a commit and a
//! wake-up of every listening backend, about as much as the rest of a prefetch-1 consume
//! round (`BENCHMARKS.md`, "A poll's window planned once, and wake-ups only for waiters").
//!
//! The rules, and why no wake-up is lost (`docs/scale-out.md`, "Long polls across
//! brokers"):
//!
//! - A poll that hands out nothing may be followed by a wait. Unless the mark its own
//!   transaction read covers this broker for [`COVER_MS`] more, the broker then writes the mark
//!   in a transaction of its own: the topic row's lock (waiting for any publish under
//!   way to commit), then the group row's lock (waiting for any call on the group under
//!   way). If the log's end or the group's version moved since the poll read them, the
//!   poll may have missed what they brought, and the broker wakes its own long polls of
//!   the topic, which poll again.
//! - Every write that may wake a waiter reads the mark in its own transaction, after the
//!   lock that orders it against the mark's write (a publish's topic row lock, a group
//!   call's group row lock): a write ordered after the mark sees it and notifies; one
//!   ordered before it moved what the mark's transaction reads, and the waiter polls again.
//! - The mark runs out [`HOLD_MS`] after it was written, longer than any wait between
//!   two polls (`crate::long_poll::LONG_POLL_RECHECK_MS`), and every poll that finds it
//!   covering less than [`COVER_MS`] writes it again: a wait never outlives its mark.
//!
//! The mark names one broker, or [`MANY`] when a second broker marked it while the
//! first's mark held; it stays [`MANY`] while any broker keeps it alive, so a broker
//! alone again may notify for nothing until the mark runs out: never fewer wake-ups than
//! waiters need. Times are the database's clock, so brokers agree on when a mark runs out.

use std::collections::HashMap;
use std::time::Instant;

use parking_lot::Mutex;

use super::{PgError, Postgres};
use crate::backend::BackendError;
use crate::long_poll::LONG_POLL_RECHECK_MS;

/// The mark's broker when more than one broker marked it.
pub(super) const MANY: i64 = -1;
/// How long a mark holds after it is written (ms).
pub(super) const HOLD_MS: u64 = 4 * LONG_POLL_RECHECK_MS;
/// How much longer a mark must hold for a broker about to wait not to write it again.
pub(super) const COVER_MS: u64 = 2 * LONG_POLL_RECHECK_MS;

/// Renews the topic's mark for broker `$2` (`HOLD_MS` in `$3`) under the topic row's
/// lock; answers the log's end after any publish that held the lock, the mark written,
/// and the time.
const MARK: &str = "UPDATE mailroom_topics t SET \
     waiting_broker = CASE WHEN t.waiting_until_ms < c.now OR t.waiting_broker = $2 \
       THEN $2 ELSE -1 END, \
     waiting_until_ms = c.now + $3 \
     FROM (SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now) AS c \
     WHERE t.id = $1 RETURNING t.next_offset, t.waiting_until_ms, t.waiting_broker, c.now";
/// The group's version once any call on it under way has committed.
const GROUP_VERSION: &str = "SELECT version FROM mailroom_groups WHERE id = $1 FOR UPDATE";

/// A topic's waiting mark as one statement read it, with the database's time then.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Mark {
    /// Until when (database ms) a broker may wait on the topic.
    pub until_ms: i64,
    /// The broker that may wait, [`MANY`], or 0 (never marked).
    pub broker: i64,
    /// The database's time when the mark was read (ms).
    pub read_at_ms: i64,
}

impl Mark {
    /// Whether this mark lets broker `own` wait [`COVER_MS`] more unwritten, at the
    /// database's time `now_ms`.
    pub(super) fn covers(&self, own: i64, now_ms: i64) -> bool {
        let holds = self.until_ms >= now_ms.saturating_add(COVER_MS as i64);
        holds && (self.broker == own || self.broker == MANY)
    }

    /// The database's time now, reckoned from this mark's read at `read_at` (this
    /// broker's clock).
    fn now_ms(&self, read_at: Instant) -> i64 {
        let since = i64::try_from(read_at.elapsed().as_millis()).unwrap_or(i64::MAX);
        self.read_at_ms.saturating_add(since)
    }

    /// The mark in `row`'s columns `until`, `broker` and `read_at` (the database's time).
    pub(super) fn in_row(
        row: &tokio_postgres::Row,
        until: usize,
        broker: usize,
        read_at: usize,
    ) -> Mark {
        Mark {
            until_ms: row.get(until),
            broker: row.get(broker),
            read_at_ms: row.get(read_at),
        }
    }
}

/// What a group call's own transaction read that a wait after it is checked against:
/// the rows' ids, the log's end, the group's version it left and the topic's mark.
#[derive(Debug, Clone, Copy)]
pub(super) struct PollRead {
    pub topic_id: i64,
    pub group_id: i64,
    pub log_end: u64,
    pub version: i64,
    pub mark: Mark,
    /// When the transaction answered (this broker's clock).
    pub at: Instant,
}

/// The newest mark this broker has read of each topic, and when.
#[derive(Debug, Default)]
pub(super) struct Marks {
    seen: Mutex<HashMap<String, (Mark, Instant)>>,
}

impl Marks {
    /// Notes `mark`, read of `topic` by a statement just answered. A mark is only ever
    /// written with a later `until_ms` than the one it replaces, so the newest is the one
    /// with the latest `until_ms`, whatever order the answers came in.
    pub(super) fn observe(&self, topic: &str, mark: Mark) {
        let now = Instant::now();
        let mut seen = self.seen.lock();
        match seen.get_mut(topic) {
            Some((held, at)) if held.until_ms <= mark.until_ms => (*held, *at) = (mark, now),
            Some(_) => {}
            None => {
                seen.insert(topic.to_owned(), (mark, now));
            }
        }
    }

    /// The newest mark of `topic` and the database's time now, estimated from when it
    /// was read (this broker's monotonic clock since).
    fn newest(&self, topic: &str) -> Option<(Mark, i64)> {
        let seen = self.seen.lock();
        let (mark, at) = seen.get(topic)?;
        Some((*mark, mark.now_ms(*at)))
    }

    /// Whether a broker other than `own` may be waiting on `topic`: a write there should
    /// notify the others.
    pub(super) fn others_wait(&self, topic: &str, own: i64) -> bool {
        self.newest(topic)
            .is_some_and(|(mark, now)| mark.until_ms > now && mark.broker != own)
    }

    /// Forgets every mark (the database was lost, and may come back as a standby).
    pub(super) fn clear(&self) {
        self.seen.lock().clear();
    }

    /// Forgets `topic` (deleted).
    pub(super) fn forget(&self, topic: &str) {
        self.seen.lock().remove(topic);
    }
}

impl Postgres {
    /// After a poll of `topic` that handed out nothing, whose transaction read `read`:
    /// renews the topic's waiting mark unless the mark that transaction read covers this
    /// broker, and wakes this broker's long polls of the topic if the log or the group
    /// moved since (see the module docs). A failure is logged, not answered: the poll's
    /// answer stands, and a wait without a mark ends at its next recheck.
    pub(super) async fn mark_waiting(&self, topic: &str, read: &PollRead) {
        let own = self.notifier.broker_mark();
        // Only the poll's own mark may stand in for writing one: it was committed before
        // the poll read the log and the group, so every write the poll missed reads it.
        // A newer mark read by another call may have been committed after such a write.
        if read.mark.covers(own, read.mark.now_ms(read.at)) {
            return;
        }
        match self.write_mark(read.topic_id, read.group_id, own).await {
            Ok((log_end, version, mark)) => {
                self.notifier.marks.observe(topic, mark);
                if log_end != read.log_end || version != Some(read.version) {
                    self.long_polls.wake(topic);
                }
            }
            Err(error) => tracing::warn!(%error, topic, "could not mark the topic as waited on"),
        }
    }

    /// The mark's transaction: answers the log's end, the group's version (`None`: the
    /// group is gone) and the mark written.
    async fn write_mark(
        &self,
        topic_id: i64,
        group_id: i64,
        own: i64,
    ) -> Result<(u64, Option<i64>, Mark), BackendError> {
        let mut client = self.client().await?;
        let transaction = client.transaction().await.map_err(PgError::from)?;
        let (mark, version) = futures_util::future::try_join(
            transaction.prepare_cached(MARK),
            transaction.prepare_cached(GROUP_VERSION),
        )
        .await
        .map_err(PgError::from)?;
        let hold = HOLD_MS as i64;
        // One pipeline, in this order: the topic row's lock before the group row's, as
        // retention and topic deletion take them, so the three never deadlock.
        let (row, version) = futures_util::future::try_join(
            transaction.query_opt(&mark, &[&topic_id, &own, &hold]),
            transaction.query_opt(&version, &[&group_id]),
        )
        .await
        .map_err(PgError::from)?;
        transaction.commit().await.map_err(PgError::from)?;
        // The topic is gone (deleted by another broker): its waiters find that out on
        // their next poll.
        let Some(row) = row else {
            return Ok((u64::MAX, None, Mark::default()));
        };
        let mark = Mark::in_row(&row, 1, 2, 3);
        let version = version.map(|row| row.get::<_, i64>(0));
        Ok((row.get::<_, i64>(0) as u64, version, mark))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const OWN: i64 = 7;
    const OTHER: i64 = 9;

    fn mark(until_ms: i64, broker: i64, read_at_ms: i64) -> Mark {
        Mark {
            until_ms,
            broker,
            read_at_ms,
        }
    }

    proptest! {
        // Proves the mark held is the latest written (the greatest `until_ms`), whatever
        // order the answers that read them arrive in.
        #[test]
        fn the_newest_mark_wins_in_any_order(
            marks in proptest::collection::vec((0i64..1_000_000, 0i64..4), 1..20),
        ) {
            let held = Marks::default();
            for &(until_ms, broker) in &marks {
                held.observe("t", mark(until_ms, broker, 0));
            }
            let newest = marks.iter().map(|&(until_ms, _)| until_ms).max().unwrap();
            let (found, _) = held.newest("t").unwrap();
            prop_assert_eq!(found.until_ms, newest);
        }
    }

    // Proves who is told and who writes again: another broker's or many brokers' mark
    // that holds tells; one's own, a run-out one or none does not; a broker's own mark or
    // many's covers it only with `COVER_MS` left.
    #[test]
    fn others_wait_and_covers_follow_the_mark() {
        let now = 1_000_000;
        let cases = [
            (mark(now + 5_000, OTHER, now), true, false),
            (mark(now + 5_000, MANY, now), true, false),
            (mark(now + 5_000, OWN, now), false, false),
            (mark(now - 1, OTHER, now), false, false),
            (mark(now + HOLD_MS as i64, OWN, now), false, true),
            (mark(now + HOLD_MS as i64, MANY, now), true, true),
            (mark(now + HOLD_MS as i64, OTHER, now), true, false),
        ];
        for (seen, others, covers) in cases {
            let marks = Marks::default();
            marks.observe("t", seen);
            assert_eq!(marks.others_wait("t", OWN), others, "{seen:?}");
            assert_eq!(seen.covers(OWN, now), covers, "{seen:?}");
        }
        assert!(
            !Mark::default().covers(OWN, now),
            "a row never marked covers no one"
        );
        let none = Marks::default();
        assert!(!none.others_wait("t", OWN));
        none.observe("t", mark(now + 5_000, OTHER, now));
        none.forget("t");
        assert!(!none.others_wait("t", OWN));
    }
}
