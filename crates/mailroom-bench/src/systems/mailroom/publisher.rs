//! Publishing to mailroom: the single and batch endpoints, and the publish stream.

use anyhow::{Context as _, Result};
use bytes::Bytes;
use hdrhistogram::Histogram;
use mailroom_client::Confirmation;

use super::messages::{refill, MessageMetadata};
use super::Brokers;
use crate::systems::LogPublisher;
use crate::workload::publish::SendTimes;

/// Publishes with the single or the batch endpoint.
#[derive(Debug)]
pub struct MailroomPublisher {
    pub(super) client: Brokers,
    pub(super) topic: String,
    pub(super) metadata: MessageMetadata,
    /// The messages of the last batch, kept so that the next one only replaces their
    /// payloads (and per-message keys) instead of building each key and header anew:
    /// the bare variant builds nothing per message either, and the client runs on the
    /// server's cores.
    pub(super) messages: Vec<mailroom_client::NewMessage>,
}

impl LogPublisher for MailroomPublisher {
    async fn publish(&mut self, payloads: &[Bytes]) -> Result<()> {
        if self.metadata != MessageMetadata::None {
            refill(&mut self.messages, self.metadata, payloads);
            let published = self
                .client
                .pick()
                .publish_once(&self.topic, &self.messages)
                .await?;
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
            self.client
                .pick()
                .publish(&self.topic, payload.clone())
                .await?;
        } else {
            let offsets = self
                .client
                .pick()
                .publish_batch(&self.topic, payloads)
                .await?;
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
            .pick()
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
