//! Publishing to a Redis stream: `XADD`, pipelined.

use anyhow::{Context as _, Result};
use bytes::Bytes;
use futures_util::stream::FuturesOrdered;
use futures_util::StreamExt as _;
use hdrhistogram::Histogram;
use redis::aio::MultiplexedConnection;

use super::FIELD;
use crate::systems::LogPublisher;
use crate::workload::publish::SendTimes;

/// Publishes with `XADD`, pipelined for batches.
pub struct RedisPublisher {
    pub(super) connection: MultiplexedConnection,
    pub(super) key: String,
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
