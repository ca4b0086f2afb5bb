//! The label sets of the server's series: names of resources (validated, so bounded by
//! the resources created), outcomes from fixed lists, and a request's route pattern,
//! method and status.

use axum::http::Method;
use prometheus_client::encoding::EncodeLabelSet;

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

/// Labels for the channel relay's counts, split by what became of the messages.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RelayLabels {
    /// `sent`, `unsent`, `received` or `missed` ([`RelayCounts`](crate::channels::RelayCounts)).
    pub outcome: String,
}

/// Labels for request latencies: the route pattern, never the raw path, and a method
/// from a fixed list ([`method_label`]), so the series count stays bounded whatever
/// clients send.
///
/// ```
/// use axum::http::Method;
/// use mailroom_server::metrics::{method_label, RequestLabels};
///
/// let labels = RequestLabels {
///     method: method_label(&Method::POST),
///     route: "/v1/topics/{topic}/messages".to_owned(),
///     status: 200,
/// };
/// assert_eq!(labels.method, "POST");
/// ```
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// The HTTP method, or `other` ([`method_label`]).
    pub method: &'static str,
    /// The matched route, like `/v1/topics/{topic}/messages`, or `unmatched`.
    pub route: String,
    /// The response status code.
    pub status: u16,
}

/// The method's label: its name for the eight methods of RFC 9110 and PATCH, `other` for
/// any other (an extension method, which any client can make up: each would be a series
/// of its own). A name from this list costs no allocation per request.
///
/// ```
/// use axum::http::Method;
/// use mailroom_server::metrics::method_label;
///
/// assert_eq!(method_label(&Method::GET), "GET");
/// assert_eq!(method_label(&Method::from_bytes(b"PURGE").unwrap()), "other");
/// ```
pub fn method_label(method: &Method) -> &'static str {
    static KNOWN: [(Method, &str); 9] = [
        (Method::GET, "GET"),
        (Method::POST, "POST"),
        (Method::PUT, "PUT"),
        (Method::DELETE, "DELETE"),
        (Method::PATCH, "PATCH"),
        (Method::HEAD, "HEAD"),
        (Method::OPTIONS, "OPTIONS"),
        (Method::CONNECT, "CONNECT"),
        (Method::TRACE, "TRACE"),
    ];
    KNOWN
        .iter()
        .find(|(known, _)| known == method)
        .map_or("other", |&(_, name)| name)
}
