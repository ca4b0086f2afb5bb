//! `mailroom topic create|list|info|retention|delete|recover|repair`, one file per verb.

use crate::api::Api;
use crate::output::Output;

mod create;
mod delete;
mod info;
mod list;
mod recover;
mod repair;
mod retention;

/// Topic subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum TopicCommand {
    /// Create a topic (no error if it exists).
    Create(create::Args),
    /// List topics with their offsets and groups.
    List,
    /// Show a topic and the state of each of its groups.
    Info(TopicArgs),
    /// Show a topic's retention, or change the limits given (none = unlimited).
    Retention(retention::Args),
    /// Delete a topic with its messages and groups (durable; cannot be undone).
    Delete(TopicArgs),
    /// Reopen a failed topic (stopped after a full disk, or unreadable) from what is
    /// durable, now rather than at the server's next retry.
    Recover(TopicArgs),
    /// Repair a damaged topic: the server moves its damaged files aside and reopens it.
    Repair(TopicArgs),
}

/// One topic.
#[derive(Debug, clap::Args)]
pub struct TopicArgs {
    /// The topic.
    #[arg(value_parser = crate::names::topic)]
    topic: String,
}

/// Runs a topic subcommand.
pub async fn run(api: &impl Api, command: TopicCommand, output: Output) -> anyhow::Result<()> {
    match command {
        TopicCommand::Create(args) => create::run(api, args, output).await,
        TopicCommand::List => list::run(api, output).await,
        TopicCommand::Info(args) => info::run(api, args, output).await,
        TopicCommand::Retention(args) => retention::run(api, args, output).await,
        TopicCommand::Delete(args) => delete::run(api, args, output).await,
        TopicCommand::Recover(args) => recover::run(api, args, output).await,
        TopicCommand::Repair(args) => repair::run(api, args, output).await,
    }
}
