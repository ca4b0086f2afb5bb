//! The relaxed sync policy (`Never`): a power cut may lose unsynced work, but the store
//! must always reopen into a consistent state and keep working.

use bytes::Bytes;
use mailroom_store::log::{LogOptions, SyncPolicy};
use mailroom_store::storage::SimStorage;
use mailroom_store::{Store, StoreOptions};
use mailroom_testkit::store::open_store;

fn options(checkpoint_every: u64) -> StoreOptions {
    StoreOptions {
        log: LogOptions {
            segment_bytes_max: 300,
            index_interval_bytes: 64,
            sync: SyncPolicy::Never,
            ..LogOptions::default()
        },
        checkpoint_every,
        ..StoreOptions::default()
    }
}

/// Opens the store on `sim` with a checkpoint cadence chosen by `seed`: odd seeds
/// checkpoint often, even ones replay long tails.
fn open_for(sim: &SimStorage, seed: u64) -> Store {
    let checkpoint_every = if seed % 2 == 1 { 4 } else { 1_000 };
    open_store(sim, &options(checkpoint_every))
}

// Proves that under SyncPolicy::Never any power-cut image reopens (the message log and
// the groups log may lose different amounts), with every group within the recovered
// log, what was synced kept, and the store usable and stable across a further restart.
#[test]
fn power_cut_under_never_reopens_consistently() {
    for seed in 0..150u64 {
        let sim = SimStorage::new();
        let store = open_for(&sim, seed);
        store.create_topic("t").unwrap();
        let topic = store.topic("t").unwrap();
        topic.create_group("g", 2).unwrap();
        topic.create_group("h", 1).unwrap();
        for i in 0..3u8 {
            topic.publish(Bytes::from(vec![i; 20])).unwrap();
        }
        store.sync().unwrap();
        for round in 0..(seed % 12) {
            topic.publish(Bytes::from(vec![100; 20])).unwrap();
            for group in ["g", "h"] {
                if let Some(delivery) = topic.poll(group).unwrap() {
                    if round % 3 == 0 {
                        topic.nack(group, delivery.id()).unwrap();
                    } else {
                        topic.ack(group, delivery.id()).unwrap();
                    }
                }
            }
        }
        drop((store, topic));

        let crashed = sim.crash(seed);
        let store = open_for(&crashed, seed);
        let topic = store.topic("t").unwrap();
        assert!(topic.len() >= 3, "seed {seed}: synced messages lost");
        for i in 0..3u8 {
            assert_eq!(topic.read(u64::from(i)).unwrap().unwrap(), vec![i; 20]);
        }
        let mut infos = Vec::new();
        for group in ["g", "h"] {
            let info = topic.group_info(group).unwrap();
            assert!(info.position <= topic.len(), "seed {seed}: {info:?}");
            if let Some(delivery) = topic.poll(group).unwrap() {
                topic.ack(group, delivery.id()).unwrap();
            }
            infos.push(topic.group_info(group).unwrap());
        }
        topic.publish(Bytes::from_static(b"after")).unwrap();
        store.sync().unwrap();
        let len = topic.len();
        drop((store, topic));
        let store = open_for(&crashed, seed);
        let topic = store.topic("t").unwrap();
        assert_eq!(topic.len(), len);
        for (group, info) in ["g", "h"].into_iter().zip(infos) {
            assert_eq!(topic.group_info(group).unwrap().position, info.position);
        }
    }
}
