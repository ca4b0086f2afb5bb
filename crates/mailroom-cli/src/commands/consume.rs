//! `mailroom consume TOPIC GROUP`: poll, print, and ack each message. With `--exec`, the
//! message goes to a shell command's stdin instead: exit 0 acks it; a failure nacks it
//! with `--nack`, and otherwise stops, leaving the delivery in flight for a later poll.

use std::process::Stdio;
use std::time::Duration;

use bytes::Bytes;
use mailroom_client::{Delivery, NackOutcome};
use serde_json::json;
use tokio::io::AsyncWriteExt as _;

use crate::api::Api;
use crate::output::{merged, payload_fields, payload_text, Output};

/// How long `--follow` waits between polls that found nothing.
pub const FOLLOW_POLL_INTERVAL_MS: u64 = 250;

/// Flags of `consume`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The topic.
    pub topic: String,
    /// The consumer group.
    pub group: String,
    /// Stop after this many messages.
    #[arg(long)]
    pub count: Option<u64>,
    /// Keep polling when the group has caught up, instead of exiting.
    #[arg(long)]
    pub follow: bool,
    /// A shell command (`sh -c`) that gets each message on stdin; exit 0 acks.
    #[arg(long)]
    pub exec: Option<String>,
    /// When the --exec command fails, nack the message (retry or dead-letter) and go on.
    #[arg(long, requires = "exec")]
    pub nack: bool,
}

/// Runs `consume`; returns how many messages were settled (acked or nacked).
pub async fn run(api: &impl Api, args: Args, output: Output) -> anyhow::Result<()> {
    consume(api, &args, output).await.map(|_| ())
}

/// The consume loop; returns how many messages were settled (acked or nacked).
pub async fn consume(api: &impl Api, args: &Args, output: Output) -> anyhow::Result<u64> {
    let mut settled = 0;
    while args.count.is_none_or(|count| settled < count) {
        let Some(delivery) = api.poll(&args.topic, &args.group).await? else {
            if !args.follow {
                break;
            }
            tokio::time::sleep(Duration::from_millis(FOLLOW_POLL_INTERVAL_MS)).await;
            continue;
        };
        let handled = match &args.exec {
            None => true,
            Some(command) => run_handler(command, &delivery.payload).await?,
        };
        let outcome = if handled {
            api.ack(&args.topic, &args.group, delivery.id()).await?;
            "acked"
        } else if args.nack {
            match api.nack(&args.topic, &args.group, delivery.id()).await? {
                NackOutcome::Retry => "nacked (will retry)",
                NackOutcome::Released => "released",
                NackOutcome::DeadLettered => "nacked (dead-lettered)",
            }
        } else {
            anyhow::bail!(
                "command failed on offset {} attempt {}; left in flight (use --nack to nack)",
                delivery.offset,
                delivery.attempt
            );
        };
        print_delivery(output, &delivery, outcome);
        settled += 1;
    }
    Ok(settled)
}

fn print_delivery(output: Output, delivery: &Delivery, outcome: &str) {
    let value = merged(
        json!({ "offset": delivery.offset, "attempt": delivery.attempt, "outcome": outcome }),
        payload_fields(&delivery.payload),
    );
    output.emit(value, || {
        format!(
            "[{} #{}] {}\t{outcome}",
            delivery.offset,
            delivery.attempt,
            payload_text(&delivery.payload)
        )
    });
}

/// Runs `sh -c command` with the payload on stdin; `true` if it exited 0.
async fn run_handler(command: &str, payload: &Bytes) -> anyhow::Result<bool> {
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(Stdio::piped())
        .spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        // A command that exits without reading its input is its own business.
        let _ = stdin.write_all(payload).await;
    }
    Ok(child.wait().await?.success())
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use mailroom_client::{
        ChannelDelivery, ChannelInfo, ClientError, DeadLetter, DeliveryId, TopicInfo, TopicSummary,
    };

    use super::*;
    use crate::api::Messages;

    /// A scripted server: hands out `deliveries` in order and records every settlement.
    #[derive(Default)]
    struct Scripted {
        deliveries: Mutex<Vec<Delivery>>,
        settled: Mutex<Vec<(&'static str, DeliveryId)>>,
    }

    struct NoMessages;

    impl Messages for NoMessages {
        async fn next_message(&mut self) -> Option<Result<Bytes, ClientError>> {
            None
        }
    }

    fn unused<T>() -> Result<T, ClientError> {
        Err(ClientError::UnexpectedResponse(
            "not used by consume".into(),
        ))
    }

    impl Api for Scripted {
        type Subscription = NoMessages;

        async fn poll(&self, _: &str, _: &str) -> Result<Option<Delivery>, ClientError> {
            let mut deliveries = self.deliveries.lock().unwrap();
            Ok((!deliveries.is_empty()).then(|| deliveries.remove(0)))
        }
        async fn ack(&self, _: &str, _: &str, id: DeliveryId) -> Result<(), ClientError> {
            self.settled.lock().unwrap().push(("ack", id));
            Ok(())
        }
        async fn nack(&self, _: &str, _: &str, id: DeliveryId) -> Result<NackOutcome, ClientError> {
            self.settled.lock().unwrap().push(("nack", id));
            Ok(NackOutcome::Retry)
        }
        async fn create_topic(&self, _: &str) -> Result<bool, ClientError> {
            unused()
        }
        async fn list_topics(&self) -> Result<Vec<TopicSummary>, ClientError> {
            unused()
        }
        async fn topic_info(&self, _: &str) -> Result<TopicInfo, ClientError> {
            unused()
        }
        async fn publish(&self, _: &str, _: Bytes) -> Result<u64, ClientError> {
            unused()
        }
        async fn publish_batch(&self, _: &str, _: &[Bytes]) -> Result<Vec<u64>, ClientError> {
            unused()
        }
        async fn dead_letters(&self, _: &str, _: &str) -> Result<Vec<DeadLetter>, ClientError> {
            unused()
        }
        async fn create_channel(&self, _: &str, _: u64, _: u64) -> Result<bool, ClientError> {
            unused()
        }
        async fn list_channels(&self) -> Result<Vec<ChannelInfo>, ClientError> {
            unused()
        }
        async fn publish_channel(&self, _: &str, _: Bytes) -> Result<ChannelDelivery, ClientError> {
            unused()
        }
        async fn close_channel(&self, _: &str) -> Result<(), ClientError> {
            unused()
        }
        async fn subscribe(&self, _: &str) -> Result<NoMessages, ClientError> {
            unused()
        }
    }

    fn scripted(payloads: &[&'static str]) -> Scripted {
        let deliveries = payloads
            .iter()
            .enumerate()
            .map(|(n, payload)| Delivery {
                offset: n as u64,
                attempt: 1,
                payload: Bytes::from_static(payload.as_bytes()),
            })
            .collect();
        Scripted {
            deliveries: Mutex::new(deliveries),
            ..Scripted::default()
        }
    }

    fn args(exec: Option<&str>, nack: bool, count: Option<u64>) -> Args {
        Args {
            topic: "t".into(),
            group: "g".into(),
            count,
            follow: false,
            exec: exec.map(str::to_owned),
            nack,
        }
    }

    fn id(offset: u64) -> DeliveryId {
        DeliveryId { offset, attempt: 1 }
    }

    // Proves the settlement rule: a handler's exit 0 acks, a failure nacks with --nack,
    // and without --nack a failure stops the loop with that delivery unsettled; --count
    // stops early and an empty poll ends the run without --follow.
    #[tokio::test]
    async fn settles_by_handler_outcome() {
        let output = Output { json: true };
        let api = scripted(&["ok", "poison", "ok"]);
        let settled = consume(&api, &args(Some("! grep -q poison"), true, None), output)
            .await
            .unwrap();
        assert_eq!(settled, 3);
        assert_eq!(
            *api.settled.lock().unwrap(),
            vec![("ack", id(0)), ("nack", id(1)), ("ack", id(2))]
        );

        let api = scripted(&["ok", "poison", "ok"]);
        assert!(
            consume(&api, &args(Some("! grep -q poison"), false, None), output)
                .await
                .is_err()
        );
        assert_eq!(*api.settled.lock().unwrap(), vec![("ack", id(0))]);

        let api = scripted(&["a", "b", "c"]);
        assert_eq!(
            consume(&api, &args(None, false, Some(2)), output)
                .await
                .unwrap(),
            2
        );
        assert_eq!(
            *api.settled.lock().unwrap(),
            vec![("ack", id(0)), ("ack", id(1))]
        );
    }
}
