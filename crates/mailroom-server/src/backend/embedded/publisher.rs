//! A publish stream's hold on its topic in the embedded backend.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use mailroom_store::log::{APPEND_BYTES_MAX, APPEND_RECORDS_MAX};
use mailroom_store::{Deferred, DurableTopic, NewMessage, Store, StoreError, Stored};
use parking_lot::Mutex;

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

/// A publish stream's hold on its topic: the store's handle, opened when the stream
/// starts and looked up again when the topic is reopened under it.
///
/// Reopening a topic (`POST .../recover`, or the server healing a fail-stop by itself
/// once the disk has room again) closes every handle of it: calls on the old one answer
/// `TopicFailed` ("look the topic up again") and write nothing, since a handle checks
/// that it is live under the same lock that its write holds. So a stream that outlives
/// the reopen moves to the new handle and writes its batch there, once; the stream goes
/// on as if nothing happened. A batch answered with an error before the reopen (a full
/// disk's `store_failed`) still ends the stream, with that code as its close reason:
/// the client reconnects, and the new stream serves once the topic does.
#[derive(Debug)]
pub(super) struct EmbeddedPublisher {
    pub(super) handle: Mutex<DurableTopic>,
    pub(super) store: Store,
    pub(super) topic: String,
    pub(super) long_polls: Arc<LongPolls>,
}

impl TopicPublisher for EmbeddedPublisher {
    fn publish_batch(&self, payloads: &[Bytes]) -> Result<Durable<Range<u64>>, BackendError> {
        let written = self.on_live_handle(|handle| handle.publish_batch_deferred(payloads))?;
        Ok(self.waking(written))
    }

    fn publish_messages(
        &self,
        messages: &[NewMessage],
    ) -> Result<Durable<Range<u64>>, BackendError> {
        let written = self.on_live_handle(|handle| handle.publish_messages_deferred(messages))?;
        Ok(self.waking(written))
    }

    fn publish_once(&self, messages: &[NewMessage]) -> Result<Durable<Vec<Stored>>, BackendError> {
        let written = self.on_live_handle(|handle| handle.publish_once_deferred(messages))?;
        Ok(self.waking(written))
    }
}

impl EmbeddedPublisher {
    /// Runs `call` on the stream's handle; if the handle was closed by a reopen (it
    /// answers `TopicFailed` and wrote nothing) and the topic serves again, runs it
    /// once more on the new handle, which the stream keeps from then on.
    fn on_live_handle<T>(
        &self,
        call: impl Fn(&DurableTopic) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let handle = self.handle.lock().clone();
        match call(&handle) {
            Err(StoreError::TopicFailed { .. }) => {
                // Still failed (not reopened yet, or reopening failed): this lookup
                // answers why, and the stream ends with it.
                let reopened = self.store.topic(&self.topic)?;
                let answer = call(&reopened);
                *self.handle.lock() = reopened;
                answer
            }
            other => other,
        }
    }

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
