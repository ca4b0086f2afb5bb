//! Found by the simulation (seed 1651 of `mailroom-sim`): a redriven dead letter whose
//! message retention has deleted is delivered from the dead letter's own copy, and must
//! stay so when a delivery of it fails and is retried.

use bytes::Bytes;
use mailroom::group::{GroupConfig, NackKind, NackOptions};
use mailroom::topic::StartPosition;
use mailroom_store::log::SyncPolicy;
use mailroom_store::storage::SimStorage;
use mailroom_store::{Retention, StoreOptions};
use mailroom_testkit::store::{compacting_options, open_topic};

// Proves a redriven message whose log segment retention deleted is delivered again, with
// its payload, after a delivery of it was released for a retry, before and after a
// restart (the retry used to forget where the dead letter's copy was, and every later
// poll of the group failed with "retention kept deleting the next message").
#[test]
fn a_retried_redelivery_of_a_redriven_message_keeps_its_payload() {
    let options = StoreOptions {
        retention: Retention {
            messages_max: Some(1),
            ..Retention::default()
        },
        ..compacting_options(u64::MAX, SyncPolicy::Always)
    };
    let sim = SimStorage::new();
    let (store, topic) = open_topic(&sim, &options);
    let config = GroupConfig::new(2);
    topic
        .create_group_with("g", StartPosition::Earliest, config)
        .unwrap();
    topic.publish(Bytes::from_static(b"dead")).unwrap();
    let reject = NackOptions {
        kind: NackKind::Reject,
        ..NackOptions::default()
    };
    let first = topic.poll("g").unwrap().unwrap();
    topic.nack_with("g", first.id(), reject).unwrap();
    for i in 0..100u8 {
        topic.publish(Bytes::from(vec![i; 40])).unwrap();
        let delivery = topic.poll("g").unwrap().unwrap();
        topic.ack("g", delivery.id()).unwrap();
    }
    assert_eq!(topic.redrive("g", 0..1).unwrap(), 1);
    assert!(store.enforce_retention(0).unwrap() > 0);
    assert!(topic.start() > 0, "the message's segment is gone");
    let redelivered = topic.poll("g").unwrap().expect("the redriven message");
    assert_eq!(&redelivered.message[..], b"dead");
    let release = NackOptions {
        kind: NackKind::Release,
        ..NackOptions::default()
    };
    topic.nack_with("g", redelivered.id(), release).unwrap();
    let retried = topic.poll("g").unwrap().expect("the released message");
    assert_eq!((retried.offset, &retried.message[..]), (0, &b"dead"[..]));
    drop((store, topic));
    let (_store, topic) = open_topic(&sim, &options);
    let after_restart = topic.poll("g").unwrap().expect("still in flight");
    assert_eq!(
        (after_restart.offset, &after_restart.message[..]),
        (0, &b"dead"[..])
    );
}
