//! The synchronisation primitives the log is built from, swapped for loom's under
//! `--cfg loom` so that the log's publication protocol can be model-checked.
//!
//! Only the log goes through this room: it is the one place with `unsafe`, so it is the
//! one place loom has to see. Group locks and the group registry use `parking_lot`
//! directly.

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU64, Ordering};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};

/// The append lock: `std`'s, behind `parking_lot`'s calling convention (`lock` returns
/// the guard). With `parking_lot`'s, two racing publishers ran at 0.47× the naive peer
/// of `benches/topic/naive.rs` (which uses `std`'s); with this one, at 0.9–1.5×: `parking_lot`
/// keeps the waiter spinning, so the lock's cache line ping-pongs on every publish.
#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct Mutex<T>(std::sync::Mutex<T>);

#[cfg(not(loom))]
impl<T> Mutex<T> {
    pub(crate) const fn new(value: T) -> Self {
        Mutex(std::sync::Mutex::new(value))
    }

    #[inline]
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, T> {
        // The critical section cannot leave the log half-written (the slot write and the
        // length store cannot panic), so a panic elsewhere while holding it is harmless.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// loom's mutex behind `parking_lot`'s calling convention (`lock` returns the guard).
#[cfg(loom)]
#[derive(Debug)]
pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

#[cfg(loom)]
impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        Mutex(loom::sync::Mutex::new(value))
    }

    pub(crate) fn lock(&self) -> loom::sync::MutexGuard<'_, T> {
        // A poisoned lock means another model thread panicked; the model has failed anyway.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// `std`'s `UnsafeCell` with loom's closure-based access API, so the log reads the same
/// under both configurations.
#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) const fn new(value: T) -> Self {
        UnsafeCell(std::cell::UnsafeCell::new(value))
    }

    /// Runs `f` with a pointer for reading.
    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Runs `f` with a pointer for writing.
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;
