//! The [`Backend`] calls of the embedded store: each maps onto the store's call of the
//! same name, run where [`Embedded`]'s module docs say, and wakes the long polls it may
//! have freed.

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use mailroom::group::{DeliveryId, GroupConfig, NackOptions, NotOwned};
use mailroom::topic::{Message, Nack, StartPosition};
use mailroom_store::{
    DeadLetterPage, EncodedBatch, MessageDelivery, NewMessage, PollScope, Stored, TopicIdempotency,
    TopicRepaired, TopicRetention,
};

use super::publisher::EmbeddedPublisher;
use super::{check_start, disk, reads, Embedded};
use crate::backend::{
    Backend, BackendError, BackendHealth, DiskUsage, GroupDetail, GroupGauges, LogPage,
    RetentionChange, RetentionPass, SettledRound, Settlements, TopicOffsets, TopicPublisher,
    TopicState,
};
use crate::long_poll::LongPolls;

#[async_trait]
impl Backend for Embedded {
    fn long_polls(&self) -> &Arc<LongPolls> {
        &self.long_polls
    }

    async fn create_topic(&self, topic: &str) -> Result<bool, BackendError> {
        let topic = topic.to_owned();
        self.blocking(move |store| store.create_topic(&topic)).await
    }

    async fn create_topic_with(
        &self,
        topic: &str,
        retention: &TopicRetention,
    ) -> Result<bool, BackendError> {
        let (topic, retention) = (topic.to_owned(), *retention);
        self.blocking(move |store| store.create_topic_with(&topic, &retention))
            .await
    }

    async fn create_topic_with_window(
        &self,
        topic: &str,
        retention: &TopicRetention,
        idempotency: &TopicIdempotency,
    ) -> Result<bool, BackendError> {
        let (topic, retention, idempotency) = (topic.to_owned(), *retention, *idempotency);
        self.blocking(move |store| store.create_topic_with_window(&topic, &retention, &idempotency))
            .await
    }

    async fn change_retention(
        &self,
        topic: &str,
        change: RetentionChange,
    ) -> Result<TopicState, BackendError> {
        let name = topic.to_owned();
        self.blocking(move |store| {
            store
                .topic(&name)?
                .change_retention(|settings| change.apply(settings))?;
            reads::topic_state(store, name)
        })
        .await
    }

    async fn enforce_retention(&self) -> Result<RetentionPass, BackendError> {
        // The store's clock, which stamps the records, decides their age.
        self.blocking(|store| {
            let now_ms = store.clock().now_ms();
            Ok(reads::enforce_retention(store, now_ms))
        })
        .await
    }

    async fn list_topics(&self) -> Result<Vec<TopicOffsets>, BackendError> {
        self.blocking(reads::list_topics).await
    }

    async fn topic_state(&self, topic: &str) -> Result<TopicState, BackendError> {
        let name = topic.to_owned();
        self.blocking(move |store| reads::topic_state(store, name))
            .await
    }

    async fn delete_topic(&self, topic: &str) -> Result<Vec<String>, BackendError> {
        let name = topic.to_owned();
        let groups = self
            .blocking(move |store| {
                let groups = store.topic(&name)?.groups();
                store.delete_topic(&name)?;
                Ok(groups)
            })
            .await?;
        self.long_polls.forget(topic);
        Ok(groups)
    }

    async fn publish(&self, topic: &str, payload: Bytes) -> Result<u64, BackendError> {
        self.publish_then_wake(topic, |t| t.publish_deferred(payload), |_| true)
            .await
    }

    async fn publish_batch(
        &self,
        topic: &str,
        payloads: &[Bytes],
    ) -> Result<Range<u64>, BackendError> {
        self.publish_then_wake(topic, |t| t.publish_batch_deferred(payloads), |_| true)
            .await
    }

    async fn publish_messages(
        &self,
        topic: &str,
        messages: &[NewMessage],
    ) -> Result<Range<u64>, BackendError> {
        self.publish_then_wake(topic, |t| t.publish_messages_deferred(messages), |_| true)
            .await
    }

    async fn publish_encoded(
        &self,
        topic: &str,
        batch: &EncodedBatch,
    ) -> Result<Vec<Stored>, BackendError> {
        self.publish_then_wake(topic, |t| t.publish_encoded_deferred(batch), |a| any_new(a))
            .await
    }

    async fn publish_once(
        &self,
        topic: &str,
        messages: &[NewMessage],
    ) -> Result<Vec<Stored>, BackendError> {
        self.publish_then_wake(topic, |t| t.publish_once_deferred(messages), |a| any_new(a))
            .await
    }

    async fn read_log(
        &self,
        topic: &str,
        from: u64,
        limit: usize,
        bytes_max: usize,
    ) -> Result<LogPage, BackendError> {
        let topic = topic.to_owned();
        self.blocking(move |store| reads::read_log(&store.topic(&topic)?, from, limit, bytes_max))
            .await
    }

    async fn offset_at_time(&self, topic: &str, time_ms: u64) -> Result<u64, BackendError> {
        let topic = topic.to_owned();
        self.blocking(move |store| store.topic(&topic)?.offset_at_time(time_ms))
            .await
    }

    fn publisher(&self, topic: &str) -> Result<Box<dyn TopicPublisher>, BackendError> {
        Ok(Box::new(EmbeddedPublisher {
            handle: parking_lot::Mutex::new(self.store.topic(topic)?),
            store: self.store.clone(),
            topic: topic.to_owned(),
            long_polls: Arc::clone(&self.long_polls),
        }))
    }

    async fn create_group(
        &self,
        topic: &str,
        group: &str,
        start: StartPosition,
        config: GroupConfig,
    ) -> Result<(), BackendError> {
        let (topic, group) = (topic.to_owned(), group.to_owned());
        self.blocking(move |store| {
            let topic = store.topic(&topic)?;
            check_start(&topic, start)?;
            topic.create_group_with(&group, start, config)
        })
        .await
    }

    async fn group_detail(&self, topic: &str, group: &str) -> Result<GroupDetail, BackendError> {
        let (topic, group) = (topic.to_owned(), group.to_owned());
        self.blocking(move |store| reads::group_detail(store, &topic, &group))
            .await
    }

    async fn group_config(&self, topic: &str, group: &str) -> Result<GroupConfig, BackendError> {
        let (topic, group) = (topic.to_owned(), group.to_owned());
        self.blocking(move |store| store.topic(&topic)?.group_config(&group))
            .await
    }

    async fn delete_group(&self, topic: &str, group: &str) -> Result<(), BackendError> {
        let (name, group) = (topic.to_owned(), group.to_owned());
        self.blocking(move |store| store.topic(&name)?.delete_group(&group))
            .await?;
        // Its long polls re-poll, find the group gone and answer 404 `unknown_group`.
        self.long_polls.wake(topic);
        Ok(())
    }

    async fn poll(
        &self,
        topic: &str,
        group: &str,
        consumer: Option<&str>,
    ) -> Result<Option<MessageDelivery>, BackendError> {
        let mut polled = self
            .polled(topic, group, consumer, 1, PollScope::All)
            .await?;
        Ok(polled.pop())
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
        self.settled_then_polled(topic, group, round, consumer, max, scope)
            .await
    }

    async fn ack(&self, topic: &str, group: &str, id: DeliveryId) -> Result<(), BackendError> {
        self.durable(|store| store.topic(topic)?.ack_deferred(group, id))
            .await?;
        self.long_polls.wake(topic);
        Ok(())
    }

    async fn ack_batch(
        &self,
        topic: &str,
        group: &str,
        ids: &[DeliveryId],
    ) -> Result<Vec<Result<(), NotOwned>>, BackendError> {
        let outcomes = self
            .durable(|store| store.topic(topic)?.ack_batch_deferred(group, ids))
            .await?;
        self.woken_by(topic, &outcomes);
        Ok(outcomes)
    }

    async fn nack(
        &self,
        topic: &str,
        group: &str,
        id: DeliveryId,
        options: NackOptions,
    ) -> Result<Nack, BackendError> {
        let nack = self
            .durable(|store| store.topic(topic)?.nack_with_deferred(group, id, options))
            .await?;
        self.long_polls.wake(topic);
        Ok(nack)
    }

    async fn nack_batch(
        &self,
        topic: &str,
        group: &str,
        ids: &[DeliveryId],
        options: &NackOptions,
    ) -> Result<Vec<Result<Nack, NotOwned>>, BackendError> {
        let outcomes = self
            .durable(|store| store.topic(topic)?.nack_batch_deferred(group, ids, options))
            .await?;
        self.woken_by(topic, &outcomes);
        Ok(outcomes)
    }

    async fn touch(&self, topic: &str, group: &str, id: DeliveryId) -> Result<(), BackendError> {
        let (topic, group) = (topic.to_owned(), group.to_owned());
        // No wake-up: a touch frees nothing and only moves a lease deadline later, so
        // every waiting long poll is armed no later than it needs (see
        // `crate::long_poll`).
        self.blocking(move |store| store.topic(&topic)?.touch(&group, id))
            .await
    }

    async fn redrive(
        &self,
        topic: &str,
        group: &str,
        offsets: Range<u64>,
    ) -> Result<u64, BackendError> {
        self.take_dead_letters(topic, group, move |handle, group| {
            handle.redrive(group, offsets)
        })
        .await
    }

    async fn purge(
        &self,
        topic: &str,
        group: &str,
        offsets: Range<u64>,
    ) -> Result<u64, BackendError> {
        self.take_dead_letters(topic, group, move |handle, group| {
            handle.purge(group, offsets)
        })
        .await
    }

    async fn seek(&self, topic: &str, group: &str, to: StartPosition) -> Result<u64, BackendError> {
        let (name, group) = (topic.to_owned(), group.to_owned());
        let position = self
            .blocking(move |store| store.topic(&name)?.seek(&group, to))
            .await?;
        // Deliveries dropped and messages in reach again: waiting polls look again.
        self.long_polls.wake(topic);
        Ok(position)
    }

    async fn pause(
        &self,
        topic: &str,
        group: &str,
        until_ms: Option<u64>,
    ) -> Result<(), BackendError> {
        let (name, group) = (topic.to_owned(), group.to_owned());
        // No wake-up: a pause only takes deliveries away.
        self.blocking(move |store| store.topic(&name)?.pause(&group, until_ms))
            .await
    }

    async fn resume(&self, topic: &str, group: &str) -> Result<bool, BackendError> {
        let (name, group) = (topic.to_owned(), group.to_owned());
        let resumed = self
            .blocking(move |store| store.topic(&name)?.resume(&group))
            .await?;
        if resumed {
            self.long_polls.wake(topic);
        }
        Ok(resumed)
    }

    async fn dead_letter_page(
        &self,
        topic: &str,
        group: &str,
        from: u64,
        limit: usize,
    ) -> Result<DeadLetterPage<Message<Bytes>>, BackendError> {
        let (topic, group) = (topic.to_owned(), group.to_owned());
        // The store reads only this page's payloads, in offset order; each message's
        // publish time and metadata come from the log, while it holds the message.
        self.blocking(move |store| {
            reads::dead_letter_page(&store.topic(&topic)?, &group, from, limit)
        })
        .await
    }

    async fn next_due_in(
        &self,
        topic: &str,
        group: &str,
    ) -> Result<Option<Duration>, BackendError> {
        // Inline under every fsync policy: it takes one group's lock briefly and never
        // waits for the disk.
        Ok(self.store.topic(topic)?.next_due_in(group)?)
    }

    async fn group_gauges(&self) -> Result<Vec<GroupGauges>, BackendError> {
        self.blocking(reads::group_gauges).await
    }

    async fn sync(&self) -> Result<(), BackendError> {
        if self.on_caller {
            return Ok(self.store.sync()?);
        }
        // On the blocking pool under every policy: it waits for the disk, and at
        // shutdown nothing else needs the worker sooner.
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || store.sync())
            .await
            .map_err(|join| BackendError::Internal(join.to_string()))??;
        Ok(())
    }

    async fn recover_topic(&self, topic: &str) -> Result<bool, BackendError> {
        let name = topic.to_owned();
        let recovered = self
            .blocking(move |store| store.recover_topic(&name))
            .await?;
        // Long polls parked on the old handle look the topic up again.
        self.long_polls.wake(topic);
        Ok(recovered)
    }

    async fn recover_topics(&self) -> Vec<String> {
        let store = self.store.clone();
        let healed = tokio::task::spawn_blocking(move || store.recover_topics())
            .await
            .unwrap_or_default();
        for topic in &healed {
            self.long_polls.wake(topic);
        }
        healed
    }

    async fn repair_topic(&self, topic: &str) -> Result<Option<TopicRepaired>, BackendError> {
        let name = topic.to_owned();
        let repaired = self
            .blocking(move |store| store.repair_topic(&name))
            .await?;
        self.long_polls.wake(topic);
        Ok(repaired)
    }

    fn health(&self) -> BackendHealth {
        // Damage and fail-stops stay in their topics: the store as a whole has no
        // failure of its own once it is open.
        BackendHealth {
            failure: None,
            failed_topics: reads::failed_topics(&self.store),
        }
    }

    async fn disk_usage(&self) -> Result<Option<DiskUsage>, BackendError> {
        let Some(dir) = self.data_dir.clone() else {
            return Ok(None);
        };
        // A walk of the directory tree: off the async workers under every policy.
        tokio::task::spawn_blocking(move || disk::usage(&dir))
            .await
            .map(Some)
            .map_err(|join| BackendError::Internal(join.to_string()))
    }
}

/// Whether an idempotent publish stored at least one message (not only duplicates).
fn any_new(answers: &[Stored]) -> bool {
    answers.iter().any(|answer| !answer.duplicate)
}
