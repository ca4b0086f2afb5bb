//! Live driver locations fanned out to three listeners, one of them on a bad connection.
//!
//! A dispatcher publishes a location update every 2 ms for about two seconds. Three
//! subscribers each run on their own thread, with no async runtime:
//! - `rider-map-websocket`: pushes to a rider's phone over a bad connection (20 ms per send),
//!   so its mailbox fills and it misses updates, which is fine: a newer one follows;
//! - `eta-recalculator`: keeps up, so it sees every update;
//! - `metrics-sampler`: wakes every 100 ms and drains whatever is buffered.
//!
//! The dispatcher never waits for any of them. When it is done it drops the broker, which
//! closes every subscription; each listener drains its mailbox and exits, then the program
//! prints what each one received and dropped.
//!
//! Run: `cargo run -p mailroom --example live_locations`

use mailroom::broadcast::{BroadcastError, Broker, Subscription, SubscriptionStats};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

/// One GPS fix from a driver's phone.
#[derive(Debug)]
struct Location {
    driver_id: u32,
    sequence: u64,
    latitude: f64,
    longitude: f64,
}

const UPDATES: u64 = 1_000;
const UPDATE_INTERVAL: Duration = Duration::from_millis(2);
const MAILBOX_CAPACITY: usize = 16;
const SUBSCRIBERS_MAX: usize = 8;

fn main() -> Result<(), BroadcastError> {
    // Payloads are cloned once per subscriber, so share them behind an Arc.
    let broker: Broker<Arc<Location>> = Broker::new(SUBSCRIBERS_MAX, MAILBOX_CAPACITY)?;

    let listeners = vec![
        spawn_listener("rider-map-websocket", broker.subscribe()?, |_| {
            thread::sleep(Duration::from_millis(20)); // a slow, lossy mobile link
        }),
        spawn_listener("eta-recalculator", broker.subscribe()?, |location| {
            let _eta_s = (location.latitude.abs() + location.longitude.abs()) * 60.0;
        }),
        spawn_sampler(
            "metrics-sampler",
            broker.subscribe()?,
            Duration::from_millis(100),
        ),
    ];

    let mut dropped_total = 0;
    for sequence in 0..UPDATES {
        let location = Location {
            driver_id: 42,
            sequence,
            latitude: 52.52 + sequence as f64 * 1e-5,
            longitude: 13.40 + sequence as f64 * 1e-5,
        };
        let delivery = broker.publish(Arc::new(location))?;
        dropped_total += delivery.dropped;
        thread::sleep(UPDATE_INTERVAL);
    }
    let stats = broker.stats();
    drop(broker); // the last handle: closes every subscription

    println!(
        "published {} updates; {} deliveries, {} dropped ({} seen by the publisher)",
        stats.published, stats.delivered, stats.dropped, dropped_total
    );
    println!(
        "{:<22} {:>9} {:>8} {:>10}",
        "subscriber", "received", "dropped", "last seq"
    );
    for listener in listeners {
        let (name, stats, last) = listener.join().expect("listener thread panicked");
        let last = last.map_or_else(|| "-".to_string(), |seq| seq.to_string());
        println!(
            "{name:<22} {:>9} {:>8} {last:>10}",
            stats.received, stats.dropped
        );
    }
    Ok(())
}

type Report = (&'static str, SubscriptionStats, Option<u64>);

/// A listener that handles each update as it arrives, blocking between updates.
fn spawn_listener(
    name: &'static str,
    subscription: Subscription<Arc<Location>>,
    handle: impl Fn(&Location) + Send + 'static,
) -> thread::JoinHandle<Report> {
    thread::spawn(move || {
        let mut last = None;
        while let Some(location) = subscription.recv_blocking() {
            assert_eq!(location.driver_id, 42);
            handle(&location);
            last = Some(location.sequence);
        }
        (name, subscription.stats(), last)
    })
}

/// A listener that wakes on a timer and drains whatever is buffered.
fn spawn_sampler(
    name: &'static str,
    subscription: Subscription<Arc<Location>>,
    period: Duration,
) -> thread::JoinHandle<Report> {
    thread::spawn(move || {
        let mut last = None;
        loop {
            let closed = subscription.is_closed();
            while let Some(location) = subscription.poll() {
                last = Some(location.sequence);
            }
            if closed {
                break; // closed before the drain: nothing can arrive after it
            }
            thread::sleep(period);
        }
        (name, subscription.stats(), last)
    })
}
