//! `mailroom topic delete`.

use serde_json::json;

use crate::api::Api;
use crate::commands::topic::TopicArgs;
use crate::output::Output;

/// Deletes the topic with its messages and groups.
pub async fn run(api: &impl Api, args: TopicArgs, output: Output) -> anyhow::Result<()> {
    let topic = args.topic;
    api.delete_topic(&topic).await?;
    output.emit(json!({ "topic": topic, "deleted": true }), || {
        format!("deleted topic {topic}")
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::Fake;

    // Proves delete deletes the named topic.
    #[tokio::test]
    async fn delete_names_the_topic() {
        let fake = Fake::default();
        let args = TopicArgs { topic: "t".into() };
        run(&fake, args, Output { json: true }).await.unwrap();
        assert_eq!(fake.calls(), ["delete_topic t"]);
    }
}
