//! `mailroom group poll|nack|touch|redrive|purge`: consumer identities, nack kinds,
//! leases and dead-letter redrive, one call each, for scripts and operators.

use mailroom_client::{
    Backoff, BatchPoll, Client, Delivery, DeliveryId, GroupDetail, NackKind, NackOptions,
};
use serde_json::json;

use crate::commands::group::describe;
use crate::output::{merged, payload_fields, payload_text, Output};

/// The subcommands beyond create and info.
#[derive(Debug, clap::Subcommand)]
pub enum ControlCommand {
    /// Poll once (as `--consumer`, if given) and print the delivery without acking it;
    /// with `--max N`, up to N deliveries in one batch poll, one result each.
    Poll {
        /// The topic.
        #[arg(value_parser = crate::names::topic)]
        topic: String,
        /// The group.
        #[arg(value_parser = crate::names::group)]
        group: String,
        /// The consumer identity; a repeated poll gives it back its own deliveries.
        #[arg(long)]
        consumer: Option<String>,
        /// Poll up to this many deliveries at once (1 to 65,536; the group's
        /// max_in_flight bounds how many it hands out).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=65_536))]
        max: Option<u32>,
    },
    /// Nack, release or reject one delivery.
    Nack {
        /// The topic.
        #[arg(value_parser = crate::names::topic)]
        topic: String,
        /// The group.
        #[arg(value_parser = crate::names::group)]
        group: String,
        /// The delivery's offset.
        offset: u64,
        /// The delivery's attempt.
        attempt: u32,
        /// nack (a failure), release (not a failure) or reject (dead-letter now).
        #[arg(long, default_value = "nack", value_parser = parse_kind)]
        kind: NackKind,
        /// Do not redeliver before this many milliseconds.
        #[arg(long)]
        delay_ms: Option<u64>,
        /// Why; kept with the dead letter.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Extend the lease of one delivery.
    Touch {
        /// The topic.
        #[arg(value_parser = crate::names::topic)]
        topic: String,
        /// The group.
        #[arg(value_parser = crate::names::group)]
        group: String,
        /// The delivery's offset.
        offset: u64,
        /// The delivery's attempt.
        attempt: u32,
    },
    /// Put dead letters back for delivery to this group only.
    Redrive(RangeArgs),
    /// Delete dead letters.
    Purge(RangeArgs),
}

/// A group and an optional half-open offset range.
#[derive(Debug, clap::Args)]
pub struct RangeArgs {
    /// The topic.
    #[arg(value_parser = crate::names::topic)]
    topic: String,
    /// The group.
    #[arg(value_parser = crate::names::group)]
    group: String,
    /// The lowest offset included (default 0).
    #[arg(long, value_parser = clap::value_parser!(u64).range(..=RANGE_OFFSET_MAX))]
    from: Option<u64>,
    /// The first offset excluded (default: no end).
    #[arg(long, value_parser = clap::value_parser!(u64).range(..=RANGE_OFFSET_MAX))]
    to: Option<u64>,
}

/// The largest offset a redrive or purge range may name. The server refuses anything
/// above the largest signed 64-bit integer (what JSON clients commonly hold), so "no
/// end" is sent as this offset, which no log reaches.
pub const RANGE_OFFSET_MAX: u64 = i64::MAX as u64;

impl RangeArgs {
    fn range(&self) -> Option<std::ops::Range<u64>> {
        if self.from.is_none() && self.to.is_none() {
            return None;
        }
        Some(self.from.unwrap_or(0)..self.to.unwrap_or(RANGE_OFFSET_MAX))
    }
}

/// Parses `fixed:MS` or `exp:BASE_MS:CAP_MS`.
pub fn parse_backoff(text: &str) -> Result<Backoff, String> {
    let number = |part: &str| {
        part.parse::<u64>()
            .map_err(|_| format!("{text:?}: {part:?} is not a number of milliseconds"))
    };
    match text.split(':').collect::<Vec<_>>().as_slice() {
        ["fixed", delay] => Ok(Backoff::Fixed {
            delay_ms: number(delay)?,
        }),
        ["exp", base, cap] => Ok(Backoff::Exponential {
            base_ms: number(base)?,
            cap_ms: number(cap)?,
        }),
        _ => Err(format!("{text:?}: expected fixed:MS or exp:BASE_MS:CAP_MS")),
    }
}

/// Parses `nack`, `release` or `reject`.
pub fn parse_kind(text: &str) -> Result<NackKind, String> {
    match text {
        "nack" => Ok(NackKind::Nack),
        "release" => Ok(NackKind::Release),
        "reject" => Ok(NackKind::Reject),
        _ => Err(format!("{text:?}: expected nack, release or reject")),
    }
}

/// Lines describing a group in full.
pub fn describe_detail(detail: &GroupDetail) -> String {
    let mut text = describe(&detail.info);
    let counters = &detail.counters;
    text.push_str(&format!(
        "\nmax in flight {}\tlease {}\tbackoff {}\nredeliveries {}\treleases {}\t\
         expired leases {}\tredrives {}\tpurged {}",
        detail.max_in_flight,
        detail
            .lease_ms
            .map_or("none".into(), |ms| format!("{ms} ms")),
        detail.backoff.map_or("none".into(), |b| format!("{b:?}")),
        counters.redeliveries,
        counters.releases,
        counters.expired_leases,
        counters.redrives,
        counters.purged,
    ));
    for id in &detail.deliveries {
        text.push_str(&format!(
            "\nin flight: offset {} attempt {}",
            id.offset, id.attempt
        ));
    }
    for note in &detail.dead_letter_notes {
        text.push_str(&format!(
            "\ndead letter: offset {} after {} attempts at {} ms: {}",
            note.offset,
            note.attempts,
            note.at_ms,
            note.reason.as_deref().unwrap_or("(no reason)")
        ));
    }
    text
}

fn print_delivery(output: Output, delivery: &Delivery) {
    output.emit(
        merged(
            json!({ "offset": delivery.offset, "attempt": delivery.attempt }),
            payload_fields(&delivery.payload),
        ),
        || {
            format!(
                "offset {} attempt {}: {}",
                delivery.offset,
                delivery.attempt,
                payload_text(&delivery.payload)
            )
        },
    );
}

/// Runs one of the subcommands.
pub async fn run(client: &Client, command: ControlCommand, output: Output) -> anyhow::Result<()> {
    match command {
        ControlCommand::Poll {
            topic,
            group,
            consumer,
            max: Some(max),
        } => {
            let request = BatchPoll {
                consumer: consumer.as_deref(),
                max,
                wait_ms: 0,
                ack: &[],
            };
            let deliveries = client.poll_batch(&topic, &group, &request).await?;
            if deliveries.is_empty() {
                output.emit(json!(null), || "nothing waiting".into());
            }
            for delivery in &deliveries {
                print_delivery(output, delivery);
            }
        }
        ControlCommand::Poll {
            topic,
            group,
            consumer,
            max: None,
        } => {
            let delivery = match &consumer {
                Some(consumer) => client.poll_as(&topic, &group, consumer).await?,
                None => client.poll(&topic, &group).await?,
            };
            match delivery {
                None => output.emit(json!(null), || "nothing waiting".into()),
                Some(delivery) => print_delivery(output, &delivery),
            }
        }
        ControlCommand::Nack {
            topic,
            group,
            offset,
            attempt,
            kind,
            delay_ms,
            reason,
        } => {
            let options = NackOptions {
                kind,
                delay_ms,
                reason,
            };
            let id = DeliveryId { offset, attempt };
            let outcome = client.nack_with(&topic, &group, id, &options).await?;
            output.emit(json!({ "outcome": outcome }), || format!("{outcome:?}"));
        }
        ControlCommand::Touch {
            topic,
            group,
            offset,
            attempt,
        } => {
            let id = DeliveryId { offset, attempt };
            client.touch(&topic, &group, id).await?;
            output.emit(json!({ "outcome": "touched" }), || "touched".into());
        }
        ControlCommand::Redrive(args) => {
            let count = client
                .redrive(&args.topic, &args.group, args.range())
                .await?;
            output.emit(json!({ "count": count }), || format!("redrove {count}"));
        }
        ControlCommand::Purge(args) => {
            let count = client.purge(&args.topic, &args.group, args.range()).await?;
            output.emit(json!({ "count": count }), || format!("purged {count}"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves both backoff spellings and every nack kind parse, and junk is refused.
    #[test]
    fn flags_parse() {
        assert_eq!(
            parse_backoff("fixed:250"),
            Ok(Backoff::Fixed { delay_ms: 250 })
        );
        assert_eq!(
            parse_backoff("exp:10:1000"),
            Ok(Backoff::Exponential {
                base_ms: 10,
                cap_ms: 1000
            })
        );
        assert!(parse_backoff("exp:10").is_err());
        assert!(parse_backoff("fixed:-1").is_err());
        assert_eq!(parse_kind("release"), Ok(NackKind::Release));
        assert_eq!(parse_kind("reject"), Ok(NackKind::Reject));
        assert!(parse_kind("drop").is_err());
    }

    // Regression: `redrive --from N` sent u64::MAX as the open end, which the server
    // refuses; the open end is now the largest offset the server accepts.
    #[test]
    fn open_ranges_end_at_the_largest_accepted_offset() {
        let range = |from, to| {
            RangeArgs {
                topic: "t".into(),
                group: "g".into(),
                from,
                to,
            }
            .range()
        };
        assert_eq!(range(None, None), None);
        assert_eq!(range(Some(5), None), Some(5..RANGE_OFFSET_MAX));
        assert_eq!(range(None, Some(9)), Some(0..9));
        assert_eq!(RANGE_OFFSET_MAX, 9_223_372_036_854_775_807);
    }
}
