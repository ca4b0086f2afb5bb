//! `mailroom topic recover`.

use serde_json::json;

use crate::api::Api;
use crate::commands::topic::TopicArgs;
use crate::output::Output;

/// Asks the server to reopen the failed topic from what is durable.
pub async fn run(api: &impl Api, args: TopicArgs, output: Output) -> anyhow::Result<()> {
    let topic = args.topic;
    let recovered = api.recover_topic(&topic).await?;
    output.emit(json!({ "topic": topic, "recovered": recovered }), || {
        if recovered {
            format!("topic {topic} serves again")
        } else {
            format!("topic {topic} was serving: nothing to recover")
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::Fake;

    // Proves recover asks for the named topic.
    #[tokio::test]
    async fn recover_names_the_topic() {
        let fake = Fake::default();
        let args = TopicArgs { topic: "t".into() };
        run(&fake, args, Output { json: true }).await.unwrap();
        assert_eq!(fake.calls(), ["recover_topic t"]);
    }
}
