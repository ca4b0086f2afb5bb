//! Load on one group for the broker fault tests (a broker killed, the database failed
//! over): publishers and consumers that keep going through errors, and a record of what
//! they were told, with the checks that record must pass.
//!
//! Every test here uses topic `t` and group `g`. A consumer acks what it is handed,
//! except the offsets its [`Rules`] call poison, which it nacks with [`POISON_REASON`]
//! until they are dead-lettered.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mailroom_client::{
    BatchItemError, BatchPoll, Client, Delivery, DeliveryId, NackOptions, NackOutcome, ReadFrom,
};

/// The reason a consumer's nack of a poison message gives; a dead letter with any other
/// reason was dead-lettered by its lease running out.
pub const POISON_REASON: &str = "poison";

/// Where a worker sends its next call: a fixed broker, or whichever process serves a
/// broker's slot now (a restarted broker listens on a new port).
pub type Source = Arc<dyn Fn() -> Client + Send + Sync>;

/// A source that always answers `client`.
pub fn fixed(client: &Client) -> Source {
    let client = client.clone();
    Arc::new(move || client.clone())
}

/// How a consumer treats what it is handed.
#[derive(Clone, Copy)]
pub struct Rules {
    /// Offsets always nacked (so dead-lettered after `max_attempts` failures).
    pub poison: fn(u64) -> bool,
    /// Stop at the first failed call (its broker is gone for good) instead of retrying.
    pub gives_up: bool,
}

/// Acks everything and retries failed calls.
pub const ACK_ALL: Rules = Rules {
    poison: |_| false,
    gives_up: false,
};

/// What the consumers were handed and told, in the order the answers arrived.
#[derive(Default)]
pub struct Seen {
    /// Which consumer each (offset, attempt) was first handed to.
    pub handed: HashMap<(u64, u32), String>,
    /// Deliveries handed to a second consumer: must stay empty.
    pub twice: Vec<(u64, u32, String, String)>,
    /// Offsets whose ack succeeded.
    pub acked: BTreeSet<u64>,
    /// Offsets whose nack answered `dead_lettered`.
    pub dead_lettered: BTreeSet<u64>,
    /// Deliveries whose ack or nack was confirmed: stale from that answer on, so an ack
    /// naming one must answer `not_owned` on every broker.
    pub stale_ids: Vec<DeliveryId>,
    /// Per offset, the highest attempt handed so far.
    latest: HashMap<u64, u32>,
    /// Per offset, the lowest attempt that may still be handed: one past a confirmed
    /// retry, `u32::MAX` after a confirmed ack or dead letter.
    floor: HashMap<u64, u32>,
    /// Deliveries handed below their offset's floor: an ack or nack confirmed for an
    /// attempt that was not the live one, or a confirmed ack undone. Must stay empty.
    pub stale: Vec<String>,
    /// Settlements whose call failed, so whether they committed is not known.
    pub unsettled: BTreeSet<(u64, u32)>,
}

impl Seen {
    fn handed_to(&mut self, consumer: &str, deliveries: &[Delivery]) {
        for delivery in deliveries {
            let key = (delivery.offset, delivery.attempt);
            if let Some(&floor) = self.floor.get(&delivery.offset) {
                if delivery.attempt < floor {
                    self.stale.push(format!(
                        "({}, {}) handed to {consumer} after a settlement allowed only attempts >= {floor}",
                        key.0, key.1
                    ));
                }
            }
            let latest = self.latest.entry(delivery.offset).or_default();
            *latest = (*latest).max(delivery.attempt);
            let first = self
                .handed
                .entry(key)
                .or_insert_with(|| consumer.to_owned())
                .clone();
            if first != consumer {
                self.twice.push((key.0, key.1, first, consumer.to_owned()));
            }
        }
    }

    /// Notes a confirmed settlement of `id`: stale from now on. One that finished the
    /// message (`floor` = `u32::MAX`) must have settled the live attempt: no later one
    /// can have been handed before it. (After a retry another consumer may be handed the
    /// next attempt before this answer is recorded, so a retry is not checked here.)
    fn settled(&mut self, id: DeliveryId, floor: u32) {
        let latest = self.latest.get(&id.offset).copied().unwrap_or_default();
        if floor == u32::MAX && latest > id.attempt {
            self.stale.push(format!(
                "({}, {}) settled after attempt {latest} was handed",
                id.offset, id.attempt
            ));
        }
        self.stale_ids.push(id);
        let old = self.floor.entry(id.offset).or_default();
        *old = (*old).max(floor);
    }

    fn acks_answered(&mut self, ids: &[DeliveryId], answers: Vec<Result<(), BatchItemError>>) {
        for (id, answer) in ids.iter().zip(answers) {
            if answer.is_ok() {
                self.acked.insert(id.offset);
                self.settled(*id, u32::MAX);
            }
        }
    }

    fn nacks_answered(
        &mut self,
        ids: &[DeliveryId],
        answers: Vec<Result<NackOutcome, BatchItemError>>,
    ) {
        for (id, answer) in ids.iter().zip(answers) {
            match answer {
                Ok(NackOutcome::DeadLettered) => {
                    self.dead_lettered.insert(id.offset);
                    self.settled(*id, u32::MAX);
                }
                Ok(_) => self.settled(*id, id.attempt + 1),
                Err(_) => {}
            }
        }
    }

    fn lost(&mut self, ids: &[DeliveryId]) {
        self.unsettled
            .extend(ids.iter().map(|id| (id.offset, id.attempt)));
    }

    /// The offsets handed to anyone.
    pub fn delivered(&self) -> BTreeSet<u64> {
        self.handed.keys().map(|&(offset, _)| offset).collect()
    }

    /// Fails the test if one (offset, attempt) went to two consumers, or a delivery was
    /// handed after a confirmed settlement made it stale.
    pub fn assert_exact(&self, context: &str) {
        assert!(
            self.twice.is_empty(),
            "{context}: handed to two consumers: {:?}",
            self.twice
        );
        assert!(self.stale.is_empty(), "{context}: {:?}", self.stale);
    }
}

/// Polls (acking the last batch in the same call, nacking the poison at once) as
/// `consumer` until `stop`, or until the first failed call when `rules.gives_up`.
pub async fn consume(
    source: Source,
    consumer: String,
    seen: Arc<Mutex<Seen>>,
    stop: Arc<AtomicBool>,
    rules: Rules,
) {
    let nack = NackOptions {
        reason: Some(POISON_REASON.to_owned()),
        ..NackOptions::default()
    };
    let mut owned: Vec<DeliveryId> = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        let client = source();
        let request = BatchPoll {
            consumer: Some(&consumer),
            max: 8,
            wait_ms: 100,
            ack: &owned,
        };
        let deliveries = match client.ack_then_poll_batch("t", "g", &request).await {
            Ok((acks, deliveries)) => {
                let mut seen = seen.lock().unwrap();
                seen.acks_answered(&owned, acks);
                seen.handed_to(&consumer, &deliveries);
                deliveries
            }
            Err(_) if rules.gives_up => return,
            // The acks are sent again with the next poll: an ack that did commit then
            // answers `not_owned`, which the checks allow for an unsettled delivery.
            Err(_) => {
                seen.lock().unwrap().lost(&owned);
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let (poison, healthy): (Vec<DeliveryId>, Vec<DeliveryId>) = deliveries
            .iter()
            .map(Delivery::id)
            .partition(|id| (rules.poison)(id.offset));
        owned = healthy;
        if poison.is_empty() {
            continue;
        }
        match client.nack_batch("t", "g", &poison, &nack).await {
            Ok(answers) => seen.lock().unwrap().nacks_answered(&poison, answers),
            Err(_) if rules.gives_up => return,
            // Not sent again: the lease runs out and the message comes back, or the
            // nack did commit.
            Err(_) => seen.lock().unwrap().lost(&poison),
        }
    }
}

/// The confirmed publishes: each payload (unique, never retried) by the offset its
/// publish answered.
pub type Confirmed = Arc<Mutex<BTreeMap<u64, String>>>;

/// Publishes `{name}-{n}` for n = 0, 1, ... through `source` until `stop` or `count`
/// publishes, recording the confirmed ones; a failed publish is not retried, so each
/// payload is in the log at most once. Waits while more than `ahead_max` confirmed
/// publishes are not yet settled in `seen`, so consumers keep up on a slow machine.
pub async fn publish(
    source: Source,
    name: String,
    count: u64,
    confirmed: Confirmed,
    seen: Arc<Mutex<Seen>>,
    stop: Arc<AtomicBool>,
    ahead_max: usize,
) {
    for n in 0..count {
        while confirmed.lock().unwrap().len() > settled_count(&seen) + ahead_max {
            if stop.load(Ordering::SeqCst) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let payload = format!("{name}-{n}");
        match source().publish("t", payload.clone()).await {
            Ok(offset) => {
                let earlier = confirmed.lock().unwrap().insert(offset, payload.clone());
                assert!(
                    earlier.is_none(),
                    "offset {offset} confirmed for {earlier:?} and {payload}"
                );
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

fn settled_count(seen: &Mutex<Seen>) -> usize {
    let seen = seen.lock().unwrap();
    seen.acked.len() + seen.dead_lettered.len()
}

/// Waits until group `g` has finished the whole log (its position is the log's end and
/// nothing is in flight), and returns that end.
pub async fn await_group_end(client: &Client, wait: Duration) -> u64 {
    let deadline = Instant::now() + wait;
    loop {
        let end = client.topic_info("t").await.map(|topic| topic.end);
        let group = client.group_info("t", "g").await;
        if let (Ok(end), Ok(group)) = (&end, &group) {
            if group.position == *end && group.in_flight.is_none() {
                return *end;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the group never finished the log: {end:?} {group:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Reads the whole log of `t` and checks it against the confirmed publishes: every
/// confirmed payload is at the offset its publish answered, and no payload is in the
/// log twice (no offset was assigned twice, no publish stored twice). Returns the log's
/// payloads by offset.
pub async fn assert_log_holds(client: &Client, confirmed: &BTreeMap<u64, String>) -> Vec<String> {
    let mut log = Vec::new();
    let mut from = ReadFrom::Earliest;
    loop {
        let page = client
            .read("t", from, 1_000, 0)
            .await
            .expect("read the log");
        for message in page.messages {
            assert_eq!(message.offset, log.len() as u64, "a gap in the log");
            log.push(String::from_utf8(message.payload.to_vec()).expect("UTF-8"));
        }
        if page.next >= page.end {
            break;
        }
        from = ReadFrom::Offset(page.next);
    }
    for (&offset, payload) in confirmed {
        assert_eq!(
            log.get(offset as usize),
            Some(payload),
            "confirmed publish {payload} is not at its offset {offset}"
        );
    }
    let mut offsets: HashMap<&str, u64> = HashMap::new();
    for (offset, payload) in log.iter().enumerate() {
        if let Some(first) = offsets.insert(payload, offset as u64) {
            panic!("{payload} is in the log twice: at {first} and {offset}");
        }
    }
    log
}
