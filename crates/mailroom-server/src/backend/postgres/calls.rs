//! [`Backend`] for [`Postgres`]: each call runs its transaction, notes what it says of
//! the database's health, and wakes the long polls (here and, by notification, on every
//! other broker) that its change may have made ready.

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use mailroom::group::{DeliveryId, GroupConfig, NackOptions, NotOwned};
use mailroom::topic::{Message, Nack, StartPosition};
use mailroom_store::{
    DeadLetterPage, MessageDelivery, NewMessage, PollScope, Stored, TopicIdempotency,
    TopicRetention,
};
use tokio::time::Instant;

use super::Postgres;
use crate::backend::{
    Backend, BackendError, BackendHealth, GroupDetail, GroupGauges, LogPage, RetentionChange,
    RetentionPass, SettledRound, Settlements, TopicOffsets, TopicPublisher, TopicState,
};
use crate::long_poll::LongPolls;

impl Postgres {
    /// Wakes `topic` if any of `outcomes` changed the group.
    pub(super) fn woken_by<T, E>(&self, topic: &str, outcomes: &[Result<T, E>]) {
        if outcomes.iter().any(Result::is_ok) {
            self.wake(topic);
        }
    }
}

#[async_trait]
impl Backend for Postgres {
    fn long_polls(&self) -> &Arc<LongPolls> {
        &self.long_polls
    }

    fn channels(&self) -> Option<Arc<crate::channels::Channels>> {
        Some(Arc::clone(&self.channels))
    }

    async fn create_topic(&self, topic: &str) -> Result<bool, BackendError> {
        self.watched(
            self.create_topic_row(
                topic,
                &TopicRetention::default(),
                &TopicIdempotency::default(),
            )
            .await,
        )
    }

    async fn create_topic_with(
        &self,
        topic: &str,
        retention: &TopicRetention,
    ) -> Result<bool, BackendError> {
        let window = TopicIdempotency::default();
        self.watched(self.create_topic_row(topic, retention, &window).await)
    }

    async fn create_topic_with_window(
        &self,
        topic: &str,
        retention: &TopicRetention,
        idempotency: &TopicIdempotency,
    ) -> Result<bool, BackendError> {
        self.watched(self.create_topic_row(topic, retention, idempotency).await)
    }

    async fn change_retention(
        &self,
        topic: &str,
        change: RetentionChange,
    ) -> Result<TopicState, BackendError> {
        self.watched(self.change_retention_row(topic, change).await)?;
        self.topic_state(topic).await
    }

    async fn enforce_retention(&self) -> Result<RetentionPass, BackendError> {
        self.watched(self.retention_pass().await)
    }

    async fn list_topics(&self) -> Result<Vec<TopicOffsets>, BackendError> {
        self.watched(self.topic_rows().await)
    }

    async fn topic_state(&self, topic: &str) -> Result<TopicState, BackendError> {
        let result = async {
            let offsets = self.topic_row(topic).await?;
            let mut groups = Vec::with_capacity(offsets.groups.len());
            for group in &offsets.groups {
                match self.current_info(topic, group).await {
                    Ok(info) => groups.push(info),
                    // Deleted while this was read: left out, as the trait says.
                    Err(BackendError::Store(mailroom_store::StoreError::Topic(
                        mailroom::topic::TopicError::UnknownGroup { .. },
                    ))) => {}
                    Err(error) => return Err(error),
                }
            }
            // As the embedded store: the window in force is shown only for a topic
            // with one of its own.
            let own = self.own_idempotency(topic).await?;
            let idempotency =
                (own != TopicIdempotency::default()).then(|| own.resolve(self.options.idempotency));
            Ok(TopicState {
                name: offsets.name,
                start: offsets.start,
                end: offsets.end,
                groups,
                retention: offsets.retention,
                failure: offsets.failure,
                idempotency,
            })
        };
        self.watched(result.await)
    }

    async fn delete_topic(&self, topic: &str) -> Result<Vec<String>, BackendError> {
        let groups = self.watched(self.delete_topic_row(topic).await)?;
        self.long_polls.forget(topic);
        self.notifier.marks.forget(topic);
        self.notifier.tell(topic);
        Ok(groups)
    }

    async fn publish(&self, topic: &str, payload: Bytes) -> Result<u64, BackendError> {
        let offsets = self.publish_batch(topic, &[payload]).await?;
        Ok(offsets.start)
    }

    async fn publish_batch(
        &self,
        topic: &str,
        payloads: &[Bytes],
    ) -> Result<Range<u64>, BackendError> {
        let offsets = self.watched(self.append(topic, payloads).await)?;
        if !offsets.is_empty() {
            self.wake(topic);
        }
        Ok(offsets)
    }

    async fn publish_messages(
        &self,
        topic: &str,
        messages: &[NewMessage],
    ) -> Result<Range<u64>, BackendError> {
        let answers = self.watched(self.appends.append_messages(topic, messages, None).await)?;
        let (first, last) = (answers.first(), answers.last());
        let Some((first, last)) = first.zip(last) else {
            return Ok(0..0);
        };
        self.wake(topic);
        Ok(first.offset..last.offset + 1)
    }

    async fn publish_once(
        &self,
        topic: &str,
        messages: &[NewMessage],
    ) -> Result<Vec<Stored>, BackendError> {
        let window = Some(self.options.idempotency);
        let answers = self.watched(self.appends.append_messages(topic, messages, window).await)?;
        if answers.iter().any(|answer| !answer.duplicate) {
            self.wake(topic);
        }
        Ok(answers)
    }

    fn publisher(&self, topic: &str) -> Result<Box<dyn TopicPublisher>, BackendError> {
        Ok(Box::new(self.stream_publisher(topic)))
    }

    async fn create_group(
        &self,
        topic: &str,
        group: &str,
        start: StartPosition,
        config: GroupConfig,
    ) -> Result<(), BackendError> {
        self.watched(self.create_group_row(topic, group, start, config).await)
    }

    async fn group_detail(&self, topic: &str, group: &str) -> Result<GroupDetail, BackendError> {
        self.watched(self.detail(topic, group).await)
    }

    async fn group_config(&self, topic: &str, group: &str) -> Result<GroupConfig, BackendError> {
        let (state, _) = self.watched(self.current(topic, group).await)?;
        Ok(*state.config())
    }

    async fn delete_group(&self, topic: &str, group: &str) -> Result<(), BackendError> {
        self.watched(self.delete_group_row(topic, group).await)?;
        // Its long polls re-poll, find the group gone and answer 404 `unknown_group`.
        self.wake_everywhere(topic);
        Ok(())
    }

    async fn poll(
        &self,
        topic: &str,
        group: &str,
        consumer: Option<&str>,
    ) -> Result<Option<MessageDelivery>, BackendError> {
        let polled_at = Instant::now();
        let (delivery, read) = self.watched(self.poll_one(topic, group, consumer).await)?;
        self.after_poll(topic, group, polled_at, delivery.is_some(), &read)
            .await;
        Ok(delivery)
    }

    async fn poll_batch(
        &self,
        topic: &str,
        group: &str,
        consumer: Option<&str>,
        max: usize,
        scope: PollScope,
    ) -> Result<Vec<MessageDelivery>, BackendError> {
        self.polled(topic, group, consumer, max, scope).await
    }

    async fn settle_then_poll_batch(
        &self,
        topic: &str,
        group: &str,
        round: Settlements<'_>,
        consumer: Option<&str>,
        max: usize,
        scope: PollScope,
    ) -> Result<SettledRound, BackendError> {
        self.settled_then_polled(topic, group, round, consumer, (max, scope))
            .await
    }

    async fn ack(&self, topic: &str, group: &str, id: DeliveryId) -> Result<(), BackendError> {
        self.watched(self.settle_one(topic, group, id, None).await)?;
        self.wake(topic);
        Ok(())
    }

    async fn ack_batch(
        &self,
        topic: &str,
        group: &str,
        ids: &[DeliveryId],
    ) -> Result<Vec<Result<(), NotOwned>>, BackendError> {
        let outcomes = self.watched(self.settle_many(topic, group, ids, None).await)?;
        self.woken_by(topic, &outcomes);
        Ok(outcomes
            .into_iter()
            .map(|outcome| outcome.map(drop))
            .collect())
    }

    async fn nack(
        &self,
        topic: &str,
        group: &str,
        id: DeliveryId,
        options: NackOptions,
    ) -> Result<Nack, BackendError> {
        let nack = self.watched(self.settle_one(topic, group, id, Some(&options)).await)?;
        self.wake(topic);
        Ok(nack)
    }

    async fn nack_batch(
        &self,
        topic: &str,
        group: &str,
        ids: &[DeliveryId],
        options: &NackOptions,
    ) -> Result<Vec<Result<Nack, NotOwned>>, BackendError> {
        let outcomes = self.watched(self.settle_many(topic, group, ids, Some(options)).await)?;
        self.woken_by(topic, &outcomes);
        Ok(outcomes)
    }

    async fn touch(&self, topic: &str, group: &str, id: DeliveryId) -> Result<(), BackendError> {
        // No wake-up: a touch frees nothing (see the embedded backend).
        self.watched(self.touch_one(topic, group, id).await)
    }

    async fn redrive(
        &self,
        topic: &str,
        group: &str,
        offsets: Range<u64>,
    ) -> Result<u64, BackendError> {
        let taken = self.watched(self.take_dead(topic, group, offsets, false).await)?;
        if taken > 0 {
            self.wake(topic);
        }
        Ok(taken)
    }

    async fn purge(
        &self,
        topic: &str,
        group: &str,
        offsets: Range<u64>,
    ) -> Result<u64, BackendError> {
        self.watched(self.take_dead(topic, group, offsets, true).await)
    }

    async fn seek(&self, topic: &str, group: &str, to: StartPosition) -> Result<u64, BackendError> {
        let position = self.watched(self.seek_group(topic, group, to).await)?;
        // Deliveries dropped and messages in reach again: waiting polls look again.
        self.wake(topic);
        Ok(position)
    }

    async fn pause(
        &self,
        topic: &str,
        group: &str,
        until_ms: Option<u64>,
    ) -> Result<(), BackendError> {
        // No wake-up: a pause only takes deliveries away.
        self.watched(self.pause_group(topic, group, until_ms).await)
    }

    async fn resume(&self, topic: &str, group: &str) -> Result<bool, BackendError> {
        let resumed = self.watched(self.resume_group(topic, group).await)?;
        if resumed {
            self.wake(topic);
        }
        Ok(resumed)
    }

    async fn read_log(
        &self,
        topic: &str,
        from: u64,
        limit: usize,
        bytes_max: usize,
    ) -> Result<LogPage, BackendError> {
        self.watched(self.log_page(topic, from, limit, bytes_max).await)
    }

    async fn offset_at_time(&self, topic: &str, time_ms: u64) -> Result<u64, BackendError> {
        self.watched(self.offset_of_time(topic, time_ms).await)
    }

    async fn dead_letter_page(
        &self,
        topic: &str,
        group: &str,
        from: u64,
        limit: usize,
    ) -> Result<DeadLetterPage<Message<Bytes>>, BackendError> {
        self.watched(self.dead_letters(topic, group, from, limit).await)
    }

    async fn next_due_in(
        &self,
        topic: &str,
        group: &str,
    ) -> Result<Option<Duration>, BackendError> {
        if let Some(due_in) = self.due_in_as_seen(topic, group) {
            return Ok(due_in);
        }
        let (state, now_ms) = self.watched(self.read_state(topic, group).await)?;
        let keys = self.watched(self.window_keys(topic, &state).await)?;
        let mut lookup = super::group::Planning::key_lookup(&keys);
        Ok(state
            .next_due_ms_keyed(&mut lookup)
            .map(|due_ms| Duration::from_millis(due_ms.saturating_sub(now_ms))))
    }

    async fn group_gauges(&self) -> Result<Vec<GroupGauges>, BackendError> {
        self.watched(self.gauges().await)
    }

    async fn sync(&self) -> Result<(), BackendError> {
        // Every call answered only after its commit: nothing is left to make durable.
        Ok(())
    }

    fn health(&self) -> BackendHealth {
        self.health_now()
    }
}
