//! One run's result: the figures, the broker's resource use and the correctness verdict,
//! written as one JSON line so a script can collect many runs into one table.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::database_probe::DatabaseUsage;
use crate::ledger::Verdict;

/// The slowest latency the histograms record, in microseconds (60 s); slower samples are
/// clamped to it rather than lost, so a stall still shows as a huge p99.9.
pub const LATENCY_US_MAX: u64 = 60_000_000;

/// A latency histogram in microseconds, 3 significant figures.
///
/// # Panics
/// Never: the bounds are constants hdrhistogram accepts.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_US_MAX, 3).expect("valid histogram bounds")
}

/// Records `micros` (clamped to the histogram's range).
pub fn record_us(histogram: &mut Histogram<u64>, micros: u64) {
    histogram.saturating_record(micros.clamp(1, LATENCY_US_MAX));
}

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Median.
    pub p50_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// 99.9th percentile.
    pub p999_us: u64,
    /// Largest sample.
    pub max_us: u64,
    /// How many samples.
    pub samples: u64,
}

impl Latency {
    /// The percentiles of `histogram`.
    pub fn of(histogram: &Histogram<u64>) -> Latency {
        Latency {
            p50_us: histogram.value_at_quantile(0.50),
            p99_us: histogram.value_at_quantile(0.99),
            p999_us: histogram.value_at_quantile(0.999),
            max_us: histogram.max(),
            samples: histogram.len(),
        }
    }
}

/// What one live-fan-out subscriber got.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubscriberCount {
    /// Messages it received.
    pub delivered: u64,
    /// Messages published while it was subscribed that it never received.
    pub dropped: u64,
    /// Whether this is the subscriber that never read.
    pub stalled: bool,
    /// Whether the broker cut its connection.
    pub disconnected: bool,
}

/// The result of one workload against one system.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// Workload name (`publish`, `consume`, `retry`, `fanout`, `live`).
    pub workload: String,
    /// The variant within the workload (payload size, publishers, batch, groups).
    pub variant: String,
    /// The system (`mailroom`, `redis`, `nats`, `rabbitmq`).
    pub system: String,
    /// The durability row this run belongs to (`strict`, `relaxed`, `memory`).
    pub durability: String,
    /// What that row means for this system, e.g. `appendfsync always`.
    pub durability_detail: String,
    /// Messages the timed phase handled (finished messages, or deliveries for `live`).
    pub messages: u64,
    /// Length of the timed phase.
    pub seconds: f64,
    /// `messages / seconds`.
    pub msgs_per_s: f64,
    /// What the latency figures time.
    pub latency_kind: String,
    /// Latency percentiles.
    pub latency: Latency,
    /// Broker CPU seconds during the timed phase.
    pub broker_cpu_s: Option<f64>,
    /// Broker peak RSS in bytes.
    pub broker_peak_rss_bytes: Option<u64>,
    /// Whether the peak RSS is this run's own (else: since the broker started).
    pub peak_rss_per_run: bool,
    /// The correctness verdict.
    pub verdict: Verdict,
    /// Live fan-out only: what each subscriber got.
    pub subscribers: Vec<SubscriberCount>,
    /// Anything a reader of the table must know about this run.
    pub notes: Vec<String>,
    /// What the database did during the timed phase, when it was probed.
    #[serde(default)]
    pub database: Option<DatabaseUsage>,
}

impl RunReport {
    /// Whether the run counts: it finished and its correctness check passed.
    pub fn passed(&self) -> bool {
        self.verdict.passed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves percentiles come out of the histogram and out-of-range samples are clamped,
    // not dropped.
    #[test]
    fn latency_percentiles_and_clamping() {
        let mut histogram = latency_histogram();
        for micros in 1..=1000 {
            record_us(&mut histogram, micros);
        }
        record_us(&mut histogram, u64::MAX);
        let latency = Latency::of(&histogram);
        assert_eq!(latency.samples, 1001);
        assert!((495..=505).contains(&latency.p50_us), "{latency:?}");
        assert!(latency.max_us >= LATENCY_US_MAX - LATENCY_US_MAX / 1000);
    }

    // Proves a report survives the JSON line it is written as.
    #[test]
    fn report_round_trips_json() {
        let report = RunReport {
            workload: "publish".into(),
            system: "redis".into(),
            messages: 10,
            verdict: Verdict::from_problems(vec![]),
            ..RunReport::default()
        };
        let line = serde_json::to_string(&report).unwrap();
        let back: RunReport = serde_json::from_str(&line).unwrap();
        assert_eq!(back, report);
        assert!(back.passed());
    }
}
