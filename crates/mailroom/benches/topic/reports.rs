//! The reports printed before the timed benchmarks: heap bytes per retained message for
//! mailroom's topic and the naive peer (counted by a global allocator wrapper), and how far
//! a consumer gets while another thread publishes.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};

use mailroom::topic::Topic;

use crate::naive::Naive;
use crate::{beside_consumer, BATCH};

/// Counts live heap bytes, so the memory report measures rather than estimates.
struct CountingAllocator;

static LIVE_BYTES: AtomicUsize = AtomicUsize::new(0);

// SAFETY: defers every call to `System` with the caller's arguments unchanged; the
// counter is only bookkeeping.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE_BYTES.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded from our caller, who upholds `GlobalAlloc::alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded from our caller, who upholds `GlobalAlloc::dealloc`'s contract.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE_BYTES.fetch_add(new_size, Ordering::Relaxed);
        LIVE_BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded from our caller, who upholds `GlobalAlloc::realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// Heap bytes per retained `u64` message beyond its 8 payload bytes, for both designs,
/// counted by the global allocator.
pub fn memory_report() {
    println!("memory per retained u64 message beyond the 8-byte payload (counted heap bytes):");
    for messages in [1_000_000u64, 10_000_000, 10_000_001] {
        let before = LIVE_BYTES.load(Ordering::Relaxed);
        let topic = Topic::new();
        for value in 0..messages {
            topic.publish(value);
        }
        topic.create_group("g", 3).unwrap();
        let mailroom = LIVE_BYTES.load(Ordering::Relaxed) - before;
        drop(topic);
        let before = LIVE_BYTES.load(Ordering::Relaxed);
        let naive = Naive::new();
        for value in 0..messages {
            naive.publish(value);
        }
        naive.create_group("g", 0);
        let peer = LIVE_BYTES.load(Ordering::Relaxed) - before;
        drop(naive);
        let overhead = |bytes: usize| bytes as f64 / messages as f64 - 8.0;
        println!(
            "  {messages:>10} messages: mailroom {:>6.3} B/msg ({mailroom} B), naive {:>6.3} B/msg ({peer} B)",
            overhead(mailroom),
            overhead(peer),
        );
    }
}

/// How far a consumer gets while one thread publishes `BATCH` messages: the share of them
/// it has finished when the publisher is done. Printed, not benchmarked; it shows whether
/// a design lets the reader proceed during publishing or serialises the two.
pub fn consumer_progress_report() {
    let topic = Topic::new();
    topic.create_group("reader", 1).unwrap();
    let reader = topic.group("reader").unwrap();
    beside_consumer(
        || {
            (0..BATCH).for_each(|value| {
                black_box(topic.publish(value));
            })
        },
        || {
            if let Some(delivery) = reader.poll().unwrap() {
                reader.ack(delivery.id()).unwrap();
            }
        },
    );
    let mailroom = reader.position().unwrap();
    let naive = Naive::new();
    naive.create_group("reader", 0);
    let finished = AtomicUsize::new(0);
    beside_consumer(
        || {
            (0..BATCH).for_each(|value| {
                black_box(naive.publish(value));
            })
        },
        || {
            if let Some((offset, attempt, _)) = naive.poll("reader") {
                if naive.ack("reader", offset, attempt) {
                    finished.fetch_add(1, Ordering::Relaxed);
                }
            }
        },
    );
    let share = |done: u64| 100.0 * done as f64 / BATCH as f64;
    println!(
        "consumer progress while {BATCH} messages were published: mailroom {:.1}%, naive {:.1}%",
        share(mailroom),
        share(finished.load(Ordering::Relaxed) as u64),
    );
}
