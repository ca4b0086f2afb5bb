//! `mailroom channel create|list|publish|subscribe|close`.

use anyhow::Context as _;
use bytes::Bytes;
use serde_json::json;
use tokio::io::{AsyncBufReadExt as _, BufReader};

use crate::api::{Api, Messages as _};
use crate::output::{payload_fields, payload_text, Output};

/// Channel subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum ChannelCommand {
    /// Create a live channel (no error if an identical one exists).
    Create {
        /// The channel's name.
        #[arg(value_parser = crate::names::channel)]
        channel: String,
        /// The most subscribers at once.
        #[arg(long, default_value_t = 64)]
        max_subscribers: u64,
        /// The most messages buffered per subscriber before drops.
        #[arg(long, default_value_t = 256)]
        mailbox_capacity: u64,
    },
    /// List live channels with their counters.
    List,
    /// Publish one message, or one per line of stdin.
    Publish {
        /// The channel.
        #[arg(value_parser = crate::names::channel)]
        channel: String,
        /// The message; without it, each line of stdin is one message.
        message: Option<String>,
    },
    /// Subscribe (WebSocket) and print each message until the channel closes.
    Subscribe {
        /// The channel.
        #[arg(value_parser = crate::names::channel)]
        channel: String,
        /// Stop after this many messages.
        #[arg(long)]
        count: Option<u64>,
    },
    /// Close a channel; subscribers get what is queued, then their streams end.
    Close {
        /// The channel.
        #[arg(value_parser = crate::names::channel)]
        channel: String,
    },
}

/// Runs a channel subcommand.
pub async fn run(api: &impl Api, command: ChannelCommand, output: Output) -> anyhow::Result<()> {
    match command {
        ChannelCommand::Create {
            channel,
            max_subscribers,
            mailbox_capacity,
        } => {
            let created = api
                .create_channel(&channel, max_subscribers, mailbox_capacity)
                .await?;
            output.emit(json!({ "channel": channel, "created": created }), || {
                if created {
                    format!("created channel {channel}")
                } else {
                    format!("channel {channel} already exists")
                }
            });
        }
        ChannelCommand::List => {
            for info in api.list_channels().await? {
                output.emit(serde_json::to_value(&info)?, || {
                    format!(
                        "{}\tsubscribers {}/{}\tpublished {}\tdropped {}",
                        info.name,
                        info.subscribers,
                        info.max_subscribers,
                        info.published,
                        info.dropped
                    )
                });
            }
        }
        ChannelCommand::Publish { channel, message } => match message {
            Some(message) => publish_one(api, &channel, Bytes::from(message), output).await?,
            None => {
                let mut lines = BufReader::new(tokio::io::stdin()).lines();
                for line_number in 1u64.. {
                    let line = lines
                        .next_line()
                        .await
                        .with_context(|| format!("reading line {line_number} of stdin"))?;
                    let Some(line) = line else { break };
                    publish_one(api, &channel, Bytes::from(line), output).await?;
                }
            }
        },
        ChannelCommand::Subscribe { channel, count } => {
            let mut subscription = api.subscribe(&channel).await?;
            let mut received = 0u64;
            while count.is_none_or(|count| received < count) {
                let Some(message) = subscription.next_message().await else {
                    break;
                };
                let message = message?;
                output.emit(payload_fields(&message), || payload_text(&message));
                received += 1;
            }
        }
        ChannelCommand::Close { channel } => {
            api.close_channel(&channel).await?;
            output.emit(json!({ "channel": channel, "closed": true }), || {
                format!("closed channel {channel}")
            });
        }
    }
    Ok(())
}

async fn publish_one(
    api: &impl Api,
    channel: &str,
    payload: Bytes,
    output: Output,
) -> anyhow::Result<()> {
    let delivery = api.publish_channel(channel, payload).await?;
    output.emit(serde_json::to_value(delivery)?, || {
        format!(
            "delivered to {}, dropped for {}",
            delivery.delivered, delivery.dropped
        )
    });
    Ok(())
}
