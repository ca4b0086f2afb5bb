//! Idempotent publish on a [`DurableTopic`]: messages with an idempotency key are checked
//! against the topic's window of keys seen (`crate::idempotency`) and a repeat answers the
//! first publish's offset instead of being stored again.
//!
//! The check and the log write happen under the window's lock, so of concurrent
//! publishes of one key exactly one stores; the others answer its offset once it is
//! durable (a repeat never answers an offset a sync could still lose). Publishes without
//! idempotency keys never take that lock.

use std::ops::Range;

use hashbrown::hash_table::Entry;
use hashbrown::HashTable;

use mailroom::topic::TopicError;

use crate::encoded_batch::EncodedBatch;
use crate::message::NewMessage;
use crate::{Deferred, DurableTopic, StoreError};

/// What a publish answered for one message: its offset, and whether it was a repeat of
/// an idempotency key in the window (then nothing was stored and the offset is the
/// first publish's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stored {
    /// The message's offset, or the first publish's for a repeat.
    pub offset: u64,
    /// `true` if the message repeated an idempotency key in the window.
    pub duplicate: bool,
}

/// Where a message's answer comes from, decided under the window's lock.
enum Plan {
    /// A repeat of a key in the window: that offset.
    Seen(u64),
    /// Stored as the `n`th message of this write (or a repeat, in this same batch, of
    /// the key that the `n`th message stores).
    Written(usize, bool),
}

impl DurableTopic {
    /// Publishes `messages` with one sync, one answer per message in order: a message
    /// whose idempotency key is in the topic's window (see
    /// [`IdempotencyWindow`](crate::IdempotencyWindow)), or repeats one earlier in the
    /// same batch, is not stored and answers the first publish's offset with
    /// `duplicate: true`; every other message is stored as
    /// [`publish_messages`](Self::publish_messages) stores it.
    ///
    /// # Errors
    ///
    /// As [`publish_messages`](Self::publish_messages).
    ///
    /// # Example
    ///
    /// ```
    /// use bytes::Bytes;
    /// use mailroom::topic::Metadata;
    /// use mailroom_store::{NewMessage, Store, StoreOptions, Stored};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path(), StoreOptions::default())?;
    /// store.create_topic("t")?;
    /// let topic = store.topic("t")?;
    /// let once = NewMessage {
    ///     payload: Bytes::from_static(b"pay invoice 7"),
    ///     metadata: Metadata::new().with_idempotency_key("invoice-7"),
    /// };
    /// let first = topic.publish_once(std::slice::from_ref(&once))?;
    /// let again = topic.publish_once(&[once])?;
    /// assert_eq!(first, [Stored { offset: 0, duplicate: false }]);
    /// assert_eq!(again, [Stored { offset: 0, duplicate: true }]);
    /// assert_eq!(topic.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn publish_once(&self, messages: &[NewMessage]) -> Result<Vec<Stored>, StoreError> {
        self.publish_once_deferred(messages)?.wait()
    }

    /// [`publish_once`](Self::publish_once) without the wait, as
    /// [`publish_messages_deferred`](Self::publish_messages_deferred).
    ///
    /// # Errors
    ///
    /// As [`publish_once`](Self::publish_once).
    pub fn publish_once_deferred(
        &self,
        messages: &[NewMessage],
    ) -> Result<Deferred<Vec<Stored>>, StoreError> {
        let _live = self.live()?;
        for message in messages {
            message.metadata.check().map_err(TopicError::from)?;
        }
        let keys = messages
            .iter()
            .map(|message| message.metadata.idempotency_key.as_deref());
        self.write_once(keys, |written, now_ms| {
            let written: Vec<&NewMessage> = written.iter().map(|&n| &messages[n]).collect();
            self.write_messages(&written, now_ms)
        })
    }

    /// [`publish_once`](Self::publish_once) of messages already encoded as record bodies
    /// ([`EncodedBatch`]): the same answers and the same records, without the owned
    /// metadata. A batch without idempotency keys does not take the window's lock.
    ///
    /// # Errors
    ///
    /// As [`publish_once`](Self::publish_once) (the metadata was checked when it was
    /// pushed).
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::topic::MetadataRef;
    /// use mailroom_store::{EncodedBatch, Store, StoreOptions, Stored};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path(), StoreOptions::default())?;
    /// store.create_topic("t")?;
    /// let topic = store.topic("t")?;
    /// let once = MetadataRef { idempotency_key: Some("invoice-7"), ..MetadataRef::default() };
    /// let mut batch = EncodedBatch::default();
    /// batch.push(&once, b"pay invoice 7")?;
    /// batch.push(&once, b"pay invoice 7")?;
    /// let answers = topic.publish_encoded(&batch)?;
    /// assert_eq!(answers[1], Stored { offset: 0, duplicate: true });
    /// assert_eq!(topic.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn publish_encoded(&self, batch: &EncodedBatch) -> Result<Vec<Stored>, StoreError> {
        self.publish_encoded_deferred(batch)?.wait()
    }

    /// [`publish_encoded`](Self::publish_encoded) without the wait, as
    /// [`publish_once_deferred`](Self::publish_once_deferred).
    ///
    /// # Errors
    ///
    /// As [`publish_encoded`](Self::publish_encoded).
    pub fn publish_encoded_deferred(
        &self,
        batch: &EncodedBatch,
    ) -> Result<Deferred<Vec<Stored>>, StoreError> {
        let _live = self.live()?;
        let write = |written: &[usize], now_ms: u64| {
            let (bodies, flags): (Vec<&[u8]>, Vec<bool>) =
                written.iter().map(|&n| batch.body(n)).unzip();
            self.inner.messages.write_bodies(&bodies, &flags, now_ms)
        };
        if batch.has_idempotency_keys() {
            let keys = (0..batch.len()).map(|n| batch.idempotency_key(n));
            return self.write_once(keys, write);
        }
        let all: Vec<usize> = (0..batch.len()).collect();
        let offsets = write(&all, self.inner.clock.now_ms())?;
        let answers = offsets
            .clone()
            .map(|offset| Stored {
                offset,
                duplicate: false,
            })
            .collect();
        let log = &self.inner.messages;
        Ok(Deferred::on_messages(log.durable(offsets.end), Ok(answers)))
    }

    /// The window's part of an idempotent publish of messages whose idempotency keys are
    /// `keys`: under the window's lock, decides which are repeats, has `write` write the
    /// others (their indices, in order, at the time given) and records their keys.
    fn write_once<'k>(
        &self,
        keys: impl Iterator<Item = Option<&'k str>>,
        write: impl FnOnce(&[usize], u64) -> Result<Range<u64>, StoreError>,
    ) -> Result<Deferred<Vec<Stored>>, StoreError> {
        let log = &self.inner.messages;
        let mut seen = self.inner.keys_seen.lock();
        let now_ms = self.inner.clock.now_ms();
        seen.forget_old(log.written_end(), now_ms);
        // Each key hashed once, for the window's lookup, the batch's own repeats and the
        // insert (four SipHash runs a key were most of an idempotent publish's extra).
        let hashed: Vec<Option<(&str, u64)>> = keys
            .map(|key| key.map(|key| (key, seen.hash(key))))
            .collect();
        let mut plans = Vec::with_capacity(hashed.len());
        let mut in_batch: HashTable<(&str, u64, usize)> = HashTable::with_capacity(hashed.len());
        let mut written: Vec<usize> = Vec::with_capacity(hashed.len());
        for (index, &key) in hashed.iter().enumerate() {
            if let Some(offset) = key.and_then(|(key, hash)| seen.offset_of(key, hash)) {
                plans.push(Plan::Seen(offset));
                continue;
            }
            if let Some((key, hash)) = key {
                match in_batch.entry(hash, |&(k, _, _)| k == key, |&(_, h, _)| h) {
                    Entry::Occupied(first) => {
                        plans.push(Plan::Written(first.get().2, true));
                        continue;
                    }
                    Entry::Vacant(slot) => {
                        slot.insert((key, hash, written.len()));
                    }
                }
            }
            plans.push(Plan::Written(written.len(), false));
            written.push(index);
        }
        let offsets = write(&written, now_ms)?;
        for (&index, offset) in written.iter().zip(offsets.clone()) {
            if let Some((key, hash)) = hashed[index] {
                seen.insert(key, hash, offset, now_ms);
            }
        }
        drop(seen);
        let answers: Vec<Stored> = plans
            .into_iter()
            .map(|plan| match plan {
                Plan::Seen(offset) => Stored {
                    offset,
                    duplicate: true,
                },
                Plan::Written(n, duplicate) => Stored {
                    offset: offsets.start + n as u64,
                    duplicate,
                },
            })
            .collect();
        // A repeat answers once the first publish is durable, too.
        let wait_end = answers
            .iter()
            .map(|answer| answer.offset + 1)
            .fold(offsets.end, u64::max);
        Ok(Deferred::on_messages(log.durable(wait_end), Ok(answers)))
    }
}
