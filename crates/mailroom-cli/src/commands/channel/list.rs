//! `mailroom channel list`.

use crate::api::Api;
use crate::output::Output;

/// Prints each live channel with its counters.
pub async fn run(api: &impl Api, output: Output) -> anyhow::Result<()> {
    for info in api.list_channels().await? {
        output.emit(serde_json::to_value(&info)?, || {
            format!(
                "{}\tsubscribers {}/{}\tpublished {}\tdropped {}",
                info.name, info.subscribers, info.max_subscribers, info.published, info.dropped
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
        run(&fake, Output { json: false }).await.unwrap();
        assert_eq!(fake.calls(), ["list_channels"]);
    }
}
