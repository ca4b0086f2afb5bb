//! The key hashes of a group's window, kept in memory for the planner of ordering keys
//! (`mailroom::group::KeyLookup`, see `keys.rs` there).
//!
//! The planner asks for the key of every unfinished slot and every fresh candidate of
//! the window `[position, position + W)` on each plan, so a record read per question
//! would cost W reads per delivery. [`KeyCache`] reads each message's record once, the
//! first time the planner asks, keeps its key hash for as long as it is in the window,
//! and keeps the record too (up to [`STASH_BYTES_MAX`] of payloads): the planner asks for
//! a fresh message's key just before it is delivered, so the delivery takes the message
//! (payload, publish time, metadata) from here instead of reading the record a second
//! time. Keys never change, so nothing here
//! is persisted: after a restart the cache fills again from the log.

use std::collections::{BTreeMap, VecDeque};

use mailroom::group::{key_hash, KeyLookup};

use crate::log::{Log, Record};
use crate::message::key_of_block;
use crate::StoreError;

/// The most payload bytes a group's cache keeps for deliveries about to be made.
pub const STASH_BYTES_MAX: usize = 4 << 20;

/// The most payloads a group's cache keeps for deliveries about to be made.
const STASH_PAYLOADS_MAX: usize = 1024;

/// Key hashes of a contiguous run of offsets, and payloads read on the way.
#[derive(Debug, Clone, Default)]
pub struct KeyCache {
    /// The offset of `hashes[0]`.
    base: u64,
    /// One entry per offset from `base`: the message's key hash, or `None` without a key.
    hashes: VecDeque<Option<u64>>,
    /// Records read with their keys and not yet delivered, by offset.
    stash: BTreeMap<u64, Record>,
    stash_bytes: usize,
}

impl KeyCache {
    /// Forgets every offset below `position` (finished: never asked again).
    pub fn forget_below(&mut self, position: u64) {
        while self.base < position && !self.hashes.is_empty() {
            self.hashes.pop_front();
            self.base += 1;
        }
        if self.hashes.is_empty() {
            self.base = position;
        }
        while let Some(entry) = self.stash.first_entry() {
            if *entry.key() >= position {
                break;
            }
            self.stash_bytes -= entry.remove().payload.len();
        }
    }

    /// Takes the record read with the key of `offset`, if it is still here.
    pub fn take_record(&mut self, offset: u64) -> Option<Record> {
        let record = self.stash.remove(&offset)?;
        self.stash_bytes -= record.payload.len();
        Some(record)
    }

    /// The key hash of `offset`, reading its record the first time.
    ///
    /// # Errors
    ///
    /// The read's error. `Ok(None)` also for a message retention deleted (the delivery
    /// then finds it gone and starts over).
    fn key_hash(&mut self, messages: &Log, offset: u64) -> Result<Option<u64>, StoreError> {
        if let Some(index) = offset.checked_sub(self.base) {
            if let Some(&hash) = self.hashes.get(index as usize) {
                return Ok(hash);
            }
        }
        let Some(record) = messages.read(offset)? else {
            return Ok(None);
        };
        let hash = hash_of(&record);
        if offset == self.base + self.hashes.len() as u64 {
            self.hashes.push_back(hash);
        } else {
            // Asked out of turn (after a seek): start the run again here.
            self.hashes.clear();
            self.hashes.push_back(hash);
            self.base = offset;
        }
        self.keep_record(offset, record);
        Ok(hash)
    }

    /// The key hash of `offset` from the cache, else from its record, caching nothing.
    fn peek_hash(&self, messages: &Log, offset: u64) -> Result<Option<u64>, StoreError> {
        if let Some(index) = offset.checked_sub(self.base) {
            if let Some(&hash) = self.hashes.get(index as usize) {
                return Ok(hash);
            }
        }
        Ok(messages.read(offset)?.and_then(|record| hash_of(&record)))
    }

    fn keep_record(&mut self, offset: u64, record: Record) {
        let bytes = record.payload.len();
        if bytes > STASH_BYTES_MAX || self.stash.contains_key(&offset) {
            return;
        }
        self.stash_bytes += bytes;
        self.stash.insert(offset, record);
        // The lowest are held back by their keys; the newest are about to go out.
        while self.stash_bytes > STASH_BYTES_MAX || self.stash.len() > STASH_PAYLOADS_MAX {
            let (_, dropped) = self.stash.pop_first().expect("over the cap, so not empty");
            self.stash_bytes -= dropped.payload.len();
        }
    }
}

/// The planner's view of a [`KeyCache`] over the message log; the first read error
/// is kept (the lookup answers `None` after it) for the caller to return.
pub struct KeyReader<'a> {
    /// The cache.
    pub cache: &'a mut KeyCache,
    /// The topic's message log.
    pub messages: &'a Log,
    /// The first read error, if any.
    pub error: Option<StoreError>,
}

impl KeyLookup for KeyReader<'_> {
    fn key_hash(&mut self, offset: u64) -> Option<u64> {
        if self.error.is_some() {
            return None;
        }
        match self.cache.key_hash(self.messages, offset) {
            Ok(hash) => hash,
            Err(error) => {
                self.error = Some(error);
                None
            }
        }
    }
}

/// A read-only [`KeyCache`] lookup over the message log, for a question that changes
/// nothing (`next_due_ms`); the first read error is kept as in [`KeyReader`].
pub struct KeyPeek<'a> {
    /// The cache.
    pub cache: &'a KeyCache,
    /// The topic's message log.
    pub messages: &'a Log,
    /// The first read error, if any.
    pub error: Option<StoreError>,
}

impl KeyLookup for KeyPeek<'_> {
    fn key_hash(&mut self, offset: u64) -> Option<u64> {
        if self.error.is_some() {
            return None;
        }
        match self.cache.peek_hash(self.messages, offset) {
            Ok(hash) => hash,
            Err(error) => {
                self.error = Some(error);
                None
            }
        }
    }
}

/// The key hash of a message record, `None` without a key.
fn hash_of(record: &crate::log::Record) -> Option<u64> {
    record
        .metadata
        .as_deref()
        .and_then(key_of_block)
        .map(key_hash)
}
