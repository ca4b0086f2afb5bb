//! mailroom's consume stream as a [`LogConsumer`](crate::systems::LogConsumer): one WebSocket per group with a window
//! of the run's prefetch (`Client::consume_stream`), the like-for-like of Redis's
//! blocking `XREADGROUP`, RabbitMQ's `basic.consume` with a prefetch and NATS pull
//! consumers.
//!
//! A round takes the first delivery pushed (waiting up to [`IDLE_WAIT`]) and every one
//! already arrived after it, up to the prefetch; settling queues the round's acks and
//! nacks and sends them in one write (`feed_ack`/`feed_nack`, then one `flush`, as
//! Redis's round sends one `XACK` of all its ids), then reads until each is answered,
//! keeping the deliveries that arrive meanwhile for the next round.

use std::collections::VecDeque;

use anyhow::{Context as _, Result};
use futures_util::FutureExt as _;
use mailroom_client::{ConsumeStream, DeliveryId, NackOptions, SettledOutcome, StreamEvent};

use super::IDLE_WAIT;
use crate::systems::{FailOutcome, Received};

/// One group's stream and the deliveries pushed but not yet handed out.
#[derive(Debug)]
pub struct StreamedConsumer {
    stream: ConsumeStream,
    prefetch: usize,
    pushed: VecDeque<Received<DeliveryId>>,
}

impl StreamedConsumer {
    /// Wraps an open stream whose window is `prefetch`.
    pub fn new(stream: ConsumeStream, prefetch: usize) -> StreamedConsumer {
        StreamedConsumer {
            stream,
            prefetch,
            pushed: VecDeque::new(),
        }
    }

    /// The next round: at least one delivery (empty after [`IDLE_WAIT`] with none).
    pub async fn next_batch(&mut self) -> Result<Vec<Received<DeliveryId>>> {
        if self.pushed.is_empty() {
            match tokio::time::timeout(IDLE_WAIT, self.stream.next()).await {
                Err(_) => return Ok(Vec::new()),
                Ok(event) => self.take(event?)?,
            }
        }
        while self.pushed.len() < self.prefetch {
            match self.stream.next().now_or_never() {
                Some(event) => self.take(event?)?,
                None => break,
            }
        }
        let count = self.pushed.len().min(self.prefetch);
        Ok(self.pushed.drain(..count).collect())
    }

    /// The next delivery alone (`None` after [`IDLE_WAIT`] with none).
    pub async fn next_one(&mut self) -> Result<Option<Received<DeliveryId>>> {
        if self.pushed.is_empty() {
            match tokio::time::timeout(IDLE_WAIT, self.stream.next()).await {
                Err(_) => return Ok(None),
                Ok(event) => self.take(event?)?,
            }
        }
        Ok(self.pushed.pop_front())
    }

    /// Sends the acks, then the nacks; answers each nack's outcome once every
    /// settlement is answered.
    pub async fn settle(
        &mut self,
        acks: Vec<DeliveryId>,
        fails: Vec<DeliveryId>,
    ) -> Result<Vec<FailOutcome>> {
        for id in &acks {
            self.stream.feed_ack(*id).await?;
        }
        for id in &fails {
            self.stream.feed_nack(*id, &NackOptions::default()).await?;
        }
        self.stream.flush().await?;
        let mut answered = 0;
        let mut outcomes = Vec::with_capacity(fails.len());
        while answered < acks.len() + fails.len() {
            let event = self.stream.next().await?.context("the stream closed")?;
            let StreamEvent::Settled(answer) = event else {
                self.take(Some(event))?;
                continue;
            };
            let outcome = answer.outcome.map_err(|refusal| {
                anyhow::anyhow!(
                    "settlement {}: {}: {}",
                    answer.seq,
                    refusal.code,
                    refusal.message
                )
            })?;
            if answered >= acks.len() {
                outcomes.push(match outcome {
                    SettledOutcome::Retry => FailOutcome::Retry,
                    SettledOutcome::DeadLettered => FailOutcome::DeadLettered,
                    other => anyhow::bail!("a plain nack was answered {other:?}"),
                });
            } else {
                anyhow::ensure!(
                    outcome == SettledOutcome::Acked,
                    "an ack answered {outcome:?}"
                );
            }
            answered += 1;
        }
        Ok(outcomes)
    }

    fn take(&mut self, event: Option<StreamEvent>) -> Result<()> {
        match event.context("the stream closed")? {
            StreamEvent::Delivery(delivery) => {
                self.pushed.push_back(Received {
                    attempt: delivery.attempt,
                    handle: delivery.id(),
                    payload: delivery.payload,
                });
                Ok(())
            }
            StreamEvent::Settled(answer) => {
                anyhow::bail!("an answer to settlement {} with none sent", answer.seq)
            }
        }
    }
}
