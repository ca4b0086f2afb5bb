//! `mailroom tail TOPIC [-n N] [--follow]`: print the last N messages of a topic's log
//! (no group moves); with `--follow`, keep waiting at the end (long polls) and print
//! each new message as it is published, until interrupted.

use mailroom_client::{ReadFrom, READ_PAGE_MAX};

use crate::api::Api;
use crate::commands::read::{note_start, print_message};
use crate::output::Output;

/// How long each wait at the end of the log lasts with `--follow`: the server's longest.
const FOLLOW_WAIT_MS: u64 = mailroom_client::api::limits::LONG_POLL_WAIT_MS_MAX;

/// A topic and how much of its end to print.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The topic.
    pub topic: String,
    /// How many of the last messages to print first (0 to 10,000).
    #[arg(short = 'n', long, default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(0..=READ_PAGE_MAX as u64))]
    pub lines: u64,
    /// Keep printing new messages as they are published, until interrupted.
    #[arg(long, short = 'f')]
    pub follow: bool,
}

/// Prints the tail, then follows it if asked.
pub async fn run(api: &impl Api, args: Args, output: Output) -> anyhow::Result<()> {
    let info = api.topic_info(&args.topic).await?;
    let mut next = info.end.saturating_sub(args.lines).max(info.start);
    while next < info.end {
        let limit = ((info.end - next) as usize).min(READ_PAGE_MAX);
        let page = api
            .read(&args.topic, ReadFrom::Offset(next), limit, 0)
            .await?;
        if page.first > next {
            note_start(output, page.first);
        }
        for message in page.messages.iter().filter(|m| m.offset < info.end) {
            print_message(output, message);
        }
        next = page.next;
        if page.messages.is_empty() {
            break;
        }
    }
    if args.follow {
        follow(api, &args.topic, next.min(info.end), output).await?;
    }
    Ok(())
}

/// Long-polls at the end of the log from `next` and prints each new message, until the
/// process is stopped or a read fails.
async fn follow(api: &impl Api, topic: &str, mut next: u64, output: Output) -> anyhow::Result<()> {
    loop {
        let from = ReadFrom::Offset(next);
        let page = api.read(topic, from, READ_PAGE_MAX, FOLLOW_WAIT_MS).await?;
        if page.first > next {
            note_start(output, page.first);
        }
        for message in &page.messages {
            print_message(output, message);
        }
        next = page.next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::Fake;

    // Proves tail reads only the last N messages of the log (the fake's is 0..6), and
    // nothing at all for -n 0 without --follow.
    #[tokio::test]
    async fn tail_reads_the_end_of_the_log() {
        let fake = Fake::default();
        let args = Args {
            topic: "t".into(),
            lines: 2,
            follow: false,
        };
        run(&fake, args, Output { json: true }).await.unwrap();
        let none = Args {
            topic: "t".into(),
            lines: 0,
            follow: false,
        };
        run(&fake, none, Output { json: true }).await.unwrap();
        let calls = fake.calls();
        assert!(
            calls.contains(&"read t Offset(4) 2 0".to_owned()),
            "{calls:?}"
        );
        assert_eq!(
            calls.iter().filter(|c| c.starts_with("read")).count(),
            1,
            "{calls:?}"
        );
    }
}
