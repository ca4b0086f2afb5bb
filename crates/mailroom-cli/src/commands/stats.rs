//! `mailroom stats`: every topic with its groups, and every live channel.

use serde_json::json;

use crate::api::Api;
use crate::commands::group::describe;
use crate::output::Output;

/// Prints topics, groups and channels.
pub async fn run(api: &impl Api, output: Output) -> anyhow::Result<()> {
    let mut topics = Vec::new();
    for summary in api.list_topics().await? {
        // A topic deleted since the listing is skipped, not an error.
        if let Ok(info) = api.topic_info(&summary.name).await {
            topics.push(info);
        }
    }
    let channels = api.list_channels().await?;
    let value = json!({ "topics": topics, "channels": channels });
    output.emit(value, || {
        let mut text = String::from("topics:");
        for topic in &topics {
            text.push_str(&format!(
                "\n  {}\toffsets {}..{}",
                topic.name, topic.start, topic.end
            ));
            for group in &topic.groups {
                text.push_str(&format!("\n    {}", describe(group)));
            }
        }
        text.push_str("\nchannels:");
        for channel in &channels {
            text.push_str(&format!(
                "\n  {}\tsubscribers {}/{}\tpublished {}\tdelivered {}\tdropped {}",
                channel.name,
                channel.subscribers,
                channel.max_subscribers,
                channel.published,
                channel.delivered,
                channel.dropped
            ));
        }
        text
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::Fake;

    // Proves stats reads every listed topic in full, then the channels.
    #[tokio::test]
    async fn reads_each_topic_then_the_channels() {
        let fake = Fake::default();
        run(&fake, Output { json: false }).await.unwrap();
        assert_eq!(
            fake.calls(),
            ["list_topics", "topic_info t", "list_channels"]
        );
    }
}
