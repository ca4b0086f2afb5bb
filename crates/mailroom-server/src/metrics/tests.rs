//! The metrics' unit tests: series in the exposition, families described from the
//! start, counters caught up with the store.

use axum::http::Method;

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
            method: "GET",
            route: "/healthz".into(),
            status: 200,
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

// Proves every labelled family is described (HELP and TYPE) on a fresh server, before
// any topic, group or channel exists, exactly once, and still once when it has series.
#[test]
fn every_family_is_described_from_the_start() {
    let metrics = Metrics::new();
    let families = [
        "mailroom_publishes_total counter",
        "mailroom_deliveries_total counter",
        "mailroom_nacks_total counter",
        "mailroom_channel_publishes_total counter",
        "mailroom_channel_deliveries_total counter",
        "mailroom_channel_drops_total counter",
        "mailroom_retention_removed_messages_total counter",
        "mailroom_retention_removed_bytes_total counter",
        "mailroom_retention_removed_segments_total counter",
        "mailroom_channel_subscribers gauge",
        "mailroom_group_lag gauge",
        "mailroom_http_request_duration_seconds histogram",
    ];
    let check = |text: &str| {
        for family in families {
            let name = family.split(' ').next().unwrap();
            let type_line = format!("# TYPE {family}\n");
            assert_eq!(text.matches(&type_line).count(), 1, "{family} in {text}");
            assert_eq!(
                text.matches(&format!("# HELP {name} ")).count(),
                1,
                "{text}"
            );
        }
    };
    check(&metrics.render_prometheus());
    metrics.ensure_channel_series("c");
    metrics.ensure_series("t", &["g".to_owned()]);
    let text = metrics.render_prometheus();
    check(&text);
    assert!(
        text.contains("mailroom_channel_drops_total{channel=\"c\"} 0"),
        "{text}"
    );
    let open = metrics.render();
    assert!(open.ends_with("# EOF\n"), "{open}");
    assert_eq!(
        open.matches("# TYPE mailroom_channel_drops counter")
            .count(),
        1
    );
}

// Proves the retention counters follow the store's counts, never going down.
#[test]
fn retention_removals_are_counters() {
    let metrics = Metrics::new();
    metrics.catch_up_retention("t", 3, 300, 1);
    metrics.catch_up_retention("t", 2, 200, 1);
    metrics.catch_up_retention("t", 5, 500, 2);
    let text = metrics.render_prometheus();
    for line in [
        "mailroom_retention_removed_messages_total{topic=\"t\"} 5",
        "mailroom_retention_removed_bytes_total{topic=\"t\"} 500",
        "mailroom_retention_removed_segments_total{topic=\"t\"} 2",
    ] {
        assert!(text.contains(line), "{line} in {text}");
    }
    metrics.forget_topic("t", &[]);
    assert!(!metrics.render().contains("topic=\"t\""));
}

// Proves the method label is the method's own name for the standard methods and one
// `other` for every extension method, however many a client makes up: one series each
// at most, whatever is sent.
proptest::proptest! {
    #[test]
    fn method_labels_are_bounded(name in "[A-Z]{1,12}") {
        let method = Method::from_bytes(name.as_bytes()).unwrap();
        let label = method_label(&method);
        let standard = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "CONNECT", "TRACE"];
        if standard.contains(&name.as_str()) {
            proptest::prop_assert_eq!(label, name.as_str());
        } else {
            proptest::prop_assert_eq!(label, "other");
        }
    }
}

// Proves every standard method keeps its name (the property above rarely draws them).
#[test]
fn standard_methods_keep_their_names() {
    for method in [
        Method::GET,
        Method::POST,
        Method::PUT,
        Method::DELETE,
        Method::PATCH,
        Method::HEAD,
        Method::OPTIONS,
        Method::CONNECT,
        Method::TRACE,
    ] {
        assert_eq!(method_label(&method), method.as_str());
    }
}
