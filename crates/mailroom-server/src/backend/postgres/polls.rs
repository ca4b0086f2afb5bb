//! This backend's batch polls as the trait answers them: the poll (of every delivery the
//! consumer owns and new ones, or new ones only), watched for a lost connection, with
//! the long polls told of the leases it made and woken by the acks before it.

use bytes::Bytes;
use mailroom::group::DeliveryId;
use mailroom::topic::Message;
use mailroom_store::{AckedThenPolled, MessageDelivery, PollScope};
use tokio::time::Instant;

use super::Postgres;
use crate::backend::BackendError;

impl Postgres {
    /// Polls up to `max` deliveries of `group` for `consumer`, of `scope`.
    pub(super) async fn polled(
        &self,
        topic: &str,
        group: &str,
        consumer: Option<&str>,
        max: usize,
        scope: PollScope,
    ) -> Result<Vec<MessageDelivery>, BackendError> {
        let polled_at = Instant::now();
        let polled = self.poll_many(topic, group, consumer, max, scope).await;
        let deliveries = self.watched(polled)?;
        self.long_polls
            .leased_if(topic, group, polled_at, !deliveries.is_empty());
        Ok(deliveries)
    }

    /// Acks `acks`, then polls as [`polled`](Self::polled), in one transaction.
    pub(super) async fn acked_then_polled(
        &self,
        topic: &str,
        group: &str,
        acks: &[DeliveryId],
        consumer: Option<&str>,
        max: usize,
        scope: PollScope,
    ) -> Result<AckedThenPolled<Message<Bytes>>, BackendError> {
        let polled_at = Instant::now();
        let result = self
            .ack_then_poll(topic, group, acks, consumer, max, scope)
            .await;
        let (acked, polled) = self.watched(result)?;
        self.woken_by(topic, &acked);
        self.long_polls
            .leased_if(topic, group, polled_at, !polled.is_empty());
        Ok((acked, polled))
    }
}
