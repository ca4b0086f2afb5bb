//! Redis Streams through the `redis` crate, and Redis pub/sub for live fan-out.
//!
//! Groups are stream consumer groups (`XGROUP CREATE ... 0`). The consumer reads new
//! entries with `XREADGROUP ... COUNT`, acks a round's entries with one `XACK` of their
//! ids (one `XACK` per entry through the one-at-a-time `ack`), and leaves a rejected entry
//! pending; retries are claimed back with `XCLAIM` (which bumps the delivery counter) and
//! their attempt read from `XPENDING`. Redis has no dead-letter queue, so the consumer does
//! what Redis users do: on the final attempt it moves the entry to a `<topic>:dlq:<group>`
//! stream and acks the original in one `MULTI`.

mod consumer;
mod live;
mod publisher;
mod window;

use std::time::Duration;

use anyhow::{Context as _, Result};
use bytes::Bytes;
use redis::aio::MultiplexedConnection;
use redis::streams::{StreamId, StreamReadReply};
use redis::AsyncConnectionConfig;

pub use consumer::{RedisConsumer, RedisHandle};
pub use live::RedisSubscriber;
pub use publisher::RedisPublisher;
pub use window::RedisWorker;

use super::{LogSystem, TopicSpec};
use std::collections::VecDeque;

/// Entries claimed back per `XCLAIM` (and at most the prefetch).
pub const CLAIM_BATCH_MAX: usize = 256;

/// How long a consumer waits on an empty group before it reports nothing left.
pub const IDLE_WAIT: Duration = Duration::from_secs(5);

/// How long one command may take; the crate's 500 ms default is shorter than one
/// `fsync` on a busy disk.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(60);

/// The stalled subscriber's socket receive buffer.
pub const STALLED_RECV_BUFFER_BYTES: u32 = 4096;

const FIELD: &str = "d";
const CONSUMER: &str = "bench";

/// A Redis server.
#[derive(Clone)]
pub struct Redis {
    client: redis::Client,
    connection: MultiplexedConnection,
    address: String,
    /// Whether the parallel workload's worker pipelines each round's `XACK` with its next
    /// `XREADGROUP`.
    pipelined: bool,
}

impl std::fmt::Debug for Redis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redis")
            .field("address", &self.address)
            .finish()
    }
}

impl Redis {
    /// Connects to `host:port`.
    ///
    /// # Errors
    /// When the server cannot be reached.
    pub async fn connect(address: &str) -> Result<Redis> {
        let client = redis::Client::open(format!("redis://{address}/"))?;
        let connection = connect(&client).await?;
        Ok(Redis {
            client,
            connection,
            address: address.to_owned(),
            pipelined: false,
        })
    }

    /// This server, with the parallel workload's worker sending each round's `XACK`
    /// pipelined with its next `XREADGROUP` (one round trip per round).
    #[must_use]
    pub fn pipelined(self) -> Redis {
        Redis {
            pipelined: true,
            ..self
        }
    }
}

async fn connect(client: &redis::Client) -> Result<MultiplexedConnection> {
    let config = AsyncConnectionConfig::new().set_response_timeout(Some(RESPONSE_TIMEOUT));
    Ok(client
        .get_multiplexed_async_connection_with_config(&config)
        .await?)
}

fn dlq_key(topic: &str, group: &str) -> String {
    format!("{topic}:dlq:{group}")
}

fn payload_of(entry: &StreamId) -> Result<Bytes> {
    let value = entry
        .map
        .get(FIELD)
        .with_context(|| format!("entry {} has no field {FIELD}", entry.id))?;
    let bytes: Vec<u8> = redis::from_redis_value(value.clone())?;
    Ok(Bytes::from(bytes))
}

/// `XREADGROUP` of up to `count` new entries of `key` for `group`, blocking up to 100 ms.
fn read_command(group: &str, key: &str, count: usize) -> redis::Cmd {
    let mut read = redis::cmd("XREADGROUP");
    read.arg("GROUP")
        .arg(group)
        .arg(CONSUMER)
        .arg("COUNT")
        .arg(count)
        .arg("BLOCK")
        .arg(100)
        .arg("STREAMS")
        .arg(key)
        .arg(">");
    read
}

/// The entries of an `XREADGROUP` reply.
fn entries(reply: Option<StreamReadReply>) -> impl Iterator<Item = StreamId> {
    reply
        .map(|reply| reply.keys)
        .unwrap_or_default()
        .into_iter()
        .flat_map(|key| key.ids)
}

/// One `XACK` of `ids`; every one must have been pending.
async fn ack_ids(
    connection: &mut MultiplexedConnection,
    key: &str,
    group: &str,
    ids: &[String],
) -> Result<()> {
    let acked: usize = redis::cmd("XACK")
        .arg(key)
        .arg(group)
        .arg(ids)
        .query_async(connection)
        .await?;
    check_acked(acked, ids.len())
}

/// Fails unless an `XACK` of `sent` ids acked them all.
fn check_acked(acked: usize, sent: usize) -> Result<()> {
    anyhow::ensure!(acked == sent, "XACK of {sent} ids acked {acked}");
    Ok(())
}

impl LogSystem for Redis {
    type Publisher = RedisPublisher;
    type Consumer = RedisConsumer;

    async fn prepare(&self, topic: &TopicSpec) -> Result<()> {
        let mut connection = self.connection.clone();
        for group in &topic.groups {
            redis::cmd("XGROUP")
                .arg("CREATE")
                .arg(&topic.name)
                .arg(group)
                .arg("0")
                .arg("MKSTREAM")
                .query_async::<()>(&mut connection)
                .await?;
        }
        Ok(())
    }

    async fn publisher(&self, topic: &TopicSpec) -> Result<RedisPublisher> {
        Ok(RedisPublisher {
            connection: connect(&self.client).await?,
            key: topic.name.clone(),
        })
    }

    async fn consumer(&self, topic: &TopicSpec, group: &str) -> Result<RedisConsumer> {
        Ok(RedisConsumer {
            connection: connect(&self.client).await?,
            key: topic.name.clone(),
            group: group.to_owned(),
            dlq: dlq_key(&topic.name, group),
            max_attempts: topic.max_attempts,
            prefetch: topic.prefetch.clamp(1, super::PREFETCH_MAX),
            buffer: VecDeque::new(),
            retry: Vec::new(),
        })
    }

    async fn dead_letters(
        &self,
        topic: &TopicSpec,
        group: &str,
        _expected: u64,
    ) -> Result<Vec<Bytes>> {
        let mut connection = self.connection.clone();
        let key = dlq_key(&topic.name, group);
        let mut payloads = Vec::new();
        let mut start = "-".to_owned();
        loop {
            let page: Vec<StreamId> = redis::cmd("XRANGE")
                .arg(&key)
                .arg(&start)
                .arg("+")
                .arg("COUNT")
                .arg(10_000)
                .query_async::<redis::streams::StreamRangeReply>(&mut connection)
                .await?
                .ids;
            let Some(last) = page.last() else { break };
            start = format!("({}", last.id);
            for entry in &page {
                payloads.push(payload_of(entry)?);
            }
        }
        Ok(payloads)
    }

    async fn count(&self, topic: &TopicSpec) -> Result<u64> {
        let mut connection = self.connection.clone();
        Ok(redis::cmd("XLEN")
            .arg(&topic.name)
            .query_async(&mut connection)
            .await?)
    }

    async fn remove(&self, topic: &TopicSpec) -> Result<()> {
        let mut connection = self.connection.clone();
        let mut keys = vec![topic.name.clone()];
        keys.extend(topic.groups.iter().map(|group| dlq_key(&topic.name, group)));
        redis::cmd("DEL")
            .arg(&keys)
            .query_async::<()>(&mut connection)
            .await?;
        Ok(())
    }
}
