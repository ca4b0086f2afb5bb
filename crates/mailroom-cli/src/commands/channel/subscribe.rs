//! `mailroom channel subscribe`: print each message until the channel closes.

use crate::api::{Api, Messages as _};
use crate::output::{payload_fields, payload_text, Output};

/// Flags of `channel subscribe`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The channel.
    #[arg(value_parser = crate::names::channel)]
    channel: String,
    /// Stop after this many messages.
    #[arg(long)]
    count: Option<u64>,
}

/// Subscribes and prints messages, up to `--count` of them.
pub async fn run(api: &impl Api, args: Args, output: Output) -> anyhow::Result<()> {
    let mut subscription = api
        .subscribe_with(&args.channel, Default::default())
        .await?;
    let mut received = 0u64;
    while args.count.is_none_or(|count| received < count) {
        let Some(message) = subscription.next_message().await else {
            break;
        };
        let message = message?;
        output.emit(payload_fields(&message), || payload_text(&message));
        received += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::Fake;

    // Proves subscribe reads until the channel ends, or stops at --count.
    #[tokio::test]
    async fn subscribe_reads_until_the_end_or_the_count() {
        let fake = Fake::with_messages(&["a", "b", "c"]);
        let args = |count| Args {
            channel: "c".into(),
            count,
        };
        let json = Output { json: true };
        run(&fake, args(None), json).await.unwrap();
        run(&fake, args(Some(2)), json).await.unwrap();
        assert_eq!(
            fake.calls(),
            ["subscribe_with c default", "subscribe_with c default"]
        );
        assert_eq!(fake.messages_read(), 3 + 2);
    }
}
