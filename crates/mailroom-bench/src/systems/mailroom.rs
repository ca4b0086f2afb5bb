//! mailroom through `mailroom-client`: topics and groups over HTTP, channels over WebSocket.
//!
//! A group is created with `max_in_flight` = the run's prefetch P, and its one consumer
//! loops `poll_batch(max = P)` (a long poll: the server holds an empty poll up to
//! [`LONG_POLL_WAIT_MS`]) → decide → one `ack_batch` of the successes and one `nack_batch`
//! of the failures, so a round of up to P deliveries costs at most three requests. With
//! P = 1 that is the old shape: one poll and one ack per message. Every item of a batch ack
//! or nack must succeed; an item error fails the run. Publishing in batches uses the batch
//! endpoint; pipelined publishing uses the publish stream (`Client::publish_stream`).
//!
//! The `parallel` workload (one group, W in flight) has two shapes: [`MailroomShape::Batch`], ONE consumer
//! doing `poll_batch(max = W)` → one `ack_batch`, like the Redis side; and the older
//! [`MailroomShape::Tasks`], W named consumers each polling and acking one delivery at a
//! time ([`MailroomWorker`]), kept for comparison; and [`MailroomShape::AckNext`], the
//! batch consumer acking each round inside its next `poll/batch` (one request per round).

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use bytes::Bytes;
use hdrhistogram::Histogram;
use mailroom_client::{
    BatchItemError, BatchPoll, Client, Confirmation, Delivery, DeliveryId, GroupOptions,
    NackOptions, NackOutcome, SubscribeOptions, Subscription,
};

use super::mailroom_stream::StreamedConsumer;
use super::{
    FailOutcome, LiveSubscriber, LiveSystem, LogConsumer, LogPublisher, LogSystem, Received,
    TopicSpec,
};
use crate::workload::parallel::{WindowSystem, WindowWorker};
use crate::workload::publish::SendTimes;

/// How long a consumer keeps polling an empty group before it reports nothing left.
pub const IDLE_WAIT: Duration = Duration::from_secs(5);

/// How long the server may hold a poll of an empty group (a long poll) before it answers
/// with no delivery.
pub const LONG_POLL_WAIT_MS: u64 = 1000;

/// The receive buffer of the stalled subscriber's socket, so it pushes back on the server
/// after a few messages instead of soaking megabytes into the kernel.
pub const STALLED_RECV_BUFFER_BYTES: u32 = 4096;

/// How the `parallel` workload keeps W deliveries of one group in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MailroomShape {
    /// One consumer: `poll_batch(max = W)`, then one `ack_batch` of what it got.
    #[default]
    Batch,
    /// W consumers with their own names, each polling and acking one delivery at a time
    /// (the shape before the batch API).
    Tasks,
    /// One consumer whose `poll_batch(max = W)` also acks the previous round (`poll/batch`
    /// with `ack`): one request and one sync per round.
    AckNext,
}

/// What every message a mailroom publisher sends carries besides its payload.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MessageMetadata {
    /// Nothing: bare payloads (today's publishes).
    #[default]
    None,
    /// A key and two headers (about what trace context and a content type add).
    KeyAndHeaders,
    /// A unique idempotency key per message, so every one is checked and stored.
    IdempotencyKey,
    /// A key drawn at random (seeded by the message's number) from this many distinct
    /// keys, for ordering keys in the consume workload.
    Keys(u32),
}

/// A mailroom server.
#[derive(Debug, Clone)]
pub struct Mailroom {
    client: Client,
    shape: MailroomShape,
    metadata: MessageMetadata,
    /// Consume over the consume stream instead of `poll/batch` (consume, retry, fanout).
    streamed: bool,
}

impl Mailroom {
    /// A handle on the server at `url` (`http://127.0.0.1:PORT`), using `shape` for the
    /// `parallel` workload.
    ///
    /// # Errors
    /// When the URL is not an `http://` URL.
    pub fn new(url: &str, shape: MailroomShape) -> Result<Mailroom> {
        Ok(Mailroom {
            client: Client::new(url)?,
            shape,
            metadata: MessageMetadata::None,
            streamed: false,
        })
    }

    /// With `metadata` on every message published (the publish workload).
    pub fn with_metadata(mut self, metadata: MessageMetadata) -> Mailroom {
        self.metadata = metadata;
        self
    }

    /// This handle, consuming the log workloads over the consume stream (one WebSocket
    /// per group, window = the prefetch) instead of `poll/batch` + `ack/batch`.
    pub fn streamed(mut self) -> Mailroom {
        self.streamed = true;
        self
    }
}

/// Makes the idempotency keys of one run unique across its publishers.
static IDEMPOTENCY_KEYS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// `payload` as a message with `metadata`.
fn message_with(metadata: MessageMetadata, payload: &Bytes) -> mailroom_client::NewMessage {
    let message = mailroom_client::NewMessage::new(payload.clone());
    match metadata {
        MessageMetadata::None => message,
        MessageMetadata::KeyAndHeaders => message
            .with_key("customer-0042")
            .with_header(
                "traceparent",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            )
            .with_header("content-type", "application/json"),
        MessageMetadata::IdempotencyKey => {
            let n = IDEMPOTENCY_KEYS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            message.with_idempotency_key(format!("{}-{n}", std::process::id()))
        }
        MessageMetadata::Keys(keys) => {
            let n = IDEMPOTENCY_KEYS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            // Random, not round-robin: round-robin keys never meet inside a window.
            message.with_key(format!("key-{}", splitmix(n) % u64::from(keys.max(1))))
        }
    }
}

/// SplitMix64: a well-spread number from a counter.
fn splitmix(n: u64) -> u64 {
    let mut z = n.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Fails with the server's code and message if any item of a batch ack or nack failed, or
/// if the batch answered for a different number of deliveries than it was given.
fn every_item<T>(
    what: &str,
    sent: &[DeliveryId],
    results: Vec<Result<T, BatchItemError>>,
) -> Result<Vec<T>> {
    anyhow::ensure!(
        results.len() == sent.len(),
        "{what} of {} deliveries answered {} results",
        sent.len(),
        results.len()
    );
    sent.iter()
        .zip(results)
        .map(|(id, result)| {
            result.map_err(|error| {
                anyhow::anyhow!(
                    "{what} of offset {} attempt {}: {}: {}",
                    id.offset,
                    id.attempt,
                    error.code,
                    error.message
                )
            })
        })
        .collect()
}

fn received(delivery: Delivery) -> Received<DeliveryId> {
    Received {
        attempt: delivery.attempt,
        handle: delivery.id(),
        payload: delivery.payload,
    }
}

async fn create_groups(client: &Client, topic: &TopicSpec, max_in_flight: u32) -> Result<()> {
    client.create_topic(&topic.name).await?;
    for group in &topic.groups {
        let mut options = GroupOptions::new(topic.max_attempts);
        options.max_in_flight = Some(max_in_flight);
        client
            .create_group_with(&topic.name, group, &options)
            .await
            .with_context(|| {
                format!("creating group {group} with max_in_flight {max_in_flight}")
            })?;
    }
    Ok(())
}

/// Publishes with the single or the batch endpoint.
#[derive(Debug)]
pub struct MailroomPublisher {
    client: Client,
    topic: String,
    metadata: MessageMetadata,
}

/// Polls and settles one group, up to `prefetch` deliveries per round.
#[derive(Debug)]
pub struct MailroomConsumer {
    client: Client,
    topic: String,
    group: String,
    prefetch: u32,
    /// The consume stream, when consuming over it.
    stream: Option<Box<StreamedConsumer>>,
}

impl MailroomConsumer {
    /// Long-polls for up to `max` deliveries until some arrive or [`IDLE_WAIT`] has passed.
    async fn poll_round(&self, max: u32) -> Result<Vec<Received<DeliveryId>>> {
        let deadline = Instant::now() + IDLE_WAIT;
        let request = BatchPoll {
            consumer: None,
            max,
            wait_ms: LONG_POLL_WAIT_MS,
            ack: &[],
        };
        loop {
            let deliveries = self
                .client
                .poll_batch(&self.topic, &self.group, &request)
                .await?;
            anyhow::ensure!(
                deliveries.len() <= max as usize,
                "poll_batch(max = {max}) returned {} deliveries",
                deliveries.len()
            );
            if !deliveries.is_empty() || Instant::now() >= deadline {
                return Ok(deliveries.into_iter().map(received).collect());
            }
        }
    }
}

impl LogSystem for Mailroom {
    type Publisher = MailroomPublisher;
    type Consumer = MailroomConsumer;

    async fn prepare(&self, topic: &TopicSpec) -> Result<()> {
        let prefetch = u32::try_from(topic.prefetch.clamp(1, super::PREFETCH_MAX))?;
        create_groups(&self.client, topic, prefetch).await
    }

    async fn publisher(&self, topic: &TopicSpec) -> Result<MailroomPublisher> {
        Ok(MailroomPublisher {
            client: self.client.clone(),
            topic: topic.name.clone(),
            metadata: self.metadata,
        })
    }

    async fn consumer(&self, topic: &TopicSpec, group: &str) -> Result<MailroomConsumer> {
        let prefetch = u32::try_from(topic.prefetch.clamp(1, super::PREFETCH_MAX))?;
        let stream = match self.streamed {
            false => None,
            true => {
                let stream = self
                    .client
                    .consume_stream(&topic.name, group, prefetch, None)
                    .await?;
                Some(Box::new(StreamedConsumer::new(stream, prefetch as usize)))
            }
        };
        Ok(MailroomConsumer {
            client: self.client.clone(),
            topic: topic.name.clone(),
            group: group.to_owned(),
            prefetch,
            stream,
        })
    }

    async fn dead_letters(
        &self,
        topic: &TopicSpec,
        group: &str,
        _expected: u64,
    ) -> Result<Vec<Bytes>> {
        // mailroom dead-letters synchronously inside the nack, so there is nothing to wait for.
        let letters = self.client.dead_letters(&topic.name, group).await?;
        Ok(letters.into_iter().map(|letter| letter.payload).collect())
    }

    async fn count(&self, topic: &TopicSpec) -> Result<u64> {
        let info = self.client.topic_info(&topic.name).await?;
        Ok(info.end - info.start)
    }

    async fn remove(&self, _topic: &TopicSpec) -> Result<()> {
        // The API has no topic deletion; the run's data dir is thrown away by the script.
        Ok(())
    }
}

impl LogPublisher for MailroomPublisher {
    async fn publish(&mut self, payloads: &[Bytes]) -> Result<()> {
        if self.metadata != MessageMetadata::None {
            let messages: Vec<_> = payloads
                .iter()
                .map(|payload| message_with(self.metadata, payload))
                .collect();
            let published = self.client.publish_once(&self.topic, &messages).await?;
            anyhow::ensure!(
                published.offsets.len() == payloads.len() && published.duplicates.is_empty(),
                "batch returned {} offsets and {} duplicates for {} messages",
                published.offsets.len(),
                published.duplicates.len(),
                payloads.len()
            );
            return Ok(());
        }
        if let [payload] = payloads {
            self.client.publish(&self.topic, payload.clone()).await?;
        } else {
            let offsets = self.client.publish_batch(&self.topic, payloads).await?;
            anyhow::ensure!(
                offsets.len() == payloads.len(),
                "batch returned {} offsets for {} messages",
                offsets.len(),
                payloads.len()
            );
        }
        Ok(())
    }

    /// The publish stream (`/v1/topics/{topic}/publish/ws`): frames fed without waiting
    /// while fewer than `window` are unconfirmed, then the oldest confirmation taken.
    async fn publish_pipelined(
        &mut self,
        payloads: Vec<Bytes>,
        window: usize,
        latency: &mut Histogram<u64>,
    ) -> Result<()> {
        let mut stream = self
            .client
            .publish_stream_with_window(&self.topic, window)
            .await?;
        let mut times = SendTimes::default();
        for payload in payloads {
            while times.outstanding() >= window {
                let confirmation = stream
                    .confirmed()
                    .await?
                    .context("a message is outstanding")?;
                take_confirmation(&confirmation, &mut times, latency)?;
            }
            stream.feed(payload).await?;
            times.sent();
        }
        for confirmation in stream.flush().await? {
            take_confirmation(&confirmation, &mut times, latency)?;
        }
        stream.close().await?;
        Ok(())
    }
}

/// Records a publish-stream confirmation; a refusal fails the run.
fn take_confirmation(
    confirmation: &Confirmation,
    times: &mut SendTimes,
    latency: &mut Histogram<u64>,
) -> Result<()> {
    if let Err(refusal) = &confirmation.outcome {
        anyhow::bail!(
            "messages {:?} refused: {} {}",
            confirmation.seqs(),
            refusal.code,
            refusal.message
        );
    }
    times.confirmed(usize::try_from(confirmation.count)?, latency)
}

impl LogConsumer for MailroomConsumer {
    type Handle = DeliveryId;

    async fn next(&mut self) -> Result<Option<Received<DeliveryId>>> {
        if let Some(stream) = &mut self.stream {
            return stream.next_one().await;
        }
        Ok(self.poll_round(1).await?.pop())
    }

    async fn ack(&mut self, handle: DeliveryId) -> Result<()> {
        self.settle(vec![handle], Vec::new()).await?;
        Ok(())
    }

    async fn fail(&mut self, handle: DeliveryId) -> Result<FailOutcome> {
        let outcomes = self.settle(Vec::new(), vec![handle]).await?;
        outcomes
            .into_iter()
            .next()
            .context("a nack without an outcome")
    }

    async fn next_batch(&mut self) -> Result<Vec<Received<DeliveryId>>> {
        if let Some(stream) = &mut self.stream {
            return stream.next_batch().await;
        }
        self.poll_round(self.prefetch).await
    }

    async fn settle(
        &mut self,
        acks: Vec<DeliveryId>,
        fails: Vec<DeliveryId>,
    ) -> Result<Vec<FailOutcome>> {
        if let Some(stream) = &mut self.stream {
            return stream.settle(acks, fails).await;
        }
        if !acks.is_empty() {
            let results = self
                .client
                .ack_batch(&self.topic, &self.group, &acks)
                .await?;
            every_item("ack_batch", &acks, results)?;
        }
        if fails.is_empty() {
            return Ok(Vec::new());
        }
        let results = self
            .client
            .nack_batch(&self.topic, &self.group, &fails, &NackOptions::default())
            .await?;
        every_item("nack_batch", &fails, results)?
            .into_iter()
            .map(|outcome| match outcome {
                NackOutcome::Retry => Ok(FailOutcome::Retry),
                NackOutcome::DeadLettered => Ok(FailOutcome::DeadLettered),
                // A plain nack counts a failure; the server answers `released` only to a
                // release, which the bench never sends.
                NackOutcome::Released => anyhow::bail!("a plain nack was answered as a release"),
            })
            .collect()
    }
}

/// A WebSocket subscription that is read.
#[derive(Debug)]
pub struct MailroomSubscriber(Subscription);

impl LiveSubscriber for MailroomSubscriber {
    async fn next(&mut self) -> Result<Option<Bytes>> {
        match self.0.next().await {
            None => Ok(None),
            Some(message) => Ok(Some(message?)),
        }
    }
}

impl LiveSystem for Mailroom {
    type Subscriber = MailroomSubscriber;
    type Stalled = Subscription;

    async fn prepare(&self, channel: &str, subscribers: u64, mailbox: u64) -> Result<()> {
        self.client
            .create_channel(channel, subscribers, mailbox)
            .await?;
        Ok(())
    }

    async fn subscribe(&self, channel: &str) -> Result<MailroomSubscriber> {
        Ok(MailroomSubscriber(self.client.subscribe(channel).await?))
    }

    async fn subscribe_stalled(&self, channel: &str) -> Result<Subscription> {
        let options = SubscribeOptions {
            recv_buffer_bytes: Some(STALLED_RECV_BUFFER_BYTES),
        };
        Ok(self.client.subscribe_with(channel, options).await?)
    }

    async fn publish(&self, channel: &str, payload: Bytes) -> Result<Option<(u64, u64)>> {
        let delivery = self.client.publish_channel(channel, payload).await?;
        Ok(Some((delivery.delivered, delivery.dropped)))
    }

    async fn flush(&self) -> Result<()> {
        // Every publish already waited for the server's answer.
        Ok(())
    }

    async fn drain_stalled(
        &self,
        mut stalled: Subscription,
        idle: Duration,
    ) -> Result<(u64, bool)> {
        let mut count = 0;
        loop {
            match tokio::time::timeout(idle, stalled.next()).await {
                Err(_elapsed) => return Ok((count, false)),
                Ok(None) => return Ok((count, true)),
                Ok(Some(Err(_))) => return Ok((count, true)),
                Ok(Some(Ok(_))) => count += 1,
            }
        }
    }
}

/// A worker of a windowed group, in one of the two [`MailroomShape`]s.
#[derive(Debug)]
pub enum MailroomWorker {
    /// The one consumer of [`MailroomShape::Batch`] (`false`) or
    /// [`MailroomShape::AckNext`] (`true`: acks ride on the next poll).
    Batch(MailroomConsumer, bool),
    /// One of the W named consumers of [`MailroomShape::Tasks`].
    Task(MailroomTask),
}

/// One of the `W` consumers of [`MailroomShape::Tasks`]: its own consumer name, polling
/// with `poll_as` and acking the one delivery it owns.
#[derive(Debug)]
pub struct MailroomTask {
    client: Client,
    topic: String,
    group: String,
    name: String,
}

impl WindowSystem for Mailroom {
    type Worker = MailroomWorker;

    async fn prepare_windowed(&self, topic: &TopicSpec, window: u32) -> Result<()> {
        create_groups(&self.client, topic, window).await
    }

    async fn workers(
        &self,
        topic: &TopicSpec,
        group: &str,
        window: u32,
    ) -> Result<Vec<MailroomWorker>> {
        if self.shape != MailroomShape::Tasks {
            let consumer = MailroomConsumer {
                client: self.client.clone(),
                topic: topic.name.clone(),
                group: group.to_owned(),
                prefetch: window,
                stream: None,
            };
            let ack_next = self.shape == MailroomShape::AckNext;
            return Ok(vec![MailroomWorker::Batch(consumer, ack_next)]);
        }
        // One shared client: its pool opens one keep-alive connection per task that is
        // mid-call, and reuses it for the task's next call.
        Ok((0..window)
            .map(|index| {
                MailroomWorker::Task(MailroomTask {
                    client: self.client.clone(),
                    topic: topic.name.clone(),
                    group: group.to_owned(),
                    name: format!("w{index}"),
                })
            })
            .collect())
    }
}

impl WindowWorker for MailroomWorker {
    type Handle = DeliveryId;

    async fn take(&mut self) -> Result<Vec<Received<DeliveryId>>> {
        match self {
            MailroomWorker::Batch(consumer, _) => {
                let request = BatchPoll {
                    consumer: None,
                    max: consumer.prefetch,
                    wait_ms: LONG_POLL_WAIT_MS,
                    ack: &[],
                };
                let deliveries = consumer
                    .client
                    .poll_batch(&consumer.topic, &consumer.group, &request)
                    .await?;
                Ok(deliveries.into_iter().map(received).collect())
            }
            MailroomWorker::Task(task) => {
                let delivery = task
                    .client
                    .poll_as(&task.topic, &task.group, &task.name)
                    .await?;
                Ok(delivery.into_iter().map(received).collect())
            }
        }
    }

    async fn ack_all(&mut self, handles: Vec<DeliveryId>) -> Result<()> {
        match self {
            MailroomWorker::Batch(consumer, _) => {
                consumer.settle(handles, Vec::new()).await?;
            }
            MailroomWorker::Task(task) => {
                for handle in handles {
                    task.client.ack(&task.topic, &task.group, handle).await?;
                }
            }
        }
        Ok(())
    }

    fn acks_with_take(&self) -> bool {
        matches!(self, MailroomWorker::Batch(_, true))
    }

    async fn ack_then_take(
        &mut self,
        handles: Vec<DeliveryId>,
    ) -> Result<Vec<Received<DeliveryId>>> {
        let MailroomWorker::Batch(consumer, true) = self else {
            self.ack_all(handles).await?;
            return self.take().await;
        };
        let request = BatchPoll {
            consumer: None,
            max: consumer.prefetch,
            wait_ms: LONG_POLL_WAIT_MS,
            ack: &handles,
        };
        let (acked, deliveries) = consumer
            .client
            .ack_then_poll_batch(&consumer.topic, &consumer.group, &request)
            .await?;
        every_item("poll_batch ack", &handles, acked)?;
        Ok(deliveries.into_iter().map(received).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(offset: u64) -> DeliveryId {
        DeliveryId { offset, attempt: 1 }
    }

    fn not_owned() -> BatchItemError {
        BatchItemError {
            code: "not_owned".into(),
            message: "not in flight".into(),
        }
    }

    // Proves a batch answer passes only when every item succeeded and it answered for
    // exactly the deliveries sent: one failed item, or a missing one, fails the round.
    #[test]
    fn every_item_must_succeed() {
        let sent = [id(4), id(5)];
        let outcomes = every_item("nack_batch", &sent, vec![Ok(1), Ok(2)]).unwrap();
        assert_eq!(outcomes, vec![1, 2]);
        let error = every_item("ack_batch", &sent, vec![Ok(()), Err(not_owned())])
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("offset 5") && error.contains("not_owned"),
            "{error}"
        );
        assert!(every_item("ack_batch", &sent, vec![Ok(())]).is_err());
    }
}
