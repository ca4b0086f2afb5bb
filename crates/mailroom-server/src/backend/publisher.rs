//! A topic's publishing end for a publish stream ([`TopicPublisher`]).

use std::fmt;
use std::ops::Range;

use bytes::Bytes;
use mailroom_store::{NewMessage, Stored};

use super::{BackendError, Durable};

/// A topic's publishing end, held by a publish stream for as long as it runs: the
/// stream keeps publishing to the topic it opened, and learns that it was deleted from
/// the next publish's error.
pub trait TopicPublisher: fmt::Debug + Send + Sync {
    /// Publishes `payloads` as one write and returns the wait for its durability, which
    /// resolves with the offsets given. The call part runs here, so batches get their
    /// offsets in the order of these calls while their waits overlap; waking long polls
    /// happens in the wait, once the batch is durable.
    ///
    /// # Errors
    /// At once, when the batch cannot be written (unknown topic, a fail-stop, a batch
    /// over the store's limits); from the wait, when it is not made durable.
    fn publish_batch(&self, payloads: &[Bytes]) -> Result<Durable<Range<u64>>, BackendError>;

    /// As [`publish_batch`](Self::publish_batch), for messages with metadata (already
    /// checked). The default takes messages without metadata only.
    ///
    /// # Errors
    /// As [`publish_batch`](Self::publish_batch).
    fn publish_messages(
        &self,
        messages: &[NewMessage],
    ) -> Result<Durable<Range<u64>>, BackendError> {
        if messages.iter().any(|message| !message.metadata.is_empty()) {
            return Err(BackendError::NotSupported(
                "publishing a key, headers or an idempotency key",
            ));
        }
        let payloads: Vec<Bytes> = messages.iter().map(|m| m.payload.clone()).collect();
        self.publish_batch(&payloads)
    }

    /// As [`publish_messages`](Self::publish_messages), one answer per message, as
    /// [`Backend::publish_once`](super::Backend::publish_once). The default keeps no idempotency keys and refuses them.
    ///
    /// # Errors
    /// As [`publish_batch`](Self::publish_batch).
    fn publish_once(&self, messages: &[NewMessage]) -> Result<Durable<Vec<Stored>>, BackendError> {
        if messages
            .iter()
            .any(|m| m.metadata.idempotency_key.is_some())
        {
            return Err(BackendError::NotSupported(
                "publishing with an idempotency key",
            ));
        }
        let written = self.publish_messages(messages)?;
        Ok(Box::pin(async move {
            let offsets = written.await?;
            Ok(offsets
                .map(|offset| Stored {
                    offset,
                    duplicate: false,
                })
                .collect())
        }))
    }
}
