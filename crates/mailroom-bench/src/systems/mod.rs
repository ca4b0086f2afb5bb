//! One adapter per broker, each behind the same small traits so a workload is written once.
//!
//! - [`LogSystem`]: a retained log with consumer groups (mailroom topics, Redis Streams,
//!   NATS JetStream streams with durable consumers, RabbitMQ quorum queues behind a fanout
//!   exchange, one queue per group).
//! - [`LiveSystem`]: best-effort fan-out to connected subscribers (mailroom channels, Redis
//!   pub/sub, NATS core subjects).
//!
//! Each adapter uses its system the way that system's users do: batches and prefetch where
//! the client offers them, dead-lettering client-side where the broker has no DLQ (Redis,
//! NATS), and the broker's own delivery limit where it has one (RabbitMQ, mailroom).

use std::future::Future;

use anyhow::Result;
use bytes::Bytes;

pub mod mailroom;
pub mod nats;
pub mod rabbitmq;
pub mod redis;
pub mod stalled;

/// A topic (stream, exchange) with its consumer groups, created fresh for one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicSpec {
    /// Unique per run, so runs on one broker never see each other's messages.
    pub name: String,
    /// The groups that read it; each gets its own cursor and dead-letter queue.
    pub groups: Vec<String>,
    /// Deliveries allowed per message before it is dead-lettered.
    pub max_attempts: u32,
    /// How many deliveries a consumer may fetch ahead of its acks, where the system lets it
    /// (Redis `COUNT`, NATS pull batch, RabbitMQ `basic.qos`); mailroom's groups hand out
    /// one delivery at a time whatever this says. At most [`PREFETCH_MAX`].
    pub prefetch: usize,
}

/// The largest prefetch the bench asks for (RabbitMQ's `basic.qos` takes a `u16`).
pub const PREFETCH_MAX: usize = 4096;

/// One delivery handed to a consumer.
#[derive(Debug)]
pub struct Received<H> {
    /// The message's bytes.
    pub payload: Bytes,
    /// Which delivery of this message to this group it is, from 1, as the system reports it.
    pub attempt: u32,
    /// What the adapter needs to ack or reject it.
    pub handle: H,
}

/// What a rejection did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailOutcome {
    /// The message will be delivered again.
    Retry,
    /// The message went to the group's dead-letter queue.
    DeadLettered,
}

/// A broker with retained logs and consumer groups.
pub trait LogSystem: Send + Sync + 'static {
    /// A publishing connection.
    type Publisher: LogPublisher;
    /// A consuming connection for one group.
    type Consumer: LogConsumer;

    /// Creates the topic, its groups and their dead-letter queues.
    fn prepare(&self, topic: &TopicSpec) -> impl Future<Output = Result<()>> + Send;

    /// Opens a publisher on `topic`.
    fn publisher(&self, topic: &TopicSpec) -> impl Future<Output = Result<Self::Publisher>> + Send;

    /// Opens a consumer of `group`.
    fn consumer(
        &self,
        topic: &TopicSpec,
        group: &str,
    ) -> impl Future<Output = Result<Self::Consumer>> + Send;

    /// The payloads in `group`'s dead-letter queue, once it holds at least `expected` or
    /// a bounded wait for asynchronous dead-lettering has passed.
    fn dead_letters(
        &self,
        topic: &TopicSpec,
        group: &str,
        expected: u64,
    ) -> impl Future<Output = Result<Vec<Bytes>>> + Send;

    /// How many messages the topic's log holds (RabbitMQ: the first group's queue).
    fn count(&self, topic: &TopicSpec) -> impl Future<Output = Result<u64>> + Send;

    /// Deletes what [`LogSystem::prepare`] created, so a long run does not fill the disk.
    fn remove(&self, topic: &TopicSpec) -> impl Future<Output = Result<()>> + Send;
}

/// Publishes to one topic.
pub trait LogPublisher: Send + 'static {
    /// Publishes `payloads` (one call: one request, pipeline or batch) and returns once the
    /// system confirmed every one at its configured durability.
    fn publish(&mut self, payloads: &[Bytes]) -> impl Future<Output = Result<()>> + Send;
}

/// Consumes one group.
pub trait LogConsumer: Send + 'static {
    /// Identifies a delivery to ack or reject.
    type Handle: Send + 'static;

    /// The next delivery, or `None` if nothing arrived within the adapter's idle wait.
    fn next(&mut self) -> impl Future<Output = Result<Option<Received<Self::Handle>>>> + Send;

    /// Acknowledges a delivery.
    fn ack(&mut self, handle: Self::Handle) -> impl Future<Output = Result<()>> + Send;

    /// Rejects a delivery: a retry, or a dead letter when it was the final attempt.
    fn fail(&mut self, handle: Self::Handle) -> impl Future<Output = Result<FailOutcome>> + Send;
}

/// A broker with best-effort live fan-out.
pub trait LiveSystem: Send + Sync + 'static {
    /// A subscriber that reads.
    type Subscriber: LiveSubscriber;
    /// A subscriber that never reads (holds its connection open).
    type Stalled: Send + 'static;

    /// Creates the channel, sized for `subscribers` with `mailbox` messages each where the
    /// system has such settings.
    fn prepare(
        &self,
        channel: &str,
        subscribers: u64,
        mailbox: u64,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Subscribes a reading subscriber.
    fn subscribe(&self, channel: &str) -> impl Future<Output = Result<Self::Subscriber>> + Send;

    /// Subscribes a subscriber that never reads.
    fn subscribe_stalled(
        &self,
        channel: &str,
    ) -> impl Future<Output = Result<Self::Stalled>> + Send;

    /// Publishes one message; returns the system's own (delivered, dropped) count when it
    /// reports one.
    fn publish(
        &self,
        channel: &str,
        payload: Bytes,
    ) -> impl Future<Output = Result<Option<(u64, u64)>>> + Send;

    /// Makes sure everything published has left the client.
    fn flush(&self) -> impl Future<Output = Result<()>> + Send;

    /// Starts reading the stalled subscriber at the end of the run; returns how many
    /// messages it still gets within `idle` of silence, and whether its connection was cut.
    fn drain_stalled(
        &self,
        stalled: Self::Stalled,
        idle: std::time::Duration,
    ) -> impl Future<Output = Result<(u64, bool)>> + Send;
}

/// A reading live subscriber.
pub trait LiveSubscriber: Send + 'static {
    /// The next message, `Ok(None)` when the connection ended.
    fn next(&mut self) -> impl Future<Output = Result<Option<Bytes>>> + Send;
}
