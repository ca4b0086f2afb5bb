//! The settings of a group (`GroupConfig` but `max_attempts`) as bytes: the tail of a
//! `Created` transition with settings (kind 13), and of each group in a checkpoint.

use mailroom::group::{Backoff, GroupConfig};

use super::{FLAG_FIRST, FLAG_SECOND};
use crate::groups::reader::{DecodeError, Reader};

pub(in crate::groups) fn encode_config(config: &GroupConfig, out: &mut Vec<u8>) {
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

pub(in crate::groups) fn decode_config(
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
