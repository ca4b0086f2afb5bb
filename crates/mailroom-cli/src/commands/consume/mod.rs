//! `mailroom consume TOPIC GROUP`: poll, print, and ack each message. With `--exec`, the
//! message goes to a shell command's stdin instead: exit 0 acks it; a failure nacks it
//! with `--nack` (or releases or rejects it, per `--nack-kind`), and otherwise stops,
//! leaving the delivery in flight for a later poll.
//!
//! Messages come in rounds of one, or of up to N with `--batch N`: each round is one
//! `poll/batch` that also acks the previous round's handled messages and nacks its failed
//! ones, so a round is one request (and one store transaction). The last round, when
//! `--count` ends the run, is settled with `ack/batch` and `nack/batch`.
//!
//! Under `--follow`, a poll with nothing to settle is a long poll (the server holds it
//! until a message comes), so an idle consumer never polls every so often.
//!
//! With `--stream` one WebSocket carries the deliveries, up to `--window` unsettled, and
//! their settlements (`GET .../consume/ws`).

mod batch_loop;
mod handler;
#[cfg(test)]
mod scripted_server;
mod stream_loop;

use mailroom_client::{Delivery, NackKind, NackOptions, NackOutcome};
use serde_json::json;

use crate::api::Api;
use crate::commands::group::parse_kind;
use crate::metadata;
use crate::output::{merged, payload_fields, payload_text, Output};

pub use batch_loop::consume_batches;
pub use stream_loop::consume_stream;

/// How long `--follow` lets the server hold a poll for the next message (with or
/// without `--batch`).
pub const FOLLOW_LONG_POLL_MS: u64 = 10_000;
/// The largest `--batch`: the server's limit on one batch.
pub const BATCH_MAX: u32 = 65_536;

/// Flags of `consume`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The topic.
    #[arg(value_parser = crate::names::topic)]
    pub topic: String,
    /// The consumer group.
    #[arg(value_parser = crate::names::group)]
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
    /// Poll up to N messages per request (1 to 65,536; default 1); each poll acks and
    /// nacks the round before it.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(BATCH_MAX)))]
    pub batch: Option<u32>,
    /// Consume over one WebSocket: the server pushes deliveries as they come and the
    /// settlements go back on the same socket. Without --follow, ends once 250 ms pass
    /// with nothing new.
    #[arg(long, conflicts_with = "batch")]
    pub stream: bool,
    /// With --stream: the most deliveries held unsettled at once (1 to 4,096, at most
    /// the group's max_in_flight; default 1).
    #[arg(long, requires = "stream", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub window: Option<u32>,
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
    let batch = args.batch.unwrap_or(1);
    consume_batches(api, &args, output, batch).await.map(|_| ())
}

/// What a nack did, for people.
pub fn nack_text(outcome: NackOutcome) -> &'static str {
    match outcome {
        NackOutcome::Retry => "nacked (will retry)",
        NackOutcome::Released => "released",
        NackOutcome::DeadLettered => "nacked (dead-lettered)",
    }
}

fn print_delivery(output: Output, delivery: &Delivery, outcome: &str) {
    let value = merged(
        json!({ "offset": delivery.offset, "attempt": delivery.attempt, "outcome": outcome }),
        payload_fields(&delivery.payload),
    );
    let value = merged(value, metadata::fields(delivery));
    output.emit(value, || {
        format!(
            "[{} #{}] {}{}\t{outcome}",
            delivery.offset,
            delivery.attempt,
            payload_text(&delivery.payload),
            metadata::text(delivery.key.as_deref(), &delivery.headers)
        )
    });
}

#[cfg(test)]
mod tests {
    use super::scripted_server::{args, id, scripted};
    use super::*;

    // Proves --nack-kind picks how a failed message is given back, one at a time and in
    // batches.
    #[tokio::test]
    async fn nack_kind_is_sent() {
        let output = Output { json: true };
        let mut release = args(Some("false"), true, None);
        release.nack_kind = Some(NackKind::Release);
        let api = scripted(&["x"]);
        consume_batches(&api, &release, output, 1).await.unwrap();
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
}
