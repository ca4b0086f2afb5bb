//! The embedded backend: the durable store (`mailroom_store::Store`) in this process,
//! with the long polls woken in-process.
//!
//! Where each call runs is chosen for speed, by the kind of call:
//!
//! - the hot calls (publish, poll, ack, nack and their batches) in their deferred form,
//!   the call part inline and the durability wait awaited ([`Embedded::durable`]);
//! - every other call on the blocking pool under `--fsync always`, inline under the
//!   relaxed policies ([`Embedded::blocking`]);
//! - reading a group's next due time and opening a topic's publisher always inline: they
//!   take one lock briefly and never wait for the disk.

use std::path::PathBuf;
use std::sync::Arc;

use mailroom::topic::StartPosition;
use mailroom_store::{DurableTopic, Store, StoreError};
use prometheus_client::metrics::histogram::Histogram;

#[cfg(doc)]
use super::Backend;
use crate::long_poll::LongPolls;

mod backend_impl;
mod calls;
mod disk;
mod polls;
mod publisher;
mod reads;

/// The store in this process behind the [`Backend`] seam.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use bytes::Bytes;
/// use mailroom_server::backend::{Backend, Embedded};
/// use mailroom_server::long_poll::LongPolls;
///
/// let dir = tempfile::tempdir()?;
/// let store = mailroom_store::Store::open(dir.path(), Default::default())?;
/// let backend = Embedded::new(store, false, Arc::new(LongPolls::default()));
/// assert!(backend.create_topic("orders").await?);
/// assert_eq!(backend.publish("orders", Bytes::from("hello")).await?, 0);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Embedded {
    store: Store,
    long_polls: Arc<LongPolls>,
    /// Whether [`Embedded::blocking`] runs its calls on the async worker itself rather
    /// than the blocking pool.
    calls_inline: bool,
    /// The store's directory, whose size [`Backend::disk_usage`] reports.
    data_dir: Option<PathBuf>,
    /// Where the hot calls' waits for an fsync round are timed (`--fsync always`).
    sync_waits: Option<Histogram>,
    /// Whether every call, its durability wait and its due checkpoint run on the
    /// calling thread ([`Embedded::on_the_calling_thread`]).
    on_caller: bool,
}

impl Embedded {
    /// The backend over `store`, waking `long_polls`. `blocking_pool` is whether the
    /// store's writes wait for fsync (`--fsync always`), so that its calls without a
    /// deferred form must leave the async workers ([`Embedded::blocking`] says why).
    pub fn new(store: Store, blocking_pool: bool, long_polls: Arc<LongPolls>) -> Embedded {
        Embedded {
            store,
            long_polls,
            calls_inline: !blocking_pool,
            data_dir: None,
            sync_waits: None,
            on_caller: false,
        }
    }

    /// The deterministic mode, for a simulation that drives the server's handlers one
    /// request at a time over simulated storage: every store call runs inline, a hot
    /// call's wait for the disk blocks the calling thread ([`Deferred::wait`]: the
    /// caller leads its own sync round, so the log's sync thread is never handed one),
    /// a due group checkpoint is written on that thread before the answer (not on a
    /// background thread), and [`Backend::sync`] runs inline. So the order of every
    /// storage call is a function of the requests alone. It blocks the async worker on
    /// every fsync: not for serving.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::sync::Arc;
    /// use bytes::Bytes;
    /// use mailroom_server::backend::{Backend, Embedded};
    /// use mailroom_server::long_poll::LongPolls;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = mailroom_store::Store::open(dir.path(), Default::default())?;
    /// let backend = Embedded::new(store, false, Arc::new(LongPolls::default()))
    ///     .on_the_calling_thread();
    /// backend.create_topic("orders").await?;
    /// // Durable when it answers, synced by this thread.
    /// assert_eq!(backend.publish("orders", Bytes::from("hello")).await?, 0);
    /// # Ok(()) }
    /// ```
    ///
    /// [`Deferred::wait`]: mailroom_store::Deferred::wait
    pub fn on_the_calling_thread(self) -> Embedded {
        Embedded {
            calls_inline: true,
            on_caller: true,
            ..self
        }
    }

    /// Reports the size of `dir`, the store's directory, as its disk usage.
    pub fn with_data_dir(self, dir: impl Into<PathBuf>) -> Embedded {
        Embedded {
            data_dir: Some(dir.into()),
            ..self
        }
    }

    /// Times each wait of a hot call for its fsync round into `histogram`. Only waits
    /// under `--fsync always` are timed: under the relaxed policies they end at once,
    /// and zeros would hide the real rounds.
    pub fn with_sync_histogram(self, histogram: Histogram) -> Embedded {
        Embedded {
            sync_waits: Some(histogram),
            ..self
        }
    }

    /// The store, for embedding and tests.
    pub fn store(&self) -> &Store {
        &self.store
    }
}

/// Refuses a start offset outside the retained log with the log's bounds in the message.
/// The store checks again under its lock (retention may move the start meanwhile), in
/// fewer words.
fn check_start(topic: &DurableTopic, start: StartPosition) -> Result<(), StoreError> {
    let StartPosition::Offset(offset) = start else {
        return Ok(());
    };
    let (first, end) = (topic.start(), topic.len());
    if offset < first || offset > end {
        return Err(StoreError::InvalidArgument {
            reason: format!(
                "start must be an offset in the retained log, {first}..={end}, got {offset}"
            ),
        });
    }
    Ok(())
}
