//! `mailroom group seek`: move a group to an offset, to the oldest retained message or
//! the end of the log, or (`--time WHEN`) to the first message published at or after a
//! time.

use mailroom_client::StartPosition;
use serde_json::json;

use crate::api::Api;
use crate::commands::group::GroupArgs;
use crate::dates::parse_instant_ms;
use crate::output::Output;

/// A group and where to move it.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    at: GroupArgs,
    /// `earliest` (the oldest retained message), `latest` (the end of the log) or an
    /// offset within the retained log or at its end.
    #[arg(value_parser = parse_target, required_unless_present = "time", conflicts_with = "time")]
    to: Option<StartPosition>,
    /// Move to the first message published at or after WHEN (Unix milliseconds or a UTC
    /// time such as 2025-12-01T12:14:41Z); the end of the log if none is.
    #[arg(long, value_name = "WHEN", value_parser = parse_instant_ms)]
    time: Option<u64>,
}

/// Reads `earliest`, `latest` or an offset.
fn parse_target(text: &str) -> Result<StartPosition, String> {
    match text {
        "earliest" => Ok(StartPosition::Earliest),
        "latest" => Ok(StartPosition::Latest),
        offset => offset
            .parse()
            .map(StartPosition::Offset)
            .map_err(|_| format!("expected earliest, latest or an offset, got {offset:?}")),
    }
}

/// Moves the group and prints its new position. Deliveries in flight stop being owned.
pub async fn run(api: &impl Api, args: Args, output: Output) -> anyhow::Result<()> {
    let (topic, group) = (&args.at.topic, &args.at.group);
    let position = match (args.to, args.time) {
        (Some(to), _) => api.seek(topic, group, to).await?,
        (None, Some(time_ms)) => api.seek_to_time(topic, group, time_ms).await?,
        (None, None) => unreachable!("clap requires a target or --time"),
    };
    output.emit(json!({ "position": position }), || {
        format!("position {position}")
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::Fake;

    // Proves the target words and offsets are read, anything else refused, and the seek
    // sent as read.
    #[tokio::test]
    async fn seek_sends_the_target() {
        assert_eq!(parse_target("earliest"), Ok(StartPosition::Earliest));
        assert_eq!(parse_target("latest"), Ok(StartPosition::Latest));
        assert_eq!(parse_target("7"), Ok(StartPosition::Offset(7)));
        assert!(parse_target("-1").is_err());
        assert!(parse_target("middle").is_err());
        let fake = Fake::default();
        let args = Args {
            at: GroupArgs {
                topic: "t".into(),
                group: "g".into(),
            },
            to: Some(StartPosition::Offset(7)),
            time: None,
        };
        run(&fake, args, Output { json: true }).await.unwrap();
        let by_time = Args {
            at: GroupArgs {
                topic: "t".into(),
                group: "g".into(),
            },
            to: None,
            time: Some(1_000),
        };
        run(&fake, by_time, Output { json: true }).await.unwrap();
        assert_eq!(fake.calls(), ["seek t g Offset(7)", "seek t g time 1000"]);
    }
}
