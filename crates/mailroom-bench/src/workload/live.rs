//! Workload 5: live fan-out. One publisher, `subscribers` subscribers of which one never
//! reads, publishing at a fixed rate.
//!
//! Each reading subscriber checks that what it gets is in publish order with no duplicate
//! and no message that was never sent, and times each message from its publish stamp to
//! arrival. At the end the stalled subscriber starts reading, so the bench learns what the
//! broker still held for it, and whether the broker cut it off. Drops are allowed by every
//! system here (best effort), so they are reported per subscriber, not failed; where a
//! system reports its own delivered/dropped counts (mailroom, Redis `PUBLISH`), those must
//! add up exactly to what the subscribers received.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use hdrhistogram::Histogram;

use super::{probe_finish, probe_start, Measured};
use crate::ledger::Verdict;
use crate::payload;
use crate::probe::Probe;
use crate::report::{latency_histogram, record_us, SubscriberCount};
use crate::systems::{LiveSubscriber, LiveSystem};

/// How long a subscriber (and the drained stalled one) waits in silence, after publishing
/// ended, before it decides nothing more is coming.
pub const IDLE_AFTER_PUBLISH: Duration = Duration::from_secs(2);

/// The live workload's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveParams {
    /// Messages to publish.
    pub count: u64,
    /// Bytes per message.
    pub payload_bytes: usize,
    /// Subscribers in total, the stalled one included.
    pub subscribers: usize,
    /// Publish rate in messages per second; 0 publishes as fast as the broker answers.
    pub rate_per_s: u64,
    /// Per-subscriber mailbox, where the system has one (mailroom).
    pub mailbox: u64,
}

struct SubscriberRun {
    received: u64,
    latency: Histogram<u64>,
    problems: Vec<String>,
    ended: bool,
    last_arrival: Option<Instant>,
}

/// Runs the live fan-out workload on channel `channel`.
///
/// # Errors
/// When a subscription or a publish fails.
pub async fn run<S: LiveSystem>(
    system: &S,
    channel: &str,
    params: LiveParams,
    probe: Option<Probe>,
) -> Result<Measured> {
    anyhow::ensure!(
        params.subscribers >= 2,
        "need a stalled and at least one reading subscriber"
    );
    system
        .prepare(channel, params.subscribers as u64, params.mailbox)
        .await?;
    let published = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for index in 0..params.subscribers - 1 {
        let subscriber = system
            .subscribe(channel)
            .await
            .with_context(|| format!("subscriber {index}"))?;
        readers.push(tokio::spawn(read(
            subscriber,
            params.count,
            published.clone(),
        )));
    }
    let stalled = system
        .subscribe_stalled(channel)
        .await
        .context("stalled subscriber")?;

    let span = probe_start(probe).await?;
    let started = Instant::now();
    let (reported_delivered, reported_dropped, counted) =
        publish_paced(system, channel, params, started).await?;
    system.flush().await?;
    let publish_seconds = started.elapsed().as_secs_f64();
    published.store(true, Ordering::Release);

    let mut latency = latency_histogram();
    let mut subscribers = Vec::new();
    let mut problems = Vec::new();
    let mut last_arrival = started;
    for (index, reader) in readers.into_iter().enumerate() {
        let run = reader.await.context("subscriber task panicked")??;
        last_arrival = last_arrival.max(run.last_arrival.unwrap_or(started));
        latency.add(&run.latency)?;
        problems.extend(
            run.problems
                .into_iter()
                .map(|problem| format!("subscriber {index}: {problem}")),
        );
        subscribers.push(SubscriberCount {
            delivered: run.received,
            dropped: params.count - run.received.min(params.count),
            stalled: false,
            disconnected: run.ended,
        });
    }
    // Throughput runs from the first publish to the last arrival: the idle wait that tells a
    // reader nothing more is coming is not part of it.
    let elapsed = last_arrival.duration_since(started);
    let usage = probe_finish(span).await?;
    let (stalled_got, stalled_cut) = system.drain_stalled(stalled, IDLE_AFTER_PUBLISH).await?;
    subscribers.push(SubscriberCount {
        delivered: stalled_got,
        dropped: params.count - stalled_got.min(params.count),
        stalled: true,
        disconnected: stalled_cut,
    });
    let received_by_readers: u64 = subscribers
        .iter()
        .filter(|s| !s.stalled)
        .map(|s| s.delivered)
        .sum();
    let received_all = received_by_readers + stalled_got;
    let mut notes = vec![format!(
        "published {} msgs in {publish_seconds:.2} s ({:.0}/s)",
        params.count,
        params.count as f64 / publish_seconds.max(1e-9)
    )];
    if counted {
        notes.push(format!("system reported delivered {reported_delivered}, dropped {reported_dropped}; subscribers received {received_all}"));
        if !stalled_cut && reported_delivered != received_all {
            problems.push(format!(
                "system reported {reported_delivered} deliveries but subscribers received {received_all}"
            ));
        }
    }
    let cut = subscribers
        .iter()
        .filter(|s| !s.stalled && s.disconnected)
        .count();
    if cut > 0 {
        notes.push(format!("{cut} reading subscribers were disconnected"));
    }
    Ok(Measured {
        messages: received_by_readers,
        elapsed,
        latency,
        verdict: Verdict::from_problems(problems),
        subscribers,
        notes,
        usage,
    })
}

/// Publishes `count` messages at `rate_per_s`; returns the summed (delivered, dropped) the
/// system reported and whether it reported any.
async fn publish_paced<S: LiveSystem>(
    system: &S,
    channel: &str,
    params: LiveParams,
    started: Instant,
) -> Result<(u64, u64, bool)> {
    let (mut delivered, mut dropped, mut counted) = (0, 0, false);
    for seq in 0..params.count {
        if params.rate_per_s > 0 {
            let due = started + Duration::from_secs_f64(seq as f64 / params.rate_per_s as f64);
            tokio::time::sleep_until(due.into()).await;
        }
        if let Some((d, x)) = system
            .publish(channel, payload::encode(seq, params.payload_bytes))
            .await?
        {
            delivered += d;
            dropped += x;
            counted = true;
        }
    }
    Ok((delivered, dropped, counted))
}

/// One reading subscriber: order and duplicate checks, latency from the payload's stamp.
async fn read<L: LiveSubscriber>(
    mut subscriber: L,
    count: u64,
    published: Arc<AtomicBool>,
) -> Result<SubscriberRun> {
    let mut run = SubscriberRun {
        received: 0,
        latency: latency_histogram(),
        problems: Vec::new(),
        ended: false,
        last_arrival: None,
    };
    let mut next_seq_min = 0u64;
    let mut problems_total = 0u64;
    while run.received < count {
        let message = match tokio::time::timeout(IDLE_AFTER_PUBLISH, subscriber.next()).await {
            Err(_idle) if published.load(Ordering::Acquire) => break,
            Err(_idle) => continue,
            Ok(Ok(None)) | Ok(Err(_)) => {
                run.ended = true;
                break;
            }
            Ok(Ok(Some(message))) => message,
        };
        let arrived_ns = payload::now_ns();
        match payload::decode(&message) {
            Ok(stamp) if stamp.seq >= count => {
                run.problems.push(format!("phantom message {}", stamp.seq))
            }
            Ok(stamp) if stamp.seq < next_seq_min => {
                run.problems.push(format!(
                    "message {} arrived after {} (duplicate or reordered)",
                    stamp.seq,
                    next_seq_min - 1
                ));
            }
            Ok(stamp) => {
                next_seq_min = stamp.seq + 1;
                run.received += 1;
                run.last_arrival = Some(Instant::now());
                record_us(
                    &mut run.latency,
                    arrived_ns.saturating_sub(stamp.sent_ns) / 1000,
                );
            }
            Err(error) => run.problems.push(format!("corrupt message: {error}")),
        }
    }
    problems_total += run.problems.len() as u64;
    if run.problems.len() > crate::ledger::PROBLEM_EXAMPLES_MAX {
        run.problems.truncate(crate::ledger::PROBLEM_EXAMPLES_MAX);
        run.problems
            .push(format!("{problems_total} problems in total"));
    }
    Ok(run)
}
