//! Concurrency stress tests of `mailroom::broadcast` on real threads. Each one is sized to
//! finish well under a second in a debug build; `scripts/broadcast-soak.sh` repeats them.
#![cfg(not(loom))]

use mailroom::broadcast::{Broker, RecvTimeoutError, Subscription};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

/// Generous bound for "this must happen"; only reached if the code under test is broken.
const HANG_TIMEOUT: Duration = Duration::from_secs(10);

/// A message tagged with its publisher and that publisher's sequence number.
type Tagged = (usize, u64);

#[test]
fn delivered_plus_dropped_equals_subscribers_under_concurrency() {
    // Proves every concurrent publish reports delivered + dropped == subscriber count, and
    // the counters reconcile: per-subscriber received + dropped == publishes.
    const SUBSCRIBERS: usize = 6;
    const PUBLISHERS: usize = 2;
    const PUBLISHES_EACH: u64 = 3_000;
    let broker = Broker::new(SUBSCRIBERS, 8).unwrap();
    let subs: Vec<_> = (0..SUBSCRIBERS)
        .map(|_| Arc::new(broker.subscribe().unwrap()))
        .collect();
    let done = Arc::new(AtomicBool::new(false));
    let pollers: Vec<_> = subs
        .iter()
        .map(|sub| {
            let (sub, done) = (Arc::clone(sub), Arc::clone(&done));
            thread::spawn(move || {
                let mut taken = 0u64;
                while !done.load(Ordering::Acquire) {
                    taken += u64::from(sub.poll().is_some());
                }
                taken + std::iter::from_fn(|| sub.poll()).count() as u64
            })
        })
        .collect();
    let publishers: Vec<_> = (0..PUBLISHERS)
        .map(|_| {
            let broker = broker.clone();
            thread::spawn(move || {
                for n in 0..PUBLISHES_EACH {
                    let d = broker.publish(n).unwrap();
                    assert_eq!(d.delivered + d.dropped, SUBSCRIBERS);
                }
            })
        })
        .collect();
    publishers.into_iter().for_each(|p| p.join().unwrap());
    done.store(true, Ordering::Release);
    let taken: Vec<u64> = pollers.into_iter().map(|p| p.join().unwrap()).collect();
    let publishes = PUBLISHERS as u64 * PUBLISHES_EACH;
    let stats = broker.stats();
    assert_eq!(stats.published, publishes);
    assert_eq!(
        stats.delivered + stats.dropped,
        publishes * SUBSCRIBERS as u64
    );
    for (sub, taken) in subs.iter().zip(taken) {
        let s = sub.stats();
        assert_eq!(s.received + s.dropped, publishes);
        assert_eq!(
            s.received, taken,
            "every enqueued message was polled exactly once"
        );
    }
}

#[test]
fn subscribers_see_one_global_order() {
    // Proves per-subscriber FIFO is consistent with one global publish order: the union of
    // every subscriber's "a came right before b" edges has no cycle.
    const PUBLISHERS: usize = 3;
    const PUBLISHES_EACH: u64 = 1_500;
    let broker = Broker::<Tagged>::new(4, 4).unwrap();
    let subs: Vec<_> = (0..4).map(|_| broker.subscribe().unwrap()).collect();
    let done = Arc::new(AtomicBool::new(false));
    // Each poller sleeps a different amount between polls, so their drop patterns differ.
    let pollers: Vec<_> = subs
        .into_iter()
        .enumerate()
        .map(|(i, sub)| {
            let done = Arc::clone(&done);
            thread::spawn(move || {
                let mut seen = Vec::new();
                while !done.load(Ordering::Acquire) {
                    seen.extend(sub.poll());
                    for _ in 0..i * 50 {
                        std::hint::spin_loop();
                    }
                }
                seen.extend(std::iter::from_fn(|| sub.poll()));
                seen
            })
        })
        .collect();
    let publishers: Vec<_> = (0..PUBLISHERS)
        .map(|p| {
            let broker = broker.clone();
            thread::spawn(move || {
                (0..PUBLISHES_EACH).for_each(|n| {
                    broker.publish((p, n)).unwrap();
                })
            })
        })
        .collect();
    publishers.into_iter().for_each(|p| p.join().unwrap());
    done.store(true, Ordering::Release);
    let sequences: Vec<Vec<Tagged>> = pollers.into_iter().map(|p| p.join().unwrap()).collect();
    assert_consistent_with_one_order(&sequences);
}

/// Asserts that some total order contains every sequence as a subsequence (Kahn's
/// algorithm over the "immediately followed by" edges must consume every node).
fn assert_consistent_with_one_order(sequences: &[Vec<Tagged>]) {
    let mut successors: BTreeMap<Tagged, BTreeSet<Tagged>> = BTreeMap::new();
    let mut indegree: BTreeMap<Tagged, usize> = BTreeMap::new();
    for seq in sequences {
        for &m in seq {
            indegree.entry(m).or_insert(0);
        }
        for pair in seq.windows(2) {
            if successors.entry(pair[0]).or_default().insert(pair[1]) {
                *indegree.get_mut(&pair[1]).unwrap() += 1;
            }
        }
    }
    let nodes = indegree.len();
    let mut ready: Vec<Tagged> = indegree
        .iter()
        .filter(|(_, &d)| d == 0)
        .map(|(&m, _)| m)
        .collect();
    let mut ordered = 0;
    while let Some(m) = ready.pop() {
        ordered += 1;
        for next in successors.get(&m).into_iter().flatten() {
            let d = indegree.get_mut(next).unwrap();
            *d -= 1;
            if *d == 0 {
                ready.push(*next);
            }
        }
    }
    assert_eq!(ordered, nodes, "subscribers disagree on the publish order");
    assert!(nodes > 0);
}

#[test]
fn no_enqueue_after_unsubscribe_returns() {
    // Proves that once unsubscribe returns, no publish that starts later enqueues there:
    // every message drained afterwards was numbered before unsubscribe returned.
    const ROUNDS: usize = 200;
    let broker = Broker::<u64>::new(2, 64).unwrap();
    let ticket = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let publisher = {
        let (broker, ticket, stop) = (broker.clone(), Arc::clone(&ticket), Arc::clone(&stop));
        thread::spawn(move || {
            while !stop.load(Ordering::Acquire) {
                // The ticket is taken before the publish starts, so a ticket drawn after
                // unsubscribe returned belongs to a publish that started after it too.
                broker
                    .publish(ticket.fetch_add(1, Ordering::SeqCst))
                    .unwrap();
            }
        })
    };
    for _ in 0..ROUNDS {
        let sub = broker.subscribe().unwrap();
        while sub.stats().received < 3 {
            sub.poll();
        }
        sub.unsubscribe();
        let first_later_ticket = ticket.load(Ordering::SeqCst);
        let received = sub.stats().received;
        let late: Vec<u64> = std::iter::from_fn(|| sub.poll())
            .filter(|&t| t >= first_later_ticket)
            .collect();
        assert!(late.is_empty(), "enqueued after unsubscribe: {late:?}");
        // Let the publisher run on; the counter must not move.
        let resume = ticket.load(Ordering::SeqCst);
        while ticket.load(Ordering::SeqCst) < resume + 5 {
            std::hint::spin_loop();
        }
        assert_eq!(sub.stats().received, received);
        assert_eq!(sub.poll(), None);
    }
    stop.store(true, Ordering::Release);
    publisher.join().unwrap();
}

#[test]
fn subscriber_cap_holds_under_racing_subscribe_and_unsubscribe() {
    // Proves the cap is never exceeded while threads race to subscribe and unsubscribe:
    // handles alive at once, registry size and publish fan-out all stay <= cap.
    const CAP: usize = 3;
    const THREADS: usize = 6;
    const ROUNDS: usize = 2_000;
    let broker = Broker::<u8>::new(CAP, 1).unwrap();
    let alive = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let churners: Vec<_> = (0..THREADS)
        .map(|_| {
            let (broker, alive, peak) = (broker.clone(), Arc::clone(&alive), Arc::clone(&peak));
            thread::spawn(move || {
                let mut admitted = 0;
                for _ in 0..ROUNDS {
                    if let Ok(sub) = broker.subscribe() {
                        admitted += 1;
                        let now = alive.fetch_add(1, Ordering::SeqCst) + 1;
                        peak.fetch_max(now, Ordering::SeqCst);
                        alive.fetch_sub(1, Ordering::SeqCst);
                        drop(sub);
                    }
                }
                admitted
            })
        })
        .collect();
    let observer = {
        let broker = broker.clone();
        thread::spawn(move || {
            for _ in 0..ROUNDS {
                let d = broker.publish(0).unwrap();
                assert!(d.delivered + d.dropped <= CAP);
                assert!(broker.stats().subscribers <= CAP);
            }
        })
    };
    let admitted: usize = churners.into_iter().map(|c| c.join().unwrap()).sum();
    observer.join().unwrap();
    assert!(peak.load(Ordering::SeqCst) <= CAP);
    assert!(admitted > 0);
    assert_eq!(broker.stats().subscribers, 0, "every slot was freed");
}

#[test]
fn no_lost_wakeups_between_publish_and_a_parking_receiver() {
    // Proves no lost wake-up: in every round a receiver parks in recv_blocking while a
    // publisher races one publish; the receiver always gets it (after a lost wake-up it
    // would sleep forever, and the round fails after HANG_TIMEOUT).
    const ROUNDS: usize = 2_000;
    let broker = Broker::<usize>::new(1, 1).unwrap();
    let sub = broker.subscribe().unwrap();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (got_tx, got_rx) = std::sync::mpsc::channel();
    // Detached on failure: a receiver stuck after a lost wake-up must not hang the test.
    thread::spawn(move || {
        for _ in 0..ROUNDS {
            ready_tx.send(()).unwrap();
            // No timeout here: a lost wake-up parks this thread for good.
            got_tx.send(sub.recv_blocking()).unwrap();
        }
    });
    for round in 0..ROUNDS {
        ready_rx.recv().unwrap();
        broker.publish(round).unwrap();
        let got = got_rx.recv_timeout(HANG_TIMEOUT);
        assert_eq!(got, Ok(Some(round)), "wake-up lost in round {round}");
    }
}

#[test]
fn no_lost_wakeups_between_close_or_unsubscribe_and_a_parking_receiver() {
    // Proves recv (async on an executor thread, and blocking) always returns None when a
    // close or an unsubscribe races it.
    const ROUNDS: usize = 500;
    for round in 0..ROUNDS {
        let broker = Broker::<u8>::new(2, 1).unwrap();
        let a = broker.subscribe().unwrap();
        let b = Arc::new(broker.subscribe().unwrap());
        let start = Arc::new(Barrier::new(3));
        let async_receiver = {
            let start = Arc::clone(&start);
            thread::spawn(move || {
                start.wait();
                futures::executor::block_on(a.recv())
            })
        };
        let blocking_receiver = {
            let (b, start) = (Arc::clone(&b), Arc::clone(&start));
            thread::spawn(move || {
                start.wait();
                b.recv_timeout(HANG_TIMEOUT)
            })
        };
        start.wait();
        if round % 2 == 0 {
            broker.close();
        } else {
            b.unsubscribe();
            broker.close();
        }
        assert_eq!(async_receiver.join().unwrap(), None);
        assert_eq!(
            blocking_receiver.join().unwrap(),
            Err(RecvTimeoutError::Closed)
        );
    }
}

#[test]
fn many_async_receivers_on_one_runtime_all_finish() {
    // Proves many recv tasks on one multi-threaded tokio runtime each drain their whole
    // stream while a plain thread publishes, and all end when the broker closes.
    const TASKS: usize = 32;
    const MESSAGES: u64 = 500;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let broker = Broker::<u64>::new(TASKS, 1024).unwrap();
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let sub: Subscription<u64> = broker.subscribe().unwrap();
            runtime.spawn(async move {
                let mut last = None;
                while let Some(n) = sub.recv().await {
                    assert!(last < Some(n));
                    last = Some(n);
                }
                (last, sub.stats())
            })
        })
        .collect();
    thread::spawn(move || {
        (0..MESSAGES).for_each(|n| {
            broker.publish(n).unwrap();
        })
    });
    for task in tasks {
        let (last, stats) = runtime.block_on(task).unwrap();
        assert_eq!(stats.received + stats.dropped, MESSAGES);
        assert_eq!(
            last,
            Some(MESSAGES - 1),
            "capacity 1024 > 500 messages: nothing dropped"
        );
    }
}
