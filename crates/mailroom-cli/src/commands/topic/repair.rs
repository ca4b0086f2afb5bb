//! `mailroom topic repair` (through a running server; `mailroom repair` works offline).

use serde_json::json;

use crate::api::Api;
use crate::commands::topic::TopicArgs;
use crate::output::Output;

/// Asks the server to repair the damaged topic, and prints what was moved where.
pub async fn run(api: &impl Api, args: TopicArgs, output: Output) -> anyhow::Result<()> {
    let report = api.repair_topic(&args.topic).await?;
    let body = json!({
        "topic": report.topic, "repaired": report.repaired,
        "damage": report.damage, "actions": report.actions,
    });
    output.emit(body, || {
        if report.repaired {
            format!(
                "repaired topic {}:\n  {}",
                report.topic,
                report.actions.join("\n  ")
            )
        } else {
            format!("topic {} is not damaged: nothing to repair", report.topic)
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::Fake;

    // Proves repair asks for the named topic.
    #[tokio::test]
    async fn repair_names_the_topic() {
        let fake = Fake::default();
        let args = TopicArgs { topic: "t".into() };
        run(&fake, args, Output { json: false }).await.unwrap();
        assert_eq!(fake.calls(), ["repair_topic t"]);
    }
}
