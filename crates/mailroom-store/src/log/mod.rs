//! The segmented, append-only log: records in numbered segment files, a sparse index
//! per segment, crash recovery, and group commit.
//!
//! A [`Log`] owns one directory. Each record gets the next offset (0, 1, 2, ...); offsets
//! never have gaps. Records live in segments, files named after the offset of their first
//! record (`00000000000000000000.log`), each with a sparse index (`.idx`) that says where
//! every few KiB of records start. A new segment is started once the active one would
//! grow past [`LogOptions::segment_bytes_max`]; retention deletes whole segments from the
//! front ([`Log::delete_segments_before`]).
//!
//! # Durability
//!
//! With [`SyncPolicy::Always`] (the default) [`Log::append`] returns only after an
//! `fdatasync` covering its records; concurrent appenders share one sync (group commit).
//! Readers see only durable records: [`Log::end`] is the end of what is on disk. A
//! caller that must not block (an async task, or a thread holding its own lock) splits
//! an append into [`Log::write`] and then [`Log::durable`], a future that the log's sync
//! thread resolves, or [`Log::wait_durable`]. With
//! [`SyncPolicy::Interval`] and [`SyncPolicy::Never`], appends return once written to the
//! OS, readers see them at once, and a power cut can lose what was not yet synced (see the
//! variants). A failed write or sync makes the log *fail-stop*: every later append
//! returns [`StoreError::FailStopped`]; reads keep working; reopening recovers.
//!
//! # Recovery
//!
//! [`Log::open`] trusts sealed segments by their index trailer and checks only the tail
//! of the active segment. A torn tail (a record cut short by a crash, with nothing valid
//! after it, past the log's *synced mark*) is truncated; any other damage, including
//! damage to a record the mark says was durable, is reported as [`StoreError::Corrupt`],
//! never skipped, and [`Log::repair`] is the way on. A damaged index is rebuilt, never
//! reported. `docs/storage.md` gives the formats byte by byte and the full rules.
//!
//! # Example
//!
//! ```
//! use std::path::Path;
//! use std::sync::Arc;
//! use mailroom_store::log::{Log, LogOptions};
//! use mailroom_store::storage::SimStorage;
//!
//! let storage = Arc::new(SimStorage::new());
//! let log = Log::open(storage.clone(), Path::new("/log"), LogOptions::default())?;
//! assert_eq!(log.append(&[b"a", b"b"], 1_000)?, 0..2);
//! assert_eq!(&log.read(1)?.unwrap().payload[..], b"b");
//! drop(log);
//!
//! // Everything an append confirmed survives a power cut.
//! let after_crash = Arc::new(storage.crash(42));
//! let log = Log::open(after_crash, Path::new("/log"), LogOptions::default())?;
//! assert_eq!(log.end(), 2);
//! # Ok::<(), mailroom_store::StoreError>(())
//! ```

mod commit;
mod durable;
mod flusher;
mod index;
mod lookup;
mod mark;
mod options;
mod preallocate;
mod recovery;
mod reindex;
mod repair;
mod retention;
mod salvage;
mod segment;
mod segment_sync;
mod sync_round;
mod writer;

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Mutex, RwLock};

pub use self::durable::{Durable, Leader, Turn};
pub use self::lookup::Record;
pub use self::options::{LogOptions, SyncPolicy, RECORD_BYTES_LIMIT, SEGMENT_BYTES_LIMIT};
pub use self::repair::Repaired;
pub use self::retention::SegmentInfo;
pub use self::salvage::Cut;

use self::commit::GroupCommit;
use self::flusher::Flusher;
use self::mark::{Claim, SyncedMark};
use self::recovery::io_error;
use self::segment::Segment;
use self::segment_sync::SegmentSyncs;
use self::writer::Writer;
use crate::storage::Storage;
use crate::StoreError;

/// The most records one [`Log::append`] may carry.
pub const APPEND_RECORDS_MAX: usize = 1 << 16;
/// The most bytes (headers included) one [`Log::append`] may carry.
pub const APPEND_BYTES_MAX: u64 = 256 << 20;

/// A segmented, append-only log in one directory. `Send + Sync`; share it with an `Arc`.
///
/// See the [module documentation](self) for durability and recovery.
#[derive(Debug)]
pub struct Log {
    shared: Arc<Shared>,
    /// The sync thread (Always) or the flusher (the relaxed policies); stopped on drop.
    background: Option<JoinHandle<()>>,
}

/// The writer's lock: the standard library's, which on Linux spins briefly and then sleeps
/// on a futex, where parking_lot's spins, then yields the CPU in a loop (`sched_yield`,
/// 4,700-22,000 a 100,000 contended relaxed publishes, BENCHMARKS.md) before it parks: with the
/// clients on the same cores, those yields were CPU taken from them. A writer that
/// panicked leaves the lock usable, as parking_lot's did (the log's own fail-stop state
/// says whether writing may go on).
#[derive(Debug)]
struct WriterLock(std::sync::Mutex<Writer>);

impl WriterLock {
    fn lock(&self) -> std::sync::MutexGuard<'_, Writer> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The state every handle, every [`Durable`] and the background thread share.
#[derive(Debug)]
struct Shared {
    storage: Arc<dyn Storage>,
    dir: PathBuf,
    options: LogOptions,
    /// Lock order: `writer`, then `segments`, then a segment's `meta`; `commit` after
    /// `writer`; `failure` last.
    writer: WriterLock,
    /// Oldest first; the last is the active segment.
    segments: RwLock<Vec<Arc<Segment>>>,
    /// One past the last offset readers may see.
    visible_end: AtomicU64,
    /// One past the last offset whose write has finished (durable or not).
    written_end: AtomicU64,
    commit: GroupCommit,
    /// The first write or sync failure; set once, never cleared.
    failure: Mutex<Option<String>>,
    flusher: Flusher,
    /// How far the active segment is known to be durable; written after every sync
    /// round (see `mark.rs`). Taken on its own, never while holding another lock.
    mark: Mutex<SyncedMark>,
    /// How much of the active segment an `fdatasync` (or the recovery that opened it)
    /// made durable: what a failed write is cut back to under [`SyncPolicy::Always`]
    /// (`Shared::fail_stop_cutting`). Taken last, after the writer lock.
    synced: Mutex<Claim>,
    /// Every sync that confirms records goes through this (see `segment_sync.rs`).
    segment_syncs: SegmentSyncs,
}

impl Log {
    /// Opens or creates the log in `dir` (a directory it owns), recovering: truncates a
    /// torn tail of the last segment, rebuilds a missing or torn index, and reports a
    /// checksum failure before the tail as [`StoreError::Corrupt`]. Opening does not
    /// re-read whole segments: sealed segments are trusted by their index trailer, and only
    /// the active segment after its last index entry is scanned.
    ///
    /// # Errors
    /// [`StoreError::InvalidArgument`] for options out of range; [`StoreError::Corrupt`]
    /// for a foreign file in `dir`, damage other than a torn tail, or segments that do not
    /// join up; [`StoreError::Io`] when the file system fails (including a read-only one).
    ///
    /// # Example
    /// ```
    /// # use std::{path::Path, sync::Arc};
    /// use mailroom_store::log::{Log, LogOptions, SyncPolicy};
    /// use mailroom_store::storage::FsStorage;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let options = LogOptions { sync: SyncPolicy::Never, ..LogOptions::default() };
    /// let log = Log::open(Arc::new(FsStorage), dir.path(), options)?;
    /// assert_eq!((log.start(), log.end()), (0, 0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open(
        storage: Arc<dyn Storage>,
        dir: &Path,
        options: LogOptions,
    ) -> Result<Log, StoreError> {
        options.validate()?;
        let recovery::Recovered { segments, mark } =
            recovery::recover(storage.as_ref(), dir, &options)?;
        let active = Arc::clone(
            segments
                .last()
                .expect("recover returns at least one segment"),
        );
        let synced = Claim::of(&active);
        let writer = Writer::new(active, &options);
        let end = writer.next_offset;
        let sync = options.sync;
        let shared = Arc::new(Shared {
            storage,
            dir: dir.to_path_buf(),
            options,
            writer: WriterLock(std::sync::Mutex::new(writer)),
            segments: RwLock::new(segments),
            visible_end: AtomicU64::new(end),
            written_end: AtomicU64::new(end),
            // Recovery read back only what survived, so all of it counts as durable.
            commit: GroupCommit::new(end),
            failure: Mutex::new(None),
            flusher: Flusher::default(),
            mark: Mutex::new(mark),
            synced: Mutex::new(synced),
            segment_syncs: SegmentSyncs::default(),
        });
        let background = match sync {
            SyncPolicy::Always => {
                commit::spawn_syncer(&shared).map_err(io_error("spawn sync thread", dir))?
            }
            SyncPolicy::Interval(interval) => flusher::spawn_flusher(&shared, Some(interval))
                .map_err(io_error("spawn flush thread", dir))?,
            SyncPolicy::Never => flusher::spawn_flusher(&shared, None)
                .map_err(io_error("spawn flush thread", dir))?,
        };
        let background = Some(background);
        Ok(Log { shared, background })
    }

    /// Appends the payloads as consecutive records stamped `timestamp_ms` (the caller
    /// passes the clock, which keeps tests deterministic) and returns their offsets.
    ///
    /// When it returns, the records are durable per the [`SyncPolicy`]: with `Always`,
    /// after one `fdatasync` shared with concurrent appenders. An empty `payloads` writes
    /// nothing and returns an empty range at [`Log::end`].
    ///
    /// # Errors
    /// [`StoreError::InvalidArgument`] if a payload exceeds `record_bytes_max` or the
    /// batch exceeds [`APPEND_RECORDS_MAX`] / [`APPEND_BYTES_MAX`] (nothing is written);
    /// [`StoreError::Io`] if a write or sync fails, after which the log is fail-stop;
    /// [`StoreError::FailStopped`] once it is.
    ///
    /// # Example
    /// ```
    /// # use std::{path::Path, sync::Arc};
    /// # use mailroom_store::log::{Log, LogOptions};
    /// # use mailroom_store::storage::SimStorage;
    /// let log = Log::open(Arc::new(SimStorage::new()), Path::new("/l"), LogOptions::default())?;
    /// assert_eq!(log.append(&[b"x"], 5)?, 0..1);
    /// assert_eq!(log.append(&[b"y", b"z"], 6)?, 1..3);
    /// # Ok::<(), mailroom_store::StoreError>(())
    /// ```
    pub fn append(&self, payloads: &[&[u8]], timestamp_ms: u64) -> Result<Range<u64>, StoreError> {
        if payloads.is_empty() {
            self.shared.check_not_failed()?;
            let end = self.end();
            return Ok(end..end);
        }
        let range = self.shared.write(payloads, &[], timestamp_ms)?;
        self.wait_durable(range.end)?;
        Ok(range)
    }

    /// Writes `payloads` like [`append`](Self::append) but returns without waiting for
    /// durability: pair it with [`durable`](Self::durable) or
    /// [`wait_durable`](Self::wait_durable), which lets a caller release its own locks
    /// (or yield to its executor) before it waits. Under [`SyncPolicy::Always`] readers do not
    /// see the records until they are durable.
    ///
    /// # Errors
    /// As [`append`](Self::append), except that no sync runs here.
    ///
    /// # Example
    /// ```
    /// # use std::{path::Path, sync::Arc};
    /// # use mailroom_store::log::{Log, LogOptions};
    /// # use mailroom_store::storage::SimStorage;
    /// let log = Log::open(Arc::new(SimStorage::new()), Path::new("/l"), LogOptions::default())?;
    /// let written = log.write(&[b"x", b"y"], 5)?;
    /// assert_eq!(log.end(), 0); // written, not yet durable: not visible
    /// log.wait_durable(written.end)?;
    /// assert_eq!(log.end(), 2);
    /// # Ok::<(), mailroom_store::StoreError>(())
    /// ```
    pub fn write(&self, payloads: &[&[u8]], timestamp_ms: u64) -> Result<Range<u64>, StoreError> {
        if payloads.is_empty() {
            self.shared.check_not_failed()?;
            let end = self.written_end();
            return Ok(end..end);
        }
        self.shared.write(payloads, &[], timestamp_ms)
    }

    /// Writes record bodies like [`write`](Self::write), where `has_metadata[i]` says
    /// that body `i` opens with a metadata block (record format 2, see
    /// `crate::record`): the message log's write of messages with keys or headers.
    ///
    /// # Errors
    /// As [`write`](Self::write).
    ///
    /// # Panics
    /// If `has_metadata` is not one flag per body, or a flagged body opens with no
    /// metadata block that fits.
    ///
    /// # Example
    /// ```
    /// # use std::{path::Path, sync::Arc};
    /// # use mailroom_store::log::{Log, LogOptions};
    /// # use mailroom_store::storage::SimStorage;
    /// let log = Log::open(Arc::new(SimStorage::new()), Path::new("/l"), LogOptions::default())?;
    /// let mut body = 5u32.to_le_bytes().to_vec(); // a block of 5 bytes: length, then 1 byte
    /// body.extend_from_slice(b"mpayload");
    /// let written = log.write_bodies(&[b"bare", &body], &[false, true], 5)?;
    /// log.wait_durable(written.end)?;
    /// let record = log.read(1)?.unwrap();
    /// assert_eq!((record.metadata.as_deref(), &record.payload[..]), (Some(&body[..5]), &b"payload"[..]));
    /// assert_eq!(log.read(0)?.unwrap().metadata, None);
    /// # Ok::<(), mailroom_store::StoreError>(())
    /// ```
    pub fn write_bodies(
        &self,
        bodies: &[&[u8]],
        has_metadata: &[bool],
        timestamp_ms: u64,
    ) -> Result<Range<u64>, StoreError> {
        assert_eq!(
            bodies.len(),
            has_metadata.len(),
            "one metadata flag per body"
        );
        if bodies.is_empty() {
            self.shared.check_not_failed()?;
            let end = self.written_end();
            return Ok(end..end);
        }
        self.shared.write(bodies, has_metadata, timestamp_ms)
    }

    /// Returns once every offset below `end` is durable, sharing one `fdatasync` with
    /// concurrent waiters; if no sync is running, the calling thread runs it. Under
    /// [`SyncPolicy::Interval`] and [`SyncPolicy::Never`] it returns at once: those
    /// policies do not wait for the disk. Same as `self.durable(end).wait()`.
    ///
    /// # Errors
    /// [`StoreError::Io`] if the sync this thread ran fails (the log is then fail-stop);
    /// [`StoreError::FailStopped`] if the log is fail-stop (including after a shared sync
    /// failed); [`StoreError::InvalidArgument`] if `end` is past
    /// [`written_end`](Self::written_end).
    pub fn wait_durable(&self, end: u64) -> Result<(), StoreError> {
        if self.shared.options.sync == SyncPolicy::Always {
            self.shared.wait_durable(end)
        } else {
            self.shared.check_wait(end)
        }
    }

    /// A future (with a blocking [`Durable::wait`] too) that resolves once every offset
    /// below `end` is durable. Under [`SyncPolicy::Always`] the log's sync thread runs
    /// the `fdatasync` (shared with every concurrent waiter) and wakes the future, so
    /// awaiting it never blocks an executor thread; under the other policies it is ready
    /// at once. It holds no borrow of the log.
    ///
    /// # Errors
    /// The future resolves to the errors of [`wait_durable`](Self::wait_durable):
    /// [`StoreError::FailStopped`] if the sync failed or the log was already fail-stop;
    /// [`StoreError::InvalidArgument`] if `end` is past [`written_end`](Self::written_end).
    ///
    /// # Example
    /// ```
    /// # use std::{path::Path, sync::Arc};
    /// # use mailroom_store::log::{Log, LogOptions};
    /// # use mailroom_store::storage::SimStorage;
    /// let log = Log::open(Arc::new(SimStorage::new()), Path::new("/l"), LogOptions::default())?;
    /// let first = log.write(&[b"a"], 1)?;
    /// let second = log.write(&[b"b"], 2)?;
    /// // One sync makes both durable; each waiter is woken once.
    /// let both = futures::future::join(log.durable(first.end), log.durable(second.end));
    /// let (a, b) = futures::executor::block_on(both);
    /// a.and(b)?;
    /// assert_eq!(log.end(), 2);
    /// # Ok::<(), mailroom_store::StoreError>(())
    /// ```
    pub fn durable(&self, end: u64) -> Durable {
        Durable::new(Arc::clone(&self.shared), end)
    }

    /// One past the last offset written, durable or not (see [`end`](Self::end)). Under
    /// [`SyncPolicy::Always`] the newest of these may still be in the log's write buffer,
    /// which the next sync writes out before its `fdatasync`.
    pub fn written_end(&self) -> u64 {
        self.shared.written_end.load(Ordering::Acquire)
    }

    /// Forces an `fdatasync` of everything written so far (shared with concurrent
    /// appenders, like theirs).
    ///
    /// # Errors
    /// [`StoreError::Io`] if the sync fails (the log is then fail-stop), or
    /// [`StoreError::FailStopped`].
    ///
    /// # Example
    /// ```
    /// # use std::{path::Path, sync::Arc};
    /// use mailroom_store::log::{Log, LogOptions, SyncPolicy};
    /// use mailroom_store::storage::SimStorage;
    ///
    /// let storage = SimStorage::new();
    /// let options = LogOptions { sync: SyncPolicy::Never, ..LogOptions::default() };
    /// let log = Log::open(Arc::new(storage.clone()), Path::new("/l"), options.clone())?;
    /// log.append(&[b"x"], 0)?; // written, not yet durable
    /// log.sync()?;
    /// let after_crash = Log::open(Arc::new(storage.crash(1)), Path::new("/l"), options)?;
    /// assert_eq!(after_crash.end(), 1);
    /// # Ok::<(), mailroom_store::StoreError>(())
    /// ```
    pub fn sync(&self) -> Result<(), StoreError> {
        self.shared.sync_written()
    }

    /// Why the log is fail-stop (the first write or sync failure), or `None` while it
    /// accepts writes: what a health check reports.
    pub fn failure(&self) -> Option<String> {
        self.shared.failure.lock().clone()
    }

    /// Makes the log fail-stop with `reason` (unless it already is) without cutting
    /// anything, so that nothing in this handle writes to its files again, not even at
    /// drop: for a log whose directory is about to be opened again.
    pub(crate) fn close(&self, reason: &StoreError) {
        let _writer = self.shared.writer.lock();
        // Not `fail_stop`: closing is no failure worth an error in the log.
        self.shared
            .failure
            .lock()
            .get_or_insert_with(|| reason.to_string());
    }
}

impl Shared {
    /// What waiting for `end` says under a policy that does not wait for the disk.
    /// Records below `written_end` were written, so they were confirmed the moment their
    /// write returned, and stay in the log after a restart: their wait succeeds even if
    /// the log failed since (an error answer must mean "not published").
    fn check_wait(&self, end: u64) -> Result<(), StoreError> {
        let written_end = self.written_end.load(Ordering::Acquire);
        if end > written_end {
            return Err(StoreError::InvalidArgument {
                reason: format!("cannot wait for end {end}: only {written_end} written"),
            });
        }
        Ok(())
    }

    /// Syncs everything written so far, if it is not already durable.
    fn sync_written(&self) -> Result<(), StoreError> {
        let target = self.written_end.load(Ordering::Acquire);
        self.check_not_failed()?;
        self.wait_durable(target)
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        if let Some(background) = self.background.take() {
            self.shared.flusher.stop();
            self.shared.commit.stop_syncer();
            // A panic in the thread was already reported by the panic hook.
            let _ = background.join();
        }
        // Records written but never waited for go to the OS too, as they would without
        // the buffer, so a reopen in this process sees them. Not synced: no one waited.
        if self.shared.check_not_failed().is_ok() {
            let mut writer = self.shared.writer.lock();
            // A failure is logged by fail_stop; there is no caller left to tell.
            if let Err(error) = self.shared.flush_pending(&mut writer) {
                self.shared.fail_stop_cutting(&writer, &error, None);
            }
        }
        // Under Always every confirmed record is in the mark: make it durable, so a power
        // cut after a clean close cannot turn rot in the newest records into a "torn
        // tail". The relaxed policies promise no sync at drop, so they leave it.
        if self.shared.options.sync == SyncPolicy::Always && self.shared.check_not_failed().is_ok()
        {
            if let Err(error) = self.shared.mark.lock().sync_if_dirty() {
                tracing::warn!(%error, "could not sync the synced mark at close");
            }
        }
    }
}
