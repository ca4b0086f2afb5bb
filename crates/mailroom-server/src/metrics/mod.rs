//! Prometheus metrics: counters bumped by the handlers, gauges refreshed when scraped,
//! and request latency histograms.
//!
//! Every series is named `mailroom_...`, except the process's own (`process_...`, the
//! names every client library uses; see [`process`]). `/metrics` answers in either
//! text format ([`exposition`]). Every family is described from the start, and the
//! per-topic and per-group counters of every resource exist at zero from the first
//! scrape after a start, so a rate over a restart has no holes. Labels carry topic, group and channel names,
//! which are validated (short, `[A-Za-z0-9._-]`), so they never need escaping and the
//! number of series grows only with the number of resources created.

use std::sync::atomic::{AtomicI64, AtomicU64};

use mailroom::group::GroupCounters;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

pub mod descriptors;
pub mod exposition;
mod labels;
pub mod limits;
pub mod process;
mod registration;

use descriptors::Descriptor;
pub use labels::{
    method_label, ChannelLabels, GroupLabels, NackLabels, RelayLabels, RequestLabels, TopicLabels,
};
use limits::LimitMetrics;
use process::ProcessStats;

/// Every `outcome` label a nack series may carry.
const NACK_OUTCOMES: [&str; 3] = ["retry", "released", "dead_lettered"];

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    // 100 µs to ~3.3 s in doublings: fsyncs sit in the low milliseconds.
    Histogram::new(exponential_buckets(0.0001, 2.0, 16))
}

/// Every metric the server exports.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Messages published to a topic.
    pub publishes: Family<TopicLabels, Counter>,
    /// Deliveries handed out by polls (a repeated poll of the same delivery counts again).
    pub deliveries: Family<GroupLabels, Counter>,
    /// Successful acks.
    pub acks: Family<GroupLabels, Counter>,
    /// Successful nacks, by outcome.
    pub nacks: Family<NackLabels, Counter>,
    /// Messages dead-lettered.
    pub dead_letters: Family<GroupLabels, Counter>,
    /// Deliveries that were not a message's first, per group; caught up from the store's
    /// durable group counters on every scrape (so they count lease expiries too).
    pub redeliveries: Family<GroupLabels, Counter>,
    /// Deliveries whose lease ran out, per group; caught up on every scrape.
    pub expired_leases: Family<GroupLabels, Counter>,
    /// Deliveries handed back with `release`, per group; caught up on every scrape.
    pub releases: Family<GroupLabels, Counter>,
    /// Dead letters redriven, per group; caught up on every scrape.
    pub redrives: Family<GroupLabels, Counter>,
    /// Serialises the catch-up of the four counters above, so two scrapes at once
    /// cannot both add the same difference.
    group_counters_sync: std::sync::Mutex<()>,
    /// Messages published but not finished, per group; refreshed on every scrape.
    pub lag: Family<GroupLabels, Gauge<i64, AtomicI64>>,
    /// Messages published to a live channel.
    pub channel_publishes: Family<ChannelLabels, Counter>,
    /// Deliveries into subscribers' mailboxes.
    pub channel_deliveries: Family<ChannelLabels, Counter>,
    /// Deliveries dropped at a full mailbox.
    pub channel_drops: Family<ChannelLabels, Counter>,
    /// Subscribers connected; refreshed on every scrape.
    pub channel_subscribers: Family<ChannelLabels, Gauge<i64, AtomicI64>>,
    /// Channel messages relayed between brokers sharing a store, by outcome; caught up
    /// from the relay's counts on every scrape (no series without a relay).
    pub channel_relay: Family<RelayLabels, Counter>,
    /// Serialises that catch-up, so two scrapes at once cannot both add a difference.
    relay_counters_sync: std::sync::Mutex<()>,
    /// Request latency, from the request reaching the router to the response head.
    pub request_seconds: HistogramFamily<RequestLabels>,
    /// Long polls waiting now; refreshed on every scrape.
    pub long_polls_waiting: Gauge<i64, AtomicI64>,
    /// 1 while `/healthz` says `ok`, 0 while it says `degraded` or `unhealthy`;
    /// refreshed on every scrape.
    pub store_healthy: Gauge<i64, AtomicI64>,
    /// How many topics are failed; refreshed on every scrape.
    pub topics_failed: Gauge<i64, AtomicI64>,
    /// 1 for each failed topic (only failed topics have the series); refreshed on every
    /// scrape.
    pub topic_failed: Family<TopicLabels, Gauge<i64, AtomicI64>>,
    /// Bytes of files under the data directory; refreshed on every scrape.
    pub store_disk_bytes: Gauge<i64, AtomicI64>,
    /// Bytes of files under each topic's directory; refreshed on every scrape.
    pub topic_disk_bytes: Family<TopicLabels, Gauge<i64, AtomicI64>>,
    /// How long writes waited for the store's fsync round (under `--fsync always`;
    /// the relaxed policies do not wait).
    pub store_sync_seconds: Histogram,
    /// Messages retention removed from a topic, caught up on every scrape with the
    /// store's count since the server started.
    pub retention_removed_messages: Family<TopicLabels, Counter>,
    /// Bytes retention removed from a topic; caught up on every scrape.
    pub retention_removed_bytes: Family<TopicLabels, Counter>,
    /// Segments retention removed from a topic; caught up on every scrape.
    pub retention_removed_segments: Family<TopicLabels, Counter>,
    /// The process's figures, refreshed on every scrape.
    process: ProcessMetrics,
    /// Usage against every limit, refreshed on every scrape ([`limits`]).
    pub limits: LimitMetrics,
    /// Every labelled family, described even while it has no series.
    described: Vec<Descriptor>,
}

/// The `process_...` series.
#[derive(Debug, Default)]
struct ProcessMetrics {
    cpu_seconds: Counter<f64, AtomicU64>,
    resident_bytes: Gauge<i64, AtomicI64>,
    open_fds: Gauge<i64, AtomicI64>,
    max_fds: Gauge<i64, AtomicI64>,
    start_time_seconds: Gauge<f64, AtomicU64>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Sets the failed-topic gauges to `failed` (rebuilt, so healed topics drop out).
    pub fn set_failed_topics(&self, failed: &[mailroom_api::topic_health::FailedTopic]) {
        self.topics_failed
            .set(i64::try_from(failed.len()).unwrap_or(i64::MAX));
        self.topic_failed.clear();
        for failure in failed {
            let labels = TopicLabels {
                topic: failure.topic.clone(),
            };
            self.topic_failed.get_or_create(&labels).set(1);
        }
    }

    /// Drops every series of `group` on `topic`: the group was deleted, and its labels
    /// must not stay in the exposition (or grow it) forever.
    pub fn forget_group(&self, topic: &str, group: &str) {
        let labels = GroupLabels {
            topic: topic.to_owned(),
            group: group.to_owned(),
        };
        for family in [
            &self.deliveries,
            &self.acks,
            &self.dead_letters,
            &self.redeliveries,
            &self.expired_leases,
            &self.releases,
            &self.redrives,
        ] {
            family.remove(&labels);
        }
        self.lag.remove(&labels);
        for outcome in NACK_OUTCOMES {
            self.nacks.remove(&NackLabels {
                topic: topic.to_owned(),
                group: group.to_owned(),
                outcome: outcome.to_owned(),
            });
        }
    }

    /// Drops every series of `topic` and of its `groups`: the topic was deleted.
    pub fn forget_topic(&self, topic: &str, groups: &[String]) {
        let labels = TopicLabels {
            topic: topic.to_owned(),
        };
        for family in [
            &self.publishes,
            &self.retention_removed_messages,
            &self.retention_removed_bytes,
            &self.retention_removed_segments,
        ] {
            family.remove(&labels);
        }
        for group in groups {
            self.forget_group(topic, group);
        }
    }

    /// A fresh set of metrics, all at zero.
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let metrics = Metrics {
            publishes: Family::default(),
            deliveries: Family::default(),
            acks: Family::default(),
            nacks: Family::default(),
            dead_letters: Family::default(),
            lag: Family::default(),
            redeliveries: Family::default(),
            expired_leases: Family::default(),
            releases: Family::default(),
            redrives: Family::default(),
            group_counters_sync: std::sync::Mutex::new(()),
            channel_publishes: Family::default(),
            channel_deliveries: Family::default(),
            channel_drops: Family::default(),
            channel_subscribers: Family::default(),
            channel_relay: Family::default(),
            relay_counters_sync: std::sync::Mutex::new(()),
            request_seconds: Family::new_with_constructor(latency_histogram),
            long_polls_waiting: Gauge::default(),
            store_healthy: Gauge::default(),
            store_disk_bytes: Gauge::default(),
            topic_disk_bytes: Family::default(),
            topics_failed: Gauge::default(),
            topic_failed: Family::default(),
            store_sync_seconds: latency_histogram(),
            retention_removed_messages: Family::default(),
            retention_removed_bytes: Family::default(),
            retention_removed_segments: Family::default(),
            process: ProcessMetrics::default(),
            limits: LimitMetrics::default(),
            registry: Registry::default(),
            described: Vec::new(),
        };
        let mut described = Vec::new();
        metrics.register_events(
            registry.sub_registry_with_prefix("mailroom"),
            &mut described,
        );
        metrics.register_state(
            registry.sub_registry_with_prefix("mailroom"),
            &mut described,
        );
        metrics
            .limits
            .register(registry.sub_registry_with_prefix("mailroom"));
        metrics
            .process
            .register(registry.sub_registry_with_prefix("process"));
        metrics.refresh_process();
        Metrics {
            registry,
            described,
            ..metrics
        }
    }

    /// Reads the process's figures (on Linux) into the `process_...` series.
    pub fn refresh_process(&self) {
        let Some(stats) = ProcessStats::read() else {
            return;
        };
        let process = &self.process;
        let seen = process.cpu_seconds.get();
        if stats.cpu_seconds > seen {
            process.cpu_seconds.inc_by(stats.cpu_seconds - seen);
        }
        let clamp = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
        process.resident_bytes.set(clamp(stats.resident_bytes));
        process.open_fds.set(clamp(stats.open_fds));
        process.max_fds.set(stats.max_fds.map_or(i64::MAX, clamp));
        process.start_time_seconds.set(stats.start_time_seconds);
    }

    /// Makes every per-topic and per-group counter of `topic` and its `groups` exist,
    /// at zero if nothing happened yet, so the families are complete from the first
    /// scrape (after a restart too).
    pub fn ensure_series(&self, topic: &str, groups: &[String]) {
        // The series are made by looking them up; the guard returned is not needed.
        drop(self.publishes.get_or_create(&TopicLabels {
            topic: topic.to_owned(),
        }));
        for group in groups {
            let labels = Metrics::group(topic, group);
            for family in [
                &self.deliveries,
                &self.acks,
                &self.dead_letters,
                &self.redeliveries,
                &self.expired_leases,
                &self.releases,
                &self.redrives,
            ] {
                drop(family.get_or_create(&labels));
            }
            for outcome in NACK_OUTCOMES {
                drop(self.nacks.get_or_create(&NackLabels {
                    topic: topic.to_owned(),
                    group: group.clone(),
                    outcome: outcome.to_owned(),
                }));
            }
        }
    }

    /// Makes every counter of `channel` exist, at zero if nothing happened yet.
    pub fn ensure_channel_series(&self, channel: &str) {
        let labels = Metrics::channel(channel);
        for family in [
            &self.channel_publishes,
            &self.channel_deliveries,
            &self.channel_drops,
        ] {
            drop(family.get_or_create(&labels));
        }
    }

    /// Labels for a group series.
    pub fn group(topic: &str, group: &str) -> GroupLabels {
        GroupLabels {
            topic: topic.to_owned(),
            group: group.to_owned(),
        }
    }

    /// Raises the per-group event counters to the store's durable `counters` (which only
    /// grow), so a scrape reports events that happened inside the store, such as lease
    /// expiries, and not only those seen by a handler.
    pub fn catch_up_group_counters(&self, labels: &GroupLabels, counters: GroupCounters) {
        let _one_at_a_time = self
            .group_counters_sync
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let pairs = [
            (&self.redeliveries, counters.redeliveries),
            (&self.expired_leases, counters.expired_leases),
            (&self.releases, counters.releases),
            (&self.redrives, counters.redrives),
        ];
        for (family, total) in pairs {
            let counter = family.get_or_create(labels);
            let seen = counter.get();
            if total > seen {
                counter.inc_by(total - seen);
            }
        }
    }

    /// Raises the channel relay's counters to `counts` (which only grow).
    pub fn catch_up_relay(&self, counts: crate::channels::RelayCounts) {
        let _one_at_a_time = self
            .relay_counters_sync
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let pairs = [
            ("sent", counts.sent),
            ("unsent", counts.unsent),
            ("received", counts.received),
            ("missed", counts.missed),
        ];
        for (outcome, total) in pairs {
            let labels = RelayLabels {
                outcome: outcome.to_owned(),
            };
            let counter = self.channel_relay.get_or_create(&labels);
            let seen = counter.get();
            if total > seen {
                counter.inc_by(total - seen);
            }
        }
    }

    /// Raises `topic`'s retention counters to the store's counts of what retention
    /// removed since the server started (which only grow while the topic exists).
    pub fn catch_up_retention(&self, topic: &str, messages: u64, bytes: u64, segments: u64) {
        let labels = TopicLabels {
            topic: topic.to_owned(),
        };
        let pairs = [
            (&self.retention_removed_messages, messages),
            (&self.retention_removed_bytes, bytes),
            (&self.retention_removed_segments, segments),
        ];
        for (family, total) in pairs {
            let counter = family.get_or_create(&labels);
            let seen = counter.get();
            if total > seen {
                counter.inc_by(total - seen);
            }
        }
    }

    /// Labels for a channel series.
    pub fn channel(channel: &str) -> ChannelLabels {
        ChannelLabels {
            channel: channel.to_owned(),
        }
    }

    /// Every series in the Prometheus text format 0.0.4, what a scraper gets unless it
    /// asks for OpenMetrics.
    pub fn render_prometheus(&self) -> String {
        exposition::to_prometheus_text(&self.render())
    }

    /// Every series in the OpenMetrics text format.
    pub fn render(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail; the Result only exists for io::Write sinks.
        if prometheus_client::encoding::text::encode(&mut text, &self.registry).is_err() {
            text.clear();
        }
        descriptors::add_missing(&mut text, &self.described);
        text
    }
}

impl ProcessMetrics {
    fn register(&self, registry: &mut Registry) {
        registry.register(
            "cpu_seconds",
            "User and system CPU time spent, in seconds",
            self.cpu_seconds.clone(),
        );
        registry.register(
            "resident_memory_bytes",
            "Resident memory size, in bytes",
            self.resident_bytes.clone(),
        );
        registry.register("open_fds", "Open file descriptors", self.open_fds.clone());
        registry.register(
            "max_fds",
            "The limit on open file descriptors",
            self.max_fds.clone(),
        );
        registry.register(
            "start_time_seconds",
            "Start time of the process since the Unix epoch, in seconds",
            self.start_time_seconds.clone(),
        );
    }
}

#[cfg(test)]
mod tests;
