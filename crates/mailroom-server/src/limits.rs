//! The open-file budget: raising the soft `RLIMIT_NOFILE` to the hard limit at start,
//! and sizing the topic and connection caps so that they fit in it.
//!
//! Every open topic holds [`TOPIC_FILES_OPEN`] file descriptors for good and every
//! connection one. A server that runs out answers nobody (not even `/healthz`), and the
//! store could not reopen its topics after a restart. So the caps are checked before a
//! descriptor is spent, and their defaults leave a reserve ([`FILES_RESERVED`] plus the
//! [`REJECTIONS_MAX`] answers past the connection cap) for what the server opens for a
//! moment: its listener, the store's lock and directories, segment rolls, checkpoint and
//! settings files, retention's listings.
//!
//! By default connections get a quarter of what is left after the reserve (at most
//! [`CONNECTIONS_MAX`]) and topics the rest. `--max-connections` or `--max-topics`
//! set either; the other default takes what the set one leaves.

pub use mailroom_store::TOPIC_FILES_OPEN;

pub use crate::listener::{CONNECTIONS_MAX, REJECTIONS_MAX};

/// File descriptors the defaults leave free for what the server opens for a moment.
pub const FILES_RESERVED: usize = 64;
/// The open-file limit assumed where the system sets none (`RLIM_INFINITY`).
pub const FILES_MAX_UNLIMITED: u64 = 1 << 20;
/// The largest `--max-topics` accepted.
pub const TOPICS_MAX_LIMIT: usize = 1_000_000;

/// The caps in force and the open-file limit they were sized from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileBudget {
    /// The process's soft open-file limit.
    pub files_max: u64,
    /// The most connections served at once.
    pub connections_max: usize,
    /// The most topics the store holds.
    pub topics_max: usize,
}

impl FileBudget {
    /// The caps for an open-file limit of `files_max`, with either cap fixed by the
    /// settings (`Some`) or sized from what the other leaves (`None`). Each is at least
    /// 1, so a server with a tiny limit still serves.
    ///
    /// ```
    /// use mailroom_server::limits::{FileBudget, FILES_RESERVED, REJECTIONS_MAX, TOPIC_FILES_OPEN};
    /// let budget = FileBudget::sized(1024, None, None);
    /// let free = 1024 - (FILES_RESERVED + REJECTIONS_MAX);
    /// assert_eq!(budget.connections_max, free / 4);
    /// assert_eq!(budget.topics_max, (free - free / 4) / TOPIC_FILES_OPEN);
    /// assert!(budget.fits());
    /// assert_eq!(FileBudget::sized(1024, Some(10), None).topics_max, (free - 10) / TOPIC_FILES_OPEN);
    /// ```
    pub fn sized(files_max: u64, connections: Option<usize>, topics: Option<usize>) -> FileBudget {
        let free = usize::try_from(files_max)
            .unwrap_or(usize::MAX)
            .saturating_sub(FILES_RESERVED + REJECTIONS_MAX);
        let connections_max = connections.unwrap_or_else(|| {
            let left = match topics {
                Some(topics) => free.saturating_sub(topics.saturating_mul(TOPIC_FILES_OPEN)),
                None => free / 4,
            };
            left.clamp(1, CONNECTIONS_MAX)
        });
        let topics_max = topics.unwrap_or_else(|| {
            (free.saturating_sub(connections_max) / TOPIC_FILES_OPEN).clamp(1, TOPICS_MAX_LIMIT)
        });
        FileBudget {
            files_max,
            connections_max,
            topics_max,
        }
    }

    /// Whether the caps and the reserve fit in the open-file limit; a budget that does
    /// not (caps set by hand) can run out of descriptors before a cap refuses anything.
    pub fn fits(&self) -> bool {
        let needed = self
            .topics_max
            .saturating_mul(TOPIC_FILES_OPEN)
            .saturating_add(self.connections_max)
            .saturating_add(FILES_RESERVED + REJECTIONS_MAX);
        u64::try_from(needed).unwrap_or(u64::MAX) <= self.files_max
    }
}

/// Raises the soft open-file limit to the hard limit and returns the soft limit in force
/// afterwards (or the one before, when raising is not allowed or fails: the caps are then
/// sized from what the process really has).
pub fn raise_open_files_limit() -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let limit = getrlimit(Resource::Nofile);
    let current = limit.current.unwrap_or(FILES_MAX_UNLIMITED);
    if limit.current.is_some() && limit.current != limit.maximum {
        let raised = rustix::process::Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        };
        match setrlimit(Resource::Nofile, raised) {
            Ok(()) => return limit.maximum.unwrap_or(FILES_MAX_UNLIMITED),
            Err(error) => {
                tracing::warn!(%error, current, "cannot raise the open-file limit");
            }
        }
    }
    current
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the defaults always fit the limit they were sized from, from tiny limits to
    // the unlimited one, and that each cap stays at least 1.
    #[test]
    fn default_caps_fit_their_limit() {
        for files_max in [100, 256, 1024, 4096, 20_000, 65_536, FILES_MAX_UNLIMITED] {
            let budget = FileBudget::sized(files_max, None, None);
            assert!(budget.fits(), "{budget:?}");
            assert!(budget.connections_max >= 1 && budget.topics_max >= 1);
            assert!(budget.connections_max <= CONNECTIONS_MAX);
        }
        let tiny = FileBudget::sized(10, None, None);
        assert_eq!((tiny.connections_max, tiny.topics_max), (1, 1));
        assert!(!tiny.fits());
    }

    // Proves a cap set by hand is kept, and the other default takes what it leaves.
    #[test]
    fn a_set_cap_is_kept_and_the_other_fills_the_rest() {
        let budget = FileBudget::sized(20_000, None, Some(1000));
        assert_eq!(budget.topics_max, 1000);
        assert_eq!(budget.connections_max, CONNECTIONS_MAX);
        let budget = FileBudget::sized(2000, Some(100), None);
        assert_eq!(budget.connections_max, 100);
        assert_eq!(budget.topics_max, (2000 - 80 - 100) / TOPIC_FILES_OPEN);
        assert!(!FileBudget::sized(2000, Some(100), Some(1000)).fits());
    }
}
