//! Messages with their metadata on a [`DurableTopic`]: publishing them with keys, headers
//! and idempotency keys (record format 2, see `crate::message`), and reading them back
//! with those and the publish time.
//!
//! The group operations hand out payloads only, as the in-memory topic does; a home that
//! shows metadata (the server) turns each delivery or dead letter into its message with
//! [`DurableTopic::message_at`], which reads the record again (from the page cache as a
//! rule, since the delivery just read it). A dead letter whose message retention removed
//! keeps its payload (copied into the groups log) but not its metadata.

use std::ops::Range;

use bytes::Bytes;
use mailroom::topic::{Message, Metadata, TopicError};

use crate::message::{encode_block, message_of, NewMessage};
use crate::{Deferred, DurableTopic, StoreError};

impl DurableTopic {
    /// Appends `messages`, with their metadata, as consecutive messages with one sync,
    /// and returns their offsets, as [`publish_batch`](Self::publish_batch). A message
    /// without metadata is stored exactly as `publish_batch` stores it.
    ///
    /// # Errors
    ///
    /// `Topic(InvalidArgument)` naming the field of the first metadata past a limit of
    /// `mailroom::topic::Metadata::check` (nothing is written); as
    /// [`publish`](Self::publish).
    ///
    /// Messages with an idempotency key go through the window as in
    /// [`publish_once`](Self::publish_once): a repeat is not stored, and the range
    /// covers only the messages stored (the empty range at the end if none was).
    ///
    /// # Example
    ///
    /// ```
    /// use bytes::Bytes;
    /// use mailroom::topic::Metadata;
    /// use mailroom_store::{NewMessage, Store, StoreOptions};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path(), StoreOptions::default())?;
    /// store.create_topic("t")?;
    /// let topic = store.topic("t")?;
    /// let metadata = Metadata::new().with_key("customer-7").with_header("origin", "web");
    /// let message = NewMessage { payload: Bytes::from_static(b"hi"), metadata: metadata.clone() };
    /// assert_eq!(topic.publish_messages(&[message])?, 0..1);
    /// let read = topic.read_message(0)?.expect("retained");
    /// assert_eq!((&read.payload[..], read.metadata), (&b"hi"[..], metadata));
    /// assert!(read.published_at_ms.is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn publish_messages(&self, messages: &[NewMessage]) -> Result<Range<u64>, StoreError> {
        self.publish_messages_deferred(messages)?.wait()
    }

    /// [`publish_messages`](Self::publish_messages) without the wait, as
    /// [`publish_batch_deferred`](Self::publish_batch_deferred).
    ///
    /// # Errors
    ///
    /// As [`publish_messages`](Self::publish_messages): argument and write errors here,
    /// sync errors from the `Deferred`.
    pub fn publish_messages_deferred(
        &self,
        messages: &[NewMessage],
    ) -> Result<Deferred<Range<u64>>, StoreError> {
        if messages.iter().all(|message| message.metadata.is_empty()) {
            let payloads: Vec<Bytes> = messages.iter().map(|m| m.payload.clone()).collect();
            return self.publish_batch_deferred(&payloads);
        }
        if messages
            .iter()
            .any(|message| message.metadata.idempotency_key.is_some())
        {
            // The stored ones are consecutive: one write.
            return Ok(self.publish_once_deferred(messages)?.and_then(|answers| {
                let mut stored = answers.iter().filter(|answer| !answer.duplicate);
                Ok(match stored.next() {
                    Some(first) => first.offset..first.offset + 1 + stored.count() as u64,
                    None => {
                        let end = self.inner.messages.written_end();
                        end..end
                    }
                })
            }));
        }
        let _live = self.live()?;
        for message in messages {
            message.metadata.check().map_err(TopicError::from)?;
        }
        let all: Vec<&NewMessage> = messages.iter().collect();
        let log = &self.inner.messages;
        let offsets = self.write_messages(&all, self.inner.clock.now_ms())?;
        Ok(Deferred::on_messages(log.durable(offsets.end), Ok(offsets)))
    }

    /// Writes `messages` (checked) in one log write at `now_ms`, each with its metadata
    /// block if it has metadata.
    pub(crate) fn write_messages(
        &self,
        messages: &[&NewMessage],
        now_ms: u64,
    ) -> Result<Range<u64>, StoreError> {
        // Only messages with metadata are copied into a body of block + payload, all of
        // them into one buffer: one allocation per write, not one per message.
        let joined_bytes: usize = messages
            .iter()
            .filter(|message| !message.metadata.is_empty())
            .map(|message| message.payload.len() + 64)
            .sum();
        let mut joined = Vec::with_capacity(joined_bytes);
        let bodies: Vec<Option<Range<usize>>> = messages
            .iter()
            .map(|message| {
                (!message.metadata.is_empty()).then(|| {
                    let start = joined.len();
                    encode_block(&message.metadata, &mut joined);
                    joined.extend_from_slice(&message.payload);
                    start..joined.len()
                })
            })
            .collect();
        let slices: Vec<&[u8]> = messages
            .iter()
            .zip(&bodies)
            .map(|(message, body)| match body {
                Some(range) => &joined[range.clone()],
                None => &message.payload[..],
            })
            .collect();
        let flags: Vec<bool> = bodies.iter().map(Option::is_some).collect();
        self.inner.messages.write_bodies(&slices, &flags, now_ms)
    }

    /// Reads the message at `offset` with its publish time and metadata; `None` if it is
    /// past the end or was deleted by retention.
    ///
    /// # Errors
    ///
    /// I/O errors and corruption (a metadata block that does not read);
    /// [`StoreError::UnknownTopic`] after deletion.
    pub fn read_message(&self, offset: u64) -> Result<Option<Message<Bytes>>, StoreError> {
        let _live = self.live()?;
        let Some(record) = self.inner.messages.read(offset)? else {
            return Ok(None);
        };
        message_of(record)
            .map(Some)
            .map_err(|reason| StoreError::Corrupt {
                path: self.inner.dir.join("messages"),
                position: offset,
                reason,
            })
    }

    /// The first retained offset whose message was published at or after `time_ms`
    /// (the record header's `timestamp_ms`, the broker's clock at publish); the end of
    /// the log if none is. A binary search over offsets, so about `log2(len)` record
    /// reads, each a scan of at most one index interval.
    ///
    /// Publish times are taken as non-decreasing in offset order, as the broker's clock
    /// gives them; if the clock stepped back, the answer is one offset where the time
    /// crosses `time_ms`, not necessarily the first (Kafka's lookup by `CreateTime`
    /// has the same caveat).
    ///
    /// # Errors
    ///
    /// I/O errors and corruption; [`StoreError::UnknownTopic`] after deletion.
    ///
    /// # Example
    ///
    /// ```
    /// use std::sync::Arc;
    /// use bytes::Bytes;
    /// use mailroom_store::clock::ManualClock;
    /// use mailroom_store::{Store, StoreOptions};
    ///
    /// let clock = Arc::new(ManualClock::new(1_000));
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path(), StoreOptions { clock: clock.clone(), ..StoreOptions::default() })?;
    /// store.create_topic("t")?;
    /// let topic = store.topic("t")?;
    /// topic.publish(Bytes::from_static(b"a"))?; // at 1000
    /// clock.advance_ms(10);
    /// topic.publish(Bytes::from_static(b"b"))?; // at 1010
    /// assert_eq!(topic.offset_at_time(1_005)?, 1);
    /// assert_eq!(topic.offset_at_time(0)?, 0);
    /// assert_eq!(topic.offset_at_time(2_000)?, 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn offset_at_time(&self, time_ms: u64) -> Result<u64, StoreError> {
        let _live = self.live()?;
        let log = &self.inner.messages;
        let (mut low, mut high) = (log.start(), log.end());
        // Invariant: every offset below `low` is before `time_ms` (or gone), and the
        // answer is at most `high`.
        while low < high {
            let middle = low + (high - low) / 2;
            match log.read(middle)? {
                Some(record) if record.timestamp_ms >= time_ms => high = middle,
                // Before the time, or removed by retention meanwhile.
                _ => low = middle + 1,
            }
        }
        Ok(low)
    }

    /// The message at `offset` whose payload a delivery or dead letter handed out: with
    /// its publish time and metadata while the message log still holds it, else the
    /// payload alone (no publish time, no metadata).
    ///
    /// # Errors
    ///
    /// As [`read_message`](Self::read_message).
    pub fn message_at(&self, offset: u64, payload: Bytes) -> Result<Message<Bytes>, StoreError> {
        Ok(match self.read_message(offset)? {
            Some(message) => Message { payload, ..message },
            None => Message::new(payload, None, Metadata::default()),
        })
    }
}
