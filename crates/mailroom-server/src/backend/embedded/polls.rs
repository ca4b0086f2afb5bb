//! The embedded backend's polls: every poll is a batch poll of the store, answered with
//! each delivery's message as the poll read it (payload, publish time and metadata, one
//! record read), and tells the long polls of the leases it made.

use mailroom_store::{MessageDelivery, PollScope};
use tokio::time::Instant;

use super::Embedded;
use crate::backend::{settled_any, BackendError, SettledRound, Settlements};

impl Embedded {
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
        let deliveries = self
            .durable(|store| {
                store
                    .topic(topic)?
                    .poll_messages_deferred(group, consumer, max, scope)
            })
            .await?;
        self.long_polls
            .leased_if(topic, group, polled_at, !deliveries.is_empty());
        Ok(deliveries)
    }

    /// Nacks each run of `round.nacks`, acks `round.acks`, then polls as
    /// [`polled`](Self::polled), in one write (one transaction of the group).
    pub(super) async fn settled_then_polled(
        &self,
        topic: &str,
        group: &str,
        round: Settlements<'_>,
        consumer: Option<&str>,
        max: usize,
        scope: PollScope,
    ) -> Result<SettledRound, BackendError> {
        let polled_at = Instant::now();
        let round = self
            .durable(|store| {
                store.topic(topic)?.settle_then_poll_messages_deferred(
                    group,
                    round.nacks,
                    round.acks,
                    consumer,
                    max,
                    scope,
                )
            })
            .await?;
        if settled_any(&round) {
            self.long_polls.wake(topic);
        }
        let (_, (_, polled)) = &round;
        self.long_polls
            .leased_if(topic, group, polled_at, !polled.is_empty());
        Ok(round)
    }
}
