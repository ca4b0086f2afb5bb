//! `mailroom publish TOPIC [MESSAGE]`: one message, or one per line of stdin or a file,
//! sent in batches with a progress bar on stderr (shown only on a terminal). `--key` and
//! `--header NAME=VALUE` (repeatable) give every message published a key and headers.
//! `--idempotency-key K` (with a message argument only: the lines of a file would all
//! share it) makes the publish safe to retry: a repeat inside the topic's window stores
//! nothing and answers the first publish's offset, and the output says it was a
//! duplicate (`"duplicate": true`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Context as _;
use bytes::Bytes;
use indicatif::{ProgressBar, ProgressStyle};
use mailroom_client::{ClientError, NewMessage};
use serde_json::json;
use tokio::io::{AsyncBufRead, AsyncBufReadExt as _, BufReader};

use crate::api::Api;
use crate::output::Output;

/// Lines sent per batch request.
pub const BATCH_LINES_MAX: usize = 1_000;
/// Bytes of lines sent per batch request (well under the server's batch body limit).
pub const BATCH_BYTES_MAX: usize = 256 << 10;

/// Flags of `publish`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The topic.
    #[arg(value_parser = crate::names::topic)]
    topic: String,
    /// The message. Without it, each line of --file (or stdin) is one message.
    message: Option<String>,
    /// Read messages from this file, one per line.
    #[arg(long, conflicts_with = "message")]
    file: Option<PathBuf>,
    /// The key of every message published.
    #[arg(long)]
    key: Option<String>,
    /// A header of every message published, as NAME=VALUE; repeat for more.
    #[arg(long = "header", value_name = "NAME=VALUE", value_parser = header)]
    headers: Vec<(String, String)>,
    /// The message's idempotency key: a retry with the same key inside the topic's
    /// window is answered as a duplicate and not stored again.
    #[arg(long, value_name = "KEY", requires = "message")]
    idempotency_key: Option<String>,
}

/// Reads `NAME=VALUE` (the value may hold `=`; the name may not be empty).
fn header(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.to_owned(), value.to_owned())),
        _ => Err(format!("expected NAME=VALUE, got {text:?}")),
    }
}

/// The key and headers every message of one `publish` gets.
#[derive(Debug, Clone, Default)]
struct Labels {
    key: Option<String>,
    headers: BTreeMap<String, String>,
}

impl Labels {
    fn of(args: &Args) -> Labels {
        Labels {
            key: args.key.clone(),
            headers: args.headers.iter().cloned().collect(),
        }
    }

    fn is_empty(&self) -> bool {
        self.key.is_none() && self.headers.is_empty()
    }

    /// Publishes `payloads`, with these labels if there are any.
    async fn publish(
        &self,
        api: &impl Api,
        topic: &str,
        payloads: &[Bytes],
    ) -> Result<Vec<u64>, ClientError> {
        if self.is_empty() {
            return api.publish_batch(topic, payloads).await;
        }
        let messages: Vec<NewMessage> = payloads
            .iter()
            .map(|payload| NewMessage {
                payload: payload.clone(),
                key: self.key.clone(),
                headers: self.headers.clone(),
                idempotency_key: None,
            })
            .collect();
        api.publish_messages(topic, &messages).await
    }
}

/// Runs `publish`.
pub async fn run(api: &impl Api, args: Args, output: Output) -> anyhow::Result<()> {
    let labels = Labels::of(&args);
    if let (Some(message), Some(key)) = (&args.message, &args.idempotency_key) {
        return publish_once(api, &args.topic, &labels, message, key, output).await;
    }
    if let Some(message) = args.message {
        let offset = match labels.is_empty() {
            true => api.publish(&args.topic, Bytes::from(message)).await?,
            false => {
                labels
                    .publish(api, &args.topic, &[Bytes::from(message)])
                    .await?[0]
            }
        };
        output.emit(json!({ "topic": args.topic, "offset": offset }), || {
            format!("published to {} at offset {offset}", args.topic)
        });
        return Ok(());
    }
    let (count, first, last) = match &args.file {
        Some(path) => {
            let file = tokio::fs::File::open(path)
                .await
                .with_context(|| format!("opening {}", path.display()))?;
            publish_lines(api, &args.topic, &labels, BufReader::new(file))
                .await
                .with_context(|| format!("publishing the lines of {}", path.display()))?
        }
        None => publish_lines(
            api,
            &args.topic,
            &labels,
            BufReader::new(tokio::io::stdin()),
        )
        .await
        .context("publishing the lines of stdin")?,
    };
    output.emit(
        json!({ "topic": args.topic, "published": count, "first_offset": first, "last_offset": last }),
        || match (first, last) {
            (Some(first), Some(last)) => {
                let messages = if count == 1 { "message" } else { "messages" };
                format!(
                    "published {count} {messages} to {} at offsets {first}..={last}",
                    args.topic
                )
            }
            _ => "no lines to publish".to_owned(),
        },
    );
    Ok(())
}

/// Publishes `message` with idempotency key `key` (and the labels), saying whether the
/// server took it as a duplicate of an earlier publish.
async fn publish_once(
    api: &impl Api,
    topic: &str,
    labels: &Labels,
    message: &str,
    key: &str,
    output: Output,
) -> anyhow::Result<()> {
    let message = NewMessage {
        payload: Bytes::from(message.to_owned()),
        key: labels.key.clone(),
        headers: labels.headers.clone(),
        idempotency_key: Some(key.to_owned()),
    };
    let published = api.publish_once(topic, &[message]).await?;
    let offset = *published
        .offsets
        .first()
        .context("the server answered no offset for the message")?;
    let duplicate = published.duplicates.contains(&0);
    output.emit(
        json!({ "topic": topic, "offset": offset, "duplicate": duplicate }),
        || match duplicate {
            false => format!("published to {topic} at offset {offset}"),
            true => format!(
                "duplicate: idempotency key {key:?} was published to {topic} at offset \
                 {offset} already; nothing was stored"
            ),
        },
    );
    Ok(())
}

/// Publishes every line in batches; returns the count and the first and last offsets.
async fn publish_lines(
    api: &impl Api,
    topic: &str,
    labels: &Labels,
    reader: impl AsyncBufRead + Unpin,
) -> anyhow::Result<(u64, Option<u64>, Option<u64>)> {
    let progress = ProgressBar::new_spinner();
    progress.set_style(
        ProgressStyle::with_template("{spinner} {pos} messages published ({per_sec})")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    let mut lines = reader.lines();
    let mut batch: Vec<Bytes> = Vec::new();
    let mut batch_bytes = 0;
    let (mut count, mut first, mut last) = (0u64, None, None);
    let mut line_number = 0u64;
    loop {
        line_number += 1;
        let line = lines
            .next_line()
            .await
            .with_context(|| format!("reading line {line_number}"))?;
        let end = line.is_none();
        if let Some(line) = line {
            batch_bytes += line.len();
            batch.push(Bytes::from(line));
        }
        let full = batch.len() >= BATCH_LINES_MAX || batch_bytes >= BATCH_BYTES_MAX;
        if !batch.is_empty() && (full || end) {
            let offsets = labels.publish(api, topic, &batch).await?;
            first = first.or(offsets.first().copied());
            last = offsets.last().copied().or(last);
            count += offsets.len() as u64;
            progress.inc(offsets.len() as u64);
            batch.clear();
            batch_bytes = 0;
        }
        if end {
            break;
        }
    }
    progress.finish_and_clear();
    Ok((count, first, last))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::Fake;

    // Proves a message argument is one publish, and a file's lines go out in batches
    // (every line once, an empty last line included as the reader yields it).
    #[tokio::test]
    async fn an_argument_is_one_publish_and_a_file_is_batches() {
        let fake = Fake::default();
        let one = Args {
            topic: "t".into(),
            message: Some("hello".into()),
            file: None,
            key: None,
            headers: Vec::new(),
            idempotency_key: None,
        };
        run(&fake, one, Output { json: true }).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lines");
        let lines: Vec<String> = (0..BATCH_LINES_MAX + 5).map(|n| format!("m{n}")).collect();
        std::fs::write(&path, lines.join("\n")).unwrap();
        let file = Args {
            topic: "t".into(),
            message: None,
            file: Some(path),
            key: None,
            headers: Vec::new(),
            idempotency_key: None,
        };
        run(&fake, file, Output { json: true }).await.unwrap();
        assert_eq!(
            fake.calls(),
            [
                "publish t hello".to_owned(),
                format!("publish_batch t {BATCH_LINES_MAX}"),
                "publish_batch t 5".to_owned(),
            ]
        );
    }

    // Proves --key and --header give the message (and every line of a file) its key and
    // headers, and a header without `=` is refused.
    #[tokio::test]
    async fn key_and_headers_go_with_every_message() {
        let fake = Fake::default();
        let one = Args {
            topic: "t".into(),
            message: Some("hello".into()),
            file: None,
            key: Some("k".into()),
            headers: vec![header("a=1").unwrap(), header("b=x=y").unwrap()],
            idempotency_key: None,
        };
        run(&fake, one, Output { json: true }).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lines");
        std::fs::write(&path, "l1\nl2").unwrap();
        let file = Args {
            topic: "t".into(),
            message: None,
            file: Some(path),
            key: Some("k2".into()),
            headers: Vec::new(),
            idempotency_key: None,
        };
        run(&fake, file, Output { json: true }).await.unwrap();
        assert_eq!(
            fake.calls(),
            [
                "publish_message t hello key=k headers=a=1,b=x=y",
                "publish_message t l1 key=k2 headers=",
                "publish_message t l2 key=k2 headers=",
            ]
        );
        assert!(header("novalue").is_err() && header("=v").is_err());
    }

    // Proves --idempotency-key sends the key with the one message, and a repeat's
    // answer is reported as a duplicate at the first offset.
    #[tokio::test]
    async fn an_idempotency_key_goes_with_the_message() {
        let fake = Fake::default();
        let once = || Args {
            topic: "t".into(),
            message: Some("pay".into()),
            file: None,
            key: None,
            headers: Vec::new(),
            idempotency_key: Some("i-1".into()),
        };
        run(&fake, once(), Output { json: true }).await.unwrap();
        run(&fake, once(), Output { json: false }).await.unwrap();
        assert_eq!(
            fake.calls(),
            ["publish_once t pay key=i-1", "publish_once t pay key=i-1"]
        );
    }
}
