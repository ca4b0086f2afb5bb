//! The retained message log: append-only, gap-free, readable without waiting on appends.
//!
//! # Layout
//!
//! Messages live in fixed-size *chunks* of [`CHUNK_SLOTS`] slots, allocated as the log
//! grows and never moved, so a reference to a published message stays valid for as long
//! as the log lives. Chunks are found through a *directory* of [`LEVELS`] levels, where
//! level `k` holds `2^k` chunk pointers and is allocated the first time it is needed. Both
//! lookups are O(1) and lock-free. The directory costs a pointer per chunk and each chunk
//! a reference count (shared with the writers' cursor, which keeps the chunk being filled
//! at hand), so the memory beyond the payload is a few hundredths of a byte per message
//! plus the unused tail of the newest chunk.
//!
//! # Publication protocol
//!
//! - Writers take the append lock, write the slot at the current length, then store the
//!   new length with `Release` and unlock. So slots are written in order, one writer at
//!   a time, and each slot exactly once.
//! - Readers load the length with `Acquire` and only touch slots below it. The `Release`
//!   store made every slot below that length visible, and no slot below it is written
//!   again, so a reader never waits for a writer beyond that single load.
//!
//! This is the only `unsafe` in the topic module. The protocol is model-checked with loom
//! (`RUSTFLAGS="--cfg loom" cargo test -p mailroom --lib topic::log --release`) and the
//! unit tests below run under miri (`cargo +nightly miri test -p mailroom --lib topic`).

use std::mem::MaybeUninit;
use std::sync::{Arc, OnceLock};

use super::sync::{AtomicU64, Mutex, Ordering, UnsafeCell};

/// Messages per chunk. A power of two, so an offset splits into chunk and slot by shifts.
/// Small under loom, so that a model with a handful of messages crosses chunk boundaries.
pub(crate) const CHUNK_SLOTS: usize = if cfg!(loom) { 2 } else { 1024 };

/// Directory levels. Level `k` holds `2^k` chunks, so the directory addresses
/// `2^LEVELS - 1` chunks in all.
pub(crate) const LEVELS: usize = 32;

/// The most messages one log can hold: `(2^LEVELS - 1) * CHUNK_SLOTS`, about 4.4 × 10^12.
pub(crate) const MESSAGES_MAX: u64 = ((1u64 << LEVELS) - 1) * CHUNK_SLOTS as u64;

const CHUNK_SHIFT: u32 = CHUNK_SLOTS.trailing_zeros();
const SLOT_MASK: u64 = CHUNK_SLOTS as u64 - 1;
const _: () = assert!(CHUNK_SLOTS.is_power_of_two());

/// One message's storage: uninitialised until its writer fills it, then read-only.
struct Slot<M>(UnsafeCell<MaybeUninit<M>>);

// SAFETY: a slot is written once, by the one writer holding the append lock, before the
// `Release` store that publishes it; afterwards it is only read (through `&M`) until the
// log is dropped with exclusive access. Sharing a `Slot` across threads therefore shares
// `&M` (needs `M: Sync`) and moves an `M` from the publishing thread to whichever thread
// drops the log (needs `M: Send`).
unsafe impl<M: Send + Sync> Sync for Slot<M> {}

type Chunk<M> = [Slot<M>; CHUNK_SLOTS];
type Level<M> = Box<[OnceLock<Arc<Chunk<M>>>]>;

/// What the append lock protects: the writers' own copy of the length, and the chunk
/// being filled, so that a publish looks a chunk up in the directory once per chunk.
struct Tail<M> {
    next: u64,
    chunk: Option<Arc<Chunk<M>>>,
}

/// Pads and aligns its content to two cache lines (the unit the adjacent-line prefetcher
/// moves), so that it shares a line with nothing else.
#[repr(align(128))]
struct CacheLine<T>(T);

/// An append-only, gap-free sequence of messages. See the [module docs](self).
pub(crate) struct Log<M> {
    /// Serialises writers. Readers never take it.
    append: Mutex<Tail<M>>,
    /// How many slots are written and visible: the next offset to publish. On its own
    /// cache line, because every poll reads it: sharing a line with the append lock would
    /// make each publish pull that line back from the readers twice instead of once.
    published: CacheLine<AtomicU64>,
    levels: [OnceLock<Level<M>>; LEVELS],
}

impl<M> Log<M> {
    /// An empty log. Allocates nothing until the first publish.
    pub(crate) fn new() -> Self {
        Log {
            append: Mutex::new(Tail {
                next: 0,
                chunk: None,
            }),
            published: CacheLine(AtomicU64::new(0)),
            levels: std::array::from_fn(|_| OnceLock::new()),
        }
    }

    /// The number of published messages, which is also the next offset.
    #[inline]
    pub(crate) fn len(&self) -> u64 {
        self.published.0.load(Ordering::Acquire)
    }

    /// Appends `message` and returns its offset.
    ///
    /// # Panics
    ///
    /// If the log already holds [`MESSAGES_MAX`] messages.
    #[inline]
    pub(crate) fn publish(&self, message: M) -> u64 {
        let mut tail = self.append.lock();
        // `tail.next` always equals `published`: only writers change either, under
        // this lock.
        let offset = tail.next;
        assert!(
            offset < MESSAGES_MAX,
            "the log is full ({MESSAGES_MAX} messages)"
        );
        let slot_index = (offset & SLOT_MASK) as usize;
        if slot_index == 0 {
            tail.chunk = Some(self.insert_chunk(offset));
        }
        let Some(chunk) = &tail.chunk else {
            unreachable!("the first offset of every chunk creates it")
        };
        // SAFETY: `offset` is the current length, so the slot is unpublished: no reader
        // touches it until the `Release` store below, which comes after this write. No
        // other writer touches it either: writers hold the append lock and each writes
        // only the slot at the length it read, then advances the length past it. So this
        // access is exclusive, and the slot is uninitialised (nothing leaks).
        chunk[slot_index]
            .0
            .with_mut(|cell| unsafe { (*cell).write(message) });
        tail.next = offset + 1;
        self.published.0.store(offset + 1, Ordering::Release);
        offset
    }

    /// The message at `offset`, or `None` if it has not been published.
    #[inline]
    pub(crate) fn get(&self, offset: u64) -> Option<&M> {
        if offset >= self.len() {
            return None;
        }
        let slot = self.published_slot(offset);
        // SAFETY: `offset < published`, loaded with `Acquire` above, so the writer's
        // write to this slot happened before this read (it preceded the matching
        // `Release` store), and the slot is initialised. Published slots are never written
        // again, and are dropped only by `Drop`, which has `&mut self`, so a shared
        // reference tied to `&self` stays valid and unaliased by any `&mut`.
        Some(slot.0.with(|cell| unsafe { (*cell).assume_init_ref() }))
    }

    /// Finds a published slot. Its chunk exists: the writer created it before publishing.
    fn published_slot(&self, offset: u64) -> &Slot<M> {
        let (level, index, slot) = locate(offset);
        let chunk = self.levels[level]
            .get()
            .and_then(|level| level[index].get())
            .expect("a published offset has a chunk");
        &chunk[slot]
    }

    /// Creates the chunk whose first offset is `offset`, and its directory level if
    /// this is the level's first chunk. Called with the append lock held. Cold: once per
    /// `CHUNK_SLOTS` publishes, and kept out of line so `publish` stays small to inline.
    #[cold]
    #[inline(never)]
    fn insert_chunk(&self, offset: u64) -> Arc<Chunk<M>> {
        let (level, index, _) = locate(offset);
        let level = self.levels[level].get_or_init(|| new_level(level));
        let chunk = new_chunk();
        if level[index].set(Arc::clone(&chunk)).is_err() {
            unreachable!("chunk {index} of level created twice");
        }
        chunk
    }
}

impl<M> Default for Log<M> {
    fn default() -> Self {
        Log::new()
    }
}

impl<M> Drop for Log<M> {
    fn drop(&mut self) {
        if !std::mem::needs_drop::<M>() {
            return;
        }
        let len = self.published.0.load(Ordering::Acquire);
        for offset in 0..len {
            let slot = self.published_slot(offset);
            // SAFETY: `&mut self` excludes every other access; `offset < published`, so
            // the slot was initialised, and this is the only place that drops it.
            slot.0
                .with_mut(|cell| unsafe { (*cell).assume_init_drop() });
        }
    }
}

/// Splits an offset into (directory level, chunk index in that level, slot in chunk).
/// Chunk `c` lives in level `k = floor(log2(c + 1))` at index `c + 1 - 2^k`.
#[inline]
fn locate(offset: u64) -> (usize, usize, usize) {
    let chunk = (offset >> CHUNK_SHIFT) + 1;
    let level = 63 - chunk.leading_zeros();
    let index = chunk - (1u64 << level);
    (
        level as usize,
        index as usize,
        (offset & SLOT_MASK) as usize,
    )
}

fn new_level<M>(level: usize) -> Level<M> {
    (0..1usize << level).map(|_| OnceLock::new()).collect()
}

fn new_chunk<M>() -> Arc<Chunk<M>> {
    let slots: Arc<[Slot<M>]> = (0..CHUNK_SLOTS)
        .map(|_| Slot(UnsafeCell::new(MaybeUninit::uninit())))
        .collect();
    // Built as a slice so that a large chunk never passes through the stack.
    match slots.try_into() {
        Ok(chunk) => chunk,
        Err(_) => unreachable!("the iterator yields exactly CHUNK_SLOTS slots"),
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    // Proves offsets map to distinct slots in order across chunk and level boundaries.
    #[test]
    fn locate_is_a_bijection_in_order() {
        let mut previous = locate(0);
        assert_eq!(previous, (0, 0, 0));
        for offset in 1..(CHUNK_SLOTS as u64 * 9) {
            let here = locate(offset);
            assert!(here > previous, "{offset}: {here:?} after {previous:?}");
            assert!(here.1 < 1 << here.0 && here.2 < CHUNK_SLOTS);
            previous = here;
        }
        let last = locate(MESSAGES_MAX - 1);
        assert_eq!(last, (LEVELS - 1, (1 << (LEVELS - 1)) - 1, CHUNK_SLOTS - 1));
    }

    // Proves published messages read back at their offsets and unpublished ones are absent.
    #[test]
    fn publish_then_get_across_chunks() {
        let log = Log::new();
        let count = if cfg!(miri) {
            3 * CHUNK_SLOTS + 1
        } else {
            40_000
        };
        for expected in 0..count as u64 {
            assert_eq!(log.publish(format!("m{expected}")), expected);
        }
        assert_eq!(log.len(), count as u64);
        for offset in 0..count as u64 {
            assert_eq!(log.get(offset), Some(&format!("m{offset}")));
        }
        assert_eq!(log.get(count as u64), None);
        assert_eq!(log.get(u64::MAX), None);
    }

    // Proves dropping a log drops every published message exactly once.
    #[test]
    fn drop_releases_every_message_once() {
        let witness = Arc::new(());
        let log = Log::new();
        for _ in 0..CHUNK_SLOTS + 3 {
            log.publish(Arc::clone(&witness));
        }
        assert_eq!(Arc::strong_count(&witness), CHUNK_SLOTS + 4);
        drop(log);
        assert_eq!(Arc::strong_count(&witness), 1);
    }

    // Proves readers racing two writers only ever see complete messages, and that each
    // writer's messages land in its own order with no gaps or duplicates overall.
    #[test]
    fn readers_race_writers() {
        let per_writer: u64 = if cfg!(miri) { 40 } else { 5_000 };
        let log: Log<(u64, u64)> = Log::new();
        std::thread::scope(|scope| {
            for writer in 0..2 {
                let log = &log;
                scope.spawn(move || {
                    for sequence in 0..per_writer {
                        log.publish((writer, sequence));
                    }
                });
            }
            let log = &log;
            scope.spawn(move || {
                let mut read = 0;
                let mut next_per_writer = [0u64; 2];
                while read < 2 * per_writer {
                    let Some(&(writer, sequence)) = log.get(read) else {
                        std::hint::spin_loop();
                        continue;
                    };
                    assert_eq!(sequence, next_per_writer[writer as usize]);
                    next_per_writer[writer as usize] += 1;
                    read += 1;
                }
            });
        });
        assert_eq!(log.len(), 2 * per_writer);
    }
}

#[cfg(all(test, loom))]
mod loom_model {
    use super::*;
    use loom::sync::Arc;
    use std::sync::atomic::AtomicUsize;

    // Proves, over every interleaving, that a reader seeing length n reads all n messages
    // whole and in each writer's order, while two publishers race across a chunk boundary
    // (CHUNK_SLOTS is 2 under loom). It also proves the model reached the racy states: some
    // executions saw a partly published log.
    #[test]
    fn published_length_covers_written_slots() {
        static EXECUTIONS: AtomicUsize = AtomicUsize::new(0);
        static PARTIAL_READS: AtomicUsize = AtomicUsize::new(0);
        loom::model(|| {
            EXECUTIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let log = Arc::new(Log::new());
            let writers: Vec<_> = [vec![0, 1], vec![10]]
                .into_iter()
                .map(|values| {
                    let log = Arc::clone(&log);
                    loom::thread::spawn(move || {
                        for value in values {
                            log.publish(Box::new(value));
                        }
                    })
                })
                .collect();
            let reader = {
                let log = Arc::clone(&log);
                loom::thread::spawn(move || {
                    let seen = log.len();
                    if (1..3).contains(&seen) {
                        PARTIAL_READS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    let values: Vec<u64> = (0..seen)
                        .map(|offset| **log.get(offset).expect("below the published length"))
                        .collect();
                    assert!(values.iter().all(|value| [0, 1, 10].contains(value)));
                    assert!(!values.starts_with(&[1]) && !values.starts_with(&[10, 1]));
                })
            };
            for writer in writers {
                writer.join().unwrap();
            }
            reader.join().unwrap();
            assert_eq!(log.len(), 3);
        });
        let executions = EXECUTIONS.load(std::sync::atomic::Ordering::Relaxed);
        let partial = PARTIAL_READS.load(std::sync::atomic::Ordering::Relaxed);
        println!("loom explored {executions} executions, {partial} with a partial read");
        assert!(
            partial > 0,
            "the model never raced a reader against a writer"
        );
    }
}
