//! `mailroom topic create`.

use serde_json::json;

use crate::api::Api;
use crate::commands::topic::retention::RetentionFlags;
use crate::output::Output;

/// Flags of `topic create`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The topic's name: 1-128 characters of [A-Za-z0-9._-].
    #[arg(value_parser = crate::names::topic)]
    topic: String,
    /// The topic's own retention; limits left out follow the server's defaults.
    #[command(flatten)]
    retention: RetentionFlags,
}

/// Creates the topic, or says it exists already.
pub async fn run(api: &impl Api, args: Args, output: Output) -> anyhow::Result<()> {
    let topic = args.topic;
    let created = if args.retention.any() {
        api.create_topic_with(&topic, &args.retention.settings())
            .await?
    } else {
        api.create_topic(&topic).await?
    };
    output.emit(json!({ "topic": topic, "created": created }), || {
        if created {
            format!("created topic {topic}")
        } else {
            format!("topic {topic} already exists")
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::Fake;

    // Proves create creates the named topic.
    #[tokio::test]
    async fn create_names_the_topic() {
        let fake = Fake::default();
        let args = Args {
            topic: "t".into(),
            retention: RetentionFlags::default(),
        };
        run(&fake, args, Output { json: true }).await.unwrap();
        assert_eq!(fake.calls(), ["create_topic t"]);
    }
}
