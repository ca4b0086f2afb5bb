//! Repairing a damaged topic: [`Store::repair_topic`].
//!
//! Repair never guesses which bytes of a damaged file can be trusted. It moves what is
//! damaged aside, intact, for an operator to salvage, and opens the topic from what is
//! left, one damaged file at a time, as opening finds them:
//!
//! | damage in                    | repair                                                 |
//! |------------------------------|--------------------------------------------------------|
//! | the message log (a segment)  | [`Log::repair`]: every segment to `messages/damaged/<offset>/`; the log restarts empty past every offset it confirmed |
//! | `CHECKPOINT`                 | moved to `damaged/<n>/`; the groups are rebuilt by replaying the whole groups log, if it still starts at 0 |
//! | the groups log               | [`Log::cut_at_damage`]: cut just before the first damaged record (every change before it kept; the segment copied and later ones moved to `groups/damaged/<offset>/`); only if nothing before it can be kept, its files and `CHECKPOINT` moved to `damaged/<n>/` and the groups are gone |
//! | `SETTINGS`                   | moved to `damaged/<n>/`: the topic takes the store's default retention and idempotency window |
//! | `TOPIC`                      | written again (it holds only a magic number and the format version) |
//!
//! `<n>` is 1, 2, ... per repair. No offset that was confirmed is ever handed out again:
//! the message log restarts past them, and a fresh groups log numbers only its own
//! records.

use std::path::{Path, PathBuf};

use super::directory::{open_topic_dir, write_marker};
use super::health::TopicFailure;
use super::{Store, TOPIC_FILE, TOPIC_MAGIC};
use crate::groups::checkpoint::CHECKPOINT_FILE;
use crate::log::{Cut, Log};
use crate::storage::{create_dir_durable, Storage};
use crate::topic::settings::SETTINGS_FILE;
use crate::StoreError;

/// The directory in a topic's directory that repairs move damaged files into.
pub(crate) const DAMAGED_DIR: &str = "damaged";
/// The most damaged files one repair cures before it gives up (each pass cures one).
const REPAIR_STEPS_MAX: usize = 8;

/// What [`Store::repair_topic`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicRepaired {
    /// The topic.
    pub topic: String,
    /// Each damage found, as opening reported it, in the order cured.
    pub damage: Vec<String>,
    /// What was done about each, one sentence per damage.
    pub actions: Vec<String>,
}

impl Store {
    /// Repairs topic `name` if it failed with damage: moves each damaged file aside
    /// (see the module docs for what each kind costs) and opens the topic from the rest.
    /// Returns `Ok(None)` and changes nothing for a topic that opens (a fail-stop topic
    /// is reopened, as by [`recover_topic`](Self::recover_topic)).
    ///
    /// # Errors
    ///
    /// [`StoreError::UnknownTopic`]; [`StoreError::TopicFailed`] if the topic still does
    /// not open (an unreadable file, or damage repair cannot cure; the reason says which).
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
    ///     store.create_topic("orders")?;
    ///     store.topic("orders")?.publish(Bytes::from_static(b"confirmed"))?;
    /// }
    /// // Rot in the confirmed record: the topic fails, the store opens.
    /// let segment = dir.path().join("topics/orders/messages/00000000000000000000.log");
    /// let mut bytes = std::fs::read(&segment)?;
    /// bytes[30] ^= 1;
    /// std::fs::write(&segment, bytes)?;
    /// let store = Store::open(dir.path(), StoreOptions::default())?;
    /// assert!(store.topic("orders").is_err());
    ///
    /// let repaired = store.repair_topic("orders")?.expect("it was damaged");
    /// assert_eq!(repaired.actions.len(), 1);
    /// // Offset 0 was confirmed: it is never handed out again.
    /// assert_eq!(store.topic("orders")?.publish(Bytes::from_static(b"next"))?, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn repair_topic(&self, name: &str) -> Result<Option<TopicRepaired>, StoreError> {
        let _changes = self.inner.changes.lock();
        match self.reopen_locked(name) {
            Ok(_) if !self.inner.failed.read().contains_key(name) => return Ok(None),
            Ok(_) | Err(StoreError::TopicFailed { .. }) => {}
            Err(error) => return Err(error),
        }
        let dir = self.inner.topics_dir.join(name);
        let storage = self.inner.storage.as_ref();
        let mut repaired = TopicRepaired {
            topic: name.to_owned(),
            damage: Vec::new(),
            actions: Vec::new(),
        };
        for _ in 0..REPAIR_STEPS_MAX {
            let error = match open_topic_dir(&self.inner.storage, &dir, &self.inner.options) {
                Ok(Some((_, topic))) => {
                    self.inner.topics.write().insert(name.to_owned(), topic);
                    self.inner.failed.write().remove(name);
                    tracing::warn!(topic = name, ?repaired, "repaired a damaged topic");
                    return Ok(Some(repaired));
                }
                Ok(None) => {
                    self.inner.failed.write().remove(name);
                    return Err(StoreError::UnknownTopic {
                        topic: name.to_owned(),
                    });
                }
                Err(error) => error,
            };
            let action = match self.cure(storage, &dir, &error) {
                Ok(action) => action,
                Err(cure_error) => {
                    let failure = TopicFailure::at_open(name, &cure_error);
                    let answer = failure.error();
                    self.inner.failed.write().insert(name.to_owned(), failure);
                    return Err(answer);
                }
            };
            repaired.damage.push(error.to_string());
            repaired.actions.push(action);
        }
        Err(StoreError::TopicFailed {
            topic: name.to_owned(),
            reason: format!("still damaged after {REPAIR_STEPS_MAX} repairs: {repaired:?}"),
        })
    }

    /// Cures the one damage `error` reports in the topic in `dir`; returns what it did.
    /// An error it cannot cure is returned as it is.
    fn cure(
        &self,
        storage: &dyn Storage,
        dir: &Path,
        error: &StoreError,
    ) -> Result<String, StoreError> {
        let StoreError::Corrupt { path, .. } = error else {
            return Err(clone_error(error));
        };
        let messages = dir.join("messages");
        let groups = dir.join("groups");
        let file = path.file_name().and_then(|name| name.to_str());
        if path.starts_with(&messages) {
            let log_options = &self.inner.options.log;
            return match Log::repair(storage, &messages, log_options)? {
                Some(done) => Ok(format!(
                    "moved the message log's segments to {}; it continues at offset {}",
                    done.moved_to.display(),
                    done.restarts_at
                )),
                None => Err(clone_error(error)),
            };
        }
        if path.starts_with(&groups) {
            if let Some(kept) = self.cut_groups_log(storage, &groups, error)? {
                return Ok(kept);
            }
            let to = move_aside(
                storage,
                dir,
                &[groups.as_path(), &dir.join(CHECKPOINT_FILE)],
            )?;
            return Ok(format!(
                "moved the groups log and CHECKPOINT to {}: the topic's groups are gone, \
                 create them again",
                to.display()
            ));
        }
        match file {
            Some(CHECKPOINT_FILE) => {
                let to = move_aside(storage, dir, &[path])?;
                Ok(format!(
                    "moved CHECKPOINT to {}: the groups are rebuilt from the groups log",
                    to.display()
                ))
            }
            Some(SETTINGS_FILE) => {
                let to = move_aside(storage, dir, &[path])?;
                Ok(format!(
                    "moved SETTINGS to {}: the topic takes the store's default retention and idempotency window",
                    to.display()
                ))
            }
            Some(TOPIC_FILE) if path.parent() == Some(dir) => {
                write_marker(storage, dir, TOPIC_FILE, TOPIC_MAGIC)?;
                Ok("wrote the TOPIC marker again".to_owned())
            }
            _ => Err(clone_error(error)),
        }
    }
}

impl Store {
    /// Cuts the groups log in `groups` just before its first damaged record (or the
    /// record replay refused, which `error` names when it names the log itself), so
    /// the groups keep every change before it; answers what was kept and lost, or
    /// `None` if nothing could be kept (then the whole log moves aside).
    fn cut_groups_log(
        &self,
        storage: &dyn Storage,
        groups: &Path,
        error: &StoreError,
    ) -> Result<Option<String>, StoreError> {
        let at = match error {
            StoreError::Corrupt { path, position, .. } if path == groups => Some(*position),
            _ => None,
        };
        let cut = match Log::cut_at_damage(storage, groups, &self.inner.options.log, at) {
            Ok(Some(cut)) => cut,
            Ok(None) | Err(StoreError::Corrupt { .. }) => return Ok(None),
            Err(other) => return Err(other),
        };
        let Cut {
            kept,
            dropped,
            moved_to,
        } = cut;
        Ok(Some(format!(
            "cut the groups log before its damaged record {}: kept records {}..{} (the \
             groups' state up to there), dropped records {}..{} (the group changes they \
             held, such as acks, are undone: their messages are delivered again), moved \
             to {}",
            dropped.start,
            kept.start,
            kept.end,
            dropped.start,
            dropped.end,
            moved_to.display()
        )))
    }
}

/// The same error, for returning one that was only looked at.
fn clone_error(error: &StoreError) -> StoreError {
    match error {
        StoreError::Corrupt {
            path,
            position,
            reason,
        } => StoreError::Corrupt {
            path: path.clone(),
            position: *position,
            reason: reason.clone(),
        },
        other => StoreError::TopicFailed {
            topic: String::new(),
            reason: other.to_string(),
        },
    }
}

/// Moves `paths` (files, or directories whose files move and subdirectories stay) into
/// a new `dir/damaged/<n>/` and returns it. Durable on return.
fn move_aside(storage: &dyn Storage, dir: &Path, paths: &[&Path]) -> Result<PathBuf, StoreError> {
    let io = |operation: &'static str, path: &Path| super::io_error(operation, path);
    let damaged = dir.join(DAMAGED_DIR);
    create_dir_durable(storage, &damaged).map_err(io("create directory", &damaged))?;
    let taken = storage
        .list_dir(&damaged)
        .map_err(io("list", &damaged))?
        .iter()
        .filter_map(|path| path.file_name()?.to_str()?.parse::<u64>().ok())
        .max()
        .unwrap_or(0);
    let to = damaged.join((taken + 1).to_string());
    create_dir_durable(storage, &to).map_err(io("create directory", &to))?;
    for &path in paths {
        if !storage.exists(path).map_err(io("stat", path))? {
            continue;
        }
        let name = path.file_name().unwrap_or_default();
        match storage.list_dir(path) {
            // A directory: its files move into one of the same name.
            Ok(entries) => {
                let into = to.join(name);
                create_dir_durable(storage, &into).map_err(io("create directory", &into))?;
                for entry in entries {
                    let Some(file) = entry.file_name() else {
                        continue;
                    };
                    if storage.list_dir(&entry).is_ok() {
                        continue; // a subdirectory (an earlier repair's): it stays
                    }
                    storage
                        .rename(&entry, &into.join(file))
                        .map_err(io("rename", &entry))?;
                }
                storage
                    .sync_dir(&into)
                    .map_err(io("fsync directory", &into))?;
                storage
                    .sync_dir(path)
                    .map_err(io("fsync directory", path))?;
            }
            Err(_) => {
                storage
                    .rename(path, &to.join(name))
                    .map_err(io("rename", path))?;
            }
        }
    }
    for synced in [to.as_path(), dir] {
        storage
            .sync_dir(synced)
            .map_err(io("fsync directory", synced))?;
    }
    Ok(to)
}
