//! `mailroom group pause`: stop a group handing out new deliveries, until `resume` or
//! for a time.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::json;

use crate::api::Api;
use crate::commands::group::GroupArgs;
use crate::output::Output;

/// A group and how long to pause it.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    at: GroupArgs,
    /// End the pause at this time (Unix ms); without it or `--for-ms`, until `resume`.
    #[arg(long, conflicts_with = "for_ms")]
    until_ms: Option<u64>,
    /// End the pause this many milliseconds from now (by this machine's clock).
    #[arg(long)]
    for_ms: Option<u64>,
}

/// Pauses the group and prints the pause that now holds.
pub async fn run(api: &impl Api, args: Args, output: Output) -> anyhow::Result<()> {
    let until_ms = match (args.until_ms, args.for_ms) {
        (Some(until_ms), _) => Some(until_ms),
        (None, Some(for_ms)) => Some(now_ms()?.saturating_add(for_ms)),
        (None, None) => None,
    };
    let pause = api.pause(&args.at.topic, &args.at.group, until_ms).await?;
    output.emit(json!(pause), || match pause.paused_until_ms {
        Some(until_ms) => format!("paused until {until_ms} ms"),
        None => "paused until resumed".into(),
    });
    Ok(())
}

fn now_ms() -> anyhow::Result<u64> {
    let since = SystemTime::now().duration_since(UNIX_EPOCH)?;
    Ok(u64::try_from(since.as_millis())?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::Fake;

    // Proves a pause without a time is sent as one until a resume, and --until-ms as is.
    #[tokio::test]
    async fn pause_sends_the_end() {
        let fake = Fake::default();
        let args = |until_ms| Args {
            at: GroupArgs {
                topic: "t".into(),
                group: "g".into(),
            },
            until_ms,
            for_ms: None,
        };
        let json = Output { json: true };
        run(&fake, args(None), json).await.unwrap();
        run(&fake, args(Some(99)), json).await.unwrap();
        assert_eq!(fake.calls(), ["pause t g None", "pause t g Some(99)"]);
    }
}
