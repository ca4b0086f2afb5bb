//! The process's own figures (CPU time, resident memory, file descriptors, start time),
//! read from `/proc/self` on Linux at each scrape under the names every Prometheus
//! client library exports (`process_cpu_seconds_total`, ...), so stock dashboards work.
//!
//! Elsewhere the files do not exist and [`ProcessStats::read`] answers `None`; the
//! series then stay at zero.

use std::fs;

/// Clock ticks per second of the times in `/proc/self/stat`: `USER_HZ`, which Linux
/// fixes at 100 for user space on every architecture (the kernel converts from its own
/// `HZ`), so it need not be asked of `sysconf`.
const USER_HZ: f64 = 100.0;

/// One reading of the process's figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcessStats {
    /// User plus system CPU time, in seconds.
    pub cpu_seconds: f64,
    /// Resident memory, in bytes.
    pub resident_bytes: u64,
    /// File descriptors open now.
    pub open_fds: u64,
    /// The soft limit on open file descriptors (`None`: unlimited).
    pub max_fds: Option<u64>,
    /// When the process started, in seconds since the Unix epoch.
    pub start_time_seconds: f64,
}

impl ProcessStats {
    /// Reads `/proc/self`; `None` where it cannot be read (not Linux, no procfs).
    pub fn read() -> Option<ProcessStats> {
        let stat = fs::read_to_string("/proc/self/stat").ok()?;
        let (ticks, start_ticks) = cpu_and_start_ticks(&stat)?;
        let status = fs::read_to_string("/proc/self/status").ok()?;
        let boot_seconds = boot_time_seconds(&fs::read_to_string("/proc/stat").ok()?)?;
        let limits = fs::read_to_string("/proc/self/limits").ok()?;
        let open_fds = fs::read_dir("/proc/self/fd").ok()?.count() as u64;
        Some(ProcessStats {
            cpu_seconds: ticks as f64 / USER_HZ,
            resident_bytes: resident_bytes(&status)?,
            open_fds,
            max_fds: max_open_files(&limits),
            start_time_seconds: boot_seconds as f64 + start_ticks as f64 / USER_HZ,
        })
    }
}

/// `utime + stime` and `starttime` from `/proc/self/stat`, in clock ticks. The fields
/// are counted after the command name's closing parenthesis, since the name itself may
/// hold spaces and parentheses.
fn cpu_and_start_ticks(stat: &str) -> Option<(u64, u64)> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    // Field 3 (state) is the first after the name; utime, stime and starttime are
    // fields 14, 15 and 22.
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let field = |number: usize| fields.get(number - 3)?.parse::<u64>().ok();
    Some((field(14)? + field(15)?, field(22)?))
}

/// `VmRSS` from `/proc/self/status`, which the kernel states in kB.
fn resident_bytes(status: &str) -> Option<u64> {
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kilobytes: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kilobytes * 1024)
}

/// The soft "Max open files" limit from `/proc/self/limits`.
fn max_open_files(limits: &str) -> Option<u64> {
    let line = limits
        .lines()
        .find(|line| line.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The boot time (`btime`) from `/proc/stat`, in seconds since the epoch.
fn boot_time_seconds(stat: &str) -> Option<u64> {
    stat.lines()
        .find_map(|line| line.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the fields are counted after the command name, even one with spaces and a
    // parenthesis in it.
    #[test]
    fn stat_fields_after_an_awkward_name() {
        let stat = "4242 (mail room) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 \
                    250 50 0 0 20 0 9 0 12345 1000000 500 18446744073709551615";
        assert_eq!(cpu_and_start_ticks(stat), Some((300, 12345)));
    }

    // Proves the memory, fd-limit and boot-time lines are read in their units.
    #[test]
    fn status_limits_and_boot_time() {
        let status = "Name:\tmailroom\nVmPeak:\t  9000 kB\nVmRSS:\t  2048 kB\n";
        assert_eq!(resident_bytes(status), Some(2048 * 1024));
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            1024                 524288               files\n";
        assert_eq!(max_open_files(limits), Some(1024));
        let unlimited =
            "Max open files            unlimited            unlimited            files\n";
        assert_eq!(max_open_files(unlimited), None);
        assert_eq!(
            boot_time_seconds("cpu 1 2 3\nbtime 1764547200\n"),
            Some(1764547200)
        );
    }

    // Proves the real `/proc/self` reads on Linux and gives plausible figures.
    #[cfg(target_os = "linux")]
    #[test]
    fn reads_this_process() {
        let stats = ProcessStats::read().expect("procfs");
        assert!(stats.resident_bytes > 0);
        assert!(stats.open_fds > 0);
        assert!(stats.start_time_seconds > 1.0e9);
    }
}
