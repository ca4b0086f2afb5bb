//! PgQ (`postgresql-15-pgq3`, the `pgq` extension) through `tokio-postgres`.
//!
//! A topic is a queue (`pgq.create_queue`), a group a registered consumer
//! (`pgq.register_consumer`). A publish is `pgq.insert_event` per message, autocommit; a
//! batch is one statement, `SELECT pgq.insert_event(q, 'm', d) FROM unnest($2)`, so one
//! transaction. PgQ hands out events in batches between two *ticks*, which a ticker
//! daemon (`pgqd`) makes; the bench plays that daemon:
//!
//! - while the consume workloads fill the log, the publisher ticks after every
//!   `prefetch` events ([`Pgq::ticking_every`]), so each batch holds the prefetch, the
//!   way `queue_ticker_max_count` sizes batches under a steady load;
//! - while a consumer runs, a ticker task on its own connection calls
//!   `pgq.maint_retry_events()` (until it returns 0) and `pgq.ticker(queue)` every
//!   [`TICK_PERIOD`], so retried events come back (pgqd's defaults are a tick a second
//!   and retries every 30 s; this is faster, in PgQ's favour).
//!
//! A consumer round is one transaction, as PgQ's own consumers do it: `BEGIN`,
//! `pgq.next_batch`, `pgq.get_batch_events`, then on settling `pgq.event_retry(batch, id,
//! 0)` for each retried event (one statement over an array), the final failures inserted
//! into a dead-letter table (PgQ 3 has none of its own), `pgq.finish_batch`, `COMMIT`:
//! one commit per batch. There is no per-event ack: finishing the batch acks it all. The
//! attempt is `ev_retry + 1` (`ev_retry` counts the retries). Every statement is
//! prepared once per connection.

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use bytes::Bytes;
use tokio_postgres::{Client, Statement};

use super::postgres::{
    connect, count_rows, fail_outcome, group_table, identifier, payloads, InsertRows,
};
use super::{FailOutcome, LogConsumer, LogSystem, Received, TopicSpec};

/// How often the consumer's ticker task ticks and moves due retries back.
pub const TICK_PERIOD: Duration = Duration::from_millis(10);

/// How long a consumer waits for a batch before it reports nothing left.
pub const IDLE_WAIT: Duration = Duration::from_secs(5);

/// The pause after `pgq.next_batch` found no batch.
pub const EMPTY_BATCH_PAUSE: Duration = Duration::from_millis(5);

/// PgQ in one PostgreSQL database.
#[derive(Debug)]
pub struct Pgq {
    url: String,
    admin: Client,
    /// Publishers tick after every this many events (the consume workloads' fill).
    tick_every: Option<usize>,
}

impl Pgq {
    /// Connects to the database at `url`, which has the `pgq` extension available.
    ///
    /// # Errors
    /// When it cannot be reached or the extension cannot be created.
    pub async fn connect(url: &str) -> Result<Pgq> {
        let admin = connect(url).await?;
        admin
            .batch_execute("CREATE EXTENSION IF NOT EXISTS pgq")
            .await
            .context("creating the pgq extension (is postgresql-15-pgq3 installed?)")?;
        Ok(Pgq {
            url: url.to_owned(),
            admin,
            tick_every: None,
        })
    }

    /// This system, with publishers ticking after every `events` events, so that each
    /// batch a consumer gets holds `events` (the consume workloads' prefetch).
    #[must_use]
    pub fn ticking_every(mut self, events: usize) -> Pgq {
        self.tick_every = Some(events.max(1));
        self
    }
}

fn dead_table(queue: &str, consumer: &str) -> Result<String> {
    group_table(queue, consumer, "pgq_dead")
}

/// Inserts events into one queue.
pub struct PgqPublisher {
    client: Client,
    queue: String,
    single: Statement,
    batch: Statement,
    ticker: Statement,
    tick_every: Option<usize>,
}

impl InsertRows for PgqPublisher {
    async fn insert(&self, payloads: &[Bytes]) -> Result<()> {
        let chunk = self.tick_every.unwrap_or(payloads.len().max(1));
        for events in payloads.chunks(chunk) {
            let texts = events
                .iter()
                .map(|payload| std::str::from_utf8(payload).context("a payload is not text"))
                .collect::<Result<Vec<&str>>>()?;
            if let [one] = texts.as_slice() {
                self.client
                    .execute(&self.single, &[&self.queue, one])
                    .await?;
            } else {
                let rows = self
                    .client
                    .query(&self.batch, &[&self.queue, &texts])
                    .await?;
                anyhow::ensure!(rows.len() == texts.len(), "inserted {} events", rows.len());
            }
            if self.tick_every.is_some() {
                self.client.query(&self.ticker, &[&self.queue]).await?;
            }
        }
        Ok(())
    }
}

/// An event of the open batch.
#[derive(Debug)]
pub struct PgqEvent {
    id: i64,
    attempt: u32,
    payload: Bytes,
}

/// One registered consumer, its open batch, and the ticker task that serves it.
pub struct PgqConsumer {
    client: Client,
    queue: String,
    name: String,
    max_attempts: u32,
    batch: Option<i64>,
    next_batch: Statement,
    events: Statement,
    retry: Statement,
    bury: Statement,
    finish: Statement,
    ticker: tokio::task::JoinHandle<()>,
}

impl Drop for PgqConsumer {
    fn drop(&mut self) {
        self.ticker.abort();
    }
}

impl PgqConsumer {
    /// Opens the next batch (in a transaction left open until [`LogConsumer::settle`]);
    /// `None` when there is none now.
    async fn open_batch(&mut self) -> Result<Option<Vec<Received<PgqEvent>>>> {
        self.client.batch_execute("BEGIN").await?;
        let batch: Option<i64> = self
            .client
            .query_one(&self.next_batch, &[&self.queue, &self.name])
            .await?
            .get(0);
        let Some(batch) = batch else {
            self.client.batch_execute("ROLLBACK").await?;
            return Ok(None);
        };
        let rows = self.client.query(&self.events, &[&batch]).await?;
        if rows.is_empty() {
            self.client.query(&self.finish, &[&batch]).await?;
            self.client.batch_execute("COMMIT").await?;
            return Ok(Some(Vec::new()));
        }
        self.batch = Some(batch);
        rows.into_iter()
            .map(|row| {
                let id: i64 = row.get(0);
                let retries: Option<i32> = row.get(1);
                let data: String = row.get(2);
                let attempt = u32::try_from(retries.unwrap_or(0) + 1)?;
                let payload = Bytes::from(data);
                Ok(Received {
                    payload: payload.clone(),
                    attempt,
                    handle: PgqEvent {
                        id,
                        attempt,
                        payload,
                    },
                })
            })
            .collect::<Result<Vec<_>>>()
            .map(Some)
    }
}

impl LogConsumer for PgqConsumer {
    type Handle = PgqEvent;

    async fn next(&mut self) -> Result<Option<Received<PgqEvent>>> {
        anyhow::bail!("PgQ hands out whole batches: use next_batch")
    }

    async fn ack(&mut self, _handle: PgqEvent) -> Result<()> {
        anyhow::bail!("PgQ acks whole batches: use settle")
    }

    async fn fail(&mut self, _handle: PgqEvent) -> Result<FailOutcome> {
        anyhow::bail!("PgQ retries inside a batch: use settle")
    }

    async fn next_batch(&mut self) -> Result<Vec<Received<PgqEvent>>> {
        anyhow::ensure!(self.batch.is_none(), "a batch is still open");
        let deadline = Instant::now() + IDLE_WAIT;
        loop {
            match self.open_batch().await? {
                Some(events) if !events.is_empty() => return Ok(events),
                Some(_) => {}
                None if Instant::now() >= deadline => return Ok(Vec::new()),
                None => tokio::time::sleep(EMPTY_BATCH_PAUSE).await,
            }
        }
    }

    async fn settle(
        &mut self,
        _acks: Vec<PgqEvent>,
        fails: Vec<PgqEvent>,
    ) -> Result<Vec<FailOutcome>> {
        let batch = self.batch.take().context("no batch is open")?;
        let (buried, retried): (Vec<&PgqEvent>, Vec<&PgqEvent>) = fails.iter().partition(|event| {
            fail_outcome(event.attempt.into(), self.max_attempts) == FailOutcome::DeadLettered
        });
        if !retried.is_empty() {
            let ids: Vec<i64> = retried.iter().map(|event| event.id).collect();
            self.client.query(&self.retry, &[&batch, &ids]).await?;
        }
        if !buried.is_empty() {
            let ids: Vec<i64> = buried.iter().map(|event| event.id).collect();
            let payloads = buried
                .iter()
                .map(|event| std::str::from_utf8(&event.payload).context("not text"))
                .collect::<Result<Vec<&str>>>()?;
            self.client.execute(&self.bury, &[&ids, &payloads]).await?;
        }
        self.client.query(&self.finish, &[&batch]).await?;
        self.client.batch_execute("COMMIT").await?;
        Ok(fails
            .iter()
            .map(|event| fail_outcome(event.attempt.into(), self.max_attempts))
            .collect())
    }
}

/// What `pgqd` does for one queue: move due retries back, then tick, every
/// [`TICK_PERIOD`], until aborted.
async fn tick_forever(client: Client, queue: String) {
    let mut period = tokio::time::interval(TICK_PERIOD);
    loop {
        period.tick().await;
        loop {
            match client
                .query_one("SELECT pgq.maint_retry_events()", &[])
                .await
            {
                Ok(row) if row.get::<_, i32>(0) > 0 => continue,
                _ => break,
            }
        }
        // A failed tick is retried on the next period; the consumer's idle wait reports
        // what never arrived.
        let _ = client.query("SELECT pgq.ticker($1)", &[&queue]).await;
    }
}

impl LogSystem for Pgq {
    type Publisher = PgqPublisher;
    type Consumer = PgqConsumer;

    async fn prepare(&self, topic: &TopicSpec) -> Result<()> {
        let queue = identifier(&topic.name)?;
        self.admin
            .query("SELECT pgq.create_queue($1)", &[&queue])
            .await?;
        // A tick whenever there are new events: the bench decides when to tick.
        self.admin
            .query(
                "SELECT pgq.set_queue_config($1, 'ticker_max_lag', '0')",
                &[&queue],
            )
            .await?;
        for group in &topic.groups {
            let dead = dead_table(queue, group)?;
            self.admin
                .query("SELECT pgq.register_consumer($1, $2)", &[&queue, group])
                .await?;
            self.admin
                .batch_execute(&format!(
                    "CREATE TABLE {dead} (ev_id bigint PRIMARY KEY, payload text NOT NULL,
                                          failed_at timestamptz NOT NULL DEFAULT now())"
                ))
                .await?;
        }
        Ok(())
    }

    async fn publisher(&self, topic: &TopicSpec) -> Result<PgqPublisher> {
        let client = connect(&self.url).await?;
        let single = client
            .prepare("SELECT pgq.insert_event($1, 'm', $2)")
            .await?;
        let batch = client
            .prepare("SELECT pgq.insert_event($1, 'm', d) FROM unnest($2::text[]) d")
            .await?;
        let ticker = client.prepare("SELECT pgq.ticker($1)").await?;
        Ok(PgqPublisher {
            client,
            queue: topic.name.clone(),
            single,
            batch,
            ticker,
            tick_every: self.tick_every,
        })
    }

    async fn consumer(&self, topic: &TopicSpec, group: &str) -> Result<PgqConsumer> {
        let client = connect(&self.url).await?;
        let dead = dead_table(&topic.name, group)?;
        let next_batch = client.prepare("SELECT pgq.next_batch($1, $2)").await?;
        let events = client
            .prepare("SELECT ev_id, ev_retry, ev_data FROM pgq.get_batch_events($1)")
            .await?;
        let retry = client
            .prepare("SELECT pgq.event_retry($1, id, 0::int4) FROM unnest($2::int8[]) id")
            .await?;
        let bury = client
            .prepare(&format!(
                "INSERT INTO {dead} (ev_id, payload) SELECT * FROM unnest($1::int8[], $2::text[])"
            ))
            .await?;
        let finish = client.prepare("SELECT pgq.finish_batch($1)").await?;
        let ticker = tokio::spawn(tick_forever(connect(&self.url).await?, topic.name.clone()));
        Ok(PgqConsumer {
            client,
            queue: topic.name.clone(),
            name: group.to_owned(),
            max_attempts: topic.max_attempts,
            batch: None,
            next_batch,
            events,
            retry,
            bury,
            finish,
            ticker,
        })
    }

    async fn dead_letters(
        &self,
        topic: &TopicSpec,
        group: &str,
        _expected: u64,
    ) -> Result<Vec<Bytes>> {
        let dead = dead_table(&topic.name, group)?;
        payloads::<String>(
            &self.admin,
            &format!("SELECT payload FROM {dead} ORDER BY ev_id"),
        )
        .await
    }

    async fn count(&self, topic: &TopicSpec) -> Result<u64> {
        let prefix: String = self
            .admin
            .query_one(
                "SELECT queue_data_pfx FROM pgq.queue WHERE queue_name = $1",
                &[&topic.name],
            )
            .await?
            .get(0);
        // The prefix names the parent of the queue's rotating event tables.
        count_rows(&self.admin, &prefix).await
    }

    async fn remove(&self, topic: &TopicSpec) -> Result<()> {
        for group in &topic.groups {
            let dead = dead_table(&topic.name, group)?;
            self.admin
                .query(
                    "SELECT pgq.unregister_consumer($1, $2)",
                    &[&topic.name, group],
                )
                .await?;
            self.admin
                .batch_execute(&format!("DROP TABLE {dead}"))
                .await?;
        }
        self.admin
            .query("SELECT pgq.drop_queue($1)", &[&topic.name])
            .await?;
        Ok(())
    }
}
