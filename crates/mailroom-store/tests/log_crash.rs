//! Power-cut tests: random operation sequences on a SimStorage, then the image a power
//! cut could leave, reopened and checked against what the log confirmed.

use mailroom_store::log::{Log, LogOptions, SyncPolicy};
use mailroom_store::storage::SimStorage;
use mailroom_store::StoreError;
use mailroom_testkit::store::open_log;
use proptest::prelude::*;

const DIR: &str = "/data/log";

#[derive(Debug, Clone)]
enum Op {
    /// Append records with these payload lengths.
    Append(Vec<usize>),
    Sync,
    /// Delete segments below this fraction (per mille) of the log.
    DeleteBefore(u16),
    /// Drop the log and open it again (a process restart: nothing is lost).
    Reopen,
    /// Cut the power: reopen from a crash image drawn from this seed.
    PowerCut(u64),
    FailNextSync,
    FailNextWrite,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => proptest::collection::vec(0usize..150, 1..5).prop_map(Op::Append),
        1 => Just(Op::Sync),
        1 => (0u16..=1000).prop_map(Op::DeleteBefore),
        1 => Just(Op::Reopen),
        2 => any::<u64>().prop_map(Op::PowerCut),
        1 => Just(Op::FailNextSync),
        1 => Just(Op::FailNextWrite),
    ]
}

fn options() -> LogOptions {
    LogOptions {
        segment_bytes_max: 700,
        index_interval_bytes: 100,
        sync: SyncPolicy::Always,
        ..LogOptions::default()
    }
}

/// What the log has promised.
#[derive(Debug, Default)]
struct Model {
    /// Payload of every offset ever confirmed (or recovered), by offset.
    records: Vec<Vec<u8>>,
    /// The records of the append that failed, which may or may not have reached the disk.
    in_doubt: Vec<Vec<u8>>,
    /// The oldest retained offset the live log reports.
    start: u64,
    /// The lowest start a reopen may show: below `start` only while a deletion that
    /// failed may or may not have reached the disk.
    start_min: u64,
    fail_stopped: bool,
}

fn payload(offset: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (offset as usize * 31 + i) as u8).collect()
}

/// Checks a freshly opened log against the model, then adopts what survived of the
/// records in doubt (open made them durable).
fn check_reopened(log: &Log, model: &mut Model) -> Result<(), TestCaseError> {
    let confirmed = model.records.len() as u64;
    prop_assert!(
        (model.start_min..=model.start).contains(&log.start()),
        "start {} outside {}..={}: retention that returned Ok is durable",
        log.start(),
        model.start_min,
        model.start
    );
    model.start = log.start();
    model.start_min = log.start();
    prop_assert!(
        log.end() >= confirmed,
        "confirmed offsets lost: end {} < {}",
        log.end(),
        confirmed
    );
    prop_assert!(
        log.end() <= confirmed + model.in_doubt.len() as u64,
        "offsets appeared from nowhere"
    );
    for offset in model.start..log.end() {
        let expected = match model.records.get(offset as usize) {
            Some(bytes) => bytes,
            None => &model.in_doubt[(offset - confirmed) as usize],
        };
        let record = log
            .read(offset)
            .map_err(|e| TestCaseError::fail(format!("{offset}: {e}")))?;
        let record = record.ok_or_else(|| TestCaseError::fail(format!("gap at {offset}")))?;
        prop_assert_eq!(&record.payload[..], &expected[..], "offset {}", offset);
    }
    let survived = (log.end() - confirmed) as usize;
    let adopted: Vec<Vec<u8>> = model.in_doubt.drain(..).take(survived).collect();
    model.records.extend(adopted);
    model.fail_stopped = false;
    Ok(())
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut storage = SimStorage::new();
    let mut log = Some(open_log(&storage, DIR, options()).expect("reopen"));
    let mut model = Model::default();
    for op in ops {
        let current = log.as_ref().expect("open");
        match op {
            Op::Append(lengths) => {
                let first = model.records.len() as u64;
                let payloads: Vec<Vec<u8>> = lengths
                    .iter()
                    .enumerate()
                    .map(|(i, len)| payload(first + i as u64, *len))
                    .collect();
                let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
                match current.append(&refs, first) {
                    Ok(range) => {
                        prop_assert!(!model.fail_stopped, "append succeeded after fail-stop");
                        prop_assert_eq!(range, first..first + payloads.len() as u64);
                        model.records.extend(payloads);
                    }
                    Err(StoreError::FailStopped { .. }) => prop_assert!(model.fail_stopped),
                    Err(StoreError::Io { .. }) => {
                        prop_assert!(!model.fail_stopped);
                        model.fail_stopped = true;
                        model.in_doubt = payloads;
                    }
                    Err(other) => return Err(TestCaseError::fail(other.to_string())),
                }
            }
            Op::Sync => {
                let result = current.sync();
                prop_assert!(result.is_ok() || model.fail_stopped, "{:?}", result);
            }
            Op::DeleteBefore(per_mille) => {
                let end = model.records.len() as u64;
                let cut = model.start + (end - model.start) * u64::from(per_mille) / 1000;
                match current.delete_segments_before(cut) {
                    Ok(_) => {
                        prop_assert!(current.start() <= cut.max(model.start));
                        model.start = current.start();
                        model.start_min = current.start();
                    }
                    // An injected fault can land on a removal or the directory sync; a
                    // power cut may or may not keep the deletion.
                    Err(StoreError::Io { .. }) => {
                        model.fail_stopped |= current.append(&[], 0).is_err();
                        model.start = current.start();
                    }
                    Err(StoreError::FailStopped { .. }) => prop_assert!(model.fail_stopped),
                    Err(other) => return Err(TestCaseError::fail(other.to_string())),
                }
            }
            Op::Reopen | Op::PowerCut(_) => {
                // The old process is gone before the new one opens the directory.
                drop(log.take());
                if let Op::PowerCut(seed) = op {
                    storage = storage.crash(seed);
                }
                // Faults not yet triggered belong to the old process (a crash image has none).
                storage.fail_next_syncs(0);
                storage.fail_next_writes(0);
                let reopened = open_log(&storage, DIR, options()).expect("reopen");
                check_reopened(&reopened, &mut model)?;
                log = Some(reopened);
            }
            Op::FailNextSync => storage.fail_next_syncs(1),
            Op::FailNextWrite => storage.fail_next_writes(1),
        }
    }
    // A final power cut and check.
    drop(log);
    let after = storage.crash(0xC0FFEE);
    check_reopened(
        &open_log(&after, DIR, options()).expect("reopen"),
        &mut model,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    // Proves that under SyncPolicy::Always every append that returned Ok survives any
    // power cut with its bytes, offsets stay gap-free, a failed append leaves at most its
    // own records (whole and correct), and fail-stop holds until reopen.
    #[test]
    fn confirmed_appends_survive_power_cuts(ops in proptest::collection::vec(op(), 1..60)) {
        run(ops)?;
    }
}

// Proves the crash image really drops unsynced data (so the test above can fail): with
// SyncPolicy::Never and no sync, some seed loses records.
#[test]
fn crash_image_drops_unsynced_records() {
    let storage = SimStorage::new();
    let never = LogOptions {
        sync: SyncPolicy::Never,
        ..options()
    };
    let log = open_log(&storage, DIR, never.clone()).unwrap();
    for i in 0..5u64 {
        log.append(&[&payload(i, 10)], i).unwrap();
    }
    let ends: Vec<u64> = (0..32)
        .map(|seed| {
            open_log(&storage.crash(seed), DIR, never.clone())
                .unwrap()
                .end()
        })
        .collect();
    assert!(ends.iter().any(|&end| end < 5), "{ends:?}");
    assert!(ends.iter().all(|&end| end <= 5), "{ends:?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    // Proves what docs/storage.md says SyncPolicy::Never can lose: after a power cut the
    // log is a gap-free prefix of what was appended, holding at least everything up to
    // the last Log::sync (and every roll, which syncs).
    #[test]
    fn never_policy_loses_only_an_unsynced_suffix(
        steps in proptest::collection::vec((1usize..4, any::<bool>()), 1..40),
        seed: u64,
    ) {
        let storage = SimStorage::new();
        let never = LogOptions { sync: SyncPolicy::Never, ..options() };
        let log = open_log(&storage, DIR, never.clone()).unwrap();
        let mut written: Vec<Vec<u8>> = Vec::new();
        let mut synced = 0u64;
        for (count, sync) in steps {
            let first = written.len() as u64;
            let payloads: Vec<Vec<u8>> = (0..count as u64).map(|i| payload(first + i, 20)).collect();
            let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
            log.append(&refs, 0).unwrap();
            written.extend(payloads);
            if sync {
                log.sync().unwrap();
                synced = written.len() as u64;
            }
        }
        let sealed_end = log.segments().last().unwrap().base_offset;
        drop(log);
        let after = open_log(&storage.crash(seed), DIR, never).unwrap();
        prop_assert!(after.end() >= synced.max(sealed_end), "lost synced records");
        prop_assert!(after.end() <= written.len() as u64);
        for offset in 0..after.end() {
            let record = after.read(offset).unwrap().expect("gap-free");
            prop_assert_eq!(&record.payload[..], &written[offset as usize][..]);
        }
    }
}
