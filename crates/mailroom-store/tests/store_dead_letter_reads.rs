//! Reads of dead letters while compacting checkpoints move them: a read pins the groups
//! log's segments from the moment it chooses its records until its last payload is read,
//! so it never has to start again, however many compactions run meanwhile.

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use mailroom::group::{NackKind, NackOptions};
use mailroom::topic::Nack;
use mailroom_store::log::SyncPolicy;
use mailroom_store::storage::{Op, SimStorage, Storage, Watched, Watcher};
use mailroom_store::DurableTopic;
use mailroom_testkit::store::{ack_traffic, compacting_options, open_store_on, STORE_DIR};
use parking_lot::{Condvar, Mutex};

/// How many of a reader thread's reads of groups-log segments are held back.
const HOLDS_PER_READER: u32 = 6;

/// The longest a held read waits for the segments it may read from to be deleted.
const HOLD_MAX: Duration = Duration::from_millis(300);

/// How long the readers may take, held reads included, before the test fails.
const READERS_TIME_MAX: Duration = Duration::from_secs(60);

/// Counts a reader thread out of `readers_running` when it ends, by panic too.
struct Finished<'a>(&'a AtomicUsize);

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Release);
    }
}

/// The dead letters the readers read back.
const DEAD_LETTERS: usize = 12;

thread_local! {
    /// How many more groups-log reads of this thread to hold back (0 on every thread but
    /// the readers').
    static HOLDS_LEFT: Cell<u32> = const { Cell::new(0) };
}

fn groups_dir() -> PathBuf {
    Path::new(STORE_DIR).join("topics/t/groups")
}

fn is_groups_segment(path: &Path) -> bool {
    path.parent() == Some(groups_dir().as_path()) && path.extension().is_some_and(|e| e == "log")
}

/// Holds a reader's read of a groups-log segment until that segment is deleted (what a
/// compaction and the checkpoint after it do to the records the read chose, the rest of
/// which lie beside or before it), or until [`HOLD_MAX`] has passed; counts which.
#[derive(Debug)]
struct HoldReads {
    sim: SimStorage,
    removals: Mutex<u64>,
    removed: Condvar,
    /// Holds that ended because the segment was deleted under the reader.
    deleted_under_reader: AtomicU64,
    /// Holds that ended at [`HOLD_MAX`] with the segment still there.
    outlasted: AtomicU64,
}

impl Watcher for HoldReads {
    fn before(&self, op: Op<'_>) {
        let Op::Read { path, .. } = op else { return };
        if !is_groups_segment(path) || HOLDS_LEFT.get() == 0 {
            return;
        }
        HOLDS_LEFT.set(HOLDS_LEFT.get() - 1);
        let gone = || !self.sim.exists(path).unwrap_or(true);
        let deadline = Instant::now() + HOLD_MAX;
        let mut removals = self.removals.lock();
        while !gone() && !self.removed.wait_until(&mut removals, deadline).timed_out() {}
        let counter = if gone() {
            &self.deleted_under_reader
        } else {
            &self.outlasted
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn after(&self, op: Op<'_>) {
        if let Op::Tree(path) = op {
            if is_groups_segment(path) {
                *self.removals.lock() += 1;
                self.removed.notify_all();
            }
        }
    }
}

fn payload(index: usize) -> Bytes {
    Bytes::from(format!("dead letter {index:04} {}", "x".repeat(index * 3)))
}

/// Dead-letters [`DEAD_LETTERS`] messages in group `g` (one attempt); returns their
/// (offset, payload).
fn dead_letter(topic: &DurableTopic) -> Vec<(u64, Bytes)> {
    (0..DEAD_LETTERS)
        .map(|index| {
            let offset = topic.publish(payload(index)).unwrap();
            let delivery = topic
                .poll("g")
                .unwrap()
                .expect("the message just published");
            let nack = NackOptions::new(NackKind::Reject);
            let outcome = topic.nack_with("g", delivery.id(), nack).unwrap();
            assert_eq!(outcome, Nack::DeadLettered);
            (offset, payload(index))
        })
        .collect()
}

// Proves a read of dead letters holds off the deletion of the segments it reads from:
// with every read of a segment held back until a compacting checkpoint could have deleted
// them under it, none is ever deleted under a reader, and every read answers the right
// payloads at once. A read that instead retried would here retry once per held read, so
// a small retry bound would run out (4 did: see the fix's commit).
#[test]
fn dead_letter_reads_pin_the_segments_they_read() {
    let sim = SimStorage::new();
    let watcher = Arc::new(HoldReads {
        sim: sim.clone(),
        removals: Mutex::new(0),
        removed: Condvar::new(),
        deleted_under_reader: AtomicU64::new(0),
        outlasted: AtomicU64::new(0),
    });
    let storage = Watched::new(Arc::new(sim.clone()), Arc::clone(&watcher));
    let store = open_store_on(
        Arc::new(storage),
        &compacting_options(32, SyncPolicy::Always),
    );
    store.create_topic("t").unwrap();
    let topic = store.topic("t").unwrap();
    topic.create_group("g", 1).unwrap();
    let expected = dead_letter(&topic);
    // Enough traffic first that the dead letters' records lie in old segments.
    ack_traffic(&topic, &["g"], b"ordinary traffic", 200);
    let readers_running = AtomicUsize::new(2);
    std::thread::scope(|scope| {
        for limit in [3, DEAD_LETTERS] {
            let (topic, expected, running) = (&topic, &expected, &readers_running);
            scope.spawn(move || {
                // Counted out even when a read fails, so the traffic below stops.
                let _done = Finished(running);
                HOLDS_LEFT.set(HOLDS_PER_READER);
                while HOLDS_LEFT.get() > 0 {
                    let page = topic.dead_letter_page("g", 0, limit).unwrap();
                    let got: Vec<(u64, Bytes)> = page
                        .letters
                        .into_iter()
                        .map(|d| (d.offset, d.message))
                        .collect();
                    assert_eq!(got[..], expected[..limit]);
                }
            });
        }
        let deadline = Instant::now() + READERS_TIME_MAX;
        while readers_running.load(Ordering::Acquire) > 0 {
            assert!(
                Instant::now() < deadline,
                "readers still running after {READERS_TIME_MAX:?}"
            );
            ack_traffic(&topic, &["g"], b"ordinary traffic", 10);
        }
    });
    // Deletion held off by the readers happens once they are done.
    ack_traffic(&topic, &["g"], b"ordinary traffic", 200);
    let deleted_under_reader = watcher.deleted_under_reader.load(Ordering::Relaxed);
    let outlasted = watcher.outlasted.load(Ordering::Relaxed);
    assert_eq!(deleted_under_reader, 0, "segments deleted under a reader");
    assert_eq!(outlasted, 2 * u64::from(HOLDS_PER_READER));
    assert!(*watcher.removals.lock() > 0, "the traffic compacted");
    let all = topic.dead_letter_info("g").unwrap();
    let got: Vec<(u64, Bytes)> = all.into_iter().map(|d| (d.offset, d.message)).collect();
    assert_eq!(got, expected);
}
