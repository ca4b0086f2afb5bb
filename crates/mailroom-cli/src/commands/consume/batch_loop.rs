//! The batch loop: one `poll/batch` per round, then one `ack/batch` and one
//! `nack/batch` for the round's deliveries.

use std::collections::HashMap;

use mailroom_client::{BatchItemError, BatchPoll, Delivery, DeliveryId};

use super::handler::run_handler;
use super::{nack_text, print_delivery, Args, FOLLOW_LONG_POLL_MS};
use crate::api::Api;
use crate::output::Output;

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

#[cfg(test)]
mod tests {
    use super::super::scripted_server::{args, id, scripted};
    use super::*;

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
