//! The stream loop (`--stream`): one WebSocket pushes deliveries, up to `--window`
//! unsettled; each is handled as it arrives and settled on the same socket, and printed
//! once the server has answered its settlement.

use std::collections::HashMap;
use std::time::Duration;

use mailroom_client::{Client, Delivery, SettledOutcome, StreamEvent};

use super::handler::run_handler;
use super::{print_delivery, Args};
use crate::output::Output;

/// Without `--follow`, the stream ends once this long passes with every settlement
/// answered and no new delivery: the group has caught up, as far as one can tell
/// without polling.
pub const STREAM_IDLE_MS: u64 = 250;

/// The stream loop; returns how many messages were settled (acked or nacked).
pub async fn consume_stream(client: &Client, args: &Args, output: Output) -> anyhow::Result<u64> {
    let window = args.window.unwrap_or(1);
    let mut stream = client
        .consume_stream(&args.topic, &args.group, window, args.consumer.as_deref())
        .await?;
    let mut answering: HashMap<u64, Delivery> = HashMap::new();
    let mut settled = 0;
    let mut sent = 0;
    while args.count.is_none_or(|count| settled < count) {
        let event = if args.follow || !answering.is_empty() {
            stream.next().await?
        } else {
            let idle = Duration::from_millis(STREAM_IDLE_MS);
            match tokio::time::timeout(idle, stream.next()).await {
                Ok(event) => event?,
                Err(_) => break,
            }
        };
        match event {
            None => anyhow::bail!("the server closed the stream: {:?}", stream.closed()),
            Some(StreamEvent::Delivery(delivery)) => {
                if args.count.is_some_and(|count| sent >= count) {
                    continue;
                }
                let handled = match &args.exec {
                    None => true,
                    Some(command) => run_handler(command, &delivery.payload).await?,
                };
                let seq = if handled {
                    stream.ack(delivery.id()).await?
                } else if args.nack {
                    stream.nack(delivery.id(), &args.nack_options()).await?
                } else {
                    anyhow::bail!(
                        "command failed on offset {} attempt {}; left in flight (use --nack to nack)",
                        delivery.offset,
                        delivery.attempt
                    );
                };
                sent += 1;
                answering.insert(seq, delivery);
            }
            Some(StreamEvent::Settled(answer)) => {
                let Some(delivery) = answering.remove(&answer.seq) else {
                    anyhow::bail!("an answer to settlement {} never sent", answer.seq);
                };
                let outcome = answer.outcome.map_err(|refusal| {
                    anyhow::anyhow!(
                        "offset {} attempt {}: {}: {}",
                        delivery.offset,
                        delivery.attempt,
                        refusal.code,
                        refusal.message
                    )
                })?;
                print_delivery(output, &delivery, outcome_text(outcome));
                settled += 1;
            }
        }
    }
    stream.close().await?;
    Ok(settled)
}

fn outcome_text(outcome: SettledOutcome) -> &'static str {
    match outcome {
        SettledOutcome::Acked => "acked",
        SettledOutcome::Retry => "nacked (will retry)",
        SettledOutcome::Released => "released",
        SettledOutcome::DeadLettered => "nacked (dead-lettered)",
        SettledOutcome::Touched => "touched",
    }
}
