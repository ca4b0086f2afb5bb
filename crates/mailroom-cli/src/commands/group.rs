//! `mailroom group create|info|delete|poll|nack|touch|redrive|purge`.

use mailroom_client::{Client, GroupInfo, GroupOptions, StartPosition};
use serde_json::json;

use crate::commands::group_control::{self, parse_backoff, ControlCommand};
use crate::output::Output;

/// Group subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum GroupCommand {
    /// Create a consumer group on a topic.
    Create {
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
        backoff: Option<mailroom_client::Backoff>,
        /// Deliveries in flight at once (W, default 1).
        #[arg(long)]
        max_in_flight: Option<u32>,
    },
    /// Show a group's position, lag, settings, counters, deliveries in flight and dead
    /// letters with their reasons.
    Info {
        /// The topic.
        #[arg(value_parser = crate::names::topic)]
        topic: String,
        /// The group.
        #[arg(value_parser = crate::names::group)]
        group: String,
    },
    /// Delete a consumer group (durable; the topic and its messages stay).
    Delete {
        /// The topic.
        #[arg(value_parser = crate::names::topic)]
        topic: String,
        /// The group.
        #[arg(value_parser = crate::names::group)]
        group: String,
    },
    /// Leases, nack kinds, consumer identities, redrive and purge.
    #[command(flatten)]
    Control(ControlCommand),
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

/// One line describing a group.
pub fn describe(group: &GroupInfo) -> String {
    let in_flight = match group.in_flight {
        Some(id) => format!("offset {} attempt {}", id.offset, id.attempt),
        None => "none".to_owned(),
    };
    format!(
        "{}\tposition {}\tlag {}\tin flight: {}\tattempt {}/{}\tdead letters {}",
        group.name,
        group.position,
        group.lag,
        in_flight,
        group.attempt,
        group.max_attempts,
        group.dead_letters
    )
}

/// Runs a group subcommand.
pub async fn run(api: &Client, command: GroupCommand, output: Output) -> anyhow::Result<()> {
    match command {
        GroupCommand::Create {
            topic,
            group,
            max_attempts,
            start,
            lease_ms,
            backoff,
            max_in_flight,
        } => {
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
        }
        GroupCommand::Info { topic, group } => {
            let detail = api.group_detail(&topic, &group).await?;
            output.emit(serde_json::to_value(&detail)?, || {
                group_control::describe_detail(&detail)
            });
        }
        GroupCommand::Delete { topic, group } => {
            api.delete_group(&topic, &group).await?;
            output.emit(
                json!({ "topic": topic, "group": group, "deleted": true }),
                || format!("deleted group {group} on {topic}"),
            );
        }
        GroupCommand::Control(command) => group_control::run(api, command, output).await?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves every start spelling parses and junk is refused.
    #[test]
    fn start_positions_parse() {
        assert_eq!(parse_start("earliest"), Ok(StartPosition::Earliest));
        assert_eq!(parse_start("latest"), Ok(StartPosition::Latest));
        assert_eq!(parse_start("42"), Ok(StartPosition::Offset(42)));
        assert!(parse_start("-1").is_err());
        assert!(parse_start("soon").is_err());
    }
}
