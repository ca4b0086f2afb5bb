//! Statements over one topic's partition of the log, run with their generic plan.
//!
//! A statement that joins a list of offsets to `mailroom_messages` (the poll's window,
//! the payloads of deliveries the window missed, the copies of dead-lettered messages)
//! was planned afresh on every call when PostgreSQL 15 was left to choose: pruning the
//! partitions by `topic_id = $1` made each custom plan look cheaper than the generic one,
//! and planning cost 120 to 300 µs a call, more than running it
//! (`bench/history/postgres-per-call-costs-planning-and-wakeups.md`; `BENCHMARKS.md`,
//! "Dead letters and missed payloads planned once"). So each such statement names its
//! topic's own partition, one prepared statement per topic and connection, and runs
//! with the generic plan forced: for the whole transaction of a group call, which reads
//! no partitioned table but through a topic's partition ([`BEGIN_GENERIC`]), and for
//! that statement alone elsewhere ([`Plans`]). Over the parent table a generic plan would
//! lock every topic's partitions on every call, while over the topic's partition it locks
//! that topic's segments only (one per 2^20 offsets retained) and prunes the rest as it
//! runs. `$1` stays the topic's id, so a partition answers for its own rows only.
//!
//! # Plans made on small segments
//!
//! A generic plan is made when a connection first runs the statement and kept until a
//! table it reads changes or is analyzed. A segment is analyzed first by autovacuum, up
//! to a minute after it got its first rows (`autovacuum_naptime`), and until then the
//! planner, with no statistics, takes `topic_id = $1` for a selective condition (one row
//! in 200) where in a topic's partition every row has it. A plan made then on a segment
//! of a few dozen rows scans the index by `topic_id` alone and filters the offsets, so
//! it reads the whole segment, as it grows, on every call: 6.2 ms against 0.15 for a
//! poll's window at 40,064 rows of 1 KiB, and a hash join of a few offsets read all of
//! it too. So every offset condition of these statements is an index range, also where
//! it names offsets one by one (`= ANY`, a join to `unnest`): those carry the range from
//! their lowest to past their highest ([`offset_bounds`]). The worst a plan made small
//! can do is then read that range, which a call's offsets keep to about its window.

use std::future::Future;

use deadpool_postgres::{GenericClient, StatementCache};
use futures_util::future::try_join3;
use tokio_postgres::{Error, Statement};

/// The text of [`GENERIC_PLANS`], a macro so that [`BEGIN_GENERIC`] is made from it.
macro_rules! generic_plans {
    () => {
        "SET LOCAL plan_cache_mode = force_generic_plan"
    };
}

/// Makes the transaction's next statements run their generic plans.
const GENERIC_PLANS: &str = generic_plans!();
/// Begins a transaction in which every statement runs its generic plan: one message and
/// one answer for both, where `BEGIN` and [`generic_plan`]'s pair around each statement
/// are three. For a transaction whose statements read no partitioned table but through
/// a topic's own partition (a group call's: `group_lock.rs`).
pub(super) const BEGIN_GENERIC: &str = concat!("BEGIN; ", generic_plans!());
/// Gives the choice of plan back to PostgreSQL for the rest of the transaction.
const CHOSEN_PLANS: &str = "SET LOCAL plan_cache_mode = DEFAULT";

/// The most statements a connection keeps prepared before a statement of a topic is
/// added: a few statements per topic used on it would otherwise grow without bound (in
/// the broker and in its PostgreSQL backend); past this the connection's cache is emptied
/// and its hot statements are prepared again as they come.
pub(super) const STATEMENTS_CACHED_MAX: usize = 128;

/// Prepares `text`, a statement of one topic, on `client`, whose statement cache is
/// `cache` (a connection's, or its transaction's): once per connection while the cache
/// holds fewer than [`STATEMENTS_CACHED_MAX`].
pub(super) async fn prepare_for_topic(
    client: &impl GenericClient,
    cache: &StatementCache,
    text: &str,
) -> Result<Statement, Error> {
    if cache.size() >= STATEMENTS_CACHED_MAX {
        cache.clear();
    }
    client.prepare_cached(text).await
}

/// The range `[lowest, highest + 1)` of `offsets`, or the empty `[0, 0)` if there are
/// none: the index range a statement of a topic reads them from ("Plans made on small
/// segments" above).
pub(super) fn offset_bounds(offsets: &[i64]) -> (i64, i64) {
    match (offsets.iter().min(), offsets.iter().max()) {
        (Some(&low), Some(&high)) => (low, high.saturating_add(1)),
        _ => (0, 0),
    }
}

/// How the transaction a statement of a topic runs in plans its statements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Plans {
    /// PostgreSQL chooses (retention's transaction): a statement of a topic forces its
    /// own generic plan ([`generic_plan`]).
    Chosen,
    /// Every statement already runs its generic plan (begun with [`BEGIN_GENERIC`]).
    Generic,
}

/// Runs `statement` as [`generic_plan`] does under [`Plans::Chosen`], and alone under
/// [`Plans::Generic`], where its generic plan is already forced.
pub(super) async fn under<T>(
    plans: Plans,
    client: &impl GenericClient,
    statement: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    match plans {
        Plans::Chosen => generic_plan(client, statement).await,
        Plans::Generic => statement.await,
    }
}

/// Runs `statement`, one statement of a topic sent on `client`, with its generic plan
/// forced, and only it: the transaction's other statements keep PostgreSQL's choice. The
/// three go in one pipeline, so `statement` must already be prepared.
async fn generic_plan<T>(
    client: &impl GenericClient,
    statement: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    let (_, answer, _) = try_join3(
        client.batch_execute(GENERIC_PLANS),
        statement,
        client.batch_execute(CHOSEN_PLANS),
    )
    .await?;
    Ok(answer)
}

#[cfg(test)]
mod tests;
