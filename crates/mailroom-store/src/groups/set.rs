//! The groups of one topic: the registry, each group's lock, and the durable transitions.
//!
//! Locking: each group has its own mutex, held from plan through apply to the write of
//! the records, but released before waiting for their `fdatasync` (see `pending.rs` for
//! why that is exact). A transition takes no other lock, so one group never waits on
//! another's transition, and transitions of one group or of many share each sync.
//! Registry changes (create, delete), checkpoints and retention's floor serialise on
//! `changes`, and take group locks one at a time after it: the order is always `changes`
//! → one group, so nothing can deadlock. Registry changes are rare and still wait for
//! their sync under `changes`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use mailroom::group::{ArgumentError, GroupConfig, GroupError, GroupState};
use mailroom::topic::{StartPosition, TopicError, GROUPS_MAX};
use parking_lot::{Mutex, MutexGuard, RwLock};

use super::checkpoint::{self, Checkpoint, GroupCheckpoint};
use super::compaction;
use super::replay::{self, Recovered};
use super::transition::GroupTransition;
use super::{GroupEntry, GroupId};
use crate::clock::Clock;
use crate::log::{Log, SyncPolicy, RECORD_BYTES_LIMIT};
use crate::storage::Storage;
use crate::store::names::validate_name;
use crate::{StoreError, StoreOptions};

/// The groups of one topic.
#[derive(Debug)]
pub struct GroupSet {
    pub(super) log: Log,
    pub(super) log_dir: PathBuf,
    storage: Arc<dyn Storage>,
    pub(super) topic_dir: PathBuf,
    pub(super) clock: Arc<dyn Clock>,
    /// Whether the sync policy is relaxed (see `replay`): then checkpoints sync the
    /// message log first, since the groups log may not outrun it on disk.
    relaxed: bool,
    registry: RwLock<HashMap<String, Arc<GroupSlot>>>,
    pub(super) changes: Mutex<Changes>,
    records_since_checkpoint: AtomicU64,
    checkpoint_every: u64,
    /// `StoreOptions::poll_batch_bytes_max`: what one batch poll may hand out.
    pub(super) poll_batch_bytes_max: usize,
    /// Held by a checkpoint, so checkpoints (and the compaction inside them, which reads
    /// records an overlapping checkpoint could delete) never overlap.
    checkpoint_running: Mutex<()>,
    /// Holds groups-log segment deletion off while dead letters' payloads are read after
    /// their group's lock is released: readers take it shared for the whole read
    /// (`dead_letters.rs`), a checkpoint takes it exclusively around its deletion only.
    pub(super) segment_deletion: RwLock<()>,
    /// What the last compaction copied, in bytes, or `COPIED_BYTES_UNKNOWN` until the
    /// first look at compaction since opening (see `compaction.rs`).
    pub(super) compaction_copied_bytes: AtomicU64,
    /// Set while a checkpoint handed to a background thread (by an awaited `Deferred`,
    /// which must not block its executor) is queued or running, so at most one is.
    checkpoint_queued: AtomicBool,
    failed: OnceLock<String>,
}

#[derive(Debug)]
pub(super) struct Changes {
    next_group_id: GroupId,
}

#[derive(Debug)]
pub(super) struct GroupSlot {
    pub(super) id: GroupId,
    pub(super) name: String,
    pub(super) entry: Mutex<GroupEntry>,
}

fn unknown(group: &str) -> StoreError {
    StoreError::Topic(TopicError::UnknownGroup {
        group: group.to_owned(),
    })
}

impl GroupSet {
    /// Opens the groups of the topic in `topic_dir` (log in `topic_dir/groups`), recovering
    /// them against `messages`.
    ///
    /// # Errors
    ///
    /// I/O errors and corruption (see [`replay`]).
    pub fn open(
        storage: Arc<dyn Storage>,
        topic_dir: &Path,
        messages: &Log,
        store_options: &StoreOptions,
    ) -> Result<GroupSet, StoreError> {
        let options = &store_options.log;
        let log_dir = topic_dir.join("groups");
        let mut log_options = options.clone();
        // A dead letter's record holds the whole message plus its 21-byte header.
        log_options.record_bytes_max = options
            .record_bytes_max
            .saturating_add(64)
            .min(RECORD_BYTES_LIMIT);
        let log = Log::open(storage.clone(), &log_dir, log_options)?;
        let relaxed = options.sync != SyncPolicy::Always;
        let recovered = replay::recover(&storage, topic_dir, &log, &log_dir, messages, relaxed)?;
        let Recovered {
            groups,
            next_group_id,
            records_replayed,
            repaired,
        } = recovered;
        let registry = groups
            .into_iter()
            .map(|group| {
                let slot = GroupSlot {
                    id: group.id,
                    name: group.name.clone(),
                    entry: Mutex::new(group.entry),
                };
                (group.name, Arc::new(slot))
            })
            .collect();
        let set = GroupSet {
            log,
            log_dir,
            storage,
            topic_dir: topic_dir.to_path_buf(),
            clock: store_options.clock.clone(),
            relaxed,
            registry: RwLock::new(registry),
            changes: Mutex::new(Changes { next_group_id }),
            records_since_checkpoint: AtomicU64::new(records_replayed),
            checkpoint_every: store_options.checkpoint_every.max(1),
            poll_batch_bytes_max: store_options.poll_batch_bytes_max.max(1),
            checkpoint_running: Mutex::new(()),
            segment_deletion: RwLock::new(()),
            compaction_copied_bytes: AtomicU64::new(compaction::COPIED_BYTES_UNKNOWN),
            checkpoint_queued: AtomicBool::new(false),
            failed: OnceLock::new(),
        };
        if repaired || records_replayed >= set.checkpoint_every {
            // A repaired history must be checkpointed before anything new is written
            // after the stale records (see `replay`).
            set.checkpoint(messages)?;
        }
        Ok(set)
    }

    /// The groups log.
    pub fn log(&self) -> &Log {
        &self.log
    }

    /// The group names, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.registry.read().keys().cloned().collect();
        names.sort_unstable();
        names
    }

    /// Every live group, by name: checkpoints and compaction write the groups in this
    /// order, so the same history gives the same bytes (a simulation's seed replays).
    pub(super) fn slots(&self) -> Vec<Arc<GroupSlot>> {
        let registry = self.registry.read();
        let mut named: Vec<(&String, &Arc<GroupSlot>)> = registry.iter().collect();
        named.sort_unstable_by(|a, b| a.0.cmp(b.0));
        named.into_iter().map(|(_, slot)| slot.clone()).collect()
    }

    pub(super) fn slot(&self, group: &str) -> Result<Arc<GroupSlot>, StoreError> {
        self.registry
            .read()
            .get(group)
            .cloned()
            .ok_or_else(|| unknown(group))
    }

    /// Locks `slot`'s group, refusing a deleted group, and every group once the set is
    /// fail-stop: memory may then be ahead of the disk (see `pending.rs`).
    pub(super) fn lock_live<'a>(
        &self,
        slot: &'a GroupSlot,
    ) -> Result<MutexGuard<'a, GroupEntry>, StoreError> {
        self.check_writable()?;
        let entry = slot.entry.lock();
        if entry.deleted {
            return Err(unknown(&slot.name));
        }
        Ok(entry)
    }

    pub(super) fn check_writable(&self) -> Result<(), StoreError> {
        match self.failed.get() {
            Some(reason) => Err(StoreError::FailStopped {
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Why the groups stopped accepting writes (theirs or their log's first failure),
    /// or `None`.
    pub(crate) fn failure(&self) -> Option<String> {
        self.failed.get().cloned().or_else(|| self.log.failure())
    }

    pub(crate) fn fail(&self, error: &StoreError) {
        let _ = self.failed.set(error.to_string());
    }

    /// Counts `records` more records towards the next checkpoint.
    pub(super) fn note_records(&self, records: usize) {
        self.records_since_checkpoint
            .fetch_add(records as u64, Ordering::Relaxed);
    }

    /// Appends a registry transition (create, delete) to the groups log and waits until it is
    /// durable; returns its offset.
    fn append(&self, transition: &GroupTransition) -> Result<u64, StoreError> {
        self.check_writable()?;
        let bytes = transition.encode();
        match self.log.append(&[&bytes], self.clock.now_ms()) {
            Ok(offsets) => {
                self.note_records(1);
                Ok(offsets.start)
            }
            Err(error) => {
                // An oversized record was refused before any I/O; anything else may
                // have left the log in an unknown state.
                if !matches!(error, StoreError::InvalidArgument { .. }) {
                    self.fail(&error);
                }
                Err(error)
            }
        }
    }

    /// Creates group `name` starting at `start`.
    ///
    /// # Errors
    ///
    /// As `DurableTopic::create_group_at`.
    pub fn create(
        &self,
        messages: &Log,
        name: &str,
        config: GroupConfig,
        start: StartPosition,
    ) -> Result<(), StoreError> {
        let max_attempts = config.max_attempts;
        // The in-memory topic's rules come first, with its errors; then the store's own
        // stricter name rule.
        let invalid = |error| StoreError::Topic(TopicError::InvalidArgument(error));
        if name.is_empty() {
            return Err(crate::topic::empty_group_name());
        }
        if max_attempts == 0 {
            return Err(TopicError::from(GroupError::ZeroMaxAttempts).into());
        }
        validate_name(name)?;
        let mut changes = self.changes.lock();
        {
            let registry = self.registry.read();
            if registry.contains_key(name) {
                return Err(StoreError::Topic(TopicError::GroupExists {
                    group: name.to_owned(),
                }));
            }
            // The same cap, checked in the same order, as the in-memory topic.
            if registry.len() >= GROUPS_MAX {
                return Err(invalid(ArgumentError::Full {
                    items: "groups",
                    max: GROUPS_MAX as u64,
                }));
            }
        }
        // Holding `changes` keeps retention from moving the log's start meanwhile.
        let position = match start {
            StartPosition::Earliest => messages.start(),
            StartPosition::Latest => messages.end(),
            StartPosition::Offset(offset) => {
                if offset < messages.start() || offset > messages.end() {
                    return Err(invalid(ArgumentError::OutOfRange {
                        field: "start",
                        min: messages.start(),
                        max: messages.end(),
                        got: offset,
                    }));
                }
                offset
            }
        };
        let state = GroupState::with_config(config, position).map_err(TopicError::from)?;
        let id = changes.next_group_id;
        self.append(&GroupTransition::Created {
            id,
            name: name.to_owned(),
            max_attempts,
            position,
            config,
        })?;
        changes.next_group_id += 1;
        let slot = GroupSlot {
            id,
            name: name.to_owned(),
            entry: Mutex::new(GroupEntry::new(state)),
        };
        self.registry
            .write()
            .insert(name.to_owned(), Arc::new(slot));
        Ok(())
    }

    /// Deletes group `name`.
    ///
    /// # Errors
    ///
    /// `UnknownGroup`, I/O errors.
    pub fn delete(&self, name: &str) -> Result<(), StoreError> {
        let _changes = self.changes.lock();
        let slot = self.slot(name)?;
        // Waits for a transition in progress; none can start after `deleted` is set.
        let mut entry = self.lock_live(&slot)?;
        self.append(&GroupTransition::Deleted { id: slot.id })?;
        entry.deleted = true;
        self.registry.write().remove(name);
        Ok(())
    }

    /// Runs `action` with the lowest position of any group (`None` without groups), while
    /// no group can be created (a new group could otherwise start below the floor).
    ///
    /// # Errors
    ///
    /// `FailStopped`, and I/O errors of the sync that makes the positions durable first.
    pub fn with_floor<R>(&self, action: impl FnOnce(Option<u64>) -> R) -> Result<R, StoreError> {
        let _changes = self.changes.lock();
        self.check_writable()?;
        let slots: Vec<Arc<GroupSlot>> = self.registry.read().values().cloned().collect();
        let floor = slots
            .iter()
            .map(|slot| slot.entry.lock().state.position())
            .min();
        // A position may have moved by a record not yet durable; deleting messages below
        // it before that record is durable could lose messages a power cut gives back.
        self.wait_durable(self.log.written_end())?;
        Ok(action(floor))
    }

    /// Whether `checkpoint_every` group records were written since the last checkpoint.
    pub(crate) fn checkpoint_due(&self) -> bool {
        self.records_since_checkpoint.load(Ordering::Relaxed) >= self.checkpoint_every
    }

    /// Claims the one background checkpoint slot; `false` if one is queued or running.
    /// Release it with [`release_background_checkpoint`](Self::release_background_checkpoint).
    pub(crate) fn claim_background_checkpoint(&self) -> bool {
        self.checkpoint_queued
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Releases the slot taken by [`claim_background_checkpoint`](Self::claim_background_checkpoint).
    pub(crate) fn release_background_checkpoint(&self) {
        self.checkpoint_queued.store(false, Ordering::Release);
    }

    /// Writes a checkpoint if one is due and none is being written. Blocks for its syncs.
    /// A failure makes the set fail-stop (the operation that triggered it is already
    /// durable and answered).
    pub(crate) fn maybe_checkpoint(&self, messages: &Log) {
        if !self.checkpoint_due() {
            return;
        }
        let Some(_running) = self.checkpoint_running.try_lock() else {
            return;
        };
        if !self.checkpoint_due() {
            return;
        }
        if let Err(error) = self.checkpoint_held(messages) {
            // The operation that triggered this is already durable and is reported as
            // done; what failed is the checkpoint, and the next write is refused.
            tracing::error!(topic = ?self.topic_dir, %error, "group checkpoint failed");
            self.fail(&error);
        }
    }

    /// Writes a checkpoint of every group now, then drops groups-log segments that
    /// neither replay nor a dead letter needs. Dead letters whose records lie far back are
    /// first copied forward (see `compaction.rs`), so they do not keep every segment.
    ///
    /// # Errors
    ///
    /// I/O errors, fail-stop.
    pub fn checkpoint(&self, messages: &Log) -> Result<(), StoreError> {
        let _running = self.checkpoint_running.lock();
        self.checkpoint_held(messages)
    }

    /// [`checkpoint`](Self::checkpoint), with `checkpoint_running` held by the caller.
    fn checkpoint_held(&self, messages: &Log) -> Result<(), StoreError> {
        self.check_writable()?;
        // The copies must be durable and named before the snapshot, so the checkpoint
        // names them; the old records go only after the checkpoint is durable, below.
        self.compact_dead_letters()?;
        let checkpoint = self.snapshot();
        // The snapshot may hold changes whose records are written but not yet durable; this
        // sync (of everything written, so past every `applied_through` just noted) comes
        // before the checkpoint file, which therefore never gets ahead of the log.
        if self.relaxed {
            // A checkpoint may not name messages that a power cut could still take away.
            messages.sync()?;
        }
        self.log.sync()?;
        checkpoint::write(&self.storage, &self.topic_dir, &checkpoint)?;
        let needed_from = checkpoint
            .groups
            .iter()
            .flat_map(|group| {
                let dead = group.dead_letter_records.iter().copied().min();
                let redriven = group.redriven_records.iter().map(|&(_, at)| at).min();
                dead.into_iter().chain(redriven)
            })
            .fold(checkpoint.replay_from(), u64::min);
        // A reader may still be reading records chosen before the compaction above
        // pointed its group at the copies: they go only once no read holds them.
        let _no_reader = self.segment_deletion.write();
        self.log.delete_segments_before(needed_from)?;
        Ok(())
    }

    fn snapshot(&self) -> Checkpoint {
        let changes = self.changes.lock();
        self.records_since_checkpoint.store(0, Ordering::Relaxed);
        // Registry records are durable before `changes` is released, so all lie below.
        let registry_through = self.log.written_end();
        let slots = self.slots();
        let groups = slots
            .iter()
            .map(|slot| {
                let entry = slot.entry.lock();
                // A group's records are written and applied under its lock, so every
                // record of it written so far (durable or not yet) is in this state.
                GroupCheckpoint {
                    id: slot.id,
                    name: slot.name.clone(),
                    applied_through: self.log.written_end(),
                    state: entry.state.snapshot(),
                    dead_letter_records: entry.dead_letter_records.clone(),
                    redriven_records: entry
                        .redriven_records
                        .iter()
                        .map(|(&offset, &record)| (offset, record))
                        .collect(),
                }
            })
            .collect();
        Checkpoint {
            registry_through,
            next_group_id: changes.next_group_id,
            groups,
        }
    }
}
