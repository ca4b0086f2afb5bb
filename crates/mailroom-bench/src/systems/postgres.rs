//! What the two PostgreSQL queues ([`super::pgq`], [`super::skip_locked`]) share: one
//! connection per publisher and consumer, made from the database URL (the
//! [`database probe`](crate::database_probe) opens its own the same way), their tables'
//! names, their publishers (up to a window of autocommit inserts pipelined on one
//! connection), the reads of a table's rows and dead letters, and what a rejection does.

use std::future::Future;

use anyhow::{Context as _, Result};
use bytes::Bytes;
use hdrhistogram::Histogram;
use tokio_postgres::types::FromSql;
use tokio_postgres::{Client, NoTls};

use super::{FailOutcome, LogPublisher};
use crate::workload::publish::in_order;

/// Opens a connection to `url` and drives it on a task of its own, which ends when the
/// client is dropped.
///
/// # Errors
/// When the database cannot be reached.
pub async fn open(url: &str) -> Result<Client, tokio_postgres::Error> {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await?;
    tokio::spawn(async move {
        // An error here (the server went away) shows as a failed query on the client.
        let _ = connection.await;
    });
    Ok(client)
}

/// Opens a connection to `url` (`postgres://USER@HOST:PORT/DB`) and drives it on a task
/// of its own, which ends when the client is dropped.
///
/// # Errors
/// When the database cannot be reached.
pub async fn connect(url: &str) -> Result<Client> {
    open(url)
        .await
        .with_context(|| format!("connecting to {url}"))
}

/// `name` as a PostgreSQL identifier: the bench's topic names are lower-case letters,
/// digits and `_`, which need no quoting; anything else is refused.
///
/// # Errors
/// When `name` holds any other character.
pub fn identifier(name: &str) -> Result<&str> {
    anyhow::ensure!(
        !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
        "{name:?} is not a plain identifier"
    );
    Ok(name)
}

/// The table `<topic>_<group>_<suffix>` of one group.
///
/// # Errors
/// When `topic` or `group` is not a plain identifier.
pub fn group_table(topic: &str, group: &str, suffix: &str) -> Result<String> {
    Ok(format!(
        "{}_{}_{suffix}",
        identifier(topic)?,
        identifier(group)?
    ))
}

/// A publisher that inserts a call's payloads with one statement (per table); every one
/// is a [`LogPublisher`].
pub trait InsertRows: Send + 'static {
    /// Inserts `payloads`, autocommit, and returns once the database confirmed them.
    fn insert(&self, payloads: &[Bytes]) -> impl Future<Output = Result<()>> + Send;
}

impl<P: InsertRows + Sync> LogPublisher for P {
    async fn publish(&mut self, payloads: &[Bytes]) -> Result<()> {
        self.insert(payloads).await
    }

    /// Up to `window` inserts in flight on the one connection, each its own autocommit
    /// transaction: tokio-postgres pipelines the statements of futures polled together,
    /// so the connection is never idle between them, as a PgQ or `SKIP LOCKED` client
    /// would keep it busy without batching. Each commit still waits for its own flush.
    async fn publish_pipelined(
        &mut self,
        payloads: Vec<Bytes>,
        window: usize,
        latency: &mut Histogram<u64>,
    ) -> Result<()> {
        let this = &*self;
        let send =
            |payload: Bytes| async move { this.insert(std::slice::from_ref(&payload)).await };
        in_order(payloads, window, latency, send, |inserted| inserted).await
    }
}

/// How many rows `table` holds.
///
/// # Errors
/// When the query fails.
pub async fn count_rows(client: &Client, table: &str) -> Result<u64> {
    let count: i64 = client
        .query_one(&format!("SELECT count(*) FROM {table}"), &[])
        .await?
        .get(0);
    Ok(u64::try_from(count)?)
}

/// The first column of `sql`'s rows (`text` read as `String`, `bytea` as `Vec<u8>`), as
/// payloads.
///
/// # Errors
/// When the query fails.
pub async fn payloads<T>(client: &Client, sql: &str) -> Result<Vec<Bytes>>
where
    T: for<'a> FromSql<'a> + Into<Bytes>,
{
    let rows = client.query(sql, &[]).await?;
    Ok(rows
        .into_iter()
        .map(|row| row.get::<_, T>(0).into())
        .collect())
}

/// What rejecting a delivery on its `attempt` does when `max_attempts` are allowed.
pub fn fail_outcome(attempt: i64, max_attempts: u32) -> FailOutcome {
    if attempt >= i64::from(max_attempts) {
        FailOutcome::DeadLettered
    } else {
        FailOutcome::Retry
    }
}
