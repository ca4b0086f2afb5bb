//! The broker's shared state at work: waking parked receivers, closing, unsubscribing.
//! A child of `broker` so it sees the registry's private fields.

use super::super::mailbox::{Mailbox, NOT_REGISTERED};
use super::super::sync::{fence, lock_ignoring_poison, Arc, MutexGuard, Ordering};
use super::{Registry, Shared};

impl<T> Shared<T> {
    /// Wakes receivers parked on any mailbox, after releasing the broker lock. Called by
    /// a publisher once its enqueues are done, with the lock still held.
    pub(super) fn wake_parked(&self, registry: MutexGuard<'_, Registry<T>>) {
        // A read-modify-write rather than a fence plus a load: one locked instruction, where
        // a `SeqCst` fence would be an `mfence`. If it reads 0, any receiver that parks
        // later increments `parked` after it, so that receiver's increment reads from this
        // RMW (release/acquire) and its re-check is guaranteed to see our enqueues.
        if self.parked.fetch_add(0, Ordering::SeqCst) == 0 {
            return;
        }
        // Someone is parked: find whom. Pairs with the `SeqCst` increment in
        // `Mailbox::add_waiter` and the fence in `Event::listen`: a receiver we do not see
        // here is guaranteed to find the message on its re-check.
        fence(Ordering::SeqCst);
        let to_wake: Vec<Arc<Mailbox<T>>> = registry
            .mailboxes
            .iter()
            .filter(|mailbox| mailbox.has_waiters())
            .cloned()
            .collect();
        // Waking can mean a syscall per parked thread: do it without holding the lock.
        drop(registry);
        for mailbox in to_wake {
            mailbox.event.notify(usize::MAX);
        }
    }

    /// Closes the broker; see [`Broker::close`].
    pub(super) fn close(&self) {
        let mut registry = lock_ignoring_poison(&self.registry);
        registry.closed = true;
        let mailboxes = std::mem::take(&mut registry.mailboxes);
        for mailbox in &mailboxes {
            mailbox.mark_closed();
        }
        drop(registry);
        for mailbox in &mailboxes {
            mailbox.event.notify(usize::MAX);
        }
    }

    /// Removes `mailbox` from the registry and closes it. Idempotent.
    ///
    /// Runs under the broker lock, so once it returns no publish can enqueue there.
    pub(crate) fn unsubscribe(&self, mailbox: &Mailbox<T>) {
        let mut registry = lock_ignoring_poison(&self.registry);
        let index = mailbox.registry_index();
        if index == NOT_REGISTERED {
            return;
        }
        let removed = registry.mailboxes.swap_remove(index);
        debug_assert!(std::ptr::eq(Arc::as_ptr(&removed), mailbox));
        if let Some(moved) = registry.mailboxes.get(index) {
            moved.set_registry_index(index);
        }
        mailbox.mark_closed();
        drop(registry);
        mailbox.event.notify(usize::MAX);
    }

    /// Counts a receiver parking on one of this broker's mailboxes.
    pub(crate) fn add_parked(&self) {
        self.parked.fetch_add(1, Ordering::SeqCst);
    }

    /// Withdraws a receiver counted by [`Shared::add_parked`].
    pub(crate) fn remove_parked(&self) {
        self.parked.fetch_sub(1, Ordering::Relaxed);
    }
}
