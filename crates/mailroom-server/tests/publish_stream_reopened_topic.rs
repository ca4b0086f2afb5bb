//! Regression test for a publish stream on a topic that is reopened under it (issue 18:
//! `POST .../recover` or the full-disk self-heal closes every handle of the topic): the
//! stream's publisher moves to the reopened topic instead of failing every batch after.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use mailroom_server::backend::{Backend, BackendError, Embedded};
use mailroom_server::long_poll::LongPolls;
use mailroom_store::storage::SimStorage;
use mailroom_store::{Store, StoreError, StoreOptions};

// Proves a publisher opened before a full disk fail-stopped its topic fails while the
// topic is stopped, and once the topic is reopened publishes to it again, at the next
// offset, without a new stream.
#[tokio::test(flavor = "current_thread")]
async fn a_publish_stream_moves_to_the_reopened_topic() {
    let disk = SimStorage::new();
    let store = Store::open_with(
        Arc::new(disk.clone()),
        Path::new("/data"),
        StoreOptions::default(),
    )
    .unwrap();
    let backend = Embedded::new(store.clone(), true, Arc::new(LongPolls::default()));
    backend.create_topic("t").await.unwrap();
    let publisher = backend.publisher("t").unwrap();
    let first = publisher.publish_batch(&[Bytes::from("a")]).unwrap();
    assert_eq!(first.await.unwrap(), 0..1);

    disk.set_full(true);
    let full = match publisher.publish_batch(&[Bytes::from("lost")]) {
        Ok(wait) => wait.await,
        Err(error) => Err(error),
    };
    assert!(full.is_err(), "a full disk fails the batch: {full:?}");
    disk.set_full(false);
    // Stopped until it is reopened: the stream's batch fails and says why.
    let stopped = publisher
        .publish_batch(&[Bytes::from("stopped")])
        .map(|_| ());
    assert!(
        matches!(
            stopped,
            Err(BackendError::Store(
                StoreError::FailStopped { .. } | StoreError::TopicFailed { .. }
            ))
        ),
        "{stopped:?}"
    );

    assert!(backend.recover_topic("t").await.unwrap(), "reopened");
    let after = publisher
        .publish_batch(&[Bytes::from("b"), Bytes::from("c")])
        .expect("the stream moved to the reopened topic")
        .await
        .unwrap();
    assert_eq!(after, 1..3);
    // And stays there.
    let next = publisher.publish_batch(&[Bytes::from("d")]).unwrap();
    assert_eq!(next.await.unwrap(), 3..4);
    let topic = store.topic("t").unwrap();
    assert_eq!(topic.read(2).unwrap(), Some(Bytes::from("c")));
}
