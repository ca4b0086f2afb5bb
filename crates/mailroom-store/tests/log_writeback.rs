//! Writeback under the relaxed sync policies: the log syncs in the background each time
//! another eighth of a segment (at least 1 MiB) has been written, so a roll (which syncs
//! the whole segment with writers held) finds little left to sync.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mailroom_store::log::{Log, LogOptions, SyncPolicy};
use mailroom_store::record::HEADER_BYTES;
use mailroom_store::storage::SimStorage;
use mailroom_testkit::store::{numbered_payload, open_log};

const DIR: &str = "/log";
/// Segments of 16 MiB: a writeback every 2 MiB.
const SEGMENT_BYTES: u64 = 16 << 20;
const WRITEBACK_STEP_BYTES: u64 = SEGMENT_BYTES / 8;
const PAYLOAD_BYTES: usize = 64 << 10;
/// How long a test waits for the background sync before it fails (a bound, not a guess
/// at how long it takes: the wait ends as soon as the sync is seen).
const SYNC_WAIT_MAX: Duration = Duration::from_secs(30);

fn options(sync: SyncPolicy) -> LogOptions {
    LogOptions {
        segment_bytes_max: SEGMENT_BYTES,
        sync,
        ..LogOptions::default()
    }
}

fn payload(i: u64) -> Vec<u8> {
    numbered_payload(i, PAYLOAD_BYTES)
}

/// Waits until `storage` has done more than `syncs` syncs; fails after `SYNC_WAIT_MAX`.
fn await_sync_beyond(storage: &SimStorage, syncs: u64) {
    let deadline = Instant::now() + SYNC_WAIT_MAX;
    while storage.syncs_done() <= syncs {
        assert!(Instant::now() < deadline, "no writeback sync came");
        std::thread::yield_now();
    }
}

// Proves that under Interval (with an interval far longer than the test) and Never no
// sync runs before a writeback step's worth of bytes is written, that one runs once it
// is (without any call to sync), and that it makes every record written so far survive a
// power cut; and that Never's thread does not sync when the log is dropped.
#[test]
fn relaxed_policies_write_back_each_eighth_of_a_segment() {
    let record_bytes = (HEADER_BYTES + PAYLOAD_BYTES) as u64;
    // The first record whose end reaches the step asks for the writeback.
    let records_to_step = WRITEBACK_STEP_BYTES.div_ceil(record_bytes);
    for sync in [
        SyncPolicy::Interval(Duration::from_secs(3600)),
        SyncPolicy::Never,
    ] {
        let storage = SimStorage::new();
        let log = open_log(&storage, DIR, options(sync)).unwrap();
        let opened = storage.syncs_done();
        for i in 0..records_to_step - 1 {
            log.append(&[&payload(i)], i).unwrap();
        }
        assert_eq!(
            storage.syncs_done(),
            opened,
            "{sync:?}: synced before the step"
        );
        let last = records_to_step - 1;
        log.append(&[&payload(last)], last).unwrap();
        await_sync_beyond(&storage, opened);
        for seed in 0..8 {
            let image = Arc::new(storage.crash(seed));
            let after = Log::open(image, Path::new(DIR), options(sync)).unwrap();
            assert_eq!(after.end(), records_to_step, "{sync:?}, seed {seed}");
            let record = after.read(last).unwrap().expect("written back");
            assert_eq!(&record.payload[..], &payload(last)[..]);
        }
        if sync == SyncPolicy::Never {
            let before_drop = storage.syncs_done();
            drop(log);
            assert_eq!(storage.syncs_done(), before_drop, "Never synced on drop");
        }
    }
}

// Proves that writeback is asked for once per step, not once per write: after two steps'
// worth of records, and with every request served, the syncs number no more than the
// steps.
#[test]
fn writeback_is_asked_for_once_per_step() {
    let record_bytes = (HEADER_BYTES + PAYLOAD_BYTES) as u64;
    let records = 2 * WRITEBACK_STEP_BYTES.div_ceil(record_bytes) + 1;
    let storage = SimStorage::new();
    let log = open_log(&storage, DIR, options(SyncPolicy::Never)).unwrap();
    let opened = storage.syncs_done();
    for i in 0..records {
        log.append(&[&payload(i)], i).unwrap();
    }
    await_sync_beyond(&storage, opened);
    // Never's thread exits on drop without serving a request still pending, so the
    // count is final once the log is dropped.
    drop(log);
    let syncs = storage.syncs_done() - opened;
    assert!((1..=2).contains(&syncs), "{syncs} syncs for two steps");
}
