//! One segment of the log: a `<base_offset:020>.log` file of records back to back, and
//! its `.idx` sparse index.

use std::path::{Path, PathBuf};

use parking_lot::Mutex;

use super::index::{self, IndexEntry};
use crate::record::{self, CorruptReason, Decoded, RecordRef};
use crate::storage::StorageFile;
use crate::StoreError;

/// How many digits the base offset has in a segment's file name.
const NAME_DIGITS: usize = 20;
/// Extension of segment files.
pub(crate) const LOG_EXTENSION: &str = "log";
/// Extension of index files.
pub(crate) const INDEX_EXTENSION: &str = "idx";

/// The file name of a segment or index with this base offset.
pub(crate) fn file_path(dir: &Path, base_offset: u64, extension: &str) -> PathBuf {
    dir.join(format!("{base_offset:0NAME_DIGITS$}.{extension}"))
}

/// Parses `<20 digits>.<log|idx>` into (base offset, extension); None for anything else.
pub(crate) fn parse_file_name(name: &str) -> Option<(u64, &str)> {
    let (stem, extension) = name.split_once('.')?;
    let known = extension == LOG_EXTENSION || extension == INDEX_EXTENSION;
    if !known || stem.len() != NAME_DIGITS || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((stem.parse().ok()?, extension))
}

/// One segment: its files and what is known about its contents.
#[derive(Debug)]
pub(crate) struct Segment {
    /// The offset of its first record.
    pub base_offset: u64,
    /// Its `.log` path.
    pub path: PathBuf,
    /// Its `.log` file.
    pub file: Box<dyn StorageFile>,
    /// Its `.idx` path.
    pub index_path: PathBuf,
    /// Its `.idx` file.
    pub index_file: Box<dyn StorageFile>,
    /// What it holds; changes only while it is the active segment.
    pub meta: Mutex<SegmentMeta>,
}

/// The mutable facts about a segment.
#[derive(Debug, Clone, Default)]
pub(crate) struct SegmentMeta {
    /// The sparse index, in memory.
    pub entries: Vec<IndexEntry>,
    /// One past the offset of its last whole record.
    pub end_offset: u64,
    /// Bytes of whole records written (including those still in the writer's buffer).
    pub bytes: u64,
    /// How many of the last `bytes` are still in the writer's buffer, not yet in the
    /// file (see `Writer::pending`); readers stop before them.
    pub unflushed_bytes: u64,
    /// Timestamp of its last record (0 if none).
    pub last_timestamp_ms: u64,
}

impl SegmentMeta {
    /// The byte position of the last index entry (0 when there is none: the implied one).
    pub fn last_indexed_position(&self) -> u64 {
        self.entries.last().map_or(0, |e| u64::from(e.position))
    }
}

/// Reads a file through a sliding buffer, so scans make few, large reads.
pub(crate) struct Window<'a> {
    file: &'a dyn StorageFile,
    path: &'a Path,
    /// Bytes at or past this position are not read.
    limit: u64,
    chunk_bytes: usize,
    start: u64,
    buf: Vec<u8>,
}

impl<'a> Window<'a> {
    pub fn new(file: &'a dyn StorageFile, path: &'a Path, limit: u64, chunk_bytes: usize) -> Self {
        Window {
            file,
            path,
            limit,
            chunk_bytes,
            start: 0,
            buf: Vec::new(),
        }
    }

    /// The bytes from `position` on: at least `wanted` of them unless the limit comes first.
    pub fn bytes_from(&mut self, position: u64, wanted: usize) -> Result<&[u8], StoreError> {
        let available = usize::try_from(self.limit.saturating_sub(position)).unwrap_or(usize::MAX);
        let wanted = wanted.min(available);
        let buffered_end = self.start + self.buf.len() as u64;
        if position < self.start || position + wanted as u64 > buffered_end {
            let read_bytes = wanted.max(self.chunk_bytes).min(available);
            self.buf.resize(read_bytes, 0);
            self.start = position;
            self.file
                .read_at(&mut self.buf, position)
                .map_err(|source| StoreError::Io {
                    operation: "read",
                    path: self.path.to_path_buf(),
                    source,
                })?;
        }
        let from = (position - self.start) as usize;
        Ok(&self.buf[from..])
    }

    /// Decodes the record at `position`, reading more if the buffer ends inside it.
    pub fn decode_at(
        &mut self,
        position: u64,
        payload_bytes_max: u32,
    ) -> Result<Decoded<'_>, StoreError> {
        let needed = match record::decode(
            self.bytes_from(position, record::HEADER_BYTES)?,
            payload_bytes_max,
        ) {
            Decoded::Incomplete { bytes_needed } => bytes_needed,
            _ => record::HEADER_BYTES,
        };
        Ok(record::decode(
            self.bytes_from(position, needed)?,
            payload_bytes_max,
        ))
    }
}

/// What scanning a run of records found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScanEnd {
    /// Every byte up to the limit was whole, valid records.
    Clean,
    /// The record at `position` is cut short, fails its checks or has the wrong offset.
    Damaged {
        /// Where the bad record starts.
        position: u64,
        /// What is wrong with it.
        reason: Damage,
    },
}

/// What is wrong with a damaged record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Damage {
    /// It runs past the end of the file.
    Incomplete,
    /// It fails a check.
    Corrupt(CorruptReason),
    /// It is valid but carries another offset than the one due there.
    WrongOffset(u64),
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Damage::Incomplete => f.write_str("record runs past the end of the file"),
            Damage::Corrupt(reason) => reason.fmt(f),
            Damage::WrongOffset(found) => write!(f, "record carries offset {found}"),
        }
    }
}

/// Walks the records of a segment from `position` (where offset `offset` is due) up to
/// the window's limit, calling `visit(record, position)` for each valid one in order.
pub(crate) fn scan(
    window: &mut Window<'_>,
    mut position: u64,
    mut offset: u64,
    payload_bytes_max: u32,
    mut visit: impl FnMut(RecordRef<'_>, u64),
) -> Result<ScanEnd, StoreError> {
    while position < window.limit {
        let damage = match window.decode_at(position, payload_bytes_max)? {
            Decoded::Record { record, bytes } if record.offset == offset => {
                visit(record, position);
                position += bytes as u64;
                offset += 1;
                continue;
            }
            Decoded::Record { record, .. } => Damage::WrongOffset(record.offset),
            Decoded::Incomplete { .. } => Damage::Incomplete,
            Decoded::Corrupt(reason) => Damage::Corrupt(reason),
        };
        return Ok(ScanEnd::Damaged {
            position,
            reason: damage,
        });
    }
    Ok(ScanEnd::Clean)
}

/// Whether every byte from `position` to the window's limit is zero: the preallocated
/// tail of an active segment (see `preallocate.rs`), which ends its records cleanly.
pub(crate) fn zeros_to_limit(window: &mut Window<'_>, position: u64) -> Result<bool, StoreError> {
    let mut at = position;
    while at < window.limit {
        let chunk_bytes = window.chunk_bytes;
        let bytes = window.bytes_from(at, chunk_bytes)?;
        if bytes.is_empty() {
            break;
        }
        if bytes.iter().any(|&b| b != 0) {
            return Ok(false);
        }
        at += bytes.len() as u64;
    }
    Ok(true)
}

/// Whether a valid record with an offset at or after `offset` starts anywhere after
/// `position`: if one does, the damage at `position` is not a torn tail, because later
/// data reached the disk.
pub(crate) fn valid_record_after(
    window: &mut Window<'_>,
    position: u64,
    offset: u64,
    payload_bytes_max: u32,
) -> Result<Option<u64>, StoreError> {
    let offsets_left = window.limit.saturating_sub(position) / record::HEADER_BYTES as u64;
    let plausible = offset..offset.saturating_add(offsets_left + 1);
    for candidate in position + 1..window.limit {
        let header = window.bytes_from(candidate, record::HEADER_BYTES)?;
        // Checking the offset field first keeps this scan cheap: a checksum is only
        // computed where the header already looks like a record of this log.
        if !record::peek_offset(header).is_some_and(|o| plausible.contains(&o)) {
            continue;
        }
        if let Decoded::Record { record, .. } = window.decode_at(candidate, payload_bytes_max)? {
            if plausible.contains(&record.offset) {
                return Ok(Some(candidate));
            }
        }
    }
    Ok(None)
}

/// What [`Segment::read`] found.
#[derive(Debug)]
pub(crate) enum ReadOutcome {
    /// The record asked for.
    Record(super::Record),
    /// The index entry the read started from does not point at the record it names: the
    /// index (a cache) is damaged, not the data. Rebuild it and read again.
    BadIndexEntry(IndexEntry),
}

impl Segment {
    /// Reads the record with `offset`, which the caller knows is in this segment.
    ///
    /// The first record read must be the one its index entry names (its offset is in its
    /// checksum); if it is not, the entry is reported, not the data: a flipped bit in an
    /// index must never read as a damaged record.
    pub fn read(
        &self,
        offset: u64,
        payload_bytes_max: u32,
        chunk_bytes: usize,
    ) -> Result<ReadOutcome, StoreError> {
        let (start, limit) = {
            let meta = self.meta.lock();
            let relative = u32::try_from(offset - self.base_offset).unwrap_or(u32::MAX);
            let in_file = meta.bytes - meta.unflushed_bytes;
            (index::floor(&meta.entries, relative), in_file)
        };
        let mut window = Window::new(self.file.as_ref(), &self.path, limit, chunk_bytes);
        let mut position = u64::from(start.position);
        let mut due = self.base_offset + u64::from(start.relative_offset);
        loop {
            let damage = match window.decode_at(position, payload_bytes_max)? {
                Decoded::Record { record, .. } if record.offset == due && due == offset => {
                    // One copy of the body; the block and the payload share it.
                    let (block, _) = record.split_metadata();
                    let mut payload = bytes::Bytes::copy_from_slice(record.payload);
                    let metadata = block.map(|block| payload.split_to(block.len()));
                    return Ok(ReadOutcome::Record(super::Record {
                        offset,
                        timestamp_ms: record.timestamp_ms,
                        payload,
                        metadata,
                    }));
                }
                Decoded::Record { record, bytes } if record.offset == due => {
                    position += bytes as u64;
                    due += 1;
                    continue;
                }
                Decoded::Record { record, .. } => Damage::WrongOffset(record.offset),
                Decoded::Incomplete { .. } => Damage::Incomplete,
                Decoded::Corrupt(reason) => Damage::Corrupt(reason),
            };
            if start.position > 0 && position == u64::from(start.position) {
                return Ok(ReadOutcome::BadIndexEntry(start));
            }
            return Err(StoreError::Corrupt {
                path: self.path.clone(),
                position,
                reason: format!("reading offset {offset}, offset {due} due here: {damage}"),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves segment file names round-trip and anything else is refused.
    #[test]
    fn file_names() {
        let path = file_path(Path::new("/d"), 42, LOG_EXTENSION);
        assert_eq!(path, Path::new("/d/00000000000000000042.log"));
        assert_eq!(
            parse_file_name("00000000000000000042.log"),
            Some((42, "log"))
        );
        assert_eq!(
            parse_file_name("00000000000000000042.idx"),
            Some((42, "idx"))
        );
        for bad in [
            "42.log",
            "0000000000000000004x.log",
            "00000000000000000042.txt",
            "LOCK",
            "00000000000000000042.log.tmp",
            "99999999999999999999.log",
        ] {
            assert_eq!(parse_file_name(bad), None, "{bad}");
        }
    }
}
