//! Workload 1: publish `count` messages, from one publisher or several, one message per
//! call or in batches (pipelines), each call waiting for the system's confirmation; or
//! pipelined: each publisher keeps a window of messages sent and not yet confirmed on its
//! one connection (see [`LogPublisher::publish_pipelined`]).
//!
//! Correctness: every call must be confirmed, and afterwards the topic must hold exactly
//! `count` messages (a lost or duplicated publish changes that number).

use std::collections::VecDeque;
use std::future::Future;
use std::time::Instant;

use anyhow::{Context as _, Result};
use bytes::Bytes;
use futures_util::stream::{FuturesOrdered, StreamExt as _};
use hdrhistogram::Histogram;

use super::{probe_finish, probe_start, Measured};
use crate::ledger::Verdict;
use crate::payload;
use crate::probe::Probe;
use crate::report::{latency_histogram, record_us};
use crate::systems::{LogPublisher, LogSystem, TopicSpec};

/// The publish workload's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PublishParams {
    /// Messages to publish in total.
    pub count: u64,
    /// Bytes per message.
    pub payload_bytes: usize,
    /// Concurrent publishers, each on its own connection.
    pub publishers: usize,
    /// Messages per publish call (1 = unbatched); ignored when pipelined.
    pub batch: usize,
    /// Pipelined: messages each publisher keeps sent and unconfirmed; `None`: one call
    /// at a time.
    pub window: Option<usize>,
}

/// The send times of a pipelined publisher's unconfirmed messages, oldest first.
#[derive(Debug, Default)]
pub struct SendTimes(VecDeque<Instant>);

impl SendTimes {
    /// Notes that one more message was sent now.
    pub fn sent(&mut self) {
        self.0.push_back(Instant::now());
    }

    /// Messages sent and not yet confirmed.
    pub fn outstanding(&self) -> usize {
        self.0.len()
    }

    /// The `count` oldest messages were confirmed now: records their latencies.
    ///
    /// # Errors
    /// When more messages are confirmed than are outstanding.
    pub fn confirmed(&mut self, count: usize, latency: &mut Histogram<u64>) -> Result<()> {
        anyhow::ensure!(
            count <= self.0.len(),
            "{count} confirmations for {} outstanding messages",
            self.0.len()
        );
        let now = Instant::now();
        for sent in self.0.drain(..count) {
            let micros = u64::try_from((now - sent).as_micros()).unwrap_or(u64::MAX);
            record_us(latency, micros);
        }
        Ok(())
    }
}

/// Sends each of `payloads` with `send`, keeping up to `window` of its futures in flight
/// and taking their answers in the order sent: `check` judges each answer, and its
/// latency from the send is recorded. For clients that pipeline by polling several
/// requests' futures at once (Redis's multiplexed connection, tokio-postgres).
///
/// # Errors
/// When `check` refuses an answer.
pub async fn in_order<F: Future>(
    payloads: Vec<Bytes>,
    window: usize,
    latency: &mut Histogram<u64>,
    mut send: impl FnMut(Bytes) -> F,
    mut check: impl FnMut(F::Output) -> Result<()>,
) -> Result<()> {
    let mut answers = FuturesOrdered::new();
    let mut times = SendTimes::default();
    for payload in payloads {
        while times.outstanding() >= window {
            check(answers.next().await.context("a message is in flight")?)?;
            times.confirmed(1, latency)?;
        }
        answers.push_back(send(payload));
        times.sent();
    }
    while let Some(answer) = answers.next().await {
        check(answer)?;
        times.confirmed(1, latency)?;
    }
    Ok(())
}

/// Runs the publish workload on a fresh topic.
///
/// # Errors
/// When the system cannot be set up or a publish fails.
pub async fn run<S: LogSystem>(
    system: &S,
    topic: &TopicSpec,
    params: PublishParams,
    probe: Option<Probe>,
) -> Result<Measured> {
    anyhow::ensure!(
        params.publishers > 0 && params.batch > 0 && params.window != Some(0),
        "publishers, batch and window must be > 0"
    );
    system.prepare(topic).await?;
    let mut publishers = Vec::with_capacity(params.publishers);
    for _ in 0..params.publishers {
        publishers.push(system.publisher(topic).await?);
    }
    let span = probe_start(probe).await?;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (index, publisher) in publishers.into_iter().enumerate() {
        tasks.push(tokio::spawn(publish_share(publisher, index as u64, params)));
    }
    let mut latency = latency_histogram();
    for task in tasks {
        latency.add(task.await.context("publisher task panicked")??)?;
    }
    let elapsed = started.elapsed();
    let usage = probe_finish(span).await?;
    let stored = system.count(topic).await?;
    let verdict = if stored == params.count {
        Verdict::from_problems(Vec::new())
    } else {
        Verdict::from_problems(vec![format!(
            "the topic holds {stored} messages after {} confirmed publishes",
            params.count
        )])
    };
    system.remove(topic).await?;
    Ok(Measured {
        messages: params.count,
        elapsed,
        latency,
        verdict,
        subscribers: Vec::new(),
        notes: Vec::new(),
        usage,
    })
}

/// Publisher `index` sends sequence numbers `index, index + publishers, ...`.
async fn publish_share<P: LogPublisher>(
    mut publisher: P,
    index: u64,
    params: PublishParams,
) -> Result<Histogram<u64>> {
    let mut latency = latency_histogram();
    let step = params.publishers as u64;
    if let Some(window) = params.window {
        let payloads = (index..params.count)
            .step_by(step as usize)
            .map(|seq| payload::encode(seq, params.payload_bytes))
            .collect();
        publisher
            .publish_pipelined(payloads, window, &mut latency)
            .await?;
        return Ok(latency);
    }
    let mut seqs = (index..params.count).step_by(step as usize).peekable();
    let mut batch: Vec<Bytes> = Vec::with_capacity(params.batch);
    while seqs.peek().is_some() {
        batch.clear();
        batch.extend(
            seqs.by_ref()
                .take(params.batch)
                .map(|seq| payload::encode(seq, params.payload_bytes)),
        );
        let sent = Instant::now();
        publisher.publish(&batch).await?;
        let micros = u64::try_from(sent.elapsed().as_micros()).unwrap_or(u64::MAX);
        for _ in 0..batch.len() {
            record_us(&mut latency, micros);
        }
    }
    Ok(latency)
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    // Proves a confirmation records one latency per message it covers, oldest first,
    // and that confirming more messages than are outstanding is an error, not a panic.
    #[test]
    fn send_times_record_one_latency_per_confirmed_message() {
        let mut times = SendTimes::default();
        let mut latency = latency_histogram();
        for _ in 0..3 {
            times.sent();
        }
        times.confirmed(2, &mut latency).unwrap();
        assert_eq!((times.outstanding(), latency.len()), (1, 2));
        assert!(times.confirmed(2, &mut latency).is_err());
        times.confirmed(1, &mut latency).unwrap();
        assert_eq!((times.outstanding(), latency.len()), (0, 3));
    }

    // Proves `in_order` never has more than the window unanswered when it sends, checks
    // every answer once and in the order sent though later sends finish first, and
    // records one latency per message.
    #[tokio::test]
    async fn in_order_keeps_the_window_and_checks_answers_in_send_order() {
        for window in [1, 3, 64] {
            let payloads: Vec<Bytes> = (0..40u8).map(|n| Bytes::from(vec![n])).collect();
            let (unanswered, checked) = (Cell::new(0usize), Cell::new(0u8));
            let send = |payload: Bytes| {
                assert!(unanswered.get() < window, "a send past the window");
                unanswered.set(unanswered.get() + 1);
                let n = payload[0];
                async move {
                    // Later sends finish sooner: answers come back out of order.
                    for _ in 0..(40 - n) % 5 {
                        tokio::task::yield_now().await;
                    }
                    n
                }
            };
            let check = |n: u8| {
                anyhow::ensure!(n == checked.get(), "answer {n} out of order");
                checked.set(n + 1);
                unanswered.set(unanswered.get() - 1);
                Ok(())
            };
            let mut latency = latency_histogram();
            in_order(payloads, window, &mut latency, send, check)
                .await
                .unwrap();
            assert_eq!((checked.get(), latency.len()), (40, 40));
        }
    }

    // Proves a refused answer ends the run with the check's error.
    #[tokio::test]
    async fn in_order_stops_at_a_refused_answer() {
        let payloads = vec![Bytes::from_static(b"a"); 5];
        let mut latency = latency_histogram();
        let refused = in_order(
            payloads,
            2,
            &mut latency,
            |_| async { 1 },
            |answer: u32| {
                anyhow::ensure!(answer == 0, "refused");
                Ok(())
            },
        )
        .await;
        assert_eq!(refused.unwrap_err().to_string(), "refused");
    }
}
