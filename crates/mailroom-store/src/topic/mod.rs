//! A durable topic: a message log read by consumer groups, on disk.
//!
//! [`DurableTopic`] offers the operations of the in-memory `mailroom::topic::Topic`, over
//! `Bytes` payloads, with the same rules and the same errors (wrapped in
//! [`StoreError::Topic`]). Every call that changes something returns only once the change
//! is durable per the store's sync policy. This module holds the topic itself and its
//! log (publish, read, checkpoints); the rooms below hold the rest, by what
//! they act on: `retention.rs` (the topic's own retention and enforcing it),
//! `settings.rs` (the `SETTINGS` file that keeps it), `groups.rs` (create, delete,
//! settings and reads of groups),
//! `deliveries.rs` (poll, ack, nack, touch), `batch.rs` (`poll_batch`, `ack_batch`,
//! `nack_batch`) and `dead_letters.rs` (reads, pages, redrive, purge).
//!
//! The hot calls have `*_deferred` forms that return a [`Deferred`] instead of waiting
//! for the disk (see `deferred.rs`); each blocking form is its deferred form followed by
//! [`Deferred::wait`], so both share one code path.

mod batch;
mod dead_letters;
mod deliveries;
mod groups;
mod idempotent;
mod messages;
mod retention;
mod seek_pause;
pub(crate) mod settings;

pub use batch::{AckedThenPolled, MessageDelivery, PollScope, SettledThenPolled};
pub use dead_letters::{DeadLetterPage, DEAD_LETTERS_PAGE_MAX};
pub(crate) use groups::empty_group_name;
pub use idempotent::Stored;

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use mailroom::group::{DeliveryId, NackOptions, NotOwned};
use mailroom::topic::Nack;
use parking_lot::{Mutex, RwLock, RwLockReadGuard};

use crate::clock::Clock;
use crate::groups::{GroupSet, Staged};
use crate::idempotency::{IdempotencyWindow, KeysSeen, TopicIdempotency};
use crate::log::Log;
use crate::retention::{Retention, RetentionRemoved, TopicRetention};
use crate::storage::Storage;
use crate::{Deferred, StoreError, StoreOptions};

/// A handle to one durable topic. Cheap to clone; all clones share the topic.
///
/// Get one from [`Store::topic`](crate::Store::topic). After the topic is deleted, every
/// method of an old handle fails with [`StoreError::UnknownTopic`] (or, for the
/// infallible ones, reports the state at deletion).
///
/// # Example
///
/// ```
/// use bytes::Bytes;
/// use mailroom_store::{Store, StoreOptions};
///
/// let dir = tempfile::tempdir()?;
/// let store = Store::open(dir.path(), StoreOptions::default())?;
/// store.create_topic("orders")?;
/// let orders = store.topic("orders")?;
/// orders.create_group("billing", 3)?;
/// orders.publish(Bytes::from_static(b"order 1"))?;
///
/// let delivery = orders.poll("billing")?.expect("a message is waiting");
/// assert_eq!((delivery.offset, delivery.attempt), (0, 1));
/// orders.ack("billing", delivery.id())?;
/// assert_eq!(orders.position("billing")?, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Blocking in the deferred calls
///
/// The `*_deferred` methods never wait for an `fdatasync` of the records they write;
/// their [`Deferred`] does. Until they return they may still block briefly on:
/// - locks: the topic's delete lock (read side), the group's lock (held while planning
///   and writing, never across a sync), the log's writer lock, and the registry;
/// - page-cache writes: under `SyncPolicy::Always` records go to the log's write buffer
///   (written by the next sync round) but a buffer that reaches 1 MiB is written out
///   with one `pwrite`; under the relaxed policies each write is a `pwrite`;
/// - a segment roll, once per `segment_bytes_max` of log: the full segment is synced and
///   a new one created, inside the call;
/// - reads of messages from the log (a poll copies the payloads it hands out; a nack
///   that dead-letters copies the message), from the page cache or the disk;
/// - rarely, a poll of a message that was dead-lettered and redriven within one sync
///   waits for that dead letter's record to be durable before reading it.
///
/// Group checkpoints (every `checkpoint_every` group records) are written by the wait
/// side instead: inline by [`Deferred::wait`], on a background thread when awaited or
/// when a caller leads its own sync
/// ([`DeferredLeader::sync`](crate::DeferredLeader::sync), see
/// [`Deferred::lead_or_listen`]).
#[derive(Debug, Clone)]
pub struct DurableTopic {
    pub(crate) inner: Arc<TopicInner>,
}

#[derive(Debug)]
pub(crate) struct TopicInner {
    name: String,
    dir: PathBuf,
    pub(crate) messages: Log,
    pub(crate) groups: GroupSet,
    pub(crate) clock: Arc<dyn Clock>,
    storage: Arc<dyn Storage>,
    /// The store-wide retention, for the limits the topic leaves to the default.
    retention_defaults: Retention,
    /// The topic's own retention, as its `SETTINGS` file holds it. Held while the file
    /// is replaced, so changes are written in the order they are made.
    retention: Mutex<TopicRetention>,
    /// What retention removed since the store was opened.
    removed: Mutex<RetentionRemoved>,
    /// The topic's own idempotency window, as its `SETTINGS` file holds it (set at
    /// creation only).
    idempotency: TopicIdempotency,
    /// The idempotency keys published recently. Held from the check of a publish's keys
    /// through its log write, so of two publishes of one key exactly one stores.
    pub(crate) keys_seen: Mutex<KeysSeen>,
    /// `Live` until deleted or closed for a reopen. Every operation holds the read side,
    /// so a delete or close (the write side) waits for operations in flight and none
    /// starts after it.
    deleted: RwLock<Life>,
}

/// Whether a topic handle still serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Life {
    /// Serving.
    Live,
    /// Deleted: every call answers `UnknownTopic`.
    Deleted,
    /// Closed so the store could reopen the topic from its files (healing a fail-stop,
    /// or after a repair): calls answer `TopicFailed`, and a new handle from
    /// `Store::topic` serves.
    Reopened,
}

/// Where the wait side of a group call writes a due checkpoint (see `deferred.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CheckpointOn {
    /// On the thread that waited (a blocking wait).
    ThisThread,
    /// On a background thread (an awaited future must not block its executor).
    Background,
}

impl TopicInner {
    /// What follows every wait for a group transaction: a failed wait makes the groups
    /// fail-stop; a successful one writes a due checkpoint where `checkpoint` says.
    pub(crate) fn after_groups_wait(
        self: &Arc<Self>,
        durable: &Result<(), StoreError>,
        checkpoint: CheckpointOn,
    ) {
        self.groups.after_wait(durable);
        if durable.is_err() || !self.groups.checkpoint_due() {
            return;
        }
        match checkpoint {
            CheckpointOn::ThisThread => self.checkpoint_if_live(),
            CheckpointOn::Background => self.checkpoint_in_background(),
        }
    }

    /// Writes a due checkpoint unless the topic was deleted (a delete waits for it).
    fn checkpoint_if_live(&self) {
        let deleted = self.deleted.read();
        if *deleted == Life::Live {
            self.groups.maybe_checkpoint(&self.messages);
        }
    }

    /// Writes a due checkpoint on a new thread, unless one is queued or running already.
    fn checkpoint_in_background(self: &Arc<Self>) {
        if !self.groups.claim_background_checkpoint() {
            return;
        }
        let topic = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("mailroom-checkpoint".into())
            .spawn(move || {
                topic.checkpoint_if_live();
                topic.groups.release_background_checkpoint();
            });
        if let Err(error) = spawned {
            // The checkpoint stays due: the next group call's wait tries again.
            tracing::warn!(topic = %self.name, %error, "could not start a checkpoint thread");
            self.groups.release_background_checkpoint();
        }
    }
}

impl DurableTopic {
    /// Opens the topic stored in `dir` (its `messages/` and `groups/` logs, checkpoint
    /// and settings).
    pub(crate) fn open(
        storage: Arc<dyn Storage>,
        name: &str,
        dir: &Path,
        options: &StoreOptions,
    ) -> Result<DurableTopic, StoreError> {
        let settings = settings::read(storage.as_ref(), dir)?;
        let messages = Log::open(storage.clone(), &dir.join("messages"), options.log.clone())?;
        let groups = GroupSet::open(storage.clone(), dir, &messages, options)?;
        let clock = options.clock.clone();
        let keys_seen = KeysSeen::rebuild(
            settings.idempotency.resolve(options.idempotency),
            &messages,
            &dir.join("messages"),
            clock.now_ms(),
        )?;
        Ok(DurableTopic {
            inner: Arc::new(TopicInner {
                name: name.to_owned(),
                dir: dir.to_path_buf(),
                messages,
                groups,
                clock,
                storage,
                retention_defaults: options.retention,
                retention: Mutex::new(settings.retention),
                idempotency: settings.idempotency,
                removed: Mutex::new(RetentionRemoved::default()),
                keys_seen: Mutex::new(keys_seen),
                deleted: RwLock::new(Life::Live),
            }),
        })
    }

    /// Marks the topic deleted, waiting for operations in flight.
    pub(crate) fn retire(&self) {
        *self.inner.deleted.write() = Life::Deleted;
    }

    /// Closes the handle so the store can open the topic's files again: waits for
    /// operations in flight, refuses new ones, and makes both logs fail-stop, so that
    /// nothing this handle (or a clone of it) holds ever writes to the files again.
    pub(crate) fn close_for_reopen(&self) {
        *self.inner.deleted.write() = Life::Reopened;
        let closed = StoreError::FailStopped {
            reason: "the topic was closed to be reopened".into(),
        };
        self.inner.messages.close(&closed);
        self.inner.groups.log().close(&closed);
    }

    pub(crate) fn live(&self) -> Result<RwLockReadGuard<'_, Life>, StoreError> {
        let life = self.inner.deleted.read();
        let topic = self.inner.name.clone();
        match *life {
            Life::Live => Ok(life),
            Life::Deleted => Err(StoreError::UnknownTopic { topic }),
            Life::Reopened => Err(StoreError::TopicFailed {
                topic,
                reason: "this handle was closed when the topic was reopened; look the topic \
                         up again"
                    .into(),
            }),
        }
    }

    /// The topic's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Appends one message and returns its offset (0, 1, 2, ... with no gaps).
    ///
    /// # Errors
    ///
    /// [`StoreError::InvalidArgument`] for a payload over the log's `record_bytes_max`;
    /// [`StoreError::Io`] and then [`StoreError::FailStopped`] on disk failures;
    /// [`StoreError::UnknownTopic`] after the topic was deleted.
    pub fn publish(&self, payload: Bytes) -> Result<u64, StoreError> {
        self.publish_deferred(payload)?.wait()
    }

    /// [`publish`](Self::publish) without the wait: writes the message and returns its
    /// offset inside a [`Deferred`], handed out once the message is durable. This part
    /// does not wait for `fdatasync`; see [Blocking](#blocking-in-the-deferred-calls).
    ///
    /// # Errors
    ///
    /// As [`publish`](Self::publish): argument and write errors here, sync errors from
    /// the `Deferred`.
    ///
    /// # Example
    ///
    /// ```
    /// use bytes::Bytes;
    /// use mailroom_store::{Store, StoreOptions};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path(), StoreOptions::default())?;
    /// store.create_topic("t")?;
    /// let topic = store.topic("t")?;
    /// let first = topic.publish_deferred(Bytes::from_static(b"a"))?;
    /// let second = topic.publish_deferred(Bytes::from_static(b"b"))?;
    /// // Both wait for the same sync.
    /// let (first, second) = futures::executor::block_on(futures::future::join(first, second));
    /// assert_eq!((first?, second?), (0, 1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn publish_deferred(&self, payload: Bytes) -> Result<Deferred<u64>, StoreError> {
        let offsets = self.publish_batch_deferred(std::slice::from_ref(&payload))?;
        Ok(offsets.and_then(|offsets| Ok(offsets.start)))
    }

    /// Appends `payloads` as consecutive messages with one sync, and returns their
    /// offsets. All or none are confirmed. An empty batch returns the empty range at the
    /// end of what was written.
    ///
    /// # Errors
    ///
    /// As [`publish`](Self::publish).
    pub fn publish_batch(&self, payloads: &[Bytes]) -> Result<Range<u64>, StoreError> {
        self.publish_batch_deferred(payloads)?.wait()
    }

    /// [`publish_batch`](Self::publish_batch) without the wait: one log write, and the
    /// offsets inside a [`Deferred`] that resolves after one sync.
    ///
    /// # Errors
    ///
    /// As [`publish_deferred`](Self::publish_deferred).
    pub fn publish_batch_deferred(
        &self,
        payloads: &[Bytes],
    ) -> Result<Deferred<Range<u64>>, StoreError> {
        let _live = self.live()?;
        let slices: Vec<&[u8]> = payloads.iter().map(|payload| &payload[..]).collect();
        let messages = &self.inner.messages;
        let offsets = messages.write(&slices, self.inner.clock.now_ms())?;
        // An empty batch still waits for what others wrote before: its answer (the end)
        // shows their offsets as taken.
        Ok(Deferred::on_messages(
            messages.durable(offsets.end),
            Ok(offsets),
        ))
    }

    /// The idempotency window in force for this topic: its own limits over the
    /// store-wide default ([`StoreOptions::idempotency`]).
    pub fn idempotency_window(&self) -> IdempotencyWindow {
        self.inner.keys_seen.lock().window()
    }

    /// The topic's own idempotency window, as created (`None` limits follow the default).
    pub fn own_idempotency(&self) -> TopicIdempotency {
        self.inner.idempotency
    }

    /// The offset the next message will get: how many were ever published.
    pub fn len(&self) -> u64 {
        self.inner.messages.end()
    }

    /// Whether nothing was ever published.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The oldest retained offset (0 until retention deletes something).
    pub fn start(&self) -> u64 {
        self.inner.messages.start()
    }

    /// Reads the message at `offset`; `None` if it is past the end or was deleted by
    /// retention.
    ///
    /// # Errors
    ///
    /// I/O errors and corruption; [`StoreError::UnknownTopic`] after deletion.
    pub fn read(&self, offset: u64) -> Result<Option<Bytes>, StoreError> {
        let _live = self.live()?;
        Ok(self
            .inner
            .messages
            .read(offset)?
            .map(|record| record.payload))
    }

    /// A group transaction's [`Deferred`].
    pub(crate) fn on_groups<R>(&self, staged: Staged<R>) -> Deferred<R> {
        Deferred::on_groups(Arc::clone(&self.inner), staged)
    }

    /// Acks (`nack` `None`) or nacks (options already checked) `deliveries` of `group`
    /// in one transaction, deferred.
    pub(crate) fn settle_deferred(
        &self,
        group: &str,
        deliveries: &[DeliveryId],
        nack: Option<&NackOptions>,
    ) -> Result<Deferred<Vec<Result<Nack, NotOwned>>>, StoreError> {
        let _live = self.live()?;
        let staged =
            self.inner
                .groups
                .settle_batch(&self.inner.messages, group, deliveries, nack)?;
        Ok(self.on_groups(staged))
    }

    /// Why the topic stopped accepting writes (its message log's or its groups' first
    /// failure), or `None` while it is healthy.
    pub(crate) fn failure(&self) -> Option<String> {
        self.inner
            .messages
            .failure()
            .or_else(|| self.inner.groups.failure())
    }

    /// Syncs both logs.
    pub(crate) fn sync(&self) -> Result<(), StoreError> {
        let _live = self.live()?;
        self.inner.messages.sync()?;
        self.inner.groups.log().sync()
    }

    /// Writes a checkpoint of the topic's groups now (normally done every
    /// `checkpoint_every` group records).
    pub(crate) fn checkpoint(&self) -> Result<(), StoreError> {
        let _live = self.live()?;
        self.inner.groups.checkpoint(&self.inner.messages)
    }
}
