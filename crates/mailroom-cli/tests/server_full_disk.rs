//! Regression test for issue 18's "a full disk never heals by itself". As root, on a
//! small tmpfs the test mounts: fill it, publish until 503, see `/healthz` degraded, free
//! space, see the topic heal by itself and `/healthz` go back to ok; fill it again, and
//! SIGTERM while the topic is failed exits 0; after that, no publish answered 503 is in
//! the log and every confirmed one is. Without root (or where mounting is refused) the
//! same scenario runs over the fault-injecting storage in-process, through the server's
//! backend and healing task, and the test says so on stderr.

mod common;

use std::collections::BTreeSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use bytes::Bytes;
use common::{temp_dir, Deadline, ServerProcess};
use mailroom_server::backend::{Backend, Embedded};
use mailroom_server::long_poll::LongPolls;
use mailroom_server::topic_healing::HealingTask;
use mailroom_store::storage::SimStorage;
use mailroom_store::{Store, StoreOptions};

const TOPIC: &str = "ledger";
const TMPFS_BYTES: u64 = 4 << 20;

fn payload(n: u32) -> Bytes {
    Bytes::from(format!("message {n:06} {}", "x".repeat(1000)))
}

/// A tmpfs mounted at a new directory under `parent`, unmounted on drop.
struct Tmpfs {
    at: PathBuf,
}

impl Tmpfs {
    /// Mounts one if this process may (root, and a kernel that allows it).
    fn mount(parent: &Path) -> Result<Tmpfs, String> {
        let at = parent.join("fs");
        std::fs::create_dir(&at).map_err(|e| e.to_string())?;
        let output = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={TMPFS_BYTES}")])
            .arg("tmpfs")
            .arg(&at)
            .output()
            .map_err(|e| e.to_string())?;
        if !output.status.success() {
            return Err(String::from_utf8_lossy(&output.stderr).into_owned());
        }
        Ok(Tmpfs { at })
    }

    /// Fills the file system with `filler` until a write fails.
    fn fill(&self) -> PathBuf {
        let path = self.at.join("filler");
        let mut file = std::fs::File::create(&path).unwrap();
        let chunk = vec![0u8; 4096];
        while file.write_all(&chunk).is_ok() {}
        path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.at).status();
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|output| output.stdout.trim_ascii() == b"0")
}

/// Publishes until one is refused (503, or 500 for the write that hit the full disk);
/// returns (confirmed, refused) payloads.
async fn publish_until_503(
    server: &ServerProcess,
    from: u32,
) -> (BTreeSet<Bytes>, BTreeSet<Bytes>) {
    let http = reqwest::Client::new();
    let url = server.at(&format!("/v1/topics/{TOPIC}/messages"));
    let (mut confirmed, mut refused) = (BTreeSet::new(), BTreeSet::new());
    for n in from..from + 100_000 {
        let body = payload(n);
        let response = http.post(&url).body(body.clone()).send().await.unwrap();
        match response.status().as_u16() {
            201 => {
                confirmed.insert(body);
            }
            // The write that failed answers 500 storage_error (the I/O error itself),
            // later ones 503: neither was published.
            500 | 503 => {
                refused.insert(body);
                return (confirmed, refused);
            }
            other => panic!(
                "publish answered {other}: {}",
                response.text().await.unwrap()
            ),
        }
    }
    panic!("the full disk never refused a publish");
}

async fn health(server: &ServerProcess) -> String {
    let response = reqwest::get(server.at("/healthz")).await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let body: serde_json::Value = response.json().await.unwrap();
    body["status"].as_str().unwrap().to_owned()
}

/// Every payload in the topic, read by opening the store as a restart does.
fn payloads_after_restart(data: &Path) -> BTreeSet<Bytes> {
    let store = Store::open(data, StoreOptions::default()).unwrap();
    let topic = store.topic(TOPIC).unwrap();
    (topic.start()..topic.len())
        .map(|offset| topic.read(offset).unwrap().unwrap())
        .collect()
}

// Proves a topic stopped by a full disk heals by itself once space is back, /healthz is
// degraded meanwhile, SIGTERM while it is failed exits 0, and no publish answered 503 is
// in the log afterwards (while every confirmed one is).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_heals_and_a_503_is_not_published() {
    let dir = temp_dir();
    let tmpfs = if is_root() {
        Tmpfs::mount(dir.path())
    } else {
        Err("not root".to_owned())
    };
    let tmpfs = match tmpfs {
        Ok(tmpfs) => tmpfs,
        Err(why) => {
            eprintln!(
                "server_full_disk: no tmpfs ({why}): running over the fault-injecting \
                 SimStorage in-process instead"
            );
            return over_sim_storage().await;
        }
    };
    eprintln!("server_full_disk: on a {TMPFS_BYTES}-byte tmpfs");
    let data = tmpfs.at.join("data");
    for fsync in ["always", "interval:5"] {
        let _ = std::fs::remove_dir_all(&data);
        let server = ServerProcess::start(&data, &["--fsync", fsync]);
        server.client().create_topic(TOPIC).await.unwrap();
        let filler = tmpfs.fill();
        let (mut confirmed, mut refused) = publish_until_503(&server, 0).await;
        assert_eq!(health(&server).await, "degraded", "{fsync}");

        std::fs::remove_file(&filler).unwrap();
        let deadline = Deadline::new("the topic to heal once space was back");
        while health(&server).await != "ok" {
            deadline.check();
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let offset = server
            .client()
            .publish(TOPIC, payload(900_000))
            .await
            .unwrap();
        confirmed.insert(payload(900_000));
        assert_eq!(
            offset,
            confirmed.len() as u64 - 1,
            "{fsync}: no gap, no reuse"
        );

        let filler = tmpfs.fill();
        let (more, also_refused) = publish_until_503(&server, 1_000_000).await;
        confirmed.extend(more);
        refused.extend(also_refused);
        let status = tokio::task::spawn_blocking(move || server.terminate())
            .await
            .unwrap();
        assert!(
            status.success(),
            "{fsync}: SIGTERM while failed exits {status}"
        );
        std::fs::remove_file(&filler).unwrap();

        let found = payloads_after_restart(&data);
        let resurrected: Vec<_> = found.intersection(&refused).collect();
        assert!(
            resurrected.is_empty(),
            "{fsync}: answered 503, yet published"
        );
        assert_eq!(found, confirmed, "{fsync}");
    }
}

// Proves the fallback scenario itself, on every machine: over the fault-injecting
// storage, a publish refused on the full disk is not published and the healing task
// heals the topic once space is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_heals_over_the_fault_injecting_storage() {
    over_sim_storage().await;
}

/// The same scenario over the fault-injecting storage: the server's backend answers the
/// publishes, its healing task heals the topic.
async fn over_sim_storage() {
    let sim = SimStorage::new();
    let store = Store::open_with(
        Arc::new(sim.clone()),
        Path::new("/data"),
        StoreOptions::default(),
    )
    .unwrap();
    let backend = Arc::new(Embedded::new(store, true, Arc::new(LongPolls::default())));
    let healing = HealingTask::start(backend.clone());
    backend.create_topic(TOPIC).await.unwrap();
    let mut confirmed = BTreeSet::new();
    for n in 0..20 {
        backend.publish(TOPIC, payload(n)).await.unwrap();
        confirmed.insert(payload(n));
    }
    sim.set_full(true);
    let refused = payload(20);
    let error = backend.publish(TOPIC, refused.clone()).await.unwrap_err();
    let answer = mailroom_server::error::ApiError::from(error);
    assert_eq!(answer.status.as_u16(), 503, "{answer:?}");
    assert_eq!(backend.health().failed_topics.len(), 1);
    sim.set_full(false);
    let deadline = Deadline::new("the topic to heal once space was back");
    while !backend.health().failed_topics.is_empty() {
        deadline.check();
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    healing.stop().await;
    backend.sync().await.unwrap();
    let store = backend.store();
    let topic = store.topic(TOPIC).unwrap();
    let found: BTreeSet<Bytes> = (0..topic.len())
        .map(|offset| topic.read(offset).unwrap().unwrap())
        .collect();
    assert!(!found.contains(&refused), "answered 503, yet published");
    assert_eq!(found, confirmed);
}
