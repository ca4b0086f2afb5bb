//! `mailroom group poll`: one delivery (or a batch of them) without acking it.

use mailroom_client::{BatchPoll, Delivery};
use serde_json::json;

use crate::api::Api;
use crate::commands::group::GroupArgs;
use crate::metadata;
use crate::output::{merged, payload_fields, payload_text, Output};

/// Flags of `group poll`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    at: GroupArgs,
    /// The consumer identity; a repeated poll gives it back its own deliveries.
    #[arg(long)]
    consumer: Option<String>,
    /// Poll up to this many deliveries at once (1 to 65,536; the group's
    /// max_in_flight bounds how many it hands out).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    max: Option<u32>,
}

/// Polls once, or once in a batch with `--max`, and prints what came.
pub async fn run(api: &impl Api, args: Args, output: Output) -> anyhow::Result<()> {
    let Args {
        at: GroupArgs { topic, group },
        consumer,
        max,
    } = args;
    let deliveries = match max {
        Some(max) => {
            let request = BatchPoll {
                consumer: consumer.as_deref(),
                max,
                wait_ms: 0,
                ack: &[],
            };
            api.poll_batch(&topic, &group, &request).await?
        }
        None => {
            let delivery = match &consumer {
                Some(consumer) => api.poll_as(&topic, &group, consumer).await?,
                None => api.poll(&topic, &group).await?,
            };
            delivery.into_iter().collect()
        }
    };
    if deliveries.is_empty() {
        output.emit(json!(null), || "nothing waiting".into());
    }
    for delivery in &deliveries {
        print_delivery(output, delivery);
    }
    Ok(())
}

fn print_delivery(output: Output, delivery: &Delivery) {
    output.emit(
        merged(
            merged(
                json!({ "offset": delivery.offset, "attempt": delivery.attempt }),
                payload_fields(&delivery.payload),
            ),
            metadata::fields(delivery),
        ),
        || {
            format!(
                "offset {} attempt {}: {}{}",
                delivery.offset,
                delivery.attempt,
                payload_text(&delivery.payload),
                metadata::text(delivery.key.as_deref(), &delivery.headers)
            )
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::Fake;

    fn args(consumer: Option<&str>, max: Option<u32>) -> Args {
        Args {
            at: GroupArgs {
                topic: "t".into(),
                group: "g".into(),
            },
            consumer: consumer.map(str::to_owned),
            max,
        }
    }

    // Proves each form of poll makes the one call it names: anonymous, as a consumer,
    // and a batch (with its consumer and size, and no wait), and never acks.
    #[tokio::test]
    async fn each_form_makes_its_call_and_acks_nothing() {
        let fake = Fake::with_deliveries(3);
        let json = Output { json: true };
        run(&fake, args(None, None), json).await.unwrap();
        run(&fake, args(Some("w1"), None), json).await.unwrap();
        run(&fake, args(Some("w2"), Some(8)), json).await.unwrap();
        run(&fake, args(None, Some(1)), json).await.unwrap();
        assert_eq!(
            fake.calls(),
            [
                "poll t g",
                "poll_as t g w1",
                "poll_batch t g consumer Some(\"w2\") max 8 wait 0 acks 0 nacks 0",
                "poll_batch t g consumer None max 1 wait 0 acks 0 nacks 0",
            ]
        );
    }
}
