//! Recovery of a topic's groups: load the checkpoint, then replay the groups log after it.
//!
//! Every replayed record is re-checked: an event must follow from the group's state (the
//! same `apply` as the live path), a delivery must name a message the message log holds,
//! ids must be handed out in order. A record that does not fit is corruption and stops
//! the open; it is never skipped.
//!
//! One exception is allowed under the relaxed sync policies (`Interval`, `Never`): the
//! two logs are synced independently, so a power cut can keep a group record about a
//! message whose own record was lost. Such a group stops at the last record that still
//! fits the message log (its later records are about messages that no longer exist), and
//! the caller writes a checkpoint at once so the stale records are never replayed again.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use mailroom::group::{Change, GroupConfig, GroupState};

use super::checkpoint::{self, Checkpoint};
use super::reader::DecodeError;
use super::transition::GroupTransition;
use super::{GroupEntry, GroupId};
use crate::log::Log;
use crate::storage::Storage;
use crate::store::names::validate_name;
use crate::StoreError;

/// One recovered group.
#[derive(Debug)]
pub struct RecoveredGroup {
    /// Its id.
    pub id: GroupId,
    /// Its name.
    pub name: String,
    /// Its state.
    pub entry: GroupEntry,
}

/// The groups of a topic as recovered from disk.
#[derive(Debug)]
pub struct Recovered {
    /// The live groups.
    pub groups: Vec<RecoveredGroup>,
    /// The next id to hand out.
    pub next_group_id: GroupId,
    /// How many records were replayed after the checkpoint.
    pub records_replayed: u64,
    /// Whether stale records were cut off (relaxed sync policies only); the caller must
    /// checkpoint before writing anything.
    pub repaired: bool,
}

struct ReplayGroup {
    name: String,
    entry: GroupEntry,
    /// Records of this group below this offset are already in `entry`.
    applied_through: u64,
    /// Set when a record about a lost message was met (relaxed policies): later records
    /// of this group are about lost messages too and are dropped.
    cut: bool,
}

struct Replay<'a> {
    groups_log: &'a Log,
    log_path: &'a Path,
    message_end: u64,
    lenient: bool,
    groups: HashMap<GroupId, ReplayGroup>,
    names: HashSet<String>,
    deleted: HashSet<GroupId>,
    next_group_id: GroupId,
    /// Ids below this that are unknown belong to groups deleted before the checkpoint.
    checkpoint_next_id: GroupId,
    registry_through: u64,
    repaired: bool,
}

/// Recovers the groups of the topic in `topic_dir`.
///
/// `lenient` allows group records about messages past the message log's end, which only
/// a relaxed sync policy can leave behind (see the module docs).
///
/// # Errors
///
/// [`StoreError::Corrupt`] for a damaged checkpoint or a record that does not fit;
/// [`StoreError::Io`] for I/O errors.
pub fn recover(
    storage: &Arc<dyn Storage>,
    topic_dir: &Path,
    groups_log: &Log,
    groups_log_path: &Path,
    messages: &Log,
    lenient: bool,
) -> Result<Recovered, StoreError> {
    let checkpoint = checkpoint::read(storage, topic_dir)?;
    let mut replay = Replay {
        groups_log,
        log_path: groups_log_path,
        message_end: messages.end(),
        lenient,
        groups: HashMap::new(),
        names: HashSet::new(),
        deleted: HashSet::new(),
        next_group_id: 0,
        checkpoint_next_id: 0,
        registry_through: 0,
        repaired: false,
    };
    let from = match &checkpoint {
        Some(checkpoint) => replay.load(checkpoint, topic_dir)?,
        None => 0,
    };
    if from < groups_log.start() {
        return Err(replay.corrupt(
            groups_log.start(),
            format!(
                "the groups log starts at {} but replay must start at {from}",
                groups_log.start()
            ),
        ));
    }
    let end = groups_log.end();
    for offset in from..end {
        replay.replay_one(offset)?;
    }
    let mut groups: Vec<RecoveredGroup> = replay
        .groups
        .into_iter()
        .map(|(id, group)| RecoveredGroup {
            id,
            name: group.name,
            entry: group.entry,
        })
        .collect();
    groups.sort_by_key(|group| group.id);
    Ok(Recovered {
        groups,
        next_group_id: replay.next_group_id,
        records_replayed: end - from,
        repaired: replay.repaired,
    })
}

impl Replay<'_> {
    fn corrupt(&self, offset: u64, reason: String) -> StoreError {
        StoreError::Corrupt {
            path: self.log_path.to_path_buf(),
            position: offset,
            reason: format!("groups log record {offset}: {reason}"),
        }
    }

    /// Loads the checkpoint's groups and returns the offset to replay from.
    fn load(&mut self, checkpoint: &Checkpoint, topic_dir: &Path) -> Result<u64, StoreError> {
        let path = topic_dir.join(checkpoint::CHECKPOINT_FILE);
        let corrupt = |reason: String| StoreError::Corrupt {
            path: path.clone(),
            position: 0,
            reason,
        };
        let log_end = self.groups_log.end();
        if checkpoint.registry_through > log_end {
            return Err(corrupt(format!(
                "checkpoint covers groups log up to {} but the log ends at {log_end}",
                checkpoint.registry_through
            )));
        }
        for group in &checkpoint.groups {
            let name = &group.name;
            let fits = validate_name(name).is_ok()
                && group.id < checkpoint.next_group_id
                && group.applied_through <= log_end
                && group.state.position <= self.message_end
                && group.dead_letter_records.iter().all(|&at| at < log_end)
                && !self.groups.contains_key(&group.id)
                && self.names.insert(name.clone());
            if !fits {
                return Err(corrupt(format!("group {name:?} does not fit the logs")));
            }
            let state = GroupState::from_snapshot(group.state.clone())
                .map_err(|error| corrupt(format!("group {name:?}: {error}")))?;
            let live: HashSet<u64> = state.slots().map(|slot| slot.offset).collect();
            let redriven_fit = group
                .redriven_records
                .iter()
                .all(|(offset, at)| *at < log_end && live.contains(offset));
            if !redriven_fit {
                return Err(corrupt(format!("group {name:?}: bad redriven records")));
            }
            let entry = GroupEntry {
                redriven_records: group.redriven_records.iter().copied().collect(),
                state,
                dead_letter_records: group.dead_letter_records.clone(),
                deleted: false,
                keys: Default::default(),
            };
            self.groups.insert(
                group.id,
                ReplayGroup {
                    name: name.clone(),
                    entry,
                    applied_through: group.applied_through,
                    cut: false,
                },
            );
        }
        self.next_group_id = checkpoint.next_group_id;
        self.checkpoint_next_id = checkpoint.next_group_id;
        self.registry_through = checkpoint.registry_through;
        Ok(checkpoint.replay_from())
    }

    fn replay_one(&mut self, offset: u64) -> Result<(), StoreError> {
        let Some(stored) = self.groups_log.read(offset)? else {
            return Err(self.corrupt(offset, "missing inside the log".into()));
        };
        let transition = GroupTransition::decode(&stored.payload)
            .map_err(|DecodeError(reason)| self.corrupt(offset, reason.into()))?;
        match transition {
            GroupTransition::Created {
                id,
                name,
                position,
                config,
                ..
            } => self.created(offset, id, name, config, position),
            GroupTransition::Deleted { id } => {
                if offset < self.registry_through {
                    return Ok(());
                }
                let Some(group) = self.groups.remove(&id) else {
                    return Err(self.corrupt(offset, format!("deletes unknown group {id}")));
                };
                self.names.remove(&group.name);
                self.deleted.insert(id);
                Ok(())
            }
            GroupTransition::Event { .. } | GroupTransition::Moved { .. } => {
                self.transition(offset, &transition)
            }
            // A compaction's copy of a payload: only a checkpoint's pointer names it,
            // and it changes no state (it may even outlive its group).
            GroupTransition::DeadLetterCopy { .. } => Ok(()),
        }
    }

    fn created(
        &mut self,
        offset: u64,
        id: GroupId,
        name: String,
        config: GroupConfig,
        mut position: u64,
    ) -> Result<(), StoreError> {
        if offset < self.registry_through {
            return Ok(());
        }
        if id != self.next_group_id {
            let expected = self.next_group_id;
            return Err(self.corrupt(offset, format!("group id {id}, expected {expected}")));
        }
        if validate_name(&name).is_err() || self.names.contains(&name) {
            return Err(self.corrupt(
                offset,
                format!("creates invalid or duplicate group {name:?}"),
            ));
        }
        if position > self.message_end {
            if !self.lenient {
                return Err(self.corrupt(offset, self.past_end(position)));
            }
            position = self.message_end;
            self.repaired = true;
        }
        let state = GroupState::with_config(config, position)
            .map_err(|error| self.corrupt(offset, error.to_string()))?;
        self.next_group_id += 1;
        self.names.insert(name.clone());
        self.groups.insert(
            id,
            ReplayGroup {
                name,
                entry: GroupEntry::new(state),
                applied_through: 0,
                cut: false,
            },
        );
        Ok(())
    }

    fn past_end(&self, offset: u64) -> String {
        format!(
            "names message offset {offset} but the message log ends at {}",
            self.message_end
        )
    }

    fn transition(&mut self, offset: u64, transition: &GroupTransition) -> Result<(), StoreError> {
        let id = transition.id();
        let Some(group) = self.groups.get(&id) else {
            if id < self.checkpoint_next_id && !self.deleted.contains(&id) {
                // A group deleted before the checkpoint; its records precede its delete.
                return Ok(());
            }
            return Err(self.corrupt(offset, format!("event for unknown group {id}")));
        };
        if offset < group.applied_through || group.cut {
            return Ok(());
        }
        // `apply` checks the state machine; what it cannot know is the message log.
        let missing = match transition {
            GroupTransition::Event {
                change: Change::Delivered { id: delivery, .. },
                ..
            } => (delivery.offset >= self.message_end).then_some(delivery.offset),
            GroupTransition::Moved { position, .. } => {
                (*position > self.message_end).then_some(*position)
            }
            _ => None,
        };
        if let Some(message) = missing {
            if !self.lenient {
                return Err(self.corrupt(offset, self.past_end(message)));
            }
            self.groups.get_mut(&id).expect("looked up above").cut = true;
            self.repaired = true;
            return Ok(());
        }
        let applied = self
            .groups
            .get_mut(&id)
            .expect("looked up above")
            .entry
            .apply(transition, offset);
        applied.map_err(|error| self.corrupt(offset, error.to_string()))
    }
}
