//! Failed topics: damage stays local to the topic it is in.
//!
//! A topic whose files cannot be opened (rot in a durable record, a damaged `CHECKPOINT`,
//! `TOPIC` marker or `SETTINGS` file, a file the process may not read) does not stop the
//! store: it is kept aside as *failed* with the error that says where and why, every
//! call on it answers [`StoreError::TopicFailed`], and every other topic serves. A topic
//! whose log stopped after a failed write or sync (a full disk) is *fail-stop*: it still
//! serves reads, refuses writes, and is reported here too.
//!
//! How each heals:
//! - damage ([`FailureKind::Damaged`]) only by [`Store::repair_topic`], which moves the
//!   damaged files aside (`repair.rs`);
//! - an unreadable file or a fail-stop ([`FailureKind::Unreadable`],
//!   [`FailureKind::Stopped`]) by [`Store::recover_topic`], which reopens the topic from
//!   what is durable once the cause is gone; the server calls it with a backoff.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::directory::open_topic_dir;
use super::{Store, StoreOptions};
use crate::storage::Storage;
use crate::topic::DurableTopic;
use crate::StoreError;

/// What kind of failure a failed topic has, which decides how it heals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// A file failed its checks ([`StoreError::Corrupt`]): only a repair cures it.
    Damaged,
    /// Opening it failed for another reason (an I/O error, a file it may not read):
    /// reopening heals it once the cause is fixed.
    Unreadable,
    /// Open, but fail-stop after a failed write or sync: reopening heals it once the
    /// disk takes writes again.
    Stopped,
}

impl FailureKind {
    /// The kind's name as reports show it: `damaged`, `unreadable` or `stopped`.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Damaged => "damaged",
            FailureKind::Unreadable => "unreadable",
            FailureKind::Stopped => "stopped",
        }
    }

    /// Whether reopening may heal it (everything but damage).
    pub fn heals_by_reopening(self) -> bool {
        self != FailureKind::Damaged
    }
}

/// One failed topic and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicFailure {
    /// The topic.
    pub topic: String,
    /// What kind of failure it is.
    pub kind: FailureKind,
    /// The file the failure is in, when the error names one.
    pub path: Option<PathBuf>,
    /// Where and why: the error that failed it.
    pub reason: String,
}

impl TopicFailure {
    /// The failure of topic `topic` that opening it met.
    pub(crate) fn at_open(topic: &str, error: &StoreError) -> TopicFailure {
        let kind = match error {
            StoreError::Corrupt { .. } => FailureKind::Damaged,
            _ => FailureKind::Unreadable,
        };
        let path = match error {
            StoreError::Corrupt { path, .. } | StoreError::Io { path, .. } => Some(path.clone()),
            _ => None,
        };
        TopicFailure {
            topic: topic.to_owned(),
            kind,
            path,
            reason: error.to_string(),
        }
    }

    /// The error a call on the failed topic answers.
    pub(crate) fn error(&self) -> StoreError {
        StoreError::TopicFailed {
            topic: self.topic.clone(),
            reason: self.reason.clone(),
        }
    }
}

impl Store {
    /// Every failed topic, by name: those that could not be opened, then (merged in name
    /// order) those that are fail-stop. Cheap: no I/O, so health checks may call it often.
    ///
    /// ```
    /// let dir = tempfile::tempdir()?;
    /// let store = mailroom_store::Store::open(dir.path(), Default::default())?;
    /// store.create_topic("orders")?;
    /// assert!(store.topic_failures().is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn topic_failures(&self) -> Vec<TopicFailure> {
        let mut failures: Vec<TopicFailure> = self.inner.failed.read().values().cloned().collect();
        for topic in self.all_topics() {
            if let Some(reason) = topic.failure() {
                failures.push(TopicFailure {
                    topic: topic.name().to_owned(),
                    kind: FailureKind::Stopped,
                    path: None,
                    reason,
                });
            }
        }
        failures.sort_by(|a, b| a.topic.cmp(&b.topic));
        failures
    }

    /// Reopens topic `name` from its files if it is failed: a fail-stop topic (its
    /// handles are closed first, and calls on them answer [`StoreError::TopicFailed`]
    /// from then on) or one that could not be opened. Returns `Ok(false)` for a healthy
    /// topic, which is left alone, and `Ok(true)` once the reopened topic serves.
    ///
    /// What a failed write left unsynced is not read back: the log cut it before
    /// answering (`docs/storage.md`, "A failed write is not published").
    ///
    /// # Errors
    ///
    /// [`StoreError::UnknownTopic`]; [`StoreError::TopicFailed`] with the new reason if
    /// opening fails again (the topic stays failed; damage needs
    /// [`repair_topic`](Self::repair_topic)).
    ///
    /// ```
    /// let dir = tempfile::tempdir()?;
    /// let store = mailroom_store::Store::open(dir.path(), Default::default())?;
    /// store.create_topic("orders")?;
    /// assert!(!store.recover_topic("orders")?); // healthy: nothing to do
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn recover_topic(&self, name: &str) -> Result<bool, StoreError> {
        let _changes = self.inner.changes.lock();
        self.reopen_locked(name)
    }

    /// Tries [`recover_topic`](Self::recover_topic) on every failed topic that reopening
    /// may heal (not the damaged ones); returns the names that serve again.
    pub fn recover_topics(&self) -> Vec<String> {
        let mut healed = Vec::new();
        for failure in self.topic_failures() {
            if !failure.kind.heals_by_reopening() {
                continue;
            }
            match self.recover_topic(&failure.topic) {
                Ok(true) => healed.push(failure.topic),
                Ok(false) | Err(StoreError::UnknownTopic { .. }) => {}
                Err(error) => {
                    tracing::debug!(topic = %failure.topic, %error, "topic still failed");
                }
            }
        }
        healed
    }

    /// [`recover_topic`](Self::recover_topic) with the `changes` lock held.
    pub(super) fn reopen_locked(&self, name: &str) -> Result<bool, StoreError> {
        let open = self.inner.topics.read().get(name).cloned();
        let dir = self.inner.topics_dir.join(name);
        if let Some(topic) = &open {
            let Some(reason) = topic.failure() else {
                return Ok(false);
            };
            // Still no room (or still no disk): the stopped topic stays open, serving
            // its reads, rather than be reopened to fail at its next write.
            if let Err(error) = probe_space(self.inner.storage.as_ref(), &dir) {
                return Err(StoreError::TopicFailed {
                    topic: name.to_owned(),
                    reason: format!("{reason}{NOT_REOPENED}{error}"),
                });
            }
            // In the failed map before it leaves the open one, so a lookup meanwhile
            // finds it in one of them.
            self.inner.failed.write().insert(
                name.to_owned(),
                TopicFailure {
                    topic: name.to_owned(),
                    kind: FailureKind::Stopped,
                    path: None,
                    reason,
                },
            );
            self.inner.topics.write().remove(name);
            topic.close_for_reopen();
        } else if !self.inner.failed.read().contains_key(name) {
            return Err(StoreError::UnknownTopic {
                topic: name.to_owned(),
            });
        } else if let Err(error) = probe_space(self.inner.storage.as_ref(), &dir) {
            let mut failed = self.inner.failed.write();
            if let Some(failure) = failed.get_mut(name) {
                // The first failure stays; only the latest probe's is kept after it.
                let first = failure
                    .reason
                    .split(NOT_REOPENED)
                    .next()
                    .unwrap_or_default();
                failure.reason = format!("{first}{NOT_REOPENED}{error}");
            }
            return Err(failed.get(name).map_or(error, TopicFailure::error));
        }
        drop(open);
        match open_failed_topic(&self.inner.storage, &dir, &self.inner.options) {
            Ok(topic) => {
                self.inner.topics.write().insert(name.to_owned(), topic);
                self.inner.failed.write().remove(name);
                tracing::info!(topic = name, "reopened a failed topic: it serves again");
                Ok(true)
            }
            Err(error) => {
                let failure = TopicFailure::at_open(name, &error);
                let answer = failure.error();
                self.inner.failed.write().insert(name.to_owned(), failure);
                Err(answer)
            }
        }
    }
}

/// What a failure's reason says after a probe for space failed.
const NOT_REOPENED: &str = "; not reopened yet: ";

/// The file [`probe_space`] writes in a topic's directory (removed again; a leftover is
/// removed at open).
pub(super) const SPACE_PROBE_FILE: &str = "SPACE.tmp";
/// How much [`probe_space`] writes: room for a few records and a checkpoint.
const SPACE_PROBE_BYTES: usize = 64 << 10;

/// Checks that the disk takes writes again in the topic's directory: writes and syncs
/// [`SPACE_PROBE_BYTES`] to [`SPACE_PROBE_FILE`], then removes it.
fn probe_space(storage: &dyn Storage, dir: &Path) -> Result<(), StoreError> {
    let path = dir.join(SPACE_PROBE_FILE);
    let probe = || -> std::io::Result<()> {
        let file = storage.open(&path, true)?;
        file.write_at(&vec![0; SPACE_PROBE_BYTES], 0)?;
        file.sync()
    };
    let written = probe();
    let removed = match storage.exists(&path) {
        Ok(true) => storage.remove_file(&path),
        Ok(false) => Ok(()),
        Err(error) => Err(error),
    };
    written
        .and(removed)
        .map_err(super::io_error("probe for space", &path))
}

/// Opens the topic in `dir`, which must still be one (its marker present).
fn open_failed_topic(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    options: &StoreOptions,
) -> Result<DurableTopic, StoreError> {
    match open_topic_dir(storage, dir, options)? {
        Some((_, topic)) => Ok(topic),
        // Its marker is gone: open_topic_dir removed it as an unfinished delete.
        None => Err(StoreError::Corrupt {
            path: dir.to_path_buf(),
            position: 0,
            reason: "the topic's TOPIC marker vanished".into(),
        }),
    }
}
