//! The *synced mark* of a log (`<log dir>/SYNCED`): how far the active segment is known
//! to have been durable, so recovery can tell a torn tail from damage to a record that was
//! already on disk.
//!
//! A torn write can only damage bytes written after the last `fdatasync` that returned;
//! bit rot can damage anything. So a record that ends at or before a point known to have
//! been synced and fails its checks is *rot* (`StoreError::Corrupt`, never truncated),
//! and only damage past that point may be a torn tail. The mark is that point.
//!
//! The file is [`FILE_BYTES`] long and holds two [`SLOT_BYTES`]-byte slots, at bytes 0
//! and [`SLOT1_AT`] (different 512-byte sectors, so one torn sector write cannot garble
//! both). Each slot, little-endian:
//!
//! | bytes  | field           | meaning                                                 |
//! |--------|-----------------|---------------------------------------------------------|
//! | 0..8   | magic           | `MRSYNCED`                                              |
//! | 8..16  | `sequence`      | incremented by every write; the valid slot with the highest wins |
//! | 16..24 | `base_offset`   | the segment the claim is about                          |
//! | 24..32 | `end_offset`    | one past the last record synced in it                   |
//! | 32..40 | `segment_bytes` | the segment's bytes `0..segment_bytes` were synced      |
//! | 40..44 | `crc32c`        | CRC32C of bytes 0..40                                   |
//! | 44..48 | reserved        | 0                                                       |
//!
//! Writes alternate between the slots (`sequence % 2`), so a torn write of one leaves
//! the other, an older but still true claim. A slot is written only *after* the
//! `fdatasync` that made its claim true returned, so a valid slot never claims more than
//! is durable. It is *not* synced on the commit path: a sync round writes it (one small
//! `pwrite` to the page cache) before its callers are answered, and it reaches the disk
//! with the kernel's writeback, at every [`crate::log::Log::open`], and when a `Log`
//! under `SyncPolicy::Always` is dropped. So after a process crash the mark covers every
//! confirmed record; after a power cut it covers what it covered when it last reached the
//! disk, and damage past that is read by the older rule (a torn tail unless a valid
//! record follows). `docs/storage.md` ("Torn or rotten") says exactly what is claimed.

use std::path::{Path, PathBuf};

use super::recovery::io_error;
use super::segment::Segment;
use crate::storage::{Storage, StorageFile};
use crate::StoreError;

/// The mark's file name inside a log directory.
pub(crate) const FILE_NAME: &str = "SYNCED";
/// One slot's size.
const SLOT_BYTES: usize = 48;
/// Where the second slot starts.
const SLOT1_AT: u64 = 512;
/// The file's size: both slots, fixed once created, so later writes never change the
/// file's length (no metadata for an `fdatasync` to flush).
const FILE_BYTES: u64 = SLOT1_AT + SLOT_BYTES as u64;
const MAGIC: [u8; 8] = *b"MRSYNCED";
const CRC_AT: usize = 40;

const _: () = assert!(CRC_AT == MAGIC.len() + 4 * 8);
const _: () = assert!(SLOT_BYTES == CRC_AT + 8);

/// What one slot claims: records `base_offset..end_offset` fill bytes
/// `0..segment_bytes` of segment `base_offset`, and all of them were durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Claim {
    /// The segment the claim is about.
    pub base_offset: u64,
    /// One past the last record synced in it.
    pub end_offset: u64,
    /// How many of its bytes were synced (always a record boundary).
    pub segment_bytes: u64,
}

impl Claim {
    /// What `segment` holds now: its records' end and bytes. Under the writer lock that is
    /// exactly what is in its file; it is a true claim once a sync covering it returned.
    pub(crate) fn of(segment: &Segment) -> Claim {
        let meta = segment.meta.lock();
        Claim {
            base_offset: segment.base_offset,
            end_offset: meta.end_offset,
            segment_bytes: meta.bytes,
        }
    }

    /// The claim about an empty segment at `base_offset`.
    pub(crate) fn empty(base_offset: u64) -> Claim {
        Claim {
            base_offset,
            end_offset: base_offset,
            segment_bytes: 0,
        }
    }
}

/// The open mark file of one log.
#[derive(Debug)]
pub(crate) struct SyncedMark {
    path: PathBuf,
    file: Box<dyn StorageFile>,
    /// The sequence of the newest slot written (or read).
    sequence: u64,
    /// A slot was written since the file was last synced.
    dirty: bool,
}

impl SyncedMark {
    /// Opens (creating if missing) the mark of the log in `dir` and returns it with the
    /// newest valid claim (`None`: absent, as in a log written before marks existed, or
    /// both slots damaged). Never fails on the file's contents.
    pub fn open(
        storage: &dyn Storage,
        dir: &Path,
    ) -> Result<(SyncedMark, Option<Claim>), StoreError> {
        let path = dir.join(FILE_NAME);
        let file = storage.open(&path, true).map_err(io_error("open", &path))?;
        let len = file.len().map_err(io_error("stat", &path))?;
        let mut best: Option<(u64, Claim)> = None;
        if len == FILE_BYTES {
            let mut bytes = vec![0; FILE_BYTES as usize];
            file.read_at(&mut bytes, 0)
                .map_err(io_error("read", &path))?;
            for at in [0, SLOT1_AT as usize] {
                if let Some((sequence, claim)) = decode_slot(&bytes[at..at + SLOT_BYTES]) {
                    if best.is_none_or(|(newest, _)| sequence > newest) {
                        best = Some((sequence, claim));
                    }
                }
            }
        }
        let mark = SyncedMark {
            path,
            file,
            sequence: best.map_or(0, |(sequence, _)| sequence),
            dirty: false,
        };
        Ok((mark, best.map(|(_, claim)| claim)))
    }

    /// Writes `claim` into the slot after the newest and fsyncs the file (at open and
    /// repair, where a second sync costs nothing per record). A file of the wrong size
    /// (missing, or from elsewhere) is first rewritten whole, both slots holding `claim`.
    pub fn write_synced(&mut self, claim: Claim) -> Result<(), StoreError> {
        let len = self.file.len().map_err(io_error("stat", &self.path))?;
        if len != FILE_BYTES {
            // Slot 0 takes even sequences, slot 1 odd ones (see `write`).
            let even = (self.sequence + 2) & !1;
            let mut bytes = vec![0; FILE_BYTES as usize];
            bytes[..SLOT_BYTES].copy_from_slice(&encode_slot(even, claim));
            bytes[SLOT1_AT as usize..].copy_from_slice(&encode_slot(even + 1, claim));
            self.sequence = even + 1;
            self.file
                .set_len(0)
                .map_err(io_error("truncate", &self.path))?;
            self.file
                .write_at(&bytes, 0)
                .map_err(io_error("write", &self.path))?;
        } else {
            self.write(claim)?;
        }
        self.sync()
    }

    /// Writes `claim` into the slot after the newest, not synced (the commit path).
    pub fn write(&mut self, claim: Claim) -> Result<(), StoreError> {
        let sequence = self.sequence + 1;
        let at = if sequence.is_multiple_of(2) {
            0
        } else {
            SLOT1_AT
        };
        self.file
            .write_at(&encode_slot(sequence, claim), at)
            .map_err(io_error("write", &self.path))?;
        self.sequence = sequence;
        self.dirty = true;
        Ok(())
    }

    /// Fsyncs the file if a slot was written since the last sync.
    pub fn sync_if_dirty(&mut self) -> Result<(), StoreError> {
        if self.dirty {
            self.sync()?;
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<(), StoreError> {
        self.file
            .sync()
            .map_err(io_error("fdatasync", &self.path))?;
        self.dirty = false;
        Ok(())
    }

    /// The mark file's path (for error messages).
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The base offset of a log directory that holds no segment: 0, or where a repair
/// restarted the log (a mark claiming an empty segment). A mark claiming records means
/// synced segments were lost: [`StoreError::Corrupt`].
pub(crate) fn empty_log_base(mark: &SyncedMark, claim: Option<Claim>) -> Result<u64, StoreError> {
    match claim {
        None => Ok(0),
        Some(claim) if claim.segment_bytes == 0 && claim.end_offset == claim.base_offset => {
            Ok(claim.base_offset)
        }
        Some(claim) => Err(StoreError::Corrupt {
            path: mark.path().to_path_buf(),
            position: 0,
            reason: format!(
                "the log has no segment, but this mark says offsets {}..{} were synced: \
                 durable segments are missing",
                claim.base_offset, claim.end_offset
            ),
        }),
    }
}

/// The claim that bounds the torn tail of the active segment `active_base`, if any. A
/// claim about an older segment says nothing about this one (a roll synced it); one
/// about a newer segment means that segment, once synced, is gone.
pub(crate) fn claim_for_active(
    mark: &SyncedMark,
    claim: Option<Claim>,
    dir: &Path,
    active_base: u64,
) -> Result<Option<Claim>, StoreError> {
    match claim {
        Some(claim) if claim.base_offset == active_base => Ok(Some(claim)),
        Some(claim) if claim.base_offset > active_base => Err(StoreError::Corrupt {
            path: super::segment::file_path(dir, claim.base_offset, super::segment::LOG_EXTENSION),
            position: 0,
            reason: format!(
                "this segment is missing, but {} says it was synced through offset {} \
                 (a synced segment was lost, or a repair was interrupted: run it again)",
                mark.path().display(),
                claim.end_offset
            ),
        }),
        _ => Ok(None),
    }
}

/// The error for damage at `position` of the active segment, where offset `due` was
/// expected, inside the part the mark says was synced.
pub(crate) fn rotten(
    path: &Path,
    position: u64,
    damage: super::segment::Damage,
    due: u64,
    claim: Claim,
) -> StoreError {
    StoreError::Corrupt {
        path: path.to_path_buf(),
        position,
        reason: format!(
            "offset {due}: {damage}; {FILE_NAME} says this segment was synced through byte {} \
             (offsets below {}), so this record was durable: damage, not a torn tail \
             (the log is not served; see docs/storage.md, \"Repair\")",
            claim.segment_bytes, claim.end_offset
        ),
    }
}

/// The error for an active segment of `bytes` (ending at offset `end`) shorter than the
/// mark says was synced.
pub(crate) fn cut_short(path: &Path, bytes: u64, end: u64, claim: Claim) -> StoreError {
    StoreError::Corrupt {
        path: path.to_path_buf(),
        position: bytes,
        reason: format!(
            "the segment ends at byte {bytes} (offset {end}), but {FILE_NAME} says it was \
             synced through byte {} (offsets below {}): durable records are missing",
            claim.segment_bytes, claim.end_offset
        ),
    }
}

fn encode_slot(sequence: u64, claim: Claim) -> [u8; SLOT_BYTES] {
    let mut slot = [0; SLOT_BYTES];
    slot[..8].copy_from_slice(&MAGIC);
    slot[8..16].copy_from_slice(&sequence.to_le_bytes());
    slot[16..24].copy_from_slice(&claim.base_offset.to_le_bytes());
    slot[24..32].copy_from_slice(&claim.end_offset.to_le_bytes());
    slot[32..40].copy_from_slice(&claim.segment_bytes.to_le_bytes());
    let crc = crc32c::crc32c(&slot[..CRC_AT]);
    slot[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
    slot
}

/// A slot's sequence and claim, if it is whole and consistent. Never panics.
fn decode_slot(slot: &[u8]) -> Option<(u64, Claim)> {
    if slot.len() != SLOT_BYTES || slot[..8] != MAGIC {
        return None;
    }
    let u64_at = |at: usize| u64::from_le_bytes(slot[at..at + 8].try_into().unwrap_or_default());
    let stored = u32::from_le_bytes(slot[CRC_AT..CRC_AT + 4].try_into().ok()?);
    if crc32c::crc32c(&slot[..CRC_AT]) != stored {
        return None;
    }
    let claim = Claim {
        base_offset: u64_at(16),
        end_offset: u64_at(24),
        segment_bytes: u64_at(32),
    };
    (claim.end_offset >= claim.base_offset).then_some((u64_at(8), claim))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{SimStorage, Storage};

    fn claim(end: u64) -> Claim {
        Claim {
            base_offset: 10,
            end_offset: end,
            segment_bytes: end * 100,
        }
    }

    // Proves the newest valid slot wins, and a flipped bit anywhere in it falls back to
    // the other slot's (older, still true) claim, never to a wrong one.
    #[test]
    fn newest_valid_slot_wins_and_damage_falls_back() {
        let storage = SimStorage::new();
        let dir = Path::new("/l");
        crate::storage::create_dir_durable(&storage, dir).unwrap();
        let (mut mark, none) = SyncedMark::open(&storage, dir).unwrap();
        storage.sync_dir(dir).unwrap();
        assert_eq!(none, None);
        mark.write_synced(claim(11)).unwrap();
        mark.write(claim(12)).unwrap();
        mark.write(claim(13)).unwrap();
        mark.sync_if_dirty().unwrap();
        // Creation wrote sequences 2 and 3; 12 went to slot 0 (4), 13 to slot 1 (5).
        assert_eq!(mark.sequence, 5);
        drop(mark);
        assert_eq!(SyncedMark::open(&storage, dir).unwrap().1, Some(claim(13)));
        let path = dir.join(FILE_NAME);
        let newest_at = SLOT1_AT as usize;
        for byte in newest_at..newest_at + CRC_AT + 4 {
            let damaged = storage.crash(0);
            damaged.corrupt_file(&path, |b| b[byte] ^= 0x20);
            let got = SyncedMark::open(&damaged, dir).unwrap().1;
            assert_eq!(got, Some(claim(12)), "byte {byte}");
        }
    }
}
