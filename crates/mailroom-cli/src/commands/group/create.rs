//! `mailroom group create`.

use mailroom_client::{Backoff, GroupOptions, StartPosition};
use serde_json::json;

use crate::api::Api;
use crate::output::Output;

/// Flags of `group create`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The topic.
    #[arg(value_parser = crate::names::topic)]
    topic: String,
    /// The group's name.
    #[arg(value_parser = crate::names::group)]
    group: String,
    /// Failures allowed per message (nacks, expired leases); the one that reaches it
    /// dead-letters the message.
    #[arg(long, default_value_t = 3)]
    max_attempts: u32,
    /// Where to start: earliest, latest, or an offset.
    #[arg(long, default_value = "earliest", value_parser = parse_start)]
    start: StartPosition,
    /// Each delivery's lease in milliseconds; an expired lease counts as a failure.
    #[arg(long)]
    lease_ms: Option<u64>,
    /// Retry backoff: `fixed:MS` or `exp:BASE_MS:CAP_MS`.
    #[arg(long, value_parser = parse_backoff)]
    backoff: Option<Backoff>,
    /// Deliveries in flight at once (W, default 1).
    #[arg(long)]
    max_in_flight: Option<u32>,
}

/// Creates the group with the settings given.
pub async fn run(api: &impl Api, args: Args, output: Output) -> anyhow::Result<()> {
    let Args {
        topic,
        group,
        max_attempts,
        start,
        lease_ms,
        backoff,
        max_in_flight,
    } = args;
    let options = GroupOptions {
        max_attempts,
        start,
        lease_ms,
        backoff,
        max_in_flight,
    };
    api.create_group_with(&topic, &group, &options).await?;
    output.emit(
        json!({ "topic": topic, "group": group, "created": true }),
        || format!("created group {group} on {topic} (max attempts {max_attempts})"),
    );
    Ok(())
}

/// Parses `earliest`, `latest` or an offset.
pub fn parse_start(text: &str) -> Result<StartPosition, String> {
    match text {
        "earliest" => Ok(StartPosition::Earliest),
        "latest" => Ok(StartPosition::Latest),
        _ => text
            .parse()
            .map(StartPosition::Offset)
            .map_err(|_| format!("{text:?}: expected earliest, latest or an offset")),
    }
}

/// Parses `fixed:MS` or `exp:BASE_MS:CAP_MS`.
pub fn parse_backoff(text: &str) -> Result<Backoff, String> {
    let number = |part: &str| {
        part.parse::<u64>()
            .map_err(|_| format!("{text:?}: {part:?} is not a number of milliseconds"))
    };
    match text.split(':').collect::<Vec<_>>().as_slice() {
        ["fixed", delay] => Ok(Backoff::Fixed {
            delay_ms: number(delay)?,
        }),
        ["exp", base, cap] => Ok(Backoff::Exponential {
            base_ms: number(base)?,
            cap_ms: number(cap)?,
        }),
        _ => Err(format!("{text:?}: expected fixed:MS or exp:BASE_MS:CAP_MS")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::Fake;

    // Proves every start spelling parses and junk is refused.
    #[test]
    fn start_positions_parse() {
        assert_eq!(parse_start("earliest"), Ok(StartPosition::Earliest));
        assert_eq!(parse_start("latest"), Ok(StartPosition::Latest));
        assert_eq!(parse_start("42"), Ok(StartPosition::Offset(42)));
        assert!(parse_start("-1").is_err());
        assert!(parse_start("soon").is_err());
    }

    // Proves both backoff spellings parse, and junk is refused.
    #[test]
    fn backoffs_parse() {
        assert_eq!(
            parse_backoff("fixed:250"),
            Ok(Backoff::Fixed { delay_ms: 250 })
        );
        assert_eq!(
            parse_backoff("exp:10:1000"),
            Ok(Backoff::Exponential {
                base_ms: 10,
                cap_ms: 1000
            })
        );
        assert!(parse_backoff("exp:10").is_err());
        assert!(parse_backoff("fixed:-1").is_err());
    }

    // Proves every flag reaches the server as the group's settings.
    #[tokio::test]
    async fn flags_become_the_groups_settings() {
        let fake = Fake::default();
        let args = Args {
            topic: "t".into(),
            group: "g".into(),
            max_attempts: 5,
            start: StartPosition::Latest,
            lease_ms: Some(100),
            backoff: Some(Backoff::Fixed { delay_ms: 7 }),
            max_in_flight: Some(4),
        };
        run(&fake, args, Output { json: true }).await.unwrap();
        assert_eq!(
            fake.calls(),
            [
                "create_group_with t g max_attempts 5 start Latest lease Some(100) \
              backoff Some(Fixed { delay_ms: 7 }) window Some(4)"
            ]
        );
    }
}
