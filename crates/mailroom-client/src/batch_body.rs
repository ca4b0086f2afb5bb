//! A batch publish's body, written in the client's [`BatchEncoding`].

use base64::Engine as _;
use bytes::Bytes;
use http::Method;
use mailroom_api::batch_binary::{self, BatchWriter, TooLong};
use mailroom_api::batch_item::{BatchItemRef, BatchObjectRef, BatchRequestRef};
use mailroom_api::topics::Base64Message;

use crate::call::Call;
use crate::{Client, ClientError, NewMessage};

/// How a [`Client`] writes the body of a batch publish
/// ([`Client::publish_batch`], [`Client::publish_messages`], [`Client::publish_once`]).
/// The server reads both.
///
/// ```
/// use mailroom_client::{BatchEncoding, Client};
/// let client = Client::new("http://127.0.0.1:7070")?;
/// assert_eq!(client.batch_encoding(), BatchEncoding::Binary);
/// let json = client.with_batch_encoding(BatchEncoding::Json);
/// assert_eq!(json.batch_encoding(), BatchEncoding::Json);
/// # Ok::<(), mailroom_client::ClientError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum BatchEncoding {
    /// The binary batch encoding ([`mailroom_api::batch_binary`]): lengths and bytes,
    /// any payload as it is. Cheaper to write and to read than JSON.
    #[default]
    Binary,
    /// JSON (`{"messages": [...]}`), payloads that are not UTF-8 as base64: for a proxy
    /// or gateway in between that has to read the body.
    Json,
}

/// A guess of a header's encoded bytes, for the binary body's first allocation (the
/// writer then reserves each message's exact size as it adds it).
const HEADER_BYTES_GUESS: usize = 80;

impl Client {
    /// The same client, writing batch publishes in `encoding`.
    pub fn with_batch_encoding(mut self, encoding: BatchEncoding) -> Client {
        self.batch_encoding = encoding;
        self
    }

    /// How this client writes batch publishes.
    pub fn batch_encoding(&self) -> BatchEncoding {
        self.batch_encoding
    }

    /// The batch publish request of bare `payloads` to `topic`.
    pub(crate) fn bare_batch_publish(
        &self,
        topic: &str,
        payloads: &[Bytes],
    ) -> Result<Call, ClientError> {
        if self.batch_encoding == BatchEncoding::Binary {
            let bytes = payloads.iter().map(|payload| payload.len() + 5).sum();
            let mut writer = BatchWriter::with_capacity(bytes);
            for payload in payloads {
                writer.push_bare(payload).map_err(too_long)?;
            }
            return self.binary_batch_publish(topic, writer);
        }
        // Borrowed, as `item` below does: the payloads are not copied into `String`s
        // before they are written as JSON.
        let messages = payloads
            .iter()
            .map(|payload| match std::str::from_utf8(payload) {
                Ok(text) => BatchItemRef::Text(text),
                Err(_) => BatchItemRef::Binary(Base64Message {
                    base64: base64::engine::general_purpose::STANDARD.encode(payload),
                }),
            })
            .collect();
        self.json_batch_publish(topic, &BatchRequestRef { messages })
    }

    /// The batch publish request of `messages`, with their metadata, to `topic`.
    pub(crate) fn messages_batch_publish(
        &self,
        topic: &str,
        messages: &[NewMessage],
    ) -> Result<Call, ClientError> {
        if self.batch_encoding == BatchEncoding::Binary {
            let bytes = messages
                .iter()
                .map(|m| m.payload.len() + 64 + m.headers.len() * HEADER_BYTES_GUESS)
                .sum();
            let mut writer = BatchWriter::with_capacity(bytes);
            for message in messages {
                let headers = message.headers.iter();
                writer
                    .push(
                        &message.payload,
                        message.key.as_deref(),
                        message.idempotency_key.as_deref(),
                        headers.map(|(name, value)| (name.as_str(), value.as_str())),
                    )
                    .map_err(too_long)?;
            }
            return self.binary_batch_publish(topic, writer);
        }
        let messages = messages.iter().map(item).collect();
        self.json_batch_publish(topic, &BatchRequestRef { messages })
    }

    fn binary_batch_publish(&self, topic: &str, writer: BatchWriter) -> Result<Call, ClientError> {
        let path = Self::topic_path(topic, &["messages", "batch"])?;
        Ok(self
            .request(Method::POST, &path)
            .body(batch_binary::CONTENT_TYPE, writer.finish()))
    }

    /// The JSON batch publish of `body`, written by [`BatchRequestRef::to_json`]
    /// (serde_json's bytes, written in a fraction of its time: most of a JSON batch
    /// publish's client time was serde_json escaping strings).
    fn json_batch_publish(
        &self,
        topic: &str,
        body: &BatchRequestRef<'_>,
    ) -> Result<Call, ClientError> {
        let path = Self::topic_path(topic, &["messages", "batch"])?;
        Ok(self
            .request(Method::POST, &path)
            .body("application/json", body.to_json()))
    }
}

/// The JSON batch item `message` travels as, borrowed from it.
fn item(message: &NewMessage) -> BatchItemRef<'_> {
    let (payload, payload_base64) = match std::str::from_utf8(&message.payload) {
        Ok(text) => (Some(text), None),
        Err(_) => (
            None,
            Some(base64::engine::general_purpose::STANDARD.encode(&message.payload)),
        ),
    };
    BatchItemRef::Message(BatchObjectRef {
        payload,
        payload_base64,
        key: message.key.as_deref(),
        headers: (!message.headers.is_empty()).then_some(&message.headers),
        idempotency_key: message.idempotency_key.as_deref(),
    })
}

fn too_long(error: TooLong) -> ClientError {
    ClientError::InvalidRequest(error.to_string())
}
