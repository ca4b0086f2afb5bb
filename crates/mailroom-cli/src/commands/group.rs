//! `mailroom group create|info`.

use mailroom_client::{GroupInfo, StartPosition};
use serde_json::json;

use crate::api::Api;
use crate::output::Output;

/// Group subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum GroupCommand {
    /// Create a consumer group on a topic.
    Create {
        /// The topic.
        topic: String,
        /// The group's name.
        group: String,
        /// Total deliveries allowed per message before it is dead-lettered.
        #[arg(long, default_value_t = 3)]
        max_attempts: u32,
        /// Where to start: earliest, latest, or an offset.
        #[arg(long, default_value = "earliest", value_parser = parse_start)]
        start: StartPosition,
    },
    /// Show a group's position, attempt, in-flight delivery, lag and dead letters.
    Info {
        /// The topic.
        topic: String,
        /// The group.
        group: String,
    },
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
pub async fn run(api: &impl Api, command: GroupCommand, output: Output) -> anyhow::Result<()> {
    match command {
        GroupCommand::Create {
            topic,
            group,
            max_attempts,
            start,
        } => {
            api.create_group(&topic, &group, max_attempts, start)
                .await?;
            output.emit(
                json!({ "topic": topic, "group": group, "created": true }),
                || format!("created group {group} on {topic} (max attempts {max_attempts})"),
            );
        }
        GroupCommand::Info { topic, group } => {
            let info = api.group_info(&topic, &group).await?;
            output.emit(serde_json::to_value(&info)?, || describe(&info));
        }
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
