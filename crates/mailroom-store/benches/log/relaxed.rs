//! One log sample under any sync policy, with the process's CPU time per record, and the
//! relaxed-policy A/B (`LOG_BENCH_QUICK=3`): 1 KiB records from 1 thread and from 64
//! pipelined publishers under `Always`, `Interval(1 s)` and `Never`, side by side in one
//! run. The relaxed policies promise less, so they should cost no more per record.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mailroom_store::log::{Log, LogOptions, SyncPolicy};
use mailroom_store::storage::{FsStorage, Op, Watched, Watcher};

use crate::{median, pipelined, run_tasks, run_threads, Config, Publishers};

/// What one sample measured.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub records_per_s: f64,
    pub syncs_per_s: f64,
    /// `write_at` calls (segment and index files) per record.
    pub writes_per_record: f64,
    /// User + system CPU of the whole process (all threads) per record, in µs.
    pub cpu_us_per_record: f64,
    /// The 99.9th percentile and the slowest call, in ms (thread publishers only; zero
    /// otherwise).
    pub p999_ms: f64,
    pub slowest_ms: f64,
}

/// Counts file syncs and writes.
#[derive(Debug, Default)]
struct Counts {
    syncs: AtomicU64,
    writes: AtomicU64,
}

impl Watcher for Counts {
    fn after(&self, op: Op<'_>) {
        match op {
            Op::Sync(_) => self.syncs.fetch_add(1, Ordering::Relaxed),
            Op::Write { .. } => self.writes.fetch_add(1, Ordering::Relaxed),
            _ => 0,
        };
    }
}

/// User + system CPU time of this process so far, in seconds (`/proc/self/stat`, clock
/// ticks of 10 ms: samples of seconds keep the error under 1%).
fn process_cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at state (field 3).
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime is field 14, stime 15: indices 11 and 12 counting from field 3.
    (ticks(11) + ticks(12)) as f64 / 100.0
}

/// Runs `config`'s publishers under `sync` for `time` in a fresh log (or store) in `dir`.
pub fn log_sample_with(dir: &Path, config: Config, sync: SyncPolicy, time: Duration) -> Sample {
    let (payload_bytes, publishers, batch) = config;
    let log_dir = dir.join(format!("log-{payload_bytes}-{publishers:?}-{batch}"));
    let counts = Arc::new(Counts::default());
    let storage = Arc::new(Watched::new(Arc::new(FsStorage), Arc::clone(&counts)));
    let mut calls_us: Vec<u32> = Vec::new();
    let (records, elapsed, syncs, writes, cpu_s);
    if let Publishers::Pipelined(pipelined) = publishers {
        let (store, topic) = pipelined::open(storage, &log_dir, sync);
        let (syncs_before, writes_before) = (load(&counts.syncs), load(&counts.writes));
        let cpu_before = process_cpu_s();
        let start = Instant::now();
        records = pipelined::run(&topic, pipelined, payload_bytes, time);
        elapsed = start.elapsed().as_secs_f64();
        cpu_s = process_cpu_s() - cpu_before;
        syncs = load(&counts.syncs) - syncs_before;
        writes = load(&counts.writes) - writes_before;
        drop((topic, store));
    } else {
        let options = LogOptions {
            sync,
            ..LogOptions::default()
        };
        let log = Arc::new(Log::open(storage, &log_dir, options).unwrap());
        let (syncs_before, writes_before) = (load(&counts.syncs), load(&counts.writes));
        let cpu_before = process_cpu_s();
        let start = Instant::now();
        records = match publishers {
            Publishers::Threads(threads) => {
                let (records, calls) = run_threads(&log, config, threads, time);
                calls_us = calls;
                records
            }
            Publishers::Tasks(tasks) => run_tasks(&log, payload_bytes, tasks, time),
            Publishers::Pipelined(_) => unreachable!("pipelined publishers go through a store"),
        };
        elapsed = start.elapsed().as_secs_f64();
        cpu_s = process_cpu_s() - cpu_before;
        syncs = load(&counts.syncs) - syncs_before;
        writes = load(&counts.writes) - writes_before;
        drop(log);
    }
    std::fs::remove_dir_all(&log_dir).unwrap();
    let records_f = records.max(1) as f64;
    Sample {
        records_per_s: records as f64 / elapsed,
        syncs_per_s: syncs as f64 / elapsed,
        writes_per_record: writes as f64 / records_f,
        cpu_us_per_record: cpu_s * 1e6 / records_f,
        p999_ms: percentile_ms(&calls_us, 0.999),
        slowest_ms: percentile_ms(&calls_us, 1.0),
    }
}

/// The `quantile` of sorted µs durations, in ms (zero if there are none).
fn percentile_ms(sorted_us: &[u32], quantile: f64) -> f64 {
    if sorted_us.is_empty() {
        return 0.0;
    }
    let i = ((sorted_us.len() - 1) as f64 * quantile).round() as usize;
    f64::from(sorted_us[i]) / 1e3
}

fn load(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

/// The policies compared, with their names in the table.
const POLICIES: [(&str, SyncPolicy); 3] = [
    ("Always", SyncPolicy::Always),
    (
        "Interval(1 s)",
        SyncPolicy::Interval(Duration::from_secs(1)),
    ),
    ("Never", SyncPolicy::Never),
];

/// The relaxed-policy A/B: every configuration under every policy, `runs` times over
/// (policies interleaved within a run so a noisy neighbour hits each alike); prints
/// medians and each relaxed policy's ratios to `Always`.
pub fn compare_policies(dir: &Path, configs: &[Config], runs: usize, time: Duration) {
    let mut samples: Vec<Vec<Vec<Sample>>> = vec![vec![Vec::new(); POLICIES.len()]; configs.len()];
    for _ in 0..runs {
        for (c, config) in configs.iter().enumerate() {
            for (p, (_, sync)) in POLICIES.iter().enumerate() {
                samples[c][p].push(log_sample_with(dir, *config, *sync, time));
            }
        }
    }
    println!("\nsync policies side by side (median of {runs}; CPU is the whole process's)");
    println!(
        "| payload | publishers | policy | records/s | ÷ Always | CPU µs/record | ÷ Always | writes/record | syncs/s | p99.9 call ms | slowest call ms |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for (config, by_policy) in configs.iter().zip(&samples) {
        let med = |p: usize, f: fn(&Sample) -> f64| median(by_policy[p].iter().map(f).collect());
        let always_rate = med(0, |s| s.records_per_s);
        let always_cpu = med(0, |s| s.cpu_us_per_record);
        for (p, (name, _)) in POLICIES.iter().enumerate() {
            let rate = med(p, |s| s.records_per_s);
            let cpu = med(p, |s| s.cpu_us_per_record);
            let publishers = match config.1 {
                Publishers::Threads(n) => format!("{n} threads"),
                Publishers::Tasks(n) => format!("{n} async tasks"),
                Publishers::Pipelined(pl) => {
                    format!("{} threads, ≤ {} unconfirmed", pl.publishers, pl.window)
                }
            };
            println!(
                "| {} B | {publishers} | {name} | {rate:.0} | {:.2} | {cpu:.2} | {:.2} | {:.2} | {:.1} | {:.2} | {:.1} |",
                config.0,
                rate / always_rate,
                cpu / always_cpu,
                med(p, |s| s.writes_per_record),
                med(p, |s| s.syncs_per_s),
                med(p, |s| s.p999_ms),
                med(p, |s| s.slowest_ms),
            );
        }
    }
}
