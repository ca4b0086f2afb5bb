//! The sparse offset index of one segment (`<base_offset:020>.idx`): a cache.
//!
//! The file is a run of 8-byte entries, one for roughly every `index_interval_bytes` of
//! segment, each `relative_offset: u32, position: u32` (little-endian): the record with
//! offset `base_offset + relative_offset` starts at byte `position` of the segment. The
//! record at position 0 is never listed; it is implied.
//!
//! When the segment is sealed (a newer one is started) a 40-byte trailer follows the
//! entries: `magic: [u8; 8] = "MRSEALED"`, `end_offset: u64`, `segment_bytes: u64`,
//! `last_timestamp_ms: u64`, `crc32c: u32` (of the entries and the trailer's first 32
//! bytes), `reserved: u32 = 0`. It lets opening trust a sealed segment without reading it.
//!
//! Anything that does not parse as that (torn, truncated, missing) is rebuilt from the
//! segment, so the index never decides what data exists. An entry that parses but does not
//! point at the record it names is caught by the read that uses it (`Segment::read`) and
//! the index is rebuilt then (`reindex.rs`).

const ENTRY_BYTES: usize = 8;
const TRAILER_BYTES: usize = 40;
const TRAILER_MAGIC: [u8; 8] = *b"MRSEALED";
const TRAILER_CRC_AT: usize = 32;

const _: () = assert!(TRAILER_BYTES == TRAILER_MAGIC.len() + 3 * 8 + 4 + 4);
const _: () = assert!(TRAILER_CRC_AT == TRAILER_MAGIC.len() + 3 * 8);

/// One index entry: where a record starts inside its segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IndexEntry {
    /// The record's offset minus the segment's base offset.
    pub relative_offset: u32,
    /// Byte position of the record in the segment.
    pub position: u32,
}

/// What a sealed segment's trailer records about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seal {
    /// One past the offset of its last record.
    pub end_offset: u64,
    /// Its length in bytes.
    pub segment_bytes: u64,
    /// The timestamp of its last record.
    pub last_timestamp_ms: u64,
}

/// What an index file holds, as far as it can be trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum IndexContents {
    /// Entries followed by a trailer whose checksum matches.
    Sealed {
        /// The entries.
        entries: Vec<IndexEntry>,
        /// The trailer.
        seal: Seal,
    },
    /// No valid trailer: the longest prefix of well-ordered entries (possibly none).
    Open {
        /// The entries that can be used.
        entries: Vec<IndexEntry>,
    },
}

/// The byte position of entry number `index` in the file.
pub(crate) fn entry_position(index: usize) -> u64 {
    (index * ENTRY_BYTES) as u64
}

pub(crate) fn encode_entry(entry: IndexEntry) -> [u8; ENTRY_BYTES] {
    let mut bytes = [0; ENTRY_BYTES];
    bytes[..4].copy_from_slice(&entry.relative_offset.to_le_bytes());
    bytes[4..].copy_from_slice(&entry.position.to_le_bytes());
    bytes
}

/// The whole file of a sealed segment: entries then trailer.
pub(crate) fn encode_sealed(entries: &[IndexEntry], seal: Seal) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(entries.len() * ENTRY_BYTES + TRAILER_BYTES);
    for entry in entries {
        bytes.extend_from_slice(&encode_entry(*entry));
    }
    bytes.extend_from_slice(&TRAILER_MAGIC);
    bytes.extend_from_slice(&seal.end_offset.to_le_bytes());
    bytes.extend_from_slice(&seal.segment_bytes.to_le_bytes());
    bytes.extend_from_slice(&seal.last_timestamp_ms.to_le_bytes());
    let crc = crc32c::crc32c(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    bytes.extend_from_slice(&0u32.to_le_bytes());
    bytes
}

/// Parses an index file. Never panics.
pub(crate) fn parse(bytes: &[u8]) -> IndexContents {
    if let Some(sealed) = parse_sealed(bytes) {
        return sealed;
    }
    IndexContents::Open {
        entries: ordered_prefix(bytes),
    }
}

fn parse_sealed(bytes: &[u8]) -> Option<IndexContents> {
    let entries_bytes = bytes.len().checked_sub(TRAILER_BYTES)?;
    if entries_bytes % ENTRY_BYTES != 0 {
        return None;
    }
    let trailer = &bytes[entries_bytes..];
    if trailer[..8] != TRAILER_MAGIC {
        return None;
    }
    let stored = u32::from_le_bytes(
        trailer[TRAILER_CRC_AT..TRAILER_CRC_AT + 4]
            .try_into()
            .ok()?,
    );
    if crc32c::crc32c(&bytes[..entries_bytes + TRAILER_CRC_AT]) != stored {
        return None;
    }
    let entries = ordered_prefix(&bytes[..entries_bytes]);
    if entries.len() * ENTRY_BYTES != entries_bytes {
        return None;
    }
    let field = |at: usize| u64::from_le_bytes(trailer[at..at + 8].try_into().unwrap_or_default());
    let seal = Seal {
        end_offset: field(8),
        segment_bytes: field(16),
        last_timestamp_ms: field(24),
    };
    Some(IndexContents::Sealed { entries, seal })
}

/// The entries up to the first that is cut short or does not increase in both fields: a
/// crash can leave an unsynced entry torn or zeroed, and everything after that is unusable.
fn ordered_prefix(bytes: &[u8]) -> Vec<IndexEntry> {
    let mut entries: Vec<IndexEntry> = Vec::with_capacity(bytes.len() / ENTRY_BYTES);
    for chunk in bytes.chunks_exact(ENTRY_BYTES) {
        let entry = IndexEntry {
            relative_offset: u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]),
            position: u32::from_le_bytes([chunk[4], chunk[5], chunk[6], chunk[7]]),
        };
        let previous = entries
            .last()
            .map_or((0, 0), |e| (e.relative_offset, e.position));
        if entry.relative_offset <= previous.0 || entry.position <= previous.1 {
            break;
        }
        entries.push(entry);
    }
    entries
}

/// The last entry at or before `relative_offset` (or the implied entry at position 0).
pub(crate) fn floor(entries: &[IndexEntry], relative_offset: u32) -> IndexEntry {
    let after = entries.partition_point(|e| e.relative_offset <= relative_offset);
    match after.checked_sub(1) {
        Some(i) => entries[i],
        None => IndexEntry {
            relative_offset: 0,
            position: 0,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn entries(n: u32) -> Vec<IndexEntry> {
        (1..=n)
            .map(|i| IndexEntry {
                relative_offset: i * 3,
                position: i * 100,
            })
            .collect()
    }

    // Proves a sealed index round-trips, and that any truncation of it is read as open,
    // starting with a prefix of its entries (trailer bytes may parse as extra entries;
    // opening checks the last entry against the segment, so those are dropped there).
    #[test]
    fn sealed_round_trip_and_truncation() {
        let seal = Seal {
            end_offset: 40,
            segment_bytes: 1234,
            last_timestamp_ms: 99,
        };
        let bytes = encode_sealed(&entries(5), seal);
        assert_eq!(
            parse(&bytes),
            IndexContents::Sealed {
                entries: entries(5),
                seal
            }
        );
        for cut in 0..bytes.len() {
            let IndexContents::Open { entries: got } = parse(&bytes[..cut]) else {
                panic!("a cut index must not look sealed (cut {cut})");
            };
            let real = got.len().min(5);
            assert_eq!(got[..real], entries(5)[..real]);
            assert!(
                real == 5 || got.len() == real,
                "garbage only after all real entries"
            );
        }
    }

    // Proves a flipped bit in a sealed index voids the seal.
    #[test]
    fn bit_flip_voids_seal() {
        let seal = Seal {
            end_offset: 40,
            segment_bytes: 1234,
            last_timestamp_ms: 99,
        };
        let clean = encode_sealed(&entries(3), seal);
        for bit in 0..(clean.len() - 4) * 8 {
            let mut bytes = clean.clone();
            bytes[bit / 8] ^= 1 << (bit % 8);
            assert!(
                !matches!(parse(&bytes), IndexContents::Sealed { .. }),
                "bit {bit}"
            );
        }
    }

    // Proves floor finds the last entry at or before an offset, or the implied first one.
    #[test]
    fn floor_lookup() {
        let e = entries(3); // offsets 3, 6, 9
        assert_eq!(floor(&e, 0).position, 0);
        assert_eq!(floor(&e, 2).position, 0);
        assert_eq!(floor(&e, 3).position, 100);
        assert_eq!(floor(&e, 8).position, 200);
        assert_eq!(floor(&e, 1000).position, 300);
    }

    proptest! {
        // Proves the index parser never panics and only returns increasing entries.
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let entries = match parse(&bytes) {
                IndexContents::Sealed { entries, .. } | IndexContents::Open { entries } => entries,
            };
            for pair in entries.windows(2) {
                prop_assert!(pair[0].relative_offset < pair[1].relative_offset);
                prop_assert!(pair[0].position < pair[1].position);
            }
        }
    }
}
