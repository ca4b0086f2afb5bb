//! `mailroom group touch`: extend the lease of one delivery.

use mailroom_client::DeliveryId;
use serde_json::json;

use crate::api::Api;
use crate::output::Output;

/// Flags of `group touch`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The topic.
    #[arg(value_parser = crate::names::topic)]
    topic: String,
    /// The group.
    #[arg(value_parser = crate::names::group)]
    group: String,
    /// The delivery's offset.
    offset: u64,
    /// The delivery's attempt.
    attempt: u32,
}

/// Extends the delivery's lease.
pub async fn run(api: &impl Api, args: Args, output: Output) -> anyhow::Result<()> {
    let id = DeliveryId {
        offset: args.offset,
        attempt: args.attempt,
    };
    api.touch(&args.topic, &args.group, id).await?;
    output.emit(json!({ "outcome": "touched" }), || "touched".into());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::Fake;

    // Proves touch names the exact delivery, offset and attempt.
    #[tokio::test]
    async fn touch_names_the_delivery() {
        let fake = Fake::default();
        let args = Args {
            topic: "t".into(),
            group: "g".into(),
            offset: 3,
            attempt: 9,
        };
        run(&fake, args, Output { json: false }).await.unwrap();
        assert_eq!(fake.calls(), ["touch t g 3/9"]);
    }
}
