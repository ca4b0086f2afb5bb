//! Consuming one mailroom group: `poll/batch` with a long poll, then `ack/batch` and
//! `nack/batch`, or both carried by the next `poll/batch`; or the consume stream.

use std::time::Instant;

use anyhow::{Context as _, Result};
use mailroom_client::{BatchNack, BatchPoll, DeliveryId, NackOptions, NackOutcome};

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
    /// Whether a round's acks and rejections ride on the next poll (`poll/batch` with
    /// `ack` and `nack`, one request and one transaction per round) instead of an
    /// `ack/batch` and a `nack/batch` of their own ([`MailroomShape::AckNext`]).
    ///
    /// [`MailroomShape::AckNext`]: super::MailroomShape::AckNext
    pub(super) fold: bool,
    /// The settlements held back for the next poll (or [`LogConsumer::finish`]).
    pub(super) pending: Held,
}

/// What a folding consumer holds back for its next poll, and the outcomes of rejections
/// that poll answered, not yet handed to the workload.
#[derive(Debug, Default)]
pub(super) struct Held {
    acks: Vec<DeliveryId>,
    fails: Vec<DeliveryId>,
    outcomes: Vec<FailOutcome>,
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
    /// the first poll carries the settlements held back (with none, a poll is a plain
    /// poll).
    async fn poll_round(&mut self, max: u32) -> Result<Vec<Received<DeliveryId>>> {
        let deadline = Instant::now() + IDLE_WAIT;
        let mut acks = std::mem::take(&mut self.pending.acks);
        let mut fails = std::mem::take(&mut self.pending.fails);
        loop {
            let deliveries = self.settling_poll(max, &acks, &fails).await?;
            acks.clear();
            fails.clear();
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

    /// A poll that first nacks `fails` and acks `acks`; keeps the nacks' outcomes for the
    /// workload.
    async fn settling_poll(
        &mut self,
        max: u32,
        acks: &[DeliveryId],
        fails: &[DeliveryId],
    ) -> Result<Vec<mailroom_client::Delivery>> {
        let options = NackOptions::default();
        let nack = BatchNack {
            deliveries: fails,
            options: &options,
        };
        let settled = self
            .client
            .pick()
            .settle_then_poll_batch(&self.topic, &self.group, &poll_request(max, acks), &nack)
            .await?;
        every_item("poll_batch ack", acks, settled.acked)?;
        let outcomes = every_item("poll_batch nack", fails, settled.nacked)?;
        for outcome in outcomes {
            self.pending.outcomes.push(fail_outcome(outcome)?);
        }
        Ok(settled.deliveries)
    }

    /// Acks `acks` in one `ack/batch`, if any.
    async fn acked(&self, acks: &[DeliveryId]) -> Result<()> {
        if acks.is_empty() {
            return Ok(());
        }
        let results = (self.client.pick())
            .ack_batch(&self.topic, &self.group, acks)
            .await?;
        every_item("ack_batch", acks, results)?;
        Ok(())
    }

    /// Nacks `fails` in one `nack/batch`, if any, and answers their outcomes.
    async fn nacked(&self, fails: &[DeliveryId]) -> Result<Vec<FailOutcome>> {
        if fails.is_empty() {
            return Ok(Vec::new());
        }
        let results = (self.client.pick())
            .nack_batch(&self.topic, &self.group, fails, &NackOptions::default())
            .await?;
        every_item("nack_batch", fails, results)?
            .into_iter()
            .map(fail_outcome)
            .collect()
    }
}

/// A nack's outcome as the workload counts it.
fn fail_outcome(outcome: NackOutcome) -> Result<FailOutcome> {
    match outcome {
        NackOutcome::Retry => Ok(FailOutcome::Retry),
        NackOutcome::DeadLettered => Ok(FailOutcome::DeadLettered),
        // A plain nack counts a failure; the server answers `released` only to a
        // release, which the bench never sends.
        NackOutcome::Released => anyhow::bail!("a plain nack was answered as a release"),
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
        if self.fold {
            self.pending.acks.extend(acks);
            self.pending.fails.extend(fails);
            return Ok(std::mem::take(&mut self.pending.outcomes));
        }
        self.acked(&acks).await?;
        self.nacked(&fails).await
    }

    async fn finish(&mut self) -> Result<Vec<FailOutcome>> {
        let acks = std::mem::take(&mut self.pending.acks);
        self.acked(&acks).await?;
        let fails = std::mem::take(&mut self.pending.fails);
        let mut outcomes = std::mem::take(&mut self.pending.outcomes);
        outcomes.extend(self.nacked(&fails).await?);
        Ok(outcomes)
    }
}
