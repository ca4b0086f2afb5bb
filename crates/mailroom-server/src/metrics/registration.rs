//! Registration of every family with the Prometheus registry, with its name, help text
//! and type; kept apart from `mod.rs` because the list is long and changes apart from
//! the recording methods.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::descriptors::{register_labelled, Descriptor};
use super::Metrics;

impl Metrics {
    /// Registers the counters of what happened to topics, groups and channels.
    pub(super) fn register_events(&self, registry: &mut Registry, described: &mut Vec<Descriptor>) {
        let mut counter = |name, help, family: &Family<_, Counter>| {
            register_labelled(
                registry,
                described,
                ("mailroom", name, help, "counter"),
                family.clone(),
            );
        };
        counter("publishes", "Messages published to topics", &self.publishes);
        let retention_counters = [
            (
                "retention_removed_messages",
                "Messages retention removed from a topic since the server started",
                &self.retention_removed_messages,
            ),
            (
                "retention_removed_bytes",
                "Bytes retention removed from a topic since the server started",
                &self.retention_removed_bytes,
            ),
            (
                "retention_removed_segments",
                "Segments retention removed from a topic since the server started",
                &self.retention_removed_segments,
            ),
        ];
        for (name, help, family) in retention_counters {
            counter(name, help, family);
        }
        let group_counters = [
            (
                "deliveries",
                "Deliveries handed out by polls",
                &self.deliveries,
            ),
            ("acks", "Deliveries acknowledged", &self.acks),
            ("dead_letters", "Messages dead-lettered", &self.dead_letters),
            (
                "redeliveries",
                "Deliveries that were not a message's first",
                &self.redeliveries,
            ),
            (
                "expired_leases",
                "Deliveries whose lease ran out",
                &self.expired_leases,
            ),
            (
                "releases",
                "Deliveries handed back without counting as a failure",
                &self.releases,
            ),
            (
                "redrives",
                "Dead letters put back for delivery",
                &self.redrives,
            ),
        ];
        for (name, help, family) in group_counters {
            register_labelled(
                registry,
                described,
                ("mailroom", name, help, "counter"),
                family.clone(),
            );
        }
        register_labelled(
            registry,
            described,
            (
                "mailroom",
                "nacks",
                "Deliveries nacked, by outcome",
                "counter",
            ),
            self.nacks.clone(),
        );
        let channel_counters = [
            (
                "channel_publishes",
                "Messages published to live channels",
                &self.channel_publishes,
            ),
            (
                "channel_deliveries",
                "Messages enqueued into subscribers' mailboxes",
                &self.channel_deliveries,
            ),
            (
                "channel_drops",
                "Messages dropped at a subscriber's full mailbox",
                &self.channel_drops,
            ),
        ];
        for (name, help, family) in channel_counters {
            register_labelled(
                registry,
                described,
                ("mailroom", name, help, "counter"),
                family.clone(),
            );
        }
        register_labelled(
            registry,
            described,
            (
                "mailroom",
                "channel_relay_messages",
                "Channel messages relayed between brokers sharing a store, by outcome",
                "counter",
            ),
            self.channel_relay.clone(),
        );
    }

    /// Registers the gauges of current state and the latency histograms.
    pub(super) fn register_state(&self, registry: &mut Registry, described: &mut Vec<Descriptor>) {
        register_labelled(
            registry,
            described,
            (
                "mailroom",
                "group_lag",
                "Messages not yet finished by a group",
                "gauge",
            ),
            self.lag.clone(),
        );
        register_labelled(
            registry,
            described,
            (
                "mailroom",
                "topic_disk_bytes",
                "Bytes of files under a topic's directory",
                "gauge",
            ),
            self.topic_disk_bytes.clone(),
        );
        register_labelled(
            registry,
            described,
            (
                "mailroom",
                "channel_subscribers",
                "Subscribers connected to a live channel",
                "gauge",
            ),
            self.channel_subscribers.clone(),
        );
        registry.register(
            "long_polls_waiting",
            "Batch polls waiting for a delivery (wait_ms)",
            self.long_polls_waiting.clone(),
        );
        registry.register(
            "store_healthy",
            "1 while /healthz says ok, 0 while a topic is failed or the store is fail-stop",
            self.store_healthy.clone(),
        );
        registry.register(
            "topics_failed",
            "Topics that are failed (damaged, unreadable or stopped; see /healthz)",
            self.topics_failed.clone(),
        );
        registry.register(
            "topic_failed",
            "1 for each failed topic (damaged, unreadable or stopped; see /healthz)",
            self.topic_failed.clone(),
        );
        registry.register(
            "store_disk_bytes",
            "Bytes of files under the data directory",
            self.store_disk_bytes.clone(),
        );
        registry.register(
            "store_sync_wait_seconds",
            "Time a write waited for its fsync round (--fsync always)",
            self.store_sync_seconds.clone(),
        );
        register_labelled(
            registry,
            described,
            (
                "mailroom",
                "http_request_duration_seconds",
                "Time from request to response head, by route",
                "histogram",
            ),
            self.request_seconds.clone(),
        );
    }
}
