//! `mailroom topic list`.

use crate::api::Api;
use crate::output::Output;

/// Prints each topic with its offsets and groups.
pub async fn run(api: &impl Api, output: Output) -> anyhow::Result<()> {
    let topics = api.list_topics().await?;
    for topic in topics {
        let value = serde_json::to_value(&topic)?;
        output.emit(value, || {
            format!(
                "{}\toffsets {}..{}\tgroups: {}",
                topic.name,
                topic.start,
                topic.end,
                if topic.groups.is_empty() {
                    "none".to_owned()
                } else {
                    topic.groups.join(", ")
                }
            )
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::Fake;

    // Proves list makes one listing call.
    #[tokio::test]
    async fn list_lists() {
        let fake = Fake::default();
        run(&fake, Output { json: true }).await.unwrap();
        assert_eq!(fake.calls(), ["list_topics"]);
    }
}
