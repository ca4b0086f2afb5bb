//! RabbitMQ through `lapin`: quorum queues, publisher confirms, broker-side dead-lettering.
//!
//! A topic is a durable fanout exchange; each group is a quorum queue bound to it (RabbitMQ
//! copies each message into every queue, where mailroom, Redis and NATS share one log).
//! Each queue has `x-delivery-limit` = max attempts − 1 (the limit counts returns, not
//! deliveries) and dead-letters through the default exchange into its own quorum queue
//! `<topic>.<group>.dlq`. Publishers wait for publisher confirms, which a quorum queue sends
//! after the write is fsynced. Consumers use `basic.qos` prefetch; acks are AMQP's usual
//! unconfirmed `basic.ack`, rejections `basic.nack` with requeue.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use bytes::Bytes;
use futures_util::StreamExt as _;
use hdrhistogram::Histogram;
use lapin::message::Delivery;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicNackOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, ExchangeDeclareOptions, ExchangeDeleteOptions, QueueBindOptions,
    QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};

use super::{FailOutcome, LogConsumer, LogPublisher, LogSystem, Received, TopicSpec};
use crate::workload::publish::SendTimes;

/// How long a consumer waits on an empty queue before it reports nothing left.
pub const IDLE_WAIT: Duration = Duration::from_secs(5);

/// How long to wait for asynchronous dead-lettering to fill a dead-letter queue.
pub const DEAD_LETTER_WAIT: Duration = Duration::from_secs(30);

/// AMQP's persistent delivery mode.
const PERSISTENT: u8 = 2;

/// A RabbitMQ broker.
#[derive(Debug, Clone)]
pub struct RabbitMq {
    uri: String,
    channel: Channel,
}

impl RabbitMq {
    /// Connects to `host:port` as the default `guest` user (allowed from loopback only).
    ///
    /// # Errors
    /// When the broker cannot be reached.
    pub async fn connect(address: &str) -> Result<RabbitMq> {
        let uri = format!("amqp://guest:guest@{address}/%2f");
        let channel = open_channel(&uri).await?;
        Ok(RabbitMq { uri, channel })
    }
}

async fn open_channel(uri: &str) -> Result<Channel> {
    let connection = Connection::connect(uri, ConnectionProperties::default()).await?;
    // The channel keeps the connection alive; the connection handle may go.
    Ok(connection.create_channel().await?)
}

fn queue(topic: &str, group: &str) -> String {
    format!("{topic}.{group}")
}

fn dlq(topic: &str, group: &str) -> String {
    format!("{topic}.{group}.dlq")
}

fn quorum_args(dead_letter_to: Option<(&str, u32)>) -> FieldTable {
    let mut args = FieldTable::default();
    args.insert(
        ShortString::from("x-queue-type"),
        AMQPValue::LongString(LongString::from("quorum")),
    );
    if let Some((dlq, max_attempts)) = dead_letter_to {
        let limit = i64::from(max_attempts.saturating_sub(1));
        args.insert(
            ShortString::from("x-delivery-limit"),
            AMQPValue::LongLongInt(limit),
        );
        args.insert(
            ShortString::from("x-dead-letter-exchange"),
            AMQPValue::LongString(LongString::from("")),
        );
        args.insert(
            ShortString::from("x-dead-letter-routing-key"),
            AMQPValue::LongString(LongString::from(dlq)),
        );
    }
    args
}

fn durable() -> QueueDeclareOptions {
    QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    }
}

/// Publishes with publisher confirms.
pub struct RabbitPublisher {
    channel: Channel,
    exchange: String,
}

impl LogPublisher for RabbitPublisher {
    async fn publish(&mut self, payloads: &[Bytes]) -> Result<()> {
        let mut confirms = Vec::with_capacity(payloads.len());
        for payload in payloads {
            let confirm = self
                .channel
                .basic_publish(
                    ShortString::from(self.exchange.as_str()),
                    ShortString::from(""),
                    BasicPublishOptions::default(),
                    payload,
                    BasicProperties::default().with_delivery_mode(PERSISTENT),
                )
                .await?;
            confirms.push(confirm);
        }
        for confirm in confirms {
            let confirmation = confirm.await?;
            anyhow::ensure!(
                confirmation.is_ack(),
                "publish was not confirmed: {confirmation:?}"
            );
        }
        Ok(())
    }

    /// Publisher confirms: up to `window` persistent publishes awaiting their confirm.
    async fn publish_pipelined(
        &mut self,
        payloads: Vec<Bytes>,
        window: usize,
        latency: &mut Histogram<u64>,
    ) -> Result<()> {
        let mut confirms = VecDeque::with_capacity(window);
        let mut times = SendTimes::default();
        for payload in payloads {
            while confirms.len() >= window {
                take_confirm(confirms.pop_front(), &mut times, latency).await?;
            }
            let confirm = self
                .channel
                .basic_publish(
                    ShortString::from(self.exchange.as_str()),
                    ShortString::from(""),
                    BasicPublishOptions::default(),
                    &payload,
                    BasicProperties::default().with_delivery_mode(PERSISTENT),
                )
                .await?;
            confirms.push_back(confirm);
            times.sent();
        }
        while !confirms.is_empty() {
            take_confirm(confirms.pop_front(), &mut times, latency).await?;
        }
        Ok(())
    }
}

/// Awaits the oldest outstanding publisher confirm; a nack fails the run.
async fn take_confirm(
    confirm: Option<lapin::PublisherConfirm>,
    times: &mut SendTimes,
    latency: &mut Histogram<u64>,
) -> Result<()> {
    let confirmation = confirm.context("a confirm is outstanding")?.await?;
    anyhow::ensure!(
        confirmation.is_ack(),
        "publish was not confirmed: {confirmation:?}"
    );
    times.confirmed(1, latency)
}

/// Consumes one group's queue.
pub struct RabbitConsumer {
    _channel: Channel,
    consumer: lapin::Consumer,
    max_attempts: u32,
}

/// Which delivery this is: 1 + the quorum queue's count of earlier returns.
fn attempt_of(delivery: &Delivery) -> u32 {
    let returns = delivery.properties.headers().as_ref().and_then(|headers| {
        headers
            .inner()
            .get(&ShortString::from("x-delivery-count"))
            .cloned()
    });
    let returns = match returns {
        Some(AMQPValue::LongLongInt(n)) => u32::try_from(n).unwrap_or(u32::MAX),
        Some(AMQPValue::LongInt(n)) => u32::try_from(n).unwrap_or(u32::MAX),
        Some(AMQPValue::LongUInt(n)) => n,
        Some(AMQPValue::ShortInt(n)) => u32::try_from(n).unwrap_or(u32::MAX),
        _ => 0,
    };
    returns.saturating_add(1)
}

impl LogConsumer for RabbitConsumer {
    type Handle = (Delivery, u32);

    async fn next(&mut self) -> Result<Option<Received<(Delivery, u32)>>> {
        let Ok(next) = tokio::time::timeout(IDLE_WAIT, self.consumer.next()).await else {
            return Ok(None);
        };
        let Some(delivery) = next else {
            return Ok(None);
        };
        let delivery = delivery?;
        let attempt = attempt_of(&delivery);
        Ok(Some(Received {
            payload: Bytes::from(delivery.data.clone()),
            attempt,
            handle: (delivery, attempt),
        }))
    }

    async fn ack(&mut self, (delivery, _): (Delivery, u32)) -> Result<()> {
        delivery.acker.ack(BasicAckOptions::default()).await?;
        Ok(())
    }

    async fn fail(&mut self, (delivery, attempt): (Delivery, u32)) -> Result<FailOutcome> {
        let options = BasicNackOptions {
            requeue: true,
            ..BasicNackOptions::default()
        };
        delivery.acker.nack(options).await?;
        // The broker decides; past the delivery limit it dead-letters instead of requeueing.
        Ok(if attempt >= self.max_attempts {
            FailOutcome::DeadLettered
        } else {
            FailOutcome::Retry
        })
    }
}

impl LogSystem for RabbitMq {
    type Publisher = RabbitPublisher;
    type Consumer = RabbitConsumer;

    async fn prepare(&self, topic: &TopicSpec) -> Result<()> {
        let exchange_options = ExchangeDeclareOptions {
            durable: true,
            ..ExchangeDeclareOptions::default()
        };
        self.channel
            .exchange_declare(
                topic.name.as_str().into(),
                ExchangeKind::Fanout,
                exchange_options,
                FieldTable::default(),
            )
            .await?;
        for group in &topic.groups {
            let dead = dlq(&topic.name, group);
            self.channel
                .queue_declare(dead.as_str().into(), durable(), quorum_args(None))
                .await?;
            let name = queue(&topic.name, group);
            self.channel
                .queue_declare(
                    name.as_str().into(),
                    durable(),
                    quorum_args(Some((&dead, topic.max_attempts))),
                )
                .await?;
            self.channel
                .queue_bind(
                    name.as_str().into(),
                    topic.name.as_str().into(),
                    "".into(),
                    QueueBindOptions::default(),
                    FieldTable::default(),
                )
                .await?;
        }
        Ok(())
    }

    async fn publisher(&self, topic: &TopicSpec) -> Result<RabbitPublisher> {
        let channel = open_channel(&self.uri).await?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await?;
        Ok(RabbitPublisher {
            channel,
            exchange: topic.name.clone(),
        })
    }

    async fn consumer(&self, topic: &TopicSpec, group: &str) -> Result<RabbitConsumer> {
        let channel = open_channel(&self.uri).await?;
        channel
            .basic_qos(
                u16::try_from(topic.prefetch.clamp(1, super::PREFETCH_MAX)).unwrap_or(u16::MAX),
                BasicQosOptions::default(),
            )
            .await?;
        let consumer = channel
            .basic_consume(
                queue(&topic.name, group).as_str().into(),
                "".into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await?;
        Ok(RabbitConsumer {
            _channel: channel,
            consumer,
            max_attempts: topic.max_attempts,
        })
    }

    async fn dead_letters(
        &self,
        topic: &TopicSpec,
        group: &str,
        expected: u64,
    ) -> Result<Vec<Bytes>> {
        let name = dlq(&topic.name, group);
        // Quorum queues dead-letter asynchronously: wait (bounded) for the count to settle.
        let deadline = Instant::now() + DEAD_LETTER_WAIT;
        let passive = QueueDeclareOptions {
            passive: true,
            ..QueueDeclareOptions::default()
        };
        loop {
            let queue = self
                .channel
                .queue_declare(name.as_str().into(), passive, FieldTable::default())
                .await?;
            if u64::from(queue.message_count()) >= expected || Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let channel = open_channel(&self.uri).await?;
        let options = BasicConsumeOptions {
            no_ack: true,
            ..BasicConsumeOptions::default()
        };
        let mut consumer = channel
            .basic_consume(
                name.as_str().into(),
                "".into(),
                options,
                FieldTable::default(),
            )
            .await
            .context("reading the dead-letter queue")?;
        let mut payloads = Vec::new();
        while let Ok(Some(delivery)) =
            tokio::time::timeout(Duration::from_secs(2), consumer.next()).await
        {
            payloads.push(Bytes::from(delivery?.data));
        }
        Ok(payloads)
    }

    async fn count(&self, topic: &TopicSpec) -> Result<u64> {
        let group = topic.groups.first().context("a topic needs a group")?;
        let passive = QueueDeclareOptions {
            passive: true,
            ..QueueDeclareOptions::default()
        };
        let queue = self
            .channel
            .queue_declare(
                queue(&topic.name, group).as_str().into(),
                passive,
                FieldTable::default(),
            )
            .await?;
        Ok(u64::from(queue.message_count()))
    }

    async fn remove(&self, topic: &TopicSpec) -> Result<()> {
        for group in &topic.groups {
            for name in [queue(&topic.name, group), dlq(&topic.name, group)] {
                self.channel
                    .queue_delete(name.as_str().into(), QueueDeleteOptions::default())
                    .await?;
            }
        }
        self.channel
            .exchange_delete(topic.name.as_str().into(), ExchangeDeleteOptions::default())
            .await?;
        Ok(())
    }
}
