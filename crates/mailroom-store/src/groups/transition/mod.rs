//! Group transitions: what the records of a topic's groups log hold.
//!
//! Every change to a topic's groups (create, delete, and each change of the group state
//! machine) is one [`GroupTransition`], written as the payload of one record of the
//! groups log. The log frames and checksums each record (see `crate::record`); this
//! module gives the layout of the transition inside, all integers little-endian:
//!
//! | kind | bytes after the kind byte |
//! |---|---|
//! | 1 `Created` | id u64, max_attempts u32, position u64, name length u8, name |
//! | 2 `Deleted` | id u64 |
//! | 3 `Delivered`, 4 `Acked`, 5 `Retried` | id u64, offset u64, attempt u32 |
//! | 6 `DeadLettered` | id u64, offset u64, attempt u32, then the message's payload |
//! | 7 `Moved` | id u64, position u64 |
//! | 8 `Delivered` (with a lease or consumer) | id u64, offset u64, attempt u32, flags u8 (1: lease, 2: consumer), lease_until_ms u64, consumer length u8, consumer |
//! | 9 `Failed` | id u64, offset u64, attempt u32, cause u8 (0 nack, 1 release, 2 reject, 3 lease expired), flags u8 (1: retry, 2: reason), retry_at_ms u64, at_ms u64, reason length u16, reason, then (if no retry: dead-lettered) the message's payload |
//! | 10 `Touched` | id u64, offset u64, attempt u32, lease_until_ms u64 |
//! | 11 `Redriven`, 12 `Purged` | id u64, offsets start u64, offsets end u64 |
//! | 13 `Created` (with settings) | id u64, max_attempts u32, position u64, flags u8 (1: lease, 2: backoff), lease_ms u64, backoff kind u8 (0 fixed, 1 exponential), backoff a u64, backoff b u64, max_in_flight u32, name length u8, name |
//! | 14 `DeadLetterCopy` | id u64, offset u64, then the message's payload |
//! | 15 `Seeked` | id u64, position u64 |
//! | 16 `Paused` | id u64, flags u8 (1: until), until_ms u64 |
//! | 17 `Resumed` | id u64 |
//!
//! Kinds 1 and 3–6 are the basic kinds, still written whenever a change says nothing
//! more than a basic event could (the create, deliveries and acks of a group with every
//! setting unset), so logs written before kinds 7–17 existed open unchanged and such
//! groups' transitions stay as small. Absent optional fields are written as zeros.
//! Kinds 15–17 (seek, pause, resume) were added last; a log without them reads as
//! before.
//!
//! `DeadLettered` carries a copy of the message so that a dead letter outlives the
//! retention of the message log. `Moved` is the store's own transition: a group whose
//! cursor points below the retained log (retention with `keep_unconsumed` off) jumps to
//! the log's start, dropping any delivery of a deleted message.
//!
//! `DeadLetterCopy` is written by a compacting checkpoint (see `compaction.rs`): a fresh
//! copy of the payload of a dead letter (or an unfinished redriven message) whose own
//! record lies far back, so that old groups-log segments can be deleted. It changes no
//! group state; replay skips it, and only a pointer in a checkpoint ever names it.

mod change;
mod config;
#[cfg(test)]
mod tests;

use bytes::Bytes;
use mailroom::group::{Change, GroupConfig};

use self::change::{decode_change, encode_change};
pub(super) use self::config::{decode_config, encode_config};
use super::reader::{DecodeError, Reader};
use super::GroupId;
use crate::store::names::NAME_BYTES_MAX;

const KIND_CREATED: u8 = 1;
const KIND_DELETED: u8 = 2;
const KIND_DELIVERED: u8 = 3;
const KIND_ACKED: u8 = 4;
const KIND_RETRIED: u8 = 5;
const KIND_DEAD_LETTERED: u8 = 6;
const KIND_MOVED: u8 = 7;
const KIND_DELIVERED_OWNED: u8 = 8;
const KIND_FAILED: u8 = 9;
const KIND_TOUCHED: u8 = 10;
const KIND_REDRIVEN: u8 = 11;
const KIND_PURGED: u8 = 12;
const KIND_CREATED_WITH_SETTINGS: u8 = 13;
const KIND_DEAD_LETTER_COPY: u8 = 14;
const KIND_SEEKED: u8 = 15;
const KIND_PAUSED: u8 = 16;
const KIND_RESUMED: u8 = 17;

const FLAG_FIRST: u8 = 1;
const FLAG_SECOND: u8 = 2;

/// Bytes of an event transition before a dead letter's payload: kind, id, offset, attempt.
const EVENT_BYTES: usize = 1 + 8 + 8 + 4;
const _: () = assert!(EVENT_BYTES == 21);
/// Bytes of a `Created` transition before the name.
const CREATED_HEADER_BYTES: usize = 1 + 8 + 4 + 8 + 1;
const _: () = assert!(CREATED_HEADER_BYTES == 22);
const _: () = assert!(NAME_BYTES_MAX <= u8::MAX as usize);

/// One change to a topic's groups: the payload of one record of the groups log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupTransition {
    /// A group was created.
    Created {
        /// The group's id, unique within the topic for ever (names can be reused).
        id: GroupId,
        /// Its name.
        name: String,
        /// Failures allowed per message (`GroupConfig::max_attempts`).
        max_attempts: u32,
        /// Where it starts reading.
        position: u64,
        /// Its settings, `max_attempts` included (which must agree with its own field).
        config: GroupConfig,
    },
    /// A group was deleted.
    Deleted {
        /// The group's id.
        id: GroupId,
    },
    /// A transition of the group state machine.
    Event {
        /// The group's id.
        id: GroupId,
        /// The transition.
        change: Change,
        /// For a change that dead-letters, a copy of the message; empty otherwise.
        payload: Bytes,
    },
    /// The group's cursor jumped to `position` (its old position was no longer retained).
    Moved {
        /// The group's id.
        id: GroupId,
        /// The new position.
        position: u64,
    },
    /// A copy of the payload of message `offset`, a dead letter (or redriven message) of
    /// group `id`, written so that the record it was first kept in can be deleted.
    DeadLetterCopy {
        /// The group's id.
        id: GroupId,
        /// The message's offset in the message log.
        offset: u64,
        /// The message's payload.
        payload: Bytes,
    },
}

impl GroupTransition {
    /// The transition of `change` to group `id`, with `payload` for a dead letter.
    pub fn event(id: GroupId, change: Change, payload: Bytes) -> GroupTransition {
        GroupTransition::Event {
            id,
            change,
            payload,
        }
    }

    /// The id of the group this transition is about.
    pub fn id(&self) -> GroupId {
        match self {
            GroupTransition::Created { id, .. }
            | GroupTransition::Deleted { id }
            | GroupTransition::Event { id, .. }
            | GroupTransition::Moved { id, .. }
            | GroupTransition::DeadLetterCopy { id, .. } => *id,
        }
    }

    /// Encodes the transition.
    ///
    /// # Panics
    ///
    /// If a name, consumer or reason is longer than its limit, or a change that does not
    /// dead-letter carries a payload: callers validate those, and only dead letters have
    /// payloads.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(EVENT_BYTES);
        match self {
            GroupTransition::Created {
                id,
                name,
                max_attempts,
                position,
                config,
            } => {
                assert!(name.len() <= NAME_BYTES_MAX, "group name not validated");
                assert_eq!(config.max_attempts, *max_attempts, "config disagrees");
                let basic = *config == GroupConfig::new(*max_attempts);
                out.push(if basic {
                    KIND_CREATED
                } else {
                    KIND_CREATED_WITH_SETTINGS
                });
                out.extend_from_slice(&id.to_le_bytes());
                out.extend_from_slice(&max_attempts.to_le_bytes());
                out.extend_from_slice(&position.to_le_bytes());
                if !basic {
                    encode_config(config, &mut out);
                }
                out.push(name.len() as u8);
                out.extend_from_slice(name.as_bytes());
            }
            GroupTransition::Deleted { id } => {
                out.push(KIND_DELETED);
                out.extend_from_slice(&id.to_le_bytes());
            }
            GroupTransition::Event {
                id,
                change,
                payload,
            } => {
                assert!(
                    change.dead_letters() || payload.is_empty(),
                    "only a dead letter carries a payload"
                );
                encode_change(*id, change, &mut out);
                out.extend_from_slice(payload);
            }
            GroupTransition::Moved { id, position } => {
                out.push(KIND_MOVED);
                out.extend_from_slice(&id.to_le_bytes());
                out.extend_from_slice(&position.to_le_bytes());
            }
            GroupTransition::DeadLetterCopy {
                id,
                offset,
                payload,
            } => {
                out.push(KIND_DEAD_LETTER_COPY);
                out.extend_from_slice(&id.to_le_bytes());
                out.extend_from_slice(&offset.to_le_bytes());
                out.extend_from_slice(payload);
            }
        }
        out
    }

    /// Decodes a transition. Never panics; the payload of a dead letter shares `bytes`.
    ///
    /// # Errors
    ///
    /// [`DecodeError`] if the bytes are not a well-formed transition.
    pub fn decode(bytes: &Bytes) -> Result<GroupTransition, DecodeError> {
        let mut reader = Reader::new(bytes);
        let kind = reader.u8()?;
        let id = reader.u64()?;
        let transition = match kind {
            KIND_CREATED | KIND_CREATED_WITH_SETTINGS => {
                let max_attempts = reader.u32()?;
                let position = reader.u64()?;
                let config = if kind == KIND_CREATED {
                    GroupConfig::new(max_attempts)
                } else {
                    decode_config(max_attempts, &mut reader)?
                };
                let name_len = usize::from(reader.u8()?);
                let name = reader.take(name_len)?;
                let name = std::str::from_utf8(name)
                    .map_err(|_| DecodeError("group name is not UTF-8"))?
                    .to_owned();
                GroupTransition::Created {
                    id,
                    name,
                    max_attempts,
                    position,
                    config,
                }
            }
            KIND_DELETED => GroupTransition::Deleted { id },
            KIND_MOVED => GroupTransition::Moved {
                id,
                position: reader.u64()?,
            },
            KIND_DEAD_LETTER_COPY => {
                let offset = reader.u64()?;
                let payload = bytes.slice(reader.position()..);
                reader.skip_rest();
                GroupTransition::DeadLetterCopy {
                    id,
                    offset,
                    payload,
                }
            }
            _ => {
                let change = decode_change(kind, &mut reader)?;
                let payload = if change.dead_letters() {
                    let payload = bytes.slice(reader.position()..);
                    reader.skip_rest();
                    payload
                } else {
                    Bytes::new()
                };
                GroupTransition::Event {
                    id,
                    change,
                    payload,
                }
            }
        };
        reader.finish("trailing bytes after group record")?;
        Ok(transition)
    }
}
