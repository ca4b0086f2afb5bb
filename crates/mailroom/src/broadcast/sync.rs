//! The synchronisation primitives the broadcast module is built from.
//!
//! Normal builds use `std`. Under `--cfg loom` the same names resolve to loom's
//! instrumented versions, so the model in `tests/broadcast_loom.rs` checks the real
//! publish / recv / unsubscribe / close protocol rather than a copy of it.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::{Arc, Mutex, MutexGuard};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::{Arc, Mutex, MutexGuard};

/// Locks `mutex`, ignoring poisoning.
///
/// A panic while the broker lock is held can only come from a payload's `Clone`
/// implementation in the middle of a publish. The registry is still well formed at every
/// point of that walk (a message was offered to a prefix of the subscribers), so the
/// broker keeps working instead of turning one bad `Clone` into a panic for every caller.
pub(crate) fn lock_ignoring_poison<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

/// `std`'s `UnsafeCell` behind loom's closure API, so that the ring's accesses are
/// checked by loom under `--cfg loom` and compile to plain pointer accesses otherwise.
#[cfg(not(loom))]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) fn new(value: T) -> Self {
        Self(std::cell::UnsafeCell::new(value))
    }

    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// The ring's consumer lock: a test-and-test-and-set spin lock, held only while one value
/// is moved out of a slot (no user code runs under it).
///
/// Under loom it is loom's `Mutex` instead: loom cannot tell a spinning thread from one
/// that makes progress, and both locks give the same acquire/release edges, which is
/// what the ring's protocol relies on.
#[cfg(not(loom))]
pub(crate) struct ConsumerLock(AtomicBool);

#[cfg(not(loom))]
impl ConsumerLock {
    pub(crate) fn new() -> Self {
        Self(AtomicBool::new(false))
    }

    pub(crate) fn lock(&self) -> ConsumerGuard<'_> {
        // After this many failed looks the holder was probably preempted: stop burning
        // the core and let it run.
        const SPINS_BEFORE_YIELD: u32 = 64;
        let mut spins = 0;
        while self.0.swap(true, Ordering::Acquire) {
            // Spin on a plain load, not on `swap`: waiting must not keep stealing the line.
            while self.0.load(Ordering::Relaxed) {
                spins += 1;
                if spins < SPINS_BEFORE_YIELD {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
        }
        ConsumerGuard(&self.0)
    }
}

/// Releases the [`ConsumerLock`] when dropped.
#[cfg(not(loom))]
pub(crate) struct ConsumerGuard<'a>(&'a AtomicBool);

#[cfg(not(loom))]
impl Drop for ConsumerGuard<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

#[cfg(loom)]
pub(crate) struct ConsumerLock(Mutex<()>);

#[cfg(loom)]
impl ConsumerLock {
    pub(crate) fn new() -> Self {
        Self(Mutex::new(()))
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, ()> {
        lock_ignoring_poison(&self.0)
    }
}
