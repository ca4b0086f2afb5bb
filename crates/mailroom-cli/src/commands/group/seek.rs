//! `mailroom group seek`: move a group to an offset, or to the oldest retained message
//! or the end of the log.

use mailroom_client::StartPosition;
use serde_json::json;

use crate::api::Api;
use crate::commands::group::GroupArgs;
use crate::output::Output;

/// A group and where to move it.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    at: GroupArgs,
    /// `earliest` (the oldest retained message), `latest` (the end of the log) or an
    /// offset within the retained log or at its end.
    #[arg(value_parser = parse_target)]
    to: StartPosition,
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
    let position = api.seek(&args.at.topic, &args.at.group, args.to).await?;
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
            to: StartPosition::Offset(7),
        };
        run(&fake, args, Output { json: true }).await.unwrap();
        assert_eq!(fake.calls(), ["seek t g Offset(7)"]);
    }
}
