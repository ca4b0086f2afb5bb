//! Group records: the payloads of a topic's groups log.
//!
//! Every change to a topic's groups (create, delete, and each transition of the group
//! state machine) is one record in the groups log. The log frames and checksums each
//! record; this module gives the payload's layout, all integers little-endian:
//!
//! | kind | bytes after the kind byte |
//! |---|---|
//! | 1 `Created` | id u64, max_attempts u32, position u64, name length u8, name |
//! | 2 `Deleted` | id u64 |
//! | 3 `Delivered`, 4 `Acked`, 5 `Retried` | id u64, offset u64, attempt u32 |
//! | 6 `DeadLettered` | id u64, offset u64, attempt u32, then the message's payload |
//! | 7 `Moved` | id u64, position u64 |
//! | 8 `Delivered` (extended) | id u64, offset u64, attempt u32, flags u8 (1: lease, 2: consumer), lease_until_ms u64, consumer length u8, consumer |
//! | 9 `Failed` | id u64, offset u64, attempt u32, cause u8 (0 nack, 1 release, 2 reject, 3 lease expired), flags u8 (1: retry, 2: reason), retry_at_ms u64, at_ms u64, reason length u16, reason, then (if no retry: dead-lettered) the message's payload |
//! | 10 `Touched` | id u64, offset u64, attempt u32, lease_until_ms u64 |
//! | 11 `Redriven`, 12 `Purged` | id u64, offsets start u64, offsets end u64 |
//! | 13 `Created` (extended) | id u64, max_attempts u32, position u64, flags u8 (1: lease, 2: backoff), lease_ms u64, backoff kind u8 (0 fixed, 1 exponential), backoff a u64, backoff b u64, max_in_flight u32, name length u8, name |
//! | 14 `DeadLetterCopy` | id u64, offset u64, then the message's payload |
//!
//! Kinds 1 and 3–6 are the seed's and are still written whenever a change says nothing
//! more than the seed could (a seed group's create, delivery and ack), so data written
//! before the extensions opens unchanged and seed groups' records stay as small. Absent
//! optional fields are written as zeros.
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

use bytes::Bytes;
use mailroom::group::{Backoff, Change, DeliveryId, Failure, GroupConfig, GroupEvent};

use super::reader::{DecodeError, Reader};
use super::GroupId;
use crate::store::names::NAME_BYTES_MAX;
use mailroom::group::{CONSUMER_BYTES_MAX, REASON_BYTES_MAX};

const KIND_CREATED: u8 = 1;
const KIND_DELETED: u8 = 2;
const KIND_DELIVERED: u8 = 3;
const KIND_ACKED: u8 = 4;
const KIND_RETRIED: u8 = 5;
const KIND_DEAD_LETTERED: u8 = 6;
const KIND_MOVED: u8 = 7;
const KIND_DELIVERED_EX: u8 = 8;
const KIND_FAILED: u8 = 9;
const KIND_TOUCHED: u8 = 10;
const KIND_REDRIVEN: u8 = 11;
const KIND_PURGED: u8 = 12;
const KIND_CREATED_EX: u8 = 13;
const KIND_DEAD_LETTER_COPY: u8 = 14;

const FLAG_FIRST: u8 = 1;
const FLAG_SECOND: u8 = 2;

/// Bytes of an event record before a dead letter's payload: kind, id, offset, attempt.
const EVENT_BYTES: usize = 1 + 8 + 8 + 4;
const _: () = assert!(EVENT_BYTES == 21);
/// Bytes of a `Created` record before the name.
const CREATED_HEADER_BYTES: usize = 1 + 8 + 4 + 8 + 1;
const _: () = assert!(CREATED_HEADER_BYTES == 22);
const _: () = assert!(NAME_BYTES_MAX <= u8::MAX as usize);

/// One record of the groups log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupRecord {
    /// A group was created.
    Created {
        /// The group's id, unique within the topic for ever (names can be reused).
        id: GroupId,
        /// Its name.
        name: String,
        /// Deliveries allowed per message.
        max_attempts: u32,
        /// Where it starts reading.
        position: u64,
        /// Its settings beyond `max_attempts` (whose own field they must agree with).
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

impl GroupRecord {
    /// A record of `change` to group `id`, with `payload` for a dead letter.
    pub fn event(id: GroupId, change: Change, payload: Bytes) -> GroupRecord {
        GroupRecord::Event {
            id,
            change,
            payload,
        }
    }

    /// The id of the group this record is about.
    pub fn id(&self) -> GroupId {
        match self {
            GroupRecord::Created { id, .. }
            | GroupRecord::Deleted { id }
            | GroupRecord::Event { id, .. }
            | GroupRecord::Moved { id, .. }
            | GroupRecord::DeadLetterCopy { id, .. } => *id,
        }
    }

    /// Encodes the record.
    ///
    /// # Panics
    ///
    /// If a name, consumer or reason is longer than its limit, or a change that does not
    /// dead-letter carries a payload: callers validate those, and only dead letters have
    /// payloads.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(EVENT_BYTES);
        match self {
            GroupRecord::Created {
                id,
                name,
                max_attempts,
                position,
                config,
            } => {
                assert!(name.len() <= NAME_BYTES_MAX, "group name not validated");
                assert_eq!(config.max_attempts, *max_attempts, "config disagrees");
                let seed = *config == GroupConfig::new(*max_attempts);
                out.push(if seed { KIND_CREATED } else { KIND_CREATED_EX });
                out.extend_from_slice(&id.to_le_bytes());
                out.extend_from_slice(&max_attempts.to_le_bytes());
                out.extend_from_slice(&position.to_le_bytes());
                if !seed {
                    encode_config(config, &mut out);
                }
                out.push(name.len() as u8);
                out.extend_from_slice(name.as_bytes());
            }
            GroupRecord::Deleted { id } => {
                out.push(KIND_DELETED);
                out.extend_from_slice(&id.to_le_bytes());
            }
            GroupRecord::Event {
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
            GroupRecord::Moved { id, position } => {
                out.push(KIND_MOVED);
                out.extend_from_slice(&id.to_le_bytes());
                out.extend_from_slice(&position.to_le_bytes());
            }
            GroupRecord::DeadLetterCopy {
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

    /// Decodes a record. Never panics; the payload of a dead letter shares `bytes`.
    ///
    /// # Errors
    ///
    /// [`DecodeError`] if the bytes are not a well-formed record.
    pub fn decode(bytes: &Bytes) -> Result<GroupRecord, DecodeError> {
        let mut reader = Reader::new(bytes);
        let kind = reader.u8()?;
        let id = reader.u64()?;
        let record = match kind {
            KIND_CREATED | KIND_CREATED_EX => {
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
                GroupRecord::Created {
                    id,
                    name,
                    max_attempts,
                    position,
                    config,
                }
            }
            KIND_DELETED => GroupRecord::Deleted { id },
            KIND_MOVED => GroupRecord::Moved {
                id,
                position: reader.u64()?,
            },
            KIND_DEAD_LETTER_COPY => {
                let offset = reader.u64()?;
                let payload = bytes.slice(reader.position()..);
                reader.skip_rest();
                GroupRecord::DeadLetterCopy {
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
                GroupRecord::Event {
                    id,
                    change,
                    payload,
                }
            }
        };
        reader.finish("trailing bytes after group record")?;
        Ok(record)
    }
}

pub(super) fn encode_config(config: &GroupConfig, out: &mut Vec<u8>) {
    let mut flags = 0;
    if config.lease_ms.is_some() {
        flags |= FLAG_FIRST;
    }
    if config.backoff.is_some() {
        flags |= FLAG_SECOND;
    }
    out.push(flags);
    out.extend_from_slice(&config.lease_ms.unwrap_or(0).to_le_bytes());
    let (kind, a, b) = match config.backoff {
        None => (0, 0, 0),
        Some(Backoff::Fixed { delay_ms }) => (0, delay_ms, 0),
        Some(Backoff::Exponential { base_ms, cap_ms }) => (1, base_ms, cap_ms),
    };
    out.push(kind);
    out.extend_from_slice(&a.to_le_bytes());
    out.extend_from_slice(&b.to_le_bytes());
    out.extend_from_slice(&config.max_in_flight.to_le_bytes());
}

pub(super) fn decode_config(
    max_attempts: u32,
    reader: &mut Reader<'_>,
) -> Result<GroupConfig, DecodeError> {
    let flags = reader.u8()?;
    if flags & !(FLAG_FIRST | FLAG_SECOND) != 0 {
        return Err(DecodeError("unknown config flags"));
    }
    let lease_ms = reader.u64()?;
    let kind = reader.u8()?;
    let a = reader.u64()?;
    let b = reader.u64()?;
    let max_in_flight = reader.u32()?;
    let backoff = match (flags & FLAG_SECOND != 0, kind) {
        (false, _) => None,
        (true, 0) => Some(Backoff::Fixed { delay_ms: a }),
        (true, 1) => Some(Backoff::Exponential {
            base_ms: a,
            cap_ms: b,
        }),
        _ => return Err(DecodeError("unknown backoff kind")),
    };
    Ok(GroupConfig {
        max_attempts,
        lease_ms: (flags & FLAG_FIRST != 0).then_some(lease_ms),
        backoff,
        max_in_flight,
    })
}

fn push_delivery(kind: u8, id: GroupId, delivery: DeliveryId, out: &mut Vec<u8>) {
    out.push(kind);
    out.extend_from_slice(&id.to_le_bytes());
    out.extend_from_slice(&delivery.offset.to_le_bytes());
    out.extend_from_slice(&delivery.attempt.to_le_bytes());
}

fn encode_change(id: GroupId, change: &Change, out: &mut Vec<u8>) {
    if let Some(event) = change.seed_event() {
        let kind = match event {
            GroupEvent::Delivered(_) => KIND_DELIVERED,
            GroupEvent::Acked(_) => KIND_ACKED,
            GroupEvent::Retried(_) => KIND_RETRIED,
            GroupEvent::DeadLettered(_) => KIND_DEAD_LETTERED,
        };
        push_delivery(kind, id, event.delivery(), out);
        return;
    }
    match change {
        Change::Delivered {
            id: delivery,
            consumer,
            lease_until_ms,
        } => {
            push_delivery(KIND_DELIVERED_EX, id, *delivery, out);
            let consumer = consumer.as_deref();
            let flags = u8::from(lease_until_ms.is_some()) | (u8::from(consumer.is_some()) << 1);
            out.push(flags);
            out.extend_from_slice(&lease_until_ms.unwrap_or(0).to_le_bytes());
            let consumer = consumer.unwrap_or("");
            assert!(
                consumer.len() <= CONSUMER_BYTES_MAX,
                "consumer not validated"
            );
            out.push(consumer.len() as u8);
            out.extend_from_slice(consumer.as_bytes());
        }
        Change::Acked(delivery) => push_delivery(KIND_ACKED, id, *delivery, out),
        Change::Touched {
            id: delivery,
            lease_until_ms,
        } => {
            push_delivery(KIND_TOUCHED, id, *delivery, out);
            out.extend_from_slice(&lease_until_ms.to_le_bytes());
        }
        Change::Failed {
            id: delivery,
            cause,
            retry_at_ms,
            reason,
            at_ms,
        } => {
            push_delivery(KIND_FAILED, id, *delivery, out);
            out.push(match cause {
                Failure::Nack => 0,
                Failure::Release => 1,
                Failure::Reject => 2,
                Failure::LeaseExpired => 3,
            });
            let flags = u8::from(retry_at_ms.is_some()) | (u8::from(reason.is_some()) << 1);
            out.push(flags);
            out.extend_from_slice(&retry_at_ms.unwrap_or(0).to_le_bytes());
            out.extend_from_slice(&at_ms.to_le_bytes());
            let reason = reason.as_deref().unwrap_or("");
            assert!(reason.len() <= REASON_BYTES_MAX, "reason not validated");
            out.extend_from_slice(&(reason.len() as u16).to_le_bytes());
            out.extend_from_slice(reason.as_bytes());
        }
        Change::Redriven { offsets } | Change::Purged { offsets } => {
            let kind = if matches!(change, Change::Redriven { .. }) {
                KIND_REDRIVEN
            } else {
                KIND_PURGED
            };
            out.push(kind);
            out.extend_from_slice(&id.to_le_bytes());
            out.extend_from_slice(&offsets.start.to_le_bytes());
            out.extend_from_slice(&offsets.end.to_le_bytes());
        }
    }
}

fn decode_change(kind: u8, reader: &mut Reader<'_>) -> Result<Change, DecodeError> {
    let delivery = |reader: &mut Reader<'_>| -> Result<DeliveryId, DecodeError> {
        Ok(DeliveryId {
            offset: reader.u64()?,
            attempt: reader.u32()?,
        })
    };
    let change = match kind {
        KIND_DELIVERED | KIND_ACKED | KIND_RETRIED | KIND_DEAD_LETTERED => {
            let id = delivery(reader)?;
            Change::from(match kind {
                KIND_DELIVERED => GroupEvent::Delivered(id),
                KIND_ACKED => GroupEvent::Acked(id),
                KIND_RETRIED => GroupEvent::Retried(id),
                _ => GroupEvent::DeadLettered(id),
            })
        }
        KIND_DELIVERED_EX => {
            let id = delivery(reader)?;
            let flags = reader.u8()?;
            let lease = reader.u64()?;
            let len = usize::from(reader.u8()?);
            let consumer = utf8(reader.take(len)?, "consumer is not UTF-8")?;
            if flags & !(FLAG_FIRST | FLAG_SECOND) != 0
                || (flags & FLAG_SECOND == 0 && !consumer.is_empty())
            {
                return Err(DecodeError("bad delivery flags"));
            }
            Change::Delivered {
                id,
                consumer: (flags & FLAG_SECOND != 0).then_some(consumer),
                lease_until_ms: (flags & FLAG_FIRST != 0).then_some(lease),
            }
        }
        KIND_TOUCHED => Change::Touched {
            id: delivery(reader)?,
            lease_until_ms: reader.u64()?,
        },
        KIND_FAILED => decode_failed(delivery(reader)?, reader)?,
        KIND_REDRIVEN => Change::Redriven {
            offsets: reader.u64()?..reader.u64()?,
        },
        KIND_PURGED => Change::Purged {
            offsets: reader.u64()?..reader.u64()?,
        },
        _ => return Err(DecodeError("unknown group record kind")),
    };
    Ok(change)
}

fn decode_failed(id: DeliveryId, reader: &mut Reader<'_>) -> Result<Change, DecodeError> {
    let cause = match reader.u8()? {
        0 => Failure::Nack,
        1 => Failure::Release,
        2 => Failure::Reject,
        3 => Failure::LeaseExpired,
        _ => return Err(DecodeError("unknown failure cause")),
    };
    let flags = reader.u8()?;
    let retry_at = reader.u64()?;
    let at_ms = reader.u64()?;
    let len = usize::from(u16::from_le_bytes([reader.u8()?, reader.u8()?]));
    let reason = utf8(reader.take(len)?, "reason is not UTF-8")?;
    if flags & !(FLAG_FIRST | FLAG_SECOND) != 0 || (flags & FLAG_SECOND == 0 && !reason.is_empty())
    {
        return Err(DecodeError("bad failure flags"));
    }
    Ok(Change::Failed {
        id,
        cause,
        retry_at_ms: (flags & FLAG_FIRST != 0).then_some(retry_at),
        reason: (flags & FLAG_SECOND != 0).then_some(reason),
        at_ms,
    })
}

fn utf8(bytes: &[u8], what: &'static str) -> Result<String, DecodeError> {
    std::str::from_utf8(bytes)
        .map(str::to_owned)
        .map_err(|_| DecodeError(what))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn delivery(offset: u64, attempt: u32) -> DeliveryId {
        DeliveryId { offset, attempt }
    }

    fn any_config() -> impl Strategy<Value = GroupConfig> {
        let backoff = prop_oneof![
            Just(None),
            any::<u64>().prop_map(|delay_ms| Some(Backoff::Fixed { delay_ms })),
            (any::<u64>(), any::<u64>())
                .prop_map(|(base_ms, cap_ms)| Some(Backoff::Exponential { base_ms, cap_ms })),
        ];
        (any::<u32>(), any::<Option<u64>>(), backoff, any::<u32>()).prop_map(
            |(max_attempts, lease_ms, backoff, max_in_flight)| GroupConfig {
                max_attempts,
                lease_ms,
                backoff,
                max_in_flight,
            },
        )
    }

    fn any_change() -> impl Strategy<Value = Change> {
        let delivery = (any::<u64>(), any::<u32>()).prop_map(|(o, a)| delivery(o, a));
        let text = proptest::option::of("[a-z ]{0,20}");
        let cause = prop_oneof![
            Just(Failure::Nack),
            Just(Failure::Release),
            Just(Failure::Reject),
            Just(Failure::LeaseExpired),
        ];
        prop_oneof![
            (delivery.clone(), text.clone(), any::<Option<u64>>()).prop_map(
                |(id, consumer, lease_until_ms)| Change::Delivered {
                    id,
                    consumer,
                    lease_until_ms
                }
            ),
            delivery.clone().prop_map(Change::Acked),
            (delivery.clone(), any::<u64>())
                .prop_map(|(id, lease_until_ms)| Change::Touched { id, lease_until_ms }),
            (delivery, cause, any::<Option<u64>>(), text, any::<u64>()).prop_map(
                |(id, cause, retry_at_ms, reason, at_ms)| Change::Failed {
                    id,
                    cause,
                    retry_at_ms,
                    reason,
                    at_ms
                }
            ),
            (any::<u64>(), any::<u64>()).prop_map(|(a, b)| Change::Redriven { offsets: a..b }),
            (any::<u64>(), any::<u64>()).prop_map(|(a, b)| Change::Purged { offsets: a..b }),
        ]
    }

    fn any_record() -> impl Strategy<Value = GroupRecord> {
        let id = any::<u64>();
        prop_oneof![
            (
                id,
                "[A-Za-z0-9._-]{1,128}",
                any::<u64>(),
                any_config(),
                any::<bool>()
            )
                .prop_map(|(id, name, position, config, seed)| {
                    let config = if seed {
                        GroupConfig::new(config.max_attempts)
                    } else {
                        config
                    };
                    GroupRecord::Created {
                        id,
                        name,
                        max_attempts: config.max_attempts,
                        position,
                        config,
                    }
                }),
            id.prop_map(|id| GroupRecord::Deleted { id }),
            (
                id,
                any_change(),
                proptest::collection::vec(any::<u8>(), 0..64)
            )
                .prop_map(|(id, change, payload)| {
                    let payload = if change.dead_letters() {
                        Bytes::from(payload)
                    } else {
                        Bytes::new()
                    };
                    GroupRecord::Event {
                        id,
                        change,
                        payload,
                    }
                }),
            (id, any::<u64>()).prop_map(|(id, position)| GroupRecord::Moved { id, position }),
            (
                id,
                any::<u64>(),
                proptest::collection::vec(any::<u8>(), 0..64)
            )
                .prop_map(|(id, offset, payload)| GroupRecord::DeadLetterCopy {
                    id,
                    offset,
                    payload: Bytes::from(payload),
                }),
        ]
    }

    proptest! {
        // Proves every record decodes back to itself.
        #[test]
        fn records_round_trip(record in any_record()) {
            let bytes = Bytes::from(record.encode());
            prop_assert_eq!(GroupRecord::decode(&bytes), Ok(record));
        }

        // Proves the decoder never panics on arbitrary bytes and refuses every proper
        // prefix of a record that has fixed-width fields after the kind.
        #[test]
        fn decoder_refuses_garbage_and_prefixes(
            garbage in proptest::collection::vec(any::<u8>(), 0..64),
            record in any_record(),
        ) {
            let _ = GroupRecord::decode(&Bytes::from(garbage));
            let bytes = record.encode();
            let fixed = match &record {
                GroupRecord::Event { payload, .. }
                | GroupRecord::DeadLetterCopy { payload, .. } => bytes.len() - payload.len(),
                _ => bytes.len(),
            };
            for cut in 0..fixed {
                prop_assert!(GroupRecord::decode(&Bytes::copy_from_slice(&bytes[..cut])).is_err());
            }
        }
    }

    // Proves trailing bytes and unknown kinds are refused rather than ignored.
    #[test]
    fn trailing_bytes_and_unknown_kinds_are_refused() {
        let mut bytes = GroupRecord::Deleted { id: 3 }.encode();
        bytes.push(0);
        assert!(GroupRecord::decode(&Bytes::from(bytes)).is_err());
        let mut bytes = GroupRecord::Deleted { id: 3 }.encode();
        bytes[0] = 99;
        assert_eq!(
            GroupRecord::decode(&Bytes::from(bytes)),
            Err(DecodeError("unknown group record kind"))
        );
    }
}
