//! `mailroom channel publish`: one message, or one per line of stdin.

use anyhow::Context as _;
use bytes::Bytes;
use tokio::io::{AsyncBufReadExt as _, BufReader};

use crate::api::Api;
use crate::output::{counted, Output};

/// Flags of `channel publish`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The channel.
    #[arg(value_parser = crate::names::channel)]
    channel: String,
    /// The message; without it, each line of stdin is one message.
    message: Option<String>,
}

/// Publishes the message, or each line of stdin, and prints what each publish did.
pub async fn run(api: &impl Api, args: Args, output: Output) -> anyhow::Result<()> {
    let channel = args.channel;
    if let Some(message) = args.message {
        return publish_one(api, &channel, Bytes::from(message), output).await;
    }
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    for line_number in 1u64.. {
        let line = lines
            .next_line()
            .await
            .with_context(|| format!("reading line {line_number} of stdin"))?;
        let Some(line) = line else { break };
        publish_one(api, &channel, Bytes::from(line), output).await?;
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
            counted(delivery.delivered, "subscriber", "subscribers"),
            counted(delivery.dropped, "subscriber", "subscribers")
        )
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::Fake;

    // Proves a message given as an argument is published once, as it is.
    #[tokio::test]
    async fn an_argument_is_one_message() {
        let fake = Fake::default();
        let args = Args {
            channel: "c".into(),
            message: Some("hello".into()),
        };
        run(&fake, args, Output { json: true }).await.unwrap();
        assert_eq!(fake.calls(), ["publish_channel c hello"]);
    }
}
