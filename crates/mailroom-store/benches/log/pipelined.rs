//! Pipelined publishers: each keeps up to `window` publishes unconfirmed, as Kafka's
//! producer, NATS's async JetStream publish and RabbitMQ's publisher confirms do, and
//! counts a message only once its confirmation (`Deferred`, resolved after the fdatasync
//! that covers it) has come back. This goes through the store's public API
//! (`DurableTopic::publish_deferred`), not the log underneath.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use mailroom_store::log::{LogOptions, SyncPolicy};
use mailroom_store::storage::Storage;
use mailroom_store::{Deferred, DurableTopic, Store, StoreOptions};

/// Who publishes, and how many unconfirmed publishes each keeps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pipelined {
    /// Threads calling `Deferred::wait` (false: tasks on one executor thread awaiting it).
    pub threads: bool,
    /// Concurrent publishers.
    pub publishers: usize,
    /// Unconfirmed publishes each publisher keeps at most.
    pub window: usize,
}

/// A fresh store in `dir` under `sync`, and its one topic.
pub fn open(storage: Arc<dyn Storage>, dir: &Path, sync: SyncPolicy) -> (Store, DurableTopic) {
    let options = StoreOptions {
        log: LogOptions {
            sync,
            ..LogOptions::default()
        },
        ..StoreOptions::default()
    };
    let store = Store::open_with(storage, dir, options).unwrap();
    store.create_topic("t").unwrap();
    let topic = store.topic("t").unwrap();
    (store, topic)
}

/// Messages confirmed durable by `pipelined`'s publishers of `payload_bytes` to `topic` in
/// `time`.
pub fn run(
    topic: &DurableTopic,
    pipelined: Pipelined,
    payload_bytes: usize,
    time: Duration,
) -> u64 {
    let payload = Bytes::from(vec![0xa5u8; payload_bytes]);
    let confirmed = if pipelined.threads {
        run_threads(topic, pipelined, &payload, time)
    } else {
        run_tasks(topic, pipelined, &payload, time)
    };
    // Every confirmed offset is a distinct message: the log holds at least that many.
    assert!(
        topic.len() >= confirmed,
        "confirmed more than the log holds"
    );
    confirmed
}

fn run_threads(topic: &DurableTopic, pipelined: Pipelined, payload: &Bytes, time: Duration) -> u64 {
    let barrier = Barrier::new(pipelined.publishers + 1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..pipelined.publishers)
            .map(|_| {
                let barrier = &barrier;
                scope.spawn(move || {
                    let mut unconfirmed: VecDeque<Deferred<u64>> = VecDeque::new();
                    let mut confirmed = 0u64;
                    barrier.wait();
                    let start = Instant::now();
                    while start.elapsed() < time {
                        unconfirmed.push_back(topic.publish_deferred(payload.clone()).unwrap());
                        if unconfirmed.len() == pipelined.window {
                            unconfirmed.pop_front().unwrap().wait().unwrap();
                            confirmed += 1;
                        }
                    }
                    for deferred in unconfirmed {
                        deferred.wait().unwrap();
                        confirmed += 1;
                    }
                    confirmed
                })
            })
            .collect();
        barrier.wait();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    })
}

fn run_tasks(topic: &DurableTopic, pipelined: Pipelined, payload: &Bytes, time: Duration) -> u64 {
    let mut pool = LocalPool::new();
    let start = Instant::now();
    let handles: Vec<_> = (0..pipelined.publishers)
        .map(|_| {
            let topic = topic.clone();
            let payload = payload.clone();
            let task = async move {
                let mut unconfirmed: VecDeque<Deferred<u64>> = VecDeque::new();
                let mut confirmed = 0u64;
                while start.elapsed() < time {
                    unconfirmed.push_back(topic.publish_deferred(payload.clone()).unwrap());
                    if unconfirmed.len() == pipelined.window {
                        unconfirmed.pop_front().unwrap().await.unwrap();
                        confirmed += 1;
                    }
                }
                for deferred in unconfirmed {
                    deferred.await.unwrap();
                    confirmed += 1;
                }
                confirmed
            };
            pool.spawner().spawn_local_with_handle(task).unwrap()
        })
        .collect();
    pool.run_until(futures::future::join_all(handles))
        .into_iter()
        .sum()
}
