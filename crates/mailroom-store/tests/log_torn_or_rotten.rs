//! Recovery tells a torn tail (an unconfirmed write a crash cut short: truncated) from rot
//! in a record that was durable (refused with its file, byte and offset, never
//! truncated), for the message log and the groups log; a rotten log is repaired without
//! reusing a confirmed offset.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use mailroom_store::log::{Log, LogOptions};
use mailroom_store::record::{decode, Decoded, HEADER_BYTES};
use mailroom_store::storage::{SimStorage, Storage};
use mailroom_store::{StoreError, StoreOptions};
use mailroom_testkit::store::{open_log, open_topic, try_open_store};

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

fn files(storage: &SimStorage, dir: &Path, extension: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = storage
        .list_dir(dir)
        .unwrap()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == extension))
        .collect();
    found.sort();
    found
}

/// Where the last record of a segment file starts, and its offset.
fn last_record(bytes: &[u8]) -> (usize, u64) {
    let mut at = 0;
    let mut last = None;
    while let Decoded::Record { record, bytes: n } = decode(&bytes[at..], u32::MAX) {
        last = Some((at, record.offset));
        at += n;
    }
    assert_eq!(at, bytes.len(), "the segment holds whole records only");
    last.expect("a record")
}

/// A log of `count` confirmed records, closed cleanly.
fn confirmed_log(count: u64) -> SimStorage {
    let storage = SimStorage::new();
    let log = open_log(&storage, DIR, options()).unwrap();
    for i in 0..count {
        log.append(&[&payload(i)], i).unwrap();
    }
    storage
}

/// Checks that opening `storage` is refused as rot at exactly `position` of `segment`,
/// naming `offset`, and leaves the file as it was.
fn assert_refused(result: Result<Log, StoreError>, segment: &Path, position: usize, offset: u64) {
    match result {
        Err(StoreError::Corrupt {
            path,
            position: at,
            reason,
        }) => {
            assert_eq!((path.as_path(), at), (segment, position as u64), "{reason}");
            assert!(reason.contains(&format!("offset {offset}")), "{reason}");
            assert!(reason.contains("was durable"), "{reason}");
        }
        Err(other) => panic!("expected Corrupt at byte {position}, got {other}"),
        Ok(log) => panic!(
            "a flip at byte {position} was accepted; the log ends at {}",
            log.end()
        ),
    }
}

// Proves a flipped bit at every byte of the last complete, synced record of a message log
// is refused at open with the segment, the record's byte position and its offset, after
// a power cut and as a process crash leaves it (page cache kept), and that the refused
// open truncates nothing.
#[test]
fn flips_in_the_last_synced_record_are_refused_where_they_are() {
    let count = 12;
    let storage = confirmed_log(count);
    let segment = files(&storage, Path::new(DIR), "log").pop().unwrap();
    let clean = storage.file_bytes(&segment).unwrap();
    let (start, offset) = last_record(&clean);
    assert_eq!(offset, count - 1);
    for byte in start..clean.len() {
        let image = storage.crash(byte as u64);
        image.corrupt_file(&segment, |b| b[byte] ^= 1 << (byte % 8));
        let damaged = image.file_bytes(&segment).unwrap();
        assert_refused(open_log(&image, DIR, options()), &segment, start, offset);
        assert_eq!(image.file_bytes(&segment).unwrap(), damaged, "byte {byte}");
    }
    // As after kill -9: the log that confirmed the records is still open.
    let storage = SimStorage::new();
    let running = open_log(&storage, DIR, options()).unwrap();
    for i in 0..count {
        running.append(&[&payload(i)], i).unwrap();
    }
    for byte in start..clean.len() {
        storage.corrupt_file(&segment, |b| b[byte] ^= 0x40);
        assert_refused(open_log(&storage, DIR, options()), &segment, start, offset);
        storage.corrupt_file(&segment, |b| b[byte] ^= 0x40);
    }
}

// Proves the same for the groups log: a flip at every byte of its last synced record (the
// last ack) makes the store refuse the topic (it opens, with the topic failed: damage
// stays local), naming that record's segment and byte, rather than undo the ack.
#[test]
fn flips_in_the_last_synced_groups_record_are_refused_where_they_are() {
    let options = StoreOptions::default();
    let sim = SimStorage::new();
    let (store, topic) = open_topic(&sim, &options);
    topic.create_group("g", 3).unwrap();
    for i in 0..4u8 {
        topic.publish(Bytes::from(vec![i; 16])).unwrap();
        let delivery = topic.poll("g").unwrap().unwrap();
        topic.ack("g", delivery.id()).unwrap();
    }
    drop((store, topic));
    let groups = Path::new("/store/topics/t/groups");
    let segment = files(&sim, groups, "log").pop().unwrap();
    let clean = sim.file_bytes(&segment).unwrap();
    let (start, offset) = last_record(&clean);
    for byte in start..clean.len() {
        let image = sim.crash(byte as u64);
        image.corrupt_file(&segment, |b| b[byte] ^= 1 << (byte % 8));
        let store = try_open_store(&image, &options)
            .unwrap_or_else(|e| panic!("byte {byte}: the store must open: {e}"));
        match store.topic("t") {
            Err(StoreError::TopicFailed { reason, .. }) => {
                let at = format!("corrupt data in {} at byte {start}:", segment.display());
                assert!(reason.starts_with(&at), "{reason}");
                assert!(reason.contains(&format!("offset {offset}")), "{reason}");
            }
            Err(other) => panic!("byte {byte}: {other}"),
            Ok(_) => panic!("a flip at byte {byte} of the last ack was accepted"),
        }
    }
}

// Proves a torn tail is still truncated: records written but never confirmed, cut by a
// power cut (SimStorage images keep a random prefix of unsynced writes, the last torn
// half the time), leave every confirmed record and a prefix of the rest, and the log
// goes on from there.
#[test]
fn torn_unsynced_tail_is_truncated() {
    let confirmed = 6;
    let written = 5;
    let storage = confirmed_log(confirmed);
    let log = open_log(&storage, DIR, options()).unwrap();
    for i in confirmed..confirmed + written {
        log.write(&[&payload(i)], i).unwrap();
    }
    drop(log); // the buffered records go to the file, unsynced
    let mut ends = Vec::new();
    for seed in 0..64 {
        let image = storage.crash(seed);
        let log = open_log(&image, DIR, options()).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let end = log.end();
        assert!(
            (confirmed..=confirmed + written).contains(&end),
            "seed {seed}: {end}"
        );
        for i in 0..end {
            assert_eq!(&log.read(i).unwrap().unwrap().payload[..], &payload(i)[..]);
        }
        assert_eq!(log.append(&[b"next"], 0).unwrap(), end..end + 1);
        ends.push(end);
    }
    assert!(
        ends.contains(&confirmed),
        "no image lost the unsynced records"
    );
}

// Proves a log written before marks existed (no SYNCED file) still opens under the old
// rule: damage to its very last record is read as a torn tail and truncated.
#[test]
fn a_log_without_a_mark_keeps_the_torn_tail_rule() {
    let count = 5;
    let storage = confirmed_log(count);
    storage.remove_file(&Path::new(DIR).join("SYNCED")).unwrap();
    let segment = files(&storage, Path::new(DIR), "log").pop().unwrap();
    let (start, _) = last_record(&storage.file_bytes(&segment).unwrap());
    storage.corrupt_file(&segment, |b| b[start + HEADER_BYTES] ^= 1);
    let log = open_log(&storage, DIR, options()).unwrap();
    assert_eq!(log.end(), count - 1);
    drop(log);
    assert!(storage.exists(&Path::new(DIR).join("SYNCED")).unwrap());
}

// Proves a segment shorter than its mark says was synced is refused (durable records
// vanished), not read as a log that simply ends earlier.
#[test]
fn a_segment_cut_below_its_mark_is_refused() {
    let storage = confirmed_log(8);
    let segment = files(&storage, Path::new(DIR), "log").pop().unwrap();
    let (start, _) = last_record(&storage.file_bytes(&segment).unwrap());
    storage.corrupt_file(&segment, |b| b.truncate(start));
    match open_log(&storage, DIR, options()) {
        Err(StoreError::Corrupt { path, reason, .. }) => {
            assert_eq!(path, segment);
            assert!(reason.contains("durable records are missing"), "{reason}");
        }
        other => panic!("{:?}", other.map(|log| log.end())),
    }
}

// Proves the repair path: a rotten log is refused, `Log::repair` moves its segments into
// damaged/ and restarts it past every confirmed offset, the next append gets a new
// offset, a second repair finds nothing to do, and a log that opens is left alone.
#[test]
fn repair_moves_the_damage_aside_and_keeps_offsets_unique() {
    let count = 60; // three segments
    let storage = confirmed_log(count);
    let dir = Path::new(DIR);
    assert_eq!(Log::repair(&storage, dir, &options()).unwrap(), None);
    let segments = files(&storage, dir, "log");
    assert!(segments.len() > 2, "{segments:?}");
    let active = segments.last().unwrap().clone();
    let (start, _) = last_record(&storage.file_bytes(&active).unwrap());
    storage.corrupt_file(&active, |b| b[start + 3] ^= 0x08);
    assert!(open_log(&storage, DIR, options()).is_err());

    let repaired = Log::repair(&storage, dir, &options())
        .unwrap()
        .expect("repaired");
    assert_eq!(repaired.restarts_at, count);
    assert!(
        repaired.damage.contains("was durable"),
        "{}",
        repaired.damage
    );
    for old in &segments {
        let moved = repaired.moved_to.join(old.file_name().unwrap());
        assert!(storage.exists(&moved).unwrap(), "{moved:?}");
        assert!(!storage.exists(old).unwrap(), "{old:?}");
    }
    // A power cut right after the repair keeps it (everything it did was synced).
    let image = storage.crash(9);
    let log = open_log(&image, DIR, options()).unwrap();
    assert_eq!((log.start(), log.end()), (count, count));
    assert_eq!(log.read(count - 1).unwrap(), None);
    assert_eq!(log.append(&[b"after repair"], 0).unwrap(), count..count + 1);
    drop(log);
    assert_eq!(Log::repair(&image, dir, &options()).unwrap(), None);
    let log = open_log(&image, DIR, options()).unwrap();
    assert_eq!(
        &log.read(count).unwrap().unwrap().payload[..],
        b"after repair"
    );
}
