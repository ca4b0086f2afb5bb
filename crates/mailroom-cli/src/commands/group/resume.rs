//! `mailroom group resume`: end a group's pause.

use serde_json::json;

use crate::api::Api;
use crate::commands::group::GroupArgs;
use crate::output::Output;

/// Resumes the group and says whether it was paused.
pub async fn run(api: &impl Api, args: GroupArgs, output: Output) -> anyhow::Result<()> {
    let pause = api.resume(&args.topic, &args.group).await?;
    output.emit(json!(pause), || {
        if pause.changed {
            "resumed".into()
        } else {
            "was not paused".into()
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::Fake;

    // Proves resume names the group.
    #[tokio::test]
    async fn resume_names_the_group() {
        let fake = Fake::default();
        let args = GroupArgs {
            topic: "t".into(),
            group: "g".into(),
        };
        run(&fake, args, Output { json: true }).await.unwrap();
        assert_eq!(fake.calls(), ["resume t g"]);
    }
}
