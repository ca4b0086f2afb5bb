//! Ordering keys: what a poll may deliver when messages carry keys ([`KeyLookup`]), and
//! the one place that chooses what a group delivers next.
//!
//! # The rule
//!
//! A group knows no keys: a message's key is a fact of the log, fixed at publish, so the
//! home answers for it through a [`KeyLookup`] (the *hash* of the key, [`key_hash`], or
//! `None` for a message without one), asked only for offsets in the window
//! `[position, position + KEYED_WINDOW_SPAN × W)`. A poll then delivers the lowest-offset message that
//!
//! - is ready (failed, released or never delivered, and past its delay), and
//! - if it has a key, has its key free: no message of that key is in flight, and none
//!   below it is waiting (out a delay, a backoff, or its own turn),
//!
//! else the next message never delivered whose key is free (or that has none), while its
//! offset is below `position + W` (`position + 4W` for a keyed one, see "The window"). A never-delivered message whose key is busy is
//! *held*: it takes its place in the window as a slot that was never delivered (attempt 0,
//! or the attempt floor after a seek back, ready at once) and goes out, in offset order
//! for its key, once the key is free. So with keys:
//!
//! 1. at most one message per key is in flight at a time;
//! 2. a key's messages are delivered in offset order, and a retry (after a nack, a
//!    release, an expired lease) goes out before any later message of its key;
//! 3. a waiting keyed message holds back only its own key;
//! 4. a message without a key keeps the rules without keys: it waits for nothing but the
//!    window, and while it waits out a delay it holds back *every* message above it,
//!    keyed or not (the simplest rule that keeps its old meaning).
//!
//! # The window
//!
//! Held messages keep the position from moving past them, so with the window at
//! `position + W` a round that acks everything it got would find the window half full of
//! finished messages behind a held one (with W = 256 and 1,000 random keys, about 125 of
//! 256 deliverable per round). So a *keyed* message may go out while its offset is below
//! `position + KEYED_WINDOW_SPAN × W`; a message without a key still only below
//! `position + W` (and the scan for fresh messages stops at the first unkeyed one past
//! it). At most W deliveries are in flight either way. Without keys, and with W = 1,
//! nothing changes.
//!
//! Redriven dead letters below the position are delivered as messages without a key (an
//! operator puts them back on purpose, out of order; they go first, as without keys),
//! so they are the one way two messages of a key can be in flight at once.
//!
//! Keys are compared by their 64-bit hash. Two distinct keys with the same hash are
//! treated as one key: ordering only gets stricter (they serialize), never looser.
//!
//! # What the home provides
//!
//! The lookup is asked once per unfinished slot and per fresh candidate on every plan
//! (a batch poll walks the window once for all its deliveries, see `window_scan.rs`), so
//! a home keeps the hashes of its window in memory (the durable store reads each record's
//! key once, with the payload it is about to deliver). Held slots are persisted like
//! any slot; on replay a delivery above the window's end holds the offsets it skipped,
//! and the lookup gives the same keys again, since keys never change.

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hash, Hasher};

use super::state::GroupState;
use super::types::{PollStep, SlotPhase};
use super::window_scan::WindowScan;

/// How many times W past its position a group may deliver a keyed message (see the
/// module docs, "The window"); deliveries in flight stay at most W.
pub const KEYED_WINDOW_SPAN: u32 = 4;

/// Tells a group the key of a message: the key's [`key_hash`], or `None` if it has none.
///
/// Homes implement it for their log; a closure `FnMut(u64) -> Option<u64>` is one.
pub trait KeyLookup {
    /// The key hash of the message at `offset` (`None`: no key). Asked only for offsets
    /// in `[position, position + KEYED_WINDOW_SPAN × max_in_flight)` below the log's end.
    fn key_hash(&mut self, offset: u64) -> Option<u64>;

    /// Whether any message may have a key; `false` lets the planner skip every lookup.
    fn has_keys(&self) -> bool {
        true
    }
}

/// A log whose messages have no keys: the rules without keys, exactly.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NoKeys;

impl KeyLookup for NoKeys {
    #[inline(always)]
    fn key_hash(&mut self, _offset: u64) -> Option<u64> {
        None
    }

    #[inline(always)]
    fn has_keys(&self) -> bool {
        false
    }
}

impl<F: FnMut(u64) -> Option<u64>> KeyLookup for F {
    #[inline(always)]
    fn key_hash(&mut self, offset: u64) -> Option<u64> {
        self(offset)
    }
}

/// The hash every home gives a message's key: the same bytes give the same hash within
/// one build (the hash is never persisted).
///
/// # Example
///
/// ```
/// use mailroom::group::key_hash;
///
/// assert_eq!(key_hash(b"customer-7"), key_hash(b"customer-7"));
/// assert_ne!(key_hash(b"customer-7"), key_hash(b"customer-8"));
/// ```
pub fn key_hash(key: &[u8]) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut hasher);
    hasher.finish()
}

/// Key hashes are hashed already: a set of them needs no second hash.
#[derive(Debug, Default)]
pub(super) struct Identity(u64);

impl Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(byte);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }
}

/// The keys met so far in one scan of the window: each is busy for every slot above.
pub(super) type Busy = HashSet<u64, BuildHasherDefault<Identity>>;

impl GroupState {
    /// The offset to deliver next (see the module docs of `keys.rs`): the lowest ready
    /// slot whose key is free, unless an unkeyed slot below it waits out a delay; else the
    /// next fresh message whose key is free, while the window has room. This is the one
    /// place that chooses what a group delivers next.
    #[inline(always)]
    pub(super) fn next_candidate(
        &self,
        log_end: u64,
        now_ms: u64,
        keys: &mut dyn KeyLookup,
        scan: &mut WindowScan,
    ) -> Result<u64, PollStep> {
        if !keys.has_keys() {
            return self.next_candidate_unkeyed(log_end, now_ms);
        }
        self.next_candidate_scanned(log_end, now_ms, keys, scan)
    }

    /// [`next_candidate`](Self::next_candidate) for a log without keys.
    #[inline(always)]
    fn next_candidate_unkeyed(&self, log_end: u64, now_ms: u64) -> Result<u64, PollStep> {
        if self.in_flight as usize != self.redriven.len() + self.window.len() {
            for slot in self.slots() {
                match slot.phase {
                    SlotPhase::Ready { not_before_ms } if not_before_ms <= now_ms => {
                        return Ok(slot.offset)
                    }
                    SlotPhase::Ready { not_before_ms } => {
                        return Err(PollStep::Wait {
                            until_ms: not_before_ms,
                        })
                    }
                    _ => {}
                }
            }
        }
        let fresh = self.next_fresh();
        if fresh >= log_end {
            return Err(PollStep::Idle);
        }
        if self.window.len() >= self.config.max_in_flight as usize {
            return Err(PollStep::Idle);
        }
        Ok(fresh)
    }

    /// The earliest delay end (ms) among the slots a poll could deliver by the clock
    /// alone: the lowest ready slot of each free key up to the first unkeyed ready slot,
    /// which holds back everything above it. `None` if there is none.
    pub(super) fn first_delay_end_ms(&self, keys: &mut dyn KeyLookup) -> Option<u64> {
        if !keys.has_keys() {
            return self.slots().find_map(|slot| match slot.phase {
                SlotPhase::Ready { not_before_ms } => Some(not_before_ms),
                _ => None,
            });
        }
        let mut busy = self.in_flight_keys(keys);
        let mut due: Option<u64> = None;
        for slot in self.slots() {
            let SlotPhase::Ready { not_before_ms } = slot.phase else {
                continue;
            };
            match self.key_of(slot.offset, keys) {
                None => return Some(due.map_or(not_before_ms, |d| d.min(not_before_ms))),
                Some(key) if busy.insert(key) => {
                    due = Some(due.map_or(not_before_ms, |d| d.min(not_before_ms)));
                }
                Some(_) => {}
            }
        }
        due
    }

    /// The key hashes of the deliveries in flight in the window: busy for every slot.
    #[inline(always)]
    pub(super) fn in_flight_keys(&self, keys: &mut dyn KeyLookup) -> Busy {
        let mut busy = Busy::default();
        if self.in_flight == 0 {
            return busy;
        }
        busy.reserve(self.in_flight as usize);
        for slot in &self.window {
            if matches!(slot.phase, SlotPhase::InFlight { .. }) {
                if let Some(key) = keys.key_hash(slot.offset) {
                    busy.insert(key);
                }
            }
        }
        busy
    }

    /// The key hash of the slot at `offset`; redriven messages below the position count
    /// as messages without a key (see the module docs).
    #[inline(always)]
    pub(super) fn key_of(&self, offset: u64, keys: &mut dyn KeyLookup) -> Option<u64> {
        if offset < self.position {
            return None;
        }
        keys.key_hash(offset)
    }

    /// How far past the position a keyed message may be delivered:
    /// [`KEYED_WINDOW_SPAN`] × W, except with W = 1, which stays total order.
    #[inline(always)]
    pub(super) fn keyed_span(&self) -> u64 {
        let w = u64::from(self.config.max_in_flight);
        if w == 1 {
            return 1;
        }
        w * u64::from(KEYED_WINDOW_SPAN)
    }

    /// The attempt number a held slot of `offset` (never delivered) carries: one below
    /// its first delivery's.
    #[inline(always)]
    pub(super) fn held_attempt(&self, offset: u64) -> u32 {
        if offset < self.rewound_below {
            self.attempt_floor
        } else {
            0
        }
    }
}
