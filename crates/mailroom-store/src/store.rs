//! The store: one directory of durable topics, opened by one process at a time.
//!
//! Layout of a store directory:
//!
//! ```text
//! <dir>/LOCK                            advisory lock (Store::open only)
//! <dir>/STORE                           marker: magic "MRSTORE1" + format version u32 LE
//! <dir>/topics/<name>/TOPIC             marker: magic "MRTOPIC1" + format version u32 LE
//! <dir>/topics/<name>/messages/         the message log
//! <dir>/topics/<name>/groups/           the groups log
//! <dir>/topics/<name>/CHECKPOINT        the groups' checkpoint
//! <dir>/topics/<name>/SETTINGS          the topic's own retention (absent: the defaults)
//! ```
//!
//! A topic exists exactly when its `TOPIC` marker does: creating a topic writes the marker
//! last (temp file, sync, rename, directory sync) and deleting one removes it first. A
//! topic directory without a marker is an unfinished create or delete and is removed on
//! open.

mod directory;
mod health;
pub(crate) mod lock;
pub mod names;
mod options;
mod repair;

pub use health::{FailureKind, TopicFailure};
pub use options::{
    StoreOptions, POLL_BATCH_BYTES_MAX_DEFAULT, TOPICS_MAX_DEFAULT, TOPIC_FILES_OPEN,
};
pub use repair::TopicRepaired;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::clock::Clock;
use crate::idempotency::TopicIdempotency;
use crate::retention::{Retention, TopicRetention};
use crate::storage::{create_dir_durable, FsStorage, Storage};
use crate::topic::settings;
use crate::topic::DurableTopic;
use crate::StoreError;
use directory::{open_topic_dir, prepare_root, store_damage, topic_name, write_marker};
use lock::DirLock;
use names::validate_name;

const STORE_FILE: &str = "STORE";
const TOPIC_FILE: &str = "TOPIC";
const TOPICS_DIR: &str = "topics";
const STORE_MAGIC: [u8; 8] = *b"MRSTORE1";
const TOPIC_MAGIC: [u8; 8] = *b"MRTOPIC1";
const FORMAT_VERSION: u32 = 1;

/// A directory of durable topics. Cheap to clone; all clones share the open store, and
/// the directory stays locked until the last clone is dropped.
///
/// # Example
///
/// ```
/// use bytes::Bytes;
/// use mailroom_store::{Store, StoreOptions};
///
/// let dir = tempfile::tempdir()?;
/// {
///     let store = Store::open(dir.path(), StoreOptions::default())?;
///     assert!(store.create_topic("orders")?);
///     store.topic("orders")?.publish(Bytes::from_static(b"hello"))?;
/// }
/// // Everything confirmed is there after reopening.
/// let store = Store::open(dir.path(), StoreOptions::default())?;
/// assert_eq!(store.topics(), ["orders"]);
/// assert_eq!(store.topic("orders")?.read(0)?.as_deref(), Some(&b"hello"[..]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct Store {
    inner: Arc<StoreInner>,
}

#[derive(Debug)]
struct StoreInner {
    storage: Arc<dyn Storage>,
    topics_dir: PathBuf,
    options: StoreOptions,
    topics: RwLock<BTreeMap<String, DurableTopic>>,
    /// The topics that could not be opened, or are being reopened (see `health.rs`).
    /// A name is in at most one of the two maps but for a moment during a reopen, when
    /// it is in both; lookups try `topics` first.
    failed: RwLock<BTreeMap<String, TopicFailure>>,
    /// Serialises topic creation, deletion, reopening and repair.
    changes: Mutex<()>,
    _lock: Option<DirLock>,
}

fn io_error(operation: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> StoreError {
    let path = path.to_path_buf();
    move |source| StoreError::Io {
        operation,
        path,
        source,
    }
}

fn corrupt(path: &Path, reason: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        path: path.to_path_buf(),
        position: 0,
        reason: reason.into(),
    }
}

impl Store {
    /// Opens (or creates) the store in `dir` on the real file system, taking its lock.
    ///
    /// # Errors
    ///
    /// [`StoreError::Locked`] if another store has `dir` open; [`StoreError::Corrupt`] if
    /// `dir` holds something that is not a mailroom store or fails recovery;
    /// [`StoreError::Io`] for I/O failures (a read-only directory, a full disk, ...).
    pub fn open(dir: impl AsRef<Path>, options: StoreOptions) -> Result<Store, StoreError> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(io_error("create directory", dir))?;
        let lock = DirLock::acquire(dir)?;
        Self::open_locked(Arc::new(FsStorage), dir, options, Some(lock))
    }

    /// Opens (or creates) the store in `dir` on `storage`, for tests on a simulated file
    /// system. Takes no lock: the caller keeps one store per directory.
    ///
    /// # Errors
    ///
    /// As [`open`](Self::open), except [`StoreError::Locked`].
    pub fn open_with(
        storage: Arc<dyn Storage>,
        dir: &Path,
        options: StoreOptions,
    ) -> Result<Store, StoreError> {
        Self::open_locked(storage, dir, options, None)
    }

    fn open_locked(
        storage: Arc<dyn Storage>,
        dir: &Path,
        options: StoreOptions,
        lock: Option<DirLock>,
    ) -> Result<Store, StoreError> {
        if options.checkpoint_every == 0 {
            return Err(StoreError::InvalidArgument {
                reason: "checkpoint_every must be at least 1".into(),
            });
        }
        if options.topics_max == 0 {
            return Err(StoreError::InvalidArgument {
                reason: "topics_max must be at least 1".into(),
            });
        }
        options.idempotency.check()?;
        if options.poll_batch_bytes_max == 0 {
            return Err(StoreError::InvalidArgument {
                reason: "poll_batch_bytes_max must be at least 1".into(),
            });
        }
        create_dir_durable(storage.as_ref(), dir).map_err(io_error("create directory", dir))?;
        prepare_root(storage.as_ref(), dir)?;
        let topics_dir = dir.join(TOPICS_DIR);
        let mut topics = BTreeMap::new();
        let mut failed = BTreeMap::new();
        let mut entries = storage
            .list_dir(&topics_dir)
            .map_err(io_error("list", &topics_dir))?;
        entries.sort();
        for entry in entries {
            // A directory that is not a topic at all is store-wide damage; anything
            // wrong inside a topic fails that topic only.
            let name = topic_name(&entry)?;
            if let Err(error) = storage.list_dir(&entry) {
                if error.kind() == std::io::ErrorKind::NotADirectory {
                    let foreign = corrupt(&entry, "not a topic directory (a file)");
                    return Err(store_damage(foreign));
                }
            }
            match open_topic_dir(&storage, &entry, &options) {
                Ok(Some((name, topic))) => {
                    topics.insert(name, topic);
                }
                Ok(None) => {}
                Err(error) => {
                    tracing::error!(
                        topic = name, %error,
                        "topic failed at open: it answers topic_failed, the others serve"
                    );
                    failed.insert(name.to_owned(), TopicFailure::at_open(name, &error));
                }
            }
        }
        Ok(Store {
            inner: Arc::new(StoreInner {
                storage,
                topics_dir,
                options,
                topics: RwLock::new(topics),
                failed: RwLock::new(failed),
                changes: Mutex::new(()),
                _lock: lock,
            }),
        })
    }

    /// Creates topic `name`; returns `false` if it already existed. Durable on return.
    ///
    /// # Errors
    ///
    /// [`StoreError::InvalidName`]; [`StoreError::TopicLimit`] when
    /// [`StoreOptions::topics_max`] topics exist; I/O failures.
    pub fn create_topic(&self, name: &str) -> Result<bool, StoreError> {
        self.create_topic_with(name, &TopicRetention::default())
    }

    /// Creates topic `name` with its own `retention`; returns `false` (and changes
    /// nothing, not even the retention) if it already existed. Durable on return: the
    /// settings are written before the `TOPIC` marker, so a topic never exists without
    /// them. Settings equal to the default write no file.
    ///
    /// # Errors
    ///
    /// [`StoreError::InvalidName`]; [`StoreError::TopicLimit`] when
    /// [`StoreOptions::topics_max`] topics exist (checked before anything is written or
    /// opened); I/O failures.
    pub fn create_topic_with(
        &self,
        name: &str,
        retention: &TopicRetention,
    ) -> Result<bool, StoreError> {
        self.create_topic_with_window(name, retention, &TopicIdempotency::default())
    }

    /// As [`create_topic_with`](Self::create_topic_with), with the topic's own
    /// idempotency window too (kept in the same `SETTINGS` file, set only here).
    ///
    /// # Errors
    ///
    /// As [`create_topic_with`](Self::create_topic_with);
    /// [`StoreError::InvalidArgument`] for a window limit out of range
    /// ([`TopicIdempotency::check`]).
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom_store::{Store, StoreOptions, TopicIdempotency, TopicRetention};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path(), StoreOptions::default())?;
    /// let window = TopicIdempotency { messages_max: Some(100), age_ms_max: None };
    /// store.create_topic_with_window("t", &TopicRetention::default(), &window)?;
    /// drop(store);
    /// let store = Store::open(dir.path(), StoreOptions::default())?;
    /// let in_force = store.topic("t")?.idempotency_window();
    /// assert_eq!((in_force.messages_max, in_force.age_ms_max), (100, 120_000));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_topic_with_window(
        &self,
        name: &str,
        retention: &TopicRetention,
        idempotency: &TopicIdempotency,
    ) -> Result<bool, StoreError> {
        validate_name(name)?;
        idempotency.check()?;
        let _changes = self.inner.changes.lock();
        {
            let topics = self.inner.topics.read();
            if topics.contains_key(name) {
                return Ok(false);
            }
            let topics_max = self.inner.options.topics_max;
            if topics.len() >= topics_max {
                return Err(StoreError::TopicLimit { topics_max });
            }
        }
        if let Some(failure) = self.inner.failed.read().get(name) {
            return Err(failure.error());
        }
        let storage = &self.inner.storage;
        let dir = self.inner.topics_dir.join(name);
        if storage.exists(&dir).map_err(io_error("stat", &dir))? {
            // Left by a create or delete that failed half-way in this process.
            storage
                .remove_dir_all(&dir)
                .map_err(io_error("remove", &dir))?;
        }
        create_dir_durable(storage.as_ref(), &dir).map_err(io_error("create directory", &dir))?;
        let settings = settings::TopicSettings {
            retention: *retention,
            idempotency: *idempotency,
        };
        if settings != settings::TopicSettings::default() {
            settings::write(storage.as_ref(), &dir, &settings)?;
        }
        let topic = DurableTopic::open(storage.clone(), name, &dir, &self.inner.options)?;
        write_marker(storage.as_ref(), &dir, TOPIC_FILE, TOPIC_MAGIC)?;
        self.inner.topics.write().insert(name.to_owned(), topic);
        Ok(true)
    }

    /// A handle to topic `name`.
    ///
    /// # Errors
    ///
    /// [`StoreError::UnknownTopic`]; [`StoreError::TopicFailed`] for a topic that could
    /// not be opened ([`topic_failures`](Self::topic_failures) says why).
    pub fn topic(&self, name: &str) -> Result<DurableTopic, StoreError> {
        if let Some(topic) = self.inner.topics.read().get(name) {
            return Ok(topic.clone());
        }
        match self.inner.failed.read().get(name) {
            Some(failure) => Err(failure.error()),
            None => Err(StoreError::UnknownTopic {
                topic: name.to_owned(),
            }),
        }
    }

    /// The topic names, sorted, failed ones included.
    pub fn topics(&self) -> Vec<String> {
        let mut names: Vec<String> = self.inner.topics.read().keys().cloned().collect();
        names.extend(self.inner.failed.read().keys().cloned());
        names.sort_unstable();
        names.dedup();
        names
    }

    /// Deletes topic `name` with its messages and groups. Durable on return; handles to
    /// it fail with [`StoreError::UnknownTopic`] from then on.
    ///
    /// # Errors
    ///
    /// [`StoreError::UnknownTopic`]; I/O failures.
    pub fn delete_topic(&self, name: &str) -> Result<(), StoreError> {
        let _changes = self.inner.changes.lock();
        // A failed topic can be deleted too: giving up on damaged data is a choice.
        let failed = self.inner.failed.write().remove(name).is_some();
        let topic = match self.topic(name) {
            Err(StoreError::UnknownTopic { .. }) if failed => None,
            found => Some(found?),
        };
        if let Some(topic) = &topic {
            topic.retire();
        }
        self.inner.topics.write().remove(name);
        let storage = &self.inner.storage;
        let dir = &self.inner.topics_dir.join(name);
        let marker = dir.join(TOPIC_FILE);
        // Removing the marker durably is the moment of deletion; the rest is cleanup
        // that the next open finishes if it is interrupted.
        storage
            .remove_file(&marker)
            .map_err(io_error("remove", &marker))?;
        storage
            .sync_dir(dir)
            .map_err(io_error("fsync directory", dir))?;
        storage
            .remove_dir_all(dir)
            .map_err(io_error("remove", dir))?;
        let topics_dir = &self.inner.topics_dir;
        storage
            .sync_dir(topics_dir)
            .map_err(io_error("fsync directory", topics_dir))
    }

    /// The first failed topic (by name) and why, as `topic NAME: REASON`, or `None`
    /// while every topic serves and accepts writes. Damage stays local: this reports one
    /// topic, not a stopped store; [`topic_failures`](Self::topic_failures) lists them
    /// all and [`recover_topic`](Self::recover_topic) heals a fail-stop.
    ///
    /// ```
    /// let dir = tempfile::tempdir()?;
    /// let store = mailroom_store::Store::open(dir.path(), Default::default())?;
    /// store.create_topic("orders")?;
    /// assert_eq!(store.failure(), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn failure(&self) -> Option<String> {
        // `all_topics` comes from a map sorted by name.
        let failure = self.topic_failures().into_iter().next()?;
        Some(format!("topic {}: {}", failure.topic, failure.reason))
    }

    /// Syncs every topic's logs now (useful under the relaxed sync policies). A
    /// fail-stop topic is skipped: nothing more can be made durable there, and its
    /// failure is reported by [`topic_failures`](Self::topic_failures).
    ///
    /// # Errors
    ///
    /// I/O failures of a topic that was not failed (it is fail-stop from then on).
    pub fn sync(&self) -> Result<(), StoreError> {
        for topic in self.all_topics() {
            if topic.failure().is_none() {
                topic.sync()?;
            }
        }
        Ok(())
    }

    /// Writes every topic's group checkpoint now, so the next open replays no group
    /// records (for a clean shutdown; checkpoints are otherwise written every
    /// `checkpoint_every` group records).
    ///
    /// # Errors
    ///
    /// I/O failures and fail-stop.
    pub fn checkpoint(&self) -> Result<(), StoreError> {
        for topic in self.all_topics() {
            // As in `sync`: a fail-stop topic takes no checkpoint.
            if topic.failure().is_none() {
                topic.checkpoint()?;
            }
        }
        Ok(())
    }

    /// Deletes the whole message-log segments that each topic's retention in force
    /// ([`DurableTopic::effective_retention`]) allows at `now_ms`, in every topic;
    /// returns how many segments were deleted. A topic that fails is skipped, and the
    /// first failure returned after the others had their turn.
    ///
    /// # Errors
    ///
    /// I/O failures and fail-stop.
    pub fn enforce_retention(&self, now_ms: u64) -> Result<usize, StoreError> {
        let mut deleted = 0;
        let mut first_error = None;
        for topic in self.all_topics() {
            match topic.enforce_retention(now_ms) {
                Ok(removed) => deleted += removed.segments as usize,
                // Deleted meanwhile: nothing left to retain.
                Err(StoreError::UnknownTopic { .. }) => {}
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
        }
        match first_error {
            Some(error) => Err(error),
            None => Ok(deleted),
        }
    }

    /// How many topics the store holds now.
    pub fn topic_count(&self) -> usize {
        self.inner.topics.read().len()
    }

    /// The most topics the store creates ([`StoreOptions::topics_max`]).
    pub fn topics_max(&self) -> usize {
        self.inner.options.topics_max
    }

    /// The store-wide retention defaults ([`StoreOptions::retention`]).
    pub fn retention_defaults(&self) -> Retention {
        self.inner.options.retention
    }

    /// The store's clock ([`StoreOptions::clock`]): what stamps records, so what
    /// retention by age measures against.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner.options.clock
    }

    fn all_topics(&self) -> Vec<DurableTopic> {
        self.inner.topics.read().values().cloned().collect()
    }
}
