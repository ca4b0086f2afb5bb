//! Redis Streams through the `redis` crate, and Redis pub/sub for live fan-out.
//!
//! Groups are stream consumer groups (`XGROUP CREATE ... 0`). The consumer reads new
//! entries with `XREADGROUP ... COUNT`, acks a round's entries with one `XACK` of their
//! ids (one `XACK` per entry through the one-at-a-time `ack`), and leaves a rejected entry
//! pending; retries are claimed back with `XCLAIM` (which bumps the delivery counter) and
//! their attempt read from `XPENDING`. Redis has no dead-letter queue, so the consumer does
//! what Redis users do: on the final attempt it moves the entry to a `<topic>:dlq:<group>`
//! stream and acks the original in one `MULTI`.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use bytes::Bytes;
use futures_util::stream::FuturesOrdered;
use hdrhistogram::Histogram;
use redis::aio::{MultiplexedConnection, PubSubStream};
use redis::streams::{StreamClaimReply, StreamId, StreamPendingCountReply, StreamReadReply};
use redis::AsyncConnectionConfig;
use tokio::io::AsyncReadExt as _;
use tokio::io::AsyncWriteExt as _;
use tokio::net::{TcpSocket, TcpStream};

use super::{
    FailOutcome, LiveSubscriber, LiveSystem, LogConsumer, LogPublisher, LogSystem, Received,
    TopicSpec,
};
use crate::workload::parallel::{WindowSystem, WindowWorker};
use crate::workload::publish::SendTimes;
use futures_util::StreamExt as _;

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

/// Publishes with `XADD`, pipelined for batches.
pub struct RedisPublisher {
    connection: MultiplexedConnection,
    key: String,
}

impl LogPublisher for RedisPublisher {
    async fn publish(&mut self, payloads: &[Bytes]) -> Result<()> {
        let mut pipe = redis::pipe();
        for payload in payloads {
            pipe.cmd("XADD")
                .arg(&self.key)
                .arg("*")
                .arg(FIELD)
                .arg(payload.as_ref())
                .ignore();
        }
        pipe.query_async::<()>(&mut self.connection).await?;
        Ok(())
    }

    /// Up to `window` `XADD`s in flight on the one multiplexed connection, which writes
    /// whatever is queued together (Redis pipelining); each reply is an entry id.
    async fn publish_pipelined(
        &mut self,
        payloads: Vec<Bytes>,
        window: usize,
        latency: &mut Histogram<u64>,
    ) -> Result<()> {
        let mut replies = FuturesOrdered::new();
        let mut times = SendTimes::default();
        for payload in payloads {
            while times.outstanding() >= window {
                take_entry_id(replies.next().await, &mut times, latency)?;
            }
            let mut connection = self.connection.clone();
            let mut xadd = redis::cmd("XADD");
            xadd.arg(&self.key)
                .arg("*")
                .arg(FIELD)
                .arg(payload.as_ref());
            replies.push_back(async move { xadd.query_async::<String>(&mut connection).await });
            times.sent();
        }
        while times.outstanding() > 0 {
            take_entry_id(replies.next().await, &mut times, latency)?;
        }
        Ok(())
    }
}

/// Records one pipelined `XADD`'s reply.
fn take_entry_id(
    reply: Option<redis::RedisResult<String>>,
    times: &mut SendTimes,
    latency: &mut Histogram<u64>,
) -> Result<()> {
    let id = reply.context("an XADD is outstanding")??;
    anyhow::ensure!(!id.is_empty(), "XADD returned an empty id");
    times.confirmed(1, latency)
}

/// What a Redis consumer needs to ack or reject an entry.
#[derive(Debug)]
pub struct RedisHandle {
    id: String,
    attempt: u32,
    payload: Bytes,
}

/// Reads one group with `XREADGROUP`, retries with `XCLAIM`.
pub struct RedisConsumer {
    connection: MultiplexedConnection,
    key: String,
    group: String,
    dlq: String,
    max_attempts: u32,
    prefetch: usize,
    buffer: VecDeque<Received<RedisHandle>>,
    retry: Vec<String>,
}

impl RedisConsumer {
    /// One `XACK` of `ids`; every one must have been pending.
    async fn ack_ids(&mut self, ids: &[String]) -> Result<()> {
        let acked: usize = redis::cmd("XACK")
            .arg(&self.key)
            .arg(&self.group)
            .arg(ids)
            .query_async(&mut self.connection)
            .await?;
        anyhow::ensure!(
            acked == ids.len(),
            "XACK of {} ids acked {acked}",
            ids.len()
        );
        Ok(())
    }

    async fn read_new(&mut self) -> Result<()> {
        let reply: Option<StreamReadReply> = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg(&self.group)
            .arg(CONSUMER)
            .arg("COUNT")
            .arg(self.prefetch)
            .arg("BLOCK")
            .arg(100)
            .arg("STREAMS")
            .arg(&self.key)
            .arg(">")
            .query_async(&mut self.connection)
            .await?;
        for key in reply.map(|reply| reply.keys).unwrap_or_default() {
            for entry in key.ids {
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

/// A pub/sub subscriber on its own connection.
pub struct RedisSubscriber(PubSubStream);

impl LiveSubscriber for RedisSubscriber {
    async fn next(&mut self) -> Result<Option<Bytes>> {
        Ok(self
            .0
            .next()
            .await
            .map(|message| Bytes::copy_from_slice(message.get_payload_bytes())))
    }
}

impl LiveSystem for Redis {
    type Subscriber = RedisSubscriber;
    type Stalled = TcpStream;

    async fn prepare(&self, _channel: &str, _subscribers: u64, _mailbox: u64) -> Result<()> {
        // Pub/sub channels exist while someone subscribes; the per-client output buffer
        // (client-output-buffer-limit pubsub) is the only bound, left at its default.
        Ok(())
    }

    async fn subscribe(&self, channel: &str) -> Result<RedisSubscriber> {
        let mut pubsub = self.client.get_async_pubsub().await?;
        pubsub.subscribe(channel).await?;
        Ok(RedisSubscriber(pubsub.into_on_message()))
    }

    async fn subscribe_stalled(&self, channel: &str) -> Result<TcpStream> {
        let socket = TcpSocket::new_v4()?;
        socket.set_recv_buffer_size(STALLED_RECV_BUFFER_BYTES)?;
        let mut stream = socket.connect(self.address.parse()?).await?;
        let command = format!(
            "*2\r\n$9\r\nSUBSCRIBE\r\n${}\r\n{channel}\r\n",
            channel.len()
        );
        stream.write_all(command.as_bytes()).await?;
        // Wait for the subscribe confirmation so the publisher cannot start before it.
        let expected = b"subscribe".len();
        let mut seen = Vec::new();
        while !seen.windows(expected).any(|window| window == b"subscribe") {
            let mut chunk = [0u8; 256];
            let read = stream.read(&mut chunk).await?;
            anyhow::ensure!(read > 0, "redis closed the stalled subscriber's connection");
            seen.extend_from_slice(&chunk[..read]);
        }
        Ok(stream)
    }

    async fn publish(&self, channel: &str, payload: Bytes) -> Result<Option<(u64, u64)>> {
        let receivers: u64 = redis::cmd("PUBLISH")
            .arg(channel)
            .arg(payload.as_ref())
            .query_async(&mut self.connection.clone())
            .await?;
        Ok(Some((receivers, 0)))
    }

    async fn flush(&self) -> Result<()> {
        Ok(())
    }

    async fn drain_stalled(&self, stalled: TcpStream, idle: Duration) -> Result<(u64, bool)> {
        // Each pushed message starts with the bulk string "message"; payloads are hex and
        // dots, so the marker cannot occur inside one.
        super::stalled::count_marker(stalled, b"$7\r\nmessage\r\n", idle).await
    }
}

/// The one consumer of a windowed group: on its own connection it reads up to `W` new
/// entries with `XREADGROUP COUNT W` and acks them all with one `XACK` (pipelined with the
/// next `XREADGROUP` when the system was made [`pipelined`](Redis::pipelined)).
pub struct RedisWorker {
    connection: MultiplexedConnection,
    key: String,
    group: String,
    window: u32,
    pipelined: bool,
}

impl WindowSystem for Redis {
    type Worker = RedisWorker;

    async fn prepare_windowed(&self, topic: &TopicSpec, _window: u32) -> Result<()> {
        // A stream group has no in-flight limit; the window is the consumer's COUNT.
        LogSystem::prepare(self, topic).await
    }

    async fn workers(
        &self,
        topic: &TopicSpec,
        group: &str,
        window: u32,
    ) -> Result<Vec<RedisWorker>> {
        Ok(vec![RedisWorker {
            connection: connect(&self.client).await?,
            key: topic.name.clone(),
            group: group.to_owned(),
            window,
            pipelined: self.pipelined,
        }])
    }
}

impl RedisWorker {
    /// `XREADGROUP` of up to `W` new entries, blocking up to 100 ms.
    fn read_command(&self) -> redis::Cmd {
        let mut read = redis::cmd("XREADGROUP");
        read.arg("GROUP")
            .arg(&self.group)
            .arg(CONSUMER)
            .arg("COUNT")
            .arg(self.window)
            .arg("BLOCK")
            .arg(100)
            .arg("STREAMS")
            .arg(&self.key)
            .arg(">");
        read
    }
}

/// The deliveries of an `XREADGROUP` reply.
fn received_entries(reply: Option<StreamReadReply>) -> Result<Vec<Received<String>>> {
    let mut batch = Vec::new();
    for key in reply.map(|reply| reply.keys).unwrap_or_default() {
        for entry in key.ids {
            batch.push(Received {
                payload: payload_of(&entry)?,
                attempt: 1,
                handle: entry.id,
            });
        }
    }
    Ok(batch)
}

impl WindowWorker for RedisWorker {
    type Handle = String;

    async fn take(&mut self) -> Result<Vec<Received<String>>> {
        let reply: Option<StreamReadReply> = self
            .read_command()
            .query_async(&mut self.connection)
            .await?;
        received_entries(reply)
    }

    fn acks_with_take(&self) -> bool {
        self.pipelined
    }

    async fn ack_then_take(&mut self, handles: Vec<String>) -> Result<Vec<Received<String>>> {
        if handles.is_empty() {
            return self.take().await;
        }
        // One round trip: the XACK and the next XREADGROUP go out together.
        let mut pipe = redis::pipe();
        pipe.cmd("XACK")
            .arg(&self.key)
            .arg(&self.group)
            .arg(&handles);
        pipe.add_command(self.read_command());
        let (acked, reply): (usize, Option<StreamReadReply>) =
            pipe.query_async(&mut self.connection).await?;
        anyhow::ensure!(
            acked == handles.len(),
            "XACK of {} ids acked {acked}",
            handles.len()
        );
        received_entries(reply)
    }

    async fn ack_all(&mut self, handles: Vec<String>) -> Result<()> {
        let acked: usize = redis::cmd("XACK")
            .arg(&self.key)
            .arg(&self.group)
            .arg(&handles)
            .query_async(&mut self.connection)
            .await?;
        anyhow::ensure!(
            acked == handles.len(),
            "XACK of {} ids acked {acked}",
            handles.len()
        );
        Ok(())
    }
}
