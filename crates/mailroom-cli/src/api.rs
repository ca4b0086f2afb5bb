//! The client trait the commands talk to. The real implementation is
//! `mailroom_client::Client`; tests substitute a fake, so command logic (what to ack,
//! when to nack, what to print) is tested without a server.

use std::future::Future;
use std::ops::Range;

use bytes::Bytes;
use mailroom_client::api::topics::BatchPublished;
use mailroom_client::{
    BatchItemError, BatchNack, BatchPoll, ChannelDelivery, ChannelInfo, Client, ClientError,
    DeadLetterPage, Delivery, DeliveryId, GroupDetail, GroupOptions, GroupPause,
    IdempotencySettings, LogPage, NackOptions, NackOutcome, NewMessage, ReadFrom,
    RetentionSettings, SettledPoll, StartPosition, SubscribeOptions, Subscription, TopicInfo,
    TopicRepairReport, TopicSummary,
};

/// A stream of live-channel messages. It may move to another task (`demo` reads each
/// subscription on its own), so it and its reads are `Send`.
pub trait Messages: Send + 'static {
    /// The next message; `None` once the channel closed and the mailbox drained.
    fn next_message(&mut self) -> impl Future<Output = Option<Result<Bytes, ClientError>>> + Send;
}

impl Messages for Subscription {
    async fn next_message(&mut self) -> Option<Result<Bytes, ClientError>> {
        self.next().await
    }
}

/// Everything the commands ask of a server.
pub trait Api {
    /// What [`Api::subscribe`] returns.
    type Subscription: Messages;

    async fn create_topic(&self, topic: &str) -> Result<bool, ClientError>;
    async fn create_topic_with(
        &self,
        topic: &str,
        retention: &RetentionSettings,
    ) -> Result<bool, ClientError>;
    async fn create_topic_with_window(
        &self,
        topic: &str,
        retention: &RetentionSettings,
        window: &IdempotencySettings,
    ) -> Result<bool, ClientError>;
    async fn change_retention(
        &self,
        topic: &str,
        change: &RetentionSettings,
    ) -> Result<TopicInfo, ClientError>;
    async fn list_topics(&self) -> Result<Vec<TopicSummary>, ClientError>;
    async fn topic_info(&self, topic: &str) -> Result<TopicInfo, ClientError>;
    async fn delete_topic(&self, topic: &str) -> Result<(), ClientError>;
    async fn recover_topic(&self, topic: &str) -> Result<bool, ClientError>;
    async fn repair_topic(&self, topic: &str) -> Result<TopicRepairReport, ClientError>;
    async fn publish(&self, topic: &str, payload: Bytes) -> Result<u64, ClientError>;
    async fn publish_batch(&self, topic: &str, payloads: &[Bytes])
        -> Result<Vec<u64>, ClientError>;
    async fn publish_messages(
        &self,
        topic: &str,
        messages: &[NewMessage],
    ) -> Result<Vec<u64>, ClientError>;
    /// As `publish_messages`, with which messages were duplicates of an idempotency key
    /// in the topic's window. A server double that never sees a key in a window keeps
    /// this default.
    async fn publish_once(
        &self,
        topic: &str,
        messages: &[NewMessage],
    ) -> Result<BatchPublished, ClientError> {
        let offsets = self.publish_messages(topic, messages).await?;
        Ok(BatchPublished {
            offsets,
            duplicates: Vec::new(),
        })
    }
    async fn create_group_with(
        &self,
        topic: &str,
        group: &str,
        options: &GroupOptions,
    ) -> Result<(), ClientError>;
    async fn group_detail(&self, topic: &str, group: &str) -> Result<GroupDetail, ClientError>;
    async fn delete_group(&self, topic: &str, group: &str) -> Result<(), ClientError>;
    async fn poll(&self, topic: &str, group: &str) -> Result<Option<Delivery>, ClientError>;
    async fn poll_as(
        &self,
        topic: &str,
        group: &str,
        consumer: &str,
    ) -> Result<Option<Delivery>, ClientError>;
    /// Polls up to `request.max` deliveries, without the results of any settlement it
    /// carries.
    async fn poll_batch(
        &self,
        topic: &str,
        group: &str,
        request: &BatchPoll<'_>,
    ) -> Result<Vec<Delivery>, ClientError> {
        let settled = self
            .settle_then_poll_batch(topic, group, request, &BatchNack::NOTHING)
            .await?;
        Ok(settled.deliveries)
    }
    /// Nacks `nack`, acks `request.ack`, then polls, in one request.
    async fn settle_then_poll_batch(
        &self,
        topic: &str,
        group: &str,
        request: &BatchPoll<'_>,
        nack: &BatchNack<'_>,
    ) -> Result<SettledPoll, ClientError>;
    async fn ack_batch(
        &self,
        topic: &str,
        group: &str,
        ids: &[DeliveryId],
    ) -> Result<Vec<Result<(), BatchItemError>>, ClientError>;
    async fn nack_with(
        &self,
        topic: &str,
        group: &str,
        id: DeliveryId,
        options: &NackOptions,
    ) -> Result<NackOutcome, ClientError>;
    async fn nack_batch(
        &self,
        topic: &str,
        group: &str,
        ids: &[DeliveryId],
        options: &NackOptions,
    ) -> Result<Vec<Result<NackOutcome, BatchItemError>>, ClientError>;
    async fn touch(&self, topic: &str, group: &str, id: DeliveryId) -> Result<(), ClientError>;
    async fn dead_letters_page(
        &self,
        topic: &str,
        group: &str,
        from: u64,
        limit: usize,
    ) -> Result<DeadLetterPage, ClientError>;
    async fn redrive(
        &self,
        topic: &str,
        group: &str,
        offsets: Option<Range<u64>>,
    ) -> Result<u64, ClientError>;
    async fn purge(
        &self,
        topic: &str,
        group: &str,
        offsets: Option<Range<u64>>,
    ) -> Result<u64, ClientError>;
    async fn seek(&self, topic: &str, group: &str, to: StartPosition) -> Result<u64, ClientError>;
    async fn seek_to_time(
        &self,
        topic: &str,
        group: &str,
        time_ms: u64,
    ) -> Result<u64, ClientError>;
    async fn read(
        &self,
        topic: &str,
        from: ReadFrom,
        limit: usize,
        wait_ms: u64,
    ) -> Result<LogPage, ClientError>;
    async fn pause(
        &self,
        topic: &str,
        group: &str,
        until_ms: Option<u64>,
    ) -> Result<GroupPause, ClientError>;
    async fn resume(&self, topic: &str, group: &str) -> Result<GroupPause, ClientError>;
    async fn create_channel(
        &self,
        channel: &str,
        subscribers: u64,
        mailbox: u64,
        mailbox_bytes: Option<u64>,
    ) -> Result<bool, ClientError>;
    async fn list_channels(&self) -> Result<Vec<ChannelInfo>, ClientError>;
    async fn publish_channel(
        &self,
        channel: &str,
        payload: Bytes,
    ) -> Result<ChannelDelivery, ClientError>;
    async fn close_channel(&self, channel: &str) -> Result<(), ClientError>;
    async fn subscribe_with(
        &self,
        channel: &str,
        options: SubscribeOptions,
    ) -> Result<Self::Subscription, ClientError>;
}

impl Api for Client {
    type Subscription = Subscription;

    async fn create_topic(&self, topic: &str) -> Result<bool, ClientError> {
        Client::create_topic(self, topic).await
    }
    async fn create_topic_with(
        &self,
        topic: &str,
        retention: &RetentionSettings,
    ) -> Result<bool, ClientError> {
        Client::create_topic_with(self, topic, retention).await
    }
    async fn create_topic_with_window(
        &self,
        topic: &str,
        retention: &RetentionSettings,
        window: &IdempotencySettings,
    ) -> Result<bool, ClientError> {
        Client::create_topic_with_window(self, topic, retention, window).await
    }
    async fn change_retention(
        &self,
        topic: &str,
        change: &RetentionSettings,
    ) -> Result<TopicInfo, ClientError> {
        Client::change_retention(self, topic, change).await
    }
    async fn list_topics(&self) -> Result<Vec<TopicSummary>, ClientError> {
        Client::list_topics(self).await
    }
    async fn topic_info(&self, topic: &str) -> Result<TopicInfo, ClientError> {
        Client::topic_info(self, topic).await
    }
    async fn publish(&self, topic: &str, payload: Bytes) -> Result<u64, ClientError> {
        Client::publish(self, topic, payload).await
    }
    async fn publish_batch(
        &self,
        topic: &str,
        payloads: &[Bytes],
    ) -> Result<Vec<u64>, ClientError> {
        Client::publish_batch(self, topic, payloads).await
    }
    async fn publish_messages(
        &self,
        topic: &str,
        messages: &[NewMessage],
    ) -> Result<Vec<u64>, ClientError> {
        Client::publish_messages(self, topic, messages).await
    }
    async fn publish_once(
        &self,
        topic: &str,
        messages: &[NewMessage],
    ) -> Result<BatchPublished, ClientError> {
        Client::publish_once(self, topic, messages).await
    }
    async fn create_group_with(
        &self,
        topic: &str,
        group: &str,
        options: &GroupOptions,
    ) -> Result<(), ClientError> {
        Client::create_group_with(self, topic, group, options).await
    }
    async fn group_detail(&self, topic: &str, group: &str) -> Result<GroupDetail, ClientError> {
        Client::group_detail(self, topic, group).await
    }
    async fn delete_group(&self, topic: &str, group: &str) -> Result<(), ClientError> {
        Client::delete_group(self, topic, group).await
    }
    async fn poll(&self, topic: &str, group: &str) -> Result<Option<Delivery>, ClientError> {
        Client::poll(self, topic, group).await
    }
    async fn poll_as(
        &self,
        topic: &str,
        group: &str,
        consumer: &str,
    ) -> Result<Option<Delivery>, ClientError> {
        Client::poll_as(self, topic, group, consumer).await
    }
    async fn settle_then_poll_batch(
        &self,
        topic: &str,
        group: &str,
        request: &BatchPoll<'_>,
        nack: &BatchNack<'_>,
    ) -> Result<SettledPoll, ClientError> {
        Client::settle_then_poll_batch(self, topic, group, request, nack).await
    }
    async fn ack_batch(
        &self,
        topic: &str,
        group: &str,
        ids: &[DeliveryId],
    ) -> Result<Vec<Result<(), BatchItemError>>, ClientError> {
        Client::ack_batch(self, topic, group, ids).await
    }
    async fn nack_with(
        &self,
        topic: &str,
        group: &str,
        id: DeliveryId,
        options: &NackOptions,
    ) -> Result<NackOutcome, ClientError> {
        Client::nack_with(self, topic, group, id, options).await
    }
    async fn nack_batch(
        &self,
        topic: &str,
        group: &str,
        ids: &[DeliveryId],
        options: &NackOptions,
    ) -> Result<Vec<Result<NackOutcome, BatchItemError>>, ClientError> {
        Client::nack_batch(self, topic, group, ids, options).await
    }
    async fn touch(&self, topic: &str, group: &str, id: DeliveryId) -> Result<(), ClientError> {
        Client::touch(self, topic, group, id).await
    }
    async fn dead_letters_page(
        &self,
        topic: &str,
        group: &str,
        from: u64,
        limit: usize,
    ) -> Result<DeadLetterPage, ClientError> {
        Client::dead_letters_page(self, topic, group, from, limit).await
    }
    async fn redrive(
        &self,
        topic: &str,
        group: &str,
        offsets: Option<Range<u64>>,
    ) -> Result<u64, ClientError> {
        Client::redrive(self, topic, group, offsets).await
    }
    async fn purge(
        &self,
        topic: &str,
        group: &str,
        offsets: Option<Range<u64>>,
    ) -> Result<u64, ClientError> {
        Client::purge(self, topic, group, offsets).await
    }
    async fn seek(&self, topic: &str, group: &str, to: StartPosition) -> Result<u64, ClientError> {
        Client::seek(self, topic, group, to).await
    }
    async fn seek_to_time(
        &self,
        topic: &str,
        group: &str,
        time_ms: u64,
    ) -> Result<u64, ClientError> {
        Client::seek_to_time(self, topic, group, time_ms).await
    }
    async fn read(
        &self,
        topic: &str,
        from: ReadFrom,
        limit: usize,
        wait_ms: u64,
    ) -> Result<LogPage, ClientError> {
        Client::read(self, topic, from, limit, wait_ms).await
    }
    async fn pause(
        &self,
        topic: &str,
        group: &str,
        until_ms: Option<u64>,
    ) -> Result<GroupPause, ClientError> {
        Client::pause(self, topic, group, until_ms).await
    }
    async fn resume(&self, topic: &str, group: &str) -> Result<GroupPause, ClientError> {
        Client::resume(self, topic, group).await
    }
    async fn create_channel(
        &self,
        channel: &str,
        subscribers: u64,
        mailbox: u64,
        mailbox_bytes: Option<u64>,
    ) -> Result<bool, ClientError> {
        // A value beyond `usize` is beyond every limit too; the server says which.
        let size = |value: u64| usize::try_from(value).unwrap_or(usize::MAX);
        let settings = mailroom_client::CreateChannel {
            max_subscribers: Some(size(subscribers)),
            mailbox_capacity: Some(size(mailbox)),
            mailbox_bytes: mailbox_bytes.map(size),
        };
        Client::create_channel_with(self, channel, &settings).await
    }
    async fn list_channels(&self) -> Result<Vec<ChannelInfo>, ClientError> {
        Client::list_channels(self).await
    }
    async fn publish_channel(
        &self,
        channel: &str,
        payload: Bytes,
    ) -> Result<ChannelDelivery, ClientError> {
        Client::publish_channel(self, channel, payload).await
    }
    async fn close_channel(&self, channel: &str) -> Result<(), ClientError> {
        Client::close_channel(self, channel).await
    }
    async fn delete_topic(&self, topic: &str) -> Result<(), ClientError> {
        Client::delete_topic(self, topic).await
    }
    async fn recover_topic(&self, topic: &str) -> Result<bool, ClientError> {
        Client::recover_topic(self, topic).await
    }
    async fn repair_topic(&self, topic: &str) -> Result<TopicRepairReport, ClientError> {
        Client::repair_topic(self, topic).await
    }
    async fn subscribe_with(
        &self,
        channel: &str,
        options: SubscribeOptions,
    ) -> Result<Subscription, ClientError> {
        Client::subscribe_with(self, channel, options).await
    }
}
