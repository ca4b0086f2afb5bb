//! The description of every labelled family, written even while it has no series.
//!
//! `prometheus-client` leaves a family without series out of the exposition, so
//! `mailroom_channel_publishes_total` would be unknown to a scraper until a channel
//! exists (and again after every restart). Both text formats allow a family with no
//! samples, so each labelled family is described at registration, and the rendered text
//! gets the `# HELP` and `# TYPE` lines of those that wrote nothing. (Unlabelled series
//! always have their one sample, zero from the start.)

use prometheus_client::registry::{Metric, Registry};

/// A labelled family's name (as registered, without the registry's prefix or a
/// counter's `_total`), help and OpenMetrics type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Descriptor {
    name: String,
    help: &'static str,
    kind: &'static str,
}

/// Registers `metric` under `name` in `registry` (whose prefix is `prefix`) and keeps
/// its description in `described`.
pub fn register_labelled(
    registry: &mut Registry,
    described: &mut Vec<Descriptor>,
    (prefix, name, help, kind): (&str, &str, &'static str, &'static str),
    metric: impl Metric,
) {
    registry.register(name, help, metric);
    described.push(Descriptor {
        name: format!("{prefix}_{name}"),
        help,
        kind,
    });
}

/// Adds to OpenMetrics `text` the description of every family of `described` it does
/// not describe, before its `# EOF`.
///
/// ```
/// use mailroom_server::metrics::descriptors::{add_missing, register_labelled};
/// use prometheus_client::metrics::{counter::Counter, family::Family};
/// let mut registry = prometheus_client::registry::Registry::default();
/// let mut described = Vec::new();
/// let family = Family::<Vec<(String, String)>, Counter>::default();
/// register_labelled(&mut registry, &mut described, ("", "jobs", "Jobs done", "counter"), family);
/// let mut text = "# EOF\n".to_owned();
/// add_missing(&mut text, &described);
/// assert_eq!(text, "# HELP _jobs Jobs done.\n# TYPE _jobs counter\n# EOF\n");
/// ```
pub fn add_missing(text: &mut String, described: &[Descriptor]) {
    let mut missing = String::new();
    for Descriptor { name, help, kind } in described {
        if !text.contains(&format!("# TYPE {name} ")) {
            missing.push_str(&format!("# HELP {name} {help}.\n# TYPE {name} {kind}\n"));
        }
    }
    let at = text.rfind("# EOF").unwrap_or(text.len());
    text.insert_str(at, &missing);
}
