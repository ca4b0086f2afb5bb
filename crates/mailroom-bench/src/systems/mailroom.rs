//! mailroom through `mailroom-client`: topics and groups over HTTP, channels over WebSocket.
//!
//! A group hands out one delivery at a time (the seed's semantics: poll, then ack or nack
//! that exact attempt), so the consumer makes one poll and one ack round trip per message;
//! there is no prefetch to use. Publishing in batches uses the batch endpoint. The
//! `parallel` workload instead creates its group with `max_in_flight = W` and polls it with
//! W named consumers ([`MailroomWorker`]).

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use bytes::Bytes;
use mailroom_client::{
    Client, DeliveryId, GroupOptions, NackOutcome, StartPosition, SubscribeOptions, Subscription,
};

use super::{
    FailOutcome, LiveSubscriber, LiveSystem, LogConsumer, LogPublisher, LogSystem, Received,
    TopicSpec,
};
use crate::workload::parallel::{WindowSystem, WindowWorker};

/// How long a consumer keeps polling an empty group before it reports nothing left.
pub const IDLE_WAIT: Duration = Duration::from_secs(5);

/// The pause between polls of an empty group (the API has no long poll).
pub const EMPTY_POLL_PAUSE: Duration = Duration::from_millis(2);

/// The receive buffer of the stalled subscriber's socket, so it pushes back on the server
/// after a few messages instead of soaking megabytes into the kernel.
pub const STALLED_RECV_BUFFER_BYTES: u32 = 4096;

/// A mailroom server.
#[derive(Debug, Clone)]
pub struct Mailroom {
    client: Client,
}

impl Mailroom {
    /// A handle on the server at `url` (`http://127.0.0.1:PORT`).
    ///
    /// # Errors
    /// When the URL is not an `http://` URL.
    pub fn new(url: &str) -> Result<Mailroom> {
        Ok(Mailroom {
            client: Client::new(url)?,
        })
    }
}

/// Publishes with the single or the batch endpoint.
#[derive(Debug)]
pub struct MailroomPublisher {
    client: Client,
    topic: String,
}

/// Polls and acks one group.
#[derive(Debug)]
pub struct MailroomConsumer {
    client: Client,
    topic: String,
    group: String,
}

impl LogSystem for Mailroom {
    type Publisher = MailroomPublisher;
    type Consumer = MailroomConsumer;

    async fn prepare(&self, topic: &TopicSpec) -> Result<()> {
        self.client.create_topic(&topic.name).await?;
        for group in &topic.groups {
            self.client
                .create_group(
                    &topic.name,
                    group,
                    topic.max_attempts,
                    StartPosition::Earliest,
                )
                .await
                .with_context(|| format!("creating group {group}"))?;
        }
        Ok(())
    }

    async fn publisher(&self, topic: &TopicSpec) -> Result<MailroomPublisher> {
        Ok(MailroomPublisher {
            client: self.client.clone(),
            topic: topic.name.clone(),
        })
    }

    async fn consumer(&self, topic: &TopicSpec, group: &str) -> Result<MailroomConsumer> {
        Ok(MailroomConsumer {
            client: self.client.clone(),
            topic: topic.name.clone(),
            group: group.to_owned(),
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
}

impl LogConsumer for MailroomConsumer {
    type Handle = DeliveryId;

    async fn next(&mut self) -> Result<Option<Received<DeliveryId>>> {
        let deadline = Instant::now() + IDLE_WAIT;
        loop {
            if let Some(delivery) = self.client.poll(&self.topic, &self.group).await? {
                return Ok(Some(Received {
                    attempt: delivery.attempt,
                    handle: delivery.id(),
                    payload: delivery.payload,
                }));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            tokio::time::sleep(EMPTY_POLL_PAUSE).await;
        }
    }

    async fn ack(&mut self, handle: DeliveryId) -> Result<()> {
        self.client.ack(&self.topic, &self.group, handle).await?;
        Ok(())
    }

    async fn fail(&mut self, handle: DeliveryId) -> Result<FailOutcome> {
        Ok(
            match self.client.nack(&self.topic, &self.group, handle).await? {
                NackOutcome::Retry => FailOutcome::Retry,
                NackOutcome::DeadLettered => FailOutcome::DeadLettered,
                // A plain nack counts a failure; the server answers `released` only to a
                // release, which the bench never sends.
                NackOutcome::Released => anyhow::bail!("a plain nack was answered as a release"),
            },
        )
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

/// One of the `W` consumers of a windowed group: its own consumer name, polling with
/// `poll_as` and acking the one delivery it owns.
#[derive(Debug)]
pub struct MailroomWorker {
    client: Client,
    topic: String,
    group: String,
    name: String,
}

impl WindowSystem for Mailroom {
    type Worker = MailroomWorker;

    async fn prepare_windowed(&self, topic: &TopicSpec, window: u32) -> Result<()> {
        self.client.create_topic(&topic.name).await?;
        for group in &topic.groups {
            let mut options = GroupOptions::new(topic.max_attempts);
            options.max_in_flight = Some(window);
            self.client
                .create_group_with(&topic.name, group, &options)
                .await
                .with_context(|| format!("creating group {group} with max_in_flight {window}"))?;
        }
        Ok(())
    }

    async fn workers(
        &self,
        topic: &TopicSpec,
        group: &str,
        window: u32,
    ) -> Result<Vec<MailroomWorker>> {
        // One shared client: its pool opens one keep-alive connection per task that is
        // mid-call, and reuses it for the task's next call.
        Ok((0..window)
            .map(|index| MailroomWorker {
                client: self.client.clone(),
                topic: topic.name.clone(),
                group: group.to_owned(),
                name: format!("w{index}"),
            })
            .collect())
    }
}

impl WindowWorker for MailroomWorker {
    type Handle = DeliveryId;

    async fn take(&mut self) -> Result<Vec<Received<DeliveryId>>> {
        let delivery = self
            .client
            .poll_as(&self.topic, &self.group, &self.name)
            .await?;
        Ok(delivery
            .into_iter()
            .map(|delivery| Received {
                attempt: delivery.attempt,
                handle: delivery.id(),
                payload: delivery.payload,
            })
            .collect())
    }

    async fn ack_all(&mut self, handles: Vec<DeliveryId>) -> Result<()> {
        for handle in handles {
            self.client.ack(&self.topic, &self.group, handle).await?;
        }
        Ok(())
    }
}
