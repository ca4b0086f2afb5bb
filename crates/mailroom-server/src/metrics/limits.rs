//! Usage against every limit: `mailroom_limit{resource=...}` and
//! `mailroom_usage{resource=...}`, one pair per bounded resource, refreshed on every
//! scrape. An alert on `mailroom_usage / mailroom_limit > 0.8` covers them all.
//!
//! | `resource` | usage | limit |
//! | --- | --- | --- |
//! | `open_files` | open file descriptors | the soft `RLIMIT_NOFILE` |
//! | `topics` | topics in the store | `--max-topics` |
//! | `connections` | connections being served | `--max-connections` |
//! | `channels` | live channels | [`CHANNELS_MAX`] |
//! | `subscribers` | subscribers of every channel | the sum of the channels' `max_subscribers` |
//! | `mailbox_bytes` | payload bytes queued in every mailbox | the sum of every subscriber's `mailbox_bytes` |
//! | `long_polls` | batch polls waiting | [`LONG_POLLS_MAX`] |
//! | `stream_tickets` | browser stream tickets outstanding | [`TICKETS_MAX`] |

use std::sync::atomic::AtomicI64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::browser::tickets::TICKETS_MAX;
use crate::channels::CHANNELS_MAX;
use crate::error::ApiError;
use crate::long_poll::LONG_POLLS_MAX;
use crate::metrics::process::ProcessStats;
use crate::state::AppState;

/// The label of both families: which resource.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResourceLabels {
    /// The resource, as in the module's table.
    pub resource: String,
}

/// The two families.
#[derive(Debug, Default)]
pub struct LimitMetrics {
    /// The most of each resource the server admits.
    pub limit: Family<ResourceLabels, Gauge<i64, AtomicI64>>,
    /// How much of each resource is in use.
    pub usage: Family<ResourceLabels, Gauge<i64, AtomicI64>>,
}

impl LimitMetrics {
    /// Registers both families (`mailroom_limit`, `mailroom_usage` under the server's
    /// prefix).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "limit",
            "The most of a resource the server admits (see README, server flags)",
            self.limit.clone(),
        );
        registry.register(
            "usage",
            "How much of a resource is in use, against mailroom_limit",
            self.usage.clone(),
        );
    }

    /// Sets `resource`'s pair.
    ///
    /// ```
    /// let metrics = mailroom_server::metrics::Metrics::new();
    /// metrics.limits.set("topics", 3, 100);
    /// let text = metrics.render();
    /// assert!(text.contains("mailroom_limit{resource=\"topics\"} 100"), "{text}");
    /// assert!(text.contains("mailroom_usage{resource=\"topics\"} 3"), "{text}");
    /// ```
    pub fn set(&self, resource: &str, usage: u64, limit: u64) {
        let labels = ResourceLabels {
            resource: resource.to_owned(),
        };
        let clamp = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
        self.limit.get_or_create(&labels).set(clamp(limit));
        self.usage.get_or_create(&labels).set(clamp(usage));
    }
}

/// Sets every resource's pair from the server's state.
///
/// # Errors
/// The backend's, listing topics.
pub async fn refresh(state: &AppState) -> Result<(), ApiError> {
    let limits = &state.metrics.limits;
    let count = |value: usize| u64::try_from(value).unwrap_or(u64::MAX);
    if let Some(stats) = ProcessStats::read() {
        let files_max = stats.max_fds.unwrap_or(u64::MAX);
        limits.set("open_files", stats.open_fds, files_max);
    }
    let topics = state.backend.list_topics().await?.len();
    let topics_max = state.config.topics_max.unwrap_or(usize::MAX);
    limits.set("topics", count(topics), count(topics_max));
    let connections_max = state.config.connections_max.unwrap_or(usize::MAX);
    let open = state
        .open_connections
        .load(std::sync::atomic::Ordering::Relaxed);
    limits.set("connections", count(open), count(connections_max));
    let channels = state.channels.list();
    limits.set("channels", count(channels.len()), count(CHANNELS_MAX));
    let (mut subscribers, mut subscribers_max) = (0u64, 0u64);
    let (mut queued_bytes, mut mailbox_bytes) = (0u64, 0u64);
    for channel in &channels {
        let stats = channel.stats();
        let broker = &channel.broker;
        subscribers += count(stats.subscribers);
        subscribers_max += count(broker.max_subscribers());
        queued_bytes += count(broker.queued_bytes());
        mailbox_bytes += count(stats.subscribers).saturating_mul(count(broker.mailbox_bytes()));
    }
    limits.set("subscribers", subscribers, subscribers_max);
    limits.set("mailbox_bytes", queued_bytes, mailbox_bytes);
    let waiting = state.long_polls.waiting();
    limits.set("long_polls", count(waiting), count(LONG_POLLS_MAX));
    let tickets = state.tickets.outstanding();
    limits.set("stream_tickets", count(tickets), count(TICKETS_MAX));
    Ok(())
}
