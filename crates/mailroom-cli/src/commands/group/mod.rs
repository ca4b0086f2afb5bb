//! `mailroom group create|info|delete|poll|nack|touch|redrive|purge|seek|pause|resume`,
//! one file per verb;
//! this file holds what the verbs share: the arguments that name a group or a range of
//! its dead letters, and the text that describes a group.

use mailroom_client::{Backoff, DeliveryId, GroupDetail, GroupInfo};

use crate::api::Api;
use crate::dates::rfc3339_ms;
use crate::output::Output;
use crate::units::show_age;

mod create;
mod delete;
mod info;
mod nack;
mod pause;
mod poll;
mod purge;
mod redrive;
mod resume;
mod seek;
mod touch;

// `consume --nack-kind` reads a nack kind the way `group nack --kind` does.
pub use nack::parse_kind;

/// Group subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum GroupCommand {
    /// Create a consumer group on a topic.
    Create(create::Args),
    /// Show a group's position, lag, settings, counters, deliveries in flight and dead
    /// letters with their reasons.
    Info(GroupArgs),
    /// Delete a consumer group (durable; the topic and its messages stay).
    Delete(GroupArgs),
    /// Poll once (as `--consumer`, if given) and print the delivery without acking it;
    /// with `--max N`, up to N deliveries in one batch poll, one result each.
    Poll(poll::Args),
    /// Nack, release or reject one delivery.
    Nack(nack::Args),
    /// Extend the lease of one delivery.
    Touch(DeliveryArgs),
    /// Put dead letters back for delivery to this group only.
    Redrive(RangeArgs),
    /// Delete dead letters.
    Purge(RangeArgs),
    /// Move the group to an offset, `earliest` or `latest`; deliveries in flight stop
    /// being owned, and messages delivered again get new attempt numbers.
    Seek(seek::Args),
    /// Stop the group handing out new deliveries (until `resume`, or for a time);
    /// deliveries in flight can still be acked, nacked and touched.
    Pause(pause::Args),
    /// End the group's pause.
    Resume(GroupArgs),
}

/// Runs a group subcommand.
pub async fn run(api: &impl Api, command: GroupCommand, output: Output) -> anyhow::Result<()> {
    match command {
        GroupCommand::Create(args) => create::run(api, args, output).await,
        GroupCommand::Info(args) => info::run(api, args, output).await,
        GroupCommand::Delete(args) => delete::run(api, args, output).await,
        GroupCommand::Poll(args) => poll::run(api, args, output).await,
        GroupCommand::Nack(args) => nack::run(api, args, output).await,
        GroupCommand::Touch(args) => touch::run(api, args, output).await,
        GroupCommand::Redrive(args) => redrive::run(api, args, output).await,
        GroupCommand::Purge(args) => purge::run(api, args, output).await,
        GroupCommand::Seek(args) => seek::run(api, args, output).await,
        GroupCommand::Pause(args) => pause::run(api, args, output).await,
        GroupCommand::Resume(args) => resume::run(api, args, output).await,
    }
}

/// A topic and one of its groups.
#[derive(Debug, clap::Args)]
pub struct GroupArgs {
    /// The topic.
    #[arg(value_parser = crate::names::topic)]
    pub topic: String,
    /// The group.
    #[arg(value_parser = crate::names::group)]
    pub group: String,
}

/// One delivery of a group: its offset and attempt.
#[derive(Debug, clap::Args)]
pub struct DeliveryArgs {
    #[command(flatten)]
    at: GroupArgs,
    /// The delivery's offset.
    offset: u64,
    /// The delivery's attempt.
    attempt: u32,
}

impl DeliveryArgs {
    fn id(&self) -> DeliveryId {
        DeliveryId {
            offset: self.offset,
            attempt: self.attempt,
        }
    }
}

/// A group and an optional half-open offset range.
#[derive(Debug, clap::Args)]
pub struct RangeArgs {
    #[command(flatten)]
    at: GroupArgs,
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
pub const RANGE_OFFSET_MAX: u64 = mailroom_client::api::limits::OFFSET_MAX;

impl RangeArgs {
    fn range(&self) -> Option<std::ops::Range<u64>> {
        if self.from.is_none() && self.to.is_none() {
            return None;
        }
        Some(self.from.unwrap_or(0)..self.to.unwrap_or(RANGE_OFFSET_MAX))
    }
}

/// One line describing a group.
pub fn describe(group: &GroupInfo) -> String {
    let in_flight = match group.in_flight {
        Some(id) => format!("offset {} attempt {}", id.offset, id.attempt),
        None => "none".to_owned(),
    };
    let line = format!(
        "{}\tposition {}\tlag {}\tin flight: {}\tattempt {}/{}\tdead letters {}",
        group.name,
        group.position,
        group.lag,
        in_flight,
        group.attempt,
        group.max_attempts,
        group.dead_letters
    );
    // Only a paused group says so, so the line of every other group reads as before.
    match (group.paused, group.paused_until_ms) {
        (false, _) => line,
        (true, None) => format!("{line}\tpaused"),
        (true, Some(until_ms)) => format!("{line}\tpaused until {until_ms} ms"),
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
        detail.backoff.map_or("none".into(), describe_backoff),
        counters.redeliveries,
        counters.releases,
        counters.expired_leases,
        counters.redrives,
        counters.purged,
    ));
    for delivery in &detail.deliveries {
        text.push_str(&format!(
            "\nin flight: offset {} attempt {}\tconsumer {}\tlease until {}",
            delivery.offset,
            delivery.attempt,
            delivery.consumer.as_deref().unwrap_or("(anonymous)"),
            delivery
                .lease_deadline_ms
                .map_or("(no lease)".into(), rfc3339_ms),
        ));
    }
    for note in &detail.dead_letter_notes {
        text.push_str(&format!(
            "\ndead letter: offset {} after {} at {}: {}",
            note.offset,
            attempts(note.attempts),
            rfc3339_ms(note.at_ms),
            note.reason.as_deref().unwrap_or("(no reason)")
        ));
    }
    text
}

/// A backoff for people: `fixed 5s`, `exponential 1s doubling to 1m`.
pub fn describe_backoff(backoff: Backoff) -> String {
    match backoff {
        Backoff::Fixed { delay_ms } => format!("fixed {}", show_age(Some(delay_ms))),
        Backoff::Exponential { base_ms, cap_ms } => format!(
            "exponential {} doubling to {}",
            show_age(Some(base_ms)),
            show_age(Some(cap_ms))
        ),
    }
}

/// `1 attempt`, `3 attempts`.
pub fn attempts(count: u32) -> String {
    crate::output::counted(count.into(), "attempt", "attempts")
}

#[cfg(test)]
mod tests {
    use super::*;

    // Regression: `redrive --from N` sent u64::MAX as the open end, which the server
    // refuses; the open end is now the largest offset the server accepts.
    #[test]
    fn open_ranges_end_at_the_largest_accepted_offset() {
        let range = |from, to| {
            RangeArgs {
                at: GroupArgs {
                    topic: "t".into(),
                    group: "g".into(),
                },
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

    // Proves a backoff reads as words and units, not as a Rust value.
    #[test]
    fn backoffs_read_as_words() {
        assert_eq!(
            describe_backoff(Backoff::Fixed { delay_ms: 5_000 }),
            "fixed 5s"
        );
        let exponential = Backoff::Exponential {
            base_ms: 1_000,
            cap_ms: 60_000,
        };
        assert_eq!(
            describe_backoff(exponential),
            "exponential 1s doubling to 1m"
        );
        assert_eq!(attempts(1), "1 attempt");
        assert_eq!(attempts(2), "2 attempts");
    }
}
