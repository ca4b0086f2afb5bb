//! Publishing messages with a key and headers: [`NewMessage`] and
//! [`Client::publish_messages`], over the batch publish (which keeps header names as
//! written; the raw publish's `Mailroom-Header-<name>` request headers arrive in lower
//! case).

use std::collections::BTreeMap;

use base64::Engine as _;
use bytes::Bytes;
use mailroom_api::topics::{BatchMessageObject, BatchPublished};

use crate::{Client, ClientError};

/// A message to publish, with its key and headers (limits in
/// [`mailroom_api::limits`]: [`KEY_BYTES_MAX`](mailroom_api::limits::KEY_BYTES_MAX),
/// [`HEADERS_MAX`](mailroom_api::limits::HEADERS_MAX) and the rest).
///
/// ```
/// use mailroom_client::NewMessage;
/// let message = NewMessage::new("hello").with_key("customer-1").with_header("trace", "t1");
/// assert_eq!(message.key.as_deref(), Some("customer-1"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewMessage {
    /// The payload.
    pub payload: Bytes,
    /// The key, if any.
    pub key: Option<String>,
    /// Headers by name.
    pub headers: BTreeMap<String, String>,
    /// The idempotency key, if any: a retry with the same key inside the topic's
    /// window is answered as a duplicate instead of stored again.
    pub idempotency_key: Option<String>,
}

impl NewMessage {
    /// A message of `payload` without key or headers.
    pub fn new(payload: impl Into<Bytes>) -> Self {
        NewMessage {
            payload: payload.into(),
            ..NewMessage::default()
        }
    }

    /// With `key` as its key.
    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// With `key` as its idempotency key.
    pub fn with_idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }

    /// With header `name` set to `value`.
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(name.into(), value.into());
        self
    }

    /// The object form of this message (a batch item's, a publish stream's JSON text
    /// frame), with the payload as text when it is UTF-8 and as base64 otherwise.
    pub(crate) fn object(&self) -> BatchMessageObject {
        let (payload, payload_base64) = match std::str::from_utf8(&self.payload) {
            Ok(text) => (Some(text.to_owned()), None),
            Err(_) => (
                None,
                Some(base64::engine::general_purpose::STANDARD.encode(&self.payload)),
            ),
        };
        BatchMessageObject {
            payload,
            payload_base64,
            key: self.key.clone(),
            headers: (!self.headers.is_empty()).then(|| self.headers.clone()),
            idempotency_key: self.idempotency_key.clone(),
        }
    }
}

impl Client {
    /// Publishes `messages`, with their keys and headers, in one call; returns their
    /// offsets in order.
    ///
    /// # Errors
    /// `invalid_argument` (400: an empty or oversized batch, or a key or header past its
    /// limit, naming the field), `unknown_topic` (404), `payload_too_large` (413), or a
    /// transport error.
    pub async fn publish_messages(
        &self,
        topic: &str,
        messages: &[NewMessage],
    ) -> Result<Vec<u64>, ClientError> {
        Ok(self.publish_once(topic, messages).await?.offsets)
    }

    /// As [`publish_messages`](Self::publish_messages), with the whole answer: the
    /// offsets and which messages were duplicates (their idempotency key was in the
    /// topic's window, so they were not stored and their offset is the first publish's).
    /// Retrying a publish whose answer was lost (a timeout, a 503) with the same
    /// idempotency keys is safe inside the window.
    ///
    /// # Errors
    /// As [`publish_messages`](Self::publish_messages).
    pub async fn publish_once(
        &self,
        topic: &str,
        messages: &[NewMessage],
    ) -> Result<BatchPublished, ClientError> {
        let request = self.messages_batch_publish(topic, messages)?;
        self.json(request).await
    }
}
