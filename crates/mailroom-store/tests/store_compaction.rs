//! Groups-log compaction: old dead letters are copied forward by checkpoints, so they no
//! longer keep every later groups-log segment, and stay readable (payload, attempts,
//! reason) through reopens, power cuts at every step, redrives and purges.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use mailroom::group::{NackKind, NackOptions};
use mailroom::topic::{Nack, StartPosition};
use mailroom_store::log::SyncPolicy;
use mailroom_store::storage::{Op, SimStorage, Storage, Watched, Watcher};
use mailroom_store::{DurableTopic, Store, StoreOptions};
use mailroom_testkit::store::{
    ack_traffic, compacting_options, open_store, open_store_on, try_open_store, STORE_DIR,
};
use parking_lot::Mutex;

/// Without compaction the traffic below leaves hundreds of groups-log segments; with it
/// the log keeps a handful (see `compaction.rs` for the rule).
const GROUPS_SEGMENTS_BOUND: usize = 16;

fn options(checkpoint_every: u64) -> StoreOptions {
    compacting_options(checkpoint_every, SyncPolicy::Always)
}

fn groups_dir() -> PathBuf {
    Path::new(STORE_DIR).join("topics/t/groups")
}

fn groups_segments(sim: &SimStorage) -> usize {
    let files = sim.list_dir(&groups_dir()).unwrap();
    files
        .iter()
        .filter(|path| path.extension().is_some_and(|ext| ext == "log"))
        .count()
}

fn payload(index: usize) -> Bytes {
    Bytes::from(format!("dead letter {index:04} {}", "x".repeat(index % 40)))
}

/// The dead letters the test expects: (offset, payload, reason, attempts).
type Expected = Vec<(u64, Bytes, String, u32)>;

/// Publishes `count` messages and dead-letters each (group `g` allows one attempt), with
/// a reason naming it; appends them to `expected`.
fn dead_letter(topic: &DurableTopic, first: usize, count: usize, expected: &mut Expected) {
    for index in first..first + count {
        let offset = topic.publish(payload(index)).unwrap();
        let delivery = topic
            .poll("g")
            .unwrap()
            .expect("the message just published");
        assert_eq!(delivery.id().offset, offset);
        let reason = format!("reason {index}");
        let nack = NackOptions::new(NackKind::Reject).with_reason(reason.clone());
        assert_eq!(
            topic.nack_with("g", delivery.id(), nack).unwrap(),
            Nack::DeadLettered
        );
        expected.push((offset, payload(index), reason, 1));
    }
}

/// Publishes, polls and acks `count` messages: groups-log traffic that kills nothing.
fn traffic(topic: &DurableTopic, count: usize) {
    traffic_on(topic, &["g"], count);
}

/// [`traffic`] consumed by each of `groups`.
fn traffic_on(topic: &DurableTopic, groups: &[&str], count: usize) {
    ack_traffic(topic, groups, b"ordinary traffic", count);
}

fn assert_dead_letters(topic: &DurableTopic, expected: &Expected) {
    let info = topic.dead_letter_info("g").unwrap();
    let got: Expected = info
        .iter()
        .map(|dead| {
            let reason = dead.reason.clone().expect("a reason");
            (dead.offset, dead.message.clone(), reason, dead.attempts)
        })
        .collect();
    assert_eq!(&got, expected);
}

/// A store with group `g` (one attempt), `dead` dead letters, then traffic.
fn populated(storage: Arc<dyn Storage>, options: &StoreOptions, dead: usize) -> (Store, Expected) {
    let store = open_store_on(storage, options);
    store.create_topic("t").unwrap();
    let topic = store.topic("t").unwrap();
    topic.create_group("g", 1).unwrap();
    let mut expected = Vec::new();
    dead_letter(&topic, 0, dead, &mut expected);
    (store, expected)
}

// Proves the groups log stays bounded over many checkpoints while old dead letters are
// kept, and every dead letter (payload, attempts, reason) reads back, also after reopen.
#[test]
fn segments_stay_bounded_while_dead_letters_are_kept() {
    let sim = SimStorage::new();
    let options = options(32);
    let (store, mut expected) = populated(Arc::new(sim.clone()), &options, 12);
    let topic = store.topic("t").unwrap();
    let mut most = 0;
    for round in 0..30 {
        traffic(&topic, 60);
        if round % 10 == 5 {
            // New dead letters among the traffic, old ones keep being copied forward.
            dead_letter(&topic, 100 + round, 3, &mut expected);
        }
        most = most.max(groups_segments(&sim));
        assert_dead_letters(&topic, &expected);
    }
    assert!(
        most <= GROUPS_SEGMENTS_BOUND,
        "{most} groups-log segments at most"
    );
    drop(topic);
    drop(store);
    let store = open_store(&sim, &options);
    let topic = store.topic("t").unwrap();
    assert_dead_letters(&topic, &expected);
    traffic(&topic, 200);
    assert_dead_letters(&topic, &expected);
    assert!(groups_segments(&sim) <= GROUPS_SEGMENTS_BOUND);
}

// Proves a redrive after compaction delivers each dead letter's own payload, also when
// the redriven messages wait (unfinished) through further compactions and a reopen, and
// that the copies go once they are done.
#[test]
fn redrive_after_compaction_delivers_the_right_payload() {
    let sim = SimStorage::new();
    let options = options(32);
    let (store, expected) = populated(Arc::new(sim.clone()), &options, 10);
    let topic = store.topic("t").unwrap();
    topic
        .create_group_at("h", 1, StartPosition::Latest)
        .unwrap();
    traffic_on(&topic, &["g", "h"], 300);
    assert_dead_letters(&topic, &expected);
    assert!(groups_segments(&sim) <= GROUPS_SEGMENTS_BOUND, "compacted");
    let redriven = topic.redrive("g", 0..u64::MAX).unwrap();
    assert_eq!(redriven, expected.len() as u64);
    // Only `h` consumes: `g`'s redriven messages stay unfinished while the checkpoints
    // copy their payloads forward.
    traffic_on(&topic, &["h"], 600);
    assert!(
        groups_segments(&sim) <= GROUPS_SEGMENTS_BOUND,
        "compacted again"
    );
    drop(topic);
    drop(store);
    let store = open_store(&sim, &options);
    let topic = store.topic("t").unwrap();
    for _ in 0..expected.len() {
        let delivery = topic.poll("g").unwrap().expect("a redriven message");
        let (_, payload, _, _) = expected
            .iter()
            .find(|(offset, _, _, _)| *offset == delivery.offset)
            .expect("a redriven message first");
        assert_eq!(&delivery.message, payload);
        topic.ack("g", delivery.id()).unwrap();
    }
    while let Some(delivery) = topic.poll("g").unwrap() {
        topic.ack("g", delivery.id()).unwrap();
    }
    traffic_on(&topic, &["g", "h"], 300);
    assert!(topic.dead_letters("g").unwrap().is_empty());
    assert!(groups_segments(&sim) <= 3, "nothing pins old segments now");
}

// Proves a purge lets the copies go: the groups log shrinks to what replay needs.
#[test]
fn purge_lets_the_copies_go() {
    let sim = SimStorage::new();
    let options = options(32);
    let (store, expected) = populated(Arc::new(sim.clone()), &options, 20);
    let topic = store.topic("t").unwrap();
    traffic(&topic, 600);
    assert_dead_letters(&topic, &expected);
    let before = groups_segments(&sim);
    assert!(
        (4..=GROUPS_SEGMENTS_BOUND).contains(&before),
        "compacted, and the copies need segments ({before})"
    );
    assert_eq!(topic.purge("g", 0..u64::MAX).unwrap(), 20);
    traffic(&topic, 100);
    assert!(groups_segments(&sim) <= 3, "{} left", groups_segments(&sim));
    assert!(topic.dead_letters("g").unwrap().is_empty());
}

/// Records the power-cut image of the file system after every change,
/// once armed.
#[derive(Debug, Clone)]
struct Recorder {
    sim: SimStorage,
    images: Arc<Mutex<Option<Vec<SimStorage>>>>,
}

/// Power-cut images per step: each crash keeps a different random prefix of the
/// unsynced writes.
const SEEDS_PER_STEP: u64 = 2;

impl Recorder {
    fn snap(&self) {
        if let Some(images) = self.images.lock().as_mut() {
            for seed in 0..SEEDS_PER_STEP {
                images.push(self.sim.crash(images.len() as u64 * 7 + seed));
            }
        }
    }
}

impl Watcher for Recorder {
    fn after(&self, op: Op<'_>) {
        if op.changes_disk() {
            self.snap();
        }
    }
}

// Proves a power cut at any step of a compacting checkpoint (copies written, synced,
// checkpoint replaced, old segments removed) leaves a store that opens with every dead
// letter intact, and that the checkpoint did compact; under both kinds of sync policy.
#[test]
fn power_cut_at_every_step_of_a_compacting_checkpoint_keeps_dead_letters() {
    power_cut_at_every_step(SyncPolicy::Always);
    // Relaxed: the copies are not waited for, only synced by the checkpoint itself.
    power_cut_at_every_step(SyncPolicy::Never);
}

fn power_cut_at_every_step(sync: SyncPolicy) {
    let sim = SimStorage::new();
    let recorder = Recorder {
        sim: sim.clone(),
        images: Arc::new(Mutex::new(None)),
    };
    // No automatic checkpoint: the one below is the first, and finds many segments.
    let options = compacting_options(u64::MAX, sync);
    let storage = Watched::new(Arc::new(sim.clone()), Arc::new(recorder.clone()));
    let (store, expected) = populated(Arc::new(storage), &options, 8);
    let topic = store.topic("t").unwrap();
    traffic(&topic, 300);
    // Under a relaxed policy the dead letters themselves are durable only now.
    store.sync().unwrap();
    let before = groups_segments(&sim);
    assert!(before > 20, "only {before} groups-log segments before");
    *recorder.images.lock() = Some(Vec::new());
    store.checkpoint().unwrap();
    let images = recorder.images.lock().take().unwrap();
    let after = groups_segments(&sim);
    assert!(
        after <= 4,
        "{after} groups-log segments after the checkpoint"
    );
    assert!(
        images.len() as u64 >= 8 * SEEDS_PER_STEP,
        "{} images",
        images.len()
    );
    assert_dead_letters(&topic, &expected);
    for (step, image) in images.into_iter().enumerate() {
        let store = try_open_store(&image, &options)
            .unwrap_or_else(|error| panic!("image {step} does not open: {error}"));
        let topic = store.topic("t").unwrap();
        assert_dead_letters(&topic, &expected);
        // And the reopened store can go on and compact again.
        traffic(&topic, 10);
        store.checkpoint().unwrap();
        assert_dead_letters(&topic, &expected);
    }
}

/// One step of the model test.
#[derive(Debug, Clone)]
enum Step {
    DeadLetter(usize),
    Traffic(usize),
    /// Redrive the dead letters with offsets in the range (as fractions of the log, in
    /// percent), then take each back: ack it, or (`true`) dead-letter it again.
    Redrive(u8, u8, bool),
    Purge(u8, u8),
    Reopen,
}

fn any_step() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    prop_oneof![
        (1..6usize).prop_map(Step::DeadLetter),
        (20..200usize).prop_map(Step::Traffic),
        (0..100u8, 0..100u8, any::<bool>()).prop_map(|(a, b, again)| Step::Redrive(a, b, again)),
        (0..100u8, 0..100u8).prop_map(|(a, b)| Step::Purge(a, b)),
        Just(Step::Reopen),
    ]
}

/// The offsets `a`..`b` percent of the way through `0..end`.
fn percent_range(a: u8, b: u8, end: u64) -> std::ops::Range<u64> {
    let (low, high) = (u64::from(a.min(b)), u64::from(a.max(b)));
    end * low / 100..end * high / 100 + 1
}

/// Runs `steps` against a store and checks after each that the dead letters are what a
/// plain list says and that the groups log stays bounded.
fn run_model(steps: &[Step]) {
    let sim = SimStorage::new();
    let options = options(32);
    let (mut store, mut expected) = populated(Arc::new(sim.clone()), &options, 4);
    let mut next_index = 4;
    for step in steps {
        let topic = store.topic("t").unwrap();
        match *step {
            Step::DeadLetter(count) => {
                dead_letter(&topic, next_index, count, &mut expected);
                next_index += count;
            }
            Step::Traffic(count) => traffic(&topic, count),
            Step::Redrive(a, b, again) => {
                let range = percent_range(a, b, topic.len());
                let (taken, kept) = expected
                    .into_iter()
                    .partition(|(offset, _, _, _)| range.contains(offset));
                expected = kept;
                let taken: Expected = taken;
                assert_eq!(topic.redrive("g", range).unwrap(), taken.len() as u64);
                for _ in 0..taken.len() {
                    let delivery = topic.poll("g").unwrap().expect("a redriven message");
                    let (offset, payload, _, attempts) = taken
                        .iter()
                        .find(|(offset, _, _, _)| *offset == delivery.offset)
                        .expect("one of the redriven")
                        .clone();
                    assert_eq!(delivery.message, payload);
                    if again {
                        let reason = format!("again {offset}");
                        let nack = NackOptions::new(NackKind::Reject).with_reason(reason.clone());
                        topic.nack_with("g", delivery.id(), nack).unwrap();
                        expected.push((offset, payload, reason, attempts + 1));
                    } else {
                        topic.ack("g", delivery.id()).unwrap();
                    }
                }
            }
            Step::Purge(a, b) => {
                let range = percent_range(a, b, topic.len());
                let before = expected.len();
                expected.retain(|(offset, _, _, _)| !range.contains(offset));
                let purged = (before - expected.len()) as u64;
                assert_eq!(topic.purge("g", range).unwrap(), purged);
            }
            Step::Reopen => {
                drop(topic);
                drop(store);
                store = open_store(&sim, &options);
            }
        }
        let topic = store.topic("t").unwrap();
        assert_dead_letters(&topic, &expected);
        let segments = groups_segments(&sim);
        assert!(
            segments <= 2 * GROUPS_SEGMENTS_BOUND,
            "{segments} segments after {step:?}"
        );
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(12))]

    // Proves that under any mix of dead letters, traffic, redrives (taken back by an ack
    // or a second dead-lettering), purges and reopens, the dead letters read back as a
    // plain list says, and the groups log stays bounded.
    #[test]
    fn dead_letters_match_a_model_through_compactions(
        steps in proptest::collection::vec(any_step(), 1..24)
    ) {
        run_model(&steps);
    }
}

// Proves readers of dead letters on other threads never fail or see a wrong payload
// while compacting checkpoints move the dead letters under them (real threads).
#[test]
fn dead_letters_read_concurrently_with_compaction() {
    let sim = SimStorage::new();
    let options = options(32);
    let (store, expected) = populated(Arc::new(sim.clone()), &options, 12);
    let topic = store.topic("t").unwrap();
    let done = std::sync::atomic::AtomicBool::new(false);
    let reads = std::thread::scope(|scope| {
        let readers: Vec<_> = (0..2)
            .map(|_| {
                scope.spawn(|| {
                    let mut reads = 0u64;
                    while !done.load(std::sync::atomic::Ordering::Acquire) {
                        assert_dead_letters(&topic, &expected);
                        reads += 1;
                    }
                    reads
                })
            })
            .collect();
        traffic(&topic, 1500);
        done.store(true, std::sync::atomic::Ordering::Release);
        readers
            .into_iter()
            .map(|reader| reader.join().unwrap())
            .sum::<u64>()
    });
    assert!(reads > 0);
    // Readers write due checkpoints too (after their read), so which thread compacts when
    // varies from run to run; the bound holds all the same.
    let segments = groups_segments(&sim);
    assert!(
        segments <= GROUPS_SEGMENTS_BOUND,
        "{segments} groups-log segments after {reads} concurrent reads"
    );
}

// Proves a damaged dead-letter record does not stop the store: checkpoints leave the log
// uncompacted rather than fail, traffic goes on, and reading the dead letters reports the
// damage as `Corrupt`.
#[test]
fn a_damaged_dead_letter_is_reported_not_fatal() {
    let sim = SimStorage::new();
    let options = options(32);
    let (store, _) = populated(Arc::new(sim.clone()), &options, 6);
    let topic = store.topic("t").unwrap();
    traffic(&topic, 200);
    // Damage every record holding the first dead letter's payload (its original, and a
    // copy if a compaction made one already).
    let needle = payload(0);
    let holds = |bytes: &[u8]| bytes.windows(needle.len()).any(|w| w == &needle[..]);
    let mut damaged = false;
    for file in sim.list_dir(&groups_dir()).unwrap() {
        while sim.file_bytes(&file).is_some_and(|bytes| holds(&bytes)) {
            sim.corrupt_file(&file, |bytes| {
                let at = bytes.windows(needle.len()).position(|w| w == &needle[..]);
                bytes[at.expect("checked above")] ^= 0xff;
            });
            damaged = true;
        }
    }
    assert!(damaged, "found the dead letter's bytes");
    traffic(&topic, 600);
    assert!(matches!(
        topic.dead_letter_info("g"),
        Err(mailroom_store::StoreError::Corrupt { .. })
    ));
    topic
        .publish(Bytes::from_static(b"still writable"))
        .unwrap();
}
