//! `mailroom group redrive`: put dead letters back for delivery to this group.

use serde_json::json;

use crate::api::Api;
use crate::commands::group::RangeArgs;
use crate::output::{counted, Output};

/// Redrives the dead letters in the range (all without one) and prints how many.
pub async fn run(api: &impl Api, args: RangeArgs, output: Output) -> anyhow::Result<()> {
    let count = api
        .redrive(&args.at.topic, &args.at.group, args.range())
        .await?;
    output.emit(json!({ "count": count }), || {
        format!("redrove {}", counted(count, "dead letter", "dead letters"))
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::group::GroupArgs;
    use crate::fake::Fake;

    // Proves redrive sends no range without flags, and a half-open one with them.
    #[tokio::test]
    async fn redrive_sends_the_range() {
        let fake = Fake::default();
        let range = |from, to| RangeArgs {
            at: GroupArgs {
                topic: "t".into(),
                group: "g".into(),
            },
            from,
            to,
        };
        let json = Output { json: true };
        run(&fake, range(None, None), json).await.unwrap();
        run(&fake, range(Some(2), Some(5)), json).await.unwrap();
        assert_eq!(fake.calls(), ["redrive t g None", "redrive t g Some(2..5)"]);
    }
}
