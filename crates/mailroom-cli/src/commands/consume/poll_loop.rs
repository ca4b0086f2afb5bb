//! The one-at-a-time loop: poll one delivery, handle it, settle it, repeat.

use mailroom_client::{BatchPoll, Delivery};

use super::handler::run_handler;
use super::{nack_text, print_delivery, Args, FOLLOW_LONG_POLL_MS};
use crate::api::Api;
use crate::output::Output;

/// The consume loop; returns how many messages were settled (acked or nacked).
pub async fn consume(api: &impl Api, args: &Args, output: Output) -> anyhow::Result<u64> {
    let mut settled = 0;
    while args.count.is_none_or(|count| settled < count) {
        let polled = match &args.consumer {
            None => api.poll(&args.topic, &args.group).await?,
            Some(consumer) => api.poll_as(&args.topic, &args.group, consumer).await?,
        };
        let delivery = match polled {
            Some(delivery) => delivery,
            None if args.follow => match wait_for_one(api, args).await? {
                Some(delivery) => delivery,
                None => continue,
            },
            None => break,
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

/// A long poll for one delivery: the server holds it until a message comes or
/// [`FOLLOW_LONG_POLL_MS`] pass (`None`), so an idle `--follow` costs one request per
/// wait instead of one per interval.
async fn wait_for_one(api: &impl Api, args: &Args) -> anyhow::Result<Option<Delivery>> {
    let request = BatchPoll {
        consumer: args.consumer.as_deref(),
        max: 1,
        wait_ms: FOLLOW_LONG_POLL_MS,
        ack: &[],
    };
    let deliveries = api.poll_batch(&args.topic, &args.group, &request).await?;
    Ok(deliveries.into_iter().next())
}

#[cfg(test)]
mod tests {
    use super::super::scripted_server::{args, id, scripted};
    use super::*;

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
