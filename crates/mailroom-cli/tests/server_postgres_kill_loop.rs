//! The kill -9 loop over the PostgreSQL store: two `mailroom serve` brokers on one
//! database, publishers and consumers (acks, and nacks of poison messages until they are
//! dead-lettered) on both, and one broker, chosen by a seeded RNG, killed with SIGKILL
//! and restarted at random moments, round after round. At the end nothing confirmed is
//! lost, no stale attempt was ever accepted, the dead letters are exactly the ones the
//! consumers' answers allow, and the group ends at the log's end.
//!
//! `MAILROOM_KILL_ROUNDS` sets the rounds (30 by default, as in CI;
//! `scripts/postgres-kill-loop.sh` runs 1,000) and `MAILROOM_KILL_SEED` the seed (the
//! clock by default; a failure prints it). The database comes from
//! `MAILROOM_TEST_POSTGRES` (`scripts/postgres.sh start DIR`).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::group_load::{
    assert_log_holds, await_group_end, consume, publish, Confirmed, Rules, Seen, Source,
    POISON_REASON,
};
use common::{fresh_postgres_database, temp_dir, ServerProcess};
use mailroom_client::{Client, DeadLetter, GroupOptions, StartPosition};

/// Failures allowed per message: a poison message is nacked this many times.
const MAX_ATTEMPTS: u32 = 3;

/// The offsets every consumer nacks: one in seven.
fn poison(offset: u64) -> bool {
    offset % 7 == 3
}

/// A small seeded generator (SplitMix64): the kill schedule replays from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `low..high`.
    fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.next() % (high - low)
    }
}

fn env_number(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    Some(
        value
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value}: not a number")),
    )
}

/// The two broker slots: the process serving each now, and a client for it.
struct Brokers {
    store: String,
    dirs: [tempfile::TempDir; 2],
    processes: Mutex<[Option<ServerProcess>; 2]>,
    clients: Arc<Mutex<Vec<Client>>>,
}

impl Brokers {
    fn start(store: &str) -> Brokers {
        let dirs = [temp_dir(), temp_dir()];
        let processes =
            [0, 1].map(|slot| ServerProcess::start(dirs[slot].path(), &["--store", store]));
        let clients = processes.iter().map(ServerProcess::client).collect();
        Brokers {
            store: store.to_owned(),
            dirs,
            processes: Mutex::new(processes.map(Some)),
            clients: Arc::new(Mutex::new(clients)),
        }
    }

    /// Whichever broker serves `slot` when a call is made.
    fn source(&self, slot: usize) -> Source {
        let clients = Arc::clone(&self.clients);
        Arc::new(move || clients.lock().unwrap()[slot].clone())
    }

    fn client(&self, slot: usize) -> Client {
        self.clients.lock().unwrap()[slot].clone()
    }

    /// SIGKILL to the broker of `slot`.
    fn kill(&self, slot: usize) {
        let process = self.processes.lock().unwrap()[slot].take();
        process.expect("a broker in the slot").kill();
    }

    /// A new broker in `slot` (on a new port), and every worker of the slot moved to it.
    fn restart(&self, slot: usize) {
        let process = ServerProcess::start(self.dirs[slot].path(), &["--store", &self.store]);
        self.clients.lock().unwrap()[slot] = process.client();
        self.processes.lock().unwrap()[slot] = Some(process);
    }
}

/// Acks `probes` (each confirmed settled before) on both brokers: every one must answer
/// 409 `not_owned`, an old attempt accepted by no broker, restarted or not.
async fn assert_stale_refused(
    brokers: &Brokers,
    probes: &[mailroom_client::DeliveryId],
    context: &str,
) {
    for slot in [0, 1] {
        let client = brokers.client(slot);
        for &id in probes {
            let answer = client.ack("t", "g", id).await;
            let refused = answer
                .as_ref()
                .err()
                .map(|error| (error.status(), error.code().map(str::to_owned)));
            assert_eq!(
                refused,
                Some((Some(409), Some("not_owned".to_owned()))),
                "{context}: a stale ack of {id:?} on broker {slot} answered {answer:?}"
            );
        }
    }
}

// Proves brokers killed with SIGKILL over and over lose nothing confirmed and keep every
// delivery exact: the log holds every confirmed publish once at its offset, no
// (offset, attempt) went to two consumers, no settlement of a stale attempt was accepted
// (and deliberate stale acks after every restart answer 409 `not_owned`), the dead
// letters are exactly the poison messages plus healthy ones whose every attempt's
// lease ran out unacked, and the group ends exactly at the log's end.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn brokers_killed_at_random_lose_nothing_confirmed() {
    let Some(url) = fresh_postgres_database().await else {
        return;
    };
    let rounds = env_number("MAILROOM_KILL_ROUNDS").unwrap_or(30);
    let seed = env_number("MAILROOM_KILL_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    });
    let context = format!("MAILROOM_KILL_SEED={seed} MAILROOM_KILL_ROUNDS={rounds}");
    eprintln!("kill loop: {context}");
    let mut rng = Rng(seed);
    let brokers = tokio::task::spawn_blocking(move || Brokers::start(&url))
        .await
        .unwrap();
    let brokers = Arc::new(brokers);
    let setup = brokers.client(0);
    setup.create_topic("t").await.unwrap();
    let mut options = GroupOptions::new(MAX_ATTEMPTS);
    options.lease_ms = Some(1_000);
    options.max_in_flight = Some(32);
    options.start = StartPosition::Earliest;
    setup.create_group_with("t", "g", &options).await.unwrap();

    let confirmed: Confirmed = Arc::default();
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let (stop_publishing, stop) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let mut publishers = Vec::new();
    let mut consumers = Vec::new();
    let rules = Rules {
        poison,
        gives_up: false,
    };
    for slot in [0, 1] {
        let task = publish(
            brokers.source(slot),
            format!("p{slot}"),
            u64::MAX,
            Arc::clone(&confirmed),
            Arc::clone(&seen),
            Arc::clone(&stop_publishing),
            200,
        );
        publishers.push(tokio::spawn(task));
        for n in 0..2 {
            let name = format!("c{slot}-{n}");
            let task = consume(
                brokers.source(slot),
                name,
                Arc::clone(&seen),
                Arc::clone(&stop),
                rules,
            );
            consumers.push(tokio::spawn(task));
        }
    }

    let started = Instant::now();
    for round in 0..rounds {
        tokio::time::sleep(Duration::from_millis(rng.between(100, 900))).await;
        let slot = rng.between(0, 2) as usize;
        let down_ms = rng.between(0, 300);
        let probes: Vec<_> = {
            let seen = seen.lock().unwrap();
            (0..3.min(seen.stale_ids.len()))
                .map(|_| seen.stale_ids[rng.between(0, seen.stale_ids.len() as u64) as usize])
                .collect()
        };
        let killer = Arc::clone(&brokers);
        tokio::task::spawn_blocking(move || {
            killer.kill(slot);
            std::thread::sleep(Duration::from_millis(down_ms));
            killer.restart(slot);
        })
        .await
        .unwrap();
        let round_context = format!("{context}, round {round}, broker {slot} restarted");
        assert_stale_refused(&brokers, &probes, &round_context).await;
    }
    let killing = started.elapsed();
    stop_publishing.store(true, Ordering::SeqCst);
    for publisher in publishers {
        publisher.await.unwrap();
    }
    let end = await_group_end(&brokers.client(1), Duration::from_secs(60)).await;
    stop.store(true, Ordering::SeqCst);
    for consumer in consumers {
        consumer.await.unwrap();
    }

    let client = brokers.client(0);
    let confirmed = confirmed.lock().unwrap().clone();
    assert_log_holds(&client, &confirmed).await;
    let dead_letters = client.dead_letters("t", "g").await.unwrap();
    let group = client.group_info("t", "g").await.unwrap();
    let seen = seen.lock().unwrap();
    seen.assert_exact(&context);
    assert_eq!(group.dead_letters, dead_letters.len() as u64, "{context}");
    let by_lease = assert_dead_letters_exact(&seen, &dead_letters, end, &context);
    let delivered = seen.delivered();
    let dead: BTreeSet<u64> = dead_letters.iter().map(|letter| letter.offset).collect();
    let missing: Vec<u64> = confirmed
        .keys()
        .filter(|offset| !delivered.contains(offset) && !dead.contains(offset))
        .copied()
        .collect();
    assert!(
        missing.is_empty(),
        "{context}: confirmed, never delivered: {missing:?}"
    );
    eprintln!(
        "kill loop: {rounds} rounds in {killing:?}; {end} messages ({} confirmed), {} acks \
         confirmed, {} dead letters ({by_lease} by lease), {} settlements unconfirmed",
        confirmed.len(),
        seen.acked.len(),
        dead_letters.len(),
        seen.unsettled.len()
    );
}

/// Checks the dead letters against what the consumers were told, and returns how many
/// healthy messages were dead-lettered by their leases.
///
/// Exact, because a consumer's treatment of a message depends on its offset only: a
/// poison message is never acked, so each of its attempts fails (by a nack or by its
/// lease) and every poison offset of the log is dead-lettered after `MAX_ATTEMPTS`; a
/// healthy message is never nacked, so it is dead-lettered only by `MAX_ATTEMPTS`
/// leases running out, none of whose acks was confirmed. So: every offset once; the
/// poison offsets all there; a healthy one only with reason "lease expired" and no
/// confirmed ack; every nack answered `dead_lettered` there with its reason; no
/// confirmed ack there.
fn assert_dead_letters_exact(
    seen: &Seen,
    letters: &[DeadLetter],
    end: u64,
    context: &str,
) -> usize {
    let mut by_offset: BTreeMap<u64, &DeadLetter> = BTreeMap::new();
    for letter in letters {
        let earlier = by_offset.insert(letter.offset, letter);
        assert!(
            earlier.is_none(),
            "{context}: offset {} dead-lettered twice",
            letter.offset
        );
        assert_eq!(letter.attempts, MAX_ATTEMPTS, "{context}: {letter:?}");
        assert!(
            letter.offset < end,
            "{context}: {letter:?} past the log's end {end}"
        );
        assert!(
            !seen.acked.contains(&letter.offset),
            "{context}: acked and dead-lettered: {letter:?}"
        );
    }
    let poison_missing: Vec<u64> = (0..end)
        .filter(|&offset| poison(offset) && !by_offset.contains_key(&offset))
        .collect();
    assert!(
        poison_missing.is_empty(),
        "{context}: poison not dead-lettered: {poison_missing:?}"
    );
    for &offset in &seen.dead_lettered {
        let reason = by_offset
            .get(&offset)
            .and_then(|letter| letter.reason.as_deref());
        assert_eq!(
            reason,
            Some(POISON_REASON),
            "{context}: confirmed dead letter {offset}"
        );
    }
    let mut by_lease = 0;
    for letter in by_offset.values().filter(|letter| !poison(letter.offset)) {
        assert_eq!(
            letter.reason.as_deref(),
            Some("lease expired"),
            "{context}: {letter:?}"
        );
        by_lease += 1;
    }
    by_lease
}
