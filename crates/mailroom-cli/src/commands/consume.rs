//! `mailroom consume TOPIC GROUP`: poll, print, and ack each message. With `--exec`, the
//! message goes to a shell command's stdin instead: exit 0 acks it; a failure nacks it
//! with `--nack` (or releases or rejects it, per `--nack-kind`), and otherwise stops,
//! leaving the delivery in flight for a later poll.
//!
//! With `--batch N` each round trip carries up to N messages: one `poll/batch` (a long
//! poll under `--follow`), then one `ack/batch` for those handled and one `nack/batch` for
//! those that failed.

use std::collections::HashMap;
use std::process::Stdio;
use std::time::Duration;

use bytes::Bytes;
use mailroom_client::{
    BatchItemError, BatchPoll, Delivery, DeliveryId, NackKind, NackOptions, NackOutcome,
};
use serde_json::json;
use tokio::io::AsyncWriteExt as _;

use crate::api::Api;
use crate::commands::group_control::parse_kind;
use crate::output::{merged, payload_fields, payload_text, Output};

/// How long `--follow` waits between polls that found nothing.
pub const FOLLOW_POLL_INTERVAL_MS: u64 = 250;
/// How long `--batch` with `--follow` lets the server hold a poll for the next message.
pub const FOLLOW_LONG_POLL_MS: u64 = 10_000;
/// The largest `--batch`: the server's limit on one batch.
pub const BATCH_MAX: u32 = 65_536;

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
    /// How --nack gives a failed message back: nack (a failure: retried, or
    /// dead-lettered after the last attempt), release (not a failure) or reject
    /// (dead-lettered now).
    #[arg(long, value_parser = parse_kind, requires = "nack")]
    pub nack_kind: Option<NackKind>,
    /// Poll up to N messages per request (1 to 65,536) and settle them with one ack
    /// and one nack request; with --follow, wait for messages with a long poll.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(BATCH_MAX)))]
    pub batch: Option<u32>,
    /// Poll as this consumer identity (each consumer gets its own deliveries back).
    #[arg(long)]
    pub consumer: Option<String>,
}

impl Args {
    fn nack_options(&self) -> NackOptions {
        NackOptions {
            kind: self.nack_kind.unwrap_or_default(),
            ..NackOptions::default()
        }
    }
}

/// Runs `consume`.
pub async fn run(api: &impl Api, args: Args, output: Output) -> anyhow::Result<()> {
    match args.batch {
        None => consume(api, &args, output).await.map(|_| ()),
        Some(batch) => consume_batches(api, &args, output, batch).await.map(|_| ()),
    }
}

/// The consume loop; returns how many messages were settled (acked or nacked).
pub async fn consume(api: &impl Api, args: &Args, output: Output) -> anyhow::Result<u64> {
    let mut settled = 0;
    while args.count.is_none_or(|count| settled < count) {
        let polled = match &args.consumer {
            None => api.poll(&args.topic, &args.group).await?,
            Some(consumer) => api.poll_as(&args.topic, &args.group, consumer).await?,
        };
        let Some(delivery) = polled else {
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
            let options = args.nack_options();
            let id = delivery.id();
            nack_text(
                api.nack_with(&args.topic, &args.group, id, &options)
                    .await?,
            )
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

fn nack_text(outcome: NackOutcome) -> &'static str {
    match outcome {
        NackOutcome::Retry => "nacked (will retry)",
        NackOutcome::Released => "released",
        NackOutcome::DeadLettered => "nacked (dead-lettered)",
    }
}

/// The batch loop; returns how many messages were settled (acked or nacked).
pub async fn consume_batches(
    api: &impl Api,
    args: &Args,
    output: Output,
    batch: u32,
) -> anyhow::Result<u64> {
    let mut settled = 0;
    loop {
        let remaining = args.count.map(|count| count.saturating_sub(settled));
        if remaining == Some(0) {
            break;
        }
        let max = remaining.map_or(batch, |left| {
            batch.min(u32::try_from(left).unwrap_or(batch))
        });
        let request = BatchPoll {
            consumer: args.consumer.as_deref(),
            max,
            wait_ms: if args.follow { FOLLOW_LONG_POLL_MS } else { 0 },
            ack: &[],
        };
        let deliveries = api.poll_batch(&args.topic, &args.group, &request).await?;
        if deliveries.is_empty() {
            if args.follow {
                continue;
            }
            break;
        }
        settled += settle_batch(api, args, output, &deliveries).await?;
    }
    Ok(settled)
}

/// Handles a batch's deliveries in order, then acks and nacks them in one request each
/// and prints every settled delivery, in order. Returns how many were settled.
///
/// # Errors
/// A failed handler without `--nack` (the deliveries from that one on stay in flight,
/// after the earlier ones are settled), a failed request, or any item the server
/// refused (`not_owned`: a lease ran out, say).
async fn settle_batch(
    api: &impl Api,
    args: &Args,
    output: Output,
    deliveries: &[Delivery],
) -> anyhow::Result<u64> {
    let mut to_ack = Vec::new();
    let mut to_nack = Vec::new();
    let mut stopped_at = None;
    for delivery in deliveries {
        let handled = match &args.exec {
            None => true,
            Some(command) => run_handler(command, &delivery.payload).await?,
        };
        if handled {
            to_ack.push(delivery.id());
        } else if args.nack {
            to_nack.push(delivery.id());
        } else {
            stopped_at = Some(delivery);
            break;
        }
    }
    let mut outcomes: HashMap<DeliveryId, Result<&'static str, BatchItemError>> = HashMap::new();
    if !to_ack.is_empty() {
        let results = api.ack_batch(&args.topic, &args.group, &to_ack).await?;
        let texts = results.into_iter().map(|result| result.map(|()| "acked"));
        outcomes.extend(to_ack.iter().copied().zip(texts));
    }
    if !to_nack.is_empty() {
        let options = args.nack_options();
        let results = api
            .nack_batch(&args.topic, &args.group, &to_nack, &options)
            .await?;
        let texts = results.into_iter().map(|result| result.map(nack_text));
        outcomes.extend(to_nack.iter().copied().zip(texts));
    }
    let mut settled = 0;
    let mut refused = Vec::new();
    for delivery in deliveries {
        match outcomes.get(&delivery.id()) {
            None => {}
            Some(Ok(text)) => {
                print_delivery(output, delivery, text);
                settled += 1;
            }
            Some(Err(error)) => refused.push(format!("offset {}: {error}", delivery.offset)),
        }
    }
    if let Some(delivery) = stopped_at {
        anyhow::bail!(
            "command failed on offset {} attempt {}; it and the rest of its batch are left \
             in flight (use --nack to nack)",
            delivery.offset,
            delivery.attempt
        );
    }
    if !refused.is_empty() {
        anyhow::bail!("the server refused to settle {}", refused.join("; "));
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

    /// A scripted server: hands out `deliveries` in order, records every settlement
    /// (with the nack kind), and records the size of every batch poll.
    #[derive(Default)]
    struct Scripted {
        deliveries: Mutex<Vec<Delivery>>,
        settled: Mutex<Vec<(&'static str, DeliveryId)>>,
        batch_polls: Mutex<Vec<(Option<String>, u32)>>,
        /// Offsets whose ack the server refuses (as if their lease ran out).
        refuse: Vec<u64>,
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

    fn kind_name(kind: NackKind) -> &'static str {
        match kind {
            NackKind::Nack => "nack",
            NackKind::Release => "release",
            NackKind::Reject => "reject",
        }
    }

    impl Scripted {
        fn next(&self) -> Option<Delivery> {
            let mut deliveries = self.deliveries.lock().unwrap();
            (!deliveries.is_empty()).then(|| deliveries.remove(0))
        }

        fn ack_one(&self, id: DeliveryId) -> Result<(), BatchItemError> {
            if self.refuse.contains(&id.offset) {
                return Err(BatchItemError {
                    code: "not_owned".into(),
                    message: "lease ran out".into(),
                });
            }
            self.settled.lock().unwrap().push(("ack", id));
            Ok(())
        }
    }

    impl Api for Scripted {
        type Subscription = NoMessages;

        async fn poll(&self, _: &str, _: &str) -> Result<Option<Delivery>, ClientError> {
            Ok(self.next())
        }
        async fn poll_as(
            &self,
            _: &str,
            _: &str,
            _: &str,
        ) -> Result<Option<Delivery>, ClientError> {
            Ok(self.next())
        }
        async fn poll_batch(
            &self,
            _: &str,
            _: &str,
            request: &BatchPoll<'_>,
        ) -> Result<Vec<Delivery>, ClientError> {
            let consumer = request.consumer.map(str::to_owned);
            self.batch_polls
                .lock()
                .unwrap()
                .push((consumer, request.max));
            Ok((0..request.max).map_while(|_| self.next()).collect())
        }
        async fn ack(&self, _: &str, _: &str, id: DeliveryId) -> Result<(), ClientError> {
            self.settled.lock().unwrap().push(("ack", id));
            Ok(())
        }
        async fn ack_batch(
            &self,
            _: &str,
            _: &str,
            ids: &[DeliveryId],
        ) -> Result<Vec<Result<(), BatchItemError>>, ClientError> {
            Ok(ids.iter().map(|id| self.ack_one(*id)).collect())
        }
        async fn nack_with(
            &self,
            _: &str,
            _: &str,
            id: DeliveryId,
            options: &NackOptions,
        ) -> Result<NackOutcome, ClientError> {
            self.settled
                .lock()
                .unwrap()
                .push((kind_name(options.kind), id));
            Ok(NackOutcome::Retry)
        }
        async fn nack_batch(
            &self,
            _: &str,
            _: &str,
            ids: &[DeliveryId],
            options: &NackOptions,
        ) -> Result<Vec<Result<NackOutcome, BatchItemError>>, ClientError> {
            let mut settled = self.settled.lock().unwrap();
            settled.extend(ids.iter().map(|id| (kind_name(options.kind), *id)));
            Ok(ids.iter().map(|_| Ok(NackOutcome::DeadLettered)).collect())
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
        async fn delete_topic(&self, _: &str) -> Result<(), ClientError> {
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
            nack_kind: None,
            batch: None,
            consumer: None,
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

    // Proves --nack-kind picks how a failed message is given back, in both loops.
    #[tokio::test]
    async fn nack_kind_is_sent() {
        let output = Output { json: true };
        let mut release = args(Some("false"), true, None);
        release.nack_kind = Some(NackKind::Release);
        let api = scripted(&["x"]);
        consume(&api, &release, output).await.unwrap();
        assert_eq!(*api.settled.lock().unwrap(), vec![("release", id(0))]);

        let mut reject = args(Some("false"), true, None);
        reject.nack_kind = Some(NackKind::Reject);
        let api = scripted(&["x", "y"]);
        assert_eq!(consume_batches(&api, &reject, output, 8).await.unwrap(), 2);
        assert_eq!(
            *api.settled.lock().unwrap(),
            vec![("reject", id(0)), ("reject", id(1))]
        );
    }

    // Proves the batch loop polls at most --batch (and never past --count) as the given
    // consumer, acks the handled and nacks the failed ones of each batch, and stops when
    // a poll comes back empty.
    #[tokio::test]
    async fn batches_split_acks_and_nacks() {
        let output = Output { json: true };
        let api = scripted(&["ok", "poison", "ok", "ok", "poison"]);
        let mut flags = args(Some("! grep -q poison"), true, None);
        flags.consumer = Some("w1".into());
        assert_eq!(consume_batches(&api, &flags, output, 2).await.unwrap(), 5);
        assert_eq!(
            *api.settled.lock().unwrap(),
            vec![
                ("ack", id(0)),
                ("nack", id(1)),
                ("ack", id(2)),
                ("ack", id(3)),
                ("nack", id(4)),
            ]
        );
        let polls = api.batch_polls.lock().unwrap().clone();
        let w1 = Some("w1".to_owned());
        assert_eq!(
            polls,
            vec![(w1.clone(), 2), (w1.clone(), 2), (w1.clone(), 2), (w1, 2)]
        );

        let api = scripted(&["a", "b", "c", "d", "e"]);
        assert_eq!(
            consume_batches(&api, &args(None, false, Some(3)), output, 2)
                .await
                .unwrap(),
            3
        );
        let sizes: Vec<u32> = api
            .batch_polls
            .lock()
            .unwrap()
            .iter()
            .map(|p| p.1)
            .collect();
        assert_eq!(sizes, vec![2, 1]);
    }

    // Proves a failed handler without --nack settles the batch's earlier deliveries and
    // leaves it and the rest in flight, and an item the server refuses fails the run.
    #[tokio::test]
    async fn batch_failures_stop_the_run() {
        let output = Output { json: true };
        let api = scripted(&["ok", "poison", "ok"]);
        let flags = args(Some("! grep -q poison"), false, None);
        assert!(consume_batches(&api, &flags, output, 3).await.is_err());
        assert_eq!(*api.settled.lock().unwrap(), vec![("ack", id(0))]);

        let mut api = scripted(&["a", "b"]);
        api.refuse = vec![0];
        let error = consume_batches(&api, &args(None, false, None), output, 2)
            .await
            .unwrap_err();
        assert!(error.to_string().contains("offset 0"), "{error}");
        assert_eq!(*api.settled.lock().unwrap(), vec![("ack", id(1))]);
    }
}
