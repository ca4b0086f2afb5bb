//! `mailroom group info`.

use crate::api::Api;
use crate::commands::group::{describe_detail, GroupArgs};
use crate::output::Output;

/// Prints the group's full state.
pub async fn run(api: &impl Api, args: GroupArgs, output: Output) -> anyhow::Result<()> {
    let detail = api.group_detail(&args.topic, &args.group).await?;
    output.emit(serde_json::to_value(&detail)?, || describe_detail(&detail));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::Fake;

    // Proves info reads the named group's full state, and that the text shows its
    // settings, counters, deliveries in flight and dead letters' reasons.
    #[tokio::test]
    async fn info_reads_and_describes_the_detail() {
        let fake = Fake::default();
        let args = GroupArgs {
            topic: "t".into(),
            group: "g".into(),
        };
        run(&fake, args, Output { json: true }).await.unwrap();
        assert_eq!(fake.calls(), ["group_detail t g"]);
        let text = describe_detail(&Fake::detail());
        assert!(
            text.starts_with("g\tposition 4\tlag 2\tin flight: offset 4 attempt 2\t"),
            "{text}"
        );
        assert!(text.contains("max in flight 2\tlease 500 ms"), "{text}");
        assert!(
            text.contains(
                "\nin flight: offset 5 attempt 1\tconsumer worker-1\t\
                 lease until 1970-01-01T00:00:01.000Z"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "dead letter: offset 1 after 3 attempts at 1970-01-01T00:00:00.009Z: boom"
            ),
            "{text}"
        );
    }
}
