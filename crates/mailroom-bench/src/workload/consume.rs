//! Workloads 2, 3 and 4: drain a log that was filled beforehand, one consumer per group.
//!
//! - `consume`: one group, every message acked.
//! - `retry`: one group; the failure plan rejects 10% of messages on every delivery, so
//!   each must be delivered exactly `max_attempts` times and dead-lettered exactly once.
//! - `fanout`: several groups read the same log at once, each acking everything.
//!
//! A consumer works in rounds: it takes what one round trip brings (up to the prefetch;
//! see [`LogConsumer::next_batch`]), decides each delivery from the failure plan, and
//! settles the round (see [`LogConsumer::settle`]); each rejection's outcome (retry or
//! dead letter) is checked against its attempt. The fill (batched publishing) is not timed. The timed phase ends when every group has
//! finished every message, or a consumer saw nothing for its idle wait (then the verdict
//! lists what was lost). Throughput is finished messages (summed over groups) per second.

use std::collections::VecDeque;
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
    let span = probe_start(probe.map(Probe::after_writes)).await?;
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
    let usage = probe_finish(span).await?;
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

/// One group's consumer loop, a round at a time: take a batch, decide each delivery from
/// the plan, settle the batch (acks, then rejections), check each rejection's outcome.
async fn drain<C: LogConsumer>(
    mut consumer: C,
    mut ledger: GroupLedger,
    max_attempts: u32,
) -> Result<(GroupLedger, Histogram<u64>, Vec<String>)> {
    let mut latency = latency_histogram();
    let mut problems = Vec::new();
    // Rejections whose outcomes have not come back yet, oldest first: a consumer that
    // folds its settlements into its next poll answers them a round later.
    let mut rejected = VecDeque::new();
    while !ledger.is_done() {
        let asked = Instant::now();
        let batch = consumer.next_batch().await?;
        if batch.is_empty() {
            problems.push(format!(
                "{}: consumer idle with {} of its messages unfinished",
                ledger.group(),
                ledger.unfinished()
            ));
            break;
        }
        let size = batch.len();
        let round = decide(&mut ledger, batch, max_attempts);
        let outcomes = consumer.settle(round.acks, round.fails).await?;
        rejected.extend(round.expected);
        check_outcomes(&mut problems, ledger.group(), &mut rejected, outcomes);
        for seq in round.acked {
            ledger.acked(seq);
        }
        let micros = u64::try_from(asked.elapsed().as_micros()).unwrap_or(u64::MAX);
        for _ in 0..size {
            record_us(&mut latency, micros);
        }
    }
    // Inside the timed phase: a consumer that folds its settlements into its next poll
    // sends the last round's here.
    let outcomes = consumer.finish().await?;
    check_outcomes(&mut problems, ledger.group(), &mut rejected, outcomes);
    if !rejected.is_empty() {
        problems.push(format!(
            "{}: {} rejections never answered",
            ledger.group(),
            rejected.len()
        ));
    }
    Ok((ledger, latency, problems))
}

/// Checks `outcomes` against the oldest rejections still unanswered (each rejection's
/// attempt and the outcome it must have), taking them off `rejected`.
fn check_outcomes(
    problems: &mut Vec<String>,
    group: &str,
    rejected: &mut VecDeque<(u32, FailOutcome)>,
    outcomes: Vec<FailOutcome>,
) {
    if outcomes.len() > rejected.len() {
        problems.push(format!(
            "{group}: {} rejection outcomes for {} rejections unanswered",
            outcomes.len(),
            rejected.len()
        ));
    }
    for (outcome, (attempt, expected)) in outcomes
        .iter()
        .zip(rejected.drain(..outcomes.len().min(rejected.len())))
    {
        if *outcome != expected {
            problems.push(format!(
                "{group}: attempt {attempt} rejected gave {outcome:?}"
            ));
        }
    }
}

/// What one round decided: the handles to ack and to reject, the sequence numbers the acks
/// finish, and for each rejection its attempt and the outcome it must have.
struct Round<H> {
    acks: Vec<H>,
    fails: Vec<H>,
    acked: Vec<u64>,
    expected: Vec<(u32, FailOutcome)>,
}

fn decide<H>(ledger: &mut GroupLedger, batch: Vec<Received<H>>, max_attempts: u32) -> Round<H> {
    let mut round = Round {
        acks: Vec::with_capacity(batch.len()),
        fails: Vec::new(),
        acked: Vec::with_capacity(batch.len()),
        expected: Vec::new(),
    };
    for Received {
        payload,
        attempt,
        handle,
    } in batch
    {
        let seq = match payload::decode(&payload) {
            Ok(stamp) => Some(stamp.seq),
            Err(_) => {
                ledger.corrupt();
                None
            }
        };
        match seq.and_then(|seq| ledger.delivered(seq, attempt).map(|reject| (seq, reject))) {
            Some((_, true)) => {
                let expected = if attempt >= max_attempts {
                    FailOutcome::DeadLettered
                } else {
                    FailOutcome::Retry
                };
                round.fails.push(handle);
                round.expected.push((attempt, expected));
            }
            Some((seq, false)) => {
                round.acks.push(handle);
                round.acked.push(seq);
            }
            // Not a message of this run: ack it so it does not come back, and let the
            // verdict report it.
            None => round.acks.push(handle),
        }
    }
    round
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delivery(handle: u32, payload: Bytes, attempt: u32) -> Received<u32> {
        Received {
            payload,
            attempt,
            handle,
        }
    }

    // Proves a round sorts its deliveries by the plan: planned failures are rejected with
    // the outcome their attempt calls for (retry before the last attempt, dead letter on
    // it), the rest are acked, and phantoms and corrupt payloads are acked without
    // finishing any message.
    #[test]
    fn decide_splits_a_round_by_the_plan() {
        let mut ledger = GroupLedger::new("g0", 20, FailurePlan::EveryNth(10), 3);
        ledger.delivered(10, 1);
        ledger.delivered(10, 2);
        let batch = vec![
            delivery(100, payload::encode(0, 64), 1),
            delivery(101, payload::encode(1, 64), 1),
            delivery(102, payload::encode(10, 64), 3),
            delivery(103, payload::encode(99, 64), 1),
            delivery(104, Bytes::from_static(b"not a stamp"), 1),
        ];
        let round = decide(&mut ledger, batch, 3);
        assert_eq!(round.acks, vec![101, 103, 104]);
        assert_eq!(round.acked, vec![1]);
        assert_eq!(round.fails, vec![100, 102]);
        assert_eq!(
            round.expected,
            vec![(1, FailOutcome::Retry), (3, FailOutcome::DeadLettered)]
        );
    }
}
