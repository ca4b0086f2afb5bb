//! Group commit under concurrent appenders on real threads.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use mailroom_store::log::{Log, LogOptions};
use mailroom_store::storage::{FsStorage, SimStorage, Storage};
use mailroom_store::StoreError;
use mailroom_testkit::store::open_log;

const THREADS: usize = 8;
const APPENDS_PER_THREAD: usize = 40;

fn options() -> LogOptions {
    // Small segments, so rolls happen while other appenders wait for a sync.
    LogOptions {
        segment_bytes_max: 4096,
        index_interval_bytes: 256,
        ..LogOptions::default()
    }
}

fn payload(thread: usize, seq: usize, record: usize) -> Vec<u8> {
    format!(
        "thread {thread} append {seq} record {record} {}",
        "#".repeat(seq % 13)
    )
    .into_bytes()
}

/// One append: its offsets and its payloads.
type Append = (Range<u64>, Vec<Vec<u8>>);
type Confirmed = Vec<Append>;

/// Runs THREADS appenders (1 to 3 records per append); returns every append's result.
fn run_appenders(log: &Arc<Log>) -> Vec<Vec<Result<Append, StoreError>>> {
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|thread| {
            let log = Arc::clone(log);
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                (0..APPENDS_PER_THREAD)
                    .map(|seq| {
                        let payloads: Vec<Vec<u8>> = (0..1 + (thread + seq) % 3)
                            .map(|r| payload(thread, seq, r))
                            .collect();
                        let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
                        log.append(&refs, seq as u64).map(|range| (range, payloads))
                    })
                    .collect()
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("appender panicked"))
        .collect()
}

/// Checks that the confirmed appends cover disjoint offsets and that each reads back.
fn check_confirmed(log: &Log, confirmed: &Confirmed) {
    let mut ranges: Vec<Range<u64>> = confirmed.iter().map(|(r, _)| r.clone()).collect();
    ranges.sort_by_key(|r| r.start);
    for pair in ranges.windows(2) {
        assert!(pair[0].end <= pair[1].start, "overlapping offsets {pair:?}");
    }
    for (range, payloads) in confirmed {
        assert_eq!((range.end - range.start) as usize, payloads.len());
        for (offset, expected) in range.clone().zip(payloads) {
            let record = log
                .read(offset)
                .unwrap()
                .unwrap_or_else(|| panic!("offset {offset} missing"));
            assert_eq!(&record.payload[..], &expected[..]);
        }
    }
}

// Proves concurrent appenders get disjoint, gap-free offsets, every record reads back,
// fewer syncs than appends happen (they are shared), readers never see past the durable
// end, and every confirmed append survives a power cut.
#[test]
fn concurrent_appenders_share_syncs() {
    let storage = SimStorage::new();
    let log = Arc::new(open_log(&storage, "/log", options()).unwrap());
    // A slow disk, so appenders pile up behind a running sync as they would on hardware.
    storage.set_sync_delay(Duration::from_millis(2));
    let syncs_before = storage.syncs_done();
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let log = Arc::clone(&log);
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            let mut reads = 0u64;
            while !done.load(Ordering::Acquire) {
                let end = log.end();
                if end > 0 {
                    assert!(
                        log.read(end - 1).unwrap().is_some(),
                        "end {end} not readable"
                    );
                    reads += 1;
                }
                std::thread::yield_now();
            }
            reads
        })
    };
    let results = run_appenders(&log);
    done.store(true, Ordering::Release);
    reader.join().expect("reader panicked");
    let confirmed: Confirmed = results.into_iter().flatten().map(Result::unwrap).collect();
    let total: u64 = confirmed.iter().map(|(r, _)| r.end - r.start).sum();
    assert_eq!(log.end(), total, "offsets are gap-free");
    check_confirmed(&log, &confirmed);
    let syncs = storage.syncs_done() - syncs_before;
    let appends = (THREADS * APPENDS_PER_THREAD) as u64;
    // One appender leads at a time; the others wait and are covered by a later sync.
    assert!(
        syncs * 2 <= appends,
        "{syncs} syncs for {appends} appends: syncs are not shared"
    );
    assert!(log.segments().len() > 2, "rolls happened under load");
    drop(log);
    for seed in 0..4 {
        let after = open_log(&storage.crash(seed), "/log", options()).unwrap();
        assert_eq!(after.end(), total);
        check_confirmed(&after, &confirmed);
    }
}

// Proves the same on the real file system with real fdatasync.
#[test]
fn concurrent_appenders_on_real_files() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(Log::open(Arc::new(FsStorage), dir.path(), options()).unwrap());
    let confirmed: Confirmed = run_appenders(&log)
        .into_iter()
        .flatten()
        .map(Result::unwrap)
        .collect();
    let total: u64 = confirmed.iter().map(|(r, _)| r.end - r.start).sum();
    assert_eq!(log.end(), total);
    check_confirmed(&log, &confirmed);
    drop(log);
    let log = Log::open(Arc::new(FsStorage), dir.path(), options()).unwrap();
    check_confirmed(&log, &confirmed);
    assert!(FsStorage.list_dir(dir.path()).unwrap().len() > 2);
}

// Proves that when a shared sync fails under concurrent appenders, no append waiting on
// it reports success, every append after the failure fails, and everything that was
// confirmed before survives a power cut.
#[test]
fn failed_shared_sync_fails_every_waiter() {
    let storage = SimStorage::new();
    let log = Arc::new(open_log(&storage, "/log", options()).unwrap());
    storage.set_sync_delay(Duration::from_millis(1));
    // Let some syncs succeed first, then fail one.
    let trigger = {
        let storage = storage.clone();
        let log = Arc::clone(&log);
        std::thread::spawn(move || {
            while log.end() < 50 {
                std::thread::yield_now();
            }
            storage.fail_next_syncs(1);
        })
    };
    let results = run_appenders(&log);
    trigger.join().unwrap();
    let mut confirmed: Confirmed = Vec::new();
    let mut failures = 0;
    for thread in results {
        let mut failed = false;
        for result in thread {
            match result {
                Ok(append) => {
                    assert!(
                        !failed,
                        "an append succeeded after this thread saw a failure"
                    );
                    confirmed.push(append);
                }
                Err(StoreError::Io { .. } | StoreError::FailStopped { .. }) => {
                    failed = true;
                    failures += 1;
                }
                Err(other) => panic!("{other}"),
            }
        }
    }
    assert!(failures >= THREADS, "every thread ends up refused");
    assert!(!confirmed.is_empty());
    let confirmed_end = confirmed.iter().map(|(r, _)| r.end).max().unwrap();
    assert!(log.end() >= confirmed_end);
    drop(log);
    let after = open_log(&storage.crash(9), "/log", options()).unwrap();
    check_confirmed(&after, &confirmed);
}

// Proves that a sync round cannot confirm a record that a write failing during the
// round's sync cut from the segment (the cut keeps only what earlier syncs made durable,
// and the round's sync then returns success for a file without the record): the round's
// waiter is told the append failed, or the record survives a power cut. The syncs are
// held at the sim's gate, so the order is fixed, not left to timing.
#[test]
fn write_failing_during_a_round_cannot_cut_what_it_confirms() {
    let storage = SimStorage::new();
    // Room for a buffer-filling append, so it writes out at once instead of rolling.
    let options = LogOptions {
        segment_bytes_max: 4 << 20,
        ..options()
    };
    let log = Arc::new(open_log(&storage, "/log", options.clone()).unwrap());
    let first = log.append(&[b"synced before"], 0).unwrap();
    storage.hold_syncs(true);
    let round = {
        let log = Arc::clone(&log);
        // A lone blocking appender leads its own round, whose sync is now held.
        std::thread::spawn(move || log.append(&[b"in the round"], 1))
    };
    storage.wait_for_held_syncs(1);
    storage.fail_next_writes(1);
    let failing = {
        let log = Arc::clone(&log);
        let big = vec![b'w'; 2 << 20];
        // Past the write buffer's limit: written at once, which fails; the cut that
        // follows holds at the gate with the writer lock.
        std::thread::spawn(move || log.append(&[&big], 2))
    };
    storage.wait_for_held_syncs(2);
    storage.hold_syncs(false);
    let round = round.join().unwrap();
    assert!(
        matches!(failing.join().unwrap(), Err(StoreError::Io { .. })),
        "the failed write fails its append"
    );
    let mut confirmed: Confirmed = vec![(first, vec![b"synced before".to_vec()])];
    if let Ok(range) = round {
        confirmed.push((range, vec![b"in the round".to_vec()]));
    }
    drop(log);
    for seed in 0..4 {
        let after = open_log(&storage.crash(seed), "/log", options.clone()).unwrap();
        check_confirmed(&after, &confirmed);
    }
}
