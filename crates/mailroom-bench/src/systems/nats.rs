//! NATS JetStream through `async-nats`, and NATS core subjects for live fan-out.
//!
//! A topic is a file-backed stream on subject `<topic>.m`; a group is a durable pull
//! consumer with explicit acks and `max_deliver` = max attempts. The consumer pulls with one
//! `fetch` request of up to `prefetch` messages per round (no wait: the server answers with
//! what it has and ends the request), like Redis's `XREADGROUP COUNT` and mailroom's
//! `poll_batch`. When that finds nothing it waits on the server, as mailroom's long poll
//! and Redis's `BLOCK` do: a pull request for one message with an expiry, which the server
//! answers the moment a message arrives (a client-side sleep between empty fetches would add
//! up to its length to every wake-up and count against NATS). It does not use the client's endless `messages()` stream: that stream
//! keeps a count of messages still owed by its pull requests, and when a message overtakes
//! the background task's "request sent" report the count stays one too high; at a batch
//! of 1 its refill threshold (batch / 2 = 0) is then never reached and the consumer sits
//! idle until the pull request expires (30 s), which is how the prefetch-1 smoke lost two
//! messages to the idle wait. A rejection is a `NAK`
//! (immediate redelivery, the server bumps the delivery count). JetStream keeps no
//! dead-letter queue of its own (it only emits an advisory), so on the final attempt the
//! consumer publishes the message to `<topic>.dlq.<group>`, captured by a `<topic>_dlq`
//! stream, waits for that publish's ack, then terminates the original (`+TERM`).
//! Acks are the plain, unconfirmed `+ACK` most applications use.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use async_nats::jetstream::consumer::pull::Config as PullConfig;
use async_nats::jetstream::consumer::{AckPolicy, DeliverPolicy, PullConsumer};
use async_nats::jetstream::stream::{Config as StreamConfig, StorageType};
use async_nats::jetstream::{self, AckKind, Context, Message};
use bytes::Bytes;
use futures_util::StreamExt as _;
use hdrhistogram::Histogram;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpSocket, TcpStream};

use super::{
    FailOutcome, LiveSubscriber, LiveSystem, LogConsumer, LogPublisher, LogSystem, Received,
    TopicSpec,
};
use crate::workload::publish::SendTimes;

/// Unacked messages a consumer may hold; well above the pull batch.
pub const ACK_PENDING_MAX: i64 = 10_000;

/// How long a consumer waits on an empty group before it reports nothing left.
pub const IDLE_WAIT: Duration = Duration::from_secs(5);

/// The shortest server-side wait worth asking for; with less of [`IDLE_WAIT`] left the
/// consumer reports the group empty.
pub const MIN_FETCH_EXPIRY: Duration = Duration::from_millis(10);

/// How long a delivery may stay unacked before JetStream redelivers it; far longer than any
/// run's processing of one message, so no timeout redelivery muddies the duplicate count.
pub const ACK_WAIT: Duration = Duration::from_secs(300);

/// The stalled subscriber's socket receive buffer.
pub const STALLED_RECV_BUFFER_BYTES: u32 = 4096;

/// A NATS server with JetStream enabled.
#[derive(Clone, Debug)]
pub struct Nats {
    client: async_nats::Client,
    jetstream: Context,
    address: String,
}

impl Nats {
    /// Connects to `host:port`.
    ///
    /// # Errors
    /// When the server cannot be reached.
    pub async fn connect(address: &str) -> Result<Nats> {
        let client = async_nats::connect(address).await?;
        let jetstream = jetstream::new(client.clone());
        Ok(Nats {
            client,
            jetstream,
            address: address.to_owned(),
        })
    }
}

fn subject(topic: &str) -> String {
    format!("{topic}.m")
}

fn dlq_stream(topic: &str) -> String {
    format!("{topic}_dlq")
}

fn dlq_subject(topic: &str, group: &str) -> String {
    format!("{topic}.dlq.{group}")
}

/// Publishes and waits for JetStream's publish acks; a batch has all its publishes in
/// flight before the first ack is awaited.
pub struct NatsPublisher {
    jetstream: Context,
    subject: String,
}

impl LogPublisher for NatsPublisher {
    async fn publish(&mut self, payloads: &[Bytes]) -> Result<()> {
        let mut acks = Vec::with_capacity(payloads.len());
        for payload in payloads {
            acks.push(
                self.jetstream
                    .publish(self.subject.clone(), payload.clone())
                    .await?,
            );
        }
        for ack in acks {
            ack.await?;
        }
        Ok(())
    }

    /// JetStream async publish: up to `window` publishes awaiting their acks.
    async fn publish_pipelined(
        &mut self,
        payloads: Vec<Bytes>,
        window: usize,
        latency: &mut Histogram<u64>,
    ) -> Result<()> {
        let mut acks = VecDeque::with_capacity(window);
        let mut times = SendTimes::default();
        for payload in payloads {
            while acks.len() >= window {
                take_ack(acks.pop_front(), &mut times, latency).await?;
            }
            acks.push_back(
                self.jetstream
                    .publish(self.subject.clone(), payload)
                    .await?,
            );
            times.sent();
        }
        while !acks.is_empty() {
            take_ack(acks.pop_front(), &mut times, latency).await?;
        }
        Ok(())
    }
}

/// Awaits the oldest outstanding JetStream ack and records it.
async fn take_ack(
    ack: Option<jetstream::context::PublishAckFuture>,
    times: &mut SendTimes,
    latency: &mut Histogram<u64>,
) -> Result<()> {
    ack.context("an ack is outstanding")?.await?;
    times.confirmed(1, latency)
}

/// Reads one durable pull consumer, a fetch of up to `prefetch` messages per round.
pub struct NatsConsumer {
    consumer: PullConsumer,
    prefetch: usize,
    buffer: VecDeque<Message>,
    jetstream: Context,
    dlq_subject: String,
    max_attempts: u32,
}

impl NatsConsumer {
    /// Fetches up to `prefetch` messages. When none are there, waits on the server for the
    /// next one (a pull request for one message that expires with what is left of
    /// [`IDLE_WAIT`]) and returns it alone; the next round's fetch takes the rest. Empty
    /// once [`IDLE_WAIT`] has passed with nothing.
    async fn fetch(&mut self) -> Result<Vec<Message>> {
        let deadline = Instant::now() + IDLE_WAIT;
        let batch = self
            .consumer
            .fetch()
            .max_messages(self.prefetch)
            .messages()
            .await
            .map_err(|e| anyhow::anyhow!("fetch: {e}"))?;
        let messages = drain(batch, deadline).await?;
        if !messages.is_empty() {
            return Ok(messages);
        }
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left < MIN_FETCH_EXPIRY {
                return Ok(Vec::new());
            }
            // `batch` (not `fetch`) leaves out no_wait: the server holds the request until a
            // message arrives or the expiry passes, then ends it with a timeout status.
            let waiting = self
                .consumer
                .batch()
                .max_messages(1)
                .expires(left)
                .messages()
                .await
                .map_err(|e| anyhow::anyhow!("fetch: {e}"))?;
            let messages = drain(waiting, deadline + IDLE_WAIT).await?;
            if !messages.is_empty() {
                return Ok(messages);
            }
        }
    }
}

/// Reads a pull request's messages until the server ends it; `deadline` only guards
/// against an answer that never comes.
async fn drain(
    mut batch: async_nats::jetstream::consumer::pull::Batch,
    deadline: Instant,
) -> Result<Vec<Message>> {
    let deadline = tokio::time::Instant::from_std(deadline);
    let mut messages = Vec::new();
    while let Ok(next) = tokio::time::timeout_at(deadline, batch.next()).await {
        let Some(message) = next else { break };
        messages.push(message.map_err(|e| anyhow::anyhow!("fetch: {e}"))?);
    }
    Ok(messages)
}

fn received(message: Message) -> Result<Received<Message>> {
    let delivered = message
        .info()
        .map_err(|e| anyhow::anyhow!("info: {e}"))?
        .delivered;
    Ok(Received {
        payload: message.payload.clone(),
        attempt: u32::try_from(delivered).context("delivery count")?,
        handle: message,
    })
}

impl LogConsumer for NatsConsumer {
    type Handle = Message;

    async fn next(&mut self) -> Result<Option<Received<Message>>> {
        if self.buffer.is_empty() {
            let fetched = self.fetch().await?;
            self.buffer.extend(fetched);
        }
        self.buffer.pop_front().map(received).transpose()
    }

    async fn next_batch(&mut self) -> Result<Vec<Received<Message>>> {
        let messages: Vec<Message> = if self.buffer.is_empty() {
            self.fetch().await?
        } else {
            self.buffer.drain(..).collect()
        };
        messages.into_iter().map(received).collect()
    }

    async fn ack(&mut self, message: Message) -> Result<()> {
        message.ack().await.map_err(|e| anyhow::anyhow!("ack: {e}"))
    }

    async fn fail(&mut self, message: Message) -> Result<FailOutcome> {
        let delivered = message
            .info()
            .map_err(|e| anyhow::anyhow!("info: {e}"))?
            .delivered;
        if delivered < i64::from(self.max_attempts) {
            message
                .ack_with(AckKind::Nak(None))
                .await
                .map_err(|e| anyhow::anyhow!("nak: {e}"))?;
            return Ok(FailOutcome::Retry);
        }
        self.jetstream
            .publish(self.dlq_subject.clone(), message.payload.clone())
            .await?
            .await?;
        message
            .ack_with(AckKind::Term)
            .await
            .map_err(|e| anyhow::anyhow!("term: {e}"))?;
        Ok(FailOutcome::DeadLettered)
    }
}

impl LogSystem for Nats {
    type Publisher = NatsPublisher;
    type Consumer = NatsConsumer;

    async fn prepare(&self, topic: &TopicSpec) -> Result<()> {
        let stream = self
            .jetstream
            .create_stream(StreamConfig {
                name: topic.name.clone(),
                subjects: vec![subject(&topic.name)],
                storage: StorageType::File,
                ..StreamConfig::default()
            })
            .await?;
        self.jetstream
            .create_stream(StreamConfig {
                name: dlq_stream(&topic.name),
                subjects: vec![format!("{}.dlq.>", topic.name)],
                storage: StorageType::File,
                ..StreamConfig::default()
            })
            .await?;
        for group in &topic.groups {
            stream
                .create_consumer(PullConfig {
                    durable_name: Some(group.clone()),
                    ack_policy: AckPolicy::Explicit,
                    deliver_policy: DeliverPolicy::All,
                    max_deliver: i64::from(topic.max_attempts),
                    ack_wait: ACK_WAIT,
                    max_ack_pending: ACK_PENDING_MAX,
                    ..PullConfig::default()
                })
                .await?;
        }
        Ok(())
    }

    async fn publisher(&self, topic: &TopicSpec) -> Result<NatsPublisher> {
        // Each publisher gets its own connection, as separate processes would.
        let client = async_nats::connect(&self.address).await?;
        Ok(NatsPublisher {
            jetstream: jetstream::new(client),
            subject: subject(&topic.name),
        })
    }

    async fn consumer(&self, topic: &TopicSpec, group: &str) -> Result<NatsConsumer> {
        let client = async_nats::connect(&self.address).await?;
        let jetstream = jetstream::new(client);
        let stream = jetstream.get_stream(&topic.name).await?;
        let consumer = stream
            .get_consumer::<PullConfig>(group)
            .await
            .map_err(|e| anyhow::anyhow!("consumer {group}: {e}"))?;
        Ok(NatsConsumer {
            consumer,
            prefetch: topic.prefetch.clamp(1, super::PREFETCH_MAX),
            buffer: VecDeque::new(),
            jetstream,
            dlq_subject: dlq_subject(&topic.name, group),
            max_attempts: topic.max_attempts,
        })
    }

    async fn dead_letters(
        &self,
        topic: &TopicSpec,
        group: &str,
        _expected: u64,
    ) -> Result<Vec<Bytes>> {
        // The DLQ publish was acked before the original was terminated, so it is complete.
        let stream = self.jetstream.get_stream(dlq_stream(&topic.name)).await?;
        let consumer = stream
            .create_consumer(PullConfig {
                ack_policy: AckPolicy::None,
                filter_subject: dlq_subject(&topic.name, group),
                ..PullConfig::default()
            })
            .await?;
        let pending = consumer.cached_info().num_pending;
        let mut messages = consumer
            .stream()
            .max_messages_per_batch(super::PREFETCH_MAX)
            .messages()
            .await?;
        let mut payloads = Vec::new();
        while (payloads.len() as u64) < pending {
            match tokio::time::timeout(IDLE_WAIT, messages.next()).await {
                Ok(Some(message)) => {
                    let message = message.map_err(|e| anyhow::anyhow!("dlq pull: {e}"))?;
                    payloads.push(message.payload.clone());
                }
                Ok(None) | Err(_) => break,
            }
        }
        Ok(payloads)
    }

    async fn count(&self, topic: &TopicSpec) -> Result<u64> {
        let mut stream = self.jetstream.get_stream(&topic.name).await?;
        Ok(stream.info().await?.state.messages)
    }

    async fn remove(&self, topic: &TopicSpec) -> Result<()> {
        self.jetstream.delete_stream(&topic.name).await?;
        self.jetstream
            .delete_stream(dlq_stream(&topic.name))
            .await?;
        Ok(())
    }
}

/// A core-NATS subscriber on its own connection.
pub struct NatsSubscriber {
    _client: async_nats::Client,
    subscriber: async_nats::Subscriber,
}

impl LiveSubscriber for NatsSubscriber {
    async fn next(&mut self) -> Result<Option<Bytes>> {
        Ok(self.subscriber.next().await.map(|message| message.payload))
    }
}

impl LiveSystem for Nats {
    type Subscriber = NatsSubscriber;
    type Stalled = TcpStream;

    async fn prepare(&self, _channel: &str, _subscribers: u64, _mailbox: u64) -> Result<()> {
        // Core subjects need no setup; the per-connection pending limit (max_pending) and
        // write deadline are the bounds, left at their defaults.
        Ok(())
    }

    async fn subscribe(&self, channel: &str) -> Result<NatsSubscriber> {
        let client = async_nats::connect(&self.address).await?;
        let subscriber = client.subscribe(channel.to_owned()).await?;
        // The SUB must reach the server before the publisher starts.
        client.flush().await?;
        Ok(NatsSubscriber {
            _client: client,
            subscriber,
        })
    }

    async fn subscribe_stalled(&self, channel: &str) -> Result<TcpStream> {
        let socket = TcpSocket::new_v4()?;
        socket.set_recv_buffer_size(STALLED_RECV_BUFFER_BYTES)?;
        let mut stream = socket.connect(self.address.parse()?).await?;
        let hello = format!(
            "CONNECT {{\"verbose\":false,\"pedantic\":false}}\r\nSUB {channel} 1\r\nPING\r\n"
        );
        stream.write_all(hello.as_bytes()).await?;
        let mut seen = Vec::new();
        while !seen.windows(4).any(|window| window == b"PONG") {
            let mut chunk = [0u8; 1024];
            let read = stream.read(&mut chunk).await?;
            anyhow::ensure!(read > 0, "nats closed the stalled subscriber's connection");
            seen.extend_from_slice(&chunk[..read]);
        }
        Ok(stream)
    }

    async fn publish(&self, channel: &str, payload: Bytes) -> Result<Option<(u64, u64)>> {
        self.client.publish(channel.to_owned(), payload).await?;
        Ok(None)
    }

    async fn flush(&self) -> Result<()> {
        self.client.flush().await?;
        Ok(())
    }

    async fn drain_stalled(&self, stalled: TcpStream, idle: Duration) -> Result<(u64, bool)> {
        super::stalled::count_marker(stalled, b"MSG ", idle).await
    }
}
