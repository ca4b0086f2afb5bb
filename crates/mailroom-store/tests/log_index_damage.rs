//! The index is a cache: damage to any byte of an index file, sealed or active, never
//! turns into an error or a wrong payload; it is detected (the sealed trailer's checksum,
//! entry order, or an entry that does not point at the record it names) and rebuilt from
//! the segment.

use std::path::PathBuf;

use mailroom_store::log::{Log, LogOptions};
use mailroom_store::storage::SimStorage;
use mailroom_testkit::store::{log_files, open_log};

const DIR: &str = "/log";

fn options() -> LogOptions {
    LogOptions {
        segment_bytes_max: 2048,
        // About three records per entry: every index has several entries.
        index_interval_bytes: 100,
        ..LogOptions::default()
    }
}

fn payload(i: u64) -> Vec<u8> {
    format!("payload number {i:04}").into_bytes()
}

fn indexes(storage: &SimStorage) -> Vec<PathBuf> {
    log_files(storage, DIR, "idx")
}

fn assert_reads_all(log: &Log, count: u64, what: &str) {
    assert_eq!(log.end(), count, "{what}");
    for i in 0..count {
        match log.read(i) {
            Ok(Some(record)) => assert_eq!(&record.payload[..], &payload(i)[..], "{what}"),
            other => panic!("{what}: offset {i}: {other:?}"),
        }
    }
}

// Proves that a flipped byte at every position of every index file (a sealed segment's
// and the active one's) leaves every record readable with its own payload, at once and
// after a restart, and never fails the open.
#[test]
fn index_flips_at_every_byte_still_read_the_right_payloads() {
    let count = 115; // two full segments and an active one with several entries
    let storage = SimStorage::new();
    let log = open_log(&storage, DIR, options()).unwrap();
    for i in 0..count {
        log.append(&[&payload(i)], i).unwrap();
    }
    drop(log);
    let files = indexes(&storage);
    assert!(
        files.len() >= 2,
        "want a sealed and an active index: {files:?}"
    );
    for file in &files {
        // The active index is never synced: a crash image may not hold it, so each
        // image gets the file as written, with the flip.
        let original = storage.file_bytes(file).unwrap();
        assert!(original.len() >= 16, "{file:?} has entries");
        for byte in 0..original.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let image = storage.crash(byte as u64);
                image.corrupt_file(file, |b| {
                    b.clone_from(&original);
                    b[byte] ^= flip;
                });
                let what = format!("{file:?} byte {byte} ^ {flip:#x}");
                let log =
                    open_log(&image, DIR, options()).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_reads_all(&log, count, &what);
                drop(log);
                let log =
                    open_log(&image, DIR, options()).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_reads_all(&log, count, &format!("{what}, after a restart"));
            }
        }
    }
}

// Proves a damaged entry of the active segment's index that open cannot see (it keeps
// the entries' order) is rebuilt by the first read it misleads: the index file is
// correct again afterwards, so the next open starts from a sound index.
#[test]
fn a_misleading_active_entry_is_rebuilt_on_read() {
    let count = 30;
    let storage = SimStorage::new();
    let log = open_log(&storage, DIR, options()).unwrap();
    for i in 0..count {
        log.append(&[&payload(i)], i).unwrap();
    }
    drop(log);
    let active = indexes(&storage).pop().unwrap();
    let clean = storage.file_bytes(&active).unwrap();
    assert!(clean.len() >= 3 * 8, "want three entries");
    // Entry 1's position, one byte earlier: still between its neighbours.
    storage.corrupt_file(&active, |b| {
        let position = u32::from_le_bytes(b[12..16].try_into().unwrap());
        b[12..16].copy_from_slice(&(position - 1).to_le_bytes());
    });
    let log = open_log(&storage, DIR, options()).unwrap();
    assert_reads_all(&log, count, "misleading entry");
    assert_eq!(storage.file_bytes(&active).unwrap(), clean);
}
