//! `mailroom channel create`.

use serde_json::json;

use crate::api::Api;
use crate::output::Output;

/// Flags of `channel create`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The channel's name.
    #[arg(value_parser = crate::names::channel)]
    channel: String,
    /// The most subscribers at once.
    #[arg(long, default_value_t = 64)]
    max_subscribers: u64,
    /// The most messages buffered per subscriber before drops.
    #[arg(long, default_value_t = 256)]
    mailbox_capacity: u64,
    /// The most payload bytes buffered per subscriber before drops [default: the
    /// server's, 8 MiB].
    #[arg(long)]
    mailbox_bytes: Option<u64>,
}

/// Creates the channel, or says an identical one exists.
pub async fn run(api: &impl Api, args: Args, output: Output) -> anyhow::Result<()> {
    let Args {
        channel,
        max_subscribers,
        mailbox_capacity,
        mailbox_bytes,
    } = args;
    let created = api
        .create_channel(&channel, max_subscribers, mailbox_capacity, mailbox_bytes)
        .await?;
    output.emit(json!({ "channel": channel, "created": created }), || {
        if created {
            format!("created channel {channel}")
        } else {
            format!("channel {channel} already exists")
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::Fake;

    // Proves create sends the channel's limits.
    #[tokio::test]
    async fn create_sends_the_limits() {
        let fake = Fake::default();
        let args = Args {
            channel: "c".into(),
            max_subscribers: 5,
            mailbox_capacity: 9,
            mailbox_bytes: None,
        };
        run(&fake, args, Output { json: true }).await.unwrap();
        assert_eq!(fake.calls(), ["create_channel c 5 9"]);
    }

    // Proves create sends the byte budget when given.
    #[tokio::test]
    async fn create_sends_the_byte_budget() {
        let fake = Fake::default();
        let args = Args {
            channel: "c".into(),
            max_subscribers: 5,
            mailbox_capacity: 9,
            mailbox_bytes: Some(4096),
        };
        run(&fake, args, Output { json: true }).await.unwrap();
        assert_eq!(fake.calls(), ["create_channel c 5 9 bytes 4096"]);
    }
}
