//! Idempotent publish on a [`DurableTopic`]: messages with an idempotency key are checked
//! against the topic's window of keys seen (`crate::idempotency`) and a repeat answers the
//! first publish's offset instead of being stored again.
//!
//! The check and the log write happen under the window's lock, so of concurrent
//! publishes of one key exactly one stores; the others answer its offset once it is
//! durable (a repeat never answers an offset a sync could still lose). Publishes without
//! idempotency keys never take that lock.

use std::collections::HashMap;

use mailroom::topic::TopicError;

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
        let log = &self.inner.messages;
        let mut seen = self.inner.keys_seen.lock();
        let now_ms = self.inner.clock.now_ms();
        seen.forget_old(log.written_end(), now_ms);
        let mut plans = Vec::with_capacity(messages.len());
        let mut in_batch: HashMap<&str, usize> = HashMap::new();
        let mut written: Vec<&NewMessage> = Vec::with_capacity(messages.len());
        for message in messages {
            let key = message.metadata.idempotency_key.as_deref();
            if let Some(offset) = key.and_then(|key| seen.offset_of(key)) {
                plans.push(Plan::Seen(offset));
            } else if let Some(&n) = key.and_then(|key| in_batch.get(key)) {
                plans.push(Plan::Written(n, true));
            } else {
                if let Some(key) = key {
                    in_batch.insert(key, written.len());
                }
                plans.push(Plan::Written(written.len(), false));
                written.push(message);
            }
        }
        let offsets = self.write_messages(&written, now_ms)?;
        for (n, message) in written.iter().enumerate() {
            if let Some(key) = &message.metadata.idempotency_key {
                seen.insert(key.clone(), offsets.start + n as u64, now_ms);
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
