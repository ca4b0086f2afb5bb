//! Consuming one Redis stream group: `XREADGROUP`, `XACK`, retries claimed back with
//! `XCLAIM`, dead letters moved to a stream of their own.

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use anyhow::{Context as _, Result};
use bytes::Bytes;
use redis::aio::MultiplexedConnection;
use redis::streams::{StreamClaimReply, StreamPendingCountReply, StreamReadReply};

use super::{
    ack_ids, entries, payload_of, read_command, CLAIM_BATCH_MAX, CONSUMER, FIELD, IDLE_WAIT,
};
use crate::systems::{FailOutcome, LogConsumer, Received};

/// What a Redis consumer needs to ack or reject an entry.
#[derive(Debug)]
pub struct RedisHandle {
    id: String,
    attempt: u32,
    payload: Bytes,
}

/// Reads one group with `XREADGROUP`, retries with `XCLAIM`.
pub struct RedisConsumer {
    pub(super) connection: MultiplexedConnection,
    pub(super) key: String,
    pub(super) group: String,
    pub(super) dlq: String,
    pub(super) max_attempts: u32,
    pub(super) prefetch: usize,
    pub(super) buffer: VecDeque<Received<RedisHandle>>,
    pub(super) retry: Vec<String>,
}

impl RedisConsumer {
    /// One `XACK` of `ids`; every one must have been pending.
    async fn ack_ids(&mut self, ids: &[String]) -> Result<()> {
        ack_ids(&mut self.connection, &self.key, &self.group, ids).await
    }

    async fn read_new(&mut self) -> Result<()> {
        let reply: Option<StreamReadReply> = read_command(&self.group, &self.key, self.prefetch)
            .query_async(&mut self.connection)
            .await?;
        for entry in entries(reply) {
            let payload = payload_of(&entry)?;
            let handle = RedisHandle {
                id: entry.id,
                attempt: 1,
                payload: payload.clone(),
            };
            self.buffer.push_back(Received {
                payload,
                attempt: 1,
                handle,
            });
        }
        Ok(())
    }

    /// Claims rejected entries back; the claim bumps their delivery counters, which
    /// `XPENDING` then reports as the attempt.
    async fn claim_retries(&mut self) -> Result<()> {
        let take = self.retry.len().min(self.prefetch).min(CLAIM_BATCH_MAX);
        let ids: Vec<String> = self.retry.drain(..take).collect();
        let claimed: StreamClaimReply = redis::cmd("XCLAIM")
            .arg(&self.key)
            .arg(&self.group)
            .arg(CONSUMER)
            .arg(0)
            .arg(&ids)
            .query_async(&mut self.connection)
            .await?;
        let (Some(first), Some(last)) = (
            ids.iter().min_by(|a, b| cmp_ids(a, b)),
            ids.iter().max_by(|a, b| cmp_ids(a, b)),
        ) else {
            return Ok(());
        };
        let pending: StreamPendingCountReply = redis::cmd("XPENDING")
            .arg(&self.key)
            .arg(&self.group)
            .arg(first)
            .arg(last)
            .arg(usize::MAX >> 1)
            .arg(CONSUMER)
            .query_async(&mut self.connection)
            .await?;
        let counts: HashMap<String, usize> = pending
            .ids
            .into_iter()
            .map(|entry| (entry.id, entry.times_delivered))
            .collect();
        for entry in claimed.ids {
            let attempt = counts
                .get(&entry.id)
                .map(|&n| u32::try_from(n).unwrap_or(u32::MAX))
                .with_context(|| format!("claimed {} is not pending", entry.id))?;
            let payload = payload_of(&entry)?;
            let handle = RedisHandle {
                id: entry.id,
                attempt,
                payload: payload.clone(),
            };
            self.buffer.push_back(Received {
                payload,
                attempt,
                handle,
            });
        }
        Ok(())
    }
}

/// Orders stream ids (`ms-seq`) numerically.
fn cmp_ids(a: &str, b: &str) -> std::cmp::Ordering {
    let parse = |id: &str| {
        let (ms, seq) = id.split_once('-').unwrap_or((id, "0"));
        (
            ms.parse::<u64>().unwrap_or(0),
            seq.parse::<u64>().unwrap_or(0),
        )
    };
    parse(a).cmp(&parse(b))
}

impl LogConsumer for RedisConsumer {
    type Handle = RedisHandle;

    async fn next(&mut self) -> Result<Option<Received<RedisHandle>>> {
        let deadline = Instant::now() + IDLE_WAIT;
        while self.buffer.is_empty() {
            if !self.retry.is_empty() {
                self.claim_retries().await?;
            } else {
                self.read_new().await?;
            }
            if self.buffer.is_empty() && Instant::now() >= deadline {
                return Ok(None);
            }
        }
        Ok(self.buffer.pop_front())
    }

    async fn ack(&mut self, handle: RedisHandle) -> Result<()> {
        self.ack_ids(&[handle.id]).await
    }

    async fn fail(&mut self, handle: RedisHandle) -> Result<FailOutcome> {
        if handle.attempt < self.max_attempts {
            self.retry.push(handle.id);
            return Ok(FailOutcome::Retry);
        }
        let (_, acked): (String, u64) = redis::pipe()
            .atomic()
            .cmd("XADD")
            .arg(&self.dlq)
            .arg("*")
            .arg(FIELD)
            .arg(handle.payload.as_ref())
            .cmd("XACK")
            .arg(&self.key)
            .arg(&self.group)
            .arg(&handle.id)
            .query_async(&mut self.connection)
            .await?;
        anyhow::ensure!(acked == 1, "XACK {} acked {acked} entries", handle.id);
        Ok(FailOutcome::DeadLettered)
    }

    async fn next_batch(&mut self) -> Result<Vec<Received<RedisHandle>>> {
        // The buffer holds one reply (at most `prefetch` entries); the round is all of it.
        let first = self.next().await?;
        Ok(first.into_iter().chain(self.buffer.drain(..)).collect())
    }

    async fn settle(
        &mut self,
        acks: Vec<RedisHandle>,
        fails: Vec<RedisHandle>,
    ) -> Result<Vec<FailOutcome>> {
        if !acks.is_empty() {
            let ids: Vec<String> = acks.into_iter().map(|handle| handle.id).collect();
            self.ack_ids(&ids).await?;
        }
        let mut outcomes = Vec::with_capacity(fails.len());
        for handle in fails {
            outcomes.push(self.fail(handle).await?);
        }
        Ok(outcomes)
    }
}
