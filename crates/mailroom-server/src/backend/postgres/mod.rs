//! The PostgreSQL backend: topics, messages, groups and dead letters in one database that
//! any number of brokers share (`mailroom serve --store postgres://...`). The design, its
//! fencing and its failure analysis are in `docs/scale-out.md`.
//!
//! Every call is one transaction, committed before it answers; group calls lock the
//! group's row and plan with `mailroom::group` (see [`group`](self) internals). Wake-ups
//! of other brokers' long polls go by a coalesced `NOTIFY` outside the hot transactions.
//!
//! # What this backend supports yet
//!
//! Topics (create, list, state, delete), publish (single and batch, with keys, headers
//! and idempotency keys, under a topic's own window where it has one:
//! `idempotency.rs`), groups (create, detail, config, delete), poll,
//! ack, nack of every kind, touch, the batches and ack-then-poll, redrive, purge,
//! dead-letter pages, seek (by offset and by time), pause, reads of the log without a
//! group (`log_reads.rs`), `next_due_in`, gauges, sync and health, and the publish stream
//! (its handle does not check the topic when opened: the first publish does). Every
//! delivery, dead letter and read carries its message's publish time and metadata
//! (`metadata.rs`). Retention: each topic's own limits over the brokers' defaults,
//! enforced by a pass that drops whole segment tables (`retention.rs`). Live channels
//! across brokers: each broker's channel publishes are relayed to the others by a
//! coalesced `NOTIFY` (`channel_relay.rs`), and the backend holds the server's
//! [`Channels`](crate::channels::Channels) so that it can fan the others' out here.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Hook, Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use parking_lot::Mutex;
use tokio_postgres::error::SqlState;
use tokio_postgres::NoTls;

use crate::backend::{BackendError, BackendHealth};
use crate::long_poll::LongPolls;

mod appends;
mod calls;
mod channel_relay;
mod deliveries;
mod encoding;
mod group;
mod group_lock;
mod group_reads;
mod group_restore;
mod group_window;
mod group_write;
mod idempotency;
mod log_reads;
mod metadata;
mod notify;
mod polls;
mod publisher;
mod retention;
mod schema;
mod seek_pause;
mod topic_statements;
mod topics;
mod txn;
mod waiting;

pub use channel_relay::RELAYED_PAYLOAD_BYTES_MAX;
pub use schema::{version_known, SEGMENT_OFFSETS};

/// Connections a broker keeps open to the database at most.
pub const POOL_SIZE_MAX: usize = 32;
/// How long a call waits for a connection (from the pool, or a new one) before it
/// answers 503 `store_unavailable`.
pub const CONNECT_TIMEOUT_MS: u64 = 5_000;
/// The `idle_in_transaction_session_timeout` of the backend's sessions, unless the store
/// URL's `options` set one: a broker paused inside a transaction loses it (and the row
/// locks it held) after this long.
pub const IDLE_IN_TRANSACTION_MS: u64 = 10_000;

/// The settings a broker applies to the database it shares: every broker on one database
/// should be given the same ones (`docs/scale-out.md`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PgOptions {
    /// The retention of every topic that has no limit of its own (`--retention-*`).
    pub retention: mailroom_store::Retention,
    /// The idempotency window of every topic (`--idempotency-window-*`).
    pub idempotency: mailroom_store::IdempotencyWindow,
}

/// Why the PostgreSQL backend could not start or a call of it failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PgError {
    /// The store URL does not parse.
    #[error("store URL: {0}")]
    Url(String),
    /// The database was migrated by a newer binary.
    #[error("the database holds schema version {found}, this binary knows up to {known}")]
    NewerSchema {
        /// The version found.
        found: i32,
        /// The newest version this binary knows.
        known: i32,
    },
    /// The database answered with an error, or the connection failed.
    #[error("database: {0}")]
    Database(#[from] tokio_postgres::Error),
    /// No connection could be had from the pool.
    #[error("database connection: {0}")]
    Pool(#[from] deadpool_postgres::PoolError),
}

impl From<PgError> for BackendError {
    fn from(error: PgError) -> BackendError {
        let transient = match &error {
            PgError::Pool(_) => true,
            PgError::Database(error) => is_transient(error),
            PgError::Url(_) | PgError::NewerSchema { .. } => false,
        };
        if transient {
            BackendError::Unavailable(error.to_string())
        } else {
            BackendError::Internal(error.to_string())
        }
    }
}

/// Whether a database error means "not reachable now" rather than a fault of the call:
/// a lost connection, a server shutting down or starting, a session timed out.
fn is_transient(error: &tokio_postgres::Error) -> bool {
    let Some(db) = error.as_db_error() else {
        return true;
    };
    let code = db.code();
    code.code().starts_with("08")
        || [
            SqlState::ADMIN_SHUTDOWN,
            SqlState::CRASH_SHUTDOWN,
            SqlState::CANNOT_CONNECT_NOW,
            SqlState::IDLE_IN_TRANSACTION_SESSION_TIMEOUT,
            SqlState::READ_ONLY_SQL_TRANSACTION,
            SqlState::T_R_SERIALIZATION_FAILURE,
            SqlState::T_R_DEADLOCK_DETECTED,
        ]
        .contains(code)
}

/// Each group's state as a broker last committed or read it, by (topic, group).
type GroupCache = Mutex<HashMap<(String, String), group::Cached>>;

/// Notes that the database was lost (`why`): the failure `/health` reports until a call
/// succeeds, and the cached group states and waiting marks dropped, to be read again from
/// whichever database answers next. A failover to an asynchronous standby can reuse a
/// version number for other content (`docs/scale-out.md`).
fn lost(
    failure: &Mutex<Option<String>>,
    cache: &GroupCache,
    notifier: &notify::Notifier,
    why: &str,
) {
    *failure.lock() = Some(why.to_owned());
    forget(cache, notifier);
}

/// Drops the cached group states and waiting marks: after any lost connection, whether a
/// call saw it fail or the pool found it closed while idle (`connect_with`).
fn forget(cache: &GroupCache, notifier: &notify::Notifier) {
    cache.lock().clear();
    notifier.marks.clear();
}

/// Wakes this broker's long polls of `topic` and, through the notifier, every other
/// broker's, if one may be waiting (the topic's waiting mark as this broker last read
/// it, in the transaction of the write that wakes: `waiting.rs`).
fn wake(long_polls: &LongPolls, notifier: &notify::Notifier, topic: &str) {
    long_polls.wake(topic);
    notifier.tell_if_waited(topic);
}

/// The PostgreSQL backend. See the [module docs](self).
///
/// ```no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use bytes::Bytes;
/// use mailroom_server::backend::{Backend, Postgres};
/// use mailroom_server::long_poll::LongPolls;
///
/// let url = "postgres://mailroom@127.0.0.1:5432/mailroom";
/// let backend = Postgres::connect(url, Arc::new(LongPolls::default())).await?;
/// backend.create_topic("orders").await?;
/// assert_eq!(backend.publish("orders", Bytes::from("hello")).await?, 0);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Postgres {
    pool: Pool,
    options: PgOptions,
    long_polls: Arc<LongPolls>,
    /// Each group's state as this broker last committed or read it, by (topic, group).
    cache: Arc<GroupCache>,
    /// Why the last attempt to reach the database failed, until one succeeds.
    failure: Arc<Mutex<Option<String>>>,
    notifier: Arc<notify::Notifier>,
    /// Publishes of each topic, combined while one of it is being written (`appends.rs`).
    appends: Arc<appends::Appends>,
    /// The live channels, relayed to and from the other brokers (`channel_relay.rs`).
    channels: Arc<crate::channels::Channels>,
    /// The notifier's, relay's and listener's tasks, ended with the backend.
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Postgres {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Postgres {
    /// Connects to the database at `url`, creates or migrates the schema, and starts
    /// listening for other brokers' writes (which wake `long_polls`).
    ///
    /// # Errors
    /// [`PgError::Url`] for a bad URL, [`PgError::NewerSchema`] for a database of a newer
    /// binary, and the database's errors (the database must be reachable at start).
    pub async fn connect(url: &str, long_polls: Arc<LongPolls>) -> Result<Postgres, PgError> {
        Postgres::connect_with(url, long_polls, PgOptions::default()).await
    }

    /// As [`connect`](Self::connect), with the retention defaults and idempotency window
    /// of `options`.
    ///
    /// # Errors
    /// As [`connect`](Self::connect).
    pub async fn connect_with(
        url: &str,
        long_polls: Arc<LongPolls>,
        options: PgOptions,
    ) -> Result<Postgres, PgError> {
        let config = session_config(url)?;
        let manager = Manager::from_config(
            config.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let wait = Some(Duration::from_millis(CONNECT_TIMEOUT_MS));
        let cache: Arc<GroupCache> = Arc::default();
        let notifier = Arc::new(notify::Notifier::new());
        // A pooled connection found closed while it idled was lost unseen by any call:
        // what was cached from it may be stale as after a call's lost connection (a
        // failover may have happened since), so it is forgotten as then.
        let (stale, marks) = (Arc::clone(&cache), Arc::clone(&notifier));
        let pool = Pool::builder(manager)
            .pre_recycle(Hook::sync_fn(move |client, _| {
                if client.is_closed() {
                    forget(&stale, &marks);
                }
                Ok(())
            }))
            .max_size(POOL_SIZE_MAX)
            .wait_timeout(wait)
            .create_timeout(wait)
            .runtime(Runtime::Tokio1)
            .build()
            .map_err(|error| PgError::Url(error.to_string()))?;
        let mut client = pool.get().await?;
        schema::migrate(&mut client).await?;
        drop(client);
        let failure = Arc::new(Mutex::new(None));
        let (relay, channels) = channel_relay::Relay::with_channels(notifier.broker_id());
        let tasks = vec![
            notify::spawn_sender(Arc::clone(&notifier), pool.clone()),
            channel_relay::spawn_sender(Arc::clone(&relay), pool.clone()),
            notify::spawn_listener(
                config,
                notifier.broker_id(),
                Arc::clone(&long_polls),
                Arc::clone(&relay),
            ),
        ];
        Ok(Postgres {
            appends: appends::Appends::new(pool.clone(), Arc::clone(&notifier)),
            pool,
            options,
            long_polls,
            cache,
            failure,
            notifier,
            channels,
            tasks,
        })
    }

    /// How many of this broker's writes it has told the other brokers of. A write is told
    /// only while another broker may have a long poll waiting on its topic (the topic's
    /// waiting mark, `docs/scale-out.md`, "Long polls across brokers"); several writes
    /// told close together ride in one notification.
    ///
    /// ```no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::sync::Arc;
    /// use mailroom_server::backend::Postgres;
    /// use mailroom_server::long_poll::LongPolls;
    ///
    /// let url = "postgres://mailroom@127.0.0.1:5432/mailroom";
    /// let backend = Postgres::connect(url, Arc::new(LongPolls::default())).await?;
    /// assert_eq!(backend.writes_told(), 0);
    /// # Ok(()) }
    /// ```
    pub fn writes_told(&self) -> u64 {
        self.notifier.told()
    }

    /// A pooled connection, or 503 `store_unavailable`.
    async fn client(&self) -> Result<deadpool_postgres::Object, BackendError> {
        self.pool.get().await.map_err(|error| {
            let error = BackendError::from(PgError::from(error));
            self.note(&error);
            error
        })
    }

    /// Records what a call's outcome says about the database's health. After a lost
    /// connection the whole cache is dropped: a failover to an asynchronous standby can
    /// reuse a version number for other content (`docs/scale-out.md`).
    fn note(&self, error: &BackendError) {
        if let BackendError::Unavailable(why) = error {
            lost(&self.failure, &self.cache, &self.notifier, why);
        }
    }

    /// Passes `result` on, noting a lost database or a healthy one.
    fn watched<T>(&self, result: Result<T, BackendError>) -> Result<T, BackendError> {
        match &result {
            Err(error) => self.note(error),
            Ok(_) => {
                if self.failure.lock().is_some() {
                    *self.failure.lock() = None;
                }
            }
        }
        result
    }

    /// A publish stream's handle on `topic`.
    fn stream_publisher(&self, topic: &str) -> publisher::PgPublisher {
        let publishing = publisher::Publishing {
            long_polls: Arc::clone(&self.long_polls),
            notifier: Arc::clone(&self.notifier),
            appends: Arc::clone(&self.appends),
            failure: Arc::clone(&self.failure),
            cache: Arc::clone(&self.cache),
            window: self.options.idempotency,
        };
        publisher::PgPublisher::start(topic.to_owned(), publishing)
    }

    /// Wakes this broker's long polls of `topic` and, through the notifier, every other
    /// broker's, if one may be waiting (the topic's waiting mark as this broker last read
    /// it, in the transaction of the write that wakes: `waiting.rs`).
    fn wake(&self, topic: &str) {
        wake(&self.long_polls, &self.notifier, topic);
    }

    /// Wakes every broker's long polls of `topic`, whatever its waiting mark: after a
    /// deletion, whose transaction reads no mark.
    fn wake_everywhere(&self, topic: &str) {
        self.long_polls.wake(topic);
        self.notifier.tell(topic);
    }

    fn health_now(&self) -> BackendHealth {
        BackendHealth {
            failure: self.failure.lock().clone(),
            // Topics fail only with the whole database (`failure`).
            failed_topics: Vec::new(),
        }
    }
}

/// The connection settings of `url`, with the backend's session settings added.
fn session_config(url: &str) -> Result<tokio_postgres::Config, PgError> {
    let mut config =
        tokio_postgres::Config::from_str(url).map_err(|error| PgError::Url(error.to_string()))?;
    let mut options = config.get_options().unwrap_or("").to_owned();
    // A URL that sets its own timeout (`?options=-c idle_in_transaction_session_timeout=MS`)
    // keeps it: the operator's choice of how fast a paused broker loses its locks.
    if !options.contains("idle_in_transaction_session_timeout") {
        options.push_str(&format!(
            " -c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_MS}"
        ));
    }
    config.options(options.trim());
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_millis(CONNECT_TIMEOUT_MS));
    }
    if config.get_application_name().is_none() {
        config.application_name("mailroom");
    }
    config.keepalives_idle(Duration::from_secs(5));
    Ok(config)
}
