//! `mailroom dead-letters TOPIC GROUP`.

use serde_json::json;

use crate::api::Api;
use crate::output::{merged, payload_fields, payload_text, Output};

/// Flags of `dead-letters`: the group whose dead letters to list.
pub use crate::commands::group::GroupArgs as Args;

/// Prints one line per dead letter, oldest first.
pub async fn run(api: &impl Api, args: Args, output: Output) -> anyhow::Result<()> {
    for letter in api.dead_letters(&args.topic, &args.group).await? {
        let value = merged(
            json!({ "offset": letter.offset, "attempts": letter.attempts }),
            payload_fields(&letter.payload),
        );
        output.emit(value, || {
            format!(
                "offset {} after {} attempts: {}",
                letter.offset,
                letter.attempts,
                payload_text(&letter.payload)
            )
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::Fake;

    // Proves the listing reads the named group's dead letters.
    #[tokio::test]
    async fn lists_the_groups_dead_letters() {
        let fake = Fake::default();
        let args = Args {
            topic: "t".into(),
            group: "g".into(),
        };
        run(&fake, args, Output { json: true }).await.unwrap();
        assert_eq!(fake.calls(), ["dead_letters t g"]);
    }
}
