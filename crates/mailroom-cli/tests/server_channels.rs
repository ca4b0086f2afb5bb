//! Live channels end to end: WebSocket and SSE subscribers, a slow subscriber, the cap,
//! and closing.

mod common;

use bytes::Bytes;
use common::{temp_dir, Deadline, ServerProcess, SseReader};
use mailroom_client::SubscribeOptions;

/// Each message is this large, so a stalled reader's socket buffers fill after a bounded
/// number of messages and its server-side mailbox starts dropping.
const MESSAGE_BYTES: usize = 64 << 10;
/// The test fails if the slow subscriber has not dropped by then.
const MESSAGES_MAX: usize = 2_000;
/// Messages published after the first drop, to show drops keep the others whole.
const MESSAGES_AFTER_FIRST_DROP: usize = 20;

fn message(n: usize) -> Bytes {
    let mut text = format!("{n:08}:").into_bytes();
    text.resize(MESSAGE_BYTES, b'a' + (n % 26) as u8);
    Bytes::from(text)
}

// Proves the slow-subscriber rule over the network: a WebSocket subscriber that stops
// reading drops messages (counted in the publish answers), while a WebSocket and an SSE
// subscriber that keep up receive every message in order; the publisher is never
// refused or held. After DELETE, every stream ends once drained, and the slow one
// received exactly what was not counted as dropped for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_subscriber_drops_while_others_receive_everything() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &[]);
    let client = server.client();
    assert!(client.create_channel("drivers", 3, 4).await.unwrap());

    let mut fast_ws = client.subscribe("drivers").await.unwrap();
    let slow_options = SubscribeOptions {
        recv_buffer_bytes: Some(4096),
    };
    let mut slow_ws = client
        .subscribe_with("drivers", slow_options)
        .await
        .unwrap();
    let sse = reqwest::get(server.at("/v1/channels/drivers/events"))
        .await
        .unwrap();
    assert_eq!(sse.status(), 200);
    let mut fast_sse = SseReader::new(sse);

    // The cap: a fourth subscriber is refused, over either transport.
    let over = client.subscribe("drivers").await.unwrap_err();
    assert_eq!(
        (over.status(), over.code()),
        (Some(409), Some("subscriber_limit"))
    );
    let over_sse = reqwest::get(server.at("/v1/channels/drivers/events"))
        .await
        .unwrap();
    assert_eq!(over_sse.status(), 409);

    // Lockstep: publish, then both fast subscribers take that message; the slow one never
    // reads, so only its mailbox can fill.
    let (mut published, mut slow_dropped, mut first_drop) = (0, 0, None);
    while first_drop.is_none_or(|at| published < at + MESSAGES_AFTER_FIRST_DROP) {
        assert!(
            published < MESSAGES_MAX,
            "the stalled subscriber never dropped"
        );
        let delivery = client
            .publish_channel("drivers", message(published))
            .await
            .unwrap();
        assert_eq!(delivery.delivered + delivery.dropped, 3);
        assert!(delivery.dropped <= 1, "only the slow subscriber may drop");
        slow_dropped += delivery.dropped;
        if delivery.dropped == 1 && first_drop.is_none() {
            first_drop = Some(published);
        }
        assert_eq!(fast_ws.next().await.unwrap().unwrap(), message(published));
        let event = fast_sse.next().await.unwrap();
        assert_eq!(
            (event.event, event.data.into_bytes()),
            (None, message(published).to_vec())
        );
        published += 1;
    }

    let info = client.list_channels().await.unwrap();
    assert_eq!(
        (info[0].published, info[0].dropped),
        (published as u64, slow_dropped)
    );

    // Close: the fast streams end; the slow one drains what it had, then ends.
    client.close_channel("drivers").await.unwrap();
    assert!(fast_ws.next().await.is_none());
    assert!(fast_sse.next().await.is_none());
    let mut slow_received = Vec::new();
    while let Some(message) = slow_ws.next().await {
        slow_received.push(message.unwrap());
    }
    assert_eq!(slow_received.len() as u64 + slow_dropped, published as u64);
    // What it kept is the oldest messages, in order (drop-newest).
    for (n, received) in slow_received.iter().enumerate() {
        assert_eq!(received, &message(n));
    }
    let gone = client.publish_channel("drivers", "late").await.unwrap_err();
    assert_eq!(gone.code(), Some("unknown_channel"));
    let metrics = client.metrics().await.unwrap();
    let drops = format!("mailroom_channel_drops_total{{channel=\"drivers\"}} {slow_dropped}");
    assert!(metrics.contains(&drops), "{metrics}");
}

// Proves payloads that SSE cannot carry as text arrive base64-encoded, multi-line text
// arrives whole, WebSocket carries binary frames, and a disconnect frees the slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn encodings_and_slots() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &[]);
    let client = server.client();
    client.create_channel("c", 2, 16).await.unwrap();
    let mut ws = client.subscribe("c").await.unwrap();
    let mut sse = SseReader::new(
        reqwest::get(server.at("/v1/channels/c/events"))
            .await
            .unwrap(),
    );

    let payloads = [
        Bytes::from_static(b"two\nlines"),
        Bytes::from_static(b"carriage\rreturn"),
        Bytes::from_static(&[0xff, 0x00, 0x01]),
    ];
    for payload in &payloads {
        let delivery = client.publish_channel("c", payload.clone()).await.unwrap();
        assert_eq!((delivery.delivered, delivery.dropped), (2, 0));
    }
    for payload in &payloads {
        assert_eq!(&ws.next().await.unwrap().unwrap(), payload);
    }
    let text = sse.next().await.unwrap();
    assert_eq!(
        (text.event.as_deref(), text.data.as_str()),
        (None, "two\nlines")
    );
    for payload in &payloads[1..] {
        use base64::Engine as _;
        let event = sse.next().await.unwrap();
        assert_eq!(event.event.as_deref(), Some("base64"));
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(event.data)
            .unwrap();
        assert_eq!(&decoded[..], &payload[..]);
    }

    // Full, then a subscriber leaves and its slot is free again.
    assert_eq!(
        client.subscribe("c").await.unwrap_err().code(),
        Some("subscriber_limit")
    );
    ws.close().await.unwrap();
    let deadline = Deadline::new("the closed subscriber's slot to be freed");
    let reconnected = loop {
        deadline.check();
        match client.subscribe("c").await {
            Ok(subscription) => break subscription,
            Err(error) => assert_eq!(error.code(), Some("subscriber_limit")),
        }
        tokio::task::yield_now().await;
    };
    drop(reconnected);
    drop(sse);
}

/// The burst: more bytes than the kernel's socket buffers (4 MiB send buffer at most on
/// Linux by default) and the server writer's own batch can hold, so the rest waits in the
/// mailbox and the writer drains it in batches once the subscriber reads again.
const BURST_MESSAGES: usize = 1_200;
/// Bytes per burst message (12 MiB in all).
const BURST_MESSAGE_BYTES: usize = 10 << 10;

/// Burst message `n`: UTF-8 text for even `n`, bytes that are not UTF-8 for odd `n`, so
/// a batch mixes text and binary frames.
fn burst_message(n: usize) -> Bytes {
    let mut bytes = format!("{n:08}:").into_bytes();
    bytes.resize(BURST_MESSAGE_BYTES, b'a' + (n % 26) as u8);
    if n % 2 == 1 {
        bytes[BURST_MESSAGE_BYTES - 1] = 0xff;
    }
    Bytes::from(bytes)
}

// Proves a burst that piles up in a WebSocket subscriber's mailbox (published while it
// does not read, faster than the socket takes it) arrives complete, in order and byte for
// byte once it reads, with text and binary messages mixed in one batch, and nothing
// counted as dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn burst_arrives_complete_and_in_order() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &[]);
    let client = server.client();
    // The whole burst fits the mailbox by count and by bytes: nothing may drop.
    let settings = mailroom_client::CreateChannel {
        max_subscribers: Some(1),
        mailbox_capacity: Some(BURST_MESSAGES),
        mailbox_bytes: Some(2 * BURST_MESSAGES * BURST_MESSAGE_BYTES),
    };
    client
        .create_channel_with("burst", &settings)
        .await
        .unwrap();
    let options = SubscribeOptions {
        recv_buffer_bytes: Some(4096),
    };
    let mut subscriber = client.subscribe_with("burst", options).await.unwrap();

    for n in 0..BURST_MESSAGES {
        let delivery = client
            .publish_channel("burst", burst_message(n))
            .await
            .unwrap();
        assert_eq!((delivery.delivered, delivery.dropped), (1, 0));
    }
    for n in 0..BURST_MESSAGES {
        let received = subscriber.next().await.unwrap().unwrap();
        assert!(received == burst_message(n), "message {n} differs");
    }
    let info = client.list_channels().await.unwrap();
    assert_eq!(
        (info[0].published, info[0].delivered, info[0].dropped),
        (BURST_MESSAGES as u64, BURST_MESSAGES as u64, 0)
    );
    client.close_channel("burst").await.unwrap();
    assert!(subscriber.next().await.is_none());
}
