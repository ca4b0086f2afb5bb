//! Live channels across two `mailroom serve --store postgres://...` processes: a message
//! published on one broker reaches the subscribers of the channel on the other, each
//! publisher's messages in order, over WebSocket and SSE; a stalled subscriber on one
//! broker drops and counts while the others keep up; a message past the relay's limit is
//! refused; each relay's counts are on `/metrics`, messages lost while a broker's listening
//! connection is down among them; and the delay from a publish on A to
//! its arrival on B is measured.
//!
//! The database comes from `MAILROOM_TEST_POSTGRES` (`scripts/postgres.sh start DIR`);
//! without it the tests fail under `CI=true` and elsewhere say they were not run.

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{temp_dir, Deadline, ServerProcess, SseReader};
use mailroom_client::{SubscribeOptions, Subscription};

/// Messages each publisher sends in the ordering test.
const MESSAGES_PER_PUBLISHER: usize = 300;
/// Rounds of the publish-on-A, receive-on-B delay measurement.
const DELAY_ROUNDS: usize = 50;
/// The largest message the relay carries (`RELAYED_PAYLOAD_BYTES_MAX`).
const RELAYED_BYTES_MAX: usize = 5632;

/// Two brokers over one fresh database, or `None` where the test may be skipped.
async fn two_brokers(
    extra_b: &[&str],
) -> Option<(ServerProcess, ServerProcess, [tempfile::TempDir; 2])> {
    let url = common::fresh_postgres_database().await?;
    let dirs = [temp_dir(), temp_dir()];
    let a = ServerProcess::start(dirs[0].path(), &["--store", &url]);
    let mut args = vec!["--store", url.as_str()];
    args.extend_from_slice(extra_b);
    let b = ServerProcess::start(dirs[1].path(), &args);
    Some((a, b, dirs))
}

/// Publishes probes on `from` until `on` has one: from then on `on`'s broker is
/// listening for `from`'s messages (its listener connects after the server starts).
async fn await_relay(from: &ServerProcess, on: &mut Subscription) {
    let deadline = Deadline::new("a probe relayed to the other broker");
    let probe = format!("probe from {}", from.address());
    loop {
        deadline.check();
        from.client()
            .publish_channel("drivers", probe.clone())
            .await
            .unwrap();
        // Probes published on `on`'s own broker may be waiting too: only this one counts.
        while let Ok(Some(message)) =
            tokio::time::timeout(Duration::from_millis(200), on.next()).await
        {
            if message.unwrap() == probe.as_bytes() {
                return;
            }
        }
    }
}

/// The next message of `subscription` that is not a probe.
async fn next_message(subscription: &mut Subscription) -> Bytes {
    loop {
        let message = subscription.next().await.expect("stream open").unwrap();
        if !message.starts_with(b"probe") {
            return message;
        }
    }
}

/// The next event of `sse` that is not a probe, as text.
async fn next_event(sse: &mut SseReader) -> String {
    loop {
        let event = sse.next().await.expect("stream open");
        if !event.data.starts_with("probe") {
            return event.data;
        }
    }
}

/// The value of `mailroom_channel_relay_messages_total{outcome}` in a `/metrics` text.
fn relay_count(metrics: &str, outcome: &str) -> u64 {
    let series = format!("mailroom_channel_relay_messages_total{{outcome=\"{outcome}\"}} ");
    let line = metrics
        .lines()
        .find_map(|line| line.strip_prefix(&series))
        .unwrap_or_else(|| panic!("no {series}in {metrics}"));
    line.trim().parse().unwrap()
}

/// Checks that `received` holds every message of publishers `a` and `b`, each in order.
fn assert_each_publisher_in_order(who: &str, received: &[String]) {
    for publisher in ["a", "b"] {
        let own: Vec<&str> = received
            .iter()
            .filter_map(|message| message.strip_prefix(&format!("{publisher}:")))
            .collect();
        let expected: Vec<String> = (0..MESSAGES_PER_PUBLISHER).map(|n| n.to_string()).collect();
        assert_eq!(own, expected, "{who}: publisher {publisher}'s messages");
    }
    assert_eq!(received.len(), 2 * MESSAGES_PER_PUBLISHER, "{who}");
}

// Proves a channel's messages cross brokers: publishers on A and on B at once, and every
// subscriber on each broker (WebSocket and SSE on both) receives every message of each
// publisher, in that publisher's order; each publish answer counts its own broker's
// subscribers only; a message past the relay's limit is refused with 413 and one at the
// limit (not UTF-8) arrives whole; both relays count what they sent and received, and
// nothing missed or unsent. Then measures the delay from a publish on A to its arrival
// at a subscriber on B.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_subscriber_on_each_broker_gets_each_publisher_in_order() {
    let Some((a, b, _dirs)) = two_brokers(&[]).await else {
        return;
    };
    for server in [&a, &b] {
        assert!(server
            .client()
            .create_channel("drivers", 4, 1024)
            .await
            .unwrap());
    }
    let mut a_ws = a.client().subscribe("drivers").await.unwrap();
    let mut b_ws = b.client().subscribe("drivers").await.unwrap();
    let b_ws2 = b.client().subscribe("drivers").await.unwrap();
    let mut sse_readers = Vec::new();
    for server in [&a, &b] {
        let sse = reqwest::get(server.at("/v1/channels/drivers/events"))
            .await
            .unwrap();
        assert_eq!(sse.status(), 200);
        sse_readers.push(SseReader::new(sse));
    }
    await_relay(&a, &mut b_ws).await;
    await_relay(&b, &mut a_ws).await;

    let publisher = |server: &ServerProcess, name: &'static str, here: u64| {
        let client = server.client();
        tokio::spawn(async move {
            for n in 0..MESSAGES_PER_PUBLISHER {
                let delivery = client
                    .publish_channel("drivers", format!("{name}:{n}"))
                    .await
                    .unwrap();
                assert_eq!(delivery.delivered + delivery.dropped, here, "{name}:{n}");
            }
        })
    };
    let publishers = [publisher(&a, "a", 2), publisher(&b, "b", 3)];
    let reader = |mut subscription: Subscription| {
        tokio::spawn(async move {
            let mut received = Vec::new();
            while received.len() < 2 * MESSAGES_PER_PUBLISHER {
                let message = next_message(&mut subscription).await;
                received.push(String::from_utf8(message.to_vec()).unwrap());
            }
            (received, subscription)
        })
    };
    let readers = [reader(a_ws), reader(b_ws), reader(b_ws2)];
    let sse_reader = |mut sse: SseReader| {
        tokio::spawn(async move {
            let mut received = Vec::new();
            while received.len() < 2 * MESSAGES_PER_PUBLISHER {
                received.push(next_event(&mut sse).await);
            }
            received
        })
    };
    let sse_readers: Vec<_> = sse_readers.into_iter().map(sse_reader).collect();
    for publisher in publishers {
        publisher.await.unwrap();
    }
    let mut subscriptions = Vec::new();
    for (who, reader) in ["A ws", "B ws", "B ws 2"].into_iter().zip(readers) {
        let (received, subscription) = reader.await.unwrap();
        assert_each_publisher_in_order(who, &received);
        subscriptions.push(subscription);
    }
    for (who, reader) in ["A sse", "B sse"].into_iter().zip(sse_readers) {
        assert_each_publisher_in_order(who, &reader.await.unwrap());
    }
    let mut subscriptions = subscriptions.into_iter();
    let (mut a_ws, mut b_ws) = (subscriptions.next().unwrap(), subscriptions.next().unwrap());

    let too_large = a
        .client()
        .publish_channel("drivers", vec![b'x'; RELAYED_BYTES_MAX + 1])
        .await
        .unwrap_err();
    assert_eq!(
        (too_large.status(), too_large.code()),
        (Some(413), Some("payload_too_large"))
    );
    let largest: Vec<u8> = (0..RELAYED_BYTES_MAX)
        .map(|n| (n % 251) as u8 | 0x80)
        .collect();
    a.client()
        .publish_channel("drivers", largest.clone())
        .await
        .unwrap();
    assert_eq!(next_message(&mut b_ws).await, largest);
    assert_eq!(next_message(&mut a_ws).await, largest);

    // Alternate rounds time the arrival on B (relayed) and, as the baseline, on A
    // (local fan-out, no database): the same publish call, the same load.
    let (mut relayed, mut local) = (Vec::new(), Vec::new());
    for round in 0..2 * DELAY_ROUNDS {
        let text = format!("delay {round}");
        let started = Instant::now();
        a.client()
            .publish_channel("drivers", text.clone())
            .await
            .unwrap();
        let (timed, other, delays) = if round % 2 == 0 {
            (&mut b_ws, &mut a_ws, &mut relayed)
        } else {
            (&mut a_ws, &mut b_ws, &mut local)
        };
        assert_eq!(next_message(timed).await, text.as_bytes());
        delays.push(started.elapsed());
        assert_eq!(next_message(other).await, text.as_bytes());
    }
    for delays in [&mut relayed, &mut local] {
        delays.sort();
    }
    // What each relay counted: every message of the other broker's publisher arrived,
    // none was missed or left unsent.
    let relayed_from_a = (MESSAGES_PER_PUBLISHER + 1 + 2 * DELAY_ROUNDS) as u64;
    let on_a = a.client().metrics().await.unwrap();
    let on_b = b.client().metrics().await.unwrap();
    assert!(relay_count(&on_a, "sent") >= relayed_from_a, "{on_a}");
    assert!(
        relay_count(&on_a, "received") >= MESSAGES_PER_PUBLISHER as u64,
        "{on_a}"
    );
    assert!(relay_count(&on_b, "received") >= relayed_from_a, "{on_b}");
    for (metrics, outcome) in [
        (&on_a, "unsent"),
        (&on_a, "missed"),
        (&on_b, "unsent"),
        (&on_b, "missed"),
    ] {
        assert_eq!(relay_count(metrics, outcome), 0, "{outcome}: {metrics}");
    }
    eprintln!(
        "publish on A to receive over {DELAY_ROUNDS} rounds each: on B median {:?}, max {:?}; \
         on A (baseline) median {:?}, max {:?}",
        relayed[DELAY_ROUNDS / 2],
        relayed[DELAY_ROUNDS - 1],
        local[DELAY_ROUNDS / 2],
        local[DELAY_ROUNDS - 1]
    );
}

// Proves a stalled subscriber on broker B drops and counts (in B's channel counters)
// while a WebSocket subscriber on B and one on A, fed by a publisher on A, receive every
// message in lockstep; the publisher's answers count A's subscriber only.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stalled_subscriber_on_one_broker_drops_without_slowing_the_others() {
    /// Large, so the stalled reader's socket buffers fill after a bounded number.
    const MESSAGE_BYTES: usize = 5000;
    /// The test fails if the stalled subscriber has not dropped by then.
    const MESSAGES_MAX: usize = 3000;
    let message = |n: usize| {
        let mut text = format!("{n:08}:").into_bytes();
        text.resize(MESSAGE_BYTES, b'a' + (n % 26) as u8);
        Bytes::from(text)
    };
    let Some((a, b, _dirs)) = two_brokers(&["--socket-send-buffer-bytes", "4096"]).await else {
        return;
    };
    assert!(a.client().create_channel("drivers", 4, 64).await.unwrap());
    assert!(b.client().create_channel("drivers", 4, 4).await.unwrap());
    let mut a_ws = a.client().subscribe("drivers").await.unwrap();
    let mut b_ws = b.client().subscribe("drivers").await.unwrap();
    let stalled_options = SubscribeOptions {
        recv_buffer_bytes: Some(4096),
    };
    let _stalled = b
        .client()
        .subscribe_with("drivers", stalled_options)
        .await
        .unwrap();
    await_relay(&a, &mut b_ws).await;

    let (mut published, mut first_drop) = (0, None);
    while first_drop.is_none_or(|at| published < at + 20) {
        assert!(
            published < MESSAGES_MAX,
            "the stalled subscriber never dropped"
        );
        let delivery = a
            .client()
            .publish_channel("drivers", message(published))
            .await
            .unwrap();
        assert_eq!((delivery.delivered, delivery.dropped), (1, 0));
        assert_eq!(next_message(&mut b_ws).await, message(published));
        assert_eq!(next_message(&mut a_ws).await, message(published));
        published += 1;
        if first_drop.is_none() {
            let on_b = b.client().list_channels().await.unwrap();
            if on_b[0].dropped > 0 {
                first_drop = Some(published);
            }
        }
    }
    let on_b = b.client().list_channels().await.unwrap();
    assert!(on_b[0].dropped >= 20, "{:?}", on_b[0]);
    assert_eq!(on_b[0].subscribers, 2);
    let on_a = a.client().list_channels().await.unwrap();
    assert_eq!(on_a[0].dropped, 0, "{:?}", on_a[0]);
}

// Proves what a dropped listening connection loses, and that it is counted: with every
// broker's listening connection ended by the database (`pg_terminate_backend`), messages
// published on A meanwhile never reach B's subscriber; B reconnects by itself, relays
// again, and counts the messages it never got as `missed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn messages_lost_while_a_listener_is_down_are_counted_as_missed() {
    const PUBLISHED: usize = 20;
    let Some(url) = common::fresh_postgres_database().await else {
        return;
    };
    let dirs = [temp_dir(), temp_dir()];
    let a = ServerProcess::start(dirs[0].path(), &["--store", &url]);
    let b = ServerProcess::start(dirs[1].path(), &["--store", &url]);
    for server in [&a, &b] {
        assert!(server
            .client()
            .create_channel("drivers", 4, 1024)
            .await
            .unwrap());
    }
    let mut b_ws = b.client().subscribe("drivers").await.unwrap();
    await_relay(&a, &mut b_ws).await;
    let (admin, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let ended = admin
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = current_database() AND query LIKE 'LISTEN%' \
             AND pid <> pg_backend_pid()",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(ended.len(), 2, "one listening connection per broker");
    for n in 0..PUBLISHED {
        a.client()
            .publish_channel("drivers", format!("lost? {n}"))
            .await
            .unwrap();
    }
    // Probes until one arrives: B listens again. Count what came through of the rest.
    let deadline = Deadline::new("B listening again");
    let mut arrived = 0;
    'listening: loop {
        deadline.check();
        a.client()
            .publish_channel("drivers", "probe again")
            .await
            .unwrap();
        while let Ok(Some(message)) =
            tokio::time::timeout(Duration::from_millis(200), b_ws.next()).await
        {
            let message = message.unwrap();
            if message == "probe again" {
                break 'listening;
            }
            if message.starts_with(b"lost? ") {
                arrived += 1;
            }
        }
    }
    assert!(
        arrived < PUBLISHED,
        "some were published while B was not listening"
    );
    let missed = relay_count(&b.client().metrics().await.unwrap(), "missed");
    assert!(
        missed >= (PUBLISHED - arrived) as u64,
        "{missed} missed, {arrived} of {PUBLISHED} arrived"
    );
}
