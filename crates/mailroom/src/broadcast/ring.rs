//! The bounded FIFO inside each mailbox: a ring with one producer at a time (the broker-lock
//! holder) and a tiny consumer lock.
//!
//! Why not a general MPMC queue: the broker lock already makes the publisher the only
//! producer, so a push needs no atomic read-modify-write at all (write the slot, then
//! publish the new `tail` with a `Release` store). Only consumers can race each other
//! (a `Subscription` is `Sync`), and they serialise on a consumer lock, one `swap` per pop.
//! Both sides keep a cached copy of the other side's index, so in steady state neither
//! reads the other's cache line. The benchmark (`benches/broadcast.rs`) shows this roughly
//! halves the cost per delivery compared with crossbeam's `ArrayQueue`.
//!
//! Indices are free-running `usize` counters (`tail` = messages ever pushed, `head` =
//! messages ever popped), so `tail - head` is the length, and they double as counters.
//! Wrapping is handled with wrapping arithmetic; at one push per nanosecond a 64-bit
//! counter wraps after ~584 years.

use super::sync::{AtomicUsize, ConsumerLock, Ordering, UnsafeCell};
use std::mem::MaybeUninit;

/// Keeps the producer's and the consumer's fields on separate cache lines.
#[repr(align(128))]
struct CacheAligned<T>(T);

struct ProducerSide {
    /// Slots ever written; the next push goes to `tail & mask`. Written by the producer.
    tail: AtomicUsize,
    /// The producer's last look at `head`. Only the producer touches it.
    head_seen: AtomicUsize,
}

struct ConsumerSide {
    /// Held while one `pop` moves a value out.
    busy: ConsumerLock,
    /// Slots ever read. Written by the consumer holding `busy`.
    head: AtomicUsize,
    /// The consumer's last look at `tail`. Only touched while holding `busy`.
    tail_seen: AtomicUsize,
}

/// A bounded FIFO of at most `capacity` values.
pub(crate) struct Ring<T> {
    producer: CacheAligned<ProducerSide>,
    consumer: CacheAligned<ConsumerSide>,
    /// `capacity.next_power_of_two()` slots, so an index is a mask away. A slot is
    /// initialised exactly when its index lies in `head..tail`.
    slots: Box<[UnsafeCell<MaybeUninit<T>>]>,
    mask: usize,
    capacity: usize,
}

// SAFETY: values are moved in by one thread and out by another, which needs `T: Send`;
// no `&T` is ever handed out, so `T: Sync` is not needed. All shared access to slots
// follows the protocol documented on `push` and `pop`.
unsafe impl<T: Send> Send for Ring<T> {}
// SAFETY: as above; `&Ring` only allows pushes (one producer, by the caller's contract)
// and pops (serialised by `busy`).
unsafe impl<T: Send> Sync for Ring<T> {}

impl<T> Ring<T> {
    /// An empty ring holding at most `capacity` (> 0) values.
    pub(crate) fn new(capacity: usize) -> Self {
        assert!(capacity > 0, "a ring needs room for one value");
        let slot_count = capacity.next_power_of_two();
        let slots = (0..slot_count)
            .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
            .collect();
        Self {
            producer: CacheAligned(ProducerSide {
                tail: AtomicUsize::new(0),
                head_seen: AtomicUsize::new(0),
            }),
            consumer: CacheAligned(ConsumerSide {
                busy: ConsumerLock::new(),
                head: AtomicUsize::new(0),
                tail_seen: AtomicUsize::new(0),
            }),
            slots,
            mask: slot_count - 1,
            capacity,
        }
    }

    /// Appends `value`, or hands it back if the ring is full. Never waits.
    ///
    /// # Safety
    ///
    /// At most one thread may be inside `push` on a given ring at a time. Mailboxes
    /// guarantee it by pushing only under their broker's lock.
    pub(crate) unsafe fn push(&self, value: T) -> Result<(), T> {
        let producer = &self.producer.0;
        let tail = producer.tail.load(Ordering::Relaxed);
        let mut head = producer.head_seen.load(Ordering::Relaxed);
        if tail.wrapping_sub(head) >= self.capacity {
            // Acquire pairs with the consumer's Release store of `head`: its move out of
            // the slot we are about to reuse happened before.
            head = self.consumer.0.head.load(Ordering::Acquire);
            producer.head_seen.store(head, Ordering::Relaxed);
            if tail.wrapping_sub(head) >= self.capacity {
                return Err(value);
            }
        }
        self.slots[tail & self.mask].with_mut(|slot| {
            // SAFETY: `tail - head < capacity <= slots.len()`, so slot `tail` is outside
            // `head..tail`: it is uninitialised and no consumer reads it (consumers only
            // read below the `tail` they loaded, and we have not published `tail + 1`).
            // We are the only producer (the caller's contract), so nobody else writes it.
            unsafe { slot.write(MaybeUninit::new(value)) };
        });
        // Release publishes the slot's contents to the consumer that loads this `tail`.
        producer.tail.store(tail.wrapping_add(1), Ordering::Release);
        Ok(())
    }

    /// Removes the oldest value, if any. Never waits for the producer; concurrent callers
    /// take turns on a lock held only for one move.
    pub(crate) fn pop(&self) -> Option<T> {
        let consumer = &self.consumer.0;
        let guard = consumer.busy.lock();
        let head = consumer.head.load(Ordering::Relaxed);
        let mut tail = consumer.tail_seen.load(Ordering::Relaxed);
        if head == tail {
            // Acquire pairs with the producer's Release store of `tail`.
            tail = self.producer.0.tail.load(Ordering::Acquire);
            consumer.tail_seen.store(tail, Ordering::Relaxed);
        }
        let value = if head == tail {
            None
        } else {
            let value = self.slots[head & self.mask].with_mut(|slot| {
                // SAFETY: `head < tail` (as loaded with Acquire above, or earlier by a
                // previous holder of `busy`, whose Release unlock we acquired), so the
                // slot is initialised and the producer will not touch it until it sees
                // `head + 1`. Holding `busy` makes us its only reader; moving the value out
                // leaves the slot logically uninitialised, which the `head` store records.
                unsafe { slot.read().assume_init() }
            });
            // Release hands the now-empty slot back to the producer.
            consumer.head.store(head.wrapping_add(1), Ordering::Release);
            Some(value)
        };
        drop(guard);
        value
    }

    /// Moves up to `max` of the oldest values, in FIFO order, onto the end of `out`;
    /// returns how many. Never waits for the producer, and takes the consumer lock once for
    /// the whole batch, so a batch costs one lock, one `Acquire` load of `tail` (at most)
    /// and one `Release` store of `head`, however many values it moves.
    pub(crate) fn pop_many(&self, out: &mut Vec<T>, max: usize) -> usize {
        if max == 0 {
            return 0;
        }
        let consumer = &self.consumer.0;
        let guard = consumer.busy.lock();
        let head = consumer.head.load(Ordering::Relaxed);
        let mut tail = consumer.tail_seen.load(Ordering::Relaxed);
        if tail.wrapping_sub(head) < max {
            // The cached view holds fewer than asked for: look for newer pushes.
            // Acquire pairs with the producer's Release store of `tail`.
            tail = self.producer.0.tail.load(Ordering::Acquire);
            consumer.tail_seen.store(tail, Ordering::Relaxed);
        }
        let count = tail.wrapping_sub(head).min(max);
        // Reserve before moving anything out: if this panics (capacity overflow), no slot
        // has been read yet and `head` is unchanged, so the ring stays consistent. After
        // it, `push` cannot reallocate, so nothing below can panic between the reads and
        // the `head` store.
        out.reserve(count);
        for offset in 0..count {
            let index = head.wrapping_add(offset);
            let value = self.slots[index & self.mask].with_mut(|slot| {
                // SAFETY: `index` lies in `head..tail` (`offset < count <= tail - head`),
                // with `tail` loaded with Acquire above or by an earlier holder of `busy`,
                // whose Release unlock we acquired; so the slot is initialised and the
                // producer will not touch it until it sees a `head` past `index`, which we
                // publish only after the loop. Holding `busy` makes us its only reader, and
                // each index is read once, so every value is moved out exactly once.
                unsafe { slot.read().assume_init() }
            });
            out.push(value);
        }
        // Release hands all `count` emptied slots back to the producer at once.
        consumer
            .head
            .store(head.wrapping_add(count), Ordering::Release);
        drop(guard);
        count
    }

    /// Values ever pushed.
    pub(crate) fn pushed(&self) -> usize {
        self.producer.0.tail.load(Ordering::Acquire)
    }

    /// Values currently queued (a snapshot when others are active).
    pub(crate) fn len(&self) -> usize {
        // Reading `head` first keeps the difference non-negative: `tail` only grows.
        let head = self.consumer.0.head.load(Ordering::Acquire);
        let tail = self.producer.0.tail.load(Ordering::Acquire);
        tail.wrapping_sub(head).min(self.capacity)
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        // `&mut self`: no other thread can touch the ring, so drain it the ordinary way.
        while self.pop().is_some() {}
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::Ring;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// Pushes as the sole producer, which these single-producer tests are.
    fn push<T>(ring: &Ring<T>, value: T) -> Result<(), T> {
        // SAFETY: each test has at most one thread pushing.
        unsafe { ring.push(value) }
    }

    #[test]
    fn fifo_and_full_means_reject_newest() {
        // Proves FIFO order, exact capacity (3, not the 4 slots), and that a full ring
        // rejects the new value while keeping the old ones.
        let ring = Ring::new(3);
        for n in 0..3 {
            assert_eq!(push(&ring, n), Ok(()));
        }
        assert_eq!(push(&ring, 3), Err(3));
        assert_eq!(ring.len(), 3);
        assert_eq!((ring.pop(), ring.pop()), (Some(0), Some(1)));
        assert_eq!(push(&ring, 4), Ok(()));
        assert_eq!(
            (ring.pop(), ring.pop(), ring.pop()),
            (Some(2), Some(4), None)
        );
        assert_eq!(ring.pushed(), 4);
    }

    #[test]
    fn wraps_around_many_times() {
        // Proves indices wrap over the slot array without losing or reordering values.
        let ring = Ring::new(2);
        for n in 0..1_000 {
            push(&ring, n).unwrap();
            if n % 2 == 1 {
                assert_eq!((ring.pop(), ring.pop()), (Some(n - 1), Some(n)));
            }
        }
        assert_eq!(ring.len(), 0);
    }

    #[test]
    fn pop_many_is_fifo_respects_max_and_frees_room() {
        // Proves pop_many moves the oldest values in order, never more than `max`, appends
        // to `out`, frees exactly that many slots for the producer, and works across wrap.
        let ring = Ring::new(3);
        let mut out = vec![100];
        assert_eq!(ring.pop_many(&mut out, 5), 0, "empty ring");
        for round in 0..50 {
            let base = round * 3;
            for n in base..base + 3 {
                assert_eq!(push(&ring, n), Ok(()));
            }
            assert_eq!(push(&ring, 999), Err(999), "full");
            out.clear();
            assert_eq!(ring.pop_many(&mut out, 0), 0);
            assert_eq!(ring.pop_many(&mut out, 2), 2);
            assert_eq!(out, [base, base + 1]);
            assert_eq!(ring.len(), 1);
            assert_eq!(push(&ring, 1_000), Ok(()), "two slots were freed");
            assert_eq!(ring.pop_many(&mut out, usize::MAX), 2);
            assert_eq!(out, [base, base + 1, base + 2, 1_000]);
            assert_eq!(ring.len(), 0);
        }
        assert_eq!(ring.pushed(), 50 * 4);
    }

    #[test]
    fn pop_many_moves_each_value_out_once() {
        // Proves (under miri: no double read, no leak) that batched values are moved, not
        // copied: every clone of the payload is accounted for after drops.
        let payload = Arc::new(());
        let ring = Ring::new(4);
        for _ in 0..4 {
            push(&ring, Arc::clone(&payload)).unwrap();
        }
        let mut out = Vec::new();
        assert_eq!(ring.pop_many(&mut out, 3), 3);
        assert_eq!(Arc::strong_count(&payload), 5);
        drop(out);
        assert_eq!(Arc::strong_count(&payload), 2);
        drop(ring);
        assert_eq!(Arc::strong_count(&payload), 1);
    }

    #[test]
    fn drop_releases_queued_values() {
        // Proves values still queued when the ring drops are dropped once (miri/leak check).
        let payload = Arc::new(());
        let ring = Ring::new(4);
        for _ in 0..3 {
            push(&ring, Arc::clone(&payload)).unwrap();
        }
        ring.pop();
        drop(ring);
        assert_eq!(Arc::strong_count(&payload), 1);
    }

    #[test]
    fn one_producer_two_consumers_lose_nothing() {
        // Proves, on real threads, that racing consumers (one popping singly, one in
        // batches of up to 3) together take every pushed value exactly once, each seeing
        // increasing values.
        const VALUES: usize = if cfg!(miri) { 200 } else { 20_000 };
        const BATCH_MAX: usize = 3;
        let ring = Arc::new(Ring::new(8));
        let taken_total = Arc::new(AtomicUsize::new(0));
        let consumers: Vec<_> = [false, true]
            .into_iter()
            .map(|batched| {
                let (ring, taken_total) = (Arc::clone(&ring), Arc::clone(&taken_total));
                std::thread::spawn(move || {
                    let mut taken = Vec::new();
                    while taken_total.load(Ordering::Relaxed) < VALUES {
                        let got = if batched {
                            ring.pop_many(&mut taken, BATCH_MAX)
                        } else {
                            match ring.pop() {
                                Some(v) => {
                                    taken.push(v);
                                    1
                                }
                                None => 0,
                            }
                        };
                        if got == 0 {
                            std::thread::yield_now();
                        }
                        taken_total.fetch_add(got, Ordering::Relaxed);
                    }
                    taken
                })
            })
            .collect();
        for n in 0..VALUES {
            while push(&ring, n).is_err() {
                std::thread::yield_now();
            }
        }
        let mut all: Vec<usize> = Vec::new();
        for consumer in consumers {
            let taken = consumer.join().unwrap();
            assert!(taken.windows(2).all(|w| w[0] < w[1]), "per-consumer order");
            all.extend(taken);
        }
        all.sort_unstable();
        assert_eq!(all, (0..VALUES).collect::<Vec<_>>());
    }
}
