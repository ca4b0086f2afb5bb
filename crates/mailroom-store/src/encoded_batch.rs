//! Messages encoded into their record bodies before the publish: [`EncodedBatch`].
//!
//! A batch publish with metadata used to go from the request body to a `String` per key,
//! header name and header value, a map per message, and then into the record's
//! metadata block (`crate::message`). An `EncodedBatch` is filled from borrowed
//! metadata ([`MetadataRef`]) instead: each message's block and payload are written
//! once, into one buffer for the whole batch, and the log writes them from there. A
//! message without metadata keeps its payload as it came (a [`Bytes`] that may share
//! the request's buffer), so it is not copied at all before the log write; nor is a
//! record body that came whole, its metadata block read and checked
//! ([`push_record`](EncodedBatch::push_record): the binary batch publish).
//!
//! What the publish stores is what [`DurableTopic::publish_once`](crate::DurableTopic::publish_once)
//! stores for the same messages: the record bodies are the same bytes.
//!
//! # Example
//!
//! ```
//! use bytes::Bytes;
//! use mailroom::topic::MetadataRef;
//! use mailroom_store::{EncodedBatch, Store, StoreOptions};
//!
//! let dir = tempfile::tempdir()?;
//! let store = Store::open(dir.path(), StoreOptions::default())?;
//! store.create_topic("t")?;
//! let topic = store.topic("t")?;
//! let mut batch = EncodedBatch::with_capacity(2, 64);
//! batch.push_bare(Bytes::from_static(b"bare"));
//! let headers = [("trace", "t1")];
//! let metadata = MetadataRef { key: Some("k"), headers: &headers, idempotency_key: None };
//! batch.push(&metadata, b"with metadata")?;
//! let answers = topic.publish_encoded(&batch)?;
//! assert_eq!(answers.iter().map(|a| a.offset).collect::<Vec<_>>(), [0, 1]);
//! let read = topic.read_message(1)?.unwrap();
//! assert_eq!((read.payload, read.metadata.key), (Bytes::from_static(b"with metadata"), Some("k".into())));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::ops::Range;

use bytes::Bytes;
use mailroom::group::ArgumentError;
use mailroom::topic::{check_metadata_lengths, MetadataRef};
use mailroom_api::metadata_block::{idempotency_key_at, BlockRef};

use crate::message::{decode_block, encode_block_ref, NewMessage};
use crate::record::metadata_block_bytes;

/// Messages to publish, each already encoded as its record body (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct EncodedBatch {
    /// The bodies of the messages with metadata, one after the other.
    joined: Vec<u8>,
    messages: Vec<Encoded>,
    idempotency_keys: usize,
}

#[derive(Debug, Clone)]
enum Body {
    /// Block and payload, at this range of `joined`.
    Joined(Range<usize>),
    /// A payload without metadata, as it came.
    Bare(Bytes),
    /// Block and payload, as they came.
    Record(Bytes),
}

#[derive(Debug, Clone)]
struct Encoded {
    body: Body,
    /// Where the idempotency key's text is in the body.
    idempotency_key: Option<Range<usize>>,
}

impl EncodedBatch {
    /// An empty batch with room for `messages` messages and `bytes` bytes of bodies
    /// with metadata.
    pub fn with_capacity(messages: usize, bytes: usize) -> EncodedBatch {
        EncodedBatch {
            joined: Vec::with_capacity(bytes),
            messages: Vec::with_capacity(messages),
            idempotency_keys: 0,
        }
    }

    /// Adds a message of `payload` without metadata (not copied).
    pub fn push_bare(&mut self, payload: Bytes) {
        self.messages.push(Encoded {
            body: Body::Bare(payload),
            idempotency_key: None,
        });
    }

    /// Adds a message of `payload` with `metadata`, after checking the metadata's
    /// limits; empty metadata adds the payload as [`push_bare`](Self::push_bare) would
    /// (copied, since it is borrowed).
    ///
    /// # Errors
    ///
    /// As [`MetadataRef::check`]; nothing is added then.
    pub fn push(
        &mut self,
        metadata: &MetadataRef<'_>,
        payload: &[u8],
    ) -> Result<(), ArgumentError> {
        metadata.check()?;
        if metadata.is_empty() {
            self.push_bare(Bytes::copy_from_slice(payload));
            return Ok(());
        }
        let start = self.joined.len();
        encode_block_ref(metadata, &mut self.joined);
        // Found in the block just written instead of copied.
        let idempotency_key = idempotency_key_at(&self.joined[start..]);
        self.joined.extend_from_slice(payload);
        self.push_encoded(Body::Joined(start..self.joined.len()), idempotency_key);
        Ok(())
    }

    /// Adds a message whose record body came whole: `block`, read and checked by
    /// [`mailroom_api::metadata_block::read_block`], then the payload. The body is not
    /// copied. The limits of its metadata are checked here.
    ///
    /// # Errors
    ///
    /// As [`MetadataRef::check`]; nothing is added then.
    ///
    /// # Panics
    ///
    /// If `body` does not open with `block`'s bytes.
    ///
    /// # Example
    ///
    /// ```
    /// use bytes::Bytes;
    /// use mailroom_api::metadata_block::{read_block, write_block};
    /// use mailroom_store::EncodedBatch;
    ///
    /// let mut body = Vec::new();
    /// write_block(Some("k"), None, [("trace", "t1")].into_iter(), &mut body)?;
    /// let block_bytes = body.len();
    /// body.extend_from_slice(b"payload");
    /// let body = Bytes::from(body);
    /// let mut headers = Vec::new();
    /// let block = read_block(&body[..block_bytes], &mut headers).unwrap();
    /// let mut batch = EncodedBatch::default();
    /// batch.push_record(body.clone(), &block)?;
    /// let message = &batch.to_messages()[0];
    /// assert_eq!((&message.payload[..], message.metadata.key.as_deref()), (&b"payload"[..], Some("k")));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn push_record(
        &mut self,
        body: Bytes,
        block: &BlockRef<'_, '_>,
    ) -> Result<(), ArgumentError> {
        let bytes = block.bytes();
        // The same buffer (the server's case) is told by its address; anything else is
        // compared.
        let opens_with_block = body
            .get(..bytes.len())
            .is_some_and(|head| std::ptr::eq(head, bytes) || head == bytes);
        assert!(opens_with_block, "a record body opens with its block");
        let (key, idempotency_key, header_count, headers) = block.lengths();
        check_metadata_lengths(key, idempotency_key, header_count, headers)?;
        self.push_encoded(Body::Record(body), block.idempotency_key_range());
        Ok(())
    }

    /// Adds a body whose idempotency key is at `idempotency_key`.
    fn push_encoded(&mut self, body: Body, idempotency_key: Option<Range<usize>>) {
        self.idempotency_keys += usize::from(idempotency_key.is_some());
        self.messages.push(Encoded {
            body,
            idempotency_key,
        });
    }

    /// How many messages it holds.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// Whether it holds no message.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// Whether a message of it has an idempotency key.
    pub fn has_idempotency_keys(&self) -> bool {
        self.idempotency_keys != 0
    }

    /// Whether a message of it has metadata.
    pub fn has_metadata(&self) -> bool {
        self.messages
            .iter()
            .any(|message| !matches!(message.body, Body::Bare(_)))
    }

    /// Message `n`'s record body, and whether it starts with a metadata block.
    pub(crate) fn body(&self, n: usize) -> (&[u8], bool) {
        match &self.messages[n].body {
            Body::Joined(range) => (&self.joined[range.clone()], true),
            Body::Bare(payload) => (payload, false),
            Body::Record(body) => (body, true),
        }
    }

    /// Message `n`'s idempotency key.
    pub(crate) fn idempotency_key(&self, n: usize) -> Option<&str> {
        let range = self.messages[n].idempotency_key.clone()?;
        // The text was a `&str` when it was pushed.
        Some(std::str::from_utf8(&self.body(n).0[range]).expect("pushed as UTF-8"))
    }

    /// The messages as [`NewMessage`]s (decoded again: for a home that takes no
    /// encoded bodies).
    pub fn to_messages(&self) -> Vec<NewMessage> {
        (0..self.len())
            .map(|n| match &self.messages[n].body {
                Body::Bare(payload) => NewMessage::bare(payload.clone()),
                Body::Joined(_) | Body::Record(_) => decoded(self.body(n).0),
            })
            .collect()
    }
}

/// The message of a record body that opens with its block.
fn decoded(body: &[u8]) -> NewMessage {
    let block_bytes = metadata_block_bytes(body).expect("encoded or checked here");
    NewMessage {
        payload: Bytes::copy_from_slice(&body[block_bytes..]),
        metadata: decode_block(&body[..block_bytes]).expect("encoded or checked here"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mailroom::topic::Metadata;

    // Proves the bodies are the blocks `encode_block` writes followed by the payloads,
    // that the idempotency key is found in its block, and that decoding gives the
    // messages back.
    #[test]
    fn bodies_are_blocks_then_payloads() {
        let headers = [("a", "1"), ("b", "")];
        let cases = [
            MetadataRef {
                key: Some("key"),
                headers: &headers,
                idempotency_key: Some("once"),
            },
            MetadataRef {
                key: None,
                headers: &[],
                idempotency_key: Some("only"),
            },
            MetadataRef::default(),
        ];
        let mut batch = EncodedBatch::default();
        for metadata in &cases {
            batch.push(metadata, b"payload").unwrap();
        }
        assert_eq!(batch.len(), 3);
        assert!(batch.has_idempotency_keys() && batch.has_metadata());
        for (n, metadata) in cases.iter().enumerate() {
            let owned: Metadata = metadata.to_metadata();
            let mut expected = Vec::new();
            crate::message::encode_block(&owned, &mut expected);
            expected.extend_from_slice(b"payload");
            assert_eq!(batch.body(n), (&expected[..], !owned.is_empty()));
            assert_eq!(batch.idempotency_key(n), metadata.idempotency_key);
            let message = &batch.to_messages()[n];
            assert_eq!(
                (&message.payload[..], &message.metadata),
                (&b"payload"[..], &owned)
            );
        }
        let refused = MetadataRef {
            key: Some(""),
            ..MetadataRef::default()
        };
        assert!(batch.push(&refused, b"p").is_err());
        assert_eq!(batch.len(), 3, "a refused message adds nothing");
    }

    // Proves a record body pushed whole is the body `push` writes for the same
    // metadata, is kept without a copy, gives its idempotency key, and that its limits
    // are checked.
    #[test]
    fn a_record_body_is_kept_as_it_came() {
        use mailroom_api::metadata_block::{read_block, write_block};
        let mut written = Vec::new();
        let headers = [("a", "1"), ("b", "")];
        write_block(Some("key"), Some("once"), headers.into_iter(), &mut written).unwrap();
        let block_bytes = written.len();
        written.extend_from_slice(b"payload");
        let body = Bytes::from(written);
        let mut scratch = Vec::new();
        let block = read_block(&body[..block_bytes], &mut scratch).unwrap();
        let mut batch = EncodedBatch::default();
        batch.push_record(body.clone(), &block).unwrap();
        let metadata = MetadataRef {
            key: Some("key"),
            headers: &headers,
            idempotency_key: Some("once"),
        };
        batch.push(&metadata, b"payload").unwrap();
        assert_eq!(batch.body(0), batch.body(1));
        assert_eq!(batch.body(0).0.as_ptr(), body.as_ptr(), "copied");
        assert_eq!(batch.idempotency_key(0), Some("once"));
        assert!(batch.has_idempotency_keys() && batch.has_metadata());

        let mut empty_key = Vec::new();
        write_block(Some(""), None, std::iter::empty(), &mut empty_key).unwrap();
        let block = read_block(&empty_key, &mut scratch).unwrap();
        let refused = batch.push_record(Bytes::from(empty_key.clone()), &block);
        assert!(matches!(
            refused,
            Err(ArgumentError::LengthOutOfRange { field: "key", .. })
        ));
        assert_eq!(batch.len(), 2, "a refused record adds nothing");
    }
}
