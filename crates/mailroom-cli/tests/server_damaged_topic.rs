//! Regression test for issue 18's "one damaged file stops every topic", against the real
//! binary: a byte flipped in each kind of per-topic file leaves the server starting and
//! every other topic serving; the damaged topic reports where and why in its view, in
//! `/healthz` and in the metrics, answers 503 `topic_failed`, and `mailroom repair`
//! (offline) or `POST /v1/topics/{topic}/repair` brings it back without reusing a
//! confirmed offset.

mod cli_support;
mod common;

use std::path::Path;

use cli_support::{documents, mailroom};
use common::{temp_dir, ServerProcess};
use mailroom_client::StartPosition;
use serde_json::Value;

/// Each per-topic file a flipped byte can damage: (path in the topic's directory, byte,
/// a word the failure must name).
const DAMAGE: [(&str, usize, &str); 5] = [
    ("messages/00000000000000000000.log", 30, "messages"),
    ("CHECKPOINT", 12, "CHECKPOINT"),
    ("TOPIC", 1, "TOPIC"),
    ("groups/00000000000000000000.log", 30, "groups"),
    ("SETTINGS", 10, "SETTINGS"),
];

async fn get_json(url: &str) -> (u16, Value) {
    let response = reqwest::get(url).await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

async fn post(url: &str, body: &'static str) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(url)
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Topics `healthy` and `hurt` with three confirmed messages, a group that acked one,
/// `hurt` with its own retention, and a checkpoint.
async fn build(dir: &Path) {
    let server = ServerProcess::start(dir, &[]);
    let client = server.client();
    client.create_topic("healthy").await.unwrap();
    let retention = serde_json::json!({"retention": {"max_messages": 1000}});
    let created = reqwest::Client::new()
        .put(server.at("/v1/topics/hurt"))
        .json(&retention)
        .send()
        .await
        .unwrap();
    assert_eq!(created.status().as_u16(), 201);
    for topic in ["healthy", "hurt"] {
        client
            .create_group(topic, "g", 3, StartPosition::Earliest)
            .await
            .unwrap();
        for i in 0..3 {
            client.publish(topic, vec![b'a' + i; 64]).await.unwrap();
        }
        let delivery = client.poll(topic, "g").await.unwrap().unwrap();
        client.ack(topic, "g", delivery.id()).await.unwrap();
    }
    let status = tokio::task::spawn_blocking(move || server.terminate())
        .await
        .unwrap();
    assert!(status.success(), "{status}");
    // The server checkpoints every few thousand group records: write one now, so there
    // is a CHECKPOINT to damage.
    let store = mailroom_store::Store::open(dir, Default::default()).unwrap();
    store.checkpoint().unwrap();
}

fn flip(path: &Path, at: usize) {
    let mut bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    bytes[at] ^= 0x10;
    std::fs::write(path, bytes).unwrap();
}

// Proves, for each kind of per-topic file, that the server starts with a byte flipped in
// it, the healthy topic serves, the damaged one is visible as failed (view, listing,
// /healthz, metrics) and refuses calls with 503 topic_failed, and the offline repair
// brings it back with no confirmed offset reused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_topic_beside_healthy_ones() {
    for (file, at, named) in DAMAGE {
        let dir = temp_dir();
        build(dir.path()).await;
        flip(&dir.path().join("topics/hurt").join(file), at);

        let server = ServerProcess::start(dir.path(), &[]);
        let client = server.client();
        assert_eq!(
            client.publish("healthy", "more").await.unwrap(),
            3,
            "{file}"
        );
        let (status, view) = get_json(&server.at("/v1/topics/hurt")).await;
        assert_eq!(
            (status, &view["state"]),
            (200, &Value::from("failed")),
            "{view}"
        );
        assert_eq!(view["failure_kind"], "damaged", "{file}: {view}");
        let failure = view["failure"].as_str().unwrap();
        assert!(failure.contains(named), "{file}: {failure}");
        let (_, healthy) = get_json(&server.at("/v1/topics/healthy")).await;
        assert_eq!(healthy["state"], "ok");
        let (_, listed) = get_json(&server.at("/v1/topics")).await;
        let states: Vec<&Value> = listed["topics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|topic| &topic["state"])
            .collect();
        assert_eq!(states, ["ok", "failed"], "{listed}");

        let (status, refused) = post(&server.at("/v1/topics/hurt/messages"), "no").await;
        assert_eq!(
            (status, &refused["error"]),
            (503, &Value::from("topic_failed"))
        );
        assert!(
            refused["message"].as_str().unwrap().contains(named),
            "{refused}"
        );
        let (status, health) = get_json(&server.at("/healthz")).await;
        assert_eq!((status, &health["status"]), (200, &Value::from("degraded")));
        assert_eq!(health["failed_topics"][0]["topic"], "hurt", "{health}");
        let metrics = reqwest::get(server.at("/metrics")).await.unwrap();
        let metrics = metrics.text().await.unwrap();
        assert!(
            metrics.contains(r#"mailroom_topic_failed{topic="hurt"} 1"#),
            "{metrics}"
        );

        // The offline repair refuses while the server holds the store.
        let data = dir.path().to_str().unwrap();
        let args = ["--json", "repair", "--data", data, "--topic", "hurt"];
        let locked = mailroom("http://127.0.0.1:9", None, &args, b"");
        assert!(!locked.status.success());
        let stderr = String::from_utf8_lossy(&locked.stderr);
        assert!(stderr.contains("stop it first"), "{stderr}");
        let status = tokio::task::spawn_blocking(move || server.terminate())
            .await
            .unwrap();
        assert!(status.success(), "{file}: SIGTERM exits {status}");

        let repaired = mailroom("http://127.0.0.1:9", None, &args, b"");
        let stderr = String::from_utf8_lossy(&repaired.stderr);
        assert!(repaired.status.success(), "{file}: {stderr}");
        let report = &documents(&repaired)[0];
        assert_eq!(report["repaired"], true, "{file}: {report}");

        let server = ServerProcess::start(dir.path(), &[]);
        let client = server.client();
        let offset = client.publish("hurt", "after repair").await.unwrap();
        assert!(offset >= 3, "{file}: confirmed offset {offset} reused");
        let (_, health) = get_json(&server.at("/healthz")).await;
        assert_eq!(health["status"], "ok", "{file}: {health}");
    }
}

// Proves the repair route repairs a damaged topic in a running server, and answers
// `repaired: false` for a topic that is not damaged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_repair_route_repairs_a_running_servers_topic() {
    let dir = temp_dir();
    build(dir.path()).await;
    flip(&dir.path().join("topics/hurt/CHECKPOINT"), 12);
    let server = ServerProcess::start(dir.path(), &[]);
    let (status, healthy) = post(&server.at("/v1/topics/healthy/repair"), "").await;
    assert_eq!((status, &healthy["repaired"]), (200, &Value::from(false)));
    let (status, report) = post(&server.at("/v1/topics/hurt/repair"), "").await;
    assert_eq!(
        (status, &report["repaired"]),
        (200, &Value::from(true)),
        "{report}"
    );
    assert!(
        report["actions"][0]
            .as_str()
            .unwrap()
            .contains("CHECKPOINT"),
        "{report}"
    );
    let (_, view) = get_json(&server.at("/v1/topics/hurt")).await;
    assert_eq!(view["state"], "ok", "{view}");
    // The groups log held the whole history: the group kept its position.
    assert_eq!(view["groups"][0]["position"], 1, "{view}");
    let (status, unknown) = post(&server.at("/v1/topics/nope/repair"), "").await;
    assert_eq!(
        (status, &unknown["error"]),
        (404, &Value::from("unknown_topic"))
    );
    let (status, bad) = post(&server.at("/v1/topics/b%20d/recover"), "").await;
    assert_eq!((status, &bad["error"]), (400, &Value::from("invalid_name")));
}
