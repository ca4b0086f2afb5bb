//! Regression tests for issue 18's "a full disk never heals by itself": on the
//! fault-injecting storage (a disk that refuses to grow files, as ENOSPC does), a publish
//! answered with an error is never found in the log afterwards (not after the topic is
//! reopened, not after a power cut), under every sync policy, and reopening heals the
//! topic once space is back. The server's test of the same runs on a real small file
//! system when it can (`crates/mailroom-server/tests/server_full_disk.rs`).

use std::collections::BTreeSet;
use std::time::Duration;

use bytes::Bytes;
use mailroom_store::log::{LogOptions, SyncPolicy};
use mailroom_store::storage::SimStorage;
use mailroom_store::{FailureKind, Store, StoreOptions};
use mailroom_testkit::store::{open_store, TOPIC};

fn options(sync: SyncPolicy) -> StoreOptions {
    StoreOptions {
        log: LogOptions {
            sync,
            segment_bytes_max: 4096,
            ..LogOptions::default()
        },
        ..StoreOptions::default()
    }
}

fn payload(i: u32) -> Bytes {
    Bytes::from(format!("message {i:05} {}", "x".repeat(100)))
}

/// Every payload in topic `TOPIC` of `store`.
fn payloads(store: &Store) -> BTreeSet<Bytes> {
    let topic = store.topic(TOPIC).unwrap();
    (topic.start()..topic.len())
        .filter_map(|offset| topic.read(offset).unwrap())
        .collect()
}

/// How the disk fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// It refuses to grow files (ENOSPC on the write).
    Full,
    /// One `fdatasync` fails after the write went to the page cache (as ENOSPC or EIO
    /// from a delayed allocation does): the case whose records used to come back.
    FailedSync,
}

/// Publishes until the disk refuses, in rounds of `in_flight` publishes that wait
/// together; returns (confirmed, refused) payloads.
fn publish_until_refused(
    store: &Store,
    sim: &SimStorage,
    fault: Fault,
    in_flight: u32,
) -> (BTreeSet<Bytes>, BTreeSet<Bytes>) {
    let topic = store.topic(TOPIC).unwrap();
    let (mut confirmed, mut refused) = (BTreeSet::new(), BTreeSet::new());
    for i in 0..20 {
        topic.publish(payload(i)).unwrap();
        confirmed.insert(payload(i));
    }
    match fault {
        Fault::Full => sim.set_full(true),
        Fault::FailedSync => sim.fail_next_syncs(1),
    }
    let mut next = 20;
    while refused.is_empty() {
        assert!(next < 10_000, "the full disk never refused a publish");
        let mut waits = Vec::new();
        for _ in 0..in_flight {
            let body = payload(next);
            next += 1;
            match topic.publish_deferred(body.clone()) {
                Ok(wait) => waits.push((body, wait)),
                Err(_) => {
                    refused.insert(body);
                }
            }
        }
        for (body, wait) in waits {
            match wait.wait() {
                Ok(_) => confirmed.insert(body),
                Err(_) => refused.insert(body),
            };
        }
    }
    (confirmed, refused)
}

// Proves, under each sync policy, that publishes answered with an error on a full disk
// are not in the log after the topic heals, nor in any power-cut image, while every
// confirmed one is (after a power cut: every synced one); and that the topic reports
// itself stopped until space is back, then heals by reopening.
#[test]
fn a_publish_refused_on_a_full_disk_is_not_published() {
    let policies = [
        SyncPolicy::Always,
        SyncPolicy::Interval(Duration::from_millis(5)),
        SyncPolicy::Never,
    ];
    let cases = policies
        .into_iter()
        .flat_map(|sync| [Fault::Full, Fault::FailedSync].map(|fault| (sync, fault)))
        .flat_map(|case| [1, 8].map(|in_flight| (case, in_flight)));
    for ((sync, fault), in_flight) in cases {
        {
            let sim = SimStorage::new();
            let options = options(sync);
            let store = open_store(&sim, &options);
            store.create_topic(TOPIC).unwrap();
            let (confirmed, refused) = publish_until_refused(&store, &sim, fault, in_flight);
            let failures = store.topic_failures();
            assert_eq!(failures.len(), 1, "{sync:?}: {failures:?}");
            assert_eq!(failures[0].kind, FailureKind::Stopped);

            // Power cuts while the disk is still failing.
            for seed in 0..8 {
                let image = open_store(&sim.crash(seed), &options);
                let found = payloads(&image);
                let resurrected: Vec<_> = found.intersection(&refused).collect();
                assert!(
                    resurrected.is_empty(),
                    "{sync:?} seed {seed}: {resurrected:?}"
                );
                if sync == SyncPolicy::Always {
                    assert!(found.is_superset(&confirmed), "{sync:?} seed {seed}");
                }
            }
            // Still failing: the topic is not reopened (it would fail again at once).
            if fault == Fault::Full {
                for _ in 0..3 {
                    assert_eq!(store.recover_topics(), Vec::<String>::new(), "{sync:?}");
                }
                // Still open and stopped: reads keep working meanwhile.
                let failures = store.topic_failures();
                assert_eq!(failures.len(), 1);
                assert_eq!(failures[0].kind, FailureKind::Stopped);
                assert!(store.topic(TOPIC).unwrap().read(0).unwrap().is_some());
                match store.recover_topic(TOPIC) {
                    Err(mailroom_store::StoreError::TopicFailed { reason, .. }) => {
                        assert_eq!(reason.matches("not reopened yet").count(), 1, "{reason}");
                    }
                    other => panic!("{sync:?}: {other:?}"),
                }
            }
            sim.set_full(false);
            assert_eq!(store.recover_topics(), [TOPIC], "{sync:?}");
            assert!(store.topic_failures().is_empty());
            let found = payloads(&store);
            assert_eq!(found, confirmed, "{sync:?} {fault:?} in_flight {in_flight}");
            let topic = store.topic(TOPIC).unwrap();
            let offset = topic.publish(Bytes::from_static(b"after")).unwrap();
            assert_eq!(offset, confirmed.len() as u64, "{sync:?}");
        }
    }
}
