//! Confirmed acks across kill -9: a consumer records every ack the server confirmed
//! (a `settled` frame with outcome `acked` on the consume stream, an `ok` item of an HTTP
//! `ack_then_poll` batch), the server is killed with SIGKILL mid-traffic and restarted
//! on the same data directory, a few rounds over; after every restart no confirmed ack
//! may be undone: the acked message is never delivered again, at any attempt, and the
//! group's position and in-flight list agree with the confirmations. Under
//! `--fsync never`, `interval:N` and `always` alike, since a process crash loses nothing
//! under any policy (`docs/storage.md`, "Sync policies").

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use common::{temp_dir, ServerProcess};
use mailroom_client::{
    BatchPoll, Client, DeliveryId, GroupOptions, SettledOutcome, StartPosition, StreamEvent,
};
use tokio::sync::watch;

const TOPIC: &str = "ledger";
const GROUP: &str = "billing";
/// One identity across every restart, so a delivery left in flight by a kill comes back
/// to it (same attempt) instead of blocking the window for a whole lease.
const CONSUMER: &str = "worker-1";
const MESSAGES: u64 = 300;
/// The stream's window and the batch size, the group's `max_in_flight` too.
const WINDOW: u32 = 16;
/// Kills while the consumer works; one more follows once everything is acked.
const KILL_ROUNDS: u64 = 4;

/// How the consumer settles its deliveries.
#[derive(Debug, Clone, Copy)]
enum Route {
    /// The consume stream: one ack frame per delivery as it arrives.
    Stream,
    /// HTTP batches: each `ack_then_poll` acks the previous batch and polls the next.
    AckThenPoll,
    /// HTTP: a batch poll, then one `ack_batch` of it.
    AckBatch,
    /// HTTP: a batch poll, then one ack request per delivery.
    SingleAcks,
}

/// What the consumer saw, across every server process.
#[derive(Debug, Default)]
struct Ledger {
    /// Every delivery whose ack the server confirmed, by offset.
    confirmed: BTreeMap<u64, u32>,
    /// Messages whose ack was sent but not answered when the server died: it may or may
    /// not have taken effect, so the message may or may not come back.
    unanswered: HashSet<u64>,
    /// Deliveries of a message whose ack had been confirmed before (the bug this hunts).
    redelivered: Vec<DeliveryId>,
    /// Acks refused although the delivery had just been handed out and not settled.
    refused: Vec<(DeliveryId, String)>,
}

impl Ledger {
    /// Notes a delivery handed out; a message whose ack was confirmed must not be.
    fn delivered(&mut self, id: DeliveryId) {
        if self.confirmed.contains_key(&id.offset) {
            self.redelivered.push(id);
        }
        // Back in flight: that unanswered ack did not take effect.
        self.unanswered.remove(&id.offset);
    }

    fn acked(&mut self, id: DeliveryId) {
        self.confirmed.entry(id.offset).or_insert(id.attempt);
    }

    /// How many messages are settled as far as the consumer can know: confirmed, or
    /// acked without an answer and not handed out again since.
    fn settled(&self) -> usize {
        self.confirmed.len() + self.unanswered.len()
    }

    fn done(&self) -> bool {
        self.settled() as u64 == MESSAGES
    }

    /// The lowest offset whose ack was not confirmed: the group's position must be at
    /// least this.
    fn confirmed_prefix(&self) -> u64 {
        (0..)
            .find(|offset| !self.confirmed.contains_key(offset))
            .unwrap()
    }
}

/// Runs the crash rounds for one fsync policy and route.
async fn confirmed_acks_survive_kills(fsync: &str, route: Route) {
    let dir = temp_dir();
    let flags = ["--fsync", fsync];
    let server = ServerProcess::start(dir.path(), &flags);
    set_up(&server.client()).await;
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let mut server = Some(server);
    for round in 1..=KILL_ROUNDS + 1 {
        let running = server.take().unwrap();
        let kill_at = (MESSAGES * round / (KILL_ROUNDS + 1)) as usize;
        let (count_tx, mut count_rx) = watch::channel(0usize);
        let consumer = tokio::spawn(consume(
            running.client(),
            route,
            Arc::clone(&ledger),
            count_tx,
        ));
        tokio::time::timeout(
            common::CONDITION_WAIT_MAX,
            count_rx.wait_for(|count| *count >= kill_at),
        )
        .await
        .unwrap_or_else(|_| panic!("round {round}: {kill_at} settled acks not reached in time"))
        .unwrap_or_else(|_| panic!("round {round}: the consumer stopped before the kill"));
        // SIGKILL while the consumer keeps acking: some acks are in the air.
        tokio::task::spawn_blocking(move || running.kill())
            .await
            .unwrap();
        consumer.await.unwrap();
        let restarted = ServerProcess::start(dir.path(), &flags);
        check_group(&restarted.client(), &ledger, round).await;
        server = Some(restarted);
    }
    let ledger = ledger.lock().unwrap();
    assert!(ledger.done());
    assert!(ledger.refused.is_empty(), "refused: {:?}", ledger.refused);
}

async fn set_up(client: &Client) {
    client.create_topic(TOPIC).await.unwrap();
    let payloads: Vec<bytes::Bytes> = (0..MESSAGES)
        .map(|n| bytes::Bytes::from(format!("message {n}")))
        .collect();
    client.publish_batch(TOPIC, &payloads).await.unwrap();
    let options = GroupOptions {
        max_attempts: 5,
        start: StartPosition::Earliest,
        lease_ms: Some(60_000),
        backoff: None,
        max_in_flight: Some(WINDOW),
    };
    client
        .create_group_with(TOPIC, GROUP, &options)
        .await
        .unwrap();
}

/// After a restart: no confirmed ack was undone. The position is at least past every
/// confirmed prefix, nothing confirmed is in flight, and with every ack confirmed (none
/// left unanswered by a kill) the group is at the end with nothing in flight.
async fn check_group(client: &Client, ledger: &Mutex<Ledger>, round: u64) {
    let detail = client.group_detail(TOPIC, GROUP).await.unwrap();
    let ledger = ledger.lock().unwrap();
    assert!(
        ledger.redelivered.is_empty(),
        "round {round}: messages delivered again after their ack was confirmed: {:?}",
        ledger.redelivered
    );
    let prefix = ledger.confirmed_prefix();
    assert!(
        detail.info.position >= prefix,
        "round {round}: position {} behind the confirmed acks up to {prefix}",
        detail.info.position
    );
    let undone: Vec<(u64, u32)> = detail
        .deliveries
        .iter()
        .filter(|delivery| ledger.confirmed.contains_key(&delivery.offset))
        .map(|delivery| (delivery.offset, delivery.attempt))
        .collect();
    assert!(
        undone.is_empty(),
        "round {round}: confirmed acks in flight again after the restart: {undone:?}"
    );
    // Only with every ack confirmed: acks the kill left unanswered may not have landed,
    // and their messages are then still in flight, or due again.
    if ledger.confirmed.len() as u64 == MESSAGES {
        assert_eq!(detail.info.position, MESSAGES, "round {round}");
        assert!(detail.deliveries.is_empty(), "round {round}");
    }
}

/// Consumes until every message is confirmed acked or the server dies, noting every
/// confirmation in `ledger` and its count in `count`.
async fn consume(
    client: Client,
    route: Route,
    ledger: Arc<Mutex<Ledger>>,
    count: watch::Sender<usize>,
) {
    match route {
        Route::Stream => consume_stream(&client, &ledger, &count).await,
        Route::AckThenPoll => consume_batches(&client, &ledger, &count).await,
        Route::AckBatch | Route::SingleAcks => {
            consume_polls(&client, route, &ledger, &count).await;
        }
    }
}

async fn consume_stream(client: &Client, ledger: &Mutex<Ledger>, count: &watch::Sender<usize>) {
    let Ok(mut stream) = client
        .consume_stream(TOPIC, GROUP, WINDOW, Some(CONSUMER))
        .await
    else {
        return;
    };
    // What each settlement of this connection acked, by its `seq`.
    let mut sent: HashMap<u64, DeliveryId> = HashMap::new();
    while !ledger.lock().unwrap().done() {
        let event = match stream.next().await {
            Ok(Some(event)) => event,
            Ok(None) | Err(_) => break,
        };
        match event {
            StreamEvent::Delivery(delivery) => {
                ledger.lock().unwrap().delivered(delivery.id());
                match stream.ack(delivery.id()).await {
                    Ok(seq) => assert!(sent.insert(seq, delivery.id()).is_none()),
                    Err(_) => {
                        // Maybe sent in part before the connection broke.
                        ledger.lock().unwrap().unanswered.insert(delivery.offset);
                        break;
                    }
                }
            }
            StreamEvent::Settled(settled) => {
                let id = sent.remove(&settled.seq).expect("an answer to a sent ack");
                let mut ledger = ledger.lock().unwrap();
                match settled.outcome {
                    Ok(SettledOutcome::Acked) => ledger.acked(id),
                    Ok(other) => panic!("{id:?}: an ack answered {other:?}"),
                    Err(refusal) => ledger.refused.push((id, refusal.message)),
                }
                count.send_replace(ledger.settled());
            }
        }
    }
    // The server died (or everything is settled): acks still unanswered may have landed.
    let mut ledger = ledger.lock().unwrap();
    ledger.unanswered.extend(sent.values().map(|id| id.offset));
    count.send_replace(ledger.settled());
}

async fn consume_batches(client: &Client, ledger: &Mutex<Ledger>, count: &watch::Sender<usize>) {
    let mut to_ack: Vec<DeliveryId> = Vec::new();
    loop {
        let request = BatchPoll {
            consumer: Some(CONSUMER),
            max: WINDOW,
            wait_ms: 0,
            ack: &to_ack,
        };
        let Ok((outcomes, deliveries)) = client.ack_then_poll_batch(TOPIC, GROUP, &request).await
        else {
            // The server died: this batch's acks may have landed.
            let mut ledger = ledger.lock().unwrap();
            ledger.unanswered.extend(to_ack.iter().map(|id| id.offset));
            count.send_replace(ledger.settled());
            return;
        };
        let mut ledger = ledger.lock().unwrap();
        for (id, outcome) in to_ack.iter().zip(outcomes) {
            match outcome {
                Ok(()) => ledger.acked(*id),
                Err(error) => ledger.refused.push((*id, error.message)),
            }
        }
        count.send_replace(ledger.settled());
        if ledger.done() {
            return;
        }
        to_ack = deliveries.iter().map(|d| d.id()).collect();
        for id in &to_ack {
            ledger.delivered(*id);
        }
    }
}

/// Polls a batch, then acks it with `ack_batch` or one ack at a time, until everything
/// is settled or the server dies.
async fn consume_polls(
    client: &Client,
    route: Route,
    ledger: &Mutex<Ledger>,
    count: &watch::Sender<usize>,
) {
    while !ledger.lock().unwrap().done() {
        let request = BatchPoll {
            consumer: Some(CONSUMER),
            max: WINDOW,
            wait_ms: 0,
            ack: &[],
        };
        let Ok(deliveries) = client.poll_batch(TOPIC, GROUP, &request).await else {
            return;
        };
        let ids: Vec<DeliveryId> = deliveries.iter().map(|d| d.id()).collect();
        for id in &ids {
            ledger.lock().unwrap().delivered(*id);
        }
        let answered = match route {
            Route::AckBatch => ack_batch(client, &ids, ledger).await,
            _ => ack_one_by_one(client, &ids, ledger).await,
        };
        let mut ledger = ledger.lock().unwrap();
        if let Err(unanswered) = answered {
            // The server died: those acks may have landed.
            ledger
                .unanswered
                .extend(unanswered.iter().map(|id| id.offset));
            count.send_replace(ledger.settled());
            return;
        }
        count.send_replace(ledger.settled());
    }
}

/// Acks `ids` in one `ack_batch`; `Err` with them if it got no answer.
async fn ack_batch<'a>(
    client: &Client,
    ids: &'a [DeliveryId],
    ledger: &Mutex<Ledger>,
) -> Result<(), &'a [DeliveryId]> {
    let outcomes = client.ack_batch(TOPIC, GROUP, ids).await.map_err(|_| ids)?;
    let mut ledger = ledger.lock().unwrap();
    for (id, outcome) in ids.iter().zip(outcomes) {
        match outcome {
            Ok(()) => ledger.acked(*id),
            Err(error) => ledger.refused.push((*id, error.message)),
        }
    }
    Ok(())
}

/// Acks `ids` one request each; `Err` with the first unanswered and the rest.
async fn ack_one_by_one<'a>(
    client: &Client,
    ids: &'a [DeliveryId],
    ledger: &Mutex<Ledger>,
) -> Result<(), &'a [DeliveryId]> {
    for (n, id) in ids.iter().enumerate() {
        match client.ack(TOPIC, GROUP, *id).await {
            Ok(()) => ledger.lock().unwrap().acked(*id),
            Err(error) if error.code() == Some("not_owned") => {
                ledger
                    .lock()
                    .unwrap()
                    .refused
                    .push((*id, error.to_string()));
            }
            Err(_) => return Err(&ids[n..]),
        }
    }
    Ok(())
}

// Proves no ack confirmed on the consume stream is undone by a kill -9 under --fsync never.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_acks_survive_kills_under_fsync_never() {
    confirmed_acks_survive_kills("never", Route::Stream).await;
}

// Proves no ack confirmed on the consume stream is undone by a kill -9 under --fsync always.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_acks_survive_kills_under_fsync_always() {
    confirmed_acks_survive_kills("always", Route::Stream).await;
}

// Proves no ack confirmed on the consume stream is undone by a kill -9 under an interval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_acks_survive_kills_under_fsync_interval() {
    confirmed_acks_survive_kills("interval:50", Route::Stream).await;
}

// Proves no ack confirmed by an ack_then_poll batch is undone by a kill -9 under never.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_acks_survive_kills_under_fsync_never() {
    confirmed_acks_survive_kills("never", Route::AckThenPoll).await;
}

// Proves no ack confirmed by an ack_then_poll batch is undone by a kill -9 under always.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_acks_survive_kills_under_fsync_always() {
    confirmed_acks_survive_kills("always", Route::AckThenPoll).await;
}

// Proves no ack confirmed by an ack_batch is undone by a kill -9 under --fsync never.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ack_batches_survive_kills_under_fsync_never() {
    confirmed_acks_survive_kills("never", Route::AckBatch).await;
}

// Proves no ack confirmed one request at a time is undone by a kill -9 under never.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_acks_survive_kills_under_fsync_never() {
    confirmed_acks_survive_kills("never", Route::SingleAcks).await;
}

// Proves no ack confirmed one request at a time is undone by a kill -9 under always.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_acks_survive_kills_under_fsync_always() {
    confirmed_acks_survive_kills("always", Route::SingleAcks).await;
}
