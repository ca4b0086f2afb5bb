//! Failover of the database to a streaming standby under two `mailroom serve` brokers.
//! The test makes its own primary and standby in a temporary directory (a synchronous
//! standby, named in the primary's `synchronous_standby_names`, or an asynchronous one)
//! and gives both brokers a multi-host URL with `target_session_attrs=read-write`. The
//! primary is stopped hard (`pg_ctl stop -m immediate`) and the standby promoted (`pg_ctl
//! promote`): meanwhile the brokers answer 503 `store_unavailable`; then they serve again
//! without a restart. With the synchronous standby nothing confirmed is lost; the
//! asynchronous one shows what the docs warn of (confirmed publishes gone).
//!
//! The clusters are made as the owner of the test cluster (`MAILROOM_TEST_POSTGRES`,
//! from `scripts/postgres.sh`), with the same binaries, and stopped by [`Node`]'s drop
//! also when a test fails.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::group_load::{
    assert_log_holds, await_group_end, consume, fixed, publish, Confirmed, Seen, ACK_ALL,
};
use common::postgres_cluster::{bin_dir, cluster_files, Node};
use common::{fresh_postgres_database, temp_dir, ServerProcess, CONDITION_WAIT_MAX};
use mailroom_client::{Client, GroupOptions, StartPosition};
use serde_json::Value;

/// The standby's `application_name`, which the primary's `synchronous_standby_names`
/// names.
const STANDBY: &str = "standby";

/// A primary and its streaming standby, in a directory of their own; both stopped
/// (`-m immediate`) when dropped, before the directory goes.
struct Pair {
    primary: Node,
    standby: Node,
    _dir: tempfile::TempDir,
}

impl Pair {
    /// Makes and starts the pair, as the owner of `owned`; the primary waits for the
    /// standby at every commit when `synchronous`.
    fn start(owned: &Path, synchronous: bool) -> Pair {
        let dir = temp_dir();
        let owner = std::fs::metadata(owned).expect("the test cluster's data directory");
        std::os::unix::fs::chown(dir.path(), Some(owner_uid(&owner)), Some(owner_gid(&owner)))
            .expect("give the directory to the cluster's owner");
        let bin = bin_dir();
        let mut primary = Node::new(&bin, dir.path(), "primary");
        primary.init(dir.path());
        // On the command line, not in postgresql.conf: pg_basebackup copies the files,
        // and a promoted standby that named itself would wait forever at every commit.
        let names = if synchronous { STANDBY } else { "" };
        primary.start(&format!(
            "-c wal_level=replica -c synchronous_commit=on -c synchronous_standby_names={names} \
             -c fsync=off -c max_connections=100"
        ));
        let mut standby = Node::new(&bin, dir.path(), "standby");
        let source = format!(
            "host=127.0.0.1 port={} user=mailroom application_name={STANDBY}",
            primary.port
        );
        let copied = standby
            .program("pg_basebackup", dir.path())
            .args(["-d", &source, "-D"])
            .arg(&standby.data)
            .args(["-R", "-X", "stream", "-c", "fast"])
            .output()
            .expect("run pg_basebackup");
        assert!(copied.status.success(), "pg_basebackup: {copied:?}");
        standby.start("-c fsync=off -c max_connections=100");
        Pair {
            primary,
            standby,
            _dir: dir,
        }
    }

    /// The brokers' store URL: both hosts, the writable one chosen at every connect.
    fn store_url(&self) -> String {
        format!(
            "postgres://mailroom@{},{}/postgres?target_session_attrs=read-write",
            self.primary.host(),
            self.standby.host()
        )
    }
}

fn owner_uid(metadata: &std::fs::Metadata) -> u32 {
    std::os::unix::fs::MetadataExt::uid(metadata)
}

fn owner_gid(metadata: &std::fs::Metadata) -> u32 {
    std::os::unix::fs::MetadataExt::gid(metadata)
}

/// Waits until the primary reports the standby streaming with `sync_state`.
async fn await_standby(primary: &Node, sync_state: &str) {
    let (client, connection) = tokio_postgres::connect(&primary.url(), tokio_postgres::NoTls)
        .await
        .expect("connect to the primary");
    tokio::spawn(connection);
    let deadline = Instant::now() + CONDITION_WAIT_MAX;
    loop {
        let rows = client
            .query(
                "SELECT sync_state FROM pg_stat_replication \
                 WHERE application_name = $1 AND state = 'streaming'",
                &[&STANDBY],
            )
            .await
            .unwrap();
        if rows.first().map(|row| row.get::<_, String>(0)).as_deref() == Some(sync_state) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the standby never streamed ({sync_state})"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The status and error code of a publish and of a poll on `server`.
async fn publish_and_poll(http: &reqwest::Client, server: &ServerProcess) -> [(u16, Value); 2] {
    let publish = http.post(server.at("/v1/topics/t/messages")).body("during");
    let poll = http.post(server.at("/v1/topics/t/groups/g/poll"));
    let mut answers = [(0, Value::Null), (0, Value::Null)];
    for (answer, request) in answers.iter_mut().zip([publish, poll]) {
        let response = request.send().await.expect("the broker answers");
        let status = response.status().as_u16();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        *answer = (status, body["error"].clone());
    }
    answers
}

/// Waits until `client`'s broker answers a read of the topic again; returns how long.
async fn await_serving(client: &Client, from: Instant) -> Duration {
    let deadline = Instant::now() + CONDITION_WAIT_MAX;
    while client.topic_info("t").await.is_err() {
        assert!(Instant::now() < deadline, "a broker never served again");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    from.elapsed()
}

/// Two brokers on the pair's store URL, with topic `t` and group `g` (W = 16, leases of
/// `lease_ms`).
async fn brokers(
    pair: &Pair,
    lease_ms: Option<u64>,
) -> (
    ServerProcess,
    ServerProcess,
    tempfile::TempDir,
    tempfile::TempDir,
) {
    let (dir_a, dir_b) = (temp_dir(), temp_dir());
    let url = pair.store_url();
    let a = ServerProcess::start(dir_a.path(), &["--store", &url]);
    let b = ServerProcess::start(dir_b.path(), &["--store", &url]);
    a.client().create_topic("t").await.unwrap();
    let mut options = GroupOptions::new(5);
    options.lease_ms = lease_ms;
    options.max_in_flight = Some(16);
    options.start = StartPosition::Earliest;
    b.client()
        .create_group_with("t", "g", &options)
        .await
        .unwrap();
    (a, b, dir_a, dir_b)
}

// Proves a failover to a synchronous standby loses nothing confirmed and needs no broker
// restart: under load on two brokers the primary is stopped hard; both brokers answer
// 503 store_unavailable until the standby is promoted, then serve again by themselves;
// every confirmed publish is in the log at its offset, no confirmed ack is undone (no
// delivery of an acked message after its ack), no (offset, attempt) went to two
// consumers, and the group finishes the log. Before that, with the standby stopped, a
// publish is not confirmed until the standby is back: a confirmed call is on both.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failover_to_a_synchronous_standby_loses_nothing_confirmed() {
    let Some(url) = fresh_postgres_database().await else {
        return;
    };
    let (owned, _) = cluster_files(&url).await;
    let pair = tokio::task::spawn_blocking(move || Pair::start(&owned, true))
        .await
        .unwrap();
    await_standby(&pair.primary, "sync").await;
    let (a, b, _dir_a, _dir_b) = brokers(&pair, Some(2_000)).await;
    let (client_a, client_b) = (a.client(), b.client());

    // A commit waits for the synchronous standby: stopped, no publish is confirmed.
    pair.standby.pg_ctl(&["-m", "fast", "-w", "stop"]);
    let waiting = tokio::spawn({
        let client = client_a.clone();
        async move { client.publish("t", "held").await }
    });
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    assert!(
        !waiting.is_finished(),
        "a publish was confirmed without the standby"
    );
    let back = Instant::now();
    assert!(
        pair.standby.start_again(),
        "the standby did not start again"
    );
    let held = waiting
        .await
        .unwrap()
        .expect("the held publish is confirmed once the standby is back");
    eprintln!(
        "failover: a publish held while the standby was down, confirmed {:?} after its start",
        back.elapsed()
    );
    await_standby(&pair.primary, "sync").await;

    let confirmed: Confirmed = Arc::default();
    confirmed.lock().unwrap().insert(held, "held".to_owned());
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let (stop_publishing, stop) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let mut workers = Vec::new();
    for (name, client) in [("a", &client_a), ("b", &client_b)] {
        let task = publish(
            fixed(client),
            format!("p{name}"),
            u64::MAX,
            Arc::clone(&confirmed),
            Arc::clone(&seen),
            Arc::clone(&stop_publishing),
            100,
        );
        workers.push(tokio::spawn(task));
        let task = consume(
            fixed(client),
            format!("c{name}"),
            Arc::clone(&seen),
            Arc::clone(&stop),
            ACK_ALL,
        );
        workers.push(tokio::spawn(task));
    }
    await_progress(&confirmed, &seen, 100).await;

    pair.primary.pg_ctl(&["-m", "immediate", "-w", "stop"]);
    let failed_at = Instant::now();
    let before = (
        confirmed.lock().unwrap().len(),
        seen.lock().unwrap().acked.len(),
    );
    let http = reqwest::Client::new();
    for server in [&a, &b] {
        for (status, code) in publish_and_poll(&http, server).await {
            assert_eq!(
                (status, code.as_str()),
                (503, Some("store_unavailable")),
                "during the failover"
            );
        }
    }
    pair.standby.pg_ctl(&["-w", "promote"]);
    let promoted = failed_at.elapsed();
    let serving = [
        await_serving(&client_a, failed_at).await,
        await_serving(&client_b, failed_at).await,
    ];
    eprintln!("failover: {before:?} publishes and acks confirmed before; promoted after {promoted:?}, brokers serving after {serving:?}");
    let (published, acked) = before;
    await_progress(&confirmed, &seen, published + 100).await;
    assert!(
        seen.lock().unwrap().acked.len() > acked,
        "no ack after the failover"
    );

    stop_publishing.store(true, Ordering::SeqCst);
    let end = await_group_end(&client_b, Duration::from_secs(60)).await;
    stop.store(true, Ordering::SeqCst);
    for worker in workers {
        worker.await.unwrap();
    }
    let confirmed = confirmed.lock().unwrap().clone();
    assert_log_holds(&client_a, &confirmed).await;
    let group = client_a.group_info("t", "g").await.unwrap();
    assert_eq!(group.dead_letters, 0, "{group:?}");
    let seen = seen.lock().unwrap();
    seen.assert_exact("after the failover");
    let delivered = seen.delivered();
    let missing: Vec<u64> = confirmed
        .keys()
        .filter(|offset| !delivered.contains(offset))
        .copied()
        .collect();
    assert!(
        missing.is_empty(),
        "confirmed, never delivered: {missing:?}"
    );
    eprintln!(
        "failover: {end} messages, {} confirmed, {} acks confirmed",
        confirmed.len(),
        seen.acked.len()
    );
}

/// Waits until at least `published` publishes are confirmed and some acks with them.
async fn await_progress(confirmed: &Confirmed, seen: &Mutex<Seen>, published: usize) {
    let deadline = Instant::now() + CONDITION_WAIT_MAX;
    while confirmed.lock().unwrap().len() < published
        || seen.lock().unwrap().acked.len() < published / 2
    {
        assert!(Instant::now() < deadline, "the load did not get going");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until the standby has replayed everything the primary has written so far.
async fn await_replayed(primary: &Node) {
    let (client, connection) = tokio_postgres::connect(&primary.url(), tokio_postgres::NoTls)
        .await
        .expect("connect to the primary");
    tokio::spawn(connection);
    let written: String = client
        .query_one("SELECT pg_current_wal_lsn()::text", &[])
        .await
        .unwrap()
        .get(0);
    let deadline = Instant::now() + CONDITION_WAIT_MAX;
    loop {
        let caught_up = client
            .query(
                "SELECT replay_lsn >= $1::text::pg_lsn FROM pg_stat_replication \
                 WHERE application_name = $2",
                &[&written, &STANDBY],
            )
            .await
            .unwrap();
        if caught_up
            .first()
            .and_then(|row| row.get::<_, Option<bool>>(0))
            == Some(true)
        {
            return;
        }
        assert!(Instant::now() < deadline, "the standby never caught up");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// Proves what an asynchronous standby means for a confirmed call, and that brokers follow
// the promoted database rather than what they remember: with the standby stopped, an ack
// and publishes are confirmed by the primary alone; after the primary is stopped hard and
// the standby promoted, both brokers serve again by themselves, the confirmed publishes
// are gone (the log ends where the standby's copy did, and the next publish gets a lost
// publish's offset) and the confirmed ack is undone (the same delivery is in flight),
// also for the broker that had committed it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_to_an_asynchronous_standby_loses_the_calls_it_had_not_received() {
    let Some(url) = fresh_postgres_database().await else {
        return;
    };
    let (owned, _) = cluster_files(&url).await;
    let pair = tokio::task::spawn_blocking(move || Pair::start(&owned, false))
        .await
        .unwrap();
    await_standby(&pair.primary, "async").await;
    let (a, b, _dir_a, _dir_b) = brokers(&pair, None).await;
    let (client_a, client_b) = (a.client(), b.client());
    for n in 0..10 {
        assert_eq!(client_a.publish("t", format!("kept-{n}")).await.unwrap(), n);
    }
    let delivery = client_b.poll("t", "g").await.unwrap().expect("a delivery");
    assert_eq!((delivery.offset, delivery.attempt), (0, 1));
    await_replayed(&pair.primary).await;

    pair.standby.pg_ctl(&["-m", "fast", "-w", "stop"]);
    client_b.ack("t", "g", delivery.id()).await.unwrap();
    for n in 0..5 {
        assert_eq!(
            client_a.publish("t", format!("lost-{n}")).await.unwrap(),
            10 + n
        );
    }
    pair.primary.pg_ctl(&["-m", "immediate", "-w", "stop"]);
    assert!(
        pair.standby.start_again(),
        "the standby did not start again"
    );
    pair.standby.pg_ctl(&["-w", "promote"]);
    let promoted = Instant::now();
    let serving = [
        await_serving(&client_a, promoted).await,
        await_serving(&client_b, promoted).await,
    ];
    eprintln!("failover (asynchronous): brokers serving {serving:?} after the promotion");

    assert_eq!(
        client_b.topic_info("t").await.unwrap().end,
        10,
        "the lost publishes"
    );
    // The acked delivery is in flight again: its nack (on A) is a retry, not `not_owned`.
    // Broker B committed the lost ack; it must plan on the database's state (attempt 2
    // of offset 0), not on what it remembers (offset 0 acked).
    let nacked = client_a.nack("t", "g", delivery.id()).await.unwrap();
    assert_eq!(
        nacked,
        mailroom_client::NackOutcome::Retry,
        "the undone ack"
    );
    let next = client_b.poll("t", "g").await.unwrap().expect("the retry");
    assert_eq!(
        (next.offset, next.attempt),
        (0, 2),
        "broker B planned on a lost state"
    );
    assert_eq!(client_b.group_info("t", "g").await.unwrap().position, 0);
    assert_eq!(client_b.publish("t", "after").await.unwrap(), 10);
    let page = client_a
        .read("t", mailroom_client::ReadFrom::Offset(10), 1, 0)
        .await
        .unwrap();
    assert_eq!(
        page.messages[0].payload, "after",
        "offset 10 names another message now"
    );
}
