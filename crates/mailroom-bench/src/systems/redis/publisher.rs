//! Publishing to a Redis stream: `XADD`, pipelined.

use anyhow::Result;
use bytes::Bytes;
use hdrhistogram::Histogram;
use redis::aio::MultiplexedConnection;

use super::FIELD;
use crate::systems::LogPublisher;
use crate::workload::publish::in_order;

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
        let send = |payload: Bytes| {
            let mut connection = self.connection.clone();
            let mut xadd = redis::cmd("XADD");
            xadd.arg(&self.key)
                .arg("*")
                .arg(FIELD)
                .arg(payload.as_ref());
            async move { xadd.query_async::<String>(&mut connection).await }
        };
        in_order(payloads, window, latency, send, entry_id).await
    }
}

/// Checks one pipelined `XADD`'s reply: an entry id.
fn entry_id(reply: redis::RedisResult<String>) -> Result<()> {
    anyhow::ensure!(!reply?.is_empty(), "XADD returned an empty id");
    Ok(())
}
