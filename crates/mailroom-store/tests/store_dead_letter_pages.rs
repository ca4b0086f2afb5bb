//! Dead letters by page (`DurableTopic::dead_letter_page`): walking the pages with `next`
//! gives exactly what `dead_letter_info` gives, sorted by offset, through out-of-order
//! dead-lettering, redrives, purges, compacting checkpoints and reopens; bad page sizes
//! are refused; and a page reads only its own payloads.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use mailroom::group::{DeliveryId, GroupConfig, NackKind, NackOptions};
use mailroom::topic::{DeadLetterInfo, StartPosition};
use mailroom_store::log::SyncPolicy;
use mailroom_store::storage::{Op, SimStorage, Storage, Watched, Watcher};
use mailroom_store::{
    DeadLetterPage, DurableTopic, Store, StoreError, StoreOptions, DEAD_LETTERS_PAGE_MAX,
};
use mailroom_testkit::store::{
    ack_traffic, compacting_options, open_store, open_store_on, STORE_DIR,
};
use proptest::prelude::*;

/// The most deliveries group `g` may have in flight: enough for every batch below.
const IN_FLIGHT_MAX: u32 = 64;

/// Small segments and frequent checkpoints, so traffic compacts the groups log (as in
/// `store_compaction.rs`).
fn options() -> StoreOptions {
    compacting_options(32, SyncPolicy::Always)
}

/// A store with topic `t` and group `g` (one attempt, many in flight).
fn created(storage: Arc<dyn Storage>, options: &StoreOptions) -> Store {
    let store = open_store_on(storage, options);
    store.create_topic("t").unwrap();
    let config = GroupConfig::new(1).with_max_in_flight(IN_FLIGHT_MAX);
    let topic = store.topic("t").unwrap();
    topic
        .create_group_with("g", StartPosition::Earliest, config)
        .unwrap();
    store
}

fn groups_segments(sim: &SimStorage) -> usize {
    let files = sim
        .list_dir(&Path::new(STORE_DIR).join("topics/t/groups"))
        .unwrap();
    files
        .iter()
        .filter(|path| path.extension().is_some_and(|ext| ext == "log"))
        .count()
}

/// The model: every dead letter's offset and payload.
type Model = BTreeMap<u64, Bytes>;

/// Publishes one message per key, takes them all in flight at once and rejects them in
/// the order of their keys, so the dead letters are made out of offset order.
fn dead_letter(topic: &DurableTopic, keys: &[u32], model: &mut Model) {
    let first = topic.len();
    let payloads: Vec<Bytes> = (0..keys.len())
        .map(|i| Bytes::from(format!("dead letter {}", first + i as u64)))
        .collect();
    let offsets = topic.publish_batch(&payloads).unwrap();
    let deliveries = topic.poll_batch("g", None, keys.len()).unwrap();
    assert_eq!(deliveries.len(), keys.len());
    let mut order: Vec<(u32, DeliveryId)> = keys
        .iter()
        .zip(&deliveries)
        .map(|(&key, delivery)| (key, delivery.id()))
        .collect();
    order.sort_by_key(|&(key, _)| key);
    let ids: Vec<DeliveryId> = order.into_iter().map(|(_, id)| id).collect();
    reject(topic, &ids);
    model.extend(offsets.zip(payloads));
}

fn reject(topic: &DurableTopic, ids: &[DeliveryId]) {
    let nack = NackOptions::new(NackKind::Reject).with_reason("bad");
    for result in topic.nack_batch("g", ids, &nack).unwrap() {
        result.unwrap();
    }
}

/// Publishes, polls and acks `count` messages: groups-log traffic that kills nothing.
fn traffic(topic: &DurableTopic, count: usize) {
    ack_traffic(topic, &["g"], b"traffic", count);
}

/// What the server's `GET .../dead-letters` answered before pages came from the store:
/// every dead letter, sorted by offset (stable), those at or after `from`, `limit` of
/// them, and the offset of the first one left out.
fn reference_page(all: &[DeadLetterInfo<Bytes>], from: u64, limit: usize) -> DeadLetterPage {
    let mut letters = all.to_vec();
    letters.sort_by_key(|letter| letter.offset);
    let mut remaining = letters
        .into_iter()
        .filter(|letter| letter.offset >= from)
        .peekable();
    let page = remaining.by_ref().take(limit).collect();
    let next = remaining.peek().map(|letter| letter.offset);
    DeadLetterPage {
        letters: page,
        next,
    }
}

/// Walks `g`'s pages from `from` by `limit`, checking each against the reference built
/// from `dead_letter_info`; returns every letter walked.
fn walk(topic: &DurableTopic, from: u64, limit: usize) -> Vec<DeadLetterInfo<Bytes>> {
    let all = topic.dead_letter_info("g").unwrap();
    let mut walked = Vec::new();
    let mut at = Some(from);
    while let Some(from) = at {
        let page = topic.dead_letter_page("g", from, limit).unwrap();
        assert_eq!(page, reference_page(&all, from, limit), "page from {from}");
        assert!(page.letters.len() <= limit);
        assert!(page.next.is_none() || page.letters.len() == limit);
        at = page.next;
        walked.extend(page.letters);
        assert!(walked.len() <= all.len(), "the walk does not end");
    }
    walked
}

/// Checks a walk from `from` by `limit`, and a whole walk from 0 against the model.
fn check(topic: &DurableTopic, model: &Model, from: u64, limit: usize) {
    let walked = walk(topic, from, limit);
    let expected: Vec<(u64, Bytes)> = model
        .range(from..)
        .map(|(&offset, payload)| (offset, payload.clone()))
        .collect();
    let got: Vec<(u64, Bytes)> = walked
        .into_iter()
        .map(|letter| (letter.offset, letter.message))
        .collect();
    assert_eq!(got, expected);
}

/// One step of the model test.
#[derive(Debug, Clone)]
enum Step {
    /// Dead-letter one message per key, in key order (see [`dead_letter`]).
    DeadLetters(Vec<u32>),
    Traffic(usize),
    /// Redrive the dead letters with offsets in the range (percent of the log), then take
    /// them back: ack them, or (`true`) reject them again, last offset first.
    Redrive(u8, u8, bool),
    Purge(u8, u8),
    /// A checkpoint now, which compacts if old segments hold dead letters.
    Checkpoint,
    Reopen,
}

fn any_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => proptest::collection::vec(any::<u32>(), 1..12).prop_map(Step::DeadLetters),
        2 => (10..120usize).prop_map(Step::Traffic),
        1 => (0..100u8, 0..100u8, any::<bool>())
            .prop_map(|(a, b, again)| Step::Redrive(a, b, again)),
        1 => (0..100u8, 0..100u8).prop_map(|(a, b)| Step::Purge(a, b)),
        1 => Just(Step::Checkpoint),
        1 => Just(Step::Reopen),
    ]
}

/// A page to walk after a step: `from` as percent of the log, and a page size (mostly
/// small, so walks take many pages; sometimes the largest allowed).
fn any_probe() -> impl Strategy<Value = (u8, usize)> {
    let limit = prop_oneof![4 => 1..6usize, 1 => Just(DEAD_LETTERS_PAGE_MAX)];
    (0..110u8, limit)
}

/// The offsets `a`..`b` percent of the way through `0..end`.
fn percent_range(a: u8, b: u8, end: u64) -> std::ops::Range<u64> {
    let (low, high) = (u64::from(a.min(b)), u64::from(a.max(b)));
    end * low / 100..end * high / 100 + 1
}

fn redrive(topic: &DurableTopic, model: &mut Model, range: std::ops::Range<u64>, again: bool) {
    let taken: Model = model
        .range(range.clone())
        .map(|(&offset, payload)| (offset, payload.clone()))
        .collect();
    model.retain(|offset, _| !range.contains(offset));
    assert_eq!(topic.redrive("g", range).unwrap(), taken.len() as u64);
    let mut offsets = Vec::new();
    while offsets.len() < taken.len() {
        let deliveries = topic.poll_batch("g", None, taken.len()).unwrap();
        assert!(
            !deliveries.is_empty(),
            "the redriven messages are delivered"
        );
        offsets.extend(deliveries.iter().map(|delivery| delivery.offset));
        let mut ids: Vec<DeliveryId> = deliveries.iter().map(|delivery| delivery.id()).collect();
        if again {
            ids.reverse();
            reject(topic, &ids);
        } else {
            for result in topic.ack_batch("g", &ids).unwrap() {
                result.unwrap();
            }
        }
    }
    offsets.sort_unstable();
    assert_eq!(offsets, taken.keys().copied().collect::<Vec<_>>());
    if again {
        model.extend(taken);
    }
}

/// Runs `steps` against a store, walking pages after each.
fn run_model(steps: &[(Step, (u8, usize))]) {
    let sim = SimStorage::new();
    let options = options();
    let mut store = created(Arc::new(sim.clone()), &options);
    let mut model = Model::new();
    for (step, (from_percent, limit)) in steps {
        let topic = store.topic("t").unwrap();
        match step {
            Step::DeadLetters(keys) => dead_letter(&topic, keys, &mut model),
            Step::Traffic(count) => traffic(&topic, *count),
            Step::Redrive(a, b, again) => redrive(
                &topic,
                &mut model,
                percent_range(*a, *b, topic.len()),
                *again,
            ),
            Step::Purge(a, b) => {
                let range = percent_range(*a, *b, topic.len());
                let before = model.len();
                model.retain(|offset, _| !range.contains(offset));
                assert_eq!(
                    topic.purge("g", range).unwrap(),
                    (before - model.len()) as u64
                );
            }
            Step::Checkpoint => store.checkpoint().unwrap(),
            Step::Reopen => {
                drop(topic);
                drop(store);
                store = open_store(&sim, &options);
            }
        }
        let topic = store.topic("t").unwrap();
        let from = topic.len() * u64::from(*from_percent) / 100;
        check(&topic, &model, from, *limit);
        check(&topic, &model, 0, 1);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    // Proves that under any mix of out-of-order dead-lettering, traffic, redrives (taken
    // back by an ack or a second dead-lettering), purges, checkpoints and reopens, every
    // page is what sorting `dead_letter_info` by offset and slicing gives, and walking
    // with `next` visits exactly the model's dead letters, in offset order.
    #[test]
    fn pages_walked_with_next_match_dead_letter_info(
        steps in proptest::collection::vec((any_step(), any_probe()), 1..14)
    ) {
        run_model(&steps);
    }
}

// Proves pages still match after a compacting checkpoint moved the dead letters to
// copies (the groups log shrank), and again after a reopen.
#[test]
fn pages_match_after_compaction_and_reopen() {
    let sim = SimStorage::new();
    // No automatic checkpoint: the one below is the first, and finds many segments.
    let options = StoreOptions {
        checkpoint_every: u64::MAX,
        ..options()
    };
    let store = created(Arc::new(sim.clone()), &options);
    let topic = store.topic("t").unwrap();
    let mut model = Model::new();
    dead_letter(&topic, &[5, 3, 9, 1, 7, 2, 8], &mut model);
    traffic(&topic, 150);
    dead_letter(&topic, &[2, 1, 3], &mut model);
    traffic(&topic, 150);
    let before = groups_segments(&sim);
    store.checkpoint().unwrap();
    let after = groups_segments(&sim);
    assert!(
        before > 20 && after <= 4,
        "compacted: {before} -> {after} segments"
    );
    for limit in [1, 2, 3, 10] {
        check(&topic, &model, 0, limit);
        check(&topic, &model, 4, limit);
    }
    drop(topic);
    drop(store);
    let store = open_store(&sim, &options);
    let topic = store.topic("t").unwrap();
    for limit in [1, 3, DEAD_LETTERS_PAGE_MAX] {
        check(&topic, &model, 0, limit);
    }
}

// Proves a page size of 0 or above the maximum is refused as an invalid argument, before
// the group is looked up, and that the maximum itself is accepted.
#[test]
fn bad_page_sizes_are_refused() {
    let store = created(Arc::new(SimStorage::new()), &options());
    let topic = store.topic("t").unwrap();
    for limit in [0, DEAD_LETTERS_PAGE_MAX + 1, usize::MAX] {
        for group in ["g", "no-such-group"] {
            assert!(
                matches!(
                    topic.dead_letter_page(group, 0, limit),
                    Err(StoreError::InvalidArgument { .. })
                ),
                "limit {limit} on {group}"
            );
        }
    }
    let empty = topic
        .dead_letter_page("g", 0, DEAD_LETTERS_PAGE_MAX)
        .unwrap();
    assert_eq!((empty.letters.len(), empty.next), (0, None));
    assert!(matches!(
        topic.dead_letter_page("no-such-group", 0, 1),
        Err(StoreError::Topic(_))
    ));
}

/// Counts the bytes read from files under `dir`.
#[derive(Debug)]
struct CountingReads {
    dir: PathBuf,
    bytes_read: AtomicU64,
}

impl Watcher for CountingReads {
    fn after(&self, op: Op<'_>) {
        if let Op::Read { path, bytes } = op {
            if path.starts_with(&self.dir) {
                self.bytes_read.fetch_add(bytes as u64, Ordering::Relaxed);
            }
        }
    }
}

// Proves a page reads only its own payloads from the groups log: a page of 2 of 200 dead
// letters of 2 KiB reads a small fraction of what reading them all does.
#[test]
fn a_page_reads_only_its_own_payloads() {
    const LETTERS: usize = 200;
    const PAYLOAD_BYTES: usize = 2048;
    let counting = Arc::new(CountingReads {
        dir: Path::new(STORE_DIR).join("topics/t/groups"),
        bytes_read: AtomicU64::new(0),
    });
    let storage = Watched::new(Arc::new(SimStorage::new()), Arc::clone(&counting));
    let options = StoreOptions {
        checkpoint_every: u64::MAX,
        ..StoreOptions::default()
    };
    let store = created(Arc::new(storage), &options);
    let topic = store.topic("t").unwrap();
    for chunk in 0..LETTERS / 50 {
        let payloads: Vec<Bytes> = (0..50)
            .map(|i| Bytes::from(vec![(chunk * 50 + i) as u8; PAYLOAD_BYTES]))
            .collect();
        topic.publish_batch(&payloads).unwrap();
        let deliveries = topic.poll_batch("g", None, 50).unwrap();
        let ids: Vec<DeliveryId> = deliveries.iter().map(|delivery| delivery.id()).collect();
        assert_eq!(ids.len(), 50);
        reject(&topic, &ids);
    }
    let read_by = |read: &dyn Fn()| {
        let before = counting.bytes_read.load(Ordering::Relaxed);
        read();
        counting.bytes_read.load(Ordering::Relaxed) - before
    };
    let all = read_by(&|| assert_eq!(topic.dead_letter_info("g").unwrap().len(), LETTERS));
    let page = read_by(&|| {
        let page = topic.dead_letter_page("g", 100, 2).unwrap();
        assert_eq!(
            page.letters[1].message,
            Bytes::from(vec![101u8; PAYLOAD_BYTES])
        );
        assert_eq!(page.next, Some(102));
    });
    assert!(
        all >= (LETTERS * PAYLOAD_BYTES) as u64,
        "all read {all} bytes"
    );
    assert!(
        page >= 2 * PAYLOAD_BYTES as u64,
        "the page read {page} bytes"
    );
    assert!(page * 20 < all, "the page read {page} bytes, all {all}");
}

// Proves readers walking pages on other threads never fail or see a wrong payload while
// compacting checkpoints move the dead letters under them (real threads).
#[test]
fn pages_read_concurrently_with_compaction() {
    let sim = SimStorage::new();
    let store = created(Arc::new(sim.clone()), &options());
    let topic = store.topic("t").unwrap();
    let mut model = Model::new();
    dead_letter(&topic, &[4, 2, 6, 1, 3, 5, 0, 7, 9, 8], &mut model);
    let done = std::sync::atomic::AtomicBool::new(false);
    let walks = std::thread::scope(|scope| {
        let readers: Vec<_> = [1, 3]
            .map(|limit| {
                let (topic, model, done) = (&topic, &model, &done);
                scope.spawn(move || {
                    let mut walks = 0u64;
                    while !done.load(Ordering::Acquire) {
                        check(topic, model, 0, limit);
                        walks += 1;
                    }
                    walks
                })
            })
            .into_iter()
            .collect();
        traffic(&topic, 1000);
        done.store(true, Ordering::Release);
        readers
            .into_iter()
            .map(|reader| reader.join().unwrap())
            .sum::<u64>()
    });
    assert!(walks > 0);
    assert!(groups_segments(&sim) <= 16, "compacted while they read");
}

proptest! {
    // Proves the byte cap of a page: walking the pages with `next` under any cap still
    // visits every dead letter once in offset order, and every page of more than one
    // letter stays within the cap (a single letter may exceed it, so paging never
    // stalls).
    #[test]
    fn byte_capped_pages_stay_under_the_cap_and_miss_nothing(
        sizes in proptest::collection::vec(0..300usize, 1..24),
        bytes_max in 1..700usize,
        limit in 1..30usize,
    ) {
        let sim = SimStorage::new();
        let store = created(Arc::new(sim.clone()), &options());
        let topic = store.topic("t").unwrap();
        for size in &sizes {
            topic.publish(Bytes::from(vec![1; *size])).unwrap();
            let delivery = topic.poll("g").unwrap().unwrap();
            topic.nack("g", delivery.id()).unwrap();
        }
        let mut seen = Vec::new();
        let mut from = 0;
        loop {
            let page = topic.dead_letter_page_within("g", from, limit, bytes_max).unwrap();
            prop_assert!(!page.letters.is_empty());
            prop_assert!(page.letters.len() <= limit);
            let bytes: usize = page.letters.iter().map(|dead| dead.message.len()).sum();
            prop_assert!(page.letters.len() == 1 || bytes <= bytes_max, "{bytes} > {bytes_max}");
            seen.extend(page.letters.iter().map(|dead| (dead.offset, dead.message.len())));
            match page.next {
                Some(next) => from = next,
                None => break,
            }
        }
        let expected: Vec<(u64, usize)> = sizes.iter().copied().enumerate()
            .map(|(offset, size)| (offset as u64, size)).collect();
        prop_assert_eq!(seen, expected);
    }
}
