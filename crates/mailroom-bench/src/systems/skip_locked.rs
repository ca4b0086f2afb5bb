//! The queue table most teams write by hand on PostgreSQL: rows claimed with
//! `FOR UPDATE SKIP LOCKED`, through `tokio-postgres`.
//!
//! One table per group (`<topic>_<group>_jobs`: `id bigserial`, `payload bytea`, `status`
//! 0 ready / 1 running, `attempts`, `locked_until`), with a partial index on the ready
//! rows, and a dead-letter table beside it (`<topic>_<group>_dead`). A publish inserts one
//! row per message and group (a batch: one `INSERT ... SELECT unnest($1)`), autocommit.
//! A consumer claims up to the prefetch in one autocommit statement:
//!
//! ```sql
//! UPDATE jobs SET status = 1, attempts = attempts + 1, locked_until = now() + '30 s'
//!  WHERE id IN (SELECT id FROM jobs WHERE status = 0 ORDER BY id
//!               FOR UPDATE SKIP LOCKED LIMIT $1)
//! RETURNING id, payload, attempts
//! ```
//!
//! and settles a round with at most three autocommit statements: the acks as one `DELETE
//! ... WHERE id = ANY($1)`, the retries as one `UPDATE` back to ready, and the final
//! failures moved to the dead-letter table in one `WITH moved AS (DELETE ... RETURNING)
//! INSERT`. (A reaper that sets rows back to ready once `locked_until` passed is part of
//! the design, for consumers that die; no consumer dies here, so it never runs.) Each
//! statement is its own transaction: with `synchronous_commit = on`, one WAL flush each.
//! Every statement is prepared once per connection, as a driver's statement cache would.

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use bytes::Bytes;
use tokio_postgres::{Client, Statement};

use super::postgres::{connect, count_rows, fail_outcome, group_table, payloads, InsertRows};
use super::{FailOutcome, LogConsumer, LogSystem, Received, TopicSpec};

/// How long a consumer waits on an empty table before it reports nothing left.
pub const IDLE_WAIT: Duration = Duration::from_secs(5);

/// The pause after a claim that found nothing (the consumer polls; the usual design has
/// no wake-up).
pub const EMPTY_CLAIM_PAUSE: Duration = Duration::from_millis(5);

/// The hand-written queue in one PostgreSQL database.
#[derive(Debug)]
pub struct SkipLocked {
    url: String,
    admin: Client,
}

impl SkipLocked {
    /// Connects to the database at `url`.
    ///
    /// # Errors
    /// When it cannot be reached.
    pub async fn connect(url: &str) -> Result<SkipLocked> {
        Ok(SkipLocked {
            url: url.to_owned(),
            admin: connect(url).await?,
        })
    }
}

fn jobs_table(topic: &str, group: &str) -> Result<String> {
    group_table(topic, group, "jobs")
}

fn dead_table(topic: &str, group: &str) -> Result<String> {
    group_table(topic, group, "dead")
}

/// Inserts into every group's table.
pub struct SkipLockedPublisher {
    client: Client,
    /// Per group table: the insert of one row and of a batch, prepared once.
    inserts: Vec<(Statement, Statement)>,
}

impl InsertRows for SkipLockedPublisher {
    async fn insert(&self, payloads: &[Bytes]) -> Result<()> {
        let rows: Vec<&[u8]> = payloads.iter().map(|payload| payload.as_ref()).collect();
        for (single, batch) in &self.inserts {
            let inserted = if let [one] = rows.as_slice() {
                self.client.execute(single, &[one]).await?
            } else {
                self.client.execute(batch, &[&rows]).await?
            };
            anyhow::ensure!(
                inserted == rows.len() as u64,
                "inserted {inserted} of {} rows",
                rows.len()
            );
        }
        Ok(())
    }
}

/// A claimed row.
#[derive(Debug)]
pub struct Job {
    id: i64,
    attempts: i32,
}

/// Claims and settles one group's rows on its own connection.
pub struct SkipLockedConsumer {
    client: Client,
    claim: Statement,
    ack: Statement,
    retry: Statement,
    bury: Statement,
    prefetch: i64,
    max_attempts: u32,
}

impl SkipLockedConsumer {
    async fn claim_once(&self) -> Result<Vec<Received<Job>>> {
        let rows = self.client.query(&self.claim, &[&self.prefetch]).await?;
        rows.into_iter()
            .map(|row| {
                let id: i64 = row.get(0);
                let payload: Vec<u8> = row.get(1);
                let attempts: i32 = row.get(2);
                Ok(Received {
                    payload: Bytes::from(payload),
                    attempt: u32::try_from(attempts).context("negative attempts")?,
                    handle: Job { id, attempts },
                })
            })
            .collect()
    }
}

impl LogConsumer for SkipLockedConsumer {
    type Handle = Job;

    async fn next(&mut self) -> Result<Option<Received<Job>>> {
        Ok(self.next_batch().await?.into_iter().next())
    }

    async fn ack(&mut self, handle: Job) -> Result<()> {
        self.settle(vec![handle], Vec::new()).await?;
        Ok(())
    }

    async fn fail(&mut self, handle: Job) -> Result<FailOutcome> {
        let outcomes = self.settle(Vec::new(), vec![handle]).await?;
        outcomes.into_iter().next().context("no outcome")
    }

    async fn next_batch(&mut self) -> Result<Vec<Received<Job>>> {
        let deadline = Instant::now() + IDLE_WAIT;
        loop {
            let batch = self.claim_once().await?;
            if !batch.is_empty() || Instant::now() >= deadline {
                return Ok(batch);
            }
            tokio::time::sleep(EMPTY_CLAIM_PAUSE).await;
        }
    }

    async fn settle(&mut self, acks: Vec<Job>, fails: Vec<Job>) -> Result<Vec<FailOutcome>> {
        if !acks.is_empty() {
            let ids: Vec<i64> = acks.iter().map(|job| job.id).collect();
            let deleted = self.client.execute(&self.ack, &[&ids]).await?;
            anyhow::ensure!(
                deleted == ids.len() as u64,
                "acked {deleted} of {}",
                ids.len()
            );
        }
        let outcome = |job: &Job| fail_outcome(job.attempts.into(), self.max_attempts);
        let (buried, retried): (Vec<&Job>, Vec<&Job>) = fails
            .iter()
            .partition(|job| outcome(job) == FailOutcome::DeadLettered);
        for (sql, jobs) in [(&self.retry, &retried), (&self.bury, &buried)] {
            if jobs.is_empty() {
                continue;
            }
            let ids: Vec<i64> = jobs.iter().map(|job| job.id).collect();
            let changed = self.client.execute(sql, &[&ids]).await?;
            anyhow::ensure!(
                changed == ids.len() as u64,
                "settled {changed} of {}",
                ids.len()
            );
        }
        Ok(fails.iter().map(outcome).collect())
    }
}

impl LogSystem for SkipLocked {
    type Publisher = SkipLockedPublisher;
    type Consumer = SkipLockedConsumer;

    async fn prepare(&self, topic: &TopicSpec) -> Result<()> {
        for group in &topic.groups {
            let jobs = jobs_table(&topic.name, group)?;
            let dead = dead_table(&topic.name, group)?;
            self.admin
                .batch_execute(&format!(
                    "CREATE TABLE {jobs} (
                         id bigserial PRIMARY KEY,
                         payload bytea NOT NULL,
                         status smallint NOT NULL DEFAULT 0,
                         attempts integer NOT NULL DEFAULT 0,
                         locked_until timestamptz,
                         created_at timestamptz NOT NULL DEFAULT now());
                     CREATE INDEX ON {jobs} (id) WHERE status = 0;
                     CREATE TABLE {dead} (
                         id bigint PRIMARY KEY,
                         payload bytea NOT NULL,
                         attempts integer NOT NULL,
                         failed_at timestamptz NOT NULL DEFAULT now());"
                ))
                .await?;
        }
        Ok(())
    }

    async fn publisher(&self, topic: &TopicSpec) -> Result<SkipLockedPublisher> {
        let client = connect(&self.url).await?;
        let mut inserts = Vec::new();
        for group in &topic.groups {
            let table = jobs_table(&topic.name, group)?;
            let single = client
                .prepare(&format!("INSERT INTO {table} (payload) VALUES ($1)"))
                .await?;
            let batch = client
                .prepare(&format!(
                    "INSERT INTO {table} (payload) SELECT unnest($1::bytea[])"
                ))
                .await?;
            inserts.push((single, batch));
        }
        Ok(SkipLockedPublisher { client, inserts })
    }

    async fn consumer(&self, topic: &TopicSpec, group: &str) -> Result<SkipLockedConsumer> {
        let jobs = jobs_table(&topic.name, group)?;
        let dead = dead_table(&topic.name, group)?;
        let client = connect(&self.url).await?;
        let claim = client
            .prepare(&format!(
                "UPDATE {jobs} SET status = 1, attempts = attempts + 1,
                        locked_until = now() + interval '30 seconds'
                  WHERE id IN (SELECT id FROM {jobs} WHERE status = 0 ORDER BY id
                               FOR UPDATE SKIP LOCKED LIMIT $1)
                 RETURNING id, payload, attempts"
            ))
            .await?;
        let ack = client
            .prepare(&format!("DELETE FROM {jobs} WHERE id = ANY($1)"))
            .await?;
        let retry = client
            .prepare(&format!(
                "UPDATE {jobs} SET status = 0, locked_until = NULL WHERE id = ANY($1)"
            ))
            .await?;
        let bury = client
            .prepare(&format!(
                "WITH moved AS (DELETE FROM {jobs} WHERE id = ANY($1)
                                RETURNING id, payload, attempts)
                 INSERT INTO {dead} (id, payload, attempts) SELECT * FROM moved"
            ))
            .await?;
        Ok(SkipLockedConsumer {
            client,
            claim,
            ack,
            retry,
            bury,
            prefetch: i64::try_from(topic.prefetch.max(1))?,
            max_attempts: topic.max_attempts,
        })
    }

    async fn dead_letters(
        &self,
        topic: &TopicSpec,
        group: &str,
        _expected: u64,
    ) -> Result<Vec<Bytes>> {
        let dead = dead_table(&topic.name, group)?;
        payloads::<Vec<u8>>(
            &self.admin,
            &format!("SELECT payload FROM {dead} ORDER BY id"),
        )
        .await
    }

    async fn count(&self, topic: &TopicSpec) -> Result<u64> {
        let group = topic.groups.first().context("the topic has no group")?;
        count_rows(&self.admin, &jobs_table(&topic.name, group)?).await
    }

    async fn remove(&self, topic: &TopicSpec) -> Result<()> {
        for group in &topic.groups {
            let jobs = jobs_table(&topic.name, group)?;
            let dead = dead_table(&topic.name, group)?;
            self.admin
                .batch_execute(&format!("DROP TABLE {jobs}; DROP TABLE {dead};"))
                .await?;
        }
        Ok(())
    }
}
