//! Log benchmark: durable append throughput (SyncPolicy::Always, group commit) beside the
//! raw sequential write + fdatasync bandwidth of the same disk, measured in the same run.
//!
//! Run: `cargo bench -p mailroom-store --bench log` (env `LOG_BENCH_DIR` picks the disk,
//! default the system temp dir; `LOG_BENCH_SECS` the seconds per sample, default 2;
//! `LOG_BENCH_RUNS` the samples per figure, default 3; medians are reported).
//!
//! - Raw peer: one thread writes chunks of 1 KiB .. 1 MiB to a temp file, each followed
//!   by `fdatasync`. The best of those bandwidths is the physical limit; the 1 KiB rate
//!   is the disk's fsyncs per second. A second peer runs that loop on 8 threads with a
//!   file each (1 KiB and 64 KiB chunks), since on a VM one thread blocked in fdatasync
//!   can be much slower than the disk.
//! - Log: 1, 8 and 64 threads each append one record at a time (100 B or 1 KiB) for the
//!   sample time; every append returns only after an fdatasync covering it. The file
//!   layer counts fdatasyncs, so records per sync (the group-commit batch) is reported.
//!   One extra run appends 64 records per call from 8 threads, for context.
//! - Async publishers: 64 tasks on one current-thread executor (`futures`' `LocalPool`),
//!   each writing one 1 KiB record (`Log::write`) and then awaiting `Log::durable`: how
//!   the server's connections would publish. The log's sync thread runs the syncs.
//! - Pipelined publishers (`pipelined.rs`): 64 publishers, threads or tasks, each keeping up
//!   to 4 or 16 publishes unconfirmed through the store's public API
//!   (`DurableTopic::publish_deferred`), as Kafka's, NATS's and RabbitMQ's async publishers
//!   do; a message counts once its confirmation came back.
//! - `LOG_BENCH_QUICK=1` runs only the rows the log's throughput targets need (raw 1 KiB for the
//!   syncs/s, 64 KiB, 256 KiB and 1 MiB; 1 KiB × 1 and × 64 threads, 1 KiB × 64 tasks, 64
//!   pipelined threads), for quick A/B comparisons; `LOG_BENCH_QUICK=2` runs only the async
//!   row (for profiling); `LOG_BENCH_QUICK=3` only the sync-policy A/B (`relaxed.rs`:
//!   1 KiB × 1 thread and × 64 pipelined threads under Always, Interval(1 s) and Never,
//!   with the process's CPU per record).
//! - Paired ratios (`LOG_BENCH_PAIRS`, default 8, samples of `LOG_BENCH_PAIR_MS`, default
//!   250): the lone appender against raw 1 KiB syncs, 64 async tasks against raw 64 KiB
//!   and 256 KiB, and 64 pipelined publishers against raw 1 MiB, each pair measured back
//!   to back (see `paired_ratios`).

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

mod pipelined;
mod relaxed;

use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use mailroom_store::log::{Log, SyncPolicy};
use pipelined::Pipelined;

const RAW_CHUNKS: [usize; 6] = [1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20];
const PAYLOADS: [usize; 2] = [100, 1024];
const APPENDERS: [usize; 3] = [1, 8, 64];
/// A second raw peer: several threads syncing their own files at once. On a VM a lone
/// thread blocked in fdatasync can pay a wake-up latency that a busy disk queue does not.
const PARALLEL_THREADS: usize = 8;
const PARALLEL_CHUNKS: [usize; 2] = [1 << 10, 64 << 10];
/// Who publishes: threads calling `Log::append`, or tasks on one executor thread.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Publishers {
    Threads(usize),
    Tasks(usize),
    /// Through the store, each publisher keeping several publishes unconfirmed.
    Pipelined(Pipelined),
}
/// (payload bytes, publishers, records per append).
type Config = (usize, Publishers, usize);
/// One batched run for context: what callers get when they append many records per call.
const BATCHED: Config = (1024, Publishers::Threads(8), 64);
/// How the server's connections would publish: one record, then await durability.
const ASYNC: Config = (1024, Publishers::Tasks(64), 1);
/// 64 publishers, each keeping `window` publishes unconfirmed.
const fn pipelined(threads: bool, window: usize) -> Config {
    let pipelined = Pipelined {
        threads,
        publishers: 64,
        window,
    };
    (1024, Publishers::Pipelined(pipelined), 1)
}
const PIPELINED: [Config; 3] = [
    pipelined(true, 4),
    pipelined(true, 16),
    pipelined(false, 16),
];
/// `LOG_BENCH_QUICK`: the raw chunks and log rows the log's throughput targets need.
const QUICK_RAW_CHUNKS: [usize; 4] = [1 << 10, 64 << 10, 256 << 10, 1 << 20];
const QUICK_CONFIGS: [Config; 4] = [
    (1024, Publishers::Threads(1), 1),
    (1024, Publishers::Threads(64), 1),
    ASYNC,
    pipelined(true, 16),
];

/// `LOG_BENCH_QUICK=3`: the rows run under every sync policy (`relaxed.rs`).
const RELAXED_CONFIGS: [Config; 2] = [(1024, Publishers::Threads(1), 1), pipelined(true, 16)];

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// Bytes per second of write(chunk) + fdatasync in a loop for `time`.
fn raw_sample(dir: &Path, chunk: usize, time: Duration) -> f64 {
    let path = dir.join("raw.bin");
    let file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let data = vec![0x5au8; chunk];
    let start = Instant::now();
    let mut written = 0u64;
    while start.elapsed() < time {
        file.write_all_at(&data, written).unwrap();
        file.sync_data().unwrap();
        written += chunk as u64;
    }
    let rate = written as f64 / start.elapsed().as_secs_f64();
    std::fs::remove_file(&path).unwrap();
    rate
}

/// Aggregate (bytes per second, syncs per second) of `threads` threads, each running the
/// raw loop on its own file: how much the disk does when it is kept busy.
fn raw_parallel_sample(dir: &Path, threads: usize, chunk: usize, time: Duration) -> (f64, f64) {
    let rates: Vec<f64> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let dir = dir.join(format!("raw-{i}"));
                std::fs::create_dir_all(&dir).unwrap();
                scope.spawn(move || raw_sample(&dir, chunk, time))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let bytes: f64 = rates.iter().sum();
    (bytes, bytes / chunk as f64)
}

/// (records per second, syncs per second) of the publishers appending `batch` records of
/// `payload_bytes` per call for `time`, under `SyncPolicy::Always`.
fn log_sample(dir: &Path, config: Config, time: Duration) -> (f64, f64) {
    let sample = relaxed::log_sample_with(dir, config, SyncPolicy::Always, time);
    (sample.records_per_s, sample.syncs_per_s)
}

/// `tasks` tasks on one current-thread executor, each writing one record and awaiting
/// its durability in a loop for `time`; returns the records appended.
pub(crate) fn run_tasks(log: &Arc<Log>, payload_bytes: usize, tasks: usize, time: Duration) -> u64 {
    let mut pool = LocalPool::new();
    let start = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let log = Arc::clone(log);
            let task = async move {
                let payload = vec![0xa5u8; payload_bytes];
                let mut appended = 0u64;
                while start.elapsed() < time {
                    let written = log.write(&[&payload], 0).unwrap();
                    log.durable(written.end).await.unwrap();
                    appended += 1;
                }
                appended
            };
            pool.spawner().spawn_local_with_handle(task).unwrap()
        })
        .collect();
    pool.run_until(futures::future::join_all(handles))
        .into_iter()
        .sum()
}

/// `appenders` threads calling `Log::append` in a loop for `time`; returns the records
/// appended and every call's duration in µs, sorted.
pub(crate) fn run_threads(
    log: &Arc<Log>,
    (payload_bytes, _, batch): Config,
    appenders: usize,
    time: Duration,
) -> (u64, Vec<u32>) {
    let barrier = Arc::new(Barrier::new(appenders + 1));
    let handles: Vec<_> = (0..appenders)
        .map(|_| {
            let log = Arc::clone(log);
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                let payload = vec![0xa5u8; payload_bytes];
                let payloads = vec![payload.as_slice(); batch];
                barrier.wait();
                let start = Instant::now();
                let mut appended = 0u64;
                let mut calls_us = Vec::new();
                let mut now = start;
                while now - start < time {
                    log.append(&payloads, 0).unwrap();
                    appended += batch as u64;
                    let before = now;
                    now = Instant::now();
                    calls_us.push((now - before).as_micros().min(u32::MAX.into()) as u32);
                }
                (appended, calls_us)
            })
        })
        .collect();
    barrier.wait();
    let (mut appended, mut calls_us) = (0, Vec::new());
    for handle in handles {
        let (n, calls) = handle.join().unwrap();
        appended += n;
        calls_us.extend(calls);
    }
    calls_us.sort_unstable();
    (appended, calls_us)
}

/// Ratios measured pair by pair: a raw sample and a log sample right after it, many times
/// over, so each ratio compares two figures taken under the same neighbours' load (on a
/// shared VM the disk's rate can swing 5x within a minute, which the medians above cannot
/// undo). Prints the median and the range of the per-pair ratios.
fn paired_ratios(dir: &Path, pairs: usize, time: Duration) {
    let mut lone = Vec::new();
    let mut async_64k = Vec::new();
    let mut async_256k = Vec::new();
    let mut pipelined_1m = Vec::new();
    for _ in 0..pairs {
        let raw_syncs = raw_sample(dir, 1 << 10, time) / 1024.0;
        let (appends, _) = log_sample(dir, QUICK_CONFIGS[0], time);
        lone.push(appends / raw_syncs);
        let raw_64k = raw_sample(dir, 64 << 10, time);
        let raw_256k = raw_sample(dir, 256 << 10, time);
        let (records, _) = log_sample(dir, ASYNC, time);
        let bytes = records * ASYNC.0 as f64;
        async_64k.push(bytes / raw_64k);
        async_256k.push(bytes / raw_256k);
        let raw_1m = raw_sample(dir, 1 << 20, time);
        let config = QUICK_CONFIGS[3];
        let (records, _) = log_sample(dir, config, time);
        pipelined_1m.push(records * config.0 as f64 / raw_1m);
    }
    println!(
        "
paired ratios ({pairs} pairs, {} s per sample; median [min, max])",
        time.as_secs_f64()
    );
    println!("| ratio | median | range |");
    println!("|---|---|---|");
    for (name, mut ratios) in [
        ("1 thread × 1 KiB appends/s ÷ raw 1 KiB syncs/s", lone),
        ("64 async tasks × 1 KiB MB/s ÷ raw 64 KiB MB/s", async_64k),
        ("64 async tasks × 1 KiB MB/s ÷ raw 256 KiB MB/s", async_256k),
        (
            "64 threads × 1 KiB, ≤ 16 unconfirmed each, MB/s ÷ raw 1 MiB MB/s",
            pipelined_1m,
        ),
    ] {
        ratios.sort_by(f64::total_cmp);
        println!(
            "| {name} | {:.2} | [{:.2}, {:.2}] |",
            ratios[ratios.len() / 2],
            ratios[0],
            ratios[ratios.len() - 1]
        );
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing useful: a
    // short smoke run keeps that path working without spending minutes.
    let smoke = !std::env::args().any(|a| a == "--bench");
    let secs = if smoke {
        0.05
    } else {
        env_or("LOG_BENCH_SECS", 2) as f64
    };
    let runs = if smoke {
        1
    } else {
        env_or("LOG_BENCH_RUNS", 3).max(1) as usize
    };
    let time = Duration::from_secs_f64(secs);
    let base = std::env::var_os("LOG_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = tempfile::tempdir_in(base).unwrap();
    println!(
        "log bench in {} ({secs} s per sample, median of {runs})",
        dir.path().display()
    );

    // Raw and log samples alternate, run after run, so a noisy neighbour hits both alike.
    let quick = env_or("LOG_BENCH_QUICK", 0);
    if quick == 3 || smoke {
        relaxed::compare_policies(dir.path(), &RELAXED_CONFIGS, runs, time);
        if quick == 3 {
            return;
        }
    }
    let (raw_chunks, parallel_chunks, configs): (&[usize], &[usize], Vec<Config>) = if quick == 2 {
        (&QUICK_RAW_CHUNKS[..1], &[], vec![ASYNC])
    } else if quick != 0 {
        (&QUICK_RAW_CHUNKS, &[], QUICK_CONFIGS.to_vec())
    } else {
        let mut configs: Vec<Config> = PAYLOADS
            .iter()
            .flat_map(|&p| {
                APPENDERS
                    .iter()
                    .map(move |&a| (p, Publishers::Threads(a), 1))
            })
            .collect();
        configs.push(BATCHED);
        configs.push(ASYNC);
        configs.extend(PIPELINED);
        (&RAW_CHUNKS, &PARALLEL_CHUNKS, configs)
    };
    let mut raw: Vec<Vec<f64>> = vec![Vec::new(); raw_chunks.len()];
    let mut logs: Vec<Vec<(f64, f64)>> = vec![Vec::new(); configs.len()];
    let mut parallel: Vec<Vec<(f64, f64)>> = vec![Vec::new(); parallel_chunks.len()];
    for _ in 0..runs {
        for (i, chunk) in parallel_chunks.iter().enumerate() {
            parallel[i].push(raw_parallel_sample(
                dir.path(),
                PARALLEL_THREADS,
                *chunk,
                time,
            ));
        }
        for (i, chunk) in raw_chunks.iter().enumerate() {
            raw[i].push(raw_sample(dir.path(), *chunk, time));
        }
        for (i, config) in configs.iter().enumerate() {
            logs[i].push(log_sample(dir.path(), *config, time));
        }
    }

    println!("\nraw write + fdatasync, one thread");
    println!("| chunk | MB/s | syncs/s |");
    println!("|---|---|---|");
    let raw: Vec<f64> = raw.into_iter().map(median).collect();
    for (chunk, rate) in raw_chunks.iter().zip(&raw) {
        println!(
            "| {} KiB | {:.1} | {:.0} |",
            chunk >> 10,
            rate / 1e6,
            rate / *chunk as f64
        );
    }
    println!("\nraw write + fdatasync, {PARALLEL_THREADS} threads, one file each (aggregate)");
    println!("| chunk | MB/s | syncs/s |");
    println!("|---|---|---|");
    for (chunk, samples) in parallel_chunks.iter().zip(&parallel) {
        let bytes = median(samples.iter().map(|s| s.0).collect());
        let syncs = median(samples.iter().map(|s| s.1).collect());
        println!("| {} KiB | {:.1} | {syncs:.0} |", chunk >> 10, bytes / 1e6);
    }
    let raw_best = raw.iter().copied().fold(0f64, f64::max);
    let raw_syncs_per_s = raw[0] / raw_chunks[0] as f64;
    // The raw rate at the smallest chunk holding as many bytes as one log sync carries.
    let raw_at = |bytes_per_sync: f64| {
        let i = raw_chunks
            .iter()
            .position(|&c| c as f64 >= bytes_per_sync)
            .unwrap_or(raw_chunks.len() - 1);
        (raw_chunks[i], raw[i])
    };

    println!("\nlog append, SyncPolicy::Always (MB/s counts payload bytes)");
    println!(
        "| payload | publishers | records per append | records/s | MB/s | ÷ raw best | records per fdatasync | ÷ raw at same bytes per sync | appends/s ÷ raw 1 KiB syncs/s |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for ((payload_bytes, publishers, batch), samples) in configs.iter().zip(logs) {
        let publishers = match publishers {
            Publishers::Threads(n) => format!("{n} threads"),
            Publishers::Tasks(n) => format!("{n} async tasks"),
            Publishers::Pipelined(p) => format!(
                "{} {}, ≤ {} unconfirmed each",
                p.publishers,
                if p.threads { "threads" } else { "async tasks" },
                p.window
            ),
        };
        let rate = median(samples.iter().map(|s| s.0).collect());
        let syncs = median(samples.iter().map(|s| s.1).collect());
        let bytes = rate * *payload_bytes as f64;
        let per_sync = rate / syncs.max(f64::MIN_POSITIVE);
        let disk_bytes_per_sync =
            per_sync * (*payload_bytes + mailroom_store::record::HEADER_BYTES) as f64;
        let (chunk, raw_same) = raw_at(disk_bytes_per_sync);
        println!(
            "| {payload_bytes} B | {publishers} | {batch} | {rate:.0} | {:.2} | {:.1}% | {per_sync:.1} | {:.0}% (raw {} KiB) | {:.2} |",
            bytes / 1e6,
            100.0 * bytes / raw_best,
            100.0 * bytes / raw_same,
            chunk >> 10,
            rate / *batch as f64 / raw_syncs_per_s,
        );
    }
    let (pairs, pair_ms) = if smoke {
        (1, 20)
    } else {
        (
            env_or("LOG_BENCH_PAIRS", 8) as usize,
            env_or("LOG_BENCH_PAIR_MS", 250),
        )
    };
    if pairs > 0 && quick != 2 {
        paired_ratios(dir.path(), pairs, Duration::from_millis(pair_ms));
    }
}
