//! Store benchmark: open time with 1M and 10M messages and 1,000 groups, and durable
//! poll + ack cycles/s, each beside a peer measured in the same run.
//!
//! Run: `cargo bench -p mailroom-store --bench store` (env `STORE_BENCH_DIR` picks the
//! disk, default the system temp dir; `STORE_BENCH_SIZES=1000000,10000000` the sizes,
//! empty to skip the open-time part).
//!
//! - Open time's peer is reading every byte of the topic's files once (what any open
//!   that re-reads the log must at least pay), measured on the same files right after.
//! - Poll + ack's peer is the disk's own `write` + `fdatasync` rate on a small file:
//!   a durable poll + ack needs two synced records, so one group used by one thread is
//!   bounded by half of it; concurrent groups share syncs (group commit).
//! - One group, many consumers, beside the same peer: W = 16 threads each
//!   `poll_as` + `ack` on ONE group with `max_in_flight` 16 (their transitions share
//!   syncs, since a group's lock is not held across its `fdatasync`), and one thread doing
//!   `poll_batch(64)` + `ack_batch` on a group with `max_in_flight` 64 (two syncs per 64
//!   cycles). `STORE_BENCH_ONE_GROUP_ONLY=1` runs only this part.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use mailroom::group::{DeliveryId, GroupConfig};
use mailroom::topic::StartPosition;
use mailroom_store::log::{LogOptions, SyncPolicy};
use mailroom_store::{DurableTopic, Store, StoreOptions};

const GROUPS: usize = 1_000;
const PAYLOAD_BYTES: usize = 32;
const BATCH: usize = 10_000;
const OPEN_RUNS: usize = 5;
/// Group records written after the last checkpoint, so open also replays a tail.
const TAIL_RECORDS: usize = 2_000;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn fast_options() -> StoreOptions {
    StoreOptions {
        log: LogOptions {
            sync: SyncPolicy::Never,
            ..LogOptions::default()
        },
        ..StoreOptions::default()
    }
}

/// Builds a store of `messages` messages and GROUPS groups with some state each, a
/// checkpoint, and a tail of group records after it.
fn build(dir: &Path, messages: u64) {
    let store = Store::open(dir, fast_options()).unwrap();
    store.create_topic("t").unwrap();
    let topic = store.topic("t").unwrap();
    let batch: Vec<Bytes> = (0..BATCH)
        .map(|_| Bytes::from(vec![7u8; PAYLOAD_BYTES]))
        .collect();
    let mut published = 0;
    while published < messages {
        let count = BATCH.min((messages - published) as usize);
        topic.publish_batch(&batch[..count]).unwrap();
        published += count as u64;
    }
    for g in 0..GROUPS {
        topic.create_group(&format!("group-{g:04}"), 3).unwrap();
    }
    cycle_groups(&topic, GROUPS * 2);
    store.sync().unwrap();
    store.checkpoint().unwrap();
    cycle_groups(&topic, TAIL_RECORDS / 2);
    store.sync().unwrap();
}

/// Polls and acks (or nacks) round-robin over the groups, `cycles` times.
fn cycle_groups(topic: &DurableTopic, cycles: usize) {
    for i in 0..cycles {
        let group = format!("group-{:04}", i % GROUPS);
        let delivery = topic.poll(&group).unwrap().unwrap();
        if i % 7 == 0 {
            topic.nack(&group, delivery.id()).unwrap();
        } else {
            topic.ack(&group, delivery.id()).unwrap();
        }
    }
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_under(&path, out);
        } else {
            out.push(path);
        }
    }
}

fn read_everything(dir: &Path) -> u64 {
    let mut files = Vec::new();
    files_under(dir, &mut files);
    files
        .iter()
        .map(|file| std::fs::read(file).unwrap().len() as u64)
        .sum()
}

fn bench_open(base: &Path, messages: u64) {
    let dir = base.join(format!("open-{messages}"));
    let _ = std::fs::remove_dir_all(&dir);
    let started = Instant::now();
    build(&dir, messages);
    let build_time = started.elapsed();
    let opens: Vec<Duration> = (0..OPEN_RUNS)
        .map(|_| {
            let started = Instant::now();
            let store = Store::open(&dir, StoreOptions::default()).unwrap();
            let elapsed = started.elapsed();
            let topic = store.topic("t").unwrap();
            assert_eq!(topic.len(), messages);
            assert_eq!(topic.groups().len(), GROUPS);
            elapsed
        })
        .collect();
    let reads: Vec<(Duration, u64)> = (0..OPEN_RUNS)
        .map(|_| {
            let started = Instant::now();
            let bytes = read_everything(&dir);
            (started.elapsed(), bytes)
        })
        .collect();
    let bytes = reads[0].1;
    let read = median(reads.into_iter().map(|(time, _)| time).collect());
    let open = median(opens);
    println!(
        "open  {messages:>9} msgs, {GROUPS} groups, {:.0} MB on disk: open median {:.1} ms | \
         peer: read all files once {:.1} ms | ratio open/read {:.4} (built in {:.1} s)",
        bytes as f64 / 1e6,
        open.as_secs_f64() * 1e3,
        read.as_secs_f64() * 1e3,
        open.as_secs_f64() / read.as_secs_f64(),
        build_time.as_secs_f64(),
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The disk's rate of 64-byte `write` + `fdatasync` pairs per second.
fn raw_sync_rate(base: &Path, duration: Duration) -> f64 {
    let path = base.join("raw-sync");
    let mut file = std::fs::File::create(&path).unwrap();
    let started = Instant::now();
    let mut syncs = 0u64;
    while started.elapsed() < duration {
        file.write_all(&[1u8; 64]).unwrap();
        file.sync_data().unwrap();
        syncs += 1;
    }
    let rate = syncs as f64 / started.elapsed().as_secs_f64();
    std::fs::remove_file(&path).unwrap();
    rate
}

/// Durable poll + ack cycles/s with `groups` groups, one thread each.
fn poll_ack_rate(base: &Path, groups: usize, duration: Duration) -> f64 {
    let dir = base.join(format!("poll-ack-{groups}"));
    let _ = std::fs::remove_dir_all(&dir);
    let store = Store::open(&dir, StoreOptions::default()).unwrap();
    store.create_topic("t").unwrap();
    let topic = store.topic("t").unwrap();
    let batch: Vec<Bytes> = (0..BATCH).map(|_| Bytes::from(vec![1u8; 100])).collect();
    for _ in 0..10 {
        topic.publish_batch(&batch).unwrap();
    }
    for g in 0..groups {
        topic.create_group(&format!("g{g}"), 3).unwrap();
    }
    let started = Instant::now();
    let cycles: u64 = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..groups)
            .map(|g| {
                let topic = topic.clone();
                scope.spawn(move || {
                    let group = format!("g{g}");
                    let mut done = 0u64;
                    while started.elapsed() < duration {
                        let delivery = topic.poll(&group).unwrap().expect("enough messages");
                        topic.ack(&group, delivery.id()).unwrap();
                        done += 1;
                    }
                    done
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    let rate = cycles as f64 / started.elapsed().as_secs_f64();
    drop((store, topic));
    std::fs::remove_dir_all(&dir).unwrap();
    rate
}

/// A fresh store in `dir` with `messages` 100-byte messages and group `g` with
/// `max_in_flight` = `window`, under the default `SyncPolicy::Always`.
fn one_group_store(dir: &Path, messages: usize, window: u32) -> (Store, DurableTopic) {
    let _ = std::fs::remove_dir_all(dir);
    let store = Store::open(dir, StoreOptions::default()).unwrap();
    store.create_topic("t").unwrap();
    let topic = store.topic("t").unwrap();
    let batch: Vec<Bytes> = (0..BATCH).map(|_| Bytes::from(vec![1u8; 100])).collect();
    for _ in 0..messages.div_ceil(BATCH) {
        topic.publish_batch(&batch).unwrap();
    }
    let config = GroupConfig::new(3).with_max_in_flight(window);
    topic
        .create_group_with("g", StartPosition::Earliest, config)
        .unwrap();
    (store, topic)
}

/// Durable poll + ack cycles/s on ONE group with `max_in_flight` = `workers`, `workers`
/// threads each polling as itself (`poll_as`) and acking. `max_in_flight` bounds the
/// window from the group's position, so a worker sometimes finds nothing to take while
/// another still holds the oldest message; it yields and polls again.
fn one_group_workers_rate(base: &Path, workers: u32, duration: Duration) -> f64 {
    let dir = base.join(format!("one-group-{workers}"));
    let (store, topic) = one_group_store(&dir, 200_000, workers);
    let started = Instant::now();
    let cycles: u64 = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..workers)
            .map(|w| {
                let topic = topic.clone();
                scope.spawn(move || {
                    let name = format!("w{w}");
                    let mut done = 0u64;
                    while started.elapsed() < duration {
                        // The window of W messages from the position is full while a slower
                        // worker holds its oldest one: nothing to hand out now, try again.
                        let Some(delivery) = topic.poll_as("g", &name).unwrap() else {
                            std::thread::yield_now();
                            continue;
                        };
                        topic.ack("g", delivery.id()).unwrap();
                        done += 1;
                    }
                    done
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).sum()
    });
    let rate = cycles as f64 / started.elapsed().as_secs_f64();
    drop((store, topic));
    std::fs::remove_dir_all(&dir).unwrap();
    rate
}

/// Deliveries per batch in [`one_group_batch_rate`].
const POLL_BATCH_MAX: usize = 64;

/// Durable poll + ack cycles/s on ONE group with `max_in_flight` = `POLL_BATCH_MAX`, one
/// thread doing `poll_batch(POLL_BATCH_MAX)` then `ack_batch` of what it got.
fn one_group_batch_rate(base: &Path, duration: Duration) -> f64 {
    let dir = base.join("one-group-batch");
    let (store, topic) = one_group_store(&dir, 2_000_000, POLL_BATCH_MAX as u32);
    let started = Instant::now();
    let mut cycles = 0u64;
    while started.elapsed() < duration {
        let batch = topic.poll_batch("g", None, POLL_BATCH_MAX).unwrap();
        assert_eq!(batch.len(), POLL_BATCH_MAX, "enough messages");
        let ids: Vec<DeliveryId> = batch.iter().map(|delivery| delivery.id()).collect();
        let acked = topic.ack_batch("g", &ids).unwrap();
        assert!(acked.iter().all(Result::is_ok));
        cycles += ids.len() as u64;
    }
    let rate = cycles as f64 / started.elapsed().as_secs_f64();
    drop((store, topic));
    std::fs::remove_dir_all(&dir).unwrap();
    rate
}

/// The one-group figures, each beside the raw sync rate measured right before it.
fn bench_one_group(base: &Path, duration: Duration) {
    let raw = raw_sync_rate(base, duration);
    let rate = one_group_workers_rate(base, 1, duration);
    println!(
        "one group, W=1, 1 thread poll_as+ack: {rate:.0} cycles/s | peer: raw 64 B \
         write+fdatasync {raw:.0}/s | ratio to raw/2: {:.2}",
        rate / (raw / 2.0)
    );
    let raw = raw_sync_rate(base, duration);
    let rate = one_group_workers_rate(base, 16, duration);
    println!(
        "one group, W=16, 16 threads poll_as+ack: {rate:.0} cycles/s | peer: raw 64 B \
         write+fdatasync {raw:.0}/s | ratio to raw/2: {:.2}",
        rate / (raw / 2.0)
    );
    let raw = raw_sync_rate(base, duration);
    let rate = one_group_batch_rate(base, duration);
    println!(
        "one group, W=64, 1 thread poll_batch(64)+ack_batch: {rate:.0} cycles/s | peer: raw \
         64 B write+fdatasync {raw:.0}/s | ratio to raw/2: {:.2}",
        rate / (raw / 2.0)
    );
}

fn main() {
    // `cargo test --benches` runs this with `--bench` absent; do nothing then.
    if !std::env::args().any(|arg| arg == "--bench") {
        return;
    }
    let base = std::env::var_os("STORE_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
        .join("mailroom-store-bench");
    std::fs::create_dir_all(&base).unwrap();
    // The disk is shared and noisy: measure its sync rate right beside each figure.
    let duration = Duration::from_secs(3);
    if std::env::var_os("STORE_BENCH_ONE_GROUP_ONLY").is_some() {
        bench_one_group(&base, duration);
        let _ = std::fs::remove_dir_all(&base);
        return;
    }
    let sizes: Vec<u64> = std::env::var("STORE_BENCH_SIZES")
        .unwrap_or_else(|_| "1000000,10000000".into())
        .split(',')
        .filter(|size| !size.trim().is_empty())
        .map(|size| size.trim().parse().expect("a message count"))
        .collect();
    for messages in sizes {
        bench_open(&base, messages);
    }
    for groups in [1, 4, 16] {
        let raw = raw_sync_rate(&base, duration);
        let rate = poll_ack_rate(&base, groups, duration);
        println!(
            "cycle durable poll+ack, {groups:>2} groups: {rate:.0} cycles/s | peer: raw 64 B \
             write+fdatasync {raw:.0}/s | ratio to raw/2 (2 synced records per cycle): {:.2}",
            rate / (raw / 2.0)
        );
    }
    bench_one_group(&base, duration);
    let _ = std::fs::remove_dir_all(&base);
}
