//! Issue 7's workload: one group drains a log filled beforehand with a window of `W`
//! deliveries in flight at once, every message acked.
//!
//! Each system does it the way its users would (see [`WindowSystem`]):
//! - mailroom: the group is created with `max_in_flight = W`; ONE consumer loops
//!   `poll_batch(max = W)` (a long poll) → one `ack_batch` of what it got, every item of
//!   which must succeed. The older shape, `W` consumer tasks each with its own consumer
//!   name looping `poll_as` → `ack` over one shared client, runs with
//!   `--mailroom-shape tasks` and is labelled as such. With `--mailroom-shape ack-next`
//!   the consumer acks each round inside its next poll (`poll/batch` with `ack`): one
//!   request and one sync per round, like NATS JetStream's AckNext;
//! - Redis Streams: one consumer on one connection loops `XREADGROUP COUNT W` → one `XACK`
//!   of the ids it got, so `W` entries are in flight per round trip. With
//!   `--redis-shape pipelined` each round's `XACK` goes out pipelined with the next
//!   `XREADGROUP`, one round trip per round, the fair peer of mailroom's ack-next.
//!
//! A worker that acks with its next take ([`WindowWorker::acks_with_take`]) has its
//! deliveries counted as acked only once that take returned, and the loop ends with one
//! last take that carries the final acks.
//!
//! The fill is not timed. The timed phase ends when every message is acked, or when no
//! worker made progress for its idle wait (then the verdict lists what was lost). The
//! correctness check is the shared [`GroupLedger`]: every message delivered once, acked
//! once, with attempt 1. Latency is per delivery: from asking for the batch it came in to
//! the return of the ack that covered it.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use hdrhistogram::Histogram;

use super::consume::{fill, ConsumeParams};
use super::{probe_finish, probe_start, Measured};
use crate::ledger::{FailurePlan, GroupLedger, Verdict};
use crate::payload;
use crate::probe::Probe;
use crate::report::{latency_histogram, record_us};
use crate::systems::{LogSystem, Received, TopicSpec};

/// The largest window the bench asks for.
pub const WINDOW_MAX: u32 = 4096;

/// How long a worker may see no delivery at all before it reports the rest as lost.
pub const IDLE_WAIT: Duration = Duration::from_secs(5);

/// The pause after an empty poll that was itself after an empty poll (the window was full
/// or the log drained); the first empty poll is retried at once.
pub const EMPTY_POLL_PAUSE: Duration = Duration::from_millis(1);

/// The windowed workload's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParallelParams {
    /// Messages in the log.
    pub count: u64,
    /// Bytes per message.
    pub payload_bytes: usize,
    /// Deliveries in flight at once (W), `1..=WINDOW_MAX`.
    pub window: u32,
}

/// A log system that can drain one group with `W` deliveries in flight.
pub trait WindowSystem: LogSystem {
    /// One worker: a consumer task with its own identity (and connection where it has one).
    type Worker: WindowWorker;

    /// Creates the topic and its groups, each allowing `window` deliveries in flight.
    fn prepare_windowed(
        &self,
        topic: &TopicSpec,
        window: u32,
    ) -> impl Future<Output = Result<()>> + Send;

    /// The workers that together keep `window` deliveries of `group` in flight.
    fn workers(
        &self,
        topic: &TopicSpec,
        group: &str,
        window: u32,
    ) -> impl Future<Output = Result<Vec<Self::Worker>>> + Send;
}

/// One consumer of a windowed group.
pub trait WindowWorker: Send + 'static {
    /// Identifies a delivery to ack.
    type Handle: Send + 'static;

    /// Takes the next batch of deliveries (up to `W`; mailroom's tasks shape: at most
    /// one); empty when none is available now.
    fn take(&mut self) -> impl Future<Output = Result<Vec<Received<Self::Handle>>>> + Send;

    /// Acks every delivery of a batch (mailroom: one `ack_batch`, or one `ack` per
    /// delivery in the tasks shape; Redis: one `XACK`).
    fn ack_all(&mut self, handles: Vec<Self::Handle>) -> impl Future<Output = Result<()>> + Send;

    /// Whether this worker acks a batch with its next take ([`ack_then_take`]) rather
    /// than with a separate [`ack_all`].
    ///
    /// [`ack_then_take`]: WindowWorker::ack_then_take
    /// [`ack_all`]: WindowWorker::ack_all
    fn acks_with_take(&self) -> bool {
        false
    }

    /// Acks every delivery of `handles` (all must succeed) and takes the next batch, in one
    /// round trip where the system allows it (mailroom: `poll/batch` with `ack`; Redis:
    /// `XACK` pipelined with `XREADGROUP`). By default: [`ack_all`], then [`take`].
    ///
    /// [`ack_all`]: WindowWorker::ack_all
    /// [`take`]: WindowWorker::take
    fn ack_then_take(
        &mut self,
        handles: Vec<Self::Handle>,
    ) -> impl Future<Output = Result<Vec<Received<Self::Handle>>>> + Send {
        async move {
            if !handles.is_empty() {
                self.ack_all(handles).await?;
            }
            self.take().await
        }
    }
}

/// Fills a fresh topic, then drains its one group with `window` deliveries in flight.
///
/// # Errors
/// When the system cannot be set up or a call fails.
pub async fn run<S: WindowSystem>(
    system: &S,
    topic: &TopicSpec,
    params: ParallelParams,
    probe: Option<Probe>,
) -> Result<Measured> {
    anyhow::ensure!(
        (1..=WINDOW_MAX).contains(&params.window),
        "window {} is outside 1..={WINDOW_MAX}",
        params.window
    );
    let group = topic.groups.first().context("the topic has no group")?;
    system.prepare_windowed(topic, params.window).await?;
    let fill_params = ConsumeParams {
        count: params.count,
        payload_bytes: params.payload_bytes,
        plan: FailurePlan::None,
    };
    fill(system, topic, fill_params).await?;
    let workers = system.workers(topic, group, params.window).await?;
    let worker_count = workers.len();
    let shared = Arc::new(Shared {
        ledger: Mutex::new(GroupLedger::new(group, params.count, FailurePlan::None, 1)),
        empty_polls: AtomicU64::new(0),
    });

    let span = probe_start(probe.map(Probe::after_writes)).await?;
    let started = Instant::now();
    let tasks: Vec<_> = workers
        .into_iter()
        .map(|worker| tokio::spawn(work(worker, Arc::clone(&shared))))
        .collect();
    let mut latency = latency_histogram();
    let mut problems = Vec::new();
    for task in tasks {
        let (histogram, trouble) = task.await.context("worker task panicked")??;
        latency.add(histogram)?;
        problems.extend(trouble);
    }
    let elapsed = started.elapsed();
    let usage = probe_finish(span).await?;
    system.remove(topic).await?;

    let ledger = shared
        .ledger
        .lock()
        .map_err(|_| anyhow::anyhow!("ledger poisoned"))?;
    problems.dedup();
    let verdict = Verdict::from_problems(problems).and(ledger.verdict(&[]));
    let notes = vec![
        format!(
            "{} deliveries for {} acked messages, {worker_count} worker(s)",
            ledger.deliveries_total(),
            ledger.finished()
        ),
        format!(
            "{} empty polls (window full or log drained)",
            shared.empty_polls.load(Ordering::Relaxed)
        ),
    ];
    Ok(Measured {
        messages: ledger.finished(),
        elapsed,
        latency,
        verdict,
        subscribers: Vec::new(),
        notes,
        usage,
    })
}

/// What the workers share: the one ledger of the group, and a count of empty polls.
struct Shared {
    ledger: Mutex<GroupLedger>,
    empty_polls: AtomicU64,
}

impl Shared {
    fn is_done(&self) -> bool {
        self.ledger.lock().map_or(true, |ledger| ledger.is_done())
    }

    fn unfinished(&self) -> u64 {
        self.ledger.lock().map_or(0, |ledger| ledger.unfinished())
    }
}

/// A round whose acks ride on the next take: what it delivered and when it was asked for.
struct Unacked<H> {
    handles: Vec<H>,
    seqs: Vec<u64>,
    asked: Instant,
}

/// One worker's loop: take a batch, record it, ack it all (or carry the acks into the
/// next take), until the group is done.
async fn work<W: WindowWorker>(
    mut worker: W,
    shared: Arc<Shared>,
) -> Result<(Histogram<u64>, Vec<String>)> {
    let mut latency = latency_histogram();
    let mut problems = Vec::new();
    let mut last_delivery = Instant::now();
    let mut empty_in_a_row = 0u32;
    let fused = worker.acks_with_take();
    let mut unacked: Option<Unacked<W::Handle>> = None;
    while !shared.is_done() {
        let asked = Instant::now();
        let batch = match unacked.take() {
            // The last round's acks finish the group: send them alone, since a take with
            // them would only wait (a long poll) for messages that will never come.
            Some(round) if shared.unfinished() <= round.seqs.len() as u64 => {
                worker.ack_all(round.handles).await?;
                acked(&shared, &mut latency, round.seqs, round.asked)?;
                continue;
            }
            Some(round) => {
                let batch = worker.ack_then_take(round.handles).await?;
                acked(&shared, &mut latency, round.seqs, round.asked)?;
                batch
            }
            None => worker.take().await?,
        };
        if batch.is_empty() {
            shared.empty_polls.fetch_add(1, Ordering::Relaxed);
            if last_delivery.elapsed() >= IDLE_WAIT {
                let unfinished = shared.unfinished();
                problems.push(format!(
                    "a worker was idle for {IDLE_WAIT:?} with {unfinished} messages unfinished"
                ));
                break;
            }
            empty_in_a_row += 1;
            if empty_in_a_row > 1 {
                tokio::time::sleep(EMPTY_POLL_PAUSE).await;
            }
            continue;
        }
        empty_in_a_row = 0;
        last_delivery = Instant::now();
        let (handles, seqs) = record(&shared, batch)?;
        if fused {
            unacked = Some(Unacked {
                handles,
                seqs,
                asked,
            });
        } else {
            worker.ack_all(handles).await?;
            acked(&shared, &mut latency, seqs, asked)?;
        }
    }
    Ok((latency, problems))
}

/// Records a batch's deliveries in the ledger; returns their handles and sequence numbers.
fn record<H>(shared: &Shared, batch: Vec<Received<H>>) -> Result<(Vec<H>, Vec<u64>)> {
    let mut seqs = Vec::with_capacity(batch.len());
    let mut handles = Vec::with_capacity(batch.len());
    let mut ledger = shared
        .ledger
        .lock()
        .map_err(|_| anyhow::anyhow!("ledger poisoned"))?;
    for received in batch {
        match payload::decode(&received.payload) {
            Ok(stamp) => {
                // Recorded even when out of range: the ledger lists it as a phantom.
                ledger.delivered(stamp.seq, received.attempt);
                seqs.push(stamp.seq);
            }
            Err(_) => ledger.corrupt(),
        }
        handles.push(received.handle);
    }
    Ok((handles, seqs))
}

/// Marks a round acked (its ack call returned) and records each of its deliveries'
/// latency: from asking for the round until now.
fn acked(
    shared: &Shared,
    latency: &mut Histogram<u64>,
    seqs: Vec<u64>,
    asked: Instant,
) -> Result<()> {
    let micros = u64::try_from(asked.elapsed().as_micros()).unwrap_or(u64::MAX);
    let mut ledger = shared
        .ledger
        .lock()
        .map_err(|_| anyhow::anyhow!("ledger poisoned"))?;
    for &seq in &seqs {
        ledger.acked(seq);
    }
    drop(ledger);
    for _ in 0..seqs.len() {
        record_us(latency, micros);
    }
    Ok(())
}
