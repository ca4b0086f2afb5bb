//! `mailroom group touch`: extend the lease of one delivery.

use serde_json::json;

use crate::api::Api;
use crate::commands::group::DeliveryArgs;
use crate::output::Output;

/// Extends the delivery's lease.
pub async fn run(api: &impl Api, args: DeliveryArgs, output: Output) -> anyhow::Result<()> {
    api.touch(&args.at.topic, &args.at.group, args.id()).await?;
    output.emit(json!({ "outcome": "touched" }), || "touched".into());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::group::GroupArgs;
    use crate::fake::Fake;

    // Proves touch names the exact delivery, offset and attempt.
    #[tokio::test]
    async fn touch_names_the_delivery() {
        let fake = Fake::default();
        let args = DeliveryArgs {
            at: GroupArgs {
                topic: "t".into(),
                group: "g".into(),
            },
            offset: 3,
            attempt: 9,
        };
        run(&fake, args, Output { json: false }).await.unwrap();
        assert_eq!(fake.calls(), ["touch t g 3/9"]);
    }
}
