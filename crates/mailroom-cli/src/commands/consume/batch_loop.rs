//! The batch loop: one `poll/batch` per round, which also settles the round before it
//! (its acks and nacks ride on the poll, so a round is one request and one store
//! transaction); the last round, ended by `--count` or a failed handler, is settled
//! with `ack/batch` and `nack/batch`.

use std::collections::HashMap;

use mailroom_client::{BatchItemError, BatchNack, BatchPoll, Delivery, DeliveryId, NackOutcome};

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
    let options = args.nack_options();
    let mut settled = 0;
    let mut round = Round::default();
    loop {
        let unsettled = settled + round.len();
        let remaining = args.count.map(|count| count.saturating_sub(unsettled));
        if remaining == Some(0) {
            break;
        }
        let max = remaining.map_or(batch, |left| {
            batch.min(u32::try_from(left).unwrap_or(batch))
        });
        // A round waiting to be settled is settled now, not after a long poll: its
        // outcomes are printed as soon as they are known.
        let wait_ms = if args.follow && round.is_empty() {
            FOLLOW_LONG_POLL_MS
        } else {
            0
        };
        let request = BatchPoll {
            consumer: args.consumer.as_deref(),
            max,
            wait_ms,
            ack: &round.acks,
        };
        let nack = BatchNack {
            deliveries: &round.nacks,
            options: &options,
        };
        let polled = api
            .settle_then_poll_batch(&args.topic, &args.group, &request, &nack)
            .await?;
        settled += std::mem::take(&mut round).report(output, polled.acked, polled.nacked)?;
        if polled.deliveries.is_empty() {
            if args.follow {
                continue;
            }
            break;
        }
        let stopped_at;
        (round, stopped_at) = handle(args, polled.deliveries).await?;
        if let Some(delivery) = stopped_at {
            let failed = format!(
                "command failed on offset {} attempt {}; it and the rest of its round are left \
                 in flight (use --nack to nack)",
                delivery.offset, delivery.attempt
            );
            return Err(match settle_alone(api, args, output, round).await {
                Ok(_) => anyhow::anyhow!(failed),
                Err(error) => error.context(failed),
            });
        }
    }
    Ok(settled + settle_alone(api, args, output, round).await?)
}

/// The deliveries of a round that were handled, and how each is to be settled.
#[derive(Default)]
struct Round {
    /// In the order they came.
    deliveries: Vec<Delivery>,
    acks: Vec<DeliveryId>,
    nacks: Vec<DeliveryId>,
}

impl Round {
    fn len(&self) -> u64 {
        self.deliveries.len() as u64
    }

    fn is_empty(&self) -> bool {
        self.deliveries.is_empty()
    }

    /// Prints every delivery the server settled, in the order they came, from the
    /// results of its acks and nacks. Returns how many were settled.
    ///
    /// # Errors
    /// Any ack or nack the server refused (`not_owned`: a lease ran out, say), after
    /// the others are printed.
    fn report(
        self,
        output: Output,
        acked: Vec<Result<(), BatchItemError>>,
        nacked: Vec<Result<NackOutcome, BatchItemError>>,
    ) -> anyhow::Result<u64> {
        let mut outcomes: HashMap<DeliveryId, Result<&'static str, BatchItemError>> =
            HashMap::new();
        let acked = acked.into_iter().map(|result| result.map(|()| "acked"));
        outcomes.extend(self.acks.iter().copied().zip(acked));
        let nacked = nacked.into_iter().map(|result| result.map(nack_text));
        outcomes.extend(self.nacks.iter().copied().zip(nacked));
        let mut settled = 0;
        let mut refused = Vec::new();
        for delivery in &self.deliveries {
            match outcomes.remove(&delivery.id()) {
                None => {}
                Some(Ok(text)) => {
                    print_delivery(output, delivery, text);
                    settled += 1;
                }
                Some(Err(error)) => refused.push(format!("offset {}: {error}", delivery.offset)),
            }
        }
        if !refused.is_empty() {
            anyhow::bail!("the server refused to settle {}", refused.join("; "));
        }
        Ok(settled)
    }
}

/// Runs the handler on `deliveries` in order and sorts them into acks and nacks. Stops
/// at the first failure without `--nack` and returns that delivery beside the round
/// handled before it (it and the rest stay in flight).
async fn handle(
    args: &Args,
    deliveries: Vec<Delivery>,
) -> anyhow::Result<(Round, Option<Delivery>)> {
    let mut round = Round::default();
    for delivery in deliveries {
        let handled = match &args.exec {
            None => true,
            Some(command) => run_handler(command, &delivery.payload).await?,
        };
        if handled {
            round.acks.push(delivery.id());
        } else if args.nack {
            round.nacks.push(delivery.id());
        } else {
            return Ok((round, Some(delivery)));
        }
        round.deliveries.push(delivery);
    }
    Ok((round, None))
}

/// Settles `round` without a poll: one `ack/batch` and one `nack/batch`, each only if it
/// has deliveries. Returns how many were settled, as [`Round::report`].
async fn settle_alone(
    api: &impl Api,
    args: &Args,
    output: Output,
    round: Round,
) -> anyhow::Result<u64> {
    let mut acked = Vec::new();
    if !round.acks.is_empty() {
        acked = api.ack_batch(&args.topic, &args.group, &round.acks).await?;
    }
    let mut nacked = Vec::new();
    if !round.nacks.is_empty() {
        let options = args.nack_options();
        nacked = api
            .nack_batch(&args.topic, &args.group, &round.nacks, &options)
            .await?;
    }
    round.report(output, acked, nacked)
}

#[cfg(test)]
mod tests {
    use super::super::scripted_server::{args, id, scripted, BatchPollSeen};
    use super::*;

    /// A poll that does not wait.
    fn seen(consumer: Option<&str>, max: u32, acks: usize, nacks: usize) -> BatchPollSeen {
        let consumer = consumer.map(str::to_owned);
        BatchPollSeen {
            consumer,
            max,
            wait_ms: 0,
            acks,
            nacks,
        }
    }

    // Proves the batch loop polls at most --batch (and never past --count) as the given
    // consumer, settles each round with the next round's poll (the handled acked, the
    // failed nacked, nothing sent on its own), and stops when a poll comes back empty.
    #[tokio::test]
    async fn rounds_settle_with_the_next_poll() {
        let output = Output { json: true };
        let api = scripted(&["ok", "poison", "ok", "ok", "poison"]);
        let mut flags = args(Some("! grep -q poison"), true, None);
        flags.consumer = Some("w1".into());
        assert_eq!(consume_batches(&api, &flags, output, 2).await.unwrap(), 5);
        // The server nacks a request's nacks before its acks.
        assert_eq!(
            *api.settled.lock().unwrap(),
            vec![
                ("nack", id(1)),
                ("ack", id(0)),
                ("ack", id(2)),
                ("ack", id(3)),
                ("nack", id(4)),
            ]
        );
        let w1 = Some("w1");
        assert_eq!(
            *api.batch_polls.lock().unwrap(),
            vec![
                seen(w1, 2, 0, 0),
                seen(w1, 2, 1, 1),
                seen(w1, 2, 2, 0),
                seen(w1, 2, 0, 1)
            ]
        );
        assert_eq!(*api.settle_requests.lock().unwrap(), 0);
    }

    // Proves --count caps every poll and the last round, which no poll follows, is
    // settled on its own.
    #[tokio::test]
    async fn count_settles_the_last_round_alone() {
        let output = Output { json: true };
        let api = scripted(&["a", "b", "c", "d", "e"]);
        assert_eq!(
            consume_batches(&api, &args(None, false, Some(3)), output, 2)
                .await
                .unwrap(),
            3
        );
        assert_eq!(
            *api.batch_polls.lock().unwrap(),
            vec![seen(None, 2, 0, 0), seen(None, 1, 2, 0)]
        );
        assert_eq!(*api.settle_requests.lock().unwrap(), 1);
        assert_eq!(
            *api.settled.lock().unwrap(),
            vec![("ack", id(0)), ("ack", id(1)), ("ack", id(2))]
        );
    }

    // Proves --follow long-polls only with nothing to settle: a poll that settles a round
    // answers at once, so the round's outcomes are printed without waiting for messages.
    #[tokio::test]
    async fn follow_settles_before_it_waits() {
        let output = Output { json: true };
        let api = scripted(&["a", "b", "c"]);
        let mut flags = args(None, false, Some(3));
        flags.follow = true;
        assert_eq!(consume_batches(&api, &flags, output, 2).await.unwrap(), 3);
        let waiting = BatchPollSeen {
            wait_ms: FOLLOW_LONG_POLL_MS,
            ..seen(None, 2, 0, 0)
        };
        assert_eq!(
            *api.batch_polls.lock().unwrap(),
            vec![waiting, seen(None, 1, 2, 0)]
        );
    }

    // Proves the settlement rule one message at a time: a handler's exit 0 acks, a
    // failure nacks with --nack, and without --nack a failure stops the loop with that
    // delivery unsettled; --count stops early and an empty poll ends the run without
    // --follow.
    #[tokio::test]
    async fn settles_by_handler_outcome() {
        let output = Output { json: true };
        let api = scripted(&["ok", "poison", "ok"]);
        let flags = args(Some("! grep -q poison"), true, None);
        assert_eq!(consume_batches(&api, &flags, output, 1).await.unwrap(), 3);
        assert_eq!(
            *api.settled.lock().unwrap(),
            vec![("ack", id(0)), ("nack", id(1)), ("ack", id(2))]
        );

        let api = scripted(&["ok", "poison", "ok"]);
        let flags = args(Some("! grep -q poison"), false, None);
        assert!(consume_batches(&api, &flags, output, 1).await.is_err());
        assert_eq!(*api.settled.lock().unwrap(), vec![("ack", id(0))]);

        let api = scripted(&["a", "b", "c"]);
        let flags = args(None, false, Some(2));
        assert_eq!(consume_batches(&api, &flags, output, 1).await.unwrap(), 2);
        assert_eq!(
            *api.settled.lock().unwrap(),
            vec![("ack", id(0)), ("ack", id(1))]
        );
        assert_eq!(
            *api.batch_polls.lock().unwrap(),
            vec![seen(None, 1, 0, 0), seen(None, 1, 1, 0)]
        );
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
