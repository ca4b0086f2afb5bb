//! `mailroom channel create|list|publish|subscribe|close`, one file per verb.

use crate::api::Api;
use crate::output::Output;

mod close;
mod create;
mod list;
mod publish;
mod subscribe;

/// Channel subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum ChannelCommand {
    /// Create a live channel (no error if an identical one exists).
    Create(create::Args),
    /// List live channels with their counters.
    List,
    /// Publish one message, or one per line of stdin.
    Publish(publish::Args),
    /// Subscribe (WebSocket) and print each message until the channel closes.
    Subscribe(subscribe::Args),
    /// Close a channel; subscribers get what is queued, then their streams end.
    Close(close::Args),
}

/// Runs a channel subcommand.
pub async fn run(api: &impl Api, command: ChannelCommand, output: Output) -> anyhow::Result<()> {
    match command {
        ChannelCommand::Create(args) => create::run(api, args, output).await,
        ChannelCommand::List => list::run(api, output).await,
        ChannelCommand::Publish(args) => publish::run(api, args, output).await,
        ChannelCommand::Subscribe(args) => subscribe::run(api, args, output).await,
        ChannelCommand::Close(args) => close::run(api, args, output).await,
    }
}
