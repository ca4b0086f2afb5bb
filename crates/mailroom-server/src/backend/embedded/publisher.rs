//! A publish stream's hold on its topic in the embedded backend.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use mailroom_store::log::{APPEND_BYTES_MAX, APPEND_RECORDS_MAX};
use mailroom_store::{Deferred, DurableTopic, NewMessage, Stored};

use crate::backend::{BackendError, Durable, TopicPublisher};
use crate::config::PAYLOAD_BYTES_MAX_LIMIT;
use crate::long_poll::LongPolls;
use crate::routes::publish_stream::{PUBLISH_STREAM_BATCH_BYTES_MAX, PUBLISH_STREAM_IN_FLIGHT_MAX};

// A publish stream's batch holds at most its in-flight bound of records and under its
// batch bytes plus one frame (the frame that crosses the mark), so the store never
// refuses one for its size.
const _: () = assert!(PUBLISH_STREAM_IN_FLIGHT_MAX <= APPEND_RECORDS_MAX);
const _: () =
    assert!(PUBLISH_STREAM_BATCH_BYTES_MAX as u64 + PAYLOAD_BYTES_MAX_LIMIT <= APPEND_BYTES_MAX);

/// A publish stream's hold on its topic: the store's handle, opened once.
#[derive(Debug)]
pub(super) struct EmbeddedPublisher {
    pub(super) handle: DurableTopic,
    pub(super) topic: String,
    pub(super) long_polls: Arc<LongPolls>,
}

impl TopicPublisher for EmbeddedPublisher {
    fn publish_batch(&self, payloads: &[Bytes]) -> Result<Durable<Range<u64>>, BackendError> {
        let written = self.handle.publish_batch_deferred(payloads)?;
        Ok(self.waking(written))
    }

    fn publish_messages(
        &self,
        messages: &[NewMessage],
    ) -> Result<Durable<Range<u64>>, BackendError> {
        let written = self.handle.publish_messages_deferred(messages)?;
        Ok(self.waking(written))
    }

    fn publish_once(&self, messages: &[NewMessage]) -> Result<Durable<Vec<Stored>>, BackendError> {
        let written = self.handle.publish_once_deferred(messages)?;
        Ok(self.waking(written))
    }
}

impl EmbeddedPublisher {
    /// The wait for `written`, which wakes the topic's long polls once it is durable.
    fn waking<T: Send + 'static>(&self, written: Deferred<T>) -> Durable<T> {
        let (topic, long_polls) = (self.topic.clone(), Arc::clone(&self.long_polls));
        Box::pin(async move {
            let offsets = written.await?;
            long_polls.wake(&topic);
            Ok(offsets)
        })
    }
}
