//! One adapter per broker, each behind the same small traits so a workload is written once.
//!
//! - [`LogSystem`]: a retained log with consumer groups (mailroom topics, Redis Streams,
//!   NATS JetStream streams with durable consumers, RabbitMQ quorum queues behind a fanout
//!   exchange, one queue per group; PgQ queues with registered consumers; the
//!   hand-written `SKIP LOCKED` queue table, one table per group).
//! - [`LiveSystem`]: best-effort fan-out to connected subscribers (mailroom channels, Redis
//!   pub/sub, NATS core subjects).
//!
//! Each adapter uses its system the way that system's users do: batches and prefetch where
//! the client offers them, dead-lettering client-side where the broker has no DLQ (Redis,
//! NATS), and the broker's own delivery limit where it has one (RabbitMQ, mailroom).

use std::future::Future;

use anyhow::Result;
use bytes::Bytes;
use hdrhistogram::Histogram;

pub mod mailroom;
pub mod nats;
pub mod pgq;
pub mod postgres;
pub mod rabbitmq;
pub mod redis;
pub mod skip_locked;
pub mod stalled;

/// A topic (stream, exchange) with its consumer groups, created fresh for one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicSpec {
    /// Unique per run, so runs on one broker never see each other's messages.
    pub name: String,
    /// The groups that read it; each gets its own cursor and dead-letter queue.
    pub groups: Vec<String>,
    /// Failures allowed per message before it is dead-lettered (mailroom's
    /// `max_attempts`: without releases, the deliveries allowed).
    pub max_attempts: u32,
    /// How many deliveries a consumer may hold unsettled: Redis `XREADGROUP COUNT`, NATS
    /// fetch batch, RabbitMQ `basic.qos`, mailroom's `max_in_flight` and `poll_batch` max.
    /// At most [`PREFETCH_MAX`].
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

    /// Publishes `payloads` in order over this one connection, keeping up to `window`
    /// messages sent and not yet confirmed (mailroom's publish stream, Redis pipelined
    /// `XADD`, JetStream async publish, RabbitMQ publisher confirms). Whenever `window`
    /// are outstanding it waits for the oldest confirmation, and records each message's
    /// latency (sent until its confirmation was taken) in `latency`. Returns once every
    /// message is confirmed at the system's configured durability.
    fn publish_pipelined(
        &mut self,
        payloads: Vec<Bytes>,
        window: usize,
        latency: &mut Histogram<u64>,
    ) -> impl Future<Output = Result<()>> + Send;
}

/// Consumes one group.
///
/// The consume workloads drive it in rounds: [`LogConsumer::next_batch`] hands over what one
/// round trip brought (at most the prefetch), the workload decides each delivery, and
/// [`LogConsumer::settle`] acks and rejects them. The provided methods make a batch of one
/// delivery from [`LogConsumer::next`] and settle it item by item, which is the right shape
/// where acks are fire-and-forget anyway (NATS, RabbitMQ); systems with a batch ack
/// (mailroom's `ack_batch`, Redis's multi-id `XACK`) override both.
pub trait LogConsumer: Send + 'static {
    /// Identifies a delivery to ack or reject.
    type Handle: Send + 'static;

    /// The next delivery, or `None` if nothing arrived within the adapter's idle wait.
    fn next(&mut self) -> impl Future<Output = Result<Option<Received<Self::Handle>>>> + Send;

    /// Acknowledges a delivery.
    fn ack(&mut self, handle: Self::Handle) -> impl Future<Output = Result<()>> + Send;

    /// Rejects a delivery: a retry, or a dead letter when it was the final attempt.
    fn fail(&mut self, handle: Self::Handle) -> impl Future<Output = Result<FailOutcome>> + Send;

    /// The next round's deliveries (at least one, at most the prefetch), or an empty batch if
    /// nothing arrived within the adapter's idle wait.
    fn next_batch(&mut self) -> impl Future<Output = Result<Vec<Received<Self::Handle>>>> + Send {
        async move { Ok(self.next().await?.into_iter().collect()) }
    }

    /// Acks every handle in `acks`, then rejects every handle in `fails`; returns the
    /// outcomes of rejections in the order they were made. By default those are this
    /// call's `fails`; a consumer that folds its settlements into its next poll answers
    /// them from a later call, or from [`LogConsumer::finish`].
    fn settle(
        &mut self,
        acks: Vec<Self::Handle>,
        fails: Vec<Self::Handle>,
    ) -> impl Future<Output = Result<Vec<FailOutcome>>> + Send {
        async move {
            for handle in acks {
                self.ack(handle).await?;
            }
            let mut outcomes = Vec::with_capacity(fails.len());
            for handle in fails {
                outcomes.push(self.fail(handle).await?);
            }
            Ok(outcomes)
        }
    }
    /// Settles what the consumer still holds back at the end of a drain (what it folds
    /// into its next poll), and returns the outcomes of rejections not yet answered;
    /// nothing by default.
    fn finish(&mut self) -> impl Future<Output = Result<Vec<FailOutcome>>> + Send {
        async { Ok(Vec::new()) }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Records the calls the provided methods make.
    struct Recorder {
        queued: Vec<u32>,
        calls: Vec<String>,
    }

    impl LogConsumer for Recorder {
        type Handle = u32;

        async fn next(&mut self) -> Result<Option<Received<u32>>> {
            Ok(self.queued.pop().map(|handle| Received {
                payload: Bytes::new(),
                attempt: 1,
                handle,
            }))
        }

        async fn ack(&mut self, handle: u32) -> Result<()> {
            self.calls.push(format!("ack {handle}"));
            Ok(())
        }

        async fn fail(&mut self, handle: u32) -> Result<FailOutcome> {
            self.calls.push(format!("fail {handle}"));
            Ok(if handle.is_multiple_of(2) {
                FailOutcome::Retry
            } else {
                FailOutcome::DeadLettered
            })
        }
    }

    // Proves the provided batch methods keep one-at-a-time systems one delivery per round,
    // settle acks before rejections, and return the outcomes in the order of `fails`.
    #[tokio::test]
    async fn provided_methods_take_one_and_settle_in_order() {
        let mut consumer = Recorder {
            queued: vec![7, 8],
            calls: Vec::new(),
        };
        let round = consumer.next_batch().await.unwrap();
        assert_eq!(round.iter().map(|r| r.handle).collect::<Vec<_>>(), vec![8]);
        let outcomes = consumer.settle(vec![1, 2], vec![4, 3]).await.unwrap();
        assert_eq!(
            outcomes,
            vec![FailOutcome::Retry, FailOutcome::DeadLettered]
        );
        assert_eq!(consumer.calls, ["ack 1", "ack 2", "fail 4", "fail 3"]);
        consumer.queued.clear();
        assert!(consumer.next_batch().await.unwrap().is_empty());
    }
}
