//! A PostgreSQL restart under two `mailroom serve` brokers: while the database is down
//! both answer 503 `store_unavailable` (and `/healthz` 503), and once it is back they
//! recover by themselves with everything confirmed before still there.
//!
//! This test stops and starts the test cluster itself (`MAILROOM_TEST_POSTGRES`), so it
//! lives alone in its test binary: cargo runs test binaries one after another, and no
//! other test of this one runs beside it.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::postgres_cluster::{cluster_files, pg_ctl};
use common::{fresh_postgres_database, two_brokers};
use serde_json::Value;

/// The options the cluster was started with (`postmaster.opts`, less the program and
/// its data directory), for starting it again the same way.
fn start_options(data: &Path) -> String {
    let opts = std::fs::read_to_string(data.join("postmaster.opts")).expect("postmaster.opts");
    // `/path/postgres "-D" "DIR" "-c" "name=value" ...`: the settings start at the first -c.
    match opts.find("\"-c\"") {
        Some(at) => opts[at..].trim().to_owned(),
        None => String::new(),
    }
}

async fn status_and_error(request: reqwest::RequestBuilder) -> (u16, Value) {
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

// Proves brokers ride out a database restart: with PostgreSQL stopped (`pg_ctl stop -m
// fast`) a publish and a poll on either broker answer 503 `store_unavailable` and
// `/healthz` 503; after `pg_ctl start` both serve again without being restarted, the
// delivery in flight before is still in flight (same attempt), and nothing confirmed is
// lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn brokers_recover_from_a_database_restart() {
    let Some(url) = fresh_postgres_database().await else {
        return;
    };
    let (a, b, _dirs) = two_brokers(&url);
    let http = reqwest::Client::new();
    assert_eq!(
        http.put(a.at("/v1/topics/t"))
            .send()
            .await
            .unwrap()
            .status(),
        201
    );
    let group = http
        .put(b.at("/v1/topics/t/groups/g"))
        .json(&serde_json::json!({"max_attempts": 3}))
        .send()
        .await
        .unwrap();
    assert_eq!(group.status(), 201);
    for n in 0..3 {
        let published = http
            .post(a.at("/v1/topics/t/messages"))
            .body(format!("m{n}"));
        assert_eq!(published.send().await.unwrap().status(), 201);
    }
    let (status, first) = status_and_error(http.post(b.at("/v1/topics/t/groups/g/poll"))).await;
    assert_eq!(
        (status, first["offset"].clone()),
        (200, serde_json::json!(0))
    );

    let (data, pg_ctl_path) = cluster_files(&url).await;
    let options = start_options(&data);
    pg_ctl(&pg_ctl_path, &data, &["-m", "fast", "-w", "stop"]);
    for server in [&a, &b] {
        let (status, body) =
            status_and_error(http.post(server.at("/v1/topics/t/messages")).body("lost")).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (503, Some("store_unavailable")),
            "{body}"
        );
        let (status, body) =
            status_and_error(http.post(server.at("/v1/topics/t/groups/g/poll"))).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (503, Some("store_unavailable")),
            "{body}"
        );
        assert_eq!(
            http.get(server.at("/healthz"))
                .send()
                .await
                .unwrap()
                .status(),
            503
        );
    }
    let log = data.parent().unwrap_or(&data).join("server.log");
    let log = log.to_string_lossy().into_owned();
    pg_ctl(
        &pg_ctl_path,
        &data,
        &["-w", "-t", "60", "-l", &log, "-o", &options, "start"],
    );

    let deadline = Instant::now() + Duration::from_secs(20);
    for server in [&a, &b] {
        loop {
            let (status, _) = status_and_error(http.get(server.at("/v1/topics/t"))).await;
            if status == 200 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "a broker did not recover: {status}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let (status, again) = status_and_error(http.post(a.at("/v1/topics/t/groups/g/poll"))).await;
    assert_eq!(status, 200);
    assert_eq!(
        (&again["offset"], &again["attempt"]),
        (&first["offset"], &first["attempt"])
    );
    let published = http.post(b.at("/v1/topics/t/messages")).body("after");
    assert_eq!(published.send().await.unwrap().status(), 201);
    let (_, topic) = status_and_error(http.get(a.at("/v1/topics/t"))).await;
    assert_eq!(topic["end"], 4, "{topic}");
    for server in [&a, &b] {
        assert_eq!(
            http.get(server.at("/healthz"))
                .send()
                .await
                .unwrap()
                .status(),
            200
        );
    }
}
