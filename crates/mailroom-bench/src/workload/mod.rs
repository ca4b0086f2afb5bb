//! The workloads of the peer comparison, each written once against the [`crate::systems`] traits.
//!
//! | workload | what is timed | latency measured |
//! |---|---|---|
//! | [`publish`] | publishing `count` messages (1 or many publishers, single or batched calls) | per message: the publish call until the system confirmed it at its durability |
//! | [`consume`] (`consume`, `retry`, `fanout`) | draining a log filled beforehand (untimed), one consumer per group, in rounds of up to the prefetch | per delivery: asking for its round's batch until the ack / rejection calls settling it returned |
//! | [`parallel`] (one group, W in flight) | draining a log filled beforehand (untimed), one group, W deliveries in flight (mailroom: `poll_batch(max = W)` + one `ack_batch`, or W consumers in the tasks shape; Redis: `XREADGROUP COUNT W` + one `XACK`) | per delivery: asking for its batch until the ack covering it returned |
//! | [`disk`] (the disk itself, strict publish row) | `count` payload-sized appends to a file, each followed by `fdatasync` | per message: write + sync |
//! | [`live`] | paced publishing to many subscribers, one stalled | per delivery: publish time (in the payload) to arrival at a reading subscriber |
//!
//! Every workload ends with its correctness verdict (see [`crate::ledger`]). The broker's
//! CPU time and peak RSS (see [`crate::probe`]) cover the timed phase only.

use std::time::Duration;

use hdrhistogram::Histogram;

use crate::ledger::Verdict;
use crate::probe::{Probe, ProbeError, Span, Usage};
use crate::report::SubscriberCount;

pub mod consume;
pub mod disk;
pub mod live;
pub mod parallel;
pub mod publish;

/// What a workload measured, before the broker's resource figures are added.
#[derive(Debug)]
pub struct Measured {
    /// Messages handled in the timed phase.
    pub messages: u64,
    /// Length of the timed phase.
    pub elapsed: Duration,
    /// Latency samples in microseconds.
    pub latency: Histogram<u64>,
    /// The correctness verdict.
    pub verdict: Verdict,
    /// Live fan-out only: per-subscriber counts.
    pub subscribers: Vec<SubscriberCount>,
    /// Facts a reader of the table needs.
    pub notes: Vec<String>,
    /// The broker's CPU and peak memory over the timed phase, when it was probed.
    pub usage: Option<Usage>,
}

/// Starts probing the broker (if there is a probe) at the start of a timed phase.
///
/// # Errors
/// When the broker's `/proc` files (or the database's statistics) cannot be read.
pub async fn probe_start(probe: Option<Probe>) -> Result<Option<Span>, ProbeError> {
    match probe {
        Some(probe) => Ok(Some(probe.start().await?)),
        None => Ok(None),
    }
}

/// Ends probing at the end of a timed phase.
///
/// # Errors
/// When the broker's `/proc` files (or the database's statistics) cannot be read.
pub async fn probe_finish(span: Option<Span>) -> Result<Option<Usage>, ProbeError> {
    match span {
        Some(span) => Ok(Some(span.finish().await?)),
        None => Ok(None),
    }
}
