//! Publishes of one topic that wait behind another are written together
//! (`backend/postgres/appends.rs`): each still gets its own consecutive offsets, in the
//! order it arrived, and nothing is lost, doubled or moved, whichever broker it went to
//! and whether or not the caller of the write in progress stayed.

mod postgres_support;

use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use mailroom_server::backend::{Backend, BackendError, Postgres};
use mailroom_store::{NewMessage, Stored};
use postgres_support::{broker, cluster_url, database, fresh_database, until};
use tokio_postgres::Client;

type Publish = Pin<Box<dyn Future<Output = Result<Range<u64>, BackendError>> + Send>>;

/// Holds the row lock of topic `t` on its own connection until the transaction ends,
/// so that a publish of `t` blocks in the database.
async fn hold_topic_row(url: &str) -> Client {
    let holder = database(url).await;
    holder
        .batch_execute("BEGIN; SELECT 1 FROM mailroom_topics WHERE name = 't' FOR UPDATE")
        .await
        .unwrap();
    holder
}

/// A broker whose first publish of topic `t` (one message, "0.0") waits in the database
/// on the topic row, which `holder` locks.
struct Blocked {
    url: String,
    backend: Arc<Postgres>,
    holder: Client,
    first: tokio::task::JoinHandle<Result<Range<u64>, BackendError>>,
}

/// A fresh database, a broker over it and its first publish blocked (see [`Blocked`]),
/// or `None` where the tests may be skipped.
async fn blocked_first_publish() -> Option<Blocked> {
    let url = fresh_database(&cluster_url()?).await;
    let (backend, _) = broker(&url).await;
    backend.create_topic("t").await.unwrap();
    let holder = hold_topic_row(&url).await;
    let first = tokio::spawn({
        let backend = Arc::clone(&backend);
        async move { backend.publish_batch("t", &[Bytes::from("0.0")]).await }
    });
    until_a_publish_waits_on_the_row(&url).await;
    Some(Blocked {
        url,
        backend,
        holder,
        first,
    })
}

/// Waits until a session of the database at `url` waits on a lock.
async fn until_a_publish_waits_on_the_row(url: &str) {
    let waiting = "SELECT count(*) > 0 FROM pg_stat_activity \
         WHERE datname = current_database() AND wait_event_type = 'Lock'";
    until(&database(url).await, waiting, Duration::from_secs(20)).await;
}

/// Polls `publish` once, which queues it behind the write in progress (a publish runs
/// to its first wait at once).
fn polled_once<T>(
    mut publish: Pin<Box<dyn Future<Output = T> + Send>>,
) -> Pin<Box<dyn Future<Output = T> + Send>> {
    let pending = publish
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()));
    assert!(matches!(pending, Poll::Pending), "a publish did not wait");
    publish
}

/// `messages` payloads tagged `tag`.
fn tagged(tag: usize, messages: usize) -> Vec<Bytes> {
    (0..messages)
        .map(|n| Bytes::from(format!("{tag}.{n}")))
        .collect()
}

/// A batch publish of `messages` payloads tagged `tag`, queued.
fn queued(backend: &Arc<Postgres>, tag: usize, messages: usize) -> Publish {
    let backend = Arc::clone(backend);
    let payloads = tagged(tag, messages);
    polled_once(Box::pin(async move {
        backend.publish_batch("t", &payloads).await
    }))
}

/// A publish with metadata of `messages` payloads tagged `tag`, each with a key, and
/// with `idempotency` as the first one's idempotency key; queued.
fn queued_messages(
    backend: &Arc<Postgres>,
    tag: usize,
    messages: usize,
    idempotency: Option<&str>,
) -> Pin<Box<dyn Future<Output = Result<Vec<Stored>, BackendError>> + Send>> {
    let backend = Arc::clone(backend);
    let mut messages: Vec<NewMessage> = tagged(tag, messages)
        .into_iter()
        .map(|payload| {
            let mut message = NewMessage::bare(payload);
            message.metadata.key = Some(format!("k{tag}"));
            message
        })
        .collect();
    messages[0].metadata.idempotency_key = idempotency.map(str::to_owned);
    polled_once(Box::pin(async move {
        backend.publish_once("t", &messages).await
    }))
}

/// The stored log of topic `t`: each offset's payload, and how many transactions wrote it.
/// (A combined append is one transaction: its rows share their `xmin`.)
async fn stored(url: &str) -> (Vec<(u64, String)>, i64) {
    let reader = database(url).await;
    let rows = reader
        .query(
            "SELECT \"offset\", payload FROM mailroom_messages ORDER BY \"offset\"",
            &[],
        )
        .await
        .unwrap();
    let log = rows
        .iter()
        .map(|row| {
            let payload: Vec<u8> = row.get(1);
            (
                row.get::<_, i64>(0) as u64,
                String::from_utf8(payload).unwrap(),
            )
        })
        .collect();
    let writes = reader
        .query_one(
            "SELECT count(DISTINCT xmin::text) FROM mailroom_messages",
            &[],
        )
        .await
        .unwrap();
    (log, writes.get(0))
}

/// Asserts that the publishes answered `answers` (their tags in arrival order, each with
/// its `messages` count) hold consecutive offsets from `start` and that `log` holds each
/// payload at its offset.
fn assert_in_arrival_order(
    answers: &[(usize, usize, Range<u64>)],
    start: u64,
    log: &[(u64, String)],
) {
    let mut next = start;
    for (tag, messages, offsets) in answers {
        assert_eq!(*offsets, next..next + *messages as u64, "publish {tag}");
        for (n, offset) in offsets.clone().enumerate() {
            let at = log.iter().find(|(o, _)| *o == offset).expect("stored");
            assert_eq!(at.1, format!("{tag}.{n}"), "offset {offset}");
        }
        next = offsets.end;
    }
}

// Proves publishes queued behind a write in progress are written by one transaction once
// it ends, each answered its own consecutive offsets in the order it arrived.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publishes_waiting_behind_a_write_share_one_transaction() {
    let Some(Blocked {
        url,
        backend,
        holder,
        first,
    }) = blocked_first_publish().await
    else {
        return;
    };
    let sizes = [1, 3, 1, 2, 5, 1, 1, 4];
    let waiting: Vec<Publish> = sizes
        .iter()
        .enumerate()
        .map(|(index, &messages)| queued(&backend, index + 1, messages))
        .collect();
    holder.batch_execute("COMMIT").await.unwrap();

    assert_eq!(first.await.unwrap().unwrap(), 0..1);
    let mut answers = Vec::new();
    for (index, publish) in waiting.into_iter().enumerate() {
        answers.push((index + 1, sizes[index], publish.await.unwrap()));
    }
    let (log, writes) = stored(&url).await;
    assert_eq!(log.len(), 1 + sizes.iter().sum::<usize>());
    assert_in_arrival_order(&answers, 1, &log);
    assert_eq!(
        writes, 2,
        "the first publish, then all that waited behind it"
    );
}

// Proves messages with metadata queued behind a write join each other but neither bare
// payloads nor a publish with an idempotency key, which is written alone and finds a
// repeat of its key queued behind it a duplicate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_join_their_own_kind_and_idempotent_publishes_go_alone() {
    let Some(Blocked {
        url,
        backend,
        holder,
        first,
    }) = blocked_first_publish().await
    else {
        return;
    };
    let keyed_a = queued_messages(&backend, 1, 2, None);
    let keyed_b = queued_messages(&backend, 2, 1, None);
    let once = queued_messages(&backend, 3, 2, Some("once"));
    let again = queued_messages(&backend, 4, 1, Some("once"));
    let keyed_c = queued_messages(&backend, 5, 1, None);
    let bare = queued(&backend, 6, 2);
    holder.batch_execute("COMMIT").await.unwrap();

    assert_eq!(first.await.unwrap().unwrap(), 0..1);
    let offsets = |answers: Vec<Stored>| -> Vec<(u64, bool)> {
        answers.iter().map(|a| (a.offset, a.duplicate)).collect()
    };
    assert_eq!(offsets(keyed_a.await.unwrap()), [(1, false), (2, false)]);
    assert_eq!(offsets(keyed_b.await.unwrap()), [(3, false)]);
    assert_eq!(offsets(once.await.unwrap()), [(4, false), (5, false)]);
    assert_eq!(offsets(again.await.unwrap()), [(4, true)]);
    assert_eq!(offsets(keyed_c.await.unwrap()), [(6, false)]);
    assert_eq!(bare.await.unwrap(), 7..9);
    let (log, writes) = stored(&url).await;
    assert_eq!(log.len(), 9);
    // The first; the two keyed; the idempotent one; its repeat (nothing stored); the
    // third keyed; the bare payloads.
    assert_eq!(writes, 5);
}

// Proves the publishes queued behind a write are still written and answered when the
// caller of that write goes away mid-write (a client that hung up).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_publishes_outlive_the_caller_of_the_write_ahead() {
    let Some(Blocked {
        url,
        backend,
        holder,
        first,
    }) = blocked_first_publish().await
    else {
        return;
    };
    let waiting: Vec<Publish> = (1..=3).map(|tag| queued(&backend, tag, 2)).collect();
    first.abort();
    assert!(first.await.unwrap_err().is_cancelled());
    holder.batch_execute("COMMIT").await.unwrap();

    let mut answers = Vec::new();
    for (index, publish) in waiting.into_iter().enumerate() {
        answers.push((index + 1, 2, publish.await.unwrap()));
    }
    let (log, _) = stored(&url).await;
    // The abandoned publish's statement was already sent: it may have committed.
    let start = answers[0].2.start;
    assert!(start <= 1, "{start}");
    assert_eq!(log.len() as u64, start + 6);
    assert_in_arrival_order(&answers, start, &log);
}

// Proves that many publishers on two brokers, racing on one topic, get every offset
// exactly once, each publisher's in the order it published, each holding its payload.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_publishers_on_two_brokers_lose_and_double_nothing() {
    let Some(cluster) = cluster_url() else {
        return;
    };
    let url = fresh_database(&cluster).await;
    let (a, _) = broker(&url).await;
    let (b, _) = broker(&url).await;
    a.create_topic("t").await.unwrap();
    let mut publishers = Vec::new();
    for publisher in 0..16usize {
        let backend = Arc::clone(if publisher % 2 == 0 { &a } else { &b });
        publishers.push(tokio::spawn(async move {
            let mut answers = Vec::new();
            for call in 0..25usize {
                let messages = 1 + (publisher * 7 + call * 3) % 4;
                let tag = publisher * 100 + call;
                let payloads = tagged(tag, messages);
                let offsets = backend.publish_batch("t", &payloads).await.unwrap();
                answers.push((tag, messages, offsets));
            }
            answers
        }));
    }
    let mut all = Vec::new();
    for publisher in publishers {
        let answers = publisher.await.unwrap();
        for pair in answers.windows(2) {
            assert!(
                pair[0].2.end <= pair[1].2.start,
                "a publisher's offsets go up"
            );
        }
        all.extend(answers);
    }
    all.sort_by_key(|(_, _, offsets)| offsets.start);
    let (log, _) = stored(&url).await;
    let total: usize = all.iter().map(|(_, messages, _)| messages).sum();
    assert_eq!(log.len(), total);
    assert_in_arrival_order(&all, 0, &log);
}
