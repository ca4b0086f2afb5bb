//! The hot calls under `--fsync always`, whose durability the server awaits on its async
//! workers (the store's deferred calls) rather than on the blocking pool: concurrent
//! publishers and consumers against the real `mailroom` binary, and what survives a
//! SIGKILL.

mod common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::{temp_dir, ServerProcess};
use mailroom_client::{BatchPoll, GroupOptions};

/// Concurrent publishers, each publishing `MESSAGES_PER_PUBLISHER` messages one by one.
const PUBLISHERS: usize = 4;
const MESSAGES_PER_PUBLISHER: usize = 40;
const MESSAGES: usize = PUBLISHERS * MESSAGES_PER_PUBLISHER;
/// Concurrent consumers, each polling up to `POLL_MAX` deliveries at a time.
const CONSUMERS: usize = 2;
const POLL_MAX: u32 = 8;
/// The group's window: room for both consumers' batches.
const WINDOW: u32 = 16;
/// Each consumer's long poll; the consumers stop once every message is acked.
const WAIT_MS: u64 = 200;

// Proves that, with durability awaited on the async workers, concurrent publishers get
// distinct consecutive offsets, concurrent consumers (batch long polls and batch acks)
// get every message exactly once, on its first attempt, while publishing goes on, and
// that every confirmed publish and ack is still there after a SIGKILL and a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_publishers_and_consumers_under_fsync_always() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "always"]);
    let client = server.client();
    client.create_topic("t").await.unwrap();
    let mut options = GroupOptions::new(3);
    options.max_in_flight = Some(WINDOW);
    client.create_group_with("t", "g", &options).await.unwrap();

    let acked = Arc::new(AtomicUsize::new(0));
    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|n| {
            let (client, acked) = (server.client(), Arc::clone(&acked));
            tokio::spawn(async move {
                let name = format!("c{n}");
                let poll = BatchPoll {
                    consumer: Some(&name),
                    max: POLL_MAX,
                    wait_ms: WAIT_MS,
                    ack: &[],
                };
                let mut seen = Vec::new();
                while acked.load(Ordering::Acquire) < MESSAGES {
                    let batch = client.poll_batch("t", "g", &poll).await.unwrap();
                    let ids: Vec<_> = batch.iter().map(|delivery| delivery.id()).collect();
                    if ids.is_empty() {
                        continue;
                    }
                    let results = client.ack_batch("t", "g", &ids).await.unwrap();
                    assert!(results.iter().all(Result::is_ok), "{results:?}");
                    acked.fetch_add(ids.len(), Ordering::AcqRel);
                    seen.extend(ids);
                }
                seen
            })
        })
        .collect();
    let publishers: Vec<_> = (0..PUBLISHERS)
        .map(|p| {
            let client = server.client();
            tokio::spawn(async move {
                let mut offsets = Vec::new();
                for m in 0..MESSAGES_PER_PUBLISHER {
                    offsets.push(client.publish("t", format!("p{p} m{m}")).await.unwrap());
                }
                offsets
            })
        })
        .collect();

    let mut offsets = BTreeSet::new();
    for publisher in publishers {
        for offset in publisher.await.unwrap() {
            assert!(offsets.insert(offset), "offset {offset} given twice");
        }
    }
    assert_eq!(offsets, (0..MESSAGES as u64).collect());
    let mut delivered = BTreeSet::new();
    for consumer in consumers {
        for id in consumer.await.unwrap() {
            assert_eq!(id.attempt, 1, "{id:?} redelivered");
            assert!(delivered.insert(id.offset), "{id:?} delivered twice");
        }
    }
    assert_eq!(delivered, offsets);

    tokio::task::spawn_blocking(move || server.kill())
        .await
        .unwrap();
    let server = ServerProcess::start(dir.path(), &["--fsync", "always"]);
    let detail = server.client().group_detail("t", "g").await.unwrap();
    assert_eq!(detail.info.position, MESSAGES as u64);
    assert!(detail.deliveries.is_empty(), "{:?}", detail.deliveries);
}
