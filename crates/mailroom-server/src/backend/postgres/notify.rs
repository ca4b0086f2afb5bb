//! Wake-ups across brokers: after a call commits, its topic is marked dirty here; one
//! task sends every dirty topic in one `pg_notify` statement of its own (never inside a
//! hot transaction), so under load the notifications of many calls ride together. Each
//! broker listens on its own connection and wakes its long polls of the topics named.
//! A notification is a hint: a lost one delays a long poll to its next due time or its
//! 5 s recheck (`crate::long_poll`), never more. The same connection listens for the
//! other brokers' channel messages (`channel_relay.rs`).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::Pool;
use futures_util::StreamExt as _;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_postgres::{AsyncMessage, NoTls};

use super::channel_relay::{Relay, CHANNEL_MESSAGES};
use super::waiting::{Marks, MANY};
use crate::long_poll::LongPolls;

/// The channel every broker notifies and listens on.
pub const CHANNEL: &str = "mailroom";
/// The statement that sends one notification per dirty topic.
const NOTIFY: &str = "SELECT pg_notify($1, t) FROM unnest($2::text[]) AS t";
/// How long the sender and the listener wait before trying again after an error.
const RETRY_MS: u64 = 200;

/// The topics written since the last notification, and who sends them.
#[derive(Debug)]
pub(super) struct Notifier {
    dirty: Mutex<BTreeSet<String>>,
    ready: Notify,
    /// This broker's id, sent with each notification so it ignores its own.
    broker_id: u64,
    /// The newest waiting mark read of each topic: whether to notify at all.
    pub marks: Marks,
    /// How many writes were told to the other brokers.
    told: AtomicU64,
}

impl Notifier {
    pub(super) fn new() -> Notifier {
        let mut id = [0u8; 8];
        // Without randomness every broker would ignore the others' wakes; fall back to
        // the process id and time, which differ between brokers just as well.
        if getrandom::fill(&mut id).is_err() {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |elapsed| elapsed.as_nanos() as u64);
            id = (nanos ^ u64::from(std::process::id())).to_le_bytes();
        }
        Notifier {
            dirty: Mutex::new(BTreeSet::new()),
            ready: Notify::new(),
            broker_id: u64::from_le_bytes(id),
            marks: Marks::default(),
            told: AtomicU64::new(0),
        }
    }

    /// How many writes were told to the other brokers.
    pub(super) fn told(&self) -> u64 {
        self.told.load(Ordering::Relaxed)
    }

    pub(super) fn broker_id(&self) -> u64 {
        self.broker_id
    }

    /// This broker as a topic's waiting mark names it: its id, never 0 (no broker) or
    /// [`MANY`].
    pub(super) fn broker_mark(&self) -> i64 {
        match self.broker_id as i64 {
            0 | MANY => 1,
            id => id,
        }
    }

    /// Tells the other brokers `topic` was written if one may be waiting on it (its
    /// waiting mark, `waiting.rs`): they hear of it with the next notification.
    pub(super) fn tell_if_waited(&self, topic: &str) {
        if self.marks.others_wait(topic, self.broker_mark()) {
            self.tell(topic);
        }
    }

    /// Tells the other brokers `topic` was written: they hear of it with the next
    /// notification (its dirty set is sent as one).
    pub(super) fn tell(&self, topic: &str) {
        self.told.fetch_add(1, Ordering::Relaxed);
        let mut dirty = self.dirty.lock();
        if !dirty.contains(topic) {
            dirty.insert(topic.to_owned());
        }
        drop(dirty);
        self.ready.notify_one();
    }
}

/// The task that sends the dirty topics, one statement per round.
pub(super) fn spawn_sender(notifier: Arc<Notifier>, pool: Pool) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            notifier.ready.notified().await;
            let topics: Vec<String> = std::mem::take(&mut *notifier.dirty.lock())
                .into_iter()
                .map(|topic| format!("{} {topic}", notifier.broker_id))
                .collect();
            if topics.is_empty() {
                continue;
            }
            let sent = async {
                let client = pool.get().await.map_err(|error| error.to_string())?;
                // Prepared once per connection: a query string would be parsed in a
                // round trip (and an implicit transaction) of its own every time.
                let statement = client
                    .prepare_cached(NOTIFY)
                    .await
                    .map_err(|error| error.to_string())?;
                client
                    .execute(&statement, &[&CHANNEL, &topics])
                    .await
                    .map_err(|error| error.to_string())
            };
            if let Err(error) = sent.await {
                tracing::warn!(%error, "could not notify the other brokers");
                tokio::time::sleep(Duration::from_millis(RETRY_MS)).await;
            }
        }
    })
}

/// The task that listens for the other brokers' notifications, wakes `long_polls` and
/// hands channel messages to `relay`; it reconnects by itself.
pub(super) fn spawn_listener(
    config: tokio_postgres::Config,
    own_id: u64,
    long_polls: Arc<LongPolls>,
    relay: Arc<Relay>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            if let Err(error) = listen(&config, own_id, &long_polls, &relay).await {
                tracing::warn!(%error, "listening for the other brokers' writes; reconnecting");
            }
            tokio::time::sleep(Duration::from_millis(RETRY_MS)).await;
        }
    })
}

async fn listen(
    config: &tokio_postgres::Config,
    own_id: u64,
    long_polls: &LongPolls,
    relay: &Relay,
) -> Result<(), tokio_postgres::Error> {
    let (client, mut connection) = config.connect(NoTls).await?;
    let (messages_tx, mut messages) = tokio::sync::mpsc::unbounded_channel();
    // The connection's messages must be read for the LISTEN to be answered at all.
    let driver = tokio::spawn(async move {
        let mut stream =
            futures_util::stream::poll_fn(move |context| connection.poll_message(context));
        while let Some(message) = stream.next().await {
            match message {
                Ok(message) => {
                    if messages_tx.send(message).is_err() {
                        break;
                    }
                }
                Err(error) => return Err(error),
            }
        }
        Ok(())
    });
    client
        .batch_execute(&format!("LISTEN {CHANNEL}; LISTEN {CHANNEL_MESSAGES}"))
        .await?;
    // Whatever was told while this broker did not listen was lost to it: every waiter
    // polls again now rather than at its recheck (at start nobody waits yet).
    long_polls.wake_all();
    let own = own_id.to_string();
    while let Some(message) = messages.recv().await {
        if let AsyncMessage::Notification(notification) = message {
            if notification.channel() == CHANNEL_MESSAGES {
                relay.receive(notification.payload());
            } else if let Some((sender, topic)) = notification.payload().split_once(' ') {
                if sender != own {
                    long_polls.wake(topic);
                }
            }
        }
    }
    drop(client);
    match driver.await {
        Ok(result) => result,
        Err(_) => Ok(()),
    }
}
