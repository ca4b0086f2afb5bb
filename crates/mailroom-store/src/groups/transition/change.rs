//! The transitions of the group state machine (`mailroom::group::Change`) as bytes: the
//! kinds and fields of `Event` transitions (see the table in the parent module).

use mailroom::group::{Change, DeliveryId, Failure, GroupEvent};
use mailroom::group::{CONSUMER_BYTES_MAX, REASON_BYTES_MAX};

use super::{
    FLAG_FIRST, FLAG_SECOND, KIND_ACKED, KIND_DEAD_LETTERED, KIND_DELIVERED, KIND_DELIVERED_OWNED,
    KIND_FAILED, KIND_PAUSED, KIND_PURGED, KIND_REDRIVEN, KIND_RESUMED, KIND_RETRIED, KIND_SEEKED,
    KIND_TOUCHED,
};
use crate::groups::reader::{DecodeError, Reader};
use crate::groups::GroupId;

fn push_delivery(kind: u8, id: GroupId, delivery: DeliveryId, out: &mut Vec<u8>) {
    out.push(kind);
    out.extend_from_slice(&id.to_le_bytes());
    out.extend_from_slice(&delivery.offset.to_le_bytes());
    out.extend_from_slice(&delivery.attempt.to_le_bytes());
}

pub(super) fn encode_change(id: GroupId, change: &Change, out: &mut Vec<u8>) {
    if let Some(event) = change.basic_event() {
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
            push_delivery(KIND_DELIVERED_OWNED, id, *delivery, out);
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
        Change::Seeked { position } => {
            out.push(KIND_SEEKED);
            out.extend_from_slice(&id.to_le_bytes());
            out.extend_from_slice(&position.to_le_bytes());
        }
        Change::Paused { until_ms } => {
            out.push(KIND_PAUSED);
            out.extend_from_slice(&id.to_le_bytes());
            out.push(u8::from(until_ms.is_some()));
            out.extend_from_slice(&until_ms.unwrap_or(0).to_le_bytes());
        }
        Change::Resumed => {
            out.push(KIND_RESUMED);
            out.extend_from_slice(&id.to_le_bytes());
        }
    }
}

pub(super) fn decode_change(kind: u8, reader: &mut Reader<'_>) -> Result<Change, DecodeError> {
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
        KIND_DELIVERED_OWNED => {
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
        KIND_SEEKED => Change::Seeked {
            position: reader.u64()?,
        },
        KIND_PAUSED => {
            let flags = reader.u8()?;
            let until_ms = reader.u64()?;
            match flags {
                0 if until_ms == 0 => Change::Paused { until_ms: None },
                FLAG_FIRST => Change::Paused {
                    until_ms: Some(until_ms),
                },
                _ => return Err(DecodeError("bad pause flags")),
            }
        }
        KIND_RESUMED => Change::Resumed,
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
