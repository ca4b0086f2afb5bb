//! Workloads 2, 3 and 4: drain a log that was filled beforehand, one consumer per group.
//!
//! - `consume`: one group, every message acked.
//! - `retry`: one group; the failure plan rejects 10% of messages on every delivery, so
//!   each must be delivered exactly `max_attempts` times and dead-lettered exactly once.
//! - `fanout`: several groups read the same log at once, each acking everything.
//!
//! The fill (batched publishing) is not timed. The timed phase ends when every group has
//! finished every message, or a consumer saw nothing for its idle wait (then the verdict
//! lists what was lost). Throughput is finished messages (summed over groups) per second.

use std::time::Instant;

use anyhow::{Context as _, Result};
use bytes::Bytes;
use hdrhistogram::Histogram;

use super::{probe_finish, probe_start, Measured};
use crate::ledger::{FailurePlan, GroupLedger, Verdict};
use crate::payload;
use crate::probe::Probe;
use crate::report::{latency_histogram, record_us};
use crate::systems::{FailOutcome, LogConsumer, LogPublisher, LogSystem, Received, TopicSpec};

/// Messages per publish call while filling the log (untimed).
pub const FILL_BATCH: usize = 500;

/// The consume workloads' settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsumeParams {
    /// Messages in the log.
    pub count: u64,
    /// Bytes per message.
    pub payload_bytes: usize,
    /// Which messages the consumers reject.
    pub plan: FailurePlan,
}

/// Fills a fresh topic, then drains it with one consumer per group.
///
/// # Errors
/// When the system cannot be set up or a call fails.
pub async fn run<S: LogSystem>(
    system: &S,
    topic: &TopicSpec,
    params: ConsumeParams,
    probe: Option<Probe>,
) -> Result<Measured> {
    system.prepare(topic).await?;
    fill(system, topic, params).await?;
    let mut consumers = Vec::new();
    for group in &topic.groups {
        consumers.push((group.clone(), system.consumer(topic, group).await?));
    }
    let span = probe_start(probe)?;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (group, consumer) in consumers {
        let ledger = GroupLedger::new(&group, params.count, params.plan, topic.max_attempts);
        tasks.push(tokio::spawn(drain(consumer, ledger, topic.max_attempts)));
    }
    let mut latency = latency_histogram();
    let mut ledgers = Vec::new();
    let mut problems = Vec::new();
    for task in tasks {
        let (ledger, histogram, trouble) = task.await.context("consumer task panicked")??;
        latency.add(histogram)?;
        problems.extend(trouble);
        ledgers.push(ledger);
    }
    let elapsed = started.elapsed();
    let usage = probe_finish(span)?;
    let finished: u64 = ledgers.iter().map(GroupLedger::finished).sum();
    let deliveries: u64 = ledgers.iter().map(GroupLedger::deliveries_total).sum();

    let mut verdict = Verdict::from_problems(problems);
    let expected_dead = params.plan.failing_count(params.count);
    let mut dead_total = 0;
    for ledger in &ledgers {
        let payloads = system
            .dead_letters(topic, ledger.group(), expected_dead)
            .await?;
        dead_total += payloads.len();
        verdict = verdict.and(ledger.verdict(&decode_all(&payloads)));
    }
    system.remove(topic).await?;
    let mut notes = vec![format!(
        "{deliveries} deliveries for {finished} finished messages"
    )];
    if expected_dead > 0 {
        notes.push(format!(
            "dead letters: {dead_total} found, {} expected",
            expected_dead * topic.groups.len() as u64
        ));
    }
    Ok(Measured {
        messages: finished,
        elapsed,
        latency,
        verdict,
        subscribers: Vec::new(),
        notes,
        usage,
    })
}

fn decode_all(payloads: &[Bytes]) -> Vec<u64> {
    // A corrupt dead letter becomes an impossible sequence number, which the verdict
    // reports as dead-lettered by mistake.
    payloads
        .iter()
        .map(|payload| payload::decode(payload).map_or(u64::MAX, |stamp| stamp.seq))
        .collect()
}

pub(crate) async fn fill<S: LogSystem>(
    system: &S,
    topic: &TopicSpec,
    params: ConsumeParams,
) -> Result<()> {
    let mut publisher = system.publisher(topic).await?;
    let mut seq = 0;
    while seq < params.count {
        let end = (seq + FILL_BATCH as u64).min(params.count);
        let batch: Vec<Bytes> = (seq..end)
            .map(|seq| payload::encode(seq, params.payload_bytes))
            .collect();
        publisher.publish(&batch).await.context("filling the log")?;
        seq = end;
    }
    let stored = system.count(topic).await?;
    anyhow::ensure!(
        stored == params.count,
        "filled {} messages but the topic holds {stored}",
        params.count
    );
    Ok(())
}

/// One group's consumer loop: deliver, decide from the plan, ack or reject.
async fn drain<C: LogConsumer>(
    mut consumer: C,
    mut ledger: GroupLedger,
    max_attempts: u32,
) -> Result<(GroupLedger, Histogram<u64>, Vec<String>)> {
    let mut latency = latency_histogram();
    let mut problems = Vec::new();
    while !ledger.is_done() {
        let asked = Instant::now();
        let Some(Received {
            payload,
            attempt,
            handle,
        }) = consumer.next().await?
        else {
            problems.push(format!(
                "{}: consumer idle with {} of its messages unfinished",
                ledger.group(),
                ledger.unfinished()
            ));
            break;
        };
        let seq = match payload::decode(&payload) {
            Ok(stamp) => Some(stamp.seq),
            Err(_) => {
                ledger.corrupt();
                None
            }
        };
        match seq.and_then(|seq| ledger.delivered(seq, attempt).map(|reject| (seq, reject))) {
            Some((_, true)) => {
                let outcome = consumer.fail(handle).await?;
                let expected = if attempt >= max_attempts {
                    FailOutcome::DeadLettered
                } else {
                    FailOutcome::Retry
                };
                if outcome != expected {
                    problems.push(format!(
                        "{}: attempt {attempt} rejected gave {outcome:?}",
                        ledger.group()
                    ));
                }
            }
            Some((seq, false)) => {
                consumer.ack(handle).await?;
                ledger.acked(seq);
            }
            // Not a message of this run: ack it so it does not come back, and let the
            // verdict report it.
            None => consumer.ack(handle).await?,
        }
        record_us(
            &mut latency,
            u64::try_from(asked.elapsed().as_micros()).unwrap_or(u64::MAX),
        );
    }
    Ok((ledger, latency, problems))
}
