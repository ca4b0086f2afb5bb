//! Redis pub/sub as live fan-out.

use std::time::Duration;

use anyhow::Result;
use bytes::Bytes;
use futures_util::StreamExt as _;
use redis::aio::PubSubStream;
use tokio::io::AsyncReadExt as _;
use tokio::io::AsyncWriteExt as _;
use tokio::net::{TcpSocket, TcpStream};

use super::{Redis, STALLED_RECV_BUFFER_BYTES};
use crate::systems::{LiveSubscriber, LiveSystem};

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
        crate::systems::stalled::count_marker(stalled, b"$7\r\nmessage\r\n", idle).await
    }
}
