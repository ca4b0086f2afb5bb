//! The broker's resource use, read from `/proc/<pid>` while a workload runs.
//!
//! CPU time is `utime + stime` from `/proc/<pid>/stat` (all threads of the process). Peak
//! RSS is `VmHWM` from `/proc/<pid>/status`; before each run the probe writes `5` to
//! `/proc/<pid>/clear_refs`, which resets that high-water mark (Linux ≥ 4.0, needs the right
//! to write there, which root has), so each run reports its own peak. When the reset is
//! refused, the figure is the peak since the broker started and the report says so.

use std::fs;
use std::time::Duration;

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
}

/// A handle on one broker process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    pid: u32,
}

/// CPU time and peak memory of a span of work.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Usage {
    /// CPU seconds the broker spent (user + system).
    pub cpu_seconds: f64,
    /// The broker's peak resident set, in bytes.
    pub peak_rss_bytes: u64,
    /// Whether the peak was reset at the start of the span (else: peak since start).
    pub peak_is_per_run: bool,
}

/// A started span: [`Probe::start`] to [`Span::finish`].
#[derive(Debug, Clone, Copy)]
pub struct Span {
    probe: Probe,
    cpu_ticks: u64,
    peak_reset: bool,
}

impl Probe {
    /// A probe of process `pid`.
    pub fn new(pid: u32) -> Probe {
        Probe { pid }
    }

    /// Resets the peak-RSS mark (best effort) and notes the CPU time so far.
    ///
    /// # Errors
    /// [`ProbeError`] when `/proc/<pid>/stat` cannot be read.
    pub fn start(self) -> Result<Span, ProbeError> {
        let peak_reset = fs::write(format!("/proc/{}/clear_refs", self.pid), "5").is_ok();
        Ok(Span {
            probe: self,
            cpu_ticks: self.cpu_ticks()?,
            peak_reset,
        })
    }

    /// User + system clock ticks the process has used.
    ///
    /// # Errors
    /// [`ProbeError`] when the file is missing or malformed.
    pub fn cpu_ticks(self) -> Result<u64, ProbeError> {
        let path = format!("/proc/{}/stat", self.pid);
        let text = read(&path)?;
        parse_cpu_ticks(&text).ok_or(ProbeError::Layout(path))
    }

    /// The process's peak resident set (`VmHWM`), in bytes.
    ///
    /// # Errors
    /// [`ProbeError`] when the file is missing or malformed.
    pub fn peak_rss_bytes(self) -> Result<u64, ProbeError> {
        let path = format!("/proc/{}/status", self.pid);
        let text = read(&path)?;
        parse_vm_hwm_bytes(&text).ok_or(ProbeError::Layout(path))
    }
}

impl Span {
    /// The broker's usage since [`Probe::start`].
    ///
    /// # Errors
    /// [`ProbeError`] when the process files cannot be read.
    pub fn finish(self) -> Result<Usage, ProbeError> {
        let ticks = self.probe.cpu_ticks()?.saturating_sub(self.cpu_ticks);
        Ok(Usage {
            cpu_seconds: Duration::from_millis(ticks * 1000 / USER_HZ).as_secs_f64(),
            peak_rss_bytes: self.probe.peak_rss_bytes()?,
            peak_is_per_run: self.peak_reset,
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
    let after_name = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // After the name come field 3 (state) onwards; utime and stime are fields 14 and 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

fn parse_vm_hwm_bytes(status: &str) -> Option<u64> {
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    #[test]
    fn probes_own_process() {
        let probe = Probe::new(std::process::id());
        let span = probe.start().unwrap();
        let usage = span.finish().unwrap();
        assert!(usage.cpu_seconds >= 0.0);
        assert!(usage.peak_rss_bytes > 0);
    }
}
