//! The index file is written in batches (64 entries per `pwrite`, and at every sync,
//! roll and drop), not one entry per index interval; a process crash that loses queued
//! entries costs recovery a longer scan, never a record.

use std::path::Path;

use mailroom_store::log::{Log, LogOptions, SyncPolicy};
use mailroom_store::record::HEADER_BYTES;
use mailroom_store::storage::SimStorage;
use mailroom_testkit::store::{numbered_payload, open_log};

const DIR: &str = "/log";
const INDEX: &str = "/log/00000000000000000000.idx";
const ENTRY_BYTES: usize = 8;
/// Entries queued before they are written (the log's `INDEX_PENDING_ENTRIES_MAX`).
const BATCH_ENTRIES: usize = 64;
const PAYLOAD_BYTES: usize = 76;

fn options(sync: SyncPolicy) -> LogOptions {
    LogOptions {
        // One index entry per record: every record is exactly one interval long.
        index_interval_bytes: (HEADER_BYTES + PAYLOAD_BYTES) as u32,
        sync,
        ..LogOptions::default()
    }
}

fn payload(i: u64) -> Vec<u8> {
    numbered_payload(i, PAYLOAD_BYTES)
}

fn index_bytes(storage: &SimStorage) -> usize {
    storage.file_bytes(Path::new(INDEX)).map_or(0, |b| b.len())
}

/// Checks that `log` holds exactly records `0..count`, each readable by offset.
fn assert_holds(log: &Log, count: u64) {
    assert_eq!(log.end(), count);
    for i in 0..count {
        let record = log.read(i).unwrap().expect("record");
        assert_eq!(&record.payload[..], &payload(i)[..], "offset {i}");
    }
}

// Proves that under Never entries reach the index file only a batch at a time, that a
// second log opened on the same files while the first still runs (what a kill -9 leaves:
// the page cache without the process's queued entries) recovers and reads every record,
// and that dropping the log writes the queued entries.
#[test]
fn index_entries_are_written_a_batch_at_a_time() {
    let storage = SimStorage::new();
    let log = open_log(&storage, DIR, options(SyncPolicy::Never)).unwrap();
    // Records 1..=64 each earn an entry (position 0 never does): 64 entries at record 64.
    for i in 0..BATCH_ENTRIES as u64 {
        log.append(&[&payload(i)], i).unwrap();
    }
    assert_eq!(index_bytes(&storage), 0, "an entry was written alone");
    let queued_more = 10u64;
    let count = BATCH_ENTRIES as u64 + queued_more;
    for i in BATCH_ENTRIES as u64..count {
        log.append(&[&payload(i)], i).unwrap();
    }
    assert_eq!(index_bytes(&storage), BATCH_ENTRIES * ENTRY_BYTES);
    let as_after_kill = open_log(&storage, DIR, options(SyncPolicy::Never)).unwrap();
    assert_holds(&as_after_kill, count);
    drop(as_after_kill);
    drop(log);
    let entries = count as usize - 1;
    assert_eq!(index_bytes(&storage), entries * ENTRY_BYTES);
}

// Proves that under Always every sync round writes the queued entries with the records,
// so a power cut keeps the index of everything that was confirmed.
#[test]
fn always_writes_queued_entries_each_round() {
    let storage = SimStorage::new();
    let log = open_log(&storage, DIR, options(SyncPolicy::Always)).unwrap();
    for i in 0..5u64 {
        log.append(&[&payload(i)], i).unwrap();
        assert_eq!(index_bytes(&storage), i as usize * ENTRY_BYTES, "after {i}");
    }
    let after_cut = open_log(&storage.crash(7), DIR, options(SyncPolicy::Always)).unwrap();
    assert_holds(&after_cut, 5);
}
