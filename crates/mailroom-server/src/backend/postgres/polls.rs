//! This backend's batch polls as the trait answers them: the poll (of every delivery the
//! consumer owns and new ones, or new ones only), watched for a lost connection, with
//! the long polls told of the leases it made and woken by the acks before it.

use mailroom_store::{MessageDelivery, PollScope};
use tokio::time::Instant;

use super::waiting::PollRead;
use super::Postgres;
use crate::backend::{settled_any, BackendError, SettledRound, Settlements};

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
        let (deliveries, read) = self.watched(polled)?;
        self.after_poll(topic, group, polled_at, !deliveries.is_empty(), &read)
            .await;
        Ok(deliveries)
    }

    /// A round of `Backend::settle_then_poll_batch` (the consume stream's, a batch poll
    /// carrying acks or nacks) in one transaction: runs of nacks, then acks, then the
    /// poll. Wakes the long polls once if any settlement took effect.
    pub(super) async fn settled_then_polled(
        &self,
        topic: &str,
        group: &str,
        round: Settlements<'_>,
        consumer: Option<&str>,
        poll: (usize, PollScope),
    ) -> Result<SettledRound, BackendError> {
        let polled_at = Instant::now();
        let result = self
            .settle_then_poll(topic, group, round, consumer, poll)
            .await;
        let (round, read) = self.watched(result)?;
        if settled_any(&round) {
            self.wake(topic);
        }
        let (_, (_, polled)) = &round;
        self.after_poll(topic, group, polled_at, !polled.is_empty(), &read)
            .await;
        Ok(round)
    }

    /// After a poll made at `polled_at` whose transaction read `read`: tells the long
    /// polls of the leases it made or, when it handed out nothing (its caller may wait
    /// next), marks the topic as waited on for the other brokers (`waiting.rs`).
    pub(super) async fn after_poll(
        &self,
        topic: &str,
        group: &str,
        polled_at: Instant,
        made_any: bool,
        read: &PollRead,
    ) {
        self.long_polls.leased_if(topic, group, polled_at, made_any);
        if !made_any {
            self.mark_waiting(topic, read).await;
        }
    }
}
