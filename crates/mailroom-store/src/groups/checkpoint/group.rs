//! One group's entry in a checkpoint's body, as bytes (the layout is in the parent
//! module): its cursor, dead letters with their notes, settings, counters, window and
//! redriven messages.

use mailroom::group::{
    DeadLetterEntry, DeadLetterNote, GroupCounters, GroupSnapshot, Pause, Slot, SlotPhase,
};

use super::GroupCheckpoint;
use crate::groups::reader::{DecodeError, Reader};
use crate::groups::transition::{decode_config, encode_config};
use crate::store::names::NAME_BYTES_MAX;

pub(super) fn encode_group(group: &GroupCheckpoint, out: &mut Vec<u8>) {
    assert!(
        group.name.len() <= NAME_BYTES_MAX,
        "group name not validated"
    );
    assert_eq!(
        group.state.dead_letters.len(),
        group.dead_letter_records.len()
    );
    let state = &group.state;
    out.extend_from_slice(&group.id.to_le_bytes());
    out.extend_from_slice(&group.applied_through.to_le_bytes());
    out.extend_from_slice(&state.position.to_le_bytes());
    out.extend_from_slice(&state.attempt.to_le_bytes());
    out.extend_from_slice(&state.max_attempts.to_le_bytes());
    out.push(u8::from(state.in_flight));
    out.push(group.name.len() as u8);
    out.extend_from_slice(group.name.as_bytes());
    out.extend_from_slice(&(state.dead_letters.len() as u32).to_le_bytes());
    let notes = state.dead_letter_notes.iter();
    for ((entry, record), note) in state
        .dead_letters
        .iter()
        .zip(&group.dead_letter_records)
        .zip(notes)
    {
        out.extend_from_slice(&entry.offset.to_le_bytes());
        out.extend_from_slice(&entry.attempts.to_le_bytes());
        out.extend_from_slice(&record.to_le_bytes());
        out.extend_from_slice(&note.at_ms.to_le_bytes());
        out.push(u8::from(note.reason.is_some()));
        let reason = note.reason.as_deref().unwrap_or("");
        out.extend_from_slice(&(reason.len() as u16).to_le_bytes());
        out.extend_from_slice(reason.as_bytes());
    }
    encode_config(&state.config, out);
    let counters = &state.counters;
    for counter in [
        counters.redeliveries,
        counters.releases,
        counters.expired_leases,
        counters.redrives,
        counters.purged,
    ] {
        out.extend_from_slice(&counter.to_le_bytes());
    }
    out.extend_from_slice(&(state.window.len() as u32).to_le_bytes());
    for slot in &state.window {
        encode_slot(slot, out);
    }
    out.extend_from_slice(&(state.redriven.len() as u32).to_le_bytes());
    for slot in &state.redriven {
        encode_slot(slot, out);
    }
    out.extend_from_slice(&(group.redriven_records.len() as u32).to_le_bytes());
    for (offset, record) in &group.redriven_records {
        out.extend_from_slice(&offset.to_le_bytes());
        out.extend_from_slice(&record.to_le_bytes());
    }
    out.extend_from_slice(&state.frontier.to_le_bytes());
    out.extend_from_slice(&state.rewound_below.to_le_bytes());
    out.extend_from_slice(&state.attempt_floor.to_le_bytes());
    out.extend_from_slice(&state.attempts_high.to_le_bytes());
    let until_ms = state.pause.and_then(|pause| pause.until_ms);
    out.push(u8::from(state.pause.is_some()) | (u8::from(until_ms.is_some()) << 1));
    out.extend_from_slice(&until_ms.unwrap_or(0).to_le_bytes());
}

/// Reads what version 3 keeps for seek and pause (see the parent module).
fn decode_moves(state: &mut GroupSnapshot, reader: &mut Reader<'_>) -> Result<(), DecodeError> {
    state.frontier = reader.u64()?;
    state.rewound_below = reader.u64()?;
    state.attempt_floor = reader.u32()?;
    state.attempts_high = reader.u32()?;
    let flags = reader.u8()?;
    let until_ms = reader.u64()?;
    state.pause = match flags {
        0 if until_ms == 0 => None,
        1 if until_ms == 0 => Some(Pause { until_ms: None }),
        3 => Some(Pause {
            until_ms: Some(until_ms),
        }),
        _ => return Err(DecodeError("bad pause flags")),
    };
    Ok(())
}

/// Bounds for a group read from a checkpoint older than version 3, which kept no
/// highest attempt: every delivery after a message's first is counted as a redelivery,
/// so no attempt number exceeds one more than the redeliveries (and without releases or
/// redrives, `max_attempts`).
fn older_bounds(state: &mut GroupSnapshot) {
    let redeliveries = u32::try_from(state.counters.redeliveries).unwrap_or(u32::MAX);
    state.attempts_high = state
        .attempts_high
        .max(state.max_attempts)
        .max(redeliveries.saturating_add(1));
    state.frontier = state.position.saturating_add(state.window.len() as u64);
}

fn encode_slot(slot: &Slot, out: &mut Vec<u8>) {
    out.extend_from_slice(&slot.offset.to_le_bytes());
    out.extend_from_slice(&slot.attempt.to_le_bytes());
    out.extend_from_slice(&slot.failures.to_le_bytes());
    let (phase, time, consumer) = match &slot.phase {
        SlotPhase::Ready { not_before_ms } => (0, Some(*not_before_ms), None),
        SlotPhase::InFlight {
            consumer,
            lease_until_ms,
        } => (1, *lease_until_ms, consumer.as_deref()),
        SlotPhase::Done => (2, None, None),
    };
    out.push(phase);
    out.extend_from_slice(&time.unwrap_or(0).to_le_bytes());
    out.push(u8::from(time.is_some()) | (u8::from(consumer.is_some()) << 1));
    let consumer = consumer.unwrap_or("");
    out.push(consumer.len() as u8);
    out.extend_from_slice(consumer.as_bytes());
}

fn decode_slot(reader: &mut Reader<'_>) -> Result<Slot, DecodeError> {
    let offset = reader.u64()?;
    let attempt = reader.u32()?;
    let failures = reader.u32()?;
    let phase = reader.u8()?;
    let time = reader.u64()?;
    let flags = reader.u8()?;
    let len = usize::from(reader.u8()?);
    let consumer = std::str::from_utf8(reader.take(len)?)
        .map_err(|_| DecodeError("consumer is not UTF-8"))?
        .to_owned();
    let has_time = flags & 1 != 0;
    let has_consumer = flags & 2 != 0;
    if flags > 3 || (!has_consumer && !consumer.is_empty()) {
        return Err(DecodeError("bad slot flags"));
    }
    let phase = match (phase, has_time, has_consumer) {
        (0, true, false) => SlotPhase::Ready {
            not_before_ms: time,
        },
        (1, _, _) => SlotPhase::InFlight {
            consumer: has_consumer.then_some(consumer),
            lease_until_ms: has_time.then_some(time),
        },
        (2, false, false) => SlotPhase::Done,
        _ => return Err(DecodeError("bad slot phase")),
    };
    Ok(Slot {
        offset,
        attempt,
        failures,
        phase,
    })
}

pub(super) fn decode_group(
    reader: &mut Reader<'_>,
    version: u8,
) -> Result<GroupCheckpoint, DecodeError> {
    let id = reader.u64()?;
    let applied_through = reader.u64()?;
    let position = reader.u64()?;
    let attempt = reader.u32()?;
    let max_attempts = reader.u32()?;
    let in_flight = match reader.u8()? {
        0 => false,
        1 => true,
        _ => return Err(DecodeError("in_flight is neither 0 nor 1")),
    };
    let name_len = usize::from(reader.u8()?);
    let name = std::str::from_utf8(reader.take(name_len)?)
        .map_err(|_| DecodeError("group name is not UTF-8"))?
        .to_owned();
    let dead_count = reader.u32()?;
    let mut dead_letters = Vec::new();
    let mut dead_letter_records = Vec::new();
    let mut notes = Vec::new();
    for _ in 0..dead_count {
        dead_letters.push(DeadLetterEntry {
            offset: reader.u64()?,
            attempts: reader.u32()?,
        });
        dead_letter_records.push(reader.u64()?);
        if version >= 2 {
            notes.push(decode_note(reader)?);
        }
    }
    let mut state = GroupSnapshot::basic(position, attempt, in_flight, max_attempts, dead_letters);
    let mut redriven_records = Vec::new();
    if version >= 2 {
        state.dead_letter_notes = notes;
        state.config = decode_config(max_attempts, reader)?;
        let mut counters = [0u64; 5];
        for counter in &mut counters {
            *counter = reader.u64()?;
        }
        let [redeliveries, releases, expired_leases, redrives, purged] = counters;
        state.counters = GroupCounters {
            redeliveries,
            releases,
            expired_leases,
            redrives,
            purged,
        };
        state.window = (0..reader.u32()?)
            .map(|_| decode_slot(reader))
            .collect::<Result<_, _>>()?;
        state.redriven = (0..reader.u32()?)
            .map(|_| decode_slot(reader))
            .collect::<Result<_, _>>()?;
        for _ in 0..reader.u32()? {
            redriven_records.push((reader.u64()?, reader.u64()?));
        }
    }
    if version >= 3 {
        decode_moves(&mut state, reader)?;
    } else {
        older_bounds(&mut state);
    }
    Ok(GroupCheckpoint {
        id,
        name,
        applied_through,
        state,
        dead_letter_records,
        redriven_records,
    })
}

fn decode_note(reader: &mut Reader<'_>) -> Result<DeadLetterNote, DecodeError> {
    let at_ms = reader.u64()?;
    let has_reason = reader.u8()?;
    let len = usize::from(u16::from_le_bytes([reader.u8()?, reader.u8()?]));
    let reason = std::str::from_utf8(reader.take(len)?)
        .map_err(|_| DecodeError("reason is not UTF-8"))?
        .to_owned();
    let reason = match has_reason {
        0 if reason.is_empty() => None,
        1 => Some(reason),
        _ => return Err(DecodeError("bad reason flag")),
    };
    Ok(DeadLetterNote { reason, at_ms })
}
