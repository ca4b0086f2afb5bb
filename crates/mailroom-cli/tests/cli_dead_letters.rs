//! `mailroom group redrive|purge` with offset ranges against the real server binary.

mod cli_support;
mod common;

use cli_support::{documents, mailroom};
use common::{temp_dir, ServerProcess};
use serde_json::Value;

fn ok(server: &ServerProcess, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    documents(&mailroom(&server.url, None, &all, b""))
}

fn offsets(documents: &[Value]) -> Vec<u64> {
    documents
        .iter()
        .map(|d| d["offset"].as_u64().expect("an offset"))
        .collect()
}

// Regression: `redrive --from N` without `--to` sent u64::MAX as the open end and the
// server refused it. Proves a range open at either end acts on exactly the dead letters
// inside it: `purge --to 1` takes offset 0, `redrive --from 2` puts back 2 and 3 (and
// they are delivered again), and offset 1 stays a dead letter.
#[test]
fn ranges_open_at_either_end() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "never"]);
    ok(&server, &["topic", "create", "jobs"]);
    ok(
        &server,
        &["group", "create", "jobs", "g", "--max-attempts", "1"],
    );
    for n in 0..4 {
        ok(&server, &["publish", "jobs", &format!("m{n}")]);
    }
    let failing = ["consume", "jobs", "g", "--exec", "false", "--nack"];
    assert_eq!(offsets(&ok(&server, &failing)), [0, 1, 2, 3]);
    assert_eq!(
        offsets(&ok(&server, &["dead-letters", "jobs", "g"])),
        [0, 1, 2, 3]
    );

    let purged = ok(&server, &["group", "purge", "jobs", "g", "--to", "1"]);
    assert_eq!(purged[0]["count"], 1);
    let redriven = ok(&server, &["group", "redrive", "jobs", "g", "--from", "2"]);
    assert_eq!(redriven[0]["count"], 2);
    assert_eq!(offsets(&ok(&server, &["dead-letters", "jobs", "g"])), [1]);
    assert_eq!(offsets(&ok(&server, &["consume", "jobs", "g"])), [2, 3]);
}
