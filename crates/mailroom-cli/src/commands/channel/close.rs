//! `mailroom channel close`.

use serde_json::json;

use crate::api::Api;
use crate::output::Output;

/// Flags of `channel close`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The channel.
    #[arg(value_parser = crate::names::channel)]
    channel: String,
}

/// Closes the channel.
pub async fn run(api: &impl Api, args: Args, output: Output) -> anyhow::Result<()> {
    let channel = args.channel;
    api.close_channel(&channel).await?;
    output.emit(json!({ "channel": channel, "closed": true }), || {
        format!("closed channel {channel}")
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::Fake;

    // Proves close closes the named channel.
    #[tokio::test]
    async fn close_names_the_channel() {
        let fake = Fake::default();
        let args = Args {
            channel: "c".into(),
        };
        run(&fake, args, Output { json: false }).await.unwrap();
        assert_eq!(fake.calls(), ["close_channel c"]);
    }
}
