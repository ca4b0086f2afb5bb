//! `mailroom topic create|list|info|delete`.

use serde_json::json;

use crate::api::Api;
use crate::output::Output;

/// Topic subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum TopicCommand {
    /// Create a topic (no error if it exists).
    Create {
        /// The topic's name: 1-128 characters of [A-Za-z0-9._-].
        #[arg(value_parser = crate::names::topic)]
        topic: String,
    },
    /// List topics with their offsets and groups.
    List,
    /// Show a topic and the state of each of its groups.
    Info {
        /// The topic.
        #[arg(value_parser = crate::names::topic)]
        topic: String,
    },
    /// Delete a topic with its messages and groups (durable; cannot be undone).
    Delete {
        /// The topic.
        #[arg(value_parser = crate::names::topic)]
        topic: String,
    },
}

/// Runs a topic subcommand.
pub async fn run(api: &impl Api, command: TopicCommand, output: Output) -> anyhow::Result<()> {
    match command {
        TopicCommand::Create { topic } => {
            let created = api.create_topic(&topic).await?;
            output.emit(json!({ "topic": topic, "created": created }), || {
                if created {
                    format!("created topic {topic}")
                } else {
                    format!("topic {topic} already exists")
                }
            });
        }
        TopicCommand::List => {
            let topics = api.list_topics().await?;
            for topic in topics {
                let value = serde_json::to_value(&topic)?;
                output.emit(value, || {
                    format!(
                        "{}\toffsets {}..{}\tgroups: {}",
                        topic.name,
                        topic.start,
                        topic.end,
                        topic.groups.join(", ")
                    )
                });
            }
        }
        TopicCommand::Info { topic } => {
            let info = api.topic_info(&topic).await?;
            output.emit(serde_json::to_value(&info)?, || {
                let mut text = format!("{}\toffsets {}..{}", info.name, info.start, info.end);
                for group in &info.groups {
                    text.push_str(&format!("\n  {}", crate::commands::group::describe(group)));
                }
                text
            });
        }
        TopicCommand::Delete { topic } => {
            api.delete_topic(&topic).await?;
            output.emit(json!({ "topic": topic, "deleted": true }), || {
                format!("deleted topic {topic}")
            });
        }
    }
    Ok(())
}
