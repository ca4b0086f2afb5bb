//! `mailroom topic info`.

use crate::api::Api;
use crate::commands::topic::TopicArgs;
use crate::output::Output;

/// Prints the topic and one line per group.
pub async fn run(api: &impl Api, args: TopicArgs, output: Output) -> anyhow::Result<()> {
    let info = api.topic_info(&args.topic).await?;
    output.emit(serde_json::to_value(&info)?, || {
        let mut text = format!("{}\toffsets {}..{}", info.name, info.start, info.end);
        if let Some(window) = &info.idempotency {
            text.push_str(&format!(
                "\tidempotency window {} messages, {} ms",
                window.window_messages, window.window_ms
            ));
        }
        for group in &info.groups {
            text.push_str(&format!("\n  {}", crate::commands::group::describe(group)));
        }
        text
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::Fake;

    // Proves info reads the named topic.
    #[tokio::test]
    async fn info_reads_the_topic() {
        let fake = Fake::default();
        let args = TopicArgs { topic: "t".into() };
        run(&fake, args, Output { json: false }).await.unwrap();
        assert_eq!(fake.calls(), ["topic_info t"]);
    }
}
