//! Consuming one mailroom group: `poll/batch` with a long poll, then `ack/batch` and
//! `nack/batch`; or the consume stream.

use std::time::Instant;

use anyhow::{Context as _, Result};
use mailroom_client::{BatchPoll, DeliveryId, NackOptions, NackOutcome};

use super::stream::StreamedConsumer;
use super::{every_item, received, Brokers, IDLE_WAIT, LONG_POLL_WAIT_MS};
use crate::systems::{FailOutcome, LogConsumer, Received};

/// Polls and settles one group, up to `prefetch` deliveries per round.
#[derive(Debug)]
pub struct MailroomConsumer {
    pub(super) client: Brokers,
    pub(super) topic: String,
    pub(super) group: String,
    pub(super) prefetch: u32,
    /// The consume stream, when consuming over it.
    pub(super) stream: Option<Box<StreamedConsumer>>,
    /// Whether acks ride on the next poll (`poll/batch` with `ack`, one transaction per
    /// round) instead of an `ack/batch` of their own ([`MailroomShape::AckNext`]).
    ///
    /// [`MailroomShape::AckNext`]: super::MailroomShape::AckNext
    pub(super) fold_acks: bool,
    /// The acks held back for the next poll (or [`LogConsumer::finish`]).
    pub(super) pending: Vec<DeliveryId>,
}

/// A long poll of up to `max` deliveries by the group's unnamed consumer, acking `ack`
/// first.
pub(super) fn poll_request(max: u32, ack: &[DeliveryId]) -> BatchPoll<'_> {
    BatchPoll {
        consumer: None,
        max,
        wait_ms: LONG_POLL_WAIT_MS,
        ack,
    }
}

impl MailroomConsumer {
    /// Long-polls for up to `max` deliveries until some arrive or [`IDLE_WAIT`] has passed;
    /// the first poll carries the acks held back.
    async fn poll_round(&mut self, max: u32) -> Result<Vec<Received<DeliveryId>>> {
        let deadline = Instant::now() + IDLE_WAIT;
        let request = poll_request(max, &[]);
        let mut acks = std::mem::take(&mut self.pending);
        loop {
            let deliveries = if acks.is_empty() {
                self.client
                    .pick()
                    .poll_batch(&self.topic, &self.group, &request)
                    .await?
            } else {
                let acking = poll_request(max, &acks);
                let (acked, deliveries) = self
                    .client
                    .pick()
                    .ack_then_poll_batch(&self.topic, &self.group, &acking)
                    .await?;
                every_item("poll_batch ack", &acks, acked)?;
                acks.clear();
                deliveries
            };
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
        if self.fold_acks && fails.is_empty() {
            self.pending.extend(acks);
            return Ok(Vec::new());
        }
        let mut acks = acks;
        acks.splice(0..0, self.pending.drain(..));
        if !acks.is_empty() {
            let results = self
                .client
                .pick()
                .ack_batch(&self.topic, &self.group, &acks)
                .await?;
            every_item("ack_batch", &acks, results)?;
        }
        if fails.is_empty() {
            return Ok(Vec::new());
        }
        let results = self
            .client
            .pick()
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

    async fn finish(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let acks = std::mem::take(&mut self.pending);
        let results = self
            .client
            .pick()
            .ack_batch(&self.topic, &self.group, &acks)
            .await?;
        every_item("ack_batch", &acks, results)?;
        Ok(())
    }
}
