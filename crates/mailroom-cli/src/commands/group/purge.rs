//! `mailroom group purge`: delete dead letters.

use serde_json::json;

use crate::api::Api;
use crate::commands::group::RangeArgs;
use crate::output::{counted, Output};

/// Purges the dead letters in the range (all without one) and prints how many.
pub async fn run(api: &impl Api, args: RangeArgs, output: Output) -> anyhow::Result<()> {
    let count = api
        .purge(&args.at.topic, &args.at.group, args.range())
        .await?;
    output.emit(json!({ "count": count }), || {
        format!("purged {}", counted(count, "dead letter", "dead letters"))
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::group::{GroupArgs, RANGE_OFFSET_MAX};
    use crate::fake::Fake;

    // Proves purge sends the range, an open end as the largest accepted offset.
    #[tokio::test]
    async fn purge_sends_the_range() {
        let fake = Fake::default();
        let args = RangeArgs {
            at: GroupArgs {
                topic: "t".into(),
                group: "g".into(),
            },
            from: Some(4),
            to: None,
        };
        run(&fake, args, Output { json: false }).await.unwrap();
        assert_eq!(
            fake.calls(),
            [format!("purge t g Some(4..{RANGE_OFFSET_MAX})")]
        );
    }
}
