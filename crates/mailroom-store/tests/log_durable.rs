//! `Log::durable`: awaiting durability as a future (and blocking), on real threads and on
//! a current-thread executor, with sync failures and with the log dropped.

use std::future::Future;
use std::path::Path;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::executor::LocalPool;
use futures::task::{noop_waker, LocalSpawnExt};
use mailroom_store::log::{Log, LogOptions, SyncPolicy};
use mailroom_store::storage::{FsStorage, SimStorage, Storage};
use mailroom_store::StoreError;
use mailroom_testkit::store::open_log;

/// Async publisher tasks per executor in the stress tests.
const TASKS: usize = 24;
/// Blocking writer threads beside them.
const THREADS: usize = 3;
/// Records each publisher writes and waits for, one at a time.
const WRITES_PER_PUBLISHER: u64 = 30;

fn options() -> LogOptions {
    // Small segments, so rolls happen while waiters wait for a round.
    LogOptions {
        segment_bytes_max: 2048,
        index_interval_bytes: 256,
        ..LogOptions::default()
    }
}

fn payload(publisher: usize, seq: u64) -> Vec<u8> {
    format!("publisher {publisher} record {seq}").into_bytes()
}

/// What one publisher was told: (offset, payload) of each confirmed record, and how many
/// of its waits completed.
#[derive(Debug, Default)]
struct Confirmed {
    records: Vec<(u64, Vec<u8>)>,
    completions: u64,
}

/// One publisher's loop: write one record, wait for it, WRITES_PER_PUBLISHER times.
async fn publish_async(log: Arc<Log>, publisher: usize) -> Confirmed {
    let mut confirmed = Confirmed::default();
    for seq in 0..WRITES_PER_PUBLISHER {
        let bytes = payload(publisher, seq);
        let written = log.write(&[&bytes], seq).unwrap();
        log.durable(written.end).await.unwrap();
        confirmed.completions += 1;
        assert!(log.end() >= written.end, "resolved before durable");
        confirmed.records.push((written.start, bytes));
    }
    confirmed
}

fn publish_blocking(log: &Log, publisher: usize) -> Confirmed {
    let mut confirmed = Confirmed::default();
    for seq in 0..WRITES_PER_PUBLISHER {
        let bytes = payload(publisher, seq);
        let written = log.write(&[&bytes], seq).unwrap();
        log.durable(written.end).wait().unwrap();
        confirmed.completions += 1;
        assert!(log.end() >= written.end, "returned before durable");
        confirmed.records.push((written.start, bytes));
    }
    confirmed
}

/// Runs TASKS async publishers on one current-thread executor and THREADS blocking
/// publishers on their own threads, all at once; returns what each was told.
fn run_mixed(log: &Arc<Log>) -> Vec<Confirmed> {
    let barrier = Arc::new(Barrier::new(THREADS + 1));
    let threads: Vec<_> = (0..THREADS)
        .map(|i| {
            let log = Arc::clone(log);
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                publish_blocking(&log, TASKS + i)
            })
        })
        .collect();
    let mut pool = LocalPool::new();
    let handles: Vec<_> = (0..TASKS)
        .map(|i| {
            let task = publish_async(Arc::clone(log), i);
            pool.spawner().spawn_local_with_handle(task).unwrap()
        })
        .collect();
    barrier.wait();
    let mut all: Vec<Confirmed> = pool.run_until(futures::future::join_all(handles));
    all.extend(threads.into_iter().map(|t| t.join().unwrap()));
    all
}

/// Checks every publisher completed every wait once, offsets are gap-free and disjoint,
/// and every record reads back.
fn check_all_confirmed(log: &Log, all: &[Confirmed]) {
    let mut offsets: Vec<u64> = Vec::new();
    for confirmed in all {
        assert_eq!(confirmed.completions, WRITES_PER_PUBLISHER);
        for (offset, bytes) in &confirmed.records {
            offsets.push(*offset);
            let record = log
                .read(*offset)
                .unwrap()
                .expect("confirmed record readable");
            assert_eq!(&record.payload[..], &bytes[..]);
        }
    }
    offsets.sort_unstable();
    let expected: Vec<u64> = (0..offsets.len() as u64).collect();
    assert_eq!(offsets, expected, "offsets are disjoint and gap-free");
}

// Proves async publishers and blocking publishers waiting at once on a slow disk all
// complete (no lost wake-up), each wait exactly once, share syncs, read back, and
// survive a power cut.
#[test]
fn async_and_blocking_waiters_all_complete_on_a_slow_disk() {
    let storage = SimStorage::new();
    let log = Arc::new(open_log(&storage, "/l", options()).unwrap());
    storage.set_sync_delay(Duration::from_micros(300));
    let syncs_before = storage.syncs_done();
    let all = run_mixed(&log);
    check_all_confirmed(&log, &all);
    let records = ((TASKS + THREADS) as u64) * WRITES_PER_PUBLISHER;
    assert_eq!(log.end(), records);
    let syncs = storage.syncs_done() - syncs_before;
    assert!(
        syncs * 4 <= records,
        "{syncs} syncs for {records} records: not shared"
    );
    assert!(log.segments().len() > 2, "rolls happened while waiting");
    drop(log);
    for seed in 0..3 {
        let after = open_log(&storage.crash(seed), "/l", options()).unwrap();
        check_all_confirmed(&after, &all);
    }
}

// Proves the same on real files with real fdatasync, repeated so that the hand-offs
// between rounds, the sync thread and blocking leaders interleave in many ways.
#[test]
fn async_and_blocking_waiters_all_complete_on_real_files() {
    for _ in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let log = Arc::new(Log::open(Arc::new(FsStorage), dir.path(), options()).unwrap());
        let all = run_mixed(&log);
        check_all_confirmed(&log, &all);
        drop(log);
        let log = Log::open(Arc::new(FsStorage), dir.path(), options()).unwrap();
        check_all_confirmed(&log, &all);
    }
}

// Proves a lone writer pays exactly one sync per wait, blocking or awaited.
#[test]
fn lone_writer_pays_one_sync_per_wait() {
    let storage = SimStorage::new();
    // Default (large) segments: no roll adds syncs of its own.
    let log = open_log(&storage, "/l", LogOptions::default()).unwrap();
    let before = storage.syncs_done();
    for i in 0..20u64 {
        log.append(&[b"blocking"], i).unwrap();
    }
    futures::executor::block_on(async {
        for i in 0..20u64 {
            let written = log.write(&[b"awaited"], i).unwrap();
            log.durable(written.end).await.unwrap();
        }
    });
    assert_eq!(storage.syncs_done() - before, 40);
    assert_eq!(log.end(), 40);
}

// Proves awaiting durability does not block the executor: on a slow disk the first poll
// is Pending, and the sync thread later wakes the task.
#[test]
fn awaiting_does_not_block_the_executor() {
    let storage = SimStorage::new();
    let log = open_log(&storage, "/l", options()).unwrap();
    storage.set_sync_delay(Duration::from_millis(300));
    let written = log.write(&[b"x"], 0).unwrap();
    let mut durable = pin!(log.durable(written.end));
    let waker = noop_waker();
    let first = durable.as_mut().poll(&mut Context::from_waker(&waker));
    assert!(first.is_pending(), "the poll ran the sync itself");
    assert_eq!(futures::executor::block_on(durable).ok(), Some(()));
    assert_eq!(log.end(), 1);
}

// Proves a sync failure reaches an awaited Durable as an error, that every waiter of the
// failed round gets it, and that later writes and waits are refused (fail-stop).
#[test]
fn awaited_durable_reports_a_sync_failure_then_writes_are_refused() {
    let storage = SimStorage::new();
    let log = Arc::new(open_log(&storage, "/l", options()).unwrap());
    log.append(&[b"before"], 0).unwrap();
    storage.fail_next_syncs(1);
    let mut pool = LocalPool::new();
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let log = Arc::clone(&log);
            let task = async move {
                let written = log.write(&[format!("doomed {i}").as_bytes()], 1)?;
                log.durable(written.end).await
            };
            pool.spawner().spawn_local_with_handle(task).unwrap()
        })
        .collect();
    let results = pool.run_until(futures::future::join_all(handles));
    for result in results {
        match result {
            Err(StoreError::FailStopped { reason }) => assert!(reason.contains("fdatasync")),
            other => panic!("expected the sync failure, got {other:?}"),
        }
    }
    assert!(matches!(
        log.write(&[b"after"], 2),
        Err(StoreError::FailStopped { .. })
    ));
    assert!(matches!(
        futures::executor::block_on(log.durable(1)),
        Ok(())
    ));
    assert!(matches!(
        futures::executor::block_on(log.durable(log.written_end())),
        Err(StoreError::FailStopped { .. })
    ));
    assert_eq!(log.end(), 1, "nothing after the failure became visible");
    drop(log);
    let after = open_log(&storage.crash(3), "/l", options()).unwrap();
    assert_eq!(&after.read(0).unwrap().unwrap().payload[..], b"before");
}

// Proves a Durable outlives its Log: after the log (and its sync thread) is gone,
// awaiting it still syncs, and the record survives a power cut.
#[test]
fn durable_completes_after_the_log_is_dropped() {
    let storage = SimStorage::new();
    let log = open_log(&storage, "/l", options()).unwrap();
    let written = log.write(&[b"late"], 0).unwrap();
    let durable = log.durable(written.end);
    drop(log);
    futures::executor::block_on(durable).unwrap();
    let after = open_log(&storage.crash(5), "/l", options()).unwrap();
    assert_eq!(after.end(), 1);
}

// Proves waiting for an end that was never written is refused, under every policy,
// instead of waiting forever.
#[test]
fn waiting_past_the_written_end_is_refused() {
    for sync in [SyncPolicy::Always, SyncPolicy::Never] {
        let options = LogOptions { sync, ..options() };
        let log = Log::open(Arc::new(SimStorage::new()), Path::new("/l"), options).unwrap();
        log.write(&[b"a"], 0).unwrap();
        let invalid =
            |r: Result<(), StoreError>| matches!(r, Err(StoreError::InvalidArgument { .. }));
        assert!(invalid(log.wait_durable(2)));
        assert!(invalid(futures::executor::block_on(log.durable(2))));
        assert!(invalid(log.durable(2).wait()));
        assert!(log.durable(1).wait().is_ok());
    }
}

// Proves that waiting on several logs from one task works (each log has its own sync
// thread), and that a Durable polled again after it resolved stays resolved.
#[test]
fn durable_from_several_logs_and_polled_again() {
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(FsStorage);
    let a = Log::open(Arc::clone(&storage), &dir.path().join("a"), options()).unwrap();
    let b = Log::open(storage, &dir.path().join("b"), options()).unwrap();
    let done = AtomicU64::new(0);
    futures::executor::block_on(async {
        let wa = a.write(&[b"a"], 0).unwrap();
        let wb = b.write(&[b"b"], 0).unwrap();
        let (ra, rb) = futures::future::join(a.durable(wa.end), b.durable(wb.end)).await;
        ra.unwrap();
        rb.unwrap();
        done.fetch_add(1, Ordering::Relaxed);
    });
    assert_eq!(done.load(Ordering::Relaxed), 1);
    let mut durable = pin!(a.durable(1));
    let waker = noop_waker();
    let mut cx = Context::from_waker(&waker);
    assert!(matches!(
        durable.as_mut().poll(&mut cx),
        Poll::Ready(Ok(()))
    ));
    assert!(matches!(
        durable.as_mut().poll(&mut cx),
        Poll::Ready(Ok(()))
    ));
    assert_eq!((a.end(), b.end()), (1, 1));
}

// Proves the write buffer of SyncPolicy::Always is bounded: records written and never
// waited for reach the file once about 1 MiB waits, with no sync asked for.
#[test]
fn unwaited_writes_reach_the_file_past_the_buffer_limit() {
    let storage = SimStorage::new();
    let log = open_log(&storage, "/l", LogOptions::default()).unwrap();
    let segment = Path::new("/l/00000000000000000000.log");
    let payload = vec![7u8; 1000];
    log.write(&[&payload], 0).unwrap();
    assert_eq!(
        storage.file_bytes(segment).unwrap().len(),
        0,
        "buffered, not written"
    );
    let syncs = storage.syncs_done();
    for i in 1..2_000u64 {
        log.write(&[&payload], i).unwrap();
    }
    let in_file = storage.file_bytes(segment).unwrap().len();
    assert!(in_file >= 1 << 20, "only {in_file} bytes reached the file");
    assert_eq!(
        storage.syncs_done(),
        syncs,
        "writing out the buffer does not sync"
    );
    assert_eq!(log.end(), 0, "nothing is visible before it is durable");
}

// Proves records written without waiting still reach the OS when the log is dropped, so
// reopening in the same process (no power cut) finds them, as it would without a buffer.
#[test]
fn unwaited_writes_reach_the_file_when_the_log_is_dropped() {
    let storage = SimStorage::new();
    let log = open_log(&storage, "/l", options()).unwrap();
    log.append(&[b"waited"], 0).unwrap();
    log.write(&[b"not waited", b"either"], 1).unwrap();
    drop(log);
    let log = open_log(&storage, "/l", options()).unwrap();
    assert_eq!(log.end(), 3);
    assert_eq!(&log.read(2).unwrap().unwrap().payload[..], b"either");
}
