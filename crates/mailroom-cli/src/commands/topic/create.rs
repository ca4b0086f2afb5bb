//! `mailroom topic create`.

use mailroom_client::IdempotencySettings;
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
    /// The topic's own idempotency window by count: a repeated idempotency key is a
    /// duplicate while its first publish is among the topic's last this many messages
    /// (1 to 1000000; default: the server's).
    #[arg(long, value_name = "N")]
    idempotency_window_messages: Option<u64>,
    /// The topic's own idempotency window by time, in milliseconds (1 to 604800000;
    /// default: the server's).
    #[arg(long, value_name = "MS")]
    idempotency_window_ms: Option<u64>,
}

/// Creates the topic, or says it exists already.
pub async fn run(api: &impl Api, args: Args, output: Output) -> anyhow::Result<()> {
    let topic = args.topic;
    let window = IdempotencySettings {
        window_messages: args.idempotency_window_messages,
        window_ms: args.idempotency_window_ms,
    };
    let created = if window != IdempotencySettings::default() {
        api.create_topic_with_window(&topic, &args.retention.settings(), &window)
            .await?
    } else if args.retention.any() {
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
            idempotency_window_messages: None,
            idempotency_window_ms: None,
        };
        run(&fake, args, Output { json: true }).await.unwrap();
        assert_eq!(fake.calls(), ["create_topic t"]);
    }

    // Proves a window flag sends the topic's own window (the other limit absent).
    #[tokio::test]
    async fn a_window_flag_sends_the_window() {
        let fake = Fake::default();
        let args = Args {
            topic: "t".into(),
            retention: RetentionFlags::default(),
            idempotency_window_messages: None,
            idempotency_window_ms: Some(5000),
        };
        run(&fake, args, Output { json: true }).await.unwrap();
        let calls = fake.calls();
        assert!(
            calls[0].starts_with("create_topic_with_window t")
                && calls[0].ends_with("window_messages: None, window_ms: Some(5000) }"),
            "{calls:?}"
        );
    }
}
