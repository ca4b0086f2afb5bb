//! Black-box tests of waiting receivers: `recv` on two executors, `recv_timeout`,
//! `recv_blocking`, cancellation, and the `stream` adapter.
#![cfg(not(loom))]

use mailroom::broadcast::{Broker, RecvTimeoutError};
use std::future::Future;
use std::sync::mpsc;
use std::time::Duration;

/// Generous bound for "this must happen"; only reached if the code under test is broken.
const HANG_TIMEOUT: Duration = Duration::from_secs(10);

#[test]
fn recv_returns_buffered_messages_then_none_after_close() {
    // Proves recv yields queued messages in order and None only once closed and drained.
    let broker = Broker::new(1, 4).unwrap();
    let sub = broker.subscribe().unwrap();
    broker.publish(1).unwrap();
    broker.publish(2).unwrap();
    broker.close();
    futures::executor::block_on(async {
        assert_eq!(sub.recv().await, Some(1));
        assert_eq!(sub.recv().await, Some(2));
        assert_eq!(sub.recv().await, None);
    });
}

#[test]
fn recv_on_tokio_is_woken_by_publish_from_another_thread() {
    // Proves a parked recv task on a tokio runtime is woken by a publish from a plain thread.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let broker = Broker::new(1, 4).unwrap();
    let sub = broker.subscribe().unwrap();
    let (parked_tx, parked_rx) = mpsc::channel();
    let task = runtime.spawn(async move {
        parked_tx.send(()).unwrap();
        sub.recv().await
    });
    parked_rx.recv_timeout(HANG_TIMEOUT).unwrap();
    broker.publish("wake").unwrap();
    let got = runtime.block_on(async { tokio::time::timeout(HANG_TIMEOUT, task).await });
    assert_eq!(got.expect("recv was never woken").unwrap(), Some("wake"));
}

#[test]
fn recv_is_woken_by_unsubscribe() {
    // Proves a receiver parked on another thread returns None when its subscription is
    // unsubscribed from this thread.
    let broker = Broker::<u8>::new(1, 4).unwrap();
    let sub = std::sync::Arc::new(broker.subscribe().unwrap());
    let receiver = {
        let sub = std::sync::Arc::clone(&sub);
        std::thread::spawn(move || sub.recv_timeout(HANG_TIMEOUT))
    };
    sub.unsubscribe();
    assert_eq!(receiver.join().unwrap(), Err(RecvTimeoutError::Closed));
}

#[test]
fn recv_is_woken_by_close() {
    // Proves a receiver parked in recv (on a futures executor thread) resolves to None on close.
    let broker = Broker::<u8>::new(1, 4).unwrap();
    let sub = broker.subscribe().unwrap();
    let receiver = std::thread::spawn(move || futures::executor::block_on(sub.recv()));
    broker.close();
    assert_eq!(receiver.join().unwrap(), None);
}

#[test]
fn recv_timeout_times_out_on_an_idle_subscription() {
    // Proves recv_timeout reports Timeout (not Closed) when nothing arrives.
    let broker = Broker::<u8>::new(1, 4).unwrap();
    let sub = broker.subscribe().unwrap();
    assert_eq!(
        sub.recv_timeout(Duration::from_millis(5)),
        Err(RecvTimeoutError::Timeout)
    );
    assert_eq!(
        sub.recv_timeout(Duration::ZERO),
        Err(RecvTimeoutError::Timeout)
    );
    broker.publish(3).unwrap();
    assert_eq!(sub.recv_timeout(Duration::ZERO), Ok(3));
    broker.publish(4).unwrap();
    assert_eq!(
        sub.recv_timeout(Duration::MAX),
        Ok(4),
        "an unrepresentable deadline waits forever"
    );
}

#[test]
fn dropping_a_pending_recv_loses_nothing() {
    // Proves cancel-safety: a recv future dropped while parked leaves the next message for
    // the next recv, and a later publish still wakes a new receiver.
    let broker = Broker::new(1, 4).unwrap();
    let sub = broker.subscribe().unwrap();
    {
        let mut pending = std::pin::pin!(sub.recv());
        let waker = futures::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        assert!(pending.as_mut().poll(&mut cx).is_pending());
    }
    broker.publish(1).unwrap();
    assert_eq!(futures::executor::block_on(sub.recv()), Some(1));
    let sub = std::sync::Arc::new(sub);
    let receiver = {
        let sub = std::sync::Arc::clone(&sub);
        std::thread::spawn(move || sub.recv_timeout(HANG_TIMEOUT))
    };
    broker.publish(2).unwrap();
    assert_eq!(receiver.join().unwrap(), Ok(2));
}

#[cfg(feature = "stream")]
#[test]
fn stream_yields_messages_then_ends_on_close() {
    // Proves the Stream adapter yields in order, waits across publishes, and ends on close.
    use futures::StreamExt;
    let broker = Broker::new(1, 8).unwrap();
    let mut stream = broker.subscribe().unwrap().into_stream();
    let publisher = std::thread::spawn(move || {
        for n in 0..3 {
            broker.publish(n).unwrap();
        }
        // Dropping the last handle closes the broker, which ends the stream.
    });
    let got: Vec<i32> = futures::executor::block_on(async {
        let mut got = Vec::new();
        while let Some(n) = stream.next().await {
            got.push(n);
        }
        got
    });
    publisher.join().unwrap();
    assert_eq!(got, [0, 1, 2]);
    assert!(stream.subscription().is_closed());
}
