//! What an operator sees: `/metrics` in the text format a scraper asks for, every
//! family described, and `/healthz` turning 503 when the store is fail-stop.

use std::path::Path;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt as _;
use mailroom_server::{app::router, state::AppState, Config};
use mailroom_store::storage::SimStorage;
use mailroom_store::{Store, StoreOptions};
use serde_json::{json, Value};
use tower::ServiceExt as _;

async fn call(
    app: &Router,
    method: &str,
    uri: &str,
    accept: Option<&str>,
) -> (StatusCode, String, String) {
    let mut request = Request::builder().method(method).uri(uri);
    if let Some(accept) = accept {
        request = request.header(header::ACCEPT, accept);
    }
    let response = app
        .clone()
        .oneshot(request.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|value| value.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        content_type,
        String::from_utf8(body.to_vec()).unwrap(),
    )
}

fn app_over(storage: Arc<SimStorage>) -> Router {
    let store = Store::open_with(storage, Path::new("/data"), StoreOptions::default()).unwrap();
    router(AppState::new(store, Config::default()))
}

/// Every sample's family has `# HELP` and `# TYPE` lines under its own name (for a
/// histogram, the base name of its `_bucket`, `_sum` and `_count`): what `promtool check
/// metrics` insists on.
fn assert_every_sample_described(text: &str) {
    let described: Vec<&str> = text
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.split(' ').next())
        .collect();
    let helped: Vec<&str> = text
        .lines()
        .filter_map(|line| line.strip_prefix("# HELP "))
        .filter_map(|rest| rest.split(' ').next())
        .collect();
    for line in text.lines().filter(|line| !line.starts_with('#')) {
        let name = line.split(['{', ' ']).next().unwrap();
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| {
                name.strip_suffix(suffix)
                    .filter(|base| described.contains(base))
            })
            .unwrap_or(name);
        assert!(described.contains(&family), "no # TYPE for {name}:\n{text}");
        assert!(helped.contains(&family), "no # HELP for {name}:\n{text}");
    }
}

// Proves a plain scraper gets Prometheus text 0.0.4 with every counter described under
// its `_total` name, and one that asks gets OpenMetrics; the per-topic and per-group
// counters exist before any traffic; and promtool (where installed) accepts the text.
#[tokio::test]
async fn metrics_in_the_format_asked_for() {
    let app = app_over(Arc::new(SimStorage::new()));
    let (status, _, _) = call(&app, "PUT", "/v1/topics/orders", None).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, content_type, text) = call(&app, "GET", "/metrics", Some("text/plain")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
    assert!(text.contains("# HELP mailroom_publishes_total "), "{text}");
    assert!(
        text.contains("# TYPE mailroom_publishes_total counter"),
        "{text}"
    );
    assert!(
        text.contains("mailroom_publishes_total{topic=\"orders\"} 0"),
        "{text}"
    );
    assert!(text.contains("mailroom_store_healthy 1"), "{text}");
    assert!(!text.contains("# EOF"), "{text}");
    assert_every_sample_described(&text);
    check_with_promtool(&text);

    let (_, content_type, open) = call(&app, "GET", "/metrics", None).await;
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    assert!(!open.contains("# EOF"));
    let asked = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5";
    let (_, content_type, open) = call(&app, "GET", "/metrics", Some(asked)).await;
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    assert!(open.contains("# TYPE mailroom_publishes counter"), "{open}");
    assert!(open.ends_with("# EOF\n"), "{open}");
}

fn check_with_promtool(text: &str) {
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    let Ok(mut child) = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        eprintln!("promtool is not installed; the Rust checks above stand in for it");
        return;
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "promtool check metrics: {}{}\n{text}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

// Proves a topic made fail-stop by a failed fsync turns /healthz into 200 `degraded`
// naming the topic, kind and reason (the other topics serve: damage stays local), the
// store_healthy gauge into 0 and the topic's failed gauge into 1.
#[tokio::test]
async fn healthz_reports_a_fail_stopped_topic_as_degraded() {
    let storage = Arc::new(SimStorage::new());
    let app = app_over(Arc::clone(&storage));
    call(&app, "PUT", "/v1/topics/orders", None).await;
    let (status, _, body) = call(&app, "GET", "/healthz", None).await;
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::OK, r#"{"status":"ok"}"#)
    );

    storage.fail_next_syncs(1);
    let request = Request::post("/v1/topics/orders/messages")
        .body(Body::from("hello"))
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    assert!(response.status().is_server_error(), "{}", response.status());

    let (status, content_type, body) = call(&app, "GET", "/healthz", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type, "application/json");
    let health: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(health["status"], "degraded", "{body}");
    let failed = &health["failed_topics"][0];
    assert_eq!(
        (&failed["topic"], &failed["kind"]),
        (&json!("orders"), &json!("stopped")),
        "{body}"
    );
    assert!(
        failed["reason"].as_str().unwrap().contains("fdatasync"),
        "{body}"
    );
    let (_, _, text) = call(&app, "GET", "/metrics", None).await;
    assert!(text.contains("mailroom_store_healthy 0"), "{text}");
    assert!(text.contains("mailroom_topics_failed 1"), "{text}");
    assert!(
        text.contains(r#"mailroom_topic_failed{topic="orders"} 1"#),
        "{text}"
    );
}

// Proves /metrics shows usage against every limit as one `mailroom_limit` and one
// `mailroom_usage` series per resource, following topics and channels as they are made,
// and that promtool accepts the families.
#[tokio::test]
async fn metrics_show_usage_against_every_limit() {
    let store = Store::open_with(
        Arc::new(SimStorage::new()),
        Path::new("/data"),
        StoreOptions::default(),
    )
    .unwrap();
    let config = Config {
        topics_max: Some(7),
        connections_max: Some(9),
        ..Config::default()
    };
    let app = router(AppState::new(store, config));
    call(&app, "PUT", "/v1/topics/a", None).await;
    call(&app, "PUT", "/v1/topics/b", None).await;
    let (status, _, _) = call(&app, "PUT", "/v1/channels/c", None).await;
    assert_eq!(status, StatusCode::CREATED);
    let (_, _, text) = call(&app, "GET", "/metrics", None).await;
    let value = |kind: &str, resource: &str| {
        let series = format!("mailroom_{kind}{{resource=\"{resource}\"}} ");
        let line = text.lines().find(|line| line.starts_with(&series));
        line.unwrap_or_else(|| panic!("no {series} in {text}"))[series.len()..].to_owned()
    };
    assert_eq!(
        (value("usage", "topics"), value("limit", "topics")),
        ("2".into(), "7".into())
    );
    assert_eq!(value("limit", "connections"), "9");
    assert_eq!(
        (value("usage", "channels"), value("limit", "channels")),
        ("1".into(), "10000".into())
    );
    for resource in [
        "open_files",
        "subscribers",
        "mailbox_bytes",
        "long_polls",
        "stream_tickets",
    ] {
        value("usage", resource);
        value("limit", resource);
    }
    assert_every_sample_described(&text);
    check_with_promtool(&text);
}
