//! `mailroom demo`: the live-channel scenario against a running server.
//!
//! Driver locations are published to one channel with three subscribers: a rider's map
//! and an ETA recalculator that keep up, and a metrics sampler on a bad connection (a
//! tiny socket buffer, and a pause after each message while updates are flowing). The
//! slow one misses updates; the publisher never waits for it and the other two receive
//! every update. The counts are printed at the end.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;
use mailroom_client::SubscribeOptions;
use serde_json::json;

use crate::api::{Api, Messages};
use crate::output::Output;

/// The slow subscriber's socket receive buffer: small, so it pushes back quickly.
const SLOW_RECV_BUFFER_BYTES: u32 = 4096;
/// Points of recent trail sent with each location (what a map draws behind the car);
/// they make an update about 1.5 KiB, so a stalled reader fills its socket buffers
/// within a few thousand updates and the server-side mailbox starts dropping.
const TRAIL_POINTS: usize = 40;
/// How long the demo waits for its three subscribers to connect.
const CONNECT_TIMEOUT_MS: u64 = 5_000;
/// The most drivers: each keeps a trail in memory, so an unbounded count could ask for
/// more memory than the machine has.
const DRIVERS_MAX: u64 = 100_000;

/// Flags of `demo`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The channel to use (created, then closed at the end).
    #[arg(long, default_value = "demo-driver-locations", value_parser = crate::names::channel)]
    channel: String,
    /// How many drivers report locations (1 to 100,000).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=DRIVERS_MAX))]
    drivers: u64,
    /// How many location updates to publish in all.
    #[arg(long, default_value_t = 5_000)]
    updates: u64,
    /// Messages each subscriber's mailbox holds on the server.
    #[arg(long, default_value_t = 32)]
    mailbox_capacity: u64,
    /// The slow subscriber's pause after each message, in milliseconds.
    #[arg(long, default_value_t = 20)]
    slow_delay_ms: u64,
}

struct Listener {
    name: &'static str,
    received: u64,
}

/// Runs the scenario and prints what each subscriber received.
pub async fn run(client: &impl Api, args: Args, output: Output) -> anyhow::Result<()> {
    client
        .create_channel(&args.channel, 3, args.mailbox_capacity, None)
        .await
        .context("creating the demo channel")?;
    let publishing = Arc::new(AtomicBool::new(true));
    let fast = SubscribeOptions::default();
    let slow = SubscribeOptions {
        recv_buffer_bytes: Some(SLOW_RECV_BUFFER_BYTES),
    };
    let delay = Duration::from_millis(args.slow_delay_ms);
    let mut listeners = Vec::new();
    for (name, options, pause) in [
        ("rider-map", fast, Duration::ZERO),
        ("eta-recalculator", fast, Duration::ZERO),
        ("metrics-sampler (slow)", slow, delay),
    ] {
        let subscription = client.subscribe_with(&args.channel, options).await?;
        let publishing = publishing.clone();
        listeners.push(tokio::spawn(listen(name, subscription, pause, publishing)));
    }
    wait_for_subscribers(client, &args.channel, 3).await?;

    let started = Instant::now();
    let (mut delivered, mut dropped) = (0u64, 0u64);
    let drivers = args.drivers;
    let mut trails = vec![std::collections::VecDeque::new(); drivers as usize];
    for update in 0..args.updates {
        let driver = update % drivers;
        let (lat, lon) = (
            52.52 + (update as f64) * 1e-5,
            13.40 + (driver as f64) * 1e-3,
        );
        let trail = &mut trails[driver as usize];
        if trail.len() == TRAIL_POINTS {
            trail.pop_front();
        }
        trail.push_back([lat, lon]);
        let location =
            json!({ "driver": driver, "seq": update, "lat": lat, "lon": lon, "trail": trail });
        let delivery = client
            .publish_channel(&args.channel, Bytes::from(location.to_string()))
            .await?;
        delivered += delivery.delivered;
        dropped += delivery.dropped;
    }
    let elapsed = started.elapsed();
    publishing.store(false, Ordering::Release);
    client.close_channel(&args.channel).await?;

    let mut received = Vec::new();
    for listener in listeners {
        let listener = listener.await??;
        received.push(json!({ "subscriber": listener.name, "received": listener.received }));
        output.emit(
            json!({ "subscriber": listener.name, "received": listener.received }),
            || {
                format!(
                    "{:<24} received {:>6} of {} ({} dropped)",
                    listener.name,
                    listener.received,
                    args.updates,
                    // Saturating: another publisher on the same channel could add more.
                    args.updates.saturating_sub(listener.received)
                )
            },
        );
    }
    let summary = json!({
        "published": args.updates, "delivered": delivered, "dropped": dropped,
        "publish_seconds": elapsed.as_secs_f64(),
    });
    output.emit(summary, || {
        format!(
            "published {} updates in {:.2}s: {delivered} deliveries, {dropped} drops",
            args.updates,
            elapsed.as_secs_f64()
        )
    });
    Ok(())
}

async fn listen(
    name: &'static str,
    mut subscription: impl Messages,
    pause: Duration,
    publishing: Arc<AtomicBool>,
) -> anyhow::Result<Listener> {
    let mut received = 0;
    while let Some(message) = subscription.next_message().await {
        message?;
        received += 1;
        // A bad connection only while updates flow; afterwards it drains at full speed.
        if !pause.is_zero() && publishing.load(Ordering::Acquire) {
            tokio::time::sleep(pause).await;
        }
    }
    Ok(Listener { name, received })
}

async fn wait_for_subscribers(client: &impl Api, channel: &str, count: u64) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_millis(CONNECT_TIMEOUT_MS);
    loop {
        let channels = client.list_channels().await?;
        if channels
            .iter()
            .any(|c| c.name == channel && c.subscribers >= count)
        {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "subscribers did not connect in time"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::Fake;

    // Proves the scenario's calls: a channel for three subscribers, two fast and one with
    // the small socket buffer, a wait until they are connected, every update published,
    // then the channel closed, with each subscription read to its end.
    #[tokio::test]
    async fn the_scenario_publishes_every_update_then_closes() {
        let fake = Fake::with_messages(&["a", "b"]);
        let args = Args {
            channel: "c".into(),
            drivers: 2,
            updates: 3,
            mailbox_capacity: 8,
            slow_delay_ms: 0,
        };
        run(&fake, args, Output { json: true }).await.unwrap();
        let calls = fake.calls();
        let buffer = format!("subscribe_with c buffer {SLOW_RECV_BUFFER_BYTES}");
        assert_eq!(
            calls[..5],
            [
                "create_channel c 3 8",
                "subscribe_with c default",
                "subscribe_with c default",
                buffer.as_str(),
                "list_channels",
            ]
        );
        let published = calls[5..8]
            .iter()
            .filter(|call| call.starts_with("publish_channel c ("));
        assert_eq!(published.count(), 3, "{calls:?}");
        assert_eq!(calls[8..], ["close_channel c"]);
        assert_eq!(fake.messages_read(), 3 * 2);
    }
}
