//! Black-box tests of the log: append/read, rolling, retention, indexes, options.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mailroom_store::log::{Log, LogOptions, SyncPolicy};
use mailroom_store::storage::{FsStorage, SimStorage, Storage};
use mailroom_store::StoreError;
use mailroom_testkit::store::open_log;
use proptest::prelude::*;

const DIR: &str = "/log";

fn small_segments() -> LogOptions {
    LogOptions {
        segment_bytes_max: 1024,
        index_interval_bytes: 128,
        ..LogOptions::default()
    }
}

fn payload(i: u64) -> Vec<u8> {
    // Varying lengths, so index entries and rolls land at irregular places.
    format!("record {i} {}", "x".repeat((i % 37) as usize)).into_bytes()
}

fn files_with_extension(storage: &SimStorage, extension: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = storage
        .list_dir(Path::new(DIR))
        .unwrap()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == extension))
        .collect();
    files.sort();
    files
}

fn check_all(log: &Log, from: u64, to: u64) {
    for i in from..to {
        let record = log
            .read(i)
            .unwrap()
            .unwrap_or_else(|| panic!("offset {i} missing"));
        assert_eq!((record.offset, &record.payload[..]), (i, &payload(i)[..]));
        assert_eq!(record.timestamp_ms, 1000 + i);
    }
}

fn append_n(log: &Log, from: u64, to: u64) {
    for i in from..to {
        assert_eq!(log.append(&[&payload(i)], 1000 + i).unwrap(), i..i + 1);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    // Proves reads return exactly what was appended, in offset order, across batches,
    // segment rolls and reopens, compared with a Vec model.
    #[test]
    fn append_read_round_trip(
        batches in proptest::collection::vec(
            (proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 1..6), any::<bool>()),
            1..25),
    ) {
        let storage = SimStorage::new();
        let mut log = open_log(&storage, DIR, small_segments()).expect("open");
        let mut model: Vec<(Vec<u8>, u64)> = Vec::new();
        for (n, (batch, reopen)) in batches.iter().enumerate() {
            let refs: Vec<&[u8]> = batch.iter().map(Vec::as_slice).collect();
            let range = log.append(&refs, n as u64).unwrap();
            prop_assert_eq!(range.start, model.len() as u64);
            model.extend(batch.iter().map(|p| (p.clone(), n as u64)));
            prop_assert_eq!(range.end, model.len() as u64);
            if *reopen {
                drop(log);
                log = open_log(&storage, DIR, small_segments()).expect("open");
            }
            prop_assert_eq!(log.end(), model.len() as u64);
        }
        for (offset, (bytes, ts)) in model.iter().enumerate() {
            let record = log.read(offset as u64).unwrap().unwrap();
            prop_assert_eq!(&record.payload[..], &bytes[..]);
            prop_assert_eq!(record.timestamp_ms, *ts);
        }
        prop_assert!(log.read(model.len() as u64).unwrap().is_none());
        let segments = log.segments();
        for pair in segments.windows(2) {
            prop_assert_eq!(pair[0].end_offset, pair[1].base_offset);
        }
        prop_assert_eq!(segments.last().unwrap().end_offset, model.len() as u64);
    }
}

// Proves the log rolls past segment_bytes_max, names segments by base offset, and that
// segments() describes them.
#[test]
fn rolls_at_segment_bytes_max() {
    let storage = SimStorage::new();
    let log = open_log(&storage, DIR, small_segments()).expect("open");
    append_n(&log, 0, 100);
    let segments = log.segments();
    assert!(segments.len() > 3, "{segments:?}");
    for segment in &segments[..segments.len() - 1] {
        assert!(segment.bytes <= 1024, "{segment:?}");
        assert!(segment.bytes > 1024 - 100, "rolled too early: {segment:?}");
    }
    let logs = files_with_extension(&storage, "log");
    assert_eq!(logs.len(), segments.len());
    for (file, segment) in logs.iter().zip(&segments) {
        let name = format!("{:020}.log", segment.base_offset);
        assert_eq!(file.file_name().unwrap().to_str().unwrap(), name);
    }
    assert_eq!(segments.last().unwrap().last_timestamp_ms, 1099);
    check_all(&log, 0, 100);
}

// Proves an append larger than a segment still goes in whole, into a segment of its own.
#[test]
fn oversized_append_gets_its_own_segment() {
    let storage = SimStorage::new();
    let log = open_log(&storage, DIR, small_segments()).expect("open");
    log.append(&[b"small"], 0).unwrap();
    let big = vec![7u8; 3000];
    assert_eq!(log.append(&[&big], 1).unwrap(), 1..2);
    log.append(&[b"after"], 2).unwrap();
    let bases: Vec<u64> = log.segments().iter().map(|s| s.base_offset).collect();
    assert_eq!(bases, vec![0, 1, 2]);
    assert_eq!(&log.read(1).unwrap().unwrap().payload[..], &big[..]);
}

// Proves retention deletes only whole segments below the offset, never the active one,
// moves start(), and that deleted offsets read as None; also across a reopen.
#[test]
fn delete_segments_before() {
    let storage = SimStorage::new();
    let log = open_log(&storage, DIR, small_segments()).expect("open");
    append_n(&log, 0, 100);
    let segments = log.segments();
    let cut = segments[2].end_offset; // everything in the first three segments
    assert_eq!(log.delete_segments_before(cut).unwrap(), 3);
    assert_eq!(log.start(), cut);
    assert!(log.read(cut - 1).unwrap().is_none());
    check_all(&log, cut, 100);
    // Nothing more to delete below the same offset; never the active segment.
    assert_eq!(log.delete_segments_before(cut).unwrap(), 0);
    let deleted = log.delete_segments_before(u64::MAX).unwrap();
    assert_eq!(deleted, segments.len() - 4);
    assert_eq!(log.segments().len(), 1);
    let start = log.start();
    drop(log);
    let log = open_log(&storage.crash(3), DIR, small_segments()).expect("open");
    assert_eq!((log.start(), log.end()), (start, 100));
    check_all(&log, start, 100);
    append_n(&log, 100, 110);
}

// Proves a missing or torn index (sealed and active segments) is rebuilt on open,
// byte-identical to the one the log wrote, and reads still work.
#[test]
fn index_rebuilt_when_missing_or_torn() {
    let storage = SimStorage::new();
    let log = open_log(&storage, DIR, small_segments()).expect("open");
    append_n(&log, 0, 100);
    drop(log);
    let indexes = files_with_extension(&storage, "idx");
    let originals: Vec<Vec<u8>> = indexes
        .iter()
        .map(|p| storage.file_bytes(p).unwrap())
        .collect();
    assert!(
        originals.iter().any(|bytes| bytes.len() > 40),
        "entries were written"
    );
    for (n, damage) in ["delete", "truncate", "garbage"].iter().enumerate() {
        for (i, path) in indexes.iter().enumerate() {
            match *damage {
                "delete" => storage.remove_file(path).unwrap(),
                "truncate" => {
                    storage.corrupt_file(path, |b| b.truncate(b.len().saturating_sub(3 + n)));
                }
                _ => {
                    storage.corrupt_file(path, |b| {
                        b.iter_mut().for_each(|x| *x = x.wrapping_mul(31) ^ 0x5a)
                    });
                }
            }
            let log = open_log(&storage, DIR, small_segments()).expect("open");
            check_all(&log, 0, 100);
            drop(log);
            assert_eq!(
                storage.file_bytes(path).unwrap(),
                originals[i],
                "{damage} {path:?}"
            );
        }
    }
}

// Proves a foreign file or a directory in the log directory is refused with a clear error.
#[test]
fn foreign_file_is_refused() {
    for name in ["notes.txt", "00000000000000000000.log.tmp", "sub"] {
        let storage = SimStorage::new();
        open_log(&storage, DIR, small_segments())
            .expect("open")
            .append(&[b"x"], 0)
            .unwrap();
        let path = Path::new(DIR).join(name);
        if name == "sub" {
            storage.create_dir_all(&path).unwrap();
        } else {
            storage.open(&path, true).unwrap();
        }
        let error = open_log(&storage, DIR, small_segments()).unwrap_err();
        let StoreError::Corrupt {
            path: bad, reason, ..
        } = &error
        else {
            panic!("{error:?}")
        };
        assert_eq!(bad, &path);
        assert!(reason.contains("foreign file"), "{error}");
    }
}

// Proves an index file without its segment (left by an interrupted deletion) is removed.
#[test]
fn orphan_index_is_removed() {
    let storage = SimStorage::new();
    open_log(&storage, DIR, small_segments())
        .expect("open")
        .append(&[b"x"], 0)
        .unwrap();
    let orphan = Path::new(DIR).join("00000000000000000077.idx");
    storage.open(&orphan, true).unwrap();
    let log = open_log(&storage, DIR, small_segments()).expect("open");
    assert!(!storage.exists(&orphan).unwrap());
    assert_eq!(log.end(), 1);
}

// Proves out-of-range options and oversized payloads are refused without writing.
#[test]
fn bad_arguments_are_refused() {
    let storage = SimStorage::new();
    for options in [
        LogOptions {
            segment_bytes_max: 0,
            ..LogOptions::default()
        },
        LogOptions {
            segment_bytes_max: 1 << 40,
            ..LogOptions::default()
        },
        LogOptions {
            index_interval_bytes: 0,
            ..LogOptions::default()
        },
        LogOptions {
            record_bytes_max: u32::MAX,
            ..LogOptions::default()
        },
        LogOptions {
            sync: SyncPolicy::Interval(std::time::Duration::ZERO),
            ..LogOptions::default()
        },
    ] {
        let result = open_log(&storage, DIR, options);
        assert!(
            matches!(result, Err(StoreError::InvalidArgument { .. })),
            "{result:?}"
        );
    }
    let log = open_log(
        &storage,
        DIR,
        LogOptions {
            record_bytes_max: 10,
            ..LogOptions::default()
        },
    )
    .expect("open");
    let result = log.append(&[b"ok", b"this is too long"], 0);
    assert!(
        matches!(result, Err(StoreError::InvalidArgument { .. })),
        "{result:?}"
    );
    assert_eq!(log.end(), 0);
    assert_eq!(log.append(&[], 0).unwrap(), 0..0);
    assert_eq!(log.append(&[b"0123456789"], 0).unwrap(), 0..1);
}

// Proves Interval and Never make appends readable at once, that Interval's thread makes
// them durable without a call to sync, and that sync() does it for Never.
#[test]
fn interval_and_never_policies() {
    let storage = SimStorage::new();
    let interval = LogOptions {
        sync: SyncPolicy::Interval(std::time::Duration::from_millis(5)),
        ..small_segments()
    };
    let log = open_log(&storage, DIR, interval.clone()).expect("open");
    let opened = storage.syncs_done();
    append_n(&log, 0, 10);
    assert_eq!(log.end(), 10);
    // Await the flusher's sync (a condition, not a guess at a duration).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while storage.syncs_done() == opened {
        assert!(
            std::time::Instant::now() < deadline,
            "the interval flusher never synced"
        );
        std::thread::yield_now();
    }
    drop(log); // the flusher syncs once more on the way out
    let log = open_log(&storage.crash(1), DIR, small_segments()).expect("open");
    assert_eq!(log.end(), 10);

    let storage = SimStorage::new();
    let never = LogOptions {
        sync: SyncPolicy::Never,
        ..small_segments()
    };
    let log = open_log(&storage, DIR, never.clone()).expect("open");
    let opened = storage.syncs_done(); // open syncs the active segment once
    append_n(&log, 0, 5);
    assert_eq!(storage.syncs_done(), opened);
    log.sync().unwrap();
    assert_eq!(storage.syncs_done(), opened + 1);
    let log2 = open_log(&storage.crash(2), DIR, never).expect("open");
    assert_eq!(log2.end(), 5);
}

// Proves the real file system works end to end: append, roll, reopen, read.
#[test]
fn fs_storage_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    let log = Log::open(Arc::new(FsStorage), &path, small_segments()).unwrap();
    append_n(&log, 0, 50);
    drop(log);
    let log = Log::open(Arc::new(FsStorage), &path, small_segments()).unwrap();
    assert_eq!(log.end(), 50);
    check_all(&log, 0, 50);
    assert!(log.segments().len() > 1);
}
