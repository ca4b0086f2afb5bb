//! The disk's own limit for the strict single-publisher row: one thread appending a
//! payload-sized chunk to a file and `fdatasync`ing it, in a loop, with nothing else in the
//! way (no network, no broker). A durable one-message-per-request publish can go no faster
//! than this on the same disk, so the strict unbatched publish row reads as a fraction of it.
//!
//! Correctness: afterwards the file holds exactly `count` chunks of `payload_bytes`.

use std::fs::File;
use std::io::Write as _;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context as _, Result};

use super::Measured;
use crate::ledger::Verdict;
use crate::payload;
use crate::report::{latency_histogram, record_us};

/// The file the loop appends to, inside the directory it is given; removed afterwards.
pub const FILE_NAME: &str = "mailroom-bench-disk";

/// Appends `count` chunks of `payload_bytes` to a fresh file in `dir`, each followed by an
/// `fdatasync` before the next; latency per chunk is write + sync.
///
/// # Errors
/// When the file cannot be created, written or synced.
///
/// ```
/// let dir = std::env::temp_dir().join(format!("disk-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let measured = mailroom_bench::workload::disk::run(&dir, 3, 1024).unwrap();
/// assert_eq!(measured.messages, 3);
/// assert!(measured.verdict.passed);
/// std::fs::remove_dir_all(&dir).unwrap();
/// ```
pub fn run(dir: &Path, count: u64, payload_bytes: usize) -> Result<Measured> {
    let path = dir.join(FILE_NAME);
    let mut file = File::create(&path).with_context(|| format!("creating {}", path.display()))?;
    let mut latency = latency_histogram();
    let started = Instant::now();
    for seq in 0..count {
        // A fresh payload per chunk, as a publisher would send: the same bytes as the
        // brokers' runs get.
        let chunk = payload::encode(seq, payload_bytes);
        let sent = Instant::now();
        file.write_all(&chunk).context("write")?;
        file.sync_data().context("fdatasync")?;
        record_us(&mut latency, sent.elapsed().as_micros() as u64);
    }
    let elapsed = started.elapsed();
    let length = file.metadata().context("stat")?.len();
    drop(file);
    std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
    let expected = count * payload_bytes as u64;
    let problems = if length == expected {
        Vec::new()
    } else {
        vec![format!(
            "the file holds {length} bytes, expected {expected}"
        )]
    };
    Ok(Measured {
        messages: count,
        elapsed,
        latency,
        verdict: Verdict::from_problems(problems),
        subscribers: Vec::new(),
        notes: vec![format!(
            "disk: {payload_bytes}-byte write + fdatasync per message on one thread, no broker"
        )],
        usage: None,
    })
}
