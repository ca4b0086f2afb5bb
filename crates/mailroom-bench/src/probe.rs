//! The broker's resource use, read from `/proc/<pid>` while a workload runs.
//!
//! CPU time is `utime + stime` from `/proc/<pid>/stat` (all threads of the process). Peak
//! RSS is `VmHWM` from `/proc/<pid>/status`; before each run the probe writes `5` to
//! `/proc/<pid>/clear_refs`, which resets that high-water mark (Linux ≥ 4.0, needs the right
//! to write there, which root has), so each run reports its own peak. When the reset is
//! refused, the figure is the peak since the broker started and the report says so.
//!
//! A probe may watch several broker processes (two brokers on one database: CPU and
//! peak RSS are summed) and the database they share ([`crate::database_probe`]).

use std::fs;
use std::sync::Arc;
use std::time::Duration;

use crate::database_probe::{
    DatabaseProbe, DatabaseSnapshot, DatabaseUsage, EXIT_SETTLE, STATS_IDLE_FLUSH,
};

/// Clock ticks per second of the `/proc/<pid>/stat` times. Linux reports them in `USER_HZ`,
/// which is 100 on every architecture Linux builds for x86 and arm.
pub const USER_HZ: u64 = 100;

/// Why the broker's figures could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The process file could not be read (the broker exited?).
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// The file did not have the documented layout.
    #[error("unexpected layout of {0}")]
    Layout(String),
    /// The database's statistics could not be read.
    #[error("reading the database's statistics: {0}")]
    Database(#[from] tokio_postgres::Error),
}

/// A handle on the broker processes (and, optionally, the database they use).
#[derive(Debug, Clone)]
pub struct Probe {
    pids: Vec<u32>,
    database: Option<Arc<DatabaseProbe>>,
    /// Whether the set-up wrote to the database (a fill) before the timed phase.
    after_writes: bool,
}

/// CPU time and peak memory of a span of work.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Usage {
    /// CPU seconds the brokers spent (user + system).
    pub cpu_seconds: f64,
    /// The brokers' peak resident sets, summed, in bytes.
    pub peak_rss_bytes: u64,
    /// Whether the peak was reset at the start of the span (else: peak since start).
    pub peak_is_per_run: bool,
    /// What the database did over the span, when it was probed.
    pub database: Option<DatabaseUsage>,
}

/// A started span: [`Probe::start`] to [`Span::finish`].
#[derive(Debug, Clone)]
pub struct Span {
    probe: Probe,
    cpu_ticks: u64,
    peak_reset: bool,
    database: Option<DatabaseSnapshot>,
}

impl Probe {
    /// A probe of process `pid`.
    pub fn new(pid: u32) -> Probe {
        Probe::brokers(vec![pid])
    }

    /// A probe of several broker processes, whose figures are summed (none: only the
    /// database, if one is added).
    pub fn brokers(pids: Vec<u32>) -> Probe {
        Probe {
            pids,
            database: None,
            after_writes: false,
        }
    }

    /// This probe, also watching `database`.
    #[must_use]
    pub fn with_database(mut self, database: DatabaseProbe) -> Probe {
        self.database = Some(Arc::new(database));
        self
    }

    /// This probe, for a timed phase that follows writes of its own set-up (a fill):
    /// [`start`](Self::start) then waits until every backend has reported its statistics
    /// before it reads the database's, so that the fill's WAL and commits are not counted
    /// in the phase. A backend reports at most once a second, and an idle one only after
    /// [`STATS_IDLE_FLUSH`]; without the wait the last of a fill made through a broker's
    /// pooled connections was counted in the consume phase that followed (about 1.2 KiB of
    /// WAL a message consumed, where `pg_waldump` of that phase finds about 25 bytes).
    #[must_use]
    pub fn after_writes(mut self) -> Probe {
        self.after_writes = true;
        self
    }

    /// Resets the peak-RSS marks (best effort) and notes the CPU time (and the database's
    /// counters) so far.
    ///
    /// # Errors
    /// [`ProbeError`] when `/proc/<pid>/stat` or the database's statistics cannot be read.
    pub async fn start(self) -> Result<Span, ProbeError> {
        let mut peak_reset = true;
        for pid in &self.pids {
            peak_reset &= fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok();
        }
        let database = match &self.database {
            // The set-up's connections (the fill's publisher) may still be closing, and
            // after a fill every backend's statistics must be in (`after_writes`).
            Some(database) => {
                tokio::time::sleep(self.opening_settle()).await;
                Some(database.snapshot().await?)
            }
            None => None,
        };
        Ok(Span {
            cpu_ticks: self.cpu_ticks()?,
            probe: self,
            peak_reset,
            database,
        })
    }

    /// How long [`start`](Self::start) waits before it reads the database's counters.
    fn opening_settle(&self) -> Duration {
        if self.after_writes {
            STATS_IDLE_FLUSH
        } else {
            EXIT_SETTLE
        }
    }

    /// User + system clock ticks the broker processes have used.
    ///
    /// # Errors
    /// [`ProbeError`] when a file is missing or malformed.
    pub fn cpu_ticks(&self) -> Result<u64, ProbeError> {
        let mut ticks = 0;
        for pid in &self.pids {
            ticks += process_cpu_ticks(*pid)?;
        }
        Ok(ticks)
    }

    /// The broker processes' peak resident sets (`VmHWM`), summed, in bytes.
    ///
    /// # Errors
    /// [`ProbeError`] when a file is missing or malformed.
    pub fn peak_rss_bytes(&self) -> Result<u64, ProbeError> {
        let mut bytes = 0;
        for pid in &self.pids {
            let path = format!("/proc/{pid}/status");
            let text = read(&path)?;
            bytes += parse_vm_hwm_bytes(&text).ok_or(ProbeError::Layout(path))?;
        }
        Ok(bytes)
    }
}

/// User + system clock ticks process `pid` has used.
///
/// # Errors
/// [`ProbeError`] when the file is missing or malformed.
pub fn process_cpu_ticks(pid: u32) -> Result<u64, ProbeError> {
    let path = format!("/proc/{pid}/stat");
    let text = read(&path)?;
    parse_cpu_ticks(&text).ok_or(ProbeError::Layout(path))
}

/// Clock ticks as seconds.
pub fn ticks_to_seconds(ticks: u64) -> f64 {
    Duration::from_millis(ticks * 1000 / USER_HZ).as_secs_f64()
}

impl Span {
    /// The brokers' usage since [`Probe::start`] (and the database's, which waits for
    /// its statistics to settle: see [`DatabaseProbe::snapshot_settled`]).
    ///
    /// # Errors
    /// [`ProbeError`] when the process files or the database's statistics cannot be read.
    pub async fn finish(self) -> Result<Usage, ProbeError> {
        let ticks = self.probe.cpu_ticks()?.saturating_sub(self.cpu_ticks);
        let peak_rss_bytes = self.probe.peak_rss_bytes()?;
        let database = match (&self.probe.database, &self.database) {
            (Some(probe), Some(before)) => Some(probe.snapshot_settled().await?.since(before)),
            _ => None,
        };
        Ok(Usage {
            cpu_seconds: ticks_to_seconds(ticks),
            peak_rss_bytes,
            peak_is_per_run: self.peak_reset,
            database,
        })
    }
}

fn read(path: &str) -> Result<String, ProbeError> {
    fs::read_to_string(path).map_err(|source| ProbeError::Read {
        path: path.to_owned(),
        source,
    })
}

/// `utime + stime` from a `/proc/<pid>/stat` line. The command name (field 2) may hold
/// spaces and parentheses, so fields are counted from the last `)`.
fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    let fields = stat_fields(stat)?;
    // After the name come field 3 (state) onwards; utime and stime are fields 14 and 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// The fields of a `/proc/<pid>/stat` line after the command name (field 3 onwards).
pub(crate) fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    Some(after_name.split_whitespace().collect())
}

fn parse_vm_hwm_bytes(status: &str) -> Option<u64> {
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a probe of a phase that follows a fill waits for every backend's statistics
    // (PostgreSQL's idle flush) before its opening snapshot, and one without only for the
    // set-up's connections to close.
    #[test]
    fn waits_for_the_fills_statistics() {
        assert_eq!(Probe::new(1).opening_settle(), EXIT_SETTLE);
        assert_eq!(
            Probe::new(1).after_writes().opening_settle(),
            STATS_IDLE_FLUSH
        );
        assert!(STATS_IDLE_FLUSH > Duration::from_secs(10));
    }

    // Proves the stat parser counts fields from the end of the command name, which may
    // contain spaces and parentheses.
    #[test]
    fn parses_stat_with_awkward_name() {
        let stat = "42 (we (ird) name) S 1 42 42 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 8 0";
        assert_eq!(parse_cpu_ticks(stat), Some(325));
        assert_eq!(parse_cpu_ticks("garbage"), None);
    }

    // Proves VmHWM is read in KiB and turned into bytes.
    #[test]
    fn parses_vm_hwm() {
        let status = "Name:\tredis\nVmPeak:\t  999 kB\nVmHWM:\t    2048 kB\n";
        assert_eq!(parse_vm_hwm_bytes(status), Some(2048 * 1024));
        assert_eq!(parse_vm_hwm_bytes("Name: x\n"), None);
    }

    // Proves the probe reads this very process: CPU time is monotonic and RSS non-zero.
    #[tokio::test]
    async fn probes_own_process() {
        let probe = Probe::new(std::process::id());
        let span = probe.start().await.unwrap();
        let usage = span.finish().await.unwrap();
        assert!(usage.cpu_seconds >= 0.0);
        assert!(usage.peak_rss_bytes > 0);
    }
}
