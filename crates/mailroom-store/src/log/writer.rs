//! The single writer of a log: encodes appends, writes them to the active segment, keeps
//! its index, and rolls to a new segment.

use std::ops::Range;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::recovery::{self, io_error, note_record};
use super::segment::Segment;
use super::{index, Shared, SyncPolicy, APPEND_BYTES_MAX, APPEND_RECORDS_MAX};
use crate::record::{self, Decoded};
use crate::StoreError;

/// What only the writer touches (behind `Shared::writer`).
#[derive(Debug)]
pub(crate) struct Writer {
    /// The segment appends go to.
    pub active: Arc<Segment>,
    /// The next offset to assign; every offset below it is written (not necessarily synced).
    pub next_offset: u64,
    /// Reused between appends to avoid an allocation per call.
    encode_buf: Vec<u8>,
}

impl Writer {
    pub fn new(active: Arc<Segment>) -> Writer {
        let next_offset = active.meta.lock().end_offset;
        Writer {
            active,
            next_offset,
            encode_buf: Vec::new(),
        }
    }
}

impl Shared {
    /// Checks an append's size before anything is written.
    fn check_append(&self, payloads: &[&[u8]]) -> Result<u64, StoreError> {
        if payloads.len() > APPEND_RECORDS_MAX {
            return Err(StoreError::InvalidArgument {
                reason: format!(
                    "{} records in one append; the limit is {APPEND_RECORDS_MAX}",
                    payloads.len()
                ),
            });
        }
        let mut batch_bytes = 0u64;
        for payload in payloads {
            if payload.len() > self.options.record_bytes_max as usize {
                return Err(StoreError::InvalidArgument {
                    reason: format!(
                        "payload of {} bytes exceeds record_bytes_max {}",
                        payload.len(),
                        self.options.record_bytes_max
                    ),
                });
            }
            batch_bytes += record::encoded_bytes(payload.len()) as u64;
        }
        if batch_bytes > APPEND_BYTES_MAX {
            return Err(StoreError::InvalidArgument {
                reason: format!(
                    "{batch_bytes} bytes in one append; the limit is {APPEND_BYTES_MAX}"
                ),
            });
        }
        Ok(batch_bytes)
    }

    /// Writes the records (not synced) and returns their offsets.
    pub(crate) fn write(
        &self,
        payloads: &[&[u8]],
        timestamp_ms: u64,
    ) -> Result<Range<u64>, StoreError> {
        let batch_bytes = self.check_append(payloads)?;
        let mut writer = self.writer.lock();
        self.check_not_failed()?;
        let active_bytes = writer.active.meta.lock().bytes;
        if active_bytes > 0 && active_bytes + batch_bytes > self.options.segment_bytes_max {
            self.roll(&mut writer)
                .inspect_err(|error| self.fail_stop(error))?;
        }
        let first = writer.next_offset;
        let Writer {
            active, encode_buf, ..
        } = &mut *writer;
        encode_buf.clear();
        for (i, payload) in payloads.iter().enumerate() {
            record::encode_into(encode_buf, first + i as u64, timestamp_ms, payload);
        }
        let position = active.meta.lock().bytes;
        active
            .file
            .write_at(encode_buf, position)
            .map_err(io_error("write", &active.path))
            .inspect_err(|error| self.fail_stop(error))?;
        self.index_batch(active, encode_buf, position)
            .inspect_err(|error| self.fail_stop(error))?;
        writer.next_offset = first + payloads.len() as u64;
        self.written_end
            .store(writer.next_offset, Ordering::Release);
        if self.options.sync != SyncPolicy::Always {
            self.visible_end
                .store(writer.next_offset, Ordering::Release);
        }
        Ok(first..writer.next_offset)
    }

    /// Re-reads the just-encoded batch (a record is checked before it is written and
    /// after it is read back), updates the segment's metadata and writes index entries.
    fn index_batch(
        &self,
        segment: &Segment,
        batch: &[u8],
        position: u64,
    ) -> Result<(), StoreError> {
        let mut meta = segment.meta.lock();
        let mut at = 0;
        while at < batch.len() {
            let Decoded::Record { record, bytes } =
                record::decode(&batch[at..], self.options.record_bytes_max)
            else {
                panic!("a freshly encoded record does not decode");
            };
            assert_eq!(
                record.offset, meta.end_offset,
                "records are written in offset order"
            );
            if let Some(entry) = note_record(
                &mut meta,
                segment.base_offset,
                record,
                position + at as u64,
                self.options.index_interval_bytes,
            ) {
                let slot = index::entry_position(meta.entries.len() - 1);
                segment
                    .index_file
                    .write_at(&index::encode_entry(entry), slot)
                    .map_err(io_error("write", &segment.index_path))?;
            }
            at += bytes;
        }
        Ok(())
    }

    /// Seals the active segment (synced data, synced index with trailer) and starts a new
    /// one whose directory entry is durable before any record goes into it.
    fn roll(&self, writer: &mut Writer) -> Result<(), StoreError> {
        let old = Arc::clone(&writer.active);
        old.file.sync().map_err(io_error("fdatasync", &old.path))?;
        self.note_synced_by_roll(writer.next_offset);
        let meta = old.meta.lock().clone();
        recovery::write_sealed_index(&old, &meta)?;
        let new = recovery::create_segment(self.storage.as_ref(), &self.dir, writer.next_offset)?;
        self.segments.write().push(Arc::clone(&new));
        writer.active = new;
        tracing::debug!(base_offset = writer.next_offset, "rolled to a new segment");
        Ok(())
    }
}
