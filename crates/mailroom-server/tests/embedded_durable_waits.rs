//! The embedded backend's durable calls under `--fsync always` on a multi-threaded
//! runtime: workers that lead a lone sync on their own thread, workers that await a
//! shared one, and threads blocking on the store directly, all at once; every call
//! answers (within a bound, not hanging), and every answered publish is in the log.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use mailroom_server::backend::{Backend, Embedded};
use mailroom_server::long_poll::LongPolls;
use mailroom_store::{Store, StoreOptions};

/// Async publishers (tasks on the runtime) and blocking ones (threads on the store).
const TASKS: usize = 24;
const THREADS: usize = 3;
/// Publishes each makes, one at a time.
const PUBLISHES: u32 = 25;
/// How long all of them may take before the test calls a waiter stranded.
const HANG: Duration = Duration::from_secs(120);

// Proves mixed waiters all get their answers and the answers are right: offsets
// distinct and gap-free, each the message that was published, read back after reopen.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leading_awaiting_and_blocking_publishers_all_answer() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    let backend = Arc::new(Embedded::new(
        store.clone(),
        true,
        Arc::new(LongPolls::default()),
    ));
    backend.create_topic("t").await.unwrap();
    let threads: Vec<_> = (0..THREADS)
        .map(|i| {
            let topic = store.topic("t").unwrap();
            std::thread::spawn(move || {
                (0..PUBLISHES)
                    .map(|n| {
                        let body = format!("thread {i} message {n}");
                        (topic.publish(Bytes::from(body.clone())).unwrap(), body)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let tasks: Vec<_> = (0..TASKS)
        .map(|i| {
            let backend = Arc::clone(&backend);
            tokio::spawn(async move {
                let mut answered = Vec::new();
                for n in 0..PUBLISHES {
                    let body = format!("task {i} message {n}");
                    let offset = backend.publish("t", Bytes::from(body.clone())).await;
                    answered.push((offset.unwrap(), body));
                }
                answered
            })
        })
        .collect();
    let all_tasks = tokio::time::timeout(HANG, futures_util::future::join_all(tasks))
        .await
        .expect("every task answered in time");
    let mut answered: Vec<(u64, String)> = all_tasks.into_iter().flat_map(Result::unwrap).collect();
    let joined = tokio::task::spawn_blocking(move || {
        threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect::<Vec<_>>()
    });
    answered.extend(tokio::time::timeout(HANG, joined).await.unwrap().unwrap());

    let offsets: BTreeSet<u64> = answered.iter().map(|(offset, _)| *offset).collect();
    let total = ((TASKS + THREADS) as u64) * u64::from(PUBLISHES);
    assert_eq!(
        offsets.len() as u64,
        total,
        "every answer a distinct offset"
    );
    assert_eq!(offsets.last().copied(), Some(total - 1), "gap-free");
    drop(backend);
    drop(store);
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    let topic = store.topic("t").unwrap();
    for (offset, body) in &answered {
        let message = topic
            .read(*offset)
            .unwrap()
            .expect("an answered publish is kept");
        assert_eq!(&message[..], body.as_bytes());
    }
}
