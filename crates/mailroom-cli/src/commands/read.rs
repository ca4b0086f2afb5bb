//! `mailroom read TOPIC [--from N | --from-time WHEN] [--limit N]`: print messages of a
//! topic's log without a group (no group moves).
//!
//! Without `--limit` every message from the start on is printed, page by page, up to
//! the log's end as it was when the last page was read. With `--limit N` at most N are
//! printed and, when more follow, where to go on (`next: --from M`, or `{"next": M}`
//! with `--json`). A start below the retained log begins at its oldest message and says
//! so (`start: N`, `{"first": N}`).

use mailroom_client::{LogMessage, ReadFrom, READ_PAGE_MAX};
use serde_json::json;

use crate::api::Api;
use crate::dates::{parse_instant_ms, rfc3339_ms};
use crate::metadata;
use crate::output::{merged, payload_fields, payload_text, Output};

/// A topic and where to start reading it.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The topic.
    pub topic: String,
    /// The first offset to read (default: the oldest retained message).
    #[arg(long, conflicts_with = "from_time")]
    pub from: Option<u64>,
    /// Start at the first message published at or after WHEN: Unix milliseconds or a
    /// UTC time such as 2025-12-01T12:14:41Z.
    #[arg(long, value_name = "WHEN", value_parser = parse_instant_ms)]
    pub from_time: Option<u64>,
    /// Print at most this many messages (1 to 10,000), then where the next ones start.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=READ_PAGE_MAX as u64))]
    pub limit: Option<u64>,
}

/// Reads and prints, a page at a time.
pub async fn run(api: &impl Api, args: Args, output: Output) -> anyhow::Result<()> {
    let mut from = match (args.from, args.from_time) {
        (Some(offset), _) => ReadFrom::Offset(offset),
        (None, Some(time_ms)) => ReadFrom::Time(time_ms),
        (None, None) => ReadFrom::Earliest,
    };
    let mut left = args.limit.map(|limit| limit as usize);
    loop {
        let limit = left.unwrap_or(READ_PAGE_MAX).min(READ_PAGE_MAX);
        let page = api.read(&args.topic, from, limit, 0).await?;
        if let ReadFrom::Offset(asked) = from {
            if page.first > asked {
                note_start(output, page.first);
            }
        }
        for message in &page.messages {
            print_message(output, message);
        }
        from = ReadFrom::Offset(page.next);
        if page.next >= page.end {
            return Ok(());
        }
        if let Some(left) = left.as_mut() {
            *left -= page.messages.len().min(*left);
            if *left == 0 {
                let next = page.next;
                output.emit(json!({ "next": next }), || format!("next: --from {next}"));
                return Ok(());
            }
        }
    }
}

/// Says that the messages below `first` were removed by retention.
pub fn note_start(output: Output, first: u64) {
    output.emit(json!({ "first": first }), || {
        format!("start: {first} (the messages before it were removed by retention)")
    });
}

/// One message: its offset, publish time, payload and metadata.
pub fn print_message(output: Output, message: &LogMessage) {
    let mut value = merged(
        json!({
            "offset": message.offset,
            "published_at_ms": message.published_at_ms,
        }),
        payload_fields(&message.payload),
    );
    if let Some(key) = &message.key {
        value["key"] = json!(key);
    }
    if !message.headers.is_empty() {
        value["headers"] = json!(message.headers);
    }
    output.emit(value, || {
        format!(
            "offset {} at {}: {}{}",
            message.offset,
            rfc3339_ms(message.published_at_ms),
            payload_text(&message.payload),
            metadata::text(message.key.as_deref(), &message.headers)
        )
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::Fake;

    fn args(from: Option<u64>, from_time: Option<u64>, limit: Option<u64>) -> Args {
        Args {
            topic: "t".into(),
            from,
            from_time,
            limit,
        }
    }

    // Proves the start is sent as asked (offset, time, or the oldest), a --limit asks
    // for no more than it prints, and reading stops at the end of the log.
    #[tokio::test]
    async fn read_asks_for_the_start_and_the_limit() {
        let fake = Fake::default();
        run(&fake, args(None, None, None), Output { json: true })
            .await
            .unwrap();
        run(&fake, args(Some(2), None, Some(3)), Output { json: true })
            .await
            .unwrap();
        run(&fake, args(None, Some(1004), None), Output { json: true })
            .await
            .unwrap();
        assert_eq!(
            fake.calls(),
            [
                "read t Earliest 10000 0",
                "read t Offset(2) 3 0",
                "read t Time(1004) 10000 0",
            ]
        );
    }
}
