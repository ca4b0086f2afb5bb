//! Fan-out throughput of `mailroom::broadcast` beside its peers, measured side by side:
//! `tokio::sync::broadcast`, `async-broadcast`, and a hand-rolled `Vec<Mutex<VecDeque>>`.
//!
//! Regimes (1 publisher, N subscribers, `u64` payloads, throughput = deliveries). mailroom
//! appears three times in the burst regimes: per-message `publish` + `poll` ("mailroom"),
//! drained with `poll_many` ("mailroom (poll_many)"), and additionally published with one
//! `publish_batch` per burst ("mailroom (publish_batch)").
//! - `burst/<peer>/<N>`: one thread publishes 256 messages, then drains every subscriber.
//! - `threaded/<peer>/<N>`: each subscriber on its own thread, woken by the peer's own
//!   blocking receive; the publisher sends 256, then waits until everyone caught up.
//! - `stall_burst/<peer>/16` and `stall_threaded/<peer>/4`: as above, but one subscriber never
//!   reads; throughput counts only the others' deliveries, to compare with the no-stall run.
//!
//! Run: `cargo bench -p mailroom --bench broadcast -- --warm-up-time 0.3 --measurement-time 1`
//! then `python3 crates/mailroom/scripts/bench-broadcast-table.py <target>/criterion`.

// criterion's macros generate undocumented public items.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::collections::VecDeque;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Messages per burst (and per threaded round).
const BURST: u64 = 256;
/// Mailbox / channel capacity: a whole burst fits, so "keeping up" means no drops.
const CAPACITY: usize = 256;
const BURST_SUBSCRIBERS: [usize; 6] = [1, 4, 16, 64, 256, 1024];
/// More consumer threads than this, on a 2-core machine, measures the OS scheduler.
const THREADED_SUBSCRIBERS: [usize; 3] = [1, 4, 16];

/// One fan-out implementation, driven from a single thread.
trait Fanout {
    /// `subscribers` subscribers; the first `stalled` of them are never drained.
    fn new(subscribers: usize, stalled: usize) -> Self;
    fn publish(&mut self, message: u64);
    /// Drains every non-stalled subscriber; returns how many messages came out.
    fn drain(&mut self) -> u64;
}

struct Mailroom {
    broker: mailroom::broadcast::Broker<u64>,
    subs: Vec<mailroom::broadcast::Subscription<u64>>,
    stalled: usize,
}

impl Fanout for Mailroom {
    fn new(subscribers: usize, stalled: usize) -> Self {
        let broker = mailroom::broadcast::Broker::new(subscribers, CAPACITY).unwrap();
        let subs = (0..subscribers)
            .map(|_| broker.subscribe().unwrap())
            .collect();
        Self {
            broker,
            subs,
            stalled,
        }
    }
    fn publish(&mut self, message: u64) {
        black_box(self.broker.publish(message).unwrap());
    }
    fn drain(&mut self) -> u64 {
        let mut n = 0;
        for sub in &self.subs[self.stalled..] {
            while let Some(m) = sub.poll() {
                black_box(m);
                n += 1;
            }
        }
        n
    }
}

/// mailroom drained in batches: one consumer-lock hold per subscriber per drain.
struct MailroomPollMany {
    inner: Mailroom,
    /// Reused across drains, so the measurement holds no allocation.
    buf: Vec<u64>,
}

impl Fanout for MailroomPollMany {
    fn new(subscribers: usize, stalled: usize) -> Self {
        Self {
            inner: Mailroom::new(subscribers, stalled),
            buf: Vec::with_capacity(CAPACITY),
        }
    }
    fn publish(&mut self, message: u64) {
        self.inner.publish(message);
    }
    fn drain(&mut self) -> u64 {
        let mut n = 0;
        for sub in &self.inner.subs[self.inner.stalled..] {
            while sub.poll_many(&mut self.buf, CAPACITY) > 0 {
                n += self.buf.drain(..).map(black_box).count() as u64;
            }
        }
        n
    }
}

/// mailroom batched at both ends: a burst goes out in one `publish_batch` (one broker-lock
/// hold), then drains as `MailroomPollMany` does. Compare with that row to see what
/// `publish_batch` alone adds.
struct MailroomPublishBatch {
    inner: MailroomPollMany,
    /// The burst being gathered; published as one batch when the drain starts.
    pending: Vec<u64>,
}

impl Fanout for MailroomPublishBatch {
    fn new(subscribers: usize, stalled: usize) -> Self {
        Self {
            inner: MailroomPollMany::new(subscribers, stalled),
            pending: Vec::with_capacity(BURST as usize),
        }
    }
    fn publish(&mut self, message: u64) {
        self.pending.push(message);
    }
    fn drain(&mut self) -> u64 {
        let batch = self.pending.drain(..);
        black_box(self.inner.inner.broker.publish_batch(batch).unwrap());
        self.inner.drain()
    }
}

struct Tokio {
    tx: tokio::sync::broadcast::Sender<u64>,
    rxs: Vec<tokio::sync::broadcast::Receiver<u64>>,
    stalled: usize,
}

impl Fanout for Tokio {
    fn new(subscribers: usize, stalled: usize) -> Self {
        let (tx, first) = tokio::sync::broadcast::channel(CAPACITY);
        let mut rxs = vec![first];
        rxs.extend((1..subscribers).map(|_| tx.subscribe()));
        Self { tx, rxs, stalled }
    }
    fn publish(&mut self, message: u64) {
        black_box(self.tx.send(message).unwrap());
    }
    fn drain(&mut self) -> u64 {
        let mut n = 0;
        for rx in &mut self.rxs[self.stalled..] {
            while let Ok(m) = rx.try_recv() {
                black_box(m);
                n += 1;
            }
        }
        n
    }
}

struct AsyncBroadcast {
    tx: async_broadcast::Sender<u64>,
    rxs: Vec<async_broadcast::Receiver<u64>>,
}

impl Fanout for AsyncBroadcast {
    fn new(subscribers: usize, stalled: usize) -> Self {
        // A stalled receiver would make every send fail (or, in overflow mode, drop the
        // oldest for everyone): that peer has no per-subscriber slow-consumer mode.
        assert_eq!(
            stalled, 0,
            "async-broadcast cannot isolate a stalled receiver"
        );
        let (tx, first) = async_broadcast::broadcast(CAPACITY);
        let mut rxs = vec![first];
        rxs.extend((1..subscribers).map(|_| tx.new_receiver()));
        Self { tx, rxs }
    }
    fn publish(&mut self, message: u64) {
        black_box(self.tx.try_broadcast(message).unwrap());
    }
    fn drain(&mut self) -> u64 {
        let mut n = 0;
        for rx in &mut self.rxs {
            while let Ok(m) = rx.try_recv() {
                black_box(m);
                n += 1;
            }
        }
        n
    }
}

/// The obvious hand-rolled design: one mutex-guarded deque per subscriber.
struct MutexDeques {
    boxes: Vec<Mutex<VecDeque<u64>>>,
    stalled: usize,
}

impl MutexDeques {
    fn offer(queue: &Mutex<VecDeque<u64>>, message: u64) -> bool {
        let mut queue = queue.lock().unwrap();
        let room = queue.len() < CAPACITY;
        if room {
            queue.push_back(message);
        }
        room
    }
}

impl Fanout for MutexDeques {
    fn new(subscribers: usize, stalled: usize) -> Self {
        let boxes = (0..subscribers)
            .map(|_| Mutex::new(VecDeque::with_capacity(CAPACITY)))
            .collect();
        Self { boxes, stalled }
    }
    fn publish(&mut self, message: u64) {
        let delivered = self
            .boxes
            .iter()
            .filter(|q| Self::offer(q, message))
            .count();
        black_box(delivered);
    }
    fn drain(&mut self) -> u64 {
        let mut n = 0;
        for queue in &self.boxes[self.stalled..] {
            while let Some(m) = queue.lock().unwrap().pop_front() {
                black_box(m);
                n += 1;
            }
        }
        n
    }
}

/// Times `iters` bursts of publish-256-then-drain.
fn run_bursts<F: Fanout>(subscribers: usize, stalled: usize, iters: u64) -> Duration {
    let mut fanout = F::new(subscribers, stalled);
    // Fill the stalled mailboxes first, so every measured publish finds them full.
    for m in 0..CAPACITY as u64 {
        fanout.publish(m);
    }
    fanout.drain();
    let expected = BURST * (subscribers - stalled) as u64;
    let start = Instant::now();
    for _ in 0..iters {
        for m in 0..BURST {
            fanout.publish(m);
        }
        assert_eq!(fanout.drain(), expected);
    }
    start.elapsed()
}

fn burst(c: &mut Criterion) {
    let mut group = c.benchmark_group("burst");
    for n in BURST_SUBSCRIBERS {
        group.throughput(Throughput::Elements(BURST * n as u64));
        group.bench_function(BenchmarkId::new("mailroom", n), |b| {
            b.iter_custom(|i| run_bursts::<Mailroom>(n, 0, i))
        });
        group.bench_function(BenchmarkId::new("mailroom (poll_many)", n), |b| {
            b.iter_custom(|i| run_bursts::<MailroomPollMany>(n, 0, i))
        });
        group.bench_function(BenchmarkId::new("mailroom (publish_batch)", n), |b| {
            b.iter_custom(|i| run_bursts::<MailroomPublishBatch>(n, 0, i))
        });
        group.bench_function(BenchmarkId::new("tokio", n), |b| {
            b.iter_custom(|i| run_bursts::<Tokio>(n, 0, i))
        });
        group.bench_function(BenchmarkId::new("async-broadcast", n), |b| {
            b.iter_custom(|i| run_bursts::<AsyncBroadcast>(n, 0, i))
        });
        group.bench_function(BenchmarkId::new("mutex-vecdeque", n), |b| {
            b.iter_custom(|i| run_bursts::<MutexDeques>(n, 0, i))
        });
    }
    group.finish();
}

fn stall_burst(c: &mut Criterion) {
    const N: usize = 16;
    let mut group = c.benchmark_group("stall_burst");
    group.throughput(Throughput::Elements(BURST * (N as u64 - 1)));
    group.bench_function(BenchmarkId::new("mailroom", N), |b| {
        b.iter_custom(|i| run_bursts::<Mailroom>(N, 1, i))
    });
    group.bench_function(BenchmarkId::new("mailroom (poll_many)", N), |b| {
        b.iter_custom(|i| run_bursts::<MailroomPollMany>(N, 1, i))
    });
    group.bench_function(BenchmarkId::new("mailroom (publish_batch)", N), |b| {
        b.iter_custom(|i| run_bursts::<MailroomPublishBatch>(N, 1, i))
    });
    group.bench_function(BenchmarkId::new("tokio", N), |b| {
        b.iter_custom(|i| run_bursts::<Tokio>(N, 1, i))
    });
    group.bench_function(BenchmarkId::new("mutex-vecdeque", N), |b| {
        b.iter_custom(|i| run_bursts::<MutexDeques>(N, 1, i))
    });
    group.finish();
}

/// A per-consumer delivery counter on its own cache line.
#[repr(align(128))]
#[derive(Default)]
struct Counter(AtomicU64);

/// A running threaded setup: a publish function, consumer threads and their counters.
struct Threaded {
    publish: Box<dyn FnMut(u64)>,
    counters: Vec<Arc<Counter>>,
    /// Ends the consumers (closes the channel or raises a flag).
    shutdown: Box<dyn FnOnce()>,
    consumers: Vec<JoinHandle<()>>,
}

impl Threaded {
    /// Times `iters` rounds: publish a burst, then wait until every live consumer has it.
    fn run(mut self, iters: u64) -> Duration {
        let mut target = 0;
        let start = Instant::now();
        for _ in 0..iters {
            for m in 0..BURST {
                (self.publish)(m);
            }
            target += BURST;
            for counter in &self.counters {
                while counter.0.load(Ordering::Acquire) < target {
                    thread::yield_now();
                }
            }
        }
        let elapsed = start.elapsed();
        // The publish closure may own a sender whose drop is what closes the channel.
        drop(self.publish);
        (self.shutdown)();
        self.consumers.into_iter().for_each(|c| c.join().unwrap());
        elapsed
    }
}

/// Spawns one consumer thread per element of `receivers`, each counting what `next` yields.
fn spawn_consumers<R: Send + 'static>(
    receivers: Vec<R>,
    next: fn(&mut R) -> Option<u64>,
) -> (Vec<Arc<Counter>>, Vec<JoinHandle<()>>) {
    let counters: Vec<Arc<Counter>> = receivers.iter().map(|_| Arc::default()).collect();
    let consumers = receivers
        .into_iter()
        .zip(&counters)
        .map(|(mut rx, counter)| {
            let counter = Arc::clone(counter);
            thread::spawn(move || {
                while let Some(m) = next(&mut rx) {
                    black_box(m);
                    counter.0.fetch_add(1, Ordering::Release);
                }
            })
        })
        .collect();
    (counters, consumers)
}

fn threaded_mailroom(subscribers: usize, stalled: usize) -> Threaded {
    let broker = mailroom::broadcast::Broker::new(subscribers, CAPACITY * 4).unwrap();
    let mut subs: Vec<_> = (0..subscribers)
        .map(|_| broker.subscribe().unwrap())
        .collect();
    let stalled_subs: Vec<_> = subs.drain(..stalled).collect();
    for m in 0..(CAPACITY * 4) as u64 {
        broker.publish(m).unwrap(); // fills the stalled mailboxes; no consumer runs yet
    }
    subs.iter().for_each(|s| while s.poll().is_some() {});
    let (counters, consumers) = spawn_consumers(subs, |s| s.recv_blocking());
    let closer = broker.clone();
    Threaded {
        publish: Box::new(move |m| {
            black_box(broker.publish(m).unwrap());
        }),
        counters,
        shutdown: Box::new(move || {
            closer.close();
            drop(stalled_subs);
        }),
        consumers,
    }
}

fn threaded_tokio(subscribers: usize, stalled: usize) -> Threaded {
    let (tx, first) = tokio::sync::broadcast::channel(CAPACITY * 4);
    let mut rxs = vec![first];
    rxs.extend((1..subscribers).map(|_| tx.subscribe()));
    let stalled_rxs: Vec<_> = rxs.drain(..stalled).collect();
    let (counters, consumers) = spawn_consumers(rxs, |rx| loop {
        match rx.blocking_recv() {
            Ok(m) => return Some(m),
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
        }
    });
    let tx = Arc::new(tx);
    let sender = Arc::clone(&tx);
    Threaded {
        publish: Box::new(move |m| {
            black_box(sender.send(m).unwrap());
        }),
        counters,
        shutdown: Box::new(move || drop((tx, stalled_rxs))),
        consumers,
    }
}

fn threaded_async_broadcast(subscribers: usize) -> Threaded {
    let (tx, first) = async_broadcast::broadcast(CAPACITY * 4);
    let mut rxs = vec![first];
    rxs.extend((1..subscribers).map(|_| tx.new_receiver()));
    let (counters, consumers) = spawn_consumers(rxs, |rx| rx.recv_blocking().ok());
    let closer = tx.clone();
    Threaded {
        publish: Box::new(move |m| {
            black_box(tx.try_broadcast(m).unwrap());
        }),
        counters,
        shutdown: Box::new(move || {
            closer.close();
        }),
        consumers,
    }
}

fn threaded_mutex_deques(subscribers: usize) -> Threaded {
    let boxes: Arc<Vec<Mutex<VecDeque<u64>>>> = Arc::new(
        (0..subscribers)
            .map(|_| Mutex::new(VecDeque::with_capacity(CAPACITY)))
            .collect(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    // No parking primitive of its own: an idle consumer yields (a condvar would make every
    // push pay a futex syscall).
    let receivers: Vec<_> = (0..subscribers)
        .map(|i| (Arc::clone(&boxes), Arc::clone(&stop), i))
        .collect();
    let (counters, consumers) = spawn_consumers(receivers, |(boxes, stop, i)| loop {
        if let Some(m) = boxes[*i].lock().unwrap().pop_front() {
            return Some(m);
        }
        if stop.load(Ordering::Acquire) {
            return None;
        }
        thread::yield_now();
    });
    Threaded {
        publish: Box::new(move |m| {
            let delivered = boxes.iter().filter(|q| MutexDeques::offer(q, m)).count();
            black_box(delivered);
        }),
        counters,
        shutdown: Box::new(move || stop.store(true, Ordering::Release)),
        consumers,
    }
}

fn threaded(c: &mut Criterion) {
    let mut group = c.benchmark_group("threaded");
    for n in THREADED_SUBSCRIBERS {
        group.throughput(Throughput::Elements(BURST * n as u64));
        group.bench_function(BenchmarkId::new("mailroom", n), |b| {
            b.iter_custom(|i| threaded_mailroom(n, 0).run(i))
        });
        group.bench_function(BenchmarkId::new("tokio", n), |b| {
            b.iter_custom(|i| threaded_tokio(n, 0).run(i))
        });
        group.bench_function(BenchmarkId::new("async-broadcast", n), |b| {
            b.iter_custom(|i| threaded_async_broadcast(n).run(i))
        });
        group.bench_function(BenchmarkId::new("mutex-vecdeque", n), |b| {
            b.iter_custom(|i| threaded_mutex_deques(n).run(i))
        });
    }
    group.finish();
}

fn stall_threaded(c: &mut Criterion) {
    const N: usize = 4;
    let mut group = c.benchmark_group("stall_threaded");
    group.throughput(Throughput::Elements(BURST * (N as u64 - 1)));
    group.bench_function(BenchmarkId::new("mailroom", N), |b| {
        b.iter_custom(|i| threaded_mailroom(N, 1).run(i))
    });
    group.bench_function(BenchmarkId::new("tokio", N), |b| {
        b.iter_custom(|i| threaded_tokio(N, 1).run(i))
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    targets = burst, stall_burst, threaded, stall_threaded
}
criterion_main!(benches);
