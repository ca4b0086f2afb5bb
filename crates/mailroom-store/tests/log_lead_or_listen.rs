//! `Durable::lead_or_listen`: a waiter that may block its thread leads a round it would
//! have to itself and listens otherwise; beside futures and blocking waiters nobody is
//! stranded, and a leader dropped unsynced leaves no waiter behind.

use std::future::Future;
use std::pin::pin;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Barrier};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::executor::{block_on, LocalPool};
use futures::task::{noop_waker, LocalSpawnExt};
use mailroom_store::log::{Durable, Leader, Log, LogOptions, SyncPolicy, Turn};
use mailroom_store::storage::{FsStorage, SimStorage};
use mailroom_store::StoreError;
use mailroom_testkit::store::open_log;

/// How long a wait here may take before the test calls its waiter stranded.
const HANG: Duration = Duration::from_secs(60);
/// Waiters of each kind in the stress test: futures on one executor, then threads.
const TASKS: usize = 16;
const BLOCKING: usize = 3;
const MAY_BLOCK: usize = 6;
/// Records each waiter writes and waits for, one at a time.
const WRITES: u64 = 30;
/// A may-block waiter that leads for a record whose number is a multiple of this drops
/// its leader unsynced and then waits blocking (as if its caller went away and came back).
const DROP_EVERY: u64 = 7;

fn options() -> LogOptions {
    // Small segments, so rolls happen while waiters wait for a round.
    LogOptions {
        segment_bytes_max: 2048,
        index_interval_bytes: 256,
        ..LogOptions::default()
    }
}

/// Runs `wait` on a thread of its own and returns its result, or panics once it has
/// taken longer than [`HANG`]: a waiter nobody wakes fails the test instead of hanging it.
fn within<T: Send + 'static>(what: &str, wait: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || done.send(wait()));
    match finished.recv_timeout(HANG) {
        Ok(result) => result,
        Err(RecvTimeoutError::Timeout) => panic!("{what}: not done after {HANG:?}, stranded"),
        Err(RecvTimeoutError::Disconnected) => panic!("{what}: panicked"),
    }
}

/// The turn's variant, for a failure message (its Debug would print the whole log).
fn name(turn: &Turn) -> String {
    match turn {
        Turn::Ready(answer) => format!("Ready({answer:?})"),
        Turn::Lead(_) => "Lead".into(),
        Turn::Listen(_) => "Listen".into(),
    }
}

fn lead(durable: Durable) -> Leader {
    match durable.lead_or_listen() {
        Turn::Lead(leader) => leader,
        other => panic!("expected to lead, got {}", name(&other)),
    }
}

fn listen(durable: Durable) -> Durable {
    match durable.lead_or_listen() {
        Turn::Listen(durable) => durable,
        other => panic!("expected to listen, got {}", name(&other)),
    }
}

fn poll_once(durable: &mut Durable) -> Poll<Result<(), StoreError>> {
    let waker = noop_waker();
    pin!(durable).poll(&mut Context::from_waker(&waker))
}

// Proves the decision: a lone waiter leads (and its sync makes the records durable);
// once durable, or under a policy that does not wait for the disk, it is ready; while a
// round is running or wanted for another waiter, it listens, and that round wakes it.
#[test]
fn a_lone_waiter_leads_and_one_sharing_a_round_listens() {
    let storage = SimStorage::new();
    let log = Arc::new(open_log(&storage, "/l", options()).unwrap());
    let lone = log.write(&[b"lone"], 0).unwrap();
    lead(log.durable(lone.end)).sync().unwrap();
    assert_eq!(log.end(), 1);
    let again = log.durable(lone.end).lead_or_listen();
    assert!(
        matches!(again, Turn::Ready(Ok(()))),
        "nothing left: {}",
        name(&again)
    );

    storage.set_sync_delay(Duration::from_millis(300));
    let first = log.write(&[b"first"], 1).unwrap();
    let mut awaited = log.durable(first.end);
    assert!(
        poll_once(&mut awaited).is_pending(),
        "wants a round of the sync thread"
    );
    let second = log.write(&[b"second"], 2).unwrap();
    let listening = listen(log.durable(second.end));
    within("the awaited future", move || block_on(awaited)).unwrap();
    within("the listener", move || block_on(listening)).unwrap();
    assert_eq!(log.end(), 3);

    let relaxed = LogOptions {
        sync: SyncPolicy::Never,
        ..options()
    };
    let log = open_log(&SimStorage::new(), "/r", relaxed).unwrap();
    let written = log.write(&[b"x"], 0).unwrap();
    let turn = log.durable(written.end).lead_or_listen();
    assert!(matches!(turn, Turn::Ready(Ok(()))), "{}", name(&turn));
}

// Proves a begun lead round counts as running: a waiter for the same records listens
// for it and is woken by its sync (no second sync), and one for later records listens
// for the next round, which the sync thread runs after the leader's.
#[test]
fn waiters_arriving_before_the_leader_syncs_share_or_follow_its_round() {
    let storage = SimStorage::new();
    let log = Arc::new(open_log(&storage, "/l", options()).unwrap());
    let written = log.write(&[b"led"], 0).unwrap();
    let leader = lead(log.durable(written.end));
    let mut same = listen(log.durable(written.end));
    let later = log.write(&[b"later"], 1).unwrap();
    let next = listen(log.durable(later.end));
    let syncs = storage.syncs_done();
    leader.sync().unwrap();
    assert_eq!(storage.syncs_done(), syncs + 1);
    assert!(
        matches!(poll_once(&mut same), Poll::Ready(Ok(()))),
        "woken by the leader's round"
    );
    within("the next round's listener", move || block_on(next)).unwrap();
    assert_eq!(log.end(), 2);
}

// Proves a leader dropped without syncing strands nobody: the futures that joined its
// round, the one waiting for the round after, and a blocking waiter all complete.
#[test]
fn a_leader_dropped_unsynced_strands_no_waiter() {
    let storage = SimStorage::new();
    let log = Arc::new(open_log(&storage, "/l", options()).unwrap());
    let written = log.write(&[b"abandoned"], 0).unwrap();
    let leader = lead(log.durable(written.end));
    let mut same = log.durable(written.end);
    assert!(poll_once(&mut same).is_pending(), "joined the begun round");
    let same_listening = listen(log.durable(written.end));
    let later = log.write(&[b"later"], 1).unwrap();
    let next = listen(log.durable(later.end));
    // Blocked on the begun round, or (if it comes after the drop) leading one itself.
    let blocking = {
        let log = Arc::clone(&log);
        std::thread::spawn(move || log.wait_durable(written.end))
    };
    drop(leader);
    within("the round's future", move || block_on(same)).unwrap();
    within("the round's listener", move || block_on(same_listening)).unwrap();
    within("the next round's listener", move || block_on(next)).unwrap();
    within("the blocked thread", move || blocking.join().unwrap()).unwrap();
    assert_eq!(log.end(), 2);
}

// Proves a failed sync that a leader ran reaches it as the fail-stop error that an
// awaited Durable gets from the sync thread (naming the fdatasync), not as the raw I/O
// error, and that nothing after the failure became visible.
#[test]
fn a_failed_sync_a_leader_ran_answers_as_awaiting_does() {
    for leads in [false, true] {
        let storage = SimStorage::new();
        let log = open_log(&storage, "/l", options()).unwrap();
        log.append(&[b"before"], 0).unwrap();
        storage.fail_next_syncs(1);
        let written = log.write(&[b"doomed"], 1).unwrap();
        let durable = log.durable(written.end);
        let answer = if leads {
            lead(durable).sync()
        } else {
            block_on(durable)
        };
        match answer {
            Err(StoreError::FailStopped { reason }) => assert!(reason.contains("fdatasync")),
            other => panic!("leads {leads}: unexpected answer {other:?}"),
        }
        assert_eq!(log.end(), 1, "nothing after the failure became visible");
    }
}

/// How one waiter waits for its records.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Async,
    Blocking,
    /// As the server's workers: lead when alone, else await; now and then drop the
    /// leader unsynced and wait blocking instead.
    MayBlock,
}

/// What one waiter was told: (offset, payload) of each record it saw durable, and how
/// often it led.
#[derive(Debug, Default)]
struct Confirmed {
    records: Vec<(u64, Vec<u8>)>,
    leads: u64,
}

fn payload(waiter: usize, seq: u64) -> Vec<u8> {
    format!("waiter {waiter} record {seq}").into_bytes()
}

/// Waits until `end` is durable the way `kind` does; answers whether it led.
async fn wait_as(log: &Log, kind: Kind, end: u64, seq: u64) -> bool {
    let durable = log.durable(end);
    match kind {
        Kind::Async => durable.await.unwrap(),
        Kind::Blocking => durable.wait().unwrap(),
        Kind::MayBlock => match durable.lead_or_listen() {
            Turn::Ready(answer) => answer.unwrap(),
            Turn::Listen(listening) => listening.await.unwrap(),
            Turn::Lead(leader) if seq.is_multiple_of(DROP_EVERY) => {
                drop(leader);
                log.wait_durable(end).unwrap();
                return true;
            }
            Turn::Lead(leader) => {
                leader.sync().unwrap();
                return true;
            }
        },
    }
    false
}

/// One waiter's loop: write a record, wait for it as `kind` does, WRITES times.
async fn waiter(log: Arc<Log>, kind: Kind, id: usize) -> Confirmed {
    let mut confirmed = Confirmed::default();
    for seq in 0..WRITES {
        let bytes = payload(id, seq);
        let written = log.write(&[&bytes], seq).unwrap();
        let led = wait_as(&log, kind, written.end, seq).await;
        assert!(log.end() >= written.end, "{kind:?} answered before durable");
        confirmed.leads += u64::from(led);
        confirmed.records.push((written.start, bytes));
    }
    confirmed
}

/// Runs TASKS futures on one executor and BLOCKING + MAY_BLOCK threads (each blocking on
/// its own executor when it listens), all at once; returns what each was told.
fn run_all_kinds(log: &Arc<Log>) -> Vec<Confirmed> {
    let threads = BLOCKING + MAY_BLOCK;
    let barrier = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let kind = if i < BLOCKING {
                Kind::Blocking
            } else {
                Kind::MayBlock
            };
            let (log, barrier) = (Arc::clone(log), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                block_on(waiter(log, kind, TASKS + i))
            })
        })
        .collect();
    let mut pool = LocalPool::new();
    let tasks: Vec<_> = (0..TASKS)
        .map(|i| {
            let task = waiter(Arc::clone(log), Kind::Async, i);
            pool.spawner().spawn_local_with_handle(task).unwrap()
        })
        .collect();
    barrier.wait();
    let mut all = pool.run_until(futures::future::join_all(tasks));
    all.extend(handles.into_iter().map(|t| t.join().unwrap()));
    all
}

/// Checks every waiter saw each of its records durable once, offsets are gap-free and
/// disjoint, and every record reads back.
fn check_all_confirmed(log: &Log, all: &[Confirmed]) {
    let mut offsets = Vec::new();
    for confirmed in all {
        assert_eq!(confirmed.records.len() as u64, WRITES);
        for (offset, bytes) in &confirmed.records {
            offsets.push(*offset);
            let record = log
                .read(*offset)
                .unwrap()
                .expect("a confirmed record reads");
            assert_eq!(&record.payload[..], &bytes[..]);
        }
    }
    offsets.sort_unstable();
    let expected: Vec<u64> = (0..offsets.len() as u64).collect();
    assert_eq!(offsets, expected, "offsets are disjoint and gap-free");
    assert_eq!(log.end(), expected.len() as u64);
}

// Proves may-block waiters (leading, listening, dropping leaders) beside futures and
// blocking threads all complete, each record durable before its answer, on a slow
// simulated disk (so rounds overlap) and on real files, and survive a power cut.
#[test]
fn may_block_waiters_beside_futures_and_threads_all_complete() {
    let storage = SimStorage::new();
    storage.set_sync_delay(Duration::from_micros(300));
    let log = Arc::new(open_log(&storage, "/l", options()).unwrap());
    let all = within("waiters on a slow disk", {
        let log = Arc::clone(&log);
        move || run_all_kinds(&log)
    });
    check_all_confirmed(&log, &all);
    let leads: u64 = all.iter().map(|c| c.leads).sum();
    eprintln!(
        "slow disk: {leads} of {} may-block waits led",
        MAY_BLOCK as u64 * WRITES
    );
    drop(log);
    check_all_confirmed(&open_log(&storage.crash(7), "/l", options()).unwrap(), &all);

    for _ in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let log = Arc::new(Log::open(Arc::new(FsStorage), dir.path(), options()).unwrap());
        let all = within("waiters on real files", {
            let log = Arc::clone(&log);
            move || run_all_kinds(&log)
        });
        check_all_confirmed(&log, &all);
        drop(log);
        let log = Log::open(Arc::new(FsStorage), dir.path(), options()).unwrap();
        check_all_confirmed(&log, &all);
    }
}
