//! Prometheus metrics: counters bumped by the handlers, gauges refreshed when scraped,
//! and request latency histograms.
//!
//! Every series is named `mailroom_...`. Labels carry topic, group and channel names,
//! which are validated (short, `[A-Za-z0-9._-]`), so they never need escaping and the
//! number of series grows only with the number of resources created.

use std::sync::atomic::AtomicI64;

use mailroom::group::GroupCounters;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// Labels for per-topic series.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TopicLabels {
    /// The topic.
    pub topic: String,
}

/// Labels for per-group series.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GroupLabels {
    /// The topic.
    pub topic: String,
    /// The consumer group.
    pub group: String,
}

/// Labels for nacks, split by what the nack did.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NackLabels {
    /// The topic.
    pub topic: String,
    /// The consumer group.
    pub group: String,
    /// `retry` or `dead_lettered`.
    pub outcome: String,
}

/// Labels for per-channel series.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ChannelLabels {
    /// The live channel.
    pub channel: String,
}

/// Labels for request latencies: the route pattern, never the raw path, so the series
/// count stays bounded whatever clients send.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// The HTTP method.
    pub method: String,
    /// The matched route, like `/v1/topics/{topic}/messages`, or `unmatched`.
    pub route: String,
    /// The response status code.
    pub status: String,
}

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
    /// Request latency, from the request reaching the router to the response head.
    pub request_seconds: HistogramFamily<RequestLabels>,
    /// Long polls waiting now; refreshed on every scrape.
    pub long_polls_waiting: Gauge<i64, AtomicI64>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
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
        self.publishes.remove(&TopicLabels {
            topic: topic.to_owned(),
        });
        for group in groups {
            self.forget_group(topic, group);
        }
    }

    /// A fresh set of metrics, all at zero.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("mailroom");
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
            request_seconds: Family::new_with_constructor(latency_histogram),
            long_polls_waiting: Gauge::default(),
            registry: Registry::default(),
        };
        registry.register(
            "publishes",
            "Messages published to topics",
            metrics.publishes.clone(),
        );
        registry.register(
            "deliveries",
            "Deliveries handed out by polls",
            metrics.deliveries.clone(),
        );
        registry.register("acks", "Deliveries acknowledged", metrics.acks.clone());
        registry.register(
            "nacks",
            "Deliveries nacked, by outcome",
            metrics.nacks.clone(),
        );
        registry.register(
            "dead_letters",
            "Messages dead-lettered",
            metrics.dead_letters.clone(),
        );
        registry.register(
            "group_lag",
            "Messages not yet finished by a group",
            metrics.lag.clone(),
        );
        registry.register(
            "redeliveries",
            "Deliveries that were not a message's first",
            metrics.redeliveries.clone(),
        );
        registry.register(
            "expired_leases",
            "Deliveries whose lease ran out",
            metrics.expired_leases.clone(),
        );
        registry.register(
            "releases",
            "Deliveries handed back without counting as a failure",
            metrics.releases.clone(),
        );
        registry.register(
            "redrives",
            "Dead letters put back for delivery",
            metrics.redrives.clone(),
        );
        registry.register(
            "channel_publishes",
            "Messages published to live channels",
            metrics.channel_publishes.clone(),
        );
        registry.register(
            "channel_deliveries",
            "Messages enqueued into subscribers' mailboxes",
            metrics.channel_deliveries.clone(),
        );
        registry.register(
            "channel_drops",
            "Messages dropped at a subscriber's full mailbox",
            metrics.channel_drops.clone(),
        );
        registry.register(
            "channel_subscribers",
            "Subscribers connected to a live channel",
            metrics.channel_subscribers.clone(),
        );
        registry.register(
            "long_polls_waiting",
            "Batch polls waiting for a delivery (wait_ms)",
            metrics.long_polls_waiting.clone(),
        );
        registry.register(
            "http_request_duration_seconds",
            "Time from request to response head, by route",
            metrics.request_seconds.clone(),
        );
        Metrics {
            registry,
            ..metrics
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

    /// Labels for a channel series.
    pub fn channel(channel: &str) -> ChannelLabels {
        ChannelLabels {
            channel: channel.to_owned(),
        }
    }

    /// The Prometheus text exposition of every series.
    pub fn render(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail; the Result only exists for io::Write sinks.
        if prometheus_client::encoding::text::encode(&mut text, &self.registry).is_err() {
            text.clear();
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves bumped counters and histograms appear in the exposition under their names.
    #[test]
    fn render_shows_series() {
        let metrics = Metrics::new();
        metrics
            .publishes
            .get_or_create(&TopicLabels {
                topic: "orders".into(),
            })
            .inc_by(3);
        metrics
            .request_seconds
            .get_or_create(&RequestLabels {
                method: "GET".into(),
                route: "/healthz".into(),
                status: "200".into(),
            })
            .observe(0.002);
        let text = metrics.render();
        assert!(
            text.contains("mailroom_publishes_total{topic=\"orders\"} 3"),
            "{text}"
        );
        assert!(
            text.contains("mailroom_http_request_duration_seconds_bucket"),
            "{text}"
        );
    }

    // Proves the group counters follow the store's totals, never double-count a total
    // seen twice, and never go down.
    #[test]
    fn group_counters_catch_up() {
        let metrics = Metrics::new();
        let labels = Metrics::group("t", "g");
        let mut totals = GroupCounters {
            redeliveries: 3,
            expired_leases: 1,
            ..GroupCounters::default()
        };
        metrics.catch_up_group_counters(&labels, totals);
        metrics.catch_up_group_counters(&labels, totals);
        totals.redeliveries = 5;
        metrics.catch_up_group_counters(&labels, totals);
        metrics.catch_up_group_counters(&labels, GroupCounters::default());
        let text = metrics.render();
        assert!(
            text.contains("mailroom_redeliveries_total{topic=\"t\",group=\"g\"} 5"),
            "{text}"
        );
        assert!(
            text.contains("mailroom_expired_leases_total{topic=\"t\",group=\"g\"} 1"),
            "{text}"
        );
    }
}
