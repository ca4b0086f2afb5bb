//! `mailroom topic retention`: show or change a topic's retention, in human units.
//!
//! Each flag takes a value or `none` (unlimited); a flag left out leaves that limit as
//! it is. Without flags it shows the retention in force and what it removed.

use mailroom_client::{RetentionSettings, TopicInfo};

use crate::api::Api;
use crate::output::{counted, Output};
use crate::units::{self, Limit};

/// The retention flags shared by `topic create` and `topic retention`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RetentionFlags {
    /// Delete messages older than this: 250ms, 90s, 15m, 12h, 7d, 2w, or none.
    #[arg(long = "retention-max-age", value_parser = units::age_ms)]
    max_age: Option<Limit>,
    /// Keep at most this much: 64KiB, 1GiB, 10MB, or none.
    #[arg(long = "retention-max-bytes", value_parser = units::bytes)]
    max_bytes: Option<Limit>,
    /// Keep at most this many messages, or none.
    #[arg(long = "retention-max-messages", value_parser = units::count)]
    max_messages: Option<Limit>,
    /// Whether messages a group has not finished are kept whatever the limits say.
    #[arg(long = "retention-keep-unconsumed")]
    keep_unconsumed: Option<bool>,
}

impl RetentionFlags {
    /// The wire's settings: absent flags absent, `none` null.
    pub fn settings(&self) -> RetentionSettings {
        RetentionSettings {
            max_age_ms: self.max_age,
            max_bytes: self.max_bytes,
            max_messages: self.max_messages,
            keep_unconsumed: self.keep_unconsumed,
        }
    }

    /// Whether any flag was given.
    pub fn any(&self) -> bool {
        self.settings() != RetentionSettings::default()
    }
}

/// Flags of `topic retention`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The topic.
    #[arg(value_parser = crate::names::topic)]
    topic: String,
    #[command(flatten)]
    retention: RetentionFlags,
}

/// Changes the limits given (if any), then prints the retention in force.
pub async fn run(api: &impl Api, args: Args, output: Output) -> anyhow::Result<()> {
    let info = if args.retention.any() {
        api.change_retention(&args.topic, &args.retention.settings())
            .await?
    } else {
        api.topic_info(&args.topic).await?
    };
    output.emit(serde_json::to_value(&info)?, || describe(&info));
    Ok(())
}

/// One topic's retention and what it removed, for people.
pub fn describe(info: &TopicInfo) -> String {
    let retention = &info.retention;
    let count = retention
        .max_messages
        .map_or_else(|| "unlimited".to_owned(), |count| count.to_string());
    let keep = if retention.keep_unconsumed {
        "kept"
    } else {
        "may be removed"
    };
    let removed = &info.removed;
    format!(
        "{}: max age {}, max size {}, max messages {count}; unconsumed messages {keep}\n  \
         holds offsets {}..{} in {}; removed {} ({}) in {} since the server started",
        info.name,
        units::show_age(retention.max_age_ms),
        units::show_bytes(retention.max_bytes),
        info.start,
        info.end,
        units::show_bytes(Some(info.bytes)),
        counted(removed.messages, "message", "messages"),
        units::show_bytes(Some(removed.bytes)),
        counted(removed.segments, "segment", "segments"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::Fake;

    // Proves the flags become a change of exactly the limits given (none = null), and no
    // flags only reads.
    #[tokio::test]
    async fn retention_changes_only_what_is_given() {
        let fake = Fake::default();
        let retention = RetentionFlags {
            max_age: Some(None),
            max_bytes: Some(Some(1 << 30)),
            ..RetentionFlags::default()
        };
        let args = Args {
            topic: "t".into(),
            retention,
        };
        run(&fake, args, Output { json: false }).await.unwrap();
        let args = Args {
            topic: "t".into(),
            retention: RetentionFlags::default(),
        };
        run(&fake, args, Output { json: true }).await.unwrap();
        let expected = RetentionSettings {
            max_age_ms: Some(None),
            max_bytes: Some(Some(1 << 30)),
            ..RetentionSettings::default()
        };
        assert_eq!(
            fake.calls(),
            [
                format!("change_retention t {expected:?}"),
                "topic_info t".to_owned()
            ]
        );
        assert!(describe(&Fake::info("t")).contains("max age unlimited"));
    }
}
