//! The durable store of the mailroom broker: topics and consumer groups on local disk,
//! crash-safe, with no external service.
//!
//! A [`Store`] is one directory of named topics. A [`DurableTopic`] offers the same
//! operations and rules as the in-memory `mailroom::topic::Topic`, over [`bytes::Bytes`]
//! payloads, and returns `Result` because disks fail.
//!
//! # Durability
//!
//! Every call that changes something (publish, create or delete a topic or group, and
//! each poll that creates an attempt, ack, nack and dead-letter) returns only once the
//! change is durable under the sync policy ([`log::SyncPolicy`]). With the default,
//! `Always`, that means after an `fdatasync`; concurrent callers share one (group commit),
//! including callers of the same consumer group: a group's lock is never held while its
//! records wait for the disk. Batches ([`DurableTopic::poll_batch`], `ack_batch`,
//! `nack_batch`) write all their records at once and wait for one sync. The deferred
//! forms (below) leave the wait to the caller but hand their answer out only after it.
//! After a restart the state is exactly what callers were told: a delivery in flight is
//! still in flight with the same attempt, attempts never go backwards, and no message is
//! dead-lettered twice.
//!
//! # Calls that can be awaited
//!
//! The hot calls also come in a `*_deferred` form ([`DurableTopic::publish_deferred`],
//! `publish_batch_deferred`, `poll_deferred`, `poll_as_deferred`, `poll_batch_deferred`,
//! `ack_deferred`, `ack_batch_deferred`, `nack_with_deferred`, `nack_batch_deferred`)
//! that does everything but wait for the disk and returns a [`Deferred`]: a
//! runtime-agnostic future (also with a blocking [`Deferred::wait`]) that hands out the
//! answer once it is durable. An async server can call them on its executor and
//! `.await` the answer instead of moving every call to a blocking thread; the blocking
//! methods are exactly `deferred(..)?.wait()`. What the call part may still block on is
//! listed in [`DurableTopic`]'s docs.
//!
//! # Faults
//!
//! A failed write or sync makes the affected log fail-stop: later writes return
//! [`StoreError::FailStopped`] until the store is reopened, and reopening recovers what
//! was confirmed. Damage that is not a torn tail ([`StoreError::Corrupt`]) stops the
//! open instead of being skipped. A second opener of the same directory gets
//! [`StoreError::Locked`].
//!
//! # Layout
//!
//! - [`storage`]: the narrow file-system trait, with the real [`storage::FsStorage`] and
//!   the fault-injecting [`storage::SimStorage`] for crash tests.
//! - [`record`]: how a record is framed on disk.
//! - [`log`]: the segmented, append-only log with a sparse index and group commit.
//! - [`Store`], [`DurableTopic`]: topics on two logs each (messages, and group records)
//!   plus a checkpoint of the groups, reusing `mailroom::group::GroupState` for every
//!   transition.
//!
//! The on-disk format and the recovery rules are in `docs/storage.md`.
//!
//! # Example
//!
//! ```
//! use bytes::Bytes;
//! use mailroom::topic::Nack;
//! use mailroom_store::{Store, StoreOptions};
//!
//! let dir = tempfile::tempdir()?;
//! let store = Store::open(dir.path(), StoreOptions::default())?;
//! store.create_topic("orders")?;
//! let orders = store.topic("orders")?;
//! orders.create_group("billing", 2)?;
//! orders.publish(Bytes::from_static(b"order 1"))?;
//!
//! // A delivery is in flight...
//! let first = orders.poll("billing")?.expect("one message");
//! assert_eq!(first.attempt, 1);
//! drop(store);
//! drop(orders);
//!
//! // ...and still is after a restart, with the same attempt.
//! let store = Store::open(dir.path(), StoreOptions::default())?;
//! let orders = store.topic("orders")?;
//! let again = orders.poll("billing")?.expect("still in flight");
//! assert_eq!(again.id(), first.id());
//!
//! // Two nacks use up both attempts: the message is dead-lettered, once.
//! assert_eq!(orders.nack("billing", again.id())?, Nack::Retry);
//! let second = orders.poll("billing")?.expect("attempt 2");
//! assert_eq!(orders.nack("billing", second.id())?, Nack::DeadLettered);
//! let dead = orders.dead_letters("billing")?;
//! assert_eq!((dead[0].offset, dead[0].attempts), (0, 2));
//! assert_eq!(dead[0].message, Bytes::from_static(b"order 1"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod clock;
mod deferred;
pub mod encoded_batch;
pub mod error;
mod groups;
pub mod idempotency;
pub mod log;
pub mod message;
pub mod record;
mod retention;
pub mod storage;
mod store;
mod topic;

pub use deferred::{Deferred, DeferredLeader, DeferredTurn};
pub use encoded_batch::EncodedBatch;
pub use error::StoreError;
pub use idempotency::{
    IdempotencyWindow, TopicIdempotency, IDEMPOTENCY_WINDOW_AGE_MS_MAX,
    IDEMPOTENCY_WINDOW_MESSAGES_MAX,
};
pub use message::NewMessage;
pub use retention::{Limit, Retention, RetentionRemoved, TopicRetention};
pub use store::names::{validate_name, NAME_BYTES_MAX};
pub use store::{
    FailureKind, Store, StoreOptions, TopicFailure, TopicRepaired, POLL_BATCH_BYTES_MAX_DEFAULT,
    TOPICS_MAX_DEFAULT, TOPIC_FILES_OPEN,
};
pub use topic::{
    AckedThenPolled, DeadLetterPage, DurableTopic, MessageDelivery, PollScope, SettledThenPolled,
    Stored, DEAD_LETTERS_PAGE_MAX,
};
