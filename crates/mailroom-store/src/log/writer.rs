//! The single writer of a log: encodes appends, writes them to the active segment, keeps
//! its index, and rolls to a new segment.

use std::ops::Range;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::flusher::{WRITEBACK_PARTS, WRITEBACK_STEP_BYTES_MIN};
use super::mark::Claim;
use super::recovery::{self, io_error, note_record};
use super::reindex;
use super::segment::Segment;
use super::{index, LogOptions, Shared, SyncPolicy, APPEND_BYTES_MAX, APPEND_RECORDS_MAX};
use crate::record::{self, Decoded, RecordRef};
use crate::StoreError;

/// Records buffered under [`SyncPolicy::Always`] are written out by the writer itself
/// once this many bytes wait (callers that write without waiting would otherwise grow
/// the buffer without bound).
const PENDING_BYTES_MAX: usize = 1 << 20;
/// Index entries go to the index file in batches of up to this many (one `pwrite`), not
/// one by one (a `pwrite` per 4 KiB of records). Reads use the in-memory index; the file
/// only speeds up recovery, which rebuilds the entries a crash lost by scanning the
/// active segment from the last entry on disk: at most this many index intervals (256 KiB
/// by default) more. Every sync round writes them too.
const INDEX_PENDING_ENTRIES_MAX: usize = 64;

/// What only the writer touches (behind `Shared::writer`).
#[derive(Debug)]
pub(crate) struct Writer {
    /// The segment appends go to.
    pub active: Arc<Segment>,
    /// The next offset to assign; every offset below it is written (not necessarily synced).
    pub next_offset: u64,
    /// Reused between appends to avoid an allocation per call.
    encode_buf: Vec<u8>,
    /// Under [`SyncPolicy::Always`]: records encoded but not yet written to the active
    /// segment, the last `meta.unflushed_bytes` of it. The next sync round writes them
    /// with one `pwrite` just before its `fdatasync` (so 64 one-record appends cost one
    /// write call, not 64). Nobody reads them before then: under Always readers see only
    /// durable records. Other policies write at once, since readers see records at once.
    pending: Vec<u8>,
    /// Under the relaxed policies: once the active segment reaches this many bytes, the
    /// writer asks the background thread for a writeback sync (see `flusher.rs`).
    writeback_at_bytes: u64,
    /// Index entries of the active segment not yet written to its index file.
    index_pending: IndexPending,
    /// How long the active segment's file is at least: past its records, the rest is
    /// preallocated zeros (see `preallocate.rs`).
    pub allocated_bytes: u64,
    /// No preallocation is tried before the active segment holds this many bytes: set
    /// past a failed one, so a full disk is not asked again every round.
    pub preallocate_after_bytes: u64,
}

/// Encoded index entries waiting to be written, consecutive from entry `first_entry`.
#[derive(Debug, Default)]
struct IndexPending {
    bytes: Vec<u8>,
    first_entry: usize,
    entries: usize,
}

impl IndexPending {
    /// Adds entry number `number` (always the one after the last added).
    fn push(&mut self, number: usize, entry: index::IndexEntry) {
        if self.entries == 0 {
            self.first_entry = number;
        }
        debug_assert_eq!(number, self.first_entry + self.entries);
        self.bytes.extend_from_slice(&index::encode_entry(entry));
        self.entries += 1;
    }
}

impl Writer {
    /// The writer of `active`, whose file holds its records and nothing after them
    /// (recovery cut any zeros).
    pub fn new(active: Arc<Segment>, options: &LogOptions) -> Writer {
        let (next_offset, bytes) = {
            let meta = active.meta.lock();
            (meta.end_offset, meta.bytes)
        };
        Writer {
            active,
            next_offset,
            encode_buf: Vec::new(),
            pending: Vec::new(),
            writeback_at_bytes: bytes + writeback_step_bytes(options),
            index_pending: IndexPending::default(),
            allocated_bytes: bytes,
            preallocate_after_bytes: 0,
        }
    }
}

/// How many bytes go into a segment between two writeback requests.
fn writeback_step_bytes(options: &LogOptions) -> u64 {
    (options.segment_bytes_max / WRITEBACK_PARTS).max(WRITEBACK_STEP_BYTES_MIN)
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

    /// Writes the records (not synced) and returns their offsets. `has_metadata` says
    /// which bodies open with a metadata block: empty for none, else one per body.
    pub(crate) fn write(
        &self,
        payloads: &[&[u8]],
        has_metadata: &[bool],
        timestamp_ms: u64,
    ) -> Result<Range<u64>, StoreError> {
        assert!(
            has_metadata.is_empty() || has_metadata.len() == payloads.len(),
            "one metadata flag per body"
        );
        let batch_bytes = self.check_append(payloads)?;
        let mut writer = self.writer.lock();
        self.check_not_failed()?;
        let active_bytes = writer.active.meta.lock().bytes;
        if active_bytes > 0 && active_bytes + batch_bytes > self.options.segment_bytes_max {
            if let Err(error) = self.roll(&mut writer) {
                // Under the relaxed policies nothing of this write reached the file.
                self.fail_stop_cutting(&writer, &error, None);
                return Err(error);
            }
        }
        let first = writer.next_offset;
        let buffered = self.options.sync == SyncPolicy::Always;
        let Writer {
            active,
            encode_buf,
            pending,
            index_pending,
            ..
        } = &mut *writer;
        let buf = if buffered { pending } else { encode_buf };
        if !buffered {
            buf.clear();
        }
        let batch_start = buf.len();
        for (i, payload) in payloads.iter().enumerate() {
            let flagged = has_metadata.get(i).copied().unwrap_or(false);
            record::encode_body_into(buf, first + i as u64, timestamp_ms, payload, flagged);
        }
        let batch = &buf[batch_start..];
        debug_assert!(self.batch_decodes_to(batch, payloads, first));
        let position = active.meta.lock().bytes;
        if !buffered {
            if let Err(error) = active
                .file
                .write_at(batch, position)
                .map_err(io_error("write", &active.path))
            {
                self.fail_stop_cutting(&writer, &error, Some(position));
                return Err(error);
            }
        }
        let unflushed = if buffered { batch.len() as u64 } else { 0 };
        let batch_at = (position, unflushed);
        self.index_batch(
            active,
            payloads,
            first,
            timestamp_ms,
            batch_at,
            index_pending,
        );
        if writer.pending.len() >= PENDING_BYTES_MAX
            || writer.index_pending.entries >= INDEX_PENDING_ENTRIES_MAX
        {
            if let Err(error) = self.flush_pending(&mut writer) {
                // The batch is in the file but its caller is told it failed: cut it.
                self.fail_stop_cutting(&writer, &error, Some(position));
                return Err(error);
            }
        }
        writer.next_offset = first + payloads.len() as u64;
        self.written_end
            .store(writer.next_offset, Ordering::Release);
        if self.options.sync != SyncPolicy::Always {
            self.visible_end
                .store(writer.next_offset, Ordering::Release);
        }
        // After `written_end`, so the writeback sync covers this batch too.
        let written_bytes = position + batch_bytes;
        if !buffered && written_bytes >= writer.writeback_at_bytes {
            writer.writeback_at_bytes = written_bytes + writeback_step_bytes(&self.options);
            self.flusher.request_writeback();
        }
        Ok(first..writer.next_offset)
    }

    /// Updates the segment's metadata for the just-written batch (at `position`, of which
    /// `unflushed_bytes` are still in the write buffer) and queues its index entries in
    /// `index_pending`. Works from the payloads (their encoded sizes are known), rather
    /// than decoding the batch again: that cost a second CRC per record on the hot path.
    /// Debug builds still check that the batch decodes to exactly these records.
    fn index_batch(
        &self,
        segment: &Segment,
        payloads: &[&[u8]],
        first: u64,
        timestamp_ms: u64,
        (position, unflushed_bytes): (u64, u64),
        index_pending: &mut IndexPending,
    ) {
        let mut meta = segment.meta.lock();
        // Under the same lock as `bytes`, so a reader never sees buffered bytes as in the file.
        meta.unflushed_bytes += unflushed_bytes;
        debug_assert_eq!(
            meta.end_offset, first,
            "records are written in offset order"
        );
        let mut at = position;
        for (offset, payload) in (first..).zip(payloads) {
            // Only the record's length matters here, so the metadata flag is left out.
            let record = RecordRef {
                offset,
                timestamp_ms,
                payload,
                has_metadata: false,
            };
            if let Some(entry) = note_record(
                &mut meta,
                segment.base_offset,
                record,
                at,
                self.options.index_interval_bytes,
            ) {
                index_pending.push(meta.entries.len() - 1, entry);
            }
            at += record::encoded_bytes(payload.len()) as u64;
        }
    }

    /// Writes the queued index entries (see `Writer::index_pending`) to the active
    /// segment's index file. The caller makes the log fail-stop on failure
    /// ([`Shared::fail_stop_cutting`]).
    fn flush_index(&self, writer: &mut Writer) -> Result<(), StoreError> {
        let pending = &mut writer.index_pending;
        if pending.entries == 0 {
            return Ok(());
        }
        let segment = &writer.active;
        segment
            .index_file
            .write_at(&pending.bytes, index::entry_position(pending.first_entry))
            .map_err(io_error("write", &segment.index_path))?;
        pending.bytes.clear();
        pending.entries = 0;
        Ok(())
    }

    /// Writes the buffered records (see `Writer::pending`), then the queued index entries
    /// (after their records, as `docs/storage.md` says), to the active segment. The
    /// caller makes the log fail-stop on failure ([`Shared::fail_stop_cutting`]).
    pub(crate) fn flush_pending(&self, writer: &mut Writer) -> Result<(), StoreError> {
        if !writer.pending.is_empty() {
            let active = &writer.active;
            let position = {
                let meta = active.meta.lock();
                debug_assert_eq!(meta.unflushed_bytes, writer.pending.len() as u64);
                meta.bytes - meta.unflushed_bytes
            };
            active
                .file
                .write_at(&writer.pending, position)
                .map_err(io_error("write", &active.path))?;
            active.meta.lock().unflushed_bytes = 0;
            writer.pending.clear();
            writer.pending.shrink_to(PENDING_BYTES_MAX);
        }
        self.flush_index(writer)
    }

    /// Refuses to go on after an earlier write or sync failure.
    pub(super) fn check_not_failed(&self) -> Result<(), StoreError> {
        match &*self.failure.lock() {
            Some(reason) => Err(StoreError::FailStopped {
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Makes the log fail-stop, remembering the first failure.
    pub(super) fn fail_stop(&self, error: &StoreError) {
        let mut failure = self.failure.lock();
        if failure.is_none() {
            tracing::error!(dir = %self.dir.display(), %error, "log is fail-stop: refusing further writes");
            *failure = Some(error.to_string());
        }
    }

    /// Makes the log fail-stop after `error`, first cutting from the active segment what
    /// a failed write may have left in it that no caller will ever be told was
    /// published, so that an error answer always means "not published" (see
    /// `docs/storage.md`, "A failed write is not published"):
    ///
    /// - under [`SyncPolicy::Always`], everything past the last synced length: no record
    ///   there was confirmed, and from the fail-stop on every waiter for one is answered
    ///   with an error;
    /// - under the relaxed policies, the failed write's own bytes, from `relaxed_cut_at`
    ///   (`None`: it wrote nothing): the records before it were confirmed when written.
    ///
    /// Called with the writer lock held, and the cut made before the failure is
    /// published, so no waiter is answered while those bytes are still in the file and
    /// no writer adds more after them. A cut that fails is logged: the outcome of the
    /// writes answered with the error is then unknown (the reason says so).
    pub(crate) fn fail_stop_cutting(
        &self,
        writer: &Writer,
        error: &StoreError,
        relaxed_cut_at: Option<u64>,
    ) {
        let keep = if self.options.sync == SyncPolicy::Always {
            let synced = *self.synced.lock();
            debug_assert_eq!(synced.base_offset, writer.active.base_offset);
            Some((synced.segment_bytes, synced.end_offset))
        } else {
            // The failed write's records start at the writer's next offset.
            relaxed_cut_at.map(|at| (at, writer.next_offset))
        };
        let Some((keep, end_offset)) = keep else {
            self.fail_stop(error);
            return;
        };
        let active = &writer.active;
        {
            // Readers must not look past the cut either (they read up to `bytes`).
            let mut meta = active.meta.lock();
            if meta.bytes > keep {
                meta.bytes = keep;
                meta.end_offset = end_offset;
                meta.unflushed_bytes = 0;
                meta.entries
                    .retain(|entry| u64::from(entry.position) < keep);
            }
        }
        let cut = active
            .file
            .len()
            .and_then(|len| {
                if len > keep {
                    active.file.set_len(keep)?;
                    active.file.sync()?;
                }
                Ok(())
            })
            .map_err(io_error("truncate", &active.path));
        match cut {
            Ok(()) => self.fail_stop(error),
            Err(cut_error) => {
                tracing::error!(%cut_error, "could not cut a failed write from the log");
                self.fail_stop(&StoreError::FailStopped {
                    reason: format!(
                        "{error}; then cutting the failed write failed ({cut_error}), so \
                         writes answered with this error may still be found after a restart"
                    ),
                });
            }
        }
    }

    /// Checks that `batch` decodes to exactly `payloads` at offsets from `first`.
    fn batch_decodes_to(&self, batch: &[u8], payloads: &[&[u8]], first: u64) -> bool {
        let mut at = 0;
        for (offset, payload) in (first..).zip(payloads) {
            match record::decode(&batch[at..], self.options.record_bytes_max) {
                Decoded::Record { record, bytes } => {
                    if record.offset != offset || record.payload != *payload {
                        return false;
                    }
                    at += bytes;
                }
                _ => return false,
            }
        }
        at == batch.len()
    }

    /// Seals the active segment (synced data, synced index with trailer) and starts a new
    /// one whose directory entry is durable before any record goes into it.
    fn roll(&self, writer: &mut Writer) -> Result<(), StoreError> {
        self.flush_pending(writer)?;
        let old = Arc::clone(&writer.active);
        let bytes = old.meta.lock().bytes;
        if writer.allocated_bytes > bytes {
            // A sealed segment is its records and nothing else, as before preallocation:
            // its trailer's length is the file's, and the sync below makes the cut stick.
            old.file
                .set_len(bytes)
                .map_err(io_error("truncate", &old.path))?;
        }
        // Through the gate: not after (or during) a round's failed sync of this file.
        self.segment_syncs.sync(&old)?;
        // All of it is durable now, so a failure below cuts nothing of it.
        *self.synced.lock() = Claim::of(&old);
        self.note_synced_by_roll(writer.next_offset);
        let meta = old.meta.lock().clone();
        reindex::write_sealed_index(&old, &meta)?;
        let new = recovery::create_segment(self.storage.as_ref(), &self.dir, writer.next_offset)?;
        *self.synced.lock() = Claim::empty(new.base_offset);
        self.segments.write().push(Arc::clone(&new));
        writer.active = new;
        writer.allocated_bytes = 0;
        writer.preallocate_after_bytes = 0;
        writer.writeback_at_bytes = writeback_step_bytes(&self.options);
        tracing::debug!(base_offset = writer.next_offset, "rolled to a new segment");
        Ok(())
    }
}
