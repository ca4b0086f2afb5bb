//! How a store is opened: its options and their defaults, and the file descriptors
//! each open topic holds.

use std::sync::Arc;

use crate::clock::{Clock, SystemClock};
use crate::idempotency::IdempotencyWindow;
use crate::log::LogOptions;
use crate::retention::Retention;
#[cfg(doc)]
use crate::{retention::TopicRetention, topic::DurableTopic, StoreError};

#[cfg(doc)]
use super::Store;

/// How a [`Store`] lays out, syncs and retains its data.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Options of every log (message logs and groups logs), including the sync policy.
    pub log: LogOptions,
    /// What [`Store::enforce_retention`] may delete: the default of every topic, for
    /// each limit its own settings ([`TopicRetention`]) leave to the default.
    pub retention: Retention,
    /// Write a topic's group checkpoint after this many group records, bounding what
    /// opening replays. Default 4096.
    pub checkpoint_every: u64,
    /// Where timestamps come from. Default: the system clock.
    pub clock: Arc<dyn Clock>,
    /// The most payload bytes one batch poll hands out (`poll_batch`,
    /// `ack_then_poll_batch`): a batch stops early rather than pass it, but always holds
    /// at least one delivery, however large. Bounds the memory of one answer (Kafka's
    /// broker caps a fetch the same way). Default [`POLL_BATCH_BYTES_MAX_DEFAULT`].
    pub poll_batch_bytes_max: usize,
    /// The most topics the store holds: [`Store::create_topic`] refuses one more with
    /// [`StoreError::TopicLimit`] before it opens a file. Every open topic holds
    /// [`TOPIC_FILES_OPEN`] file descriptors for good, so this is how a caller keeps the
    /// store inside the process's open-file limit (the server sizes it from
    /// `RLIMIT_NOFILE`). Opening never refuses topics already on disk, even past this
    /// limit: what was created stays readable. Default [`TOPICS_MAX_DEFAULT`].
    pub topics_max: usize,
    /// How long every topic remembers an idempotency key (see
    /// [`DurableTopic::publish_once`]). Default [`IdempotencyWindow::default`].
    pub idempotency: IdempotencyWindow,
}

/// The default [`StoreOptions::topics_max`].
pub const TOPICS_MAX_DEFAULT: usize = 10_000;

/// The file descriptors one open topic holds for as long as it is open: the message
/// log's and the groups log's current segment, index and synced mark (`SYNCED`). A
/// segment roll and a checkpoint briefly hold one or two more.
pub const TOPIC_FILES_OPEN: usize = 6;

/// The default [`StoreOptions::poll_batch_bytes_max`]: 16 MiB.
pub const POLL_BATCH_BYTES_MAX_DEFAULT: usize = 16 << 20;

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            log: LogOptions::default(),
            retention: Retention::default(),
            checkpoint_every: 4096,
            clock: Arc::new(SystemClock),
            poll_batch_bytes_max: POLL_BATCH_BYTES_MAX_DEFAULT,
            topics_max: TOPICS_MAX_DEFAULT,
            idempotency: IdempotencyWindow::default(),
        }
    }
}
