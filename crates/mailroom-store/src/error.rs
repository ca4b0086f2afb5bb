//! The store's errors.

use std::path::PathBuf;

use mailroom::topic::TopicError;

/// Why a store operation failed.
///
/// Rule violations ([`StoreError::Topic`]) changed nothing. I/O failures say which file
/// and what was being done. After a failed sync the store is fail-stop: every later
/// write returns [`StoreError::FailStopped`] rather than guess what reached the disk.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The operation broke a topic rule (unknown group, not owned, ...). Nothing changed.
    #[error(transparent)]
    Topic(#[from] TopicError),
    /// No topic of that name exists.
    #[error("unknown topic {topic:?}")]
    UnknownTopic {
        /// The name asked for.
        topic: String,
    },
    /// A topic or group name is empty, too long, or has characters outside
    /// `[A-Za-z0-9._-]`.
    #[error("invalid name {name:?}: {reason}")]
    InvalidName {
        /// The name given.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The store holds [`StoreOptions::topics_max`](crate::StoreOptions::topics_max)
    /// topics already, so a new one is refused before any of its files is made.
    #[error("the store holds {topics_max} topics, its limit (topics_max); delete one first")]
    TopicLimit {
        /// The store's limit.
        topics_max: usize,
    },
    /// An argument or option was out of range.
    #[error("invalid argument: {reason}")]
    InvalidArgument {
        /// What was wrong.
        reason: String,
    },
    /// Another process (or another `Store` in this one) holds the directory's lock file.
    #[error("{path} is locked by another mailroom store")]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
    /// A file failed its checks somewhere other than a torn tail: a checksum mismatch, a
    /// bad magic number, an impossible length. Recovery stops rather than skip data.
    #[error("corrupt data in {path} at byte {position}: {reason}")]
    Corrupt {
        /// The damaged file.
        path: PathBuf,
        /// Where in it the damage starts.
        position: u64,
        /// What check failed.
        reason: String,
    },
    /// An I/O call failed.
    #[error("{operation} {path}: {source}")]
    Io {
        /// What the store was doing ("write", "fdatasync", "open", ...).
        operation: &'static str,
        /// The file or directory involved.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The topic is failed: it could not be opened (a damaged or unreadable file; see
    /// [`Store::topic_failures`](crate::Store::topic_failures)) or is being reopened.
    /// Every other topic keeps serving. Damage is cured by
    /// [`Store::repair_topic`](crate::Store::repair_topic), an unreadable file or a full
    /// disk by [`Store::recover_topic`](crate::Store::recover_topic) once fixed.
    #[error("topic {topic:?} is failed: {reason}")]
    TopicFailed {
        /// The topic.
        topic: String,
        /// Where and why it failed.
        reason: String,
    },
    /// An earlier sync failed, so the store refuses writes until it is reopened.
    #[error("the store stopped accepting writes after a failed sync: {reason}")]
    FailStopped {
        /// The first failure, as it was reported.
        reason: String,
    },
}
