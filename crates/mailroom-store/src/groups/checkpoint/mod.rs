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
//! | 8 | magic `MRGRPCK3` (version 3; `MRGRPCK2` and `MRGRPCK1`, versions 2 and 1, are still read) |
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
//! a `Created` transition with settings: flags u8, lease_ms u64, backoff kind u8, two backoff
//! u64s, max_in_flight u32), five counters u64 (redeliveries, releases, expired leases,
//! redrives, purged), the window (count u32, then slots), the redriven messages below
//! the position (count u32, then slots) and the records of unfinished redriven messages
//! (count u32, then per message its offset u64 and the groups-log offset u64 of the
//! record that holds its payload; a redriven message may also sit in the window). A slot
//! is: offset u64, attempt u32, failures u32, phase u8 (0 ready, 1 in flight, 2 done),
//! time u64 (not-before or lease deadline), flags u8 (1: lease, 2: consumer), consumer
//! length u8, consumer. A version 1 file holds only groups with every setting unset, and is read as such.
//!
//! Version 3 adds, per group after the records of redriven messages, what seek and pause
//! keep: frontier u64 (every offset delivered lies below it), rewound_below u64,
//! attempt_floor u32, attempts_high u32 (see `mailroom::group`'s `seek.rs`), pause flags
//! u8 (1: paused, 2: with an end) and the pause's until_ms u64. A group read from an
//! older version gets bounds that hold for any history it can have had: its frontier is
//! past its window, and its highest attempt is at least `max_attempts`, one more than
//! its redeliveries, and every attempt it still holds; it is not paused.

mod file;
mod group;

use mailroom::group::GroupSnapshot;

pub use self::file::{read, write};
use self::group::{decode_group, encode_group};
use super::reader::{DecodeError, Reader};
use super::GroupId;

/// The checkpoint's file name in a topic directory.
pub const CHECKPOINT_FILE: &str = "CHECKPOINT";
/// The name of a checkpoint being written.
pub const CHECKPOINT_TMP_FILE: &str = "CHECKPOINT.tmp";

const MAGIC_V1: [u8; 8] = *b"MRGRPCK1";
const MAGIC_V2: [u8; 8] = *b"MRGRPCK2";
const MAGIC: [u8; 8] = *b"MRGRPCK3";
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
            magic if magic == MAGIC => 3,
            magic if magic == MAGIC_V2 => 2,
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

#[cfg(test)]
mod tests {
    use super::*;
    use mailroom::group::{DeadLetterEntry, DeadLetterNote, Slot, SlotPhase};

    fn sample() -> Checkpoint {
        Checkpoint {
            registry_through: 9,
            next_group_id: 3,
            groups: vec![
                GroupCheckpoint {
                    id: 0,
                    name: "billing".into(),
                    applied_through: 12,
                    state: GroupSnapshot::basic(
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
                    state: state_with_settings(),
                    dead_letter_records: vec![9],
                    redriven_records: vec![(2, 3), (5, 4)],
                },
            ],
        }
    }

    /// A group using every extension: settings, counters, a reason, a window with all
    /// three phases, a redriven message, a seek back and a pause.
    fn state_with_settings() -> GroupSnapshot {
        let mut state = GroupSnapshot::basic(
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
        // A seek back and a timed pause (version 3).
        (state.frontier, state.rewound_below) = (12, 11);
        (state.attempt_floor, state.attempts_high) = (8, 9);
        state.pause = Some(mailroom::group::Pause {
            until_ms: Some(4_321),
        });
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

    // Proves a version 1 checkpoint (groups with every setting unset) is still read, as
    // such groups.
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
        // Read as such a group, with the bounds an older checkpoint gets for seeks: its
        // frontier past its window and its highest attempt at least `max_attempts`.
        let mut expected = GroupSnapshot::basic(4, 1, true, 2, vec![]);
        (expected.frontier, expected.attempts_high) = (5, 2);
        assert_eq!(state, &expected);
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
