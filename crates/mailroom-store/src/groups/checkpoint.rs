//! Checkpoints: every group's state at one moment, so opening replays only the group
//! records written after it.
//!
//! The file `CHECKPOINT` in a topic's directory is replaced atomically: the new contents
//! go to `CHECKPOINT.tmp`, which is synced, renamed over `CHECKPOINT`, and the directory
//! is synced. A crash leaves either the old or the new file whole; a left-over
//! `CHECKPOINT.tmp` is an unfinished write and is removed on open.
//!
//! Layout, all integers little-endian:
//!
//! | bytes | field |
//! |---|---|
//! | 8 | magic `MRGRPCK2` (version 2; `MRGRPCK1`, version 1, is still read) |
//! | 8 | body length |
//! | 4 | CRC32C of the body |
//! | 4 | reserved, 0 |
//! | .. | body |
//!
//! The body: `registry_through` u64, `next_group_id` u64, group count u32, then per
//! group: id u64, `applied_through` u64, position u64, attempt u32, max_attempts u32,
//! in_flight u8, name length u8, name, dead-letter count u32, then per dead letter:
//! offset u64, attempts u32, record offset u64 (where the record holding its payload sits
//! in the groups log: the one that dead-lettered it, or a compaction's copy).
//!
//! Version 2 adds, per dead letter after its record offset: at_ms u64, reason flag u8,
//! reason length u16, reason; and per group after its dead letters: the settings (as in
//! an extended `Created` record: flags u8, lease_ms u64, backoff kind u8, two backoff
//! u64s, max_in_flight u32), five counters u64 (redeliveries, releases, expired leases,
//! redrives, purged), the window (count u32, then slots), the redriven messages below
//! the position (count u32, then slots) and the records of unfinished redriven messages
//! (count u32, then per message its offset u64 and the groups-log offset u64 of the
//! record that holds its payload; a redriven message may also sit in the window). A slot
//! is: offset u64, attempt u32, failures u32, phase u8 (0 ready, 1 in flight, 2 done),
//! time u64 (not-before or lease deadline), flags u8 (1: lease, 2: consumer), consumer
//! length u8, consumer. A version 1 file holds seed groups only and is read as such.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mailroom::group::{
    DeadLetterEntry, DeadLetterNote, GroupCounters, GroupSnapshot, Slot, SlotPhase,
};

use super::reader::{DecodeError, Reader};
use super::record::{decode_config, encode_config};
use super::GroupId;
use crate::storage::Storage;
use crate::store::names::NAME_BYTES_MAX;
use crate::StoreError;

/// The checkpoint's file name in a topic directory.
pub const CHECKPOINT_FILE: &str = "CHECKPOINT";
/// The name of a checkpoint being written.
pub const CHECKPOINT_TMP_FILE: &str = "CHECKPOINT.tmp";

const MAGIC_V1: [u8; 8] = *b"MRGRPCK1";
const MAGIC: [u8; 8] = *b"MRGRPCK2";
const HEADER_BYTES: usize = 8 + 8 + 4 + 4;
const _: () = assert!(HEADER_BYTES == 24);
/// The largest checkpoint body accepted on read, so a damaged length cannot ask for an
/// absurd allocation.
pub const CHECKPOINT_BYTES_MAX: u64 = 1 << 30;

/// Every group of a topic at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// Every `Created`/`Deleted` record below this groups-log offset is reflected here;
    /// none at or above it is.
    pub registry_through: u64,
    /// The next group id to hand out (ids are never reused).
    pub next_group_id: GroupId,
    /// The live groups.
    pub groups: Vec<GroupCheckpoint>,
}

/// One group in a [`Checkpoint`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupCheckpoint {
    /// The group's id.
    pub id: GroupId,
    /// Its name.
    pub name: String,
    /// Every record of this group below this groups-log offset is reflected in `state`;
    /// none at or above it is.
    pub applied_through: u64,
    /// The state machine's plain data.
    pub state: GroupSnapshot,
    /// For each of `state.dead_letters`, the groups-log offset of its record.
    pub dead_letter_records: Vec<u64>,
    /// For each redriven message still unfinished (below the position or revived in the
    /// window), its offset and the groups-log offset of the record holding its payload.
    pub redriven_records: Vec<(u64, u64)>,
}

impl Checkpoint {
    /// The lowest groups-log offset that opening must replay from.
    pub fn replay_from(&self) -> u64 {
        self.groups
            .iter()
            .map(|group| group.applied_through)
            .fold(self.registry_through, u64::min)
    }

    /// Encodes the whole file.
    pub fn encode(&self) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&self.registry_through.to_le_bytes());
        body.extend_from_slice(&self.next_group_id.to_le_bytes());
        body.extend_from_slice(&(self.groups.len() as u32).to_le_bytes());
        for group in &self.groups {
            encode_group(group, &mut body);
        }
        let mut out = Vec::with_capacity(HEADER_BYTES + body.len());
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&(body.len() as u64).to_le_bytes());
        out.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// Decodes a whole file. Never panics.
    ///
    /// # Errors
    ///
    /// [`DecodeError`] if the magic, length, checksum or any field is wrong.
    pub fn decode(bytes: &[u8]) -> Result<Checkpoint, DecodeError> {
        let mut header = Reader::new(bytes);
        let version = match header.take(8)? {
            magic if magic == MAGIC => 2,
            magic if magic == MAGIC_V1 => 1,
            _ => return Err(DecodeError("not a mailroom group checkpoint (bad magic)")),
        };
        let body_len = header.u64()?;
        let crc = header.u32()?;
        if header.u32()? != 0 {
            return Err(DecodeError("reserved header field is not zero"));
        }
        if body_len != (bytes.len() - HEADER_BYTES) as u64 {
            return Err(DecodeError("body length does not match the file length"));
        }
        let body = &bytes[HEADER_BYTES..];
        if crc32c::crc32c(body) != crc {
            return Err(DecodeError("checksum mismatch"));
        }
        let mut reader = Reader::new(body);
        let registry_through = reader.u64()?;
        let next_group_id = reader.u64()?;
        let count = reader.u32()?;
        let mut groups = Vec::new();
        for _ in 0..count {
            groups.push(decode_group(&mut reader, version)?);
        }
        reader.finish("trailing bytes after the last group")?;
        Ok(Checkpoint {
            registry_through,
            next_group_id,
            groups,
        })
    }
}

fn encode_group(group: &GroupCheckpoint, out: &mut Vec<u8>) {
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

fn decode_group(reader: &mut Reader<'_>, version: u8) -> Result<GroupCheckpoint, DecodeError> {
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
    let mut state = GroupSnapshot::seed(position, attempt, in_flight, max_attempts, dead_letters);
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

fn io_error(operation: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> StoreError {
    let path = path.to_path_buf();
    move |source| StoreError::Io {
        operation,
        path,
        source,
    }
}

/// Replaces the checkpoint in `dir` atomically (write temp, sync, rename, sync dir).
///
/// # Errors
///
/// [`StoreError::Io`] if any step fails; the previous checkpoint is then still whole.
pub fn write(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    checkpoint: &Checkpoint,
) -> Result<(), StoreError> {
    let bytes = checkpoint.encode();
    let tmp = dir.join(CHECKPOINT_TMP_FILE);
    let file = storage.open(&tmp, true).map_err(io_error("create", &tmp))?;
    file.set_len(0).map_err(io_error("truncate", &tmp))?;
    file.write_at(&bytes, 0).map_err(io_error("write", &tmp))?;
    file.sync().map_err(io_error("fdatasync", &tmp))?;
    drop(file);
    let path = dir.join(CHECKPOINT_FILE);
    storage
        .rename(&tmp, &path)
        .map_err(io_error("rename", &tmp))?;
    storage
        .sync_dir(dir)
        .map_err(io_error("fsync directory", dir))
}

/// Reads the checkpoint in `dir`, if there is one, removing an unfinished temp file.
///
/// # Errors
///
/// [`StoreError::Corrupt`] if the file fails its checks; [`StoreError::Io`] on I/O errors.
pub fn read(storage: &Arc<dyn Storage>, dir: &Path) -> Result<Option<Checkpoint>, StoreError> {
    let tmp = dir.join(CHECKPOINT_TMP_FILE);
    if storage.exists(&tmp).map_err(io_error("stat", &tmp))? {
        storage
            .remove_file(&tmp)
            .map_err(io_error("remove", &tmp))?;
    }
    let path: PathBuf = dir.join(CHECKPOINT_FILE);
    if !storage.exists(&path).map_err(io_error("stat", &path))? {
        return Ok(None);
    }
    let file = storage
        .open(&path, false)
        .map_err(io_error("open", &path))?;
    let len = file.len().map_err(io_error("stat", &path))?;
    let corrupt = |reason: String| StoreError::Corrupt {
        path: path.clone(),
        position: 0,
        reason,
    };
    if len > CHECKPOINT_BYTES_MAX + HEADER_BYTES as u64 {
        return Err(corrupt(format!(
            "checkpoint of {len} bytes exceeds the limit"
        )));
    }
    let mut bytes = vec![0; len as usize];
    file.read_at(&mut bytes, 0)
        .map_err(io_error("read", &path))?;
    Checkpoint::decode(&bytes)
        .map(Some)
        .map_err(|DecodeError(reason)| corrupt(format!("bad checkpoint: {reason}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Checkpoint {
        Checkpoint {
            registry_through: 9,
            next_group_id: 3,
            groups: vec![
                GroupCheckpoint {
                    id: 0,
                    name: "billing".into(),
                    applied_through: 12,
                    state: GroupSnapshot::seed(
                        4,
                        2,
                        true,
                        3,
                        vec![DeadLetterEntry {
                            offset: 1,
                            attempts: 3,
                        }],
                    ),
                    dead_letter_records: vec![7],
                    redriven_records: vec![],
                },
                GroupCheckpoint {
                    id: 2,
                    name: "audit".into(),
                    applied_through: 5,
                    state: extended_state(),
                    dead_letter_records: vec![9],
                    redriven_records: vec![(2, 3), (5, 4)],
                },
            ],
        }
    }

    /// A group using every extension: settings, counters, a reason, a window with all
    /// three phases, a redriven message.
    fn extended_state() -> GroupSnapshot {
        let mut state = GroupSnapshot::seed(
            5,
            0,
            false,
            4,
            vec![DeadLetterEntry {
                offset: 6,
                attempts: 9,
            }],
        );
        state.config = mailroom::group::GroupConfig::new(4)
            .with_lease_ms(500)
            .with_backoff(mailroom::group::Backoff::Exponential {
                base_ms: 10,
                cap_ms: 80,
            })
            .with_max_in_flight(3);
        state.dead_letter_notes[0] = DeadLetterNote {
            reason: Some("lease expired".into()),
            at_ms: 1234,
        };
        state.counters.releases = 2;
        state.counters.redrives = 1;
        let slot = |offset, phase| Slot {
            offset,
            attempt: 2,
            failures: 1,
            phase,
        };
        state.attempt = 2;
        state.window = vec![
            slot(5, SlotPhase::Ready { not_before_ms: 77 }),
            slot(6, SlotPhase::Done),
            slot(
                7,
                SlotPhase::InFlight {
                    consumer: Some("w1".into()),
                    lease_until_ms: Some(900),
                },
            ),
        ];
        state.redriven = vec![slot(2, SlotPhase::Ready { not_before_ms: 0 })];
        state
    }

    // Proves a version 1 checkpoint (seed groups only) is still read, as seed groups.
    #[test]
    fn version_1_checkpoint_is_read() {
        let mut body = Vec::new();
        body.extend_from_slice(&3u64.to_le_bytes()); // registry_through
        body.extend_from_slice(&1u64.to_le_bytes()); // next_group_id
        body.extend_from_slice(&1u32.to_le_bytes());
        body.extend_from_slice(&0u64.to_le_bytes()); // id
        body.extend_from_slice(&3u64.to_le_bytes()); // applied_through
        body.extend_from_slice(&4u64.to_le_bytes()); // position
        body.extend_from_slice(&1u32.to_le_bytes()); // attempt
        body.extend_from_slice(&2u32.to_le_bytes()); // max_attempts
        body.push(1); // in flight
        body.push(1);
        body.push(b'g');
        body.extend_from_slice(&0u32.to_le_bytes()); // no dead letters
        let mut file = Vec::new();
        file.extend_from_slice(b"MRGRPCK1");
        file.extend_from_slice(&(body.len() as u64).to_le_bytes());
        file.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
        file.extend_from_slice(&0u32.to_le_bytes());
        file.extend_from_slice(&body);
        let checkpoint = Checkpoint::decode(&file).unwrap();
        let state = &checkpoint.groups[0].state;
        assert_eq!(state, &GroupSnapshot::seed(4, 1, true, 2, vec![]));
        let group = mailroom::group::GroupState::from_snapshot(state.clone()).unwrap();
        assert_eq!(group.in_flight().map(|id| id.attempt), Some(1));
    }

    // Proves a checkpoint decodes back to itself and replays from its lowest offset.
    #[test]
    fn checkpoint_round_trips() {
        let checkpoint = sample();
        assert_eq!(
            Checkpoint::decode(&checkpoint.encode()),
            Ok(checkpoint.clone())
        );
        assert_eq!(checkpoint.replay_from(), 5);
    }

    // Proves every single-bit flip and every truncation is detected, never accepted.
    #[test]
    fn any_bit_flip_or_truncation_is_refused() {
        let bytes = sample().encode();
        for bit in 0..bytes.len() * 8 {
            let mut damaged = bytes.clone();
            damaged[bit / 8] ^= 1 << (bit % 8);
            assert!(
                Checkpoint::decode(&damaged).is_err(),
                "flip of bit {bit} accepted"
            );
        }
        for cut in 0..bytes.len() {
            assert!(
                Checkpoint::decode(&bytes[..cut]).is_err(),
                "cut at {cut} accepted"
            );
        }
    }
}
