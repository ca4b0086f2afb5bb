//! The `parallel` workload's worker on Redis: one consumer, `XREADGROUP COUNT W`, one
//! `XACK` (optionally pipelined with the next read).

use anyhow::Result;
use redis::aio::MultiplexedConnection;
use redis::streams::StreamReadReply;

use super::{ack_ids, check_acked, connect, entries, payload_of, read_command, Redis};
use crate::systems::{LogSystem, Received, TopicSpec};
use crate::workload::parallel::{WindowSystem, WindowWorker};

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
        read_command(&self.group, &self.key, self.window as usize)
    }
}

/// The deliveries of an `XREADGROUP` reply.
fn received_entries(reply: Option<StreamReadReply>) -> Result<Vec<Received<String>>> {
    entries(reply)
        .map(|entry| {
            Ok(Received {
                payload: payload_of(&entry)?,
                attempt: 1,
                handle: entry.id,
            })
        })
        .collect()
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
        check_acked(acked, handles.len())?;
        received_entries(reply)
    }

    async fn ack_all(&mut self, handles: Vec<String>) -> Result<()> {
        ack_ids(&mut self.connection, &self.key, &self.group, &handles).await
    }
}
