//! mailroom's live channels: subscriptions over WebSocket.

use std::time::Duration;

use anyhow::Result;
use bytes::Bytes;
use mailroom_client::{SubscribeOptions, Subscription};

use super::{Mailroom, STALLED_RECV_BUFFER_BYTES};
use crate::systems::{LiveSubscriber, LiveSystem};

/// A WebSocket subscription that is read.
#[derive(Debug)]
pub struct MailroomSubscriber(Subscription);

impl LiveSubscriber for MailroomSubscriber {
    async fn next(&mut self) -> Result<Option<Bytes>> {
        match self.0.next().await {
            None => Ok(None),
            Some(message) => Ok(Some(message?)),
        }
    }
}

impl LiveSystem for Mailroom {
    type Subscriber = MailroomSubscriber;
    type Stalled = Subscription;

    async fn prepare(&self, channel: &str, subscribers: u64, mailbox: u64) -> Result<()> {
        self.client
            .pick()
            .create_channel(channel, subscribers, mailbox)
            .await?;
        Ok(())
    }

    async fn subscribe(&self, channel: &str) -> Result<MailroomSubscriber> {
        Ok(MailroomSubscriber(
            self.client.pick().subscribe(channel).await?,
        ))
    }

    async fn subscribe_stalled(&self, channel: &str) -> Result<Subscription> {
        let options = SubscribeOptions {
            recv_buffer_bytes: Some(STALLED_RECV_BUFFER_BYTES),
        };
        Ok(self.client.pick().subscribe_with(channel, options).await?)
    }

    async fn publish(&self, channel: &str, payload: Bytes) -> Result<Option<(u64, u64)>> {
        let delivery = self.client.pick().publish_channel(channel, payload).await?;
        Ok(Some((delivery.delivered, delivery.dropped)))
    }

    async fn flush(&self) -> Result<()> {
        // Every publish already waited for the server's answer.
        Ok(())
    }

    async fn drain_stalled(
        &self,
        mut stalled: Subscription,
        idle: Duration,
    ) -> Result<(u64, bool)> {
        let mut count = 0;
        loop {
            match tokio::time::timeout(idle, stalled.next()).await {
                Err(_elapsed) => return Ok((count, false)),
                Ok(None) => return Ok((count, true)),
                Ok(Some(Err(_))) => return Ok((count, true)),
                Ok(Some(Ok(_))) => count += 1,
            }
        }
    }
}
