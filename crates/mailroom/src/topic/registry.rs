//! The topic's groups by name.
//!
//! Lookups take a read lock, so calls on different groups never wait for each other here;
//! only creating and deleting a group takes the write lock, briefly.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::RwLock;

use super::consumer_group::ConsumerGroup;
use super::{TopicError, GROUPS_MAX, GROUP_NAME_BYTES_MAX};
use crate::group::{ArgumentError, GroupState};

/// Groups by name.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    groups: RwLock<HashMap<Box<str>, Arc<ConsumerGroup>>>,
}

impl Registry {
    /// Adds a group with the state `machine` (already checked).
    pub(crate) fn create(
        &self,
        name: &str,
        machine: GroupState,
    ) -> Result<Arc<ConsumerGroup>, TopicError> {
        check_name(name)?;
        let mut groups = self.groups.write();
        if groups.contains_key(name) {
            return Err(TopicError::GroupExists {
                group: name.to_owned(),
            });
        }
        if groups.len() >= GROUPS_MAX {
            return Err(TopicError::InvalidArgument(ArgumentError::Full {
                items: "groups",
                max: GROUPS_MAX as u64,
            }));
        }
        let group = Arc::new(ConsumerGroup::new(name, machine));
        groups.insert(name.into(), Arc::clone(&group));
        Ok(group)
    }

    /// Removes a group and marks it deleted, under the write lock, so that no call by name
    /// or by handle acts on it afterwards.
    pub(crate) fn delete(&self, name: &str) -> Result<(), TopicError> {
        let mut groups = self.groups.write();
        let group = groups.remove(name).ok_or_else(|| unknown(name))?;
        group.mark_deleted();
        Ok(())
    }

    /// Runs `operation` on the named group, under the read lock: no reference count is
    /// touched, so concurrent calls on different groups share no written cache line here
    /// beyond the lock's reader count.
    #[inline]
    pub(crate) fn with<R>(
        &self,
        name: &str,
        operation: impl FnOnce(&Arc<ConsumerGroup>) -> Result<R, TopicError>,
    ) -> Result<R, TopicError> {
        let groups = self.groups.read();
        let group = groups.get(name).ok_or_else(|| unknown(name))?;
        operation(group)
    }

    /// The named group, for a handle.
    pub(crate) fn get(&self, name: &str) -> Result<Arc<ConsumerGroup>, TopicError> {
        self.with(name, |group| Ok(Arc::clone(group)))
    }

    /// Every group's name, sorted.
    pub(crate) fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .groups
            .read()
            .keys()
            .map(|name| name.to_string())
            .collect();
        names.sort_unstable();
        names
    }
}

fn check_name(name: &str) -> Result<(), TopicError> {
    if name.is_empty() || name.len() > GROUP_NAME_BYTES_MAX {
        return Err(TopicError::InvalidArgument(
            ArgumentError::LengthOutOfRange {
                field: "group",
                min: 1,
                max: GROUP_NAME_BYTES_MAX,
                got: name.len(),
            },
        ));
    }
    Ok(())
}

fn unknown(name: &str) -> TopicError {
    TopicError::UnknownGroup {
        group: name.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the group-count and name-length messages state the limits' actual numbers
    // rather than the constants' names.
    #[test]
    fn limit_messages_spell_out_the_numbers() {
        let full = TopicError::InvalidArgument(ArgumentError::Full {
            items: "groups",
            max: GROUPS_MAX as u64,
        });
        assert!(full.to_string().contains(&GROUPS_MAX.to_string()));
        let long = "g".repeat(GROUP_NAME_BYTES_MAX + 1);
        let message = check_name(&long).unwrap_err().to_string();
        assert!(
            message.contains(&GROUP_NAME_BYTES_MAX.to_string()),
            "{message}"
        );
        assert!(!message.contains("_MAX"), "{message}");
    }
}
