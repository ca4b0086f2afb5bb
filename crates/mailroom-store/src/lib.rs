//! The durable store of the mailroom broker: topics and consumer groups on local disk.
//!
//! (Being written. Layout: `storage` is the narrow file trait with a real and a
//! fault-injecting implementation; `record` frames bytes on disk; `log` is the segmented,
//! append-only log with group commit; `store`, `topic` and `groups` build durable topics and
//! consumer groups on top, reusing `mailroom::group::GroupState`.)

pub mod error;
pub mod storage;

pub use error::StoreError;
