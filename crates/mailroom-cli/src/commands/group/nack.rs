//! `mailroom group nack`: nack, release or reject one delivery.

use mailroom_client::{NackKind, NackOptions};
use serde_json::json;

use crate::api::Api;
use crate::commands::group::DeliveryArgs;
use crate::output::Output;

/// Flags of `group nack`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    delivery: DeliveryArgs,
    /// nack (a failure), release (not a failure) or reject (dead-letter now).
    #[arg(long, default_value = "nack", value_parser = parse_kind)]
    kind: NackKind,
    /// Do not redeliver before this many milliseconds.
    #[arg(long)]
    delay_ms: Option<u64>,
    /// Why; kept with the dead letter.
    #[arg(long)]
    reason: Option<String>,
}

/// Nacks the delivery and prints what the nack did.
pub async fn run(api: &impl Api, args: Args, output: Output) -> anyhow::Result<()> {
    let options = NackOptions {
        kind: args.kind,
        delay_ms: args.delay_ms,
        reason: args.reason,
    };
    let DeliveryArgs { at, .. } = &args.delivery;
    let id = args.delivery.id();
    let outcome = api.nack_with(&at.topic, &at.group, id, &options).await?;
    output.emit(json!({ "outcome": outcome }), || {
        crate::commands::consume::nack_text(outcome).to_owned()
    });
    Ok(())
}

/// Parses `nack`, `release` or `reject`.
pub fn parse_kind(text: &str) -> Result<NackKind, String> {
    match text {
        "nack" => Ok(NackKind::Nack),
        "release" => Ok(NackKind::Release),
        "reject" => Ok(NackKind::Reject),
        _ => Err(format!("{text:?}: expected nack, release or reject")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::group::GroupArgs;
    use crate::fake::Fake;

    // Proves every nack kind parses, and junk is refused.
    #[test]
    fn kinds_parse() {
        assert_eq!(parse_kind("nack"), Ok(NackKind::Nack));
        assert_eq!(parse_kind("release"), Ok(NackKind::Release));
        assert_eq!(parse_kind("reject"), Ok(NackKind::Reject));
        assert!(parse_kind("drop").is_err());
    }

    // Proves the exact delivery is nacked with the kind, delay and reason given.
    #[tokio::test]
    async fn nack_sends_the_delivery_and_its_options() {
        let fake = Fake::default();
        let args = Args {
            delivery: DeliveryArgs {
                at: GroupArgs {
                    topic: "t".into(),
                    group: "g".into(),
                },
                offset: 7,
                attempt: 2,
            },
            kind: NackKind::Reject,
            delay_ms: Some(50),
            reason: Some("bad input".into()),
        };
        run(&fake, args, Output { json: true }).await.unwrap();
        assert_eq!(
            fake.calls(),
            ["nack_with t g 7/2 Reject delay Some(50) reason Some(\"bad input\")"]
        );
    }
}
