//! Loom models of the broadcast protocol: the ring's push/pop handoff, publish vs a parking
//! `recv`, and unsubscribe/close vs publish and `recv`. Loom explores every interleaving
//! (and the weak-memory outcomes it models) of the real code, built with its primitives.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p mailroom --test broadcast_loom --release`
#![cfg(loom)]

use loom::thread;
use mailroom::broadcast::{Broker, Delivery};

/// Runs `f` under loom with a preemption bound (3 is where loom's authors find most bugs,
/// and it keeps each model to seconds) and room for the consumer lock's spin.
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.max_branches = 100_000;
    builder.check(f);
}

#[test]
fn publish_wakes_a_parking_recv() {
    // Proves no lost wake-up: a recv that parks while a publish races always gets the
    // message (a lost wake-up is a deadlock, which loom reports).
    model(|| {
        let broker = Broker::new(1, 1).unwrap();
        let sub = broker.subscribe().unwrap();
        let publisher = thread::spawn(move || {
            assert_eq!(
                broker.publish(7u8).unwrap(),
                Delivery {
                    delivered: 1,
                    dropped: 0
                }
            );
            broker // keep the broker open until the receiver is done
        });
        assert_eq!(loom::future::block_on(sub.recv()), Some(7));
        drop(publisher.join().unwrap());
    });
}

#[test]
fn close_wakes_a_parking_recv_and_keeps_queued_messages() {
    // Proves a recv racing publish-then-close gets the message (if published) and then
    // None; it never hangs and never loses the queued message.
    model(|| {
        let broker = Broker::new(1, 1).unwrap();
        let sub = broker.subscribe().unwrap();
        let closer = thread::spawn(move || {
            broker.publish(1u8).unwrap();
            broker.close();
        });
        assert_eq!(sub.recv_blocking(), Some(1));
        assert_eq!(sub.recv_blocking(), None);
        closer.join().unwrap();
    });
}

#[test]
fn unsubscribe_wakes_recv_and_stops_enqueues() {
    // Proves that after unsubscribe returns no publish enqueues there, that the racing
    // publish's count matches what the subscriber can drain, and that a parked recv wakes.
    model(|| {
        let broker = Broker::new(1, 2).unwrap();
        let sub = loom::sync::Arc::new(broker.subscribe().unwrap());
        let receiver = {
            let sub = loom::sync::Arc::clone(&sub);
            thread::spawn(move || {
                let mut got = Vec::new();
                while let Some(m) = sub.recv_blocking() {
                    got.push(m);
                }
                got
            })
        };
        let delivery = broker.publish(1u8).unwrap();
        sub.unsubscribe();
        assert_eq!(
            broker.publish(2).unwrap(),
            Delivery {
                delivered: 0,
                dropped: 0
            }
        );
        let got = receiver.join().unwrap();
        assert_eq!(got.len(), delivery.delivered);
        assert_eq!(sub.poll(), None);
    });
}

#[test]
fn two_pollers_share_one_subscription() {
    // Proves the ring's consumer lock: two threads polling one subscription while it is
    // published to take each message exactly once, in order.
    model(|| {
        let broker = Broker::new(1, 2).unwrap();
        let sub = loom::sync::Arc::new(broker.subscribe().unwrap());
        let other = {
            let sub = loom::sync::Arc::clone(&sub);
            thread::spawn(move || sub.poll())
        };
        broker.publish(1u8).unwrap();
        broker.publish(2).unwrap();
        let mine = sub.poll();
        let theirs = other.join().unwrap();
        let rest = sub.poll();
        let mut all: Vec<u8> = [theirs, mine, rest].into_iter().flatten().collect();
        all.sort_unstable();
        assert_eq!(all, [1, 2]);
    });
}

#[test]
fn poll_many_races_a_publish_and_a_poll() {
    // Proves the batched drain keeps the ring's protocol: a poll_many racing a publish (the
    // producer, on its own thread) and a poll (on a third thread) takes a contiguous,
    // in-order run, and together they take every delivered message exactly once, with the
    // counters exact. Loom's cell tracking also checks that no slot is read before the
    // producer's write to it is visible.
    model(|| {
        let broker = Broker::new(1, 2).unwrap();
        let sub = loom::sync::Arc::new(broker.subscribe().unwrap());
        broker.publish(1u8).unwrap();
        let publisher = thread::spawn(move || {
            let delivery = broker.publish(2).unwrap();
            (broker, delivery) // keep the broker open until the checks are done
        });
        let poller = {
            let sub = loom::sync::Arc::clone(&sub);
            thread::spawn(move || sub.poll())
        };
        let mut batch = Vec::new();
        let moved = sub.poll_many(&mut batch, 2);
        assert_eq!(moved, batch.len());
        assert!(batch.windows(2).all(|w| w[0] < w[1]), "batch in FIFO order");
        let theirs = poller.join().unwrap();
        let (_broker, second) = publisher.join().unwrap();
        let mut rest = Vec::new();
        sub.poll_many(&mut rest, usize::MAX);
        let mut all: Vec<u8> = batch.into_iter().chain(theirs).chain(rest).collect();
        all.sort_unstable();
        // Capacity 2 with at most 1 queued before: 2 is always delivered, never dropped.
        assert_eq!(second.delivered, 1);
        assert_eq!(all, [1, 2]);
        let stats = sub.stats();
        assert_eq!((stats.received, stats.dropped, stats.queued), (2, 0, 0));
    });
}

#[test]
fn publish_batch_wakes_a_parking_recv() {
    // Proves the batch's single wake-up check loses no wake-up: a receiver parking (once or
    // twice) while a publish_batch races gets both messages in order (a lost wake-up is a
    // deadlock, which loom reports).
    model(|| {
        let broker = Broker::new(1, 2).unwrap();
        let sub = broker.subscribe().unwrap();
        let publisher = thread::spawn(move || {
            assert_eq!(
                broker.publish_batch([1u8, 2]).unwrap(),
                Delivery {
                    delivered: 2,
                    dropped: 0
                }
            );
            broker // keep the broker open until the receiver is done
        });
        // A consumer may see 1 before 2 is enqueued (a batch is atomic for publishers, not
        // for consumers), so the second recv may park too.
        assert_eq!(loom::future::block_on(sub.recv()), Some(1));
        assert_eq!(loom::future::block_on(sub.recv()), Some(2));
        drop(publisher.join().unwrap());
    });
}

#[test]
fn byte_budget_races_a_consumer() {
    // Proves the byte count stays exact and never underflows while a publisher (adding
    // before it pushes) races a consumer (subtracting after it pops): whatever the
    // interleaving, each message is delivered or dropped by the budget's rule as seen at
    // that moment, a drop only ever errs towards the budget (the producer may see bytes
    // that are already gone, never fewer than are queued), and once both are done the
    // count is exactly what is still queued.
    model(|| {
        let weigh = |m: &u8| usize::from(*m);
        let broker = Broker::with_mailbox_bytes(1, 4, 10, weigh).unwrap();
        let sub = loom::sync::Arc::new(broker.subscribe().unwrap());
        broker.publish(6u8).unwrap();
        let publisher = thread::spawn(move || {
            let delivery = broker.publish(5).unwrap();
            (broker, delivery)
        });
        let consumer = {
            let sub = loom::sync::Arc::clone(&sub);
            thread::spawn(move || sub.poll())
        };
        let taken = consumer.join().unwrap();
        let (_broker, second) = publisher.join().unwrap();
        assert_eq!(
            taken,
            Some(6),
            "the first message was queued before either ran"
        );
        let rest: Vec<u8> = std::iter::from_fn(|| sub.poll()).collect();
        // 6 + 5 > 10: the 5 is dropped if the publisher still counted the 6, and
        // delivered if the consumer had taken it (and subtracted) first.
        match second.delivered {
            1 => assert_eq!(rest, [5]),
            _ => assert_eq!((second.dropped, rest.len()), (1, 0)),
        }
        assert_eq!(sub.queued_bytes(), 0);
    });
}
