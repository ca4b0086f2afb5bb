//! `mailroom dead-letters TOPIC GROUP [--from N] [--limit N] [--all]`.
//!
//! Without `--limit` every dead letter from `--from` on is listed, page by page. With
//! `--limit N` one page of at most N is listed and, when more follow, where the next
//! page starts (`next: --from M`, or `{"next": M}` with `--json`); `--all` walks every
//! page at that size instead.

use mailroom_client::{DeadLetter, DEAD_LETTERS_PAGE_MAX};
use serde_json::json;

use crate::api::Api;
use crate::commands::group::{attempts, GroupArgs};
use crate::dates::rfc3339_ms;
use crate::output::{merged, payload_fields, payload_text, Output};

/// Flags of `dead-letters`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub at: GroupArgs,
    /// The first offset to list: the `next` of the previous page.
    #[arg(long, default_value_t = 0)]
    pub from: u64,
    /// List one page of at most this many (1 to 10,000) and say where the next starts.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=DEAD_LETTERS_PAGE_MAX as u64))]
    pub limit: Option<u64>,
    /// Follow every page to the end (the default without --limit).
    #[arg(long)]
    pub all: bool,
}

/// Prints one line per dead letter, by ascending offset.
pub async fn run(api: &impl Api, args: Args, output: Output) -> anyhow::Result<()> {
    let GroupArgs { topic, group } = &args.at;
    let all = args.all || args.limit.is_none();
    let limit = args
        .limit
        .map_or(DEAD_LETTERS_PAGE_MAX, |limit| limit as usize);
    let mut from = Some(args.from);
    while let Some(start) = from {
        let page = api.dead_letters_page(topic, group, start, limit).await?;
        for letter in &page.dead_letters {
            print_letter(output, letter);
        }
        from = page.next;
        if !all {
            if let Some(next) = from {
                output.emit(json!({ "next": next }), || format!("next: --from {next}"));
            }
            break;
        }
    }
    Ok(())
}

fn print_letter(output: Output, letter: &DeadLetter) {
    let value = merged(
        json!({
            "offset": letter.offset,
            "attempts": letter.attempts,
            "reason": letter.reason,
            "at_ms": letter.at_ms,
        }),
        payload_fields(&letter.payload),
    );
    output.emit(value, || {
        format!(
            "offset {} after {} at {} ({}): {}",
            letter.offset,
            attempts(letter.attempts),
            rfc3339_ms(letter.at_ms),
            letter.reason.as_deref().unwrap_or("no reason"),
            payload_text(&letter.payload)
        )
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::Fake;

    fn args(from: u64, limit: Option<u64>, all: bool) -> Args {
        Args {
            at: GroupArgs {
                topic: "t".into(),
                group: "g".into(),
            },
            from,
            limit,
            all,
        }
    }

    // Proves the paging: without --limit every page is read at the server's largest
    // size; --limit reads one page from --from; --all with --limit follows `next`.
    #[tokio::test]
    async fn pages_are_read_as_asked() {
        let output = Output { json: true };
        let fake = Fake::default();
        run(&fake, args(0, None, false), output).await.unwrap();
        assert_eq!(fake.calls(), ["dead_letters_page t g 0 10000"]);

        let fake = Fake::default();
        run(&fake, args(1, Some(2), false), output).await.unwrap();
        assert_eq!(fake.calls(), ["dead_letters_page t g 1 2"]);

        let fake = Fake::default();
        run(&fake, args(0, Some(2), true), output).await.unwrap();
        assert_eq!(
            fake.calls(),
            [
                "dead_letters_page t g 0 2",
                "dead_letters_page t g 2 2",
                "dead_letters_page t g 4 2"
            ]
        );
    }
}
