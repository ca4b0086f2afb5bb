//! Black-box tests of log recovery and faults: torn tails, bit flips, fail-stop, full and
//! read-only disks.

use std::path::PathBuf;

use mailroom_store::log::LogOptions;
use mailroom_store::record::HEADER_BYTES;
use mailroom_store::storage::{SimStorage, Storage};
use mailroom_store::StoreError;
use mailroom_testkit::store::{log_files, open_log};

const DIR: &str = "/log";

fn options() -> LogOptions {
    LogOptions {
        segment_bytes_max: 1024,
        index_interval_bytes: 128,
        ..LogOptions::default()
    }
}

fn payload(i: u64) -> Vec<u8> {
    format!("payload number {i:03}").into_bytes()
}

fn segment_paths(storage: &SimStorage) -> Vec<PathBuf> {
    log_files(storage, DIR, "log")
}

/// A log of `count` records, one per append, on a fresh SimStorage.
fn log_with(count: u64) -> SimStorage {
    let storage = SimStorage::new();
    let log = open_log(&storage, DIR, options()).unwrap();
    for i in 0..count {
        log.append(&[&payload(i)], i).unwrap();
    }
    storage
}

// Proves that cutting the last record at every byte position, or overwriting its tail
// with zeros or garbage, is a torn tail: the record is dropped, every earlier one kept,
// and the next append reuses its offset at the cut position. The last record is written
// but never confirmed (no sync covered it), as a torn write's record always is: damage
// to a synced record is rot (`tests/log_rot.rs`).
#[test]
fn torn_tail_at_every_byte_of_the_last_record() {
    let count = 5;
    let clean = log_with(count - 1);
    let log = open_log(&clean, DIR, options()).unwrap();
    log.write(&[&payload(count - 1)], count - 1).unwrap();
    drop(log); // writes the buffered record to the file, unsynced
    let active = segment_paths(&clean).pop().unwrap();
    let full = clean.file_bytes(&active).unwrap();
    let record_bytes = HEADER_BYTES + payload(count - 1).len();
    let last_start = full.len() - record_bytes;
    for cut in last_start..full.len() {
        for fill in [None, Some(0u8), Some(0xa5u8)] {
            let storage = clean.crash(0);
            storage.corrupt_file(&active, |bytes| {
                bytes.truncate(cut);
                if let Some(fill) = fill {
                    bytes.resize(full.len(), fill);
                }
            });
            let log = open_log(&storage, DIR, options())
                .unwrap_or_else(|e| panic!("cut {cut} fill {fill:?}: {e}"));
            assert_eq!(log.end(), count - 1, "cut {cut} fill {fill:?}");
            for i in 0..count - 1 {
                assert_eq!(&log.read(i).unwrap().unwrap().payload[..], &payload(i)[..]);
            }
            assert_eq!(storage.file_bytes(&active).unwrap().len(), last_start);
            assert_eq!(log.append(&[b"again"], 9).unwrap(), count - 1..count);
            assert_eq!(&log.read(count - 1).unwrap().unwrap().payload[..], b"again");
        }
    }
}

// Proves a flipped bit in any record of a sealed segment is reported as Corrupt when
// that record is read (open trusts sealed segments and must not scan them), and that
// the other records stay readable.
#[test]
fn bit_flip_in_sealed_segment_is_corrupt_on_read() {
    let storage = log_with(150);
    let sealed = segment_paths(&storage)[1].clone();
    let log = open_log(&storage, DIR, options()).unwrap();
    let first = log.segments()[1].base_offset;
    let end = log.segments()[1].end_offset;
    let bytes = storage.file_bytes(&sealed).unwrap().len();
    drop(log);
    for byte in (0..bytes).step_by(7) {
        let damaged = storage.crash(0);
        damaged.corrupt_file(&sealed, |b| b[byte] ^= 1 << (byte % 8));
        let log = open_log(&damaged, DIR, options()).expect("open trusts the sealed index");
        let mut corrupt = 0;
        for offset in first..end {
            match log.read(offset) {
                Ok(Some(record)) => assert_eq!(&record.payload[..], &payload(offset)[..]),
                Err(StoreError::Corrupt { path, .. }) => {
                    assert_eq!(path, sealed);
                    corrupt += 1;
                }
                other => panic!("offset {offset}: {other:?}"),
            }
        }
        // A flip in a payload or header breaks exactly that record's checksum (or, in
        // its length field, it and the scan past it).
        assert!(corrupt >= 1, "flip at byte {byte} went unnoticed");
    }
}

// Proves a sealed segment whose index is gone is checked in full when rebuilt, so a
// flipped bit there is Corrupt at open, not skipped.
#[test]
fn bit_flip_in_sealed_segment_without_index_is_corrupt_on_open() {
    let storage = log_with(150);
    let sealed = segment_paths(&storage)[1].clone();
    storage.corrupt_file(&sealed, |b| b[30] ^= 0x10);
    storage.remove_file(&sealed.with_extension("idx")).unwrap();
    let error = open_log(&storage, DIR, options()).unwrap_err();
    assert!(
        matches!(&error, StoreError::Corrupt { path, .. } if *path == sealed),
        "{error}"
    );
}

// Proves damage to a record of the active segment that has a valid record after it is
// reported as Corrupt at open (it cannot be a torn write), never truncated away.
#[test]
fn bit_flip_before_the_tail_is_corrupt_on_open() {
    let count = 20;
    let storage = log_with(count);
    let active = segment_paths(&storage).pop().unwrap();
    let bytes = storage.file_bytes(&active).unwrap();
    let last_start = bytes.len() - (HEADER_BYTES + payload(count - 1).len());
    // Every byte of every record but the last (whose damage is indistinguishable from a
    // torn write, see docs/storage.md).
    for byte in 0..last_start {
        let damaged = storage.crash(0);
        damaged.corrupt_file(&active, |b| b[byte] ^= 0x04);
        match open_log(&damaged, DIR, options()) {
            Err(StoreError::Corrupt { path, reason, .. }) => {
                assert_eq!(path, active);
                assert!(reason.contains("not a torn tail"), "{reason}");
            }
            // The scan starts at the last index entry, so damage before it surfaces on
            // read instead: that record must then be refused.
            Ok(log) => {
                assert_eq!(
                    log.end(),
                    count,
                    "flip at byte {byte} truncated confirmed records"
                );
                let refused =
                    (0..count).any(|i| matches!(log.read(i), Err(StoreError::Corrupt { .. })));
                assert!(refused, "flip at byte {byte} went unnoticed");
            }
            Err(other) => panic!("byte {byte}: {other}"),
        }
    }
}

// Proves a failed fdatasync makes the log fail-stop: the append that hit it fails, every
// later append fails with FailStopped, reads keep working, and a reopen recovers
// everything that was confirmed.
#[test]
fn fail_stop_after_sync_error() {
    let storage = log_with(3);
    let log = open_log(&storage, DIR, options()).unwrap();
    storage.fail_next_syncs(1);
    let error = log.append(&[b"lost?"], 0).unwrap_err();
    assert!(
        matches!(
            error,
            StoreError::Io {
                operation: "fdatasync",
                ..
            }
        ),
        "{error}"
    );
    for _ in 0..3 {
        let error = log.append(&[b"refused"], 0).unwrap_err();
        assert!(matches!(error, StoreError::FailStopped { .. }), "{error}");
    }
    assert!(matches!(log.sync(), Err(StoreError::FailStopped { .. })));
    assert_eq!(log.end(), 3);
    assert_eq!(&log.read(2).unwrap().unwrap().payload[..], &payload(2)[..]);
    drop(log);
    let log = open_log(&storage.crash(5), DIR, options()).unwrap();
    assert!(log.end() >= 3);
    for i in 0..3 {
        assert_eq!(&log.read(i).unwrap().unwrap().payload[..], &payload(i)[..]);
    }
}

// Proves a failed write makes the log fail-stop too, and the reopened log has no trace
// of the failed append's offsets being reused wrongly.
#[test]
fn fail_stop_after_write_error() {
    let storage = log_with(3);
    let log = open_log(&storage, DIR, options()).unwrap();
    storage.fail_next_writes(1);
    assert!(matches!(
        log.append(&[b"x"], 0),
        Err(StoreError::Io {
            operation: "write",
            ..
        })
    ));
    assert!(matches!(
        log.append(&[b"x"], 0),
        Err(StoreError::FailStopped { .. })
    ));
    drop(log);
    let log = open_log(&storage, DIR, options()).unwrap();
    assert_eq!(log.append(&[b"x"], 0).unwrap(), 3..4);
}

// Proves a full disk gives a clear ENOSPC error (then fail-stop), and that nothing
// confirmed is lost.
#[test]
fn full_disk() {
    let storage = log_with(3);
    let log = open_log(&storage, DIR, options()).unwrap();
    storage.set_full(true);
    let error = log.append(&[b"no room"], 0).unwrap_err();
    let StoreError::Io { source, .. } = &error else {
        panic!("{error}")
    };
    assert_eq!(source.kind(), std::io::ErrorKind::StorageFull);
    drop(log);
    storage.set_full(false);
    let log = open_log(&storage, DIR, options()).unwrap();
    assert_eq!(log.end(), 3);
}

// Proves opening on a read-only file system is a clear error, and a new log directory
// cannot be created there either.
#[test]
fn read_only_file_system() {
    let storage = log_with(3);
    storage.set_read_only(true);
    let error = open_log(&storage, DIR, options()).unwrap_err();
    let StoreError::Io { source, .. } = &error else {
        panic!("{error}")
    };
    assert_eq!(source.kind(), std::io::ErrorKind::ReadOnlyFilesystem);
    let error = open_log(&storage, "/other", options()).unwrap_err();
    assert!(matches!(error, StoreError::Io { .. }), "{error}");
}

// Proves a segment missing from the middle of the log is Corrupt, not skipped.
#[test]
fn missing_middle_segment_is_corrupt() {
    let storage = log_with(150);
    let middle = segment_paths(&storage)[1].clone();
    storage.remove_file(&middle).unwrap();
    storage.remove_file(&middle.with_extension("idx")).unwrap();
    let error = open_log(&storage, DIR, options()).unwrap_err();
    assert!(
        matches!(&error, StoreError::Corrupt { reason, .. } if reason.contains("join up")),
        "{error}"
    );
}

// Proves a failed sync in the Interval policy's background thread makes the log
// fail-stop: a later append reports it instead of pretending all is well.
#[test]
fn interval_flusher_failure_fails_stop() {
    let storage = log_with(1);
    let interval = LogOptions {
        sync: mailroom_store::log::SyncPolicy::Interval(std::time::Duration::from_millis(1)),
        ..options()
    };
    let log = open_log(&storage, DIR, interval).unwrap();
    storage.fail_next_syncs(1);
    log.append(&[b"written, then its sync fails"], 0).unwrap();
    // Await the flusher's failure (a condition, not a fixed sleep).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match log.append(&[b"x"], 0) {
            Err(StoreError::FailStopped { reason }) => {
                assert!(reason.contains("fdatasync"), "{reason}");
                break;
            }
            Ok(_) => assert!(std::time::Instant::now() < deadline, "never fail-stopped"),
            // The appends may fill the segment first: then the roll's own sync meets the
            // failure, and the following append must be refused.
            Err(StoreError::Io {
                operation: "fdatasync",
                ..
            }) => {}
            Err(other) => panic!("{other}"),
        }
        std::thread::yield_now();
    }
}
