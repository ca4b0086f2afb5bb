//! Opening a store, a topic or a log on simulated storage, the option sets and fixtures
//! (a topic with a group, acked traffic, numbered payloads) several store tests share, a
//! topic a model test restarts between steps, and unwrapping the store's rule errors.
//!
//! Every store helper opens at [`STORE_DIR`]; a test that looks at the files inside joins
//! its paths onto that constant.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use mailroom::group::GroupConfig;
use mailroom::topic::{StartPosition, TopicError};
use mailroom_store::log::{Log, LogOptions, SyncPolicy};
use mailroom_store::storage::{SimStorage, Storage};
use mailroom_store::{DurableTopic, Store, StoreError, StoreOptions};

/// Where the helpers open a store on simulated storage.
pub const STORE_DIR: &str = "/store";
/// The topic [`open_topic`] creates and hands back.
pub const TOPIC: &str = "t";

/// Opens the store at [`STORE_DIR`] on `storage`.
///
/// # Errors
///
/// Whatever `Store::open_with` returns: a test of faults expects some.
pub fn try_open_store(storage: &SimStorage, options: &StoreOptions) -> Result<Store, StoreError> {
    Store::open_with(
        Arc::new(storage.clone()),
        Path::new(STORE_DIR),
        options.clone(),
    )
}

/// Opens the store at [`STORE_DIR`] on any storage (a watched one, for instance).
///
/// # Panics
///
/// If the store does not open.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use mailroom_store::storage::SimStorage;
/// use mailroom_testkit::store::open_store_on;
///
/// let store = open_store_on(Arc::new(SimStorage::new()), &Default::default());
/// assert!(store.create_topic("t").unwrap());
/// ```
pub fn open_store_on(storage: Arc<dyn Storage>, options: &StoreOptions) -> Store {
    Store::open_with(storage, Path::new(STORE_DIR), options.clone()).expect("open the store")
}

/// Opens the store at [`STORE_DIR`] on `storage`.
///
/// # Panics
///
/// If the store does not open.
///
/// # Examples
///
/// ```
/// use mailroom_store::storage::SimStorage;
/// use mailroom_testkit::store::open_store;
///
/// let sim = SimStorage::new();
/// open_store(&sim, &Default::default()).create_topic("t").unwrap();
/// assert!(open_store(&sim, &Default::default()).topic("t").is_ok());
/// ```
pub fn open_store(storage: &SimStorage, options: &StoreOptions) -> Store {
    open_store_on(Arc::new(storage.clone()), options)
}

/// Opens the store at [`STORE_DIR`] on `storage` and topic [`TOPIC`] in it, creating the
/// topic if it is not there yet (first open) and keeping it as it is if it is (reopen).
///
/// # Panics
///
/// If the store does not open or the topic cannot be created.
///
/// # Examples
///
/// ```
/// use bytes::Bytes;
/// use mailroom_store::storage::SimStorage;
/// use mailroom_testkit::store::open_topic;
///
/// let sim = SimStorage::new();
/// let (store, topic) = open_topic(&sim, &Default::default());
/// topic.publish(Bytes::from_static(b"m")).unwrap();
/// drop((store, topic));
/// let (_store, topic) = open_topic(&sim, &Default::default());
/// assert_eq!(topic.len(), 1);
/// ```
pub fn open_topic(storage: &SimStorage, options: &StoreOptions) -> (Store, DurableTopic) {
    let store = open_store(storage, options);
    // Creating is a no-op for a topic the store already holds.
    store.create_topic(TOPIC).expect("create the topic");
    let topic = store.topic(TOPIC).expect("the topic just created");
    (store, topic)
}

/// Topic [`TOPIC`] of a store on simulated storage that a model test restarts, cleanly or
/// by a power cut, between steps.
///
/// # Examples
///
/// ```
/// use bytes::Bytes;
/// use mailroom_store::storage::SimStorage;
/// use mailroom_testkit::store::RestartableTopic;
///
/// let mut disk = RestartableTopic::open(SimStorage::new(), Default::default());
/// disk.topic().publish(Bytes::from_static(b"m")).unwrap();
/// disk.restart();
/// assert_eq!(disk.topic().len(), 1);
/// ```
#[derive(Debug)]
pub struct RestartableTopic {
    sim: SimStorage,
    options: StoreOptions,
    store: Option<Store>,
    topic: DurableTopic,
}

impl RestartableTopic {
    /// Opens the store and its topic on `sim` (see [`open_topic`]).
    ///
    /// # Panics
    ///
    /// If the store does not open.
    pub fn open(sim: SimStorage, options: StoreOptions) -> Self {
        let (store, topic) = open_topic(&sim, &options);
        RestartableTopic {
            sim,
            options,
            store: Some(store),
            topic,
        }
    }

    /// The topic as the store opened it last.
    pub fn topic(&self) -> &DurableTopic {
        &self.topic
    }

    /// The storage the store runs on now (after a power cut, the image it left).
    pub fn sim(&self) -> &SimStorage {
        &self.sim
    }

    /// Drops the store and reopens the same files.
    ///
    /// # Panics
    ///
    /// If the store does not reopen.
    pub fn restart(&mut self) {
        self.reopen(None);
    }

    /// Drops the store and reopens what a power cut at this moment could leave, the image
    /// chosen by `seed`.
    ///
    /// # Panics
    ///
    /// If the store does not reopen: everything it confirmed must survive.
    pub fn power_cut(&mut self, seed: u64) {
        self.reopen(Some(seed));
    }

    fn reopen(&mut self, crash_seed: Option<u64>) {
        // Drop the store first: one store per directory.
        self.store = None;
        if let Some(seed) = crash_seed {
            self.sim = self.sim.crash(seed);
        }
        let (store, topic) = open_topic(&self.sim, &self.options);
        self.store = Some(store);
        self.topic = topic;
    }
}

/// Opens the log in `dir` on `storage`.
///
/// # Errors
///
/// Whatever `Log::open` returns: recovery tests expect some.
///
/// # Examples
///
/// ```
/// use mailroom_store::storage::SimStorage;
/// use mailroom_testkit::store::open_log;
///
/// let sim = SimStorage::new();
/// let log = open_log(&sim, "/log", Default::default()).unwrap();
/// assert_eq!(log.end(), 0);
/// ```
pub fn open_log(storage: &SimStorage, dir: &str, options: LogOptions) -> Result<Log, StoreError> {
    Log::open(Arc::new(storage.clone()), Path::new(dir), options)
}

/// The files in log directory `dir` whose names end in `.{extension}` (`"log"` for the
/// segments, `"idx"` for their indexes), oldest segment first.
///
/// # Panics
///
/// If `dir` cannot be listed.
///
/// # Examples
///
/// ```
/// use mailroom_store::storage::SimStorage;
/// use mailroom_testkit::store::{log_files, open_log};
///
/// let sim = SimStorage::new();
/// let log = open_log(&sim, "/log", Default::default()).unwrap();
/// log.append(&[b"x"], 0).unwrap();
/// let segments = log_files(&sim, "/log", "log");
/// assert_eq!(segments.len(), 1);
/// assert!(segments[0].ends_with("00000000000000000000.log"));
/// ```
pub fn log_files(storage: &SimStorage, dir: &str, extension: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = storage
        .list_dir(Path::new(dir))
        .expect("list the log directory")
        .into_iter()
        .filter(|path| path.extension().is_some_and(|e| e == extension))
        .collect();
    found.sort();
    found
}

/// Small segments (1 KiB, an index entry per 128 bytes) and every write synced, with a
/// checkpoint every `checkpoint_every` changes (`u64::MAX`: only when the test asks): a
/// little traffic then rolls segments and compacts the groups log.
///
/// # Examples
///
/// ```
/// use mailroom_store::log::SyncPolicy;
/// use mailroom_testkit::store::compacting_options;
///
/// let options = compacting_options(32, SyncPolicy::Always);
/// assert_eq!(options.log.segment_bytes_max, 1024);
/// assert_eq!(options.checkpoint_every, 32);
/// ```
pub fn compacting_options(checkpoint_every: u64, sync: SyncPolicy) -> StoreOptions {
    StoreOptions {
        log: LogOptions {
            segment_bytes_max: 1024,
            index_interval_bytes: 128,
            sync,
            ..LogOptions::default()
        },
        checkpoint_every,
        ..StoreOptions::default()
    }
}

/// The store model tests' options: tiny segments (256 bytes, an index entry per 64) so a
/// short run rolls many, every write synced, a checkpoint every `checkpoint_every`
/// changes.
///
/// # Examples
///
/// ```
/// let options = mailroom_testkit::store::model_options(4);
/// assert_eq!(options.log.segment_bytes_max, 256);
/// assert_eq!(options.checkpoint_every, 4);
/// ```
pub fn model_options(checkpoint_every: u64) -> StoreOptions {
    StoreOptions {
        log: LogOptions {
            segment_bytes_max: 256,
            index_interval_bytes: 64,
            sync: SyncPolicy::Always,
            ..LogOptions::default()
        },
        checkpoint_every,
        ..StoreOptions::default()
    }
}

/// A payload of `bytes` bytes that carries `i` in its first eight (little-endian) and
/// `i % 251` in the rest, so a record read back names its offset and a torn one shows.
///
/// # Panics
///
/// If `bytes` is less than 8.
///
/// # Examples
///
/// ```
/// let payload = mailroom_testkit::store::numbered_payload(300, 16);
/// assert_eq!(payload[..8], 300u64.to_le_bytes());
/// assert_eq!(payload[8..], [49; 8]);
/// ```
pub fn numbered_payload(i: u64, bytes: usize) -> Vec<u8> {
    let mut payload = vec![(i % 251) as u8; bytes];
    payload[..8].copy_from_slice(&i.to_le_bytes());
    payload
}

/// The payload of the message at `offset` in a topic [`topic_with_group`] filled:
/// `message <offset>`, so a delivery names where it came from.
///
/// # Examples
///
/// ```
/// assert_eq!(mailroom_testkit::store::offset_payload(7), "message 7");
/// ```
pub fn offset_payload(offset: u64) -> Bytes {
    Bytes::from(format!("message {offset}"))
}

/// Opens topic [`TOPIC`] (see [`open_topic`]) with group `g` (2 attempts, `max_in_flight`
/// = `window`, from the earliest offset) and publishes `messages` messages, each carrying
/// [`offset_payload`] of its offset, in one batch.
///
/// # Panics
///
/// If the store does not open or refuses the group or the batch.
///
/// # Examples
///
/// ```
/// use mailroom_store::storage::SimStorage;
/// use mailroom_testkit::store::{offset_payload, topic_with_group};
///
/// let (_store, topic) = topic_with_group(&SimStorage::new(), &Default::default(), 4, 10);
/// let batch = topic.poll_batch("g", None, 10).unwrap();
/// assert_eq!(batch.len(), 4);
/// assert_eq!(batch[3].message, offset_payload(3));
/// ```
pub fn topic_with_group(
    storage: &SimStorage,
    options: &StoreOptions,
    window: u32,
    messages: u64,
) -> (Store, DurableTopic) {
    let (store, topic) = open_topic(storage, options);
    let config = GroupConfig::new(2).with_max_in_flight(window);
    topic
        .create_group_with("g", StartPosition::Earliest, config)
        .expect("create group g");
    let payloads: Vec<Bytes> = (0..messages).map(offset_payload).collect();
    topic
        .publish_batch(&payloads)
        .expect("publish the messages");
    (store, topic)
}

/// Publishes `count` messages of `payload`, each polled and acked at once by every group
/// of `groups`: groups-log traffic that moves positions and dead-letters nothing, so
/// checkpoints have old segments to compact.
///
/// # Panics
///
/// If a call fails or a group finds nothing to poll (another consumer owns a delivery).
///
/// # Examples
///
/// ```
/// use mailroom_store::storage::SimStorage;
/// use mailroom_testkit::store::{ack_traffic, open_topic};
///
/// let (_store, topic) = open_topic(&SimStorage::new(), &Default::default());
/// topic.create_group("g", 1).unwrap();
/// ack_traffic(&topic, &["g"], b"traffic", 3);
/// assert_eq!(topic.position("g").unwrap(), 3);
/// ```
pub fn ack_traffic(topic: &DurableTopic, groups: &[&str], payload: &'static [u8], count: usize) {
    for _ in 0..count {
        topic
            .publish(Bytes::from_static(payload))
            .expect("publish traffic");
        for group in groups {
            let delivery = topic
                .poll(group)
                .expect("poll traffic")
                .expect("the message just published");
            topic.ack(group, delivery.id()).expect("ack traffic");
        }
    }
}

/// The store's result with the rule errors unwrapped, so it compares with the in-memory
/// topic's; any other error (the disk's) fails the test.
///
/// # Panics
///
/// On an error that is not a rule's.
///
/// # Examples
///
/// ```
/// use mailroom::topic::TopicError;
/// use mailroom_store::StoreError;
/// use mailroom_testkit::store::rules;
///
/// let refused: Result<(), StoreError> =
///     Err(StoreError::Topic(TopicError::UnknownGroup { group: "g".into() }));
/// assert!(matches!(rules(refused), Err(TopicError::UnknownGroup { .. })));
/// ```
pub fn rules<T>(result: Result<T, StoreError>) -> Result<T, TopicError> {
    match result {
        Ok(value) => Ok(value),
        Err(StoreError::Topic(error)) => Err(error),
        Err(other) => panic!("unexpected store error: {other}"),
    }
}
