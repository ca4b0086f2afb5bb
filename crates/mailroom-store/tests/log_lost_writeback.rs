//! Black-box tests of a restart after a failed sync, on a disk that loses what the failed
//! sync held: the simulated storage drops a failed sync's pending writes and length
//! changes from what a power cut keeps, yet still reads them back, as Linux may after a
//! failed writeback (pages marked clean that never reach the disk). Recovery in the same
//! boot must not confirm what it read there until it is durable for real.

use std::path::PathBuf;

use mailroom_store::log::{Log, LogOptions, SyncPolicy};
use mailroom_store::record::HEADER_BYTES;
use mailroom_store::storage::SimStorage;
use mailroom_testkit::store::{log_files, open_log};

const DIR: &str = "/log";

fn options(sync: SyncPolicy) -> LogOptions {
    LogOptions {
        segment_bytes_max: 4096,
        index_interval_bytes: 128,
        preallocate_bytes: 256,
        sync,
        ..LogOptions::default()
    }
}

fn payload(i: u64) -> Vec<u8> {
    format!("payload number {i:03}").into_bytes()
}

fn active_path(storage: &SimStorage) -> PathBuf {
    log_files(storage, DIR, "log").pop().unwrap()
}

fn assert_reads(log: &Log, count: u64) {
    assert_eq!(log.end(), count);
    for i in 0..count {
        let record = log.read(i).unwrap().unwrap();
        assert_eq!(&record.payload[..], &payload(i)[..], "offset {i}");
    }
}

// Proves a roll whose sync fails after it cut the zeros off its segment cannot leave a
// sealed segment longer than its records: the failed sync loses the cut, so the restart
// (same boot) makes the length it read durable before a later roll seals the segment,
// and a power cut after that finds every record and no damage. (Simulation seed 45 found
// the sealed segment's zeros reported as damage.)
#[test]
fn a_cut_lost_with_a_failed_roll_sync_is_made_again_at_reopen() {
    let storage = SimStorage::new();
    let options = options(SyncPolicy::Always);
    let log = open_log(&storage, DIR, options.clone()).unwrap();
    let record = (HEADER_BYTES + payload(0).len()) as u64;
    let mut next = 0;
    while log.segments().last().unwrap().bytes + record <= options.segment_bytes_max {
        log.append(&[&payload(next)], next).unwrap();
        next += 1;
    }
    let sealing = active_path(&storage);
    let records = log.segments().last().unwrap().bytes;
    let file = storage.file_bytes(&sealing).unwrap().len() as u64;
    assert!(
        file > records,
        "zeros follow the records: {file} > {records}"
    );
    // The next append rolls, and the roll's sync is the one that fails.
    storage.fail_next_syncs(1);
    assert!(log.append(&[&payload(next)], next).is_err());
    drop(log);

    let log = open_log(&storage, DIR, options.clone()).unwrap();
    assert_reads(&log, next);
    for i in next..next + 10 {
        log.append(&[&payload(i)], i).unwrap();
    }
    assert!(active_path(&storage) != sealing, "the segment was sealed");
    drop(log);

    for seed in 0..8 {
        let image = storage.crash(seed);
        let log = open_log(&image, DIR, options.clone()).unwrap();
        assert_reads(&log, next + 10);
    }
}

// Proves records written under a relaxed policy whose sync then failed are made durable
// by the restart that reads them (same boot), before it claims them in the synced mark:
// a power cut afterwards keeps every one, instead of finding the log shorter than the
// mark says.
#[test]
fn records_a_failed_sync_dropped_are_written_again_at_reopen() {
    let storage = SimStorage::new();
    let options = options(SyncPolicy::Never);
    let log = open_log(&storage, DIR, options.clone()).unwrap();
    log.append(&[&payload(0)], 0).unwrap();
    log.sync().unwrap();
    for i in 1..20 {
        log.append(&[&payload(i)], i).unwrap();
    }
    storage.fail_next_syncs(1);
    assert!(log.sync().is_err());
    drop(log);

    let log = open_log(&storage, DIR, options.clone()).unwrap();
    assert_reads(&log, 20);
    drop(log);

    for seed in 0..8 {
        let image = storage.crash(seed);
        let log = open_log(&image, DIR, options.clone()).unwrap();
        assert_reads(&log, 20);
    }
}
