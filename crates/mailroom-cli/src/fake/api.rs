//! The fake's side of the `Api` trait: each call is recorded, then answered with fixed
//! values (or the fake's waiting deliveries and messages).

use std::ops::Range;

use bytes::Bytes;
use mailroom_client::api::topics::BatchPublished;
use mailroom_client::{
    BatchItemError, BatchNack, BatchPoll, ChannelDelivery, ChannelInfo, ClientError, DeadLetter,
    DeadLetterPage, Delivery, DeliveryId, GroupDetail, GroupOptions, GroupPause,
    IdempotencySettings, LogMessage, LogPage, NackOptions, NackOutcome, NewMessage, ReadFrom,
    RetentionSettings, SettledPoll, StartPosition, SubscribeOptions, TopicInfo, TopicRepairReport,
    TopicSummary,
};

use super::{text, Fake, FakeMessages};
use crate::api::Api;

impl Api for Fake {
    type Subscription = FakeMessages;

    async fn create_topic(&self, topic: &str) -> Result<bool, ClientError> {
        self.record(format!("create_topic {topic}"));
        Ok(true)
    }
    async fn list_topics(&self) -> Result<Vec<TopicSummary>, ClientError> {
        self.record("list_topics".into());
        Ok(vec![TopicSummary {
            name: "t".into(),
            start: 0,
            end: 6,
            groups: vec!["g".into()],
            retention: Default::default(),
            bytes: 0,
            removed: Default::default(),
            state: Default::default(),
            failure: None,
            failure_kind: None,
        }])
    }
    async fn topic_info(&self, topic: &str) -> Result<TopicInfo, ClientError> {
        self.record(format!("topic_info {topic}"));
        Ok(Fake::info(topic))
    }
    async fn create_topic_with(
        &self,
        topic: &str,
        retention: &RetentionSettings,
    ) -> Result<bool, ClientError> {
        self.record(format!("create_topic_with {topic} {retention:?}"));
        Ok(true)
    }
    async fn create_topic_with_window(
        &self,
        topic: &str,
        retention: &RetentionSettings,
        window: &IdempotencySettings,
    ) -> Result<bool, ClientError> {
        self.record(format!(
            "create_topic_with_window {topic} {retention:?} {window:?}"
        ));
        Ok(true)
    }
    async fn change_retention(
        &self,
        topic: &str,
        change: &RetentionSettings,
    ) -> Result<TopicInfo, ClientError> {
        self.record(format!("change_retention {topic} {change:?}"));
        Ok(Fake::info(topic))
    }
    async fn delete_topic(&self, topic: &str) -> Result<(), ClientError> {
        self.record(format!("delete_topic {topic}"));
        Ok(())
    }
    async fn recover_topic(&self, topic: &str) -> Result<bool, ClientError> {
        self.record(format!("recover_topic {topic}"));
        Ok(true)
    }
    async fn repair_topic(&self, topic: &str) -> Result<TopicRepairReport, ClientError> {
        self.record(format!("repair_topic {topic}"));
        Ok(TopicRepairReport {
            topic: topic.into(),
            repaired: true,
            damage: vec!["corrupt data in CHECKPOINT".into()],
            actions: vec!["moved CHECKPOINT aside".into()],
        })
    }
    async fn publish(&self, topic: &str, payload: Bytes) -> Result<u64, ClientError> {
        self.record(format!("publish {topic} {}", text(&payload)));
        Ok(0)
    }
    async fn publish_batch(
        &self,
        topic: &str,
        payloads: &[Bytes],
    ) -> Result<Vec<u64>, ClientError> {
        self.record(format!("publish_batch {topic} {}", payloads.len()));
        Ok((0..payloads.len() as u64).collect())
    }
    async fn publish_messages(
        &self,
        topic: &str,
        messages: &[NewMessage],
    ) -> Result<Vec<u64>, ClientError> {
        for message in messages {
            let key = message.key.as_deref().unwrap_or("-");
            let headers: Vec<String> = message
                .headers
                .iter()
                .map(|(name, value)| format!("{name}={value}"))
                .collect();
            let (payload, headers) = (text(&message.payload), headers.join(","));
            self.record(format!(
                "publish_message {topic} {payload} key={key} headers={headers}"
            ));
        }
        Ok((0..messages.len() as u64).collect())
    }
    async fn publish_once(
        &self,
        topic: &str,
        messages: &[NewMessage],
    ) -> Result<BatchPublished, ClientError> {
        // A key seen in an earlier call is a duplicate of that call's offset 0.
        let mut duplicates = Vec::new();
        for (index, message) in messages.iter().enumerate() {
            let key = message.idempotency_key.as_deref().unwrap_or("-");
            let line = format!("publish_once {topic} {} key={key}", text(&message.payload));
            if self
                .calls()
                .iter()
                .any(|call| call.ends_with(&format!("key={key}")))
            {
                duplicates.push(index);
            }
            self.record(line);
        }
        Ok(BatchPublished {
            offsets: vec![0; messages.len()],
            duplicates,
        })
    }
    async fn create_group_with(
        &self,
        topic: &str,
        group: &str,
        options: &GroupOptions,
    ) -> Result<(), ClientError> {
        let GroupOptions {
            max_attempts,
            start,
            lease_ms,
            backoff,
            max_in_flight,
        } = options;
        self.record(format!(
            "create_group_with {topic} {group} max_attempts {max_attempts} start {start:?} \
             lease {lease_ms:?} backoff {backoff:?} window {max_in_flight:?}"
        ));
        Ok(())
    }
    async fn group_detail(&self, topic: &str, group: &str) -> Result<GroupDetail, ClientError> {
        self.record(format!("group_detail {topic} {group}"));
        Ok(Fake::detail())
    }
    async fn delete_group(&self, topic: &str, group: &str) -> Result<(), ClientError> {
        self.record(format!("delete_group {topic} {group}"));
        Ok(())
    }
    async fn poll(&self, topic: &str, group: &str) -> Result<Option<Delivery>, ClientError> {
        self.record(format!("poll {topic} {group}"));
        Ok(self.next())
    }
    async fn poll_as(
        &self,
        topic: &str,
        group: &str,
        consumer: &str,
    ) -> Result<Option<Delivery>, ClientError> {
        self.record(format!("poll_as {topic} {group} {consumer}"));
        Ok(self.next())
    }
    async fn settle_then_poll_batch(
        &self,
        topic: &str,
        group: &str,
        request: &BatchPoll<'_>,
        nack: &BatchNack<'_>,
    ) -> Result<SettledPoll, ClientError> {
        self.record(format!(
            "poll_batch {topic} {group} consumer {:?} max {} wait {} acks {} nacks {}",
            request.consumer,
            request.max,
            request.wait_ms,
            request.ack.len(),
            nack.deliveries.len()
        ));
        Ok(SettledPoll {
            nacked: nack
                .deliveries
                .iter()
                .map(|_| Ok(NackOutcome::Retry))
                .collect(),
            acked: request.ack.iter().map(|_| Ok(())).collect(),
            deliveries: (0..request.max).map_while(|_| self.next()).collect(),
        })
    }
    async fn ack_batch(
        &self,
        topic: &str,
        group: &str,
        ids: &[DeliveryId],
    ) -> Result<Vec<Result<(), BatchItemError>>, ClientError> {
        self.record(format!("ack_batch {topic} {group} {}", ids.len()));
        Ok(ids.iter().map(|_| Ok(())).collect())
    }
    async fn nack_with(
        &self,
        topic: &str,
        group: &str,
        id: DeliveryId,
        options: &NackOptions,
    ) -> Result<NackOutcome, ClientError> {
        self.record(format!(
            "nack_with {topic} {group} {}/{} {:?} delay {:?} reason {:?}",
            id.offset, id.attempt, options.kind, options.delay_ms, options.reason
        ));
        Ok(NackOutcome::Retry)
    }
    async fn nack_batch(
        &self,
        topic: &str,
        group: &str,
        ids: &[DeliveryId],
        options: &NackOptions,
    ) -> Result<Vec<Result<NackOutcome, BatchItemError>>, ClientError> {
        self.record(format!(
            "nack_batch {topic} {group} {} {:?}",
            ids.len(),
            options.kind
        ));
        Ok(ids.iter().map(|_| Ok(NackOutcome::Retry)).collect())
    }
    async fn touch(&self, topic: &str, group: &str, id: DeliveryId) -> Result<(), ClientError> {
        self.record(format!(
            "touch {topic} {group} {}/{}",
            id.offset, id.attempt
        ));
        Ok(())
    }
    async fn dead_letters_page(
        &self,
        topic: &str,
        group: &str,
        from: u64,
        limit: usize,
    ) -> Result<DeadLetterPage, ClientError> {
        self.record(format!("dead_letters_page {topic} {group} {from} {limit}"));
        // Five dead letters, offsets 0 to 4; the even ones carry a reason.
        let end = from.saturating_add(limit as u64).min(5);
        let dead_letters = (from..end)
            .map(|offset| DeadLetter {
                offset,
                attempts: 3,
                reason: (offset % 2 == 0).then(|| format!("boom {offset}")),
                at_ms: 1_000 * offset,
                payload: Bytes::from(format!("m{offset}")),
                key: None,
                headers: Default::default(),
                published_at_ms: None,
            })
            .collect();
        Ok(DeadLetterPage {
            dead_letters,
            next: (end < 5).then_some(end),
        })
    }
    async fn redrive(
        &self,
        topic: &str,
        group: &str,
        offsets: Option<Range<u64>>,
    ) -> Result<u64, ClientError> {
        self.record(format!("redrive {topic} {group} {offsets:?}"));
        Ok(2)
    }
    async fn purge(
        &self,
        topic: &str,
        group: &str,
        offsets: Option<Range<u64>>,
    ) -> Result<u64, ClientError> {
        self.record(format!("purge {topic} {group} {offsets:?}"));
        Ok(3)
    }
    async fn seek(&self, topic: &str, group: &str, to: StartPosition) -> Result<u64, ClientError> {
        self.record(format!("seek {topic} {group} {to:?}"));
        Ok(4)
    }
    async fn seek_to_time(
        &self,
        topic: &str,
        group: &str,
        time_ms: u64,
    ) -> Result<u64, ClientError> {
        self.record(format!("seek {topic} {group} time {time_ms}"));
        Ok(5)
    }
    /// The log of [`Fake::info`] (offsets 0..6, `m0` to `m5`, published at 1000 +
    /// offset), read by the server's rules: from the start below it, pages of `limit`.
    async fn read(
        &self,
        topic: &str,
        from: ReadFrom,
        limit: usize,
        wait_ms: u64,
    ) -> Result<LogPage, ClientError> {
        self.record(format!("read {topic} {from:?} {limit} {wait_ms}"));
        let first = match from {
            ReadFrom::Earliest => 0,
            ReadFrom::Offset(offset) => offset.min(6),
            ReadFrom::Time(time_ms) => time_ms.saturating_sub(1000).min(6),
        };
        let messages: Vec<LogMessage> = (first..6)
            .take(limit)
            .map(|offset| LogMessage {
                offset,
                payload: Bytes::from(format!("m{offset}")),
                key: (offset == 1).then(|| "k".to_owned()),
                headers: Default::default(),
                published_at_ms: 1000 + offset,
            })
            .collect();
        let next = messages.last().map_or(first, |m| m.offset + 1);
        Ok(LogPage {
            messages,
            first,
            next,
            end: 6,
        })
    }
    async fn pause(
        &self,
        topic: &str,
        group: &str,
        until_ms: Option<u64>,
    ) -> Result<GroupPause, ClientError> {
        self.record(format!("pause {topic} {group} {until_ms:?}"));
        Ok(GroupPause {
            topic: topic.into(),
            group: group.into(),
            paused: true,
            paused_until_ms: until_ms,
            changed: true,
        })
    }
    async fn resume(&self, topic: &str, group: &str) -> Result<GroupPause, ClientError> {
        self.record(format!("resume {topic} {group}"));
        Ok(GroupPause {
            topic: topic.into(),
            group: group.into(),
            paused: false,
            paused_until_ms: None,
            changed: true,
        })
    }
    async fn create_channel(
        &self,
        channel: &str,
        subscribers: u64,
        mailbox: u64,
        mailbox_bytes: Option<u64>,
    ) -> Result<bool, ClientError> {
        let bytes = mailbox_bytes.map_or(String::new(), |bytes| format!(" bytes {bytes}"));
        self.record(format!(
            "create_channel {channel} {subscribers} {mailbox}{bytes}"
        ));
        Ok(true)
    }
    async fn list_channels(&self) -> Result<Vec<ChannelInfo>, ClientError> {
        self.record("list_channels".into());
        Ok(vec![ChannelInfo {
            name: "c".into(),
            max_subscribers: 3,
            mailbox_capacity: 8,
            mailbox_bytes: 1024,
            subscribers: self.subscribers,
            published: 0,
            delivered: 0,
            dropped: 0,
        }])
    }
    async fn publish_channel(
        &self,
        channel: &str,
        payload: Bytes,
    ) -> Result<ChannelDelivery, ClientError> {
        // Demo messages are long JSON documents: record their size, not their text.
        match payload.len() {
            0..=32 => self.record(format!("publish_channel {channel} {}", text(&payload))),
            len => self.record(format!("publish_channel {channel} ({len} bytes)")),
        }
        Ok(ChannelDelivery {
            delivered: 2,
            dropped: 1,
        })
    }
    async fn close_channel(&self, channel: &str) -> Result<(), ClientError> {
        self.record(format!("close_channel {channel}"));
        Ok(())
    }
    async fn subscribe_with(
        &self,
        channel: &str,
        options: SubscribeOptions,
    ) -> Result<FakeMessages, ClientError> {
        let options = match options.recv_buffer_bytes {
            None => "default".to_owned(),
            Some(bytes) => format!("buffer {bytes}"),
        };
        self.record(format!("subscribe_with {channel} {options}"));
        Ok(FakeMessages {
            messages: self.messages.clone().into_iter(),
            read: self.read.clone(),
        })
    }
}
