//! Where a PostgreSQL-backed system's time goes: the database's CPU, its WAL writes and
//! flushes, its commits and the statements clients sent, over a workload's timed phase.
//!
//! - CPU: `utime + stime` of the postmaster and every live child of it (the backends,
//!   the WAL writer, the checkpointer, autovacuum), plus the postmaster's `cutime +
//!   cstime`, which holds the time of children that exited and were reaped; so a backend
//!   whose client disconnected during the span still counts.
//! - WAL: `pg_stat_wal` (`wal_records`, `wal_bytes`, `wal_write`: `XLogWrite` calls,
//!   `wal_sync`: WAL flushes to disk, the figure `synchronous_commit = on` pays per
//!   commit, shared between commits that wait together).
//! - Commits: `pg_stat_database.xact_commit` of every database.
//! - Statements: the sum of `pg_stat_statements.calls` (top-level statements only, so a
//!   PL/pgSQL function such as `pgq.next_batch` is one), leaving out the probe's own; absent
//!   when the extension is not installed.
//!
//! The cumulative statistics of PostgreSQL 15 reach shared memory from a backend at the
//! end of a transaction at most once a second, and from an idle backend only after
//! [`STATS_IDLE_FLUSH`]; so the closing snapshot of WAL and commit counts waits that long
//! after the span ended (the CPU time is read at once), and so does the opening one when
//! the span follows a fill ([`crate::probe::Probe::after_writes`]).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio_postgres::Client;

use crate::probe::{process_cpu_ticks, stat_fields, ticks_to_seconds, ProbeError};

/// How long after the end of a span the WAL and commit counters are read: PostgreSQL
/// 15's `PGSTAT_IDLE_INTERVAL` (10 s) and a margin.
pub const STATS_IDLE_FLUSH: Duration = Duration::from_millis(10_500);

/// How long after the end of a span the CPU time is read, so that the backends of the
/// connections the workload closed have exited and been reaped.
pub const EXIT_SETTLE: Duration = Duration::from_millis(500);

/// A connection to the database whose statistics are read, and its postmaster's pid.
#[derive(Debug)]
pub struct DatabaseProbe {
    client: Client,
    postmaster: u32,
}

/// The database's counters at one moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DatabaseSnapshot {
    cpu_ticks: u64,
    wal_records: i64,
    wal_bytes: f64,
    wal_write: i64,
    wal_sync: i64,
    commits: i64,
    statements: Option<i64>,
}

/// What the database did between two snapshots.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct DatabaseUsage {
    /// CPU seconds of every PostgreSQL process.
    pub cpu_seconds: f64,
    /// WAL records written.
    pub wal_records: u64,
    /// WAL bytes written.
    pub wal_bytes: u64,
    /// `XLogWrite` calls (WAL buffers written out).
    pub wal_writes: u64,
    /// WAL flushes to disk (`issue_xlog_fsync`).
    pub wal_syncs: u64,
    /// Transactions committed.
    pub commits: u64,
    /// Top-level statements executed (`pg_stat_statements`), when it is installed.
    pub statements: Option<u64>,
}

impl DatabaseProbe {
    /// Connects to `url` to read the statistics of the cluster whose postmaster is
    /// `postmaster` (the first line of its `postmaster.pid`).
    ///
    /// # Errors
    /// When the database cannot be reached.
    pub async fn connect(url: &str, postmaster: u32) -> Result<DatabaseProbe, ProbeError> {
        let client = crate::systems::postgres::open(url).await?;
        Ok(DatabaseProbe { client, postmaster })
    }

    /// The counters now.
    ///
    /// # Errors
    /// When `/proc` or the statistics views cannot be read.
    pub async fn snapshot(&self) -> Result<DatabaseSnapshot, ProbeError> {
        let cpu_ticks = tree_cpu_ticks(self.postmaster)?;
        let wal = self
            .client
            .query_one(
                "SELECT wal_records, wal_bytes::float8, wal_write, wal_sync FROM pg_stat_wal",
                &[],
            )
            .await?;
        let commits: i64 = self
            .client
            .query_one("SELECT sum(xact_commit)::int8 FROM pg_stat_database", &[])
            .await?
            .get(0);
        // The probe's own statements all name a pg_stat view; leave them out.
        let statements = self
            .client
            .query_one(
                "SELECT sum(calls)::int8 FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat%'",
                &[],
            )
            .await
            .ok()
            .and_then(|row| row.get::<_, Option<i64>>(0));
        Ok(DatabaseSnapshot {
            cpu_ticks,
            wal_records: wal.get(0),
            wal_bytes: wal.get(1),
            wal_write: wal.get(2),
            wal_sync: wal.get(3),
            commits,
            statements,
        })
    }

    /// The counters at the end of a span: the CPU time now, the rest once every backend
    /// has flushed its statistics ([`STATS_IDLE_FLUSH`] later).
    ///
    /// # Errors
    /// As [`DatabaseProbe::snapshot`].
    pub async fn snapshot_settled(&self) -> Result<DatabaseSnapshot, ProbeError> {
        // The workload's connections close as it ends; their backends' time moves to the
        // postmaster's reaped total only once it has waited for them.
        tokio::time::sleep(EXIT_SETTLE).await;
        let cpu_ticks = tree_cpu_ticks(self.postmaster)?;
        tokio::time::sleep(STATS_IDLE_FLUSH.saturating_sub(EXIT_SETTLE)).await;
        let settled = self.snapshot().await?;
        Ok(DatabaseSnapshot {
            cpu_ticks,
            ..settled
        })
    }
}

impl DatabaseSnapshot {
    /// What happened between `before` and this snapshot.
    pub fn since(&self, before: &DatabaseSnapshot) -> DatabaseUsage {
        let delta = |now: i64, then: i64| u64::try_from(now - then).unwrap_or(0);
        DatabaseUsage {
            cpu_seconds: ticks_to_seconds(self.cpu_ticks.saturating_sub(before.cpu_ticks)),
            wal_records: delta(self.wal_records, before.wal_records),
            wal_bytes: (self.wal_bytes - before.wal_bytes).max(0.0) as u64,
            wal_writes: delta(self.wal_write, before.wal_write),
            wal_syncs: delta(self.wal_sync, before.wal_sync),
            commits: delta(self.commits, before.commits),
            statements: match (self.statements, before.statements) {
                (Some(now), Some(then)) => Some(delta(now, then)),
                _ => None,
            },
        }
    }
}

/// CPU ticks of the postmaster, its reaped children, and its live children.
///
/// The live children are read first and the postmaster last: a child reaped in between is
/// then counted twice (in its own figure and in the reaped total), never lost; and
/// [`DatabaseProbe::snapshot_settled`] reads only once the workload's backends are gone.
fn tree_cpu_ticks(postmaster: u32) -> Result<u64, ProbeError> {
    let mut ticks = live_children_ticks(postmaster)?;
    let path = format!("/proc/{postmaster}/stat");
    let text = std::fs::read_to_string(&path).map_err(|source| ProbeError::Read {
        path: path.clone(),
        source,
    })?;
    ticks += reaped_children_ticks(&text).ok_or(ProbeError::Layout(path))?;
    Ok(ticks + process_cpu_ticks(postmaster)?)
}

/// CPU ticks of the live children of `postmaster`.
fn live_children_ticks(postmaster: u32) -> Result<u64, ProbeError> {
    let mut ticks = 0;
    let entries = std::fs::read_dir("/proc").map_err(|source| ProbeError::Read {
        path: "/proc".into(),
        source,
    })?;
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        // A child may exit between the listing and the read: skip it (its time moves to
        // the postmaster's reaped total, read above or on the next snapshot).
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if parent_pid(&stat) == Some(postmaster) {
            ticks += process_cpu_ticks(pid).unwrap_or(0);
        }
    }
    Ok(ticks)
}

/// Field 4 (ppid) of a `/proc/<pid>/stat` line.
fn parent_pid(stat: &str) -> Option<u32> {
    stat_fields(stat)?.get(1)?.parse().ok()
}

/// Fields 16 and 17 (`cutime + cstime`): the CPU time of children waited for.
fn reaped_children_ticks(stat: &str) -> Option<u64> {
    let fields = stat_fields(stat)?;
    let cutime: u64 = fields.get(13)?.parse().ok()?;
    let cstime: u64 = fields.get(14)?.parse().ok()?;
    Some(cutime + cstime)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the parent pid and the reaped children's time are read from the right fields,
    // counted from the end of a command name that holds spaces and parentheses.
    #[test]
    fn parses_parent_and_reaped_children() {
        let stat = "42 (post (gres) x) S 7 42 42 0 -1 4194560 100 0 0 0 250 75 30 12 20 0 8 0";
        assert_eq!(parent_pid(stat), Some(7));
        assert_eq!(reaped_children_ticks(stat), Some(42));
    }

    // Proves a delta never goes negative when a counter was reset between snapshots.
    #[test]
    fn deltas_saturate() {
        let before = DatabaseSnapshot {
            cpu_ticks: 100,
            wal_records: 10,
            wal_bytes: 1000.0,
            wal_write: 5,
            wal_sync: 5,
            commits: 3,
            statements: Some(9),
        };
        let after = DatabaseSnapshot {
            cpu_ticks: 350,
            wal_records: 4,
            wal_sync: 8,
            statements: None,
            ..before
        };
        let usage = after.since(&before);
        assert_eq!(usage.cpu_seconds, 2.5);
        assert_eq!((usage.wal_records, usage.wal_syncs), (0, 3));
        assert_eq!(usage.statements, None);
    }
}
