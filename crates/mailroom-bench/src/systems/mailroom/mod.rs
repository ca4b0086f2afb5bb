//! mailroom through `mailroom-client`: topics and groups over HTTP, channels over WebSocket.
//!
//! A group is created with `max_in_flight` = the run's prefetch P, and its one consumer
//! loops `poll_batch(max = P)` (a long poll: the server holds an empty poll up to
//! [`LONG_POLL_WAIT_MS`]) → decide → one `ack_batch` of the successes and one `nack_batch`
//! of the failures, so a round of up to P deliveries costs at most three requests (with
//! [`MailroomShape::AckNext`], one: both ride on the next poll). With P = 1 that is the
//! old shape: one poll and one ack per message. Every item of a batch ack
//! or nack must succeed; an item error fails the run. Publishing in batches uses the batch
//! endpoint; pipelined publishing uses the publish stream (`Client::publish_stream`).
//!
//! The `parallel` workload (one group, W in flight) has two shapes: [`MailroomShape::Batch`], ONE consumer
//! doing `poll_batch(max = W)` → one `ack_batch`, like the Redis side; and the older
//! [`MailroomShape::Tasks`], W named consumers each polling and acking one delivery at a
//! time ([`MailroomWorker`]), kept for comparison; and [`MailroomShape::AckNext`], the
//! batch consumer settling each round inside its next `poll/batch` (one request per round).

mod brokers;
mod consumer;
mod live;
mod messages;
mod publisher;
pub mod stream;
mod window;

use std::time::Duration;

use anyhow::{Context as _, Result};
use bytes::Bytes;
use mailroom_client::{BatchItemError, Client, Delivery, DeliveryId, GroupOptions};

pub use brokers::Brokers;
use consumer::Held;
pub use consumer::MailroomConsumer;
pub use live::MailroomSubscriber;
pub use messages::MessageMetadata;
pub use publisher::MailroomPublisher;
pub use window::{MailroomTask, MailroomWorker};

use super::{LogSystem, Received, TopicSpec};
use stream::StreamedConsumer;

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
    /// One consumer whose `poll_batch(max = W)` also settles the previous round
    /// (`poll/batch` with `ack` and `nack`): one request and one store call per round.
    AckNext,
}

/// A mailroom server (or several over one database).
#[derive(Debug, Clone)]
pub struct Mailroom {
    client: Brokers,
    shape: MailroomShape,
    metadata: MessageMetadata,
    /// Consume over the consume stream instead of `poll/batch` (consume, retry, fanout).
    streamed: bool,
    /// The groups' `max_in_flight` for the log workloads; `None`: the prefetch.
    group_window: Option<u32>,
}

impl Mailroom {
    /// A handle on the server at `url` (`http://127.0.0.1:PORT`), using `shape` for the
    /// `parallel` workload.
    ///
    /// # Errors
    /// When the URL is not an `http://` URL.
    pub fn new(url: &str, shape: MailroomShape) -> Result<Mailroom> {
        Mailroom::brokers(&[url], shape)
    }

    /// A handle on several brokers serving one database: every call goes to the next
    /// one in turn (see [`Brokers`]).
    ///
    /// # Errors
    /// When there is no URL or one is not an `http://` URL.
    pub fn brokers(urls: &[&str], shape: MailroomShape) -> Result<Mailroom> {
        Ok(Mailroom {
            client: Brokers::new(urls)?,
            shape,
            metadata: MessageMetadata::None,
            streamed: false,
            group_window: None,
        })
    }

    /// With `metadata` on every message published (the publish workload).
    pub fn with_metadata(mut self, metadata: MessageMetadata) -> Mailroom {
        self.metadata = metadata;
        self
    }

    /// With batch publishes written in `encoding`.
    pub fn with_batch_encoding(mut self, encoding: mailroom_client::BatchEncoding) -> Mailroom {
        self.client = self.client.with_batch_encoding(encoding);
        self
    }

    /// This handle, consuming the log workloads over the consume stream (one WebSocket
    /// per group, window = the prefetch) instead of `poll/batch` + `ack/batch`.
    pub fn streamed(mut self) -> Mailroom {
        self.streamed = true;
        self
    }

    /// This handle, creating the log workloads' groups with `max_in_flight` = `window`
    /// instead of the prefetch. The window counts offsets from the group's position, so
    /// a wider one lets a round go past a retry waiting there; the consumer still holds
    /// at most the prefetch unsettled.
    pub fn with_group_window(mut self, window: u32) -> Mailroom {
        self.group_window = Some(window);
        self
    }
}

/// Fails with the server's code and message if any item of a batch ack or nack failed, or
/// if the batch answered for a different number of deliveries than it was given.
pub(super) fn every_item<T>(
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

pub(super) fn received(delivery: Delivery) -> Received<DeliveryId> {
    Received {
        attempt: delivery.attempt,
        handle: delivery.id(),
        payload: delivery.payload,
    }
}

pub(super) async fn create_groups(
    client: &Client,
    topic: &TopicSpec,
    max_in_flight: u32,
) -> Result<()> {
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

impl LogSystem for Mailroom {
    type Publisher = MailroomPublisher;
    type Consumer = MailroomConsumer;

    async fn prepare(&self, topic: &TopicSpec) -> Result<()> {
        let prefetch = u32::try_from(topic.prefetch.clamp(1, crate::systems::PREFETCH_MAX))?;
        let window = self.group_window.unwrap_or(prefetch);
        create_groups(self.client.pick(), topic, window).await
    }

    async fn publisher(&self, topic: &TopicSpec) -> Result<MailroomPublisher> {
        Ok(MailroomPublisher {
            client: self.client.clone(),
            topic: topic.name.clone(),
            metadata: self.metadata,
            messages: Vec::new(),
        })
    }

    async fn consumer(&self, topic: &TopicSpec, group: &str) -> Result<MailroomConsumer> {
        let prefetch = u32::try_from(topic.prefetch.clamp(1, crate::systems::PREFETCH_MAX))?;
        let stream = match self.streamed {
            false => None,
            true => {
                let stream = self
                    .client
                    .pick()
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
            fold: self.shape == MailroomShape::AckNext,
            pending: Held::default(),
        })
    }

    async fn dead_letters(
        &self,
        topic: &TopicSpec,
        group: &str,
        _expected: u64,
    ) -> Result<Vec<Bytes>> {
        // mailroom dead-letters synchronously inside the nack, so there is nothing to wait for.
        let letters = self.client.pick().dead_letters(&topic.name, group).await?;
        Ok(letters.into_iter().map(|letter| letter.payload).collect())
    }

    async fn count(&self, topic: &TopicSpec) -> Result<u64> {
        let info = self.client.pick().topic_info(&topic.name).await?;
        Ok(info.end - info.start)
    }

    async fn remove(&self, _topic: &TopicSpec) -> Result<()> {
        // The API has no topic deletion; the run's data dir is thrown away by the script.
        Ok(())
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
