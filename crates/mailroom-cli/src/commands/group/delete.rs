//! `mailroom group delete`.

use serde_json::json;

use crate::api::Api;
use crate::commands::group::GroupArgs;
use crate::output::Output;

/// Deletes the group; the topic and its messages stay.
pub async fn run(api: &impl Api, args: GroupArgs, output: Output) -> anyhow::Result<()> {
    let GroupArgs { topic, group } = args;
    api.delete_group(&topic, &group).await?;
    output.emit(
        json!({ "topic": topic, "group": group, "deleted": true }),
        || format!("deleted group {group} on {topic}"),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::Fake;

    // Proves delete deletes the named group and nothing else.
    #[tokio::test]
    async fn delete_names_the_group() {
        let fake = Fake::default();
        let args = GroupArgs {
            topic: "t".into(),
            group: "g".into(),
        };
        run(&fake, args, Output { json: false }).await.unwrap();
        assert_eq!(fake.calls(), ["delete_group t g"]);
    }
}
