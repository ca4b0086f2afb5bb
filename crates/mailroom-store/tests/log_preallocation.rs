//! Black-box tests of preallocated log segments: the zeros written ahead of the records,
//! how recovery ends the records where they begin, and how damage is still told apart
//! from a torn tail around them (`docs/storage.md`, "Preallocated zeros").

use std::path::{Path, PathBuf};

use mailroom_store::log::{Log, LogOptions, SyncPolicy};
use mailroom_store::record::HEADER_BYTES;
use mailroom_store::storage::SimStorage;
use mailroom_store::StoreError;
use mailroom_testkit::store::{log_files, open_log};
use proptest::prelude::*;

const DIR: &str = "/log";
/// Zeros go ahead of the records in steps of this many bytes.
const STEP: u64 = 256;

fn options() -> LogOptions {
    LogOptions {
        segment_bytes_max: 4096,
        index_interval_bytes: 128,
        preallocate_bytes: STEP,
        ..LogOptions::default()
    }
}

fn payload(i: u64) -> Vec<u8> {
    format!("payload number {i:03}").into_bytes()
}

fn active_path(storage: &SimStorage) -> PathBuf {
    log_files(storage, DIR, "log").pop().unwrap()
}

/// A log of `count` records, one per append, closed: its active segment ends in zeros.
fn log_with(count: u64) -> SimStorage {
    let storage = SimStorage::new();
    let log = open_log(&storage, DIR, options()).unwrap();
    for i in 0..count {
        log.append(&[&payload(i)], i).unwrap();
    }
    storage
}

/// The active segment's record bytes, from the log itself.
fn record_bytes(log: &Log) -> u64 {
    log.segments().last().unwrap().bytes
}

// Proves that once a segment holds a step of records, zeros follow them in the file
// (half a step to one and a half, never past the segment's limit) and no reader takes
// them for records.
#[test]
fn zeros_follow_the_records_of_the_active_segment() {
    let storage = SimStorage::new();
    let log = open_log(&storage, DIR, options()).unwrap();
    for i in 0..40 {
        log.append(&[&payload(i)], i).unwrap();
        let records = record_bytes(&log);
        let file = storage.file_bytes(&active_path(&storage)).unwrap();
        let zeros = file.len() as u64 - records;
        if records >= STEP {
            assert!(
                (STEP / 2..=3 * STEP / 2).contains(&zeros),
                "{records} {zeros}"
            );
            assert!(file[records as usize..].iter().all(|&b| b == 0));
        } else {
            assert_eq!(zeros, 0, "no zeros before a step of records");
        }
    }
    assert_eq!(log.end(), 40);
    for i in 0..40 {
        assert_eq!(&log.read(i).unwrap().unwrap().payload[..], &payload(i)[..]);
    }
    assert!(log.read(40).unwrap().is_none());
}

// Proves a zero tail after the last record is a clean end: reopening keeps every record,
// cuts the zeros (an open segment holds records only) and appends go on at the end.
#[test]
fn recovery_ends_the_records_where_the_zeros_begin() {
    let storage = log_with(30);
    let active = active_path(&storage);
    let before = storage.file_bytes(&active).unwrap().len();
    let log = open_log(&storage, DIR, options()).unwrap();
    assert_eq!(log.end(), 30);
    let records = record_bytes(&log);
    assert!(records + STEP <= before as u64, "the file had zeros");
    assert_eq!(storage.file_bytes(&active).unwrap().len() as u64, records);
    assert_eq!(log.append(&[b"more"], 1).unwrap(), 30..31);
    for i in 0..30 {
        assert_eq!(&log.read(i).unwrap().unwrap().payload[..], &payload(i)[..]);
    }
    assert_eq!(&log.read(30).unwrap().unwrap().payload[..], b"more");
}

// Proves that a record torn at any byte, or zeroed from there, with zeros after it is a
// torn tail: it is cut, every confirmed record stays, and the offset is written again.
// The torn record is written but never confirmed, as a torn write's record always is.
#[test]
fn a_torn_record_then_zeros_is_a_torn_tail() {
    let clean = log_with(30);
    let log = open_log(&clean, DIR, options()).unwrap();
    // Bring the zeros back (a round writes them), then leave one record unconfirmed.
    log.append(&[&payload(30)], 30).unwrap();
    let confirmed = record_bytes(&log) as usize;
    log.write(&[&payload(31)], 31).unwrap();
    drop(log); // writes the buffered record into the zeros, unsynced
    let active = active_path(&clean);
    let full = clean.file_bytes(&active).unwrap();
    let record = HEADER_BYTES + payload(31).len();
    assert!(
        full.len() > confirmed + record,
        "zeros follow the torn record"
    );
    for cut in confirmed..confirmed + record {
        for fill in [0u8, 0xa5] {
            let storage = clean.crash(0);
            storage.corrupt_file(&active, |bytes| {
                bytes[cut..confirmed + record].fill(fill);
            });
            let log = open_log(&storage, DIR, options())
                .unwrap_or_else(|e| panic!("cut {cut} fill {fill}: {e}"));
            assert_eq!(log.end(), 31, "cut {cut} fill {fill}");
            assert_eq!(storage.file_bytes(&active).unwrap().len(), confirmed);
            assert_eq!(log.append(&[b"again"], 9).unwrap(), 31..32);
            assert_eq!(&log.read(31).unwrap().unwrap().payload[..], b"again");
        }
    }
}

// Proves that zeros where the synced mark says records were durable are damage, never
// an end: a zeroed last record, or a zeroed record in the middle, is Corrupt at its byte.
#[test]
fn a_zeroed_hole_before_the_synced_mark_is_damage() {
    let clean = log_with(30);
    let active = active_path(&clean);
    let record = HEADER_BYTES + payload(29).len();
    let records = 30 * record;
    assert!(
        clean.file_bytes(&active).unwrap().len() > records,
        "zeros follow"
    );
    for hole in [records - record, records - 3 * record] {
        let storage = clean.crash(1);
        storage.corrupt_file(&active, |bytes| {
            bytes[hole..hole + record].fill(0);
        });
        match open_log(&storage, DIR, options()) {
            Err(StoreError::Corrupt { position, .. }) => assert_eq!(position, hole as u64),
            other => panic!("hole at {hole}: {:?}", other.map(|log| log.end())),
        }
        assert!(storage.file_bytes(&active).unwrap().len() > records);
    }
}

// Proves a roll seals a segment without its zeros: every sealed file is exactly its
// records (as its index trailer says), and the log reopens and reads across them.
#[test]
fn a_roll_cuts_the_zeros_off_the_sealed_segment() {
    let storage = log_with(300);
    let log = open_log(&storage, DIR, options()).unwrap();
    let segments = log.segments();
    assert!(segments.len() > 2, "{segments:?}");
    for info in &segments[..segments.len() - 1] {
        let path = Path::new(DIR).join(format!("{:020}.log", info.base_offset));
        assert_eq!(storage.file_bytes(&path).unwrap().len() as u64, info.bytes);
    }
    assert_eq!(log.end(), 300);
    for i in 0..300 {
        assert_eq!(&log.read(i).unwrap().unwrap().payload[..], &payload(i)[..]);
    }
}

// Proves logs written with and without preallocation open under either setting: the
// zeros are no format change, only bytes past the end of the records.
#[test]
fn logs_open_with_preallocation_on_or_off() {
    let off = LogOptions {
        preallocate_bytes: 0,
        ..options()
    };
    let storage = SimStorage::new();
    for (round, writing) in [options(), off.clone(), options(), off]
        .into_iter()
        .enumerate()
    {
        let log = open_log(&storage, DIR, writing).unwrap();
        let first = round as u64 * 50;
        assert_eq!(log.end(), first);
        for i in first..first + 50 {
            log.append(&[&payload(i)], i).unwrap();
        }
    }
    let log = open_log(&storage, DIR, options()).unwrap();
    assert_eq!(log.end(), 200);
    for i in 0..200 {
        assert_eq!(&log.read(i).unwrap().unwrap().payload[..], &payload(i)[..]);
    }
}

// Proves the salvage of a groups log reads a zero tail as the end: with nothing damaged
// there is nothing to cut, and rot before the zeros is cut where it is.
#[test]
fn cutting_at_damage_stops_at_the_zeros() {
    let storage = log_with(30);
    assert!(
        Log::cut_at_damage(&storage, Path::new(DIR), &options(), None)
            .unwrap()
            .is_none()
    );
    let second = HEADER_BYTES + payload(0).len() + 5;
    storage.corrupt_file(&active_path(&storage), |b| b[second] ^= 1);
    let cut = Log::cut_at_damage(&storage, Path::new(DIR), &options(), None)
        .unwrap()
        .unwrap();
    assert_eq!(cut.kept, 0..1);
    assert_eq!(open_log(&storage, DIR, options()).unwrap().end(), 1);
}

// Proves that on a full disk records still land in the zeros already written, and that
// the failed top-up of zeros fails nothing: the appends inside them are confirmed, and
// only a record past them meets the full disk (and then every confirmed one survives).
#[test]
fn a_full_disk_still_takes_records_into_the_zeros() {
    // No index entries: an index write that grows its file would meet the full disk too.
    let options = LogOptions {
        index_interval_bytes: 1 << 20,
        ..options()
    };
    let storage = SimStorage::new();
    let log = open_log(&storage, DIR, options.clone()).unwrap();
    for i in 0..30 {
        log.append(&[&payload(i)], i).unwrap();
    }
    storage.set_full(true);
    let mut next = 30;
    let refused = loop {
        match log.append(&[&payload(next)], next) {
            Ok(_) => next += 1,
            Err(error) => break error,
        }
        assert!(next < 100, "the zeros ran out");
    };
    assert!(matches!(refused, StoreError::Io { .. }), "{refused}");
    let record = (HEADER_BYTES + payload(0).len()) as u64;
    assert!(
        (next - 30) * record >= STEP / 2 - record,
        "{} records went into the zeros",
        next - 30
    );
    drop(log);
    storage.set_full(false);
    let log = open_log(&storage.crash(3), DIR, options).unwrap();
    assert_eq!(log.end(), next);
    for i in 0..next {
        assert_eq!(&log.read(i).unwrap().unwrap().payload[..], &payload(i)[..]);
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// Append records with these payload lengths.
    Append(Vec<usize>),
    /// Drop the log and open it again.
    Reopen,
    /// Cut the power: reopen from a crash image drawn from this seed.
    PowerCut(u64),
    FailNextSync,
    FailNextWrite,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => proptest::collection::vec(0usize..120, 1..5).prop_map(Op::Append),
        1 => Just(Op::Reopen),
        2 => any::<u64>().prop_map(Op::PowerCut),
        1 => Just(Op::FailNextSync),
        1 => Just(Op::FailNextWrite),
    ]
}

fn bytes_of(offset: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (offset as usize * 31 + i) as u8).collect()
}

/// Runs `ops` on a preallocating log, checking after every reopen that each confirmed
/// record is there with its bytes, and that at most the failed append's records follow.
fn run(ops: Vec<Op>, sync: SyncPolicy) -> Result<(), TestCaseError> {
    let options = LogOptions { sync, ..options() };
    let mut storage = SimStorage::new();
    let mut log = Some(open_log(&storage, DIR, options.clone()).expect("open"));
    let mut confirmed: Vec<Vec<u8>> = Vec::new();
    let mut in_doubt: Vec<Vec<u8>> = Vec::new();
    for op in ops.into_iter().chain([Op::PowerCut(0xC0FFEE)]) {
        match op {
            Op::Append(lengths) => {
                let first = (confirmed.len() + in_doubt.len()) as u64;
                let payloads: Vec<Vec<u8>> = (first..)
                    .zip(&lengths)
                    .map(|(o, &l)| bytes_of(o, l))
                    .collect();
                let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
                match log.as_ref().expect("open").append(&refs, first) {
                    Ok(range) => {
                        prop_assert!(in_doubt.is_empty(), "append after a failure");
                        prop_assert_eq!(range.start, first);
                        confirmed.extend(payloads);
                    }
                    Err(StoreError::Io { .. } | StoreError::FailStopped { .. }) => {
                        if in_doubt.is_empty() {
                            in_doubt = payloads;
                        }
                    }
                    Err(other) => return Err(TestCaseError::fail(other.to_string())),
                }
            }
            Op::Reopen | Op::PowerCut(_) => {
                drop(log.take());
                if let Op::PowerCut(seed) = op {
                    storage = storage.crash(seed);
                }
                storage.fail_next_syncs(0);
                storage.fail_next_writes(0);
                let reopened = open_log(&storage, DIR, options.clone()).expect("reopen");
                let end = reopened.end() as usize;
                prop_assert!(
                    end >= confirmed.len(),
                    "lost confirmed: {} < {}",
                    end,
                    confirmed.len()
                );
                prop_assert!(
                    end <= confirmed.len() + in_doubt.len(),
                    "records from nowhere"
                );
                let survived = end - confirmed.len();
                confirmed.extend(in_doubt.drain(..).take(survived));
                for (offset, expected) in confirmed.iter().enumerate() {
                    let record = reopened
                        .read(offset as u64)
                        .map_err(|e| TestCaseError::fail(e.to_string()))?;
                    let got = record.map(|r| r.payload.to_vec());
                    prop_assert_eq!(got.as_ref(), Some(expected));
                }
                log = Some(reopened);
            }
            Op::FailNextSync => storage.fail_next_syncs(1),
            Op::FailNextWrite => storage.fail_next_writes(1),
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    // Proves that with zeros written ahead of the records every append confirmed under
    // SyncPolicy::Always survives any power cut with its bytes, gap-free, and a failed
    // append leaves at most its own records.
    #[test]
    fn confirmed_appends_survive_power_cuts(ops in proptest::collection::vec(op(), 1..80)) {
        run(ops, SyncPolicy::Always)?;
    }
}
