//! `mailroom repair --data DIR --topic T`: repairs a damaged topic in a store that no
//! server has open (the store's lock says so), with no server needed. A running server
//! repairs the same way through `mailroom topic repair T`.

use std::path::PathBuf;

use anyhow::Context as _;
use mailroom_store::log::{LogOptions, RECORD_BYTES_LIMIT};
use mailroom_store::{Store, StoreError, StoreOptions};
use serde_json::json;

use crate::output::Output;

/// Repair a damaged topic offline (no server may have the data directory open).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The store's data directory (the server's --data).
    #[arg(long)]
    data: PathBuf,
    /// The damaged topic.
    #[arg(long, value_parser = crate::names::topic)]
    topic: String,
}

/// Opens the store (taking its lock), repairs the topic and prints what was done.
///
/// # Errors
/// A directory that is not a store, a store a server has open, a topic that is unknown
/// or that still does not open.
pub fn run(args: Args, output: Output) -> anyhow::Result<()> {
    let Args { data, topic } = args;
    // Opening creates a store in an empty directory: refuse a path that is not one.
    anyhow::ensure!(
        data.join("STORE").is_file(),
        "{} is not a mailroom store (it has no STORE marker)",
        data.display()
    );
    let options = StoreOptions {
        log: LogOptions {
            // Records written under any --max-payload-bytes read back.
            record_bytes_max: RECORD_BYTES_LIMIT,
            ..LogOptions::default()
        },
        ..StoreOptions::default()
    };
    let store = match Store::open(&data, options) {
        Err(StoreError::Locked { path }) => anyhow::bail!(
            "{} is locked: a server has the store open; stop it first, or repair through \
             it with `mailroom topic repair {topic}`",
            path.display()
        ),
        opened => opened.with_context(|| format!("opening the store in {}", data.display()))?,
    };
    let repaired = store.repair_topic(&topic)?;
    let (damage, actions) = repaired
        .map(|repaired| (repaired.damage, repaired.actions))
        .unwrap_or_default();
    let was_damaged = !actions.is_empty();
    let body = json!({
        "topic": topic, "repaired": was_damaged, "damage": damage, "actions": actions
    });
    output.emit(body, || {
        if was_damaged {
            format!("repaired topic {topic}:\n  {}", actions.join("\n  "))
        } else {
            format!("topic {topic} is not damaged: nothing to repair")
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves repair refuses a directory that is not a store rather than make one there.
    #[test]
    fn refuses_a_directory_that_is_not_a_store() {
        let dir = tempfile::tempdir().unwrap();
        let args = Args {
            data: dir.path().to_path_buf(),
            topic: "t".into(),
        };
        let error = run(args, Output { json: true }).unwrap_err();
        assert!(
            error.to_string().contains("not a mailroom store"),
            "{error}"
        );
        assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
    }

    // Proves repair refuses a store that another opener (a server) holds locked.
    #[test]
    fn refuses_a_store_a_server_has_open() {
        let dir = tempfile::tempdir().unwrap();
        let _server = Store::open(dir.path(), StoreOptions::default()).unwrap();
        let args = Args {
            data: dir.path().to_path_buf(),
            topic: "t".into(),
        };
        let error = run(args, Output { json: true }).unwrap_err();
        assert!(error.to_string().contains("stop it first"), "{error}");
    }
}
