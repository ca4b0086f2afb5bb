//! The publish stream's handle on a topic: one task per stream publishes its batches in
//! the order they were handed over, each in its own transaction, and each batch's wait
//! resolves once that transaction committed.
//!
//! Unlike the embedded store's handle, opening one does not check that the topic exists
//! (that would need the database, and opening is not async): a stream on an unknown topic
//! learns it from its first publish's `unknown_topic`, which ends the stream.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use deadpool_postgres::Pool;
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};

use super::notify::Notifier;
use super::topics::append;
use crate::backend::{BackendError, Durable, TopicPublisher};
use crate::long_poll::LongPolls;

/// One batch for the stream's task, and where its answer goes.
struct Batch {
    payloads: Vec<Bytes>,
    answer: oneshot::Sender<Result<Range<u64>, BackendError>>,
}

/// What a stream's task needs of the backend.
pub(super) struct Publishing {
    pub pool: Pool,
    pub long_polls: Arc<LongPolls>,
    pub notifier: Arc<Notifier>,
    pub failure: Arc<Mutex<Option<String>>>,
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
                let result = append(&publishing.pool, &topic, &batch.payloads).await;
                match &result {
                    Ok(offsets) if !offsets.is_empty() => {
                        publishing.long_polls.wake(&topic);
                        publishing.notifier.mark(&topic);
                        *publishing.failure.lock() = None;
                    }
                    Ok(_) => {}
                    Err(BackendError::Unavailable(why)) => {
                        *publishing.failure.lock() = Some(why.clone());
                    }
                    Err(_) => {}
                }
                // A stream that stopped waiting for this answer is gone: nothing to tell.
                let _ = batch.answer.send(result);
            }
        });
        PgPublisher { batches }
    }
}

impl TopicPublisher for PgPublisher {
    fn publish_batch(&self, payloads: &[Bytes]) -> Result<Durable<Range<u64>>, BackendError> {
        let (answer, wait) = oneshot::channel();
        let batch = Batch {
            payloads: payloads.to_vec(),
            answer,
        };
        self.batches
            .send(batch)
            .map_err(|_| BackendError::Internal("the publish stream's task ended".into()))?;
        Ok(Box::pin(async move {
            wait.await
                .map_err(|_| BackendError::Internal("the publish stream's task ended".into()))?
        }))
    }
}
