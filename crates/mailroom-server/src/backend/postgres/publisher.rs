//! The publish stream's handle on a topic: one task per stream publishes its batches in
//! the order they were handed over, each in its own transaction (a batch of bare
//! payloads possibly shared with other publishes of the topic: `appends.rs`), and each
//! batch's wait resolves once that transaction committed.
//!
//! Unlike the embedded store's handle, opening one does not check that the topic exists
//! (that would need the database, and opening is not async): a stream on an unknown topic
//! learns it from its first publish's `unknown_topic`, which ends the stream.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use mailroom_store::{IdempotencyWindow, NewMessage, Stored};
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};

use super::appends::Appends;
use super::notify::Notifier;
use super::{lost, wake, GroupCache};
use crate::backend::{BackendError, Durable, TopicPublisher};
use crate::long_poll::LongPolls;

/// One batch for the stream's task, and where its answer goes.
enum Batch {
    /// Payloads without metadata.
    Payloads(
        Vec<Bytes>,
        oneshot::Sender<Result<Range<u64>, BackendError>>,
    ),
    /// Messages with metadata; `true`: idempotently.
    Messages(
        Vec<NewMessage>,
        bool,
        oneshot::Sender<Result<Vec<Stored>, BackendError>>,
    ),
}

/// What a stream's task needs of the backend.
pub(super) struct Publishing {
    pub long_polls: Arc<LongPolls>,
    pub notifier: Arc<Notifier>,
    pub appends: Arc<Appends>,
    pub failure: Arc<Mutex<Option<String>>>,
    pub cache: Arc<GroupCache>,
    pub window: IdempotencyWindow,
}

/// A publish stream's handle; its task ends when the handle is dropped.
#[derive(Debug)]
pub(super) struct PgPublisher {
    batches: mpsc::UnboundedSender<Batch>,
}

impl PgPublisher {
    /// A handle on `topic`, with its task started.
    pub(super) fn start(topic: String, publishing: Publishing) -> PgPublisher {
        let (batches, mut queue) = mpsc::unbounded_channel::<Batch>();
        tokio::spawn(async move {
            while let Some(batch) = queue.recv().await {
                // A stream that stopped waiting for an answer is gone: nothing to tell.
                match batch {
                    Batch::Payloads(payloads, answer) => {
                        let result = publishing.appends.append(&topic, &payloads).await;
                        publishing.noted(&topic, result.as_ref().map(|r| !r.is_empty()));
                        let _ = answer.send(result);
                    }
                    Batch::Messages(messages, once, answer) => {
                        let window = once.then_some(publishing.window);
                        let result = publishing
                            .appends
                            .append_messages(&topic, &messages, window)
                            .await;
                        let stored = result
                            .as_ref()
                            .map(|answers| answers.iter().any(|answer| !answer.duplicate));
                        publishing.noted(&topic, stored);
                        let _ = answer.send(result);
                    }
                }
            }
        });
        PgPublisher { batches }
    }
}

impl Publishing {
    /// Wakes the topic's long polls after a batch that stored something, and notes what
    /// the batch says of the database's health, as the backend's own calls do.
    fn noted(&self, topic: &str, stored: Result<bool, &BackendError>) {
        match stored {
            Ok(true) => {
                wake(&self.long_polls, &self.notifier, topic);
                *self.failure.lock() = None;
            }
            Ok(false) => {}
            Err(BackendError::Unavailable(why)) => {
                lost(&self.failure, &self.cache, &self.notifier, why);
            }
            Err(_) => {}
        }
    }
}

impl PgPublisher {
    /// Hands `batch` to the task and answers the wait for `wait`.
    fn handed<T: Send + 'static>(
        &self,
        batch: Batch,
        wait: oneshot::Receiver<Result<T, BackendError>>,
    ) -> Result<Durable<T>, BackendError> {
        let ended = || BackendError::Internal("the publish stream's task ended".into());
        self.batches.send(batch).map_err(|_| ended())?;
        Ok(Box::pin(async move { wait.await.map_err(|_| ended())? }))
    }
}

impl TopicPublisher for PgPublisher {
    fn publish_batch(&self, payloads: &[Bytes]) -> Result<Durable<Range<u64>>, BackendError> {
        let (answer, wait) = oneshot::channel();
        self.handed(Batch::Payloads(payloads.to_vec(), answer), wait)
    }

    fn publish_messages(
        &self,
        messages: &[NewMessage],
    ) -> Result<Durable<Range<u64>>, BackendError> {
        let (answer, wait) = oneshot::channel();
        let written = self.handed(Batch::Messages(messages.to_vec(), false, answer), wait)?;
        Ok(Box::pin(async move {
            let answers = written.await?;
            Ok(match (answers.first(), answers.last()) {
                (Some(first), Some(last)) => first.offset..last.offset + 1,
                _ => 0..0,
            })
        }))
    }

    fn publish_once(&self, messages: &[NewMessage]) -> Result<Durable<Vec<Stored>>, BackendError> {
        let (answer, wait) = oneshot::channel();
        self.handed(Batch::Messages(messages.to_vec(), true, answer), wait)
    }
}
